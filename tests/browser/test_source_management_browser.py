"""Sources managed in the app, in a real browser: Debian's chromium edits
a source (name, trust tier, no-egress, stale age), disables and enables it, deletes an
annotation after its confirmation page, and deletes the source after the page that counts
what happens to its externals, snapshots and annotations. Every page it passes through fits
1280 px and 360 px without sideways scrolling.

`LODE_PHONE_SHOTS=/some/folder` writes a full-page screenshot of each page at both widths
there, for a person to look at (off by default, as in test_phone_width.py).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from externals.annotations import annotation_create, annotations_for
from externals.models import Source
from notes.models import Document, TrustTier
from tests.factories import make_source, make_source_external

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}
BODY = (
    "Failover procedure for the production cluster.\n\n"
    "Promote the replica when the primary stops answering for thirty seconds.\n"
)
QUOTE = "Promote the replica"


def shoot(page, name: str) -> None:
    folder = os.environ.get("LODE_PHONE_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def fits(page, name: str) -> None:
    """The page is laid out, does not scroll sideways at the current width, and is shot."""
    page.wait_for_load_state("load")
    viewport = page.viewport_size["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport, name
    shoot(page, f"{'phone' if viewport < 600 else 'desktop'}-{name}")


def test_edit_disable_and_delete_a_source(open_session, alice):
    source = make_source(
        alice,
        name="Platform runbooks",
        location="/srv/docs/platform/runbooks/postgresql-failover-procedures-production-cluster",
    )
    external = make_source_external(
        source,
        path="postgres/failover-procedures-for-the-production-cluster-eu-west-1.md",
        title="Failover procedures",
        bodies=(BODY, BODY + "\nFence the old primary first.\n"),
    )
    make_source_external(source, path="redis.md", title="Redis", bodies=("Eviction policy.\n",))
    start = external.head.body.index(QUOTE)
    annotation_create(
        owner=alice,
        version=external.head,
        start=start,
        end=start + len(QUOTE),
        quote=QUOTE,
        text="Only after checking the lag dashboard.",
    )
    annotation_create(
        owner=alice,
        version=external.head,
        start=0,
        end=len("Failover procedure"),
        quote="Failover procedure",
        text="Ask platform-oncall before starting.",
    )

    session = open_session(alice)
    page = session.page
    for viewport in (PHONE, DESKTOP):
        page.set_viewport_size(viewport)
        for name, url in (
            ("source-detail", f"/sources/{source.pk}/"),
            ("source-edit", f"/sources/{source.pk}/edit/"),
            ("source-delete", f"/sources/{source.pk}/delete/"),
            ("external-detail", f"/externals/{external.pk}/"),
        ):
            page.goto(url)
            fits(page, name)
    page.set_viewport_size(DESKTOP)

    # The external links to its original: a folder's file path, as text.
    page.goto(f"/externals/{external.pk}/")
    expect(page.locator(".original-path")).to_have_text(
        "/srv/docs/platform/runbooks/postgresql-failover-procedures-production-cluster/"
        "postgres/failover-procedures-for-the-production-cluster-eu-west-1.md"
    )

    # Edit from the source page.
    page.goto(f"/sources/{source.pk}/")
    page.get_by_role("link", name="Edit", exact=True).click()
    page.wait_for_url(re.compile(r"/edit/$"))
    page.get_by_label("Name").fill("Runbooks (platform)")
    page.get_by_label("Trust tier").select_option(TrustTier.EXTERNAL_STALE.value)
    page.get_by_label("No egress").check()
    page.get_by_label("Stale after (days)").fill("0")
    page.get_by_role("button", name="Save").click()
    # The browser's own min= check stops 0 before it is sent; the server refuses it too
    # (tests/externals/test_source_management.py). A valid value is saved.
    page.get_by_label("Stale after (days)").fill("90")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(re.compile(rf"/sources/{source.pk}/$"))
    expect(page.locator(".messages")).to_contain_text("Source settings saved.")
    expect(page.locator("h1")).to_have_text("Runbooks (platform)")
    fits(page, "source-detail-saved")
    source.refresh_from_db()
    external.refresh_from_db()
    assert (source.name, source.trust_tier, source.no_egress, source.stale_after_days) == (
        "Runbooks (platform)",
        TrustTier.EXTERNAL_STALE,
        True,
        90,
    )
    assert (external.no_egress, external.trust_tier) == (True, TrustTier.EXTERNAL_STALE)

    # Disable, then enable again.
    page.get_by_role("button", name="Disable").click()
    expect(page.locator(".messages")).to_contain_text("Source disabled")
    expect(page.get_by_role("button", name="Scan now")).to_be_disabled()
    fits(page, "source-detail-disabled")
    page.get_by_role("button", name="Enable").click()
    expect(page.get_by_role("button", name="Scan now")).to_be_enabled()

    # Delete one annotation from the external's page, after its confirmation page.
    page.goto(f"/externals/{external.pk}/")
    expect(page.locator(".annotation")).to_have_count(2)
    page.locator(".annotation", has_text="platform-oncall").get_by_role(
        "link", name="Delete…"
    ).click()
    expect(page.locator("h1")).to_have_text("Delete this annotation?")
    expect(page.locator("main")).to_contain_text("Ask platform-oncall before starting.")
    for viewport in (PHONE, DESKTOP):
        page.set_viewport_size(viewport)
        fits(page, "annotation-delete")
    page.get_by_role("button", name="Delete annotation").click()
    page.wait_for_url(re.compile(rf"/externals/{external.pk}/snapshots/\d+/#annotations$"))
    expect(page.locator(".messages")).to_contain_text("Annotation deleted.")
    expect(page.locator(".annotation")).to_have_count(1)
    expect(page.locator(".annotation")).to_contain_text("lag dashboard")
    assert [a.text for a in annotations_for(alice, external.head)] == [
        "Only after checking the lag dashboard."
    ]

    # Delete the source: the confirmation spells out what happens, with counts.
    page.goto(f"/sources/{source.pk}/")
    page.get_by_role("link", name="Delete…").click()
    effects = page.locator(".delete-effects")
    expect(effects.locator("[data-count=externals]")).to_contain_text("2 externals leave")
    expect(effects.locator("[data-count=snapshots]")).to_contain_text("3 snapshots are kept")
    expect(effects.locator("[data-count=annotations]")).to_contain_text("1 annotation is kept")
    for viewport in (PHONE, DESKTOP):
        page.set_viewport_size(viewport)
        fits(page, "source-delete-counts")
    page.get_by_role("button", name="Delete source").click()
    page.wait_for_url(re.compile(r"/sources/$"))
    expect(page.locator(".messages")).to_contain_text("Deleted source “Runbooks (platform)”")
    fits(page, "sources-after-delete")
    assert not Source.objects.filter(pk=source.pk).exists()
    assert Document.objects.get(pk=external.pk).deleted_at is not None
    # The external's page still opens, saying it is no longer searched.
    page.goto(f"/externals/{external.pk}/")
    expect(page.locator("main")).to_contain_text("no longer searched")
    assert session.errors == [] and session.dialogs == []
