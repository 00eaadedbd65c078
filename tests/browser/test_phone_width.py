"""Every page fits a phone: Debian's chromium at 360 × 740 signs in, writes
realistic content (a code line, a Markdown table and a URL wider than any phone; an external
from a folder source with a long path) and opens every page a user can reach. On each one the
page itself must not scroll sideways (`document.documentElement.scrollWidth <= 360`: wide
things scroll inside their own box) and every link of the top bar, Admin, API and Log out
included, must be on screen. The main pages are then opened at 1280 px, which must not have
changed: the same checks, with the top bar on one line.

`LODE_PHONE_SHOTS=/some/folder` writes a full-page screenshot of each page at both widths
there, for a person to look at (off by default).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from notes import services
from tests.conftest import PASSWORD
from tests.factories import make_source, make_source_external

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}
PERMALINK = re.compile(r"/ask/\d+$")
NAV_LINKS = ("Search", "Ask", "Notes", "New note", "Sources", "Admin", "API")

LONG_COMMAND = (
    'psql -h db-replica-01.internal.example.com -U postgres -c "SELECT now() - '
    "pg_last_xact_replay_timestamp() AS replication_lag, pg_is_in_recovery(), "
    "current_setting('max_standby_streaming_delay');\""
)
DASHBOARD = (
    "https://grafana.internal.example.com/d/postgres-replication-overview/"
    "postgres-replication-lag-and-failover-status?orgId=1&refresh=30s"
    "&var-cluster=production-eu-west-1&var-instance=db-replica-01.internal.example.com"
)
TABLE = "\n".join(
    [
        "| Host | Role | Region | Port | Replication slot | Last failover | Owner "
        "| Pager rotation |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        "| db-primary-01.internal.example.com | primary | eu-west-1 | 5432 "
        "| failover_slot_primary_01 | 2024-03-05T02:14:00Z | platform-team "
        "| platform-oncall-primary |",
        "| db-replica-01.internal.example.com | replica | eu-west-1 | 5432 "
        "| failover_slot_replica_01 | never | platform-team | platform-oncall-secondary |",
    ]
)
BODY = f"""# Failover runbook

Promote the replica when the primary stops answering for more than thirty seconds. Check
the replication lag on the replica first:

```
{LONG_COMMAND}
```

{TABLE}

Dashboard: {DASHBOARD}

Then run `pg_ctl promote -D /var/lib/postgresql/16/main/clusters/production-eu-west-1-primary`
on the replica and point the failover DNS record at it. #ops
"""
EXTERNAL_BODY = (
    "Failover procedure for the production cluster.\n\n"
    f"Before promoting a replica, open {DASHBOARD} and confirm the lag is under one second.\n\n"
    "Keep the old primary fenced: "
    "fence_aws --action=off --plug=i-0123456789abcdef0123456789abcdef0 --region=eu-west-1\n"
)


def width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def assert_nav_reachable(page, viewport_width: int) -> None:
    """Every top-bar link and the Log out button can be seen, on screen, with no menu to
    open (on a phone the links wrap onto lines of their own)."""
    topbar = page.locator("header.topbar")
    controls = [topbar.get_by_role("link", name=name, exact=True) for name in NAV_LINKS]
    controls.append(topbar.get_by_role("button", name="Log out"))
    for control in controls:
        expect(control).to_be_visible()
        box = control.bounding_box()
        assert box is not None
        assert box["x"] >= 0 and box["x"] + box["width"] <= viewport_width, box


def shoot(page, name: str) -> None:
    folder = os.environ.get("LODE_PHONE_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def test_every_page_fits_a_phone(open_session, alice):
    alice.is_staff = True  # so the top bar has its longest form, with Admin
    alice.save()
    note = services.note_create(
        owner=alice,
        title="Failover runbook for the production PostgreSQL cluster in eu-west-1",
        body=BODY.replace("thirty seconds", "a minute"),
        tags="infra postgres",
    )
    first_version = note.head_id
    services.note_update(
        document=note, user=alice, base_version_id=first_version, title=note.title, body=BODY
    )
    source = make_source(
        alice,
        name="Platform runbooks",
        location="/srv/docs/platform/runbooks/postgresql-failover-procedures-production-cluster",
    )
    external = make_source_external(
        source,
        path="postgres/failover-procedures-for-the-production-cluster-eu-west-1.md",
        title="Failover procedures for the production cluster",
        bodies=(EXTERNAL_BODY,),
    )

    session = open_session()
    page = session.page
    page.set_viewport_size(PHONE)
    widths: dict[str, int] = {}

    def visit(name: str, url: str | None = None, *, nav: bool = True) -> None:
        if url is not None:
            page.goto(url)
        # After a click the new page may be laid out before its stylesheet has arrived.
        page.wait_for_load_state("load")
        widths[name] = width(page)
        shoot(page, f"phone-{name}")
        if nav:
            assert_nav_reachable(page, PHONE["width"])

    # Signing in, on the phone.
    visit("login", "/accounts/login/", nav=False)
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/notes/$"))
    visit("note-list")
    visit("search-empty", "/search")
    visit("note-detail", f"/notes/{note.pk}")
    expect(page.locator(".rendered pre code")).to_contain_text("pg_last_xact_replay_timestamp")
    visit("note-edit", f"/notes/{note.pk}/edit")
    # The edit-conflict page: the note changes while the form is open, then Save.
    services.note_update(
        document=note,
        user=alice,
        base_version_id=note.head_id,
        title=note.title,
        body=BODY + "\nFence the old primary first.\n",
    )
    page.get_by_role("button", name="Save").click()
    expect(page.locator("section.conflict")).to_be_visible()
    visit("note-edit-conflict")
    visit("note-new", "/notes/new")
    visit("note-history", f"/notes/{note.pk}/history")
    visit("note-version", f"/notes/{note.pk}/versions/{first_version}")
    visit("note-delete", f"/notes/{note.pk}/delete")

    visit("search-results", "/search?q=failover+replica&mode=lexical")
    expect(page.locator("li.hit").first).to_be_visible()
    evidence_url = page.locator("a.evidence-link").first.get_attribute("href")
    visit("search-help", "/search/help")
    visit("evidence", evidence_url)
    expect(page.locator(".evidence-state")).to_contain_text("verified")

    page.goto("/ask")
    box = page.locator("form.ask input[name=question]")
    box.fill("How do I check the replication lag before a failover?")
    box.press("Enter")
    page.wait_for_url(PERMALINK)
    expect(page.locator("#answer section.answer")).to_have_count(1)
    visit("ask-answer")

    visit("sources", "/sources/")
    visit("source-detail", f"/sources/{source.pk}/")
    visit("external-detail", f"/externals/{external.pk}/")
    missing = page.goto("/notes/999999999")
    assert missing.status == 404
    visit("not-found")
    expect(page.locator("main h1")).to_be_visible()
    visit("api-docs", "/api/docs", nav=False)
    visit("admin", "/admin/", nav=False)

    print("\nscrollWidth at 360 px:", widths)
    too_wide = {name: px for name, px in widths.items() if px > PHONE["width"]}
    assert too_wide == {}

    # Desktop must not regress: the same pages at 1280 px, the top bar on one line.
    page.set_viewport_size(DESKTOP)
    for name, url in [
        ("note-detail", f"/notes/{note.pk}"),
        ("note-history", f"/notes/{note.pk}/history"),
        ("search-results", "/search?q=failover+replica&mode=lexical"),
        ("evidence", evidence_url),
        ("sources", "/sources/"),
        ("source-detail", f"/sources/{source.pk}/"),
        ("external-detail", f"/externals/{external.pk}/"),
        ("not-found", "/notes/999999999"),
    ]:
        page.goto(url)
        assert width(page) <= DESKTOP["width"], name
        shoot(page, f"desktop-{name}")
        assert_nav_reachable(page, DESKTOP["width"])
        topbar = page.locator("header.topbar")
        tops = {
            round(topbar.get_by_role("link", name=link, exact=True).bounding_box()["y"])
            for link in ("Search", "API")
        }
        assert len(tops) == 1, f"{name}: the top bar wraps at 1280 px"
    assert session.errors == []
