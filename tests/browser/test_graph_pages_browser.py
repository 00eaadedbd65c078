"""Backlinks, the neighbourhood picture, "Link it" and `[[` completion in a real browser
, at 1280 and 360 px.

alice opens a note that others link to and mention: the sections and the picture show, the
page never scrolls sideways, the 2-hop toggle swaps the picture in place (htmx), "Link it"
turns a mention into a link, and in the editor "[[" + letters offers titles, choosing one
inserts `[[Title]]`. No page error, no Content-Security-Policy violation.

Screenshots go to /tmp/shots/graph-pages/ (or LODE_SHOTS_DIR) for a person to look at;
nothing is asserted on them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from notes import services
from spaces import services as space_services
from tests.factories import make_source, make_source_external

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}
SHOTS = Path(os.environ.get("LODE_SHOTS_DIR", "/tmp/shots/graph-pages"))


def shoot(page, name: str) -> None:
    try:
        SHOTS.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def fits(page) -> None:
    overflow = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert overflow[0] <= overflow[1], overflow


@pytest.fixture
def graph(db) -> dict[str, object]:
    alice = User.objects.create_user("alice", "alice@example.com", "pw")
    ops = space_services.space_create(by=alice, name="Operations")

    def note(title: str, body: str):
        return services.note_create(owner=alice, title=title, body=body, space=ops)

    target = note("Backup Policy", "Snapshots are kept for 35 days. See [[Storage Tiers]].")
    note("Storage Tiers", "Hot, warm and cold. The [[Archive Vault Procedure]] covers cold.")
    note("Archive Vault Procedure", "Ship tapes monthly.")
    note(
        "Restore runbook",
        "Before restoring anything, read [[Backup Policy|the backup rules]] and check the "
        "snapshot age against the retention window; a snapshot older than the window is gone.",
    )
    note("Incident 2024-03 postmortem", "Root cause: we ignored the [[Backup Policy]].")
    note(
        "A very long title of a quarterly planning meeting about storage costs and backups",
        "Agreed to revisit [[Backup Policy]] next quarter. https://example.com/" + "x" * 120,
    )
    mentioner = note("Weekly review", "We read the backup policy again on Monday.")
    note("Index", "See [[Nowhere Page]] and [[Backup Policy]].")
    editable = note("Scratch", "Draft.")
    source = make_source(alice, name="Vendor docs", location="/srv/vendor/documentation")
    external = make_source_external(
        source, path="guides/tape-rotation-and-offsite-storage.md", title="Tape Rotation Guide"
    )
    note("Offsite checklist", "Rotate per the [[Tape Rotation Guide]] every Friday.")
    return {
        "alice": alice,
        "target": target,
        "mentioner": mentioner,
        "editable": editable,
        "external": external,
    }


def test_backlinks_picture_link_it_and_completion(open_session, graph) -> None:
    session = open_session(graph["alice"])
    console: list[str] = []
    session.page.on(
        "console", lambda msg: console.append(msg.text) if msg.type == "error" else None
    )
    page = session.page
    target = graph["target"]
    page.goto(f"/notes/{target.pk}")
    for element_id in ("linked-from", "links-to", "mentions"):
        expect(page.locator(f"#{element_id}")).to_be_visible()
    expect(page.locator("#linked-from li.graph-row")).to_have_count(4)
    expect(page.locator("#linked-from mark").first).to_be_visible()
    expect(page.locator(".graph-wide svg.graph-picture")).to_be_visible()
    expect(page.locator(".graph-narrow svg.graph-picture")).to_be_hidden()
    expect(page.locator("#mentions")).to_contain_text("Weekly review")
    expect(page.locator("#mentions")).to_contain_text("inferred")
    fits(page)
    shoot(page, "note-graph-1280")

    page.set_viewport_size(PHONE)
    page.reload()
    expect(page.locator("#linked-from")).to_be_visible()
    # The phone's own layout: the narrow picture, whole, the wide one hidden.
    expect(page.locator(".graph-narrow svg.graph-picture")).to_be_visible()
    expect(page.locator(".graph-wide svg.graph-picture")).to_be_hidden()
    box = page.locator(".graph-narrow svg.graph-picture").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    fits(page)
    shoot(page, "note-graph-360")
    page.set_viewport_size(DESKTOP)

    # Two hops: htmx swaps the picture in place, the URL says so.
    page.locator("a.graph-hop", has_text="2 hops").click()
    expect(page.locator("a.graph-hop.current")).to_have_text("2 hops")
    expect(page.locator(".graph-wide svg.graph-picture")).to_contain_text("Archive Vault")
    assert "hops=2" in page.url
    shoot(page, "note-graph-2hops-1280")

    # Link it: the mention becomes a link, as a new version of "Weekly review".
    page.locator("#mentions form.link-it button").click()
    expect(page.locator(".messages")).to_contain_text("Linked “Backup Policy”")
    expect(page.locator("#linked-from")).to_contain_text("Weekly review")
    expect(page.locator("#mentions")).not_to_contain_text("Weekly review")
    graph["mentioner"].refresh_from_db()
    assert "[[Backup Policy|backup policy]]" in graph["mentioner"].head.body

    # [[ completion in the editor.
    page.goto(f"/notes/{graph['editable'].pk}/edit")
    body = page.locator("textarea[name=body]")
    body.click()
    body.press("End")
    body.press_sequentially(" see [[Back")
    option = page.locator("#wiki-complete button[data-wiki-title='Backup Policy']")
    expect(option).to_be_visible()
    page.set_viewport_size(PHONE)
    fits(page)
    shoot(page, "editor-complete-360")
    page.set_viewport_size(DESKTOP)
    option.click()
    assert body.input_value() == "Draft. see [[Backup Policy]]"
    expect(page.locator("#wiki-complete")).to_be_empty()
    # Keyboard: ArrowDown into the list, Enter chooses.
    body.press_sequentially(" and [[stor")
    expect(page.locator("#wiki-complete button").first).to_be_visible()
    body.press("ArrowDown")
    page.keyboard.press("Enter")
    assert body.input_value().endswith("and [[Storage Tiers]]")

    # The external's page: who links to it (a note, and its source's `contains`).
    page.goto(f"/externals/{graph['external'].pk}")
    expect(page.locator("#linked-from")).to_contain_text("Offsite checklist")
    expect(page.locator("#linked-from")).to_contain_text("Vendor docs")
    expect(page.locator(".graph-wide svg.graph-picture")).to_be_visible()
    fits(page)
    shoot(page, "external-graph-1280")
    page.set_viewport_size(PHONE)
    page.reload()
    expect(page.locator(".graph-narrow svg.graph-picture")).to_be_visible()
    fits(page)
    shoot(page, "external-graph-360")

    assert session.errors == [], session.errors
    assert not [line for line in console if "Content Security Policy" in line], console
