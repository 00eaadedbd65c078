"""Uploads brought in as editable notes, the per-file report after the redirect (a reload
sends nothing again), and moving a source and a note to a shared space from their pages, in
Debian's chromium at 1280 px and 360 px, none of them scrolling sideways.

`LODE_PHONE_SHOTS=/some/folder` writes a full-page screenshot of each page at both widths
there, for a person to look at (off by default, as in test_phone_width.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from externals.models import Source
from notes.models import Document
from spaces import services as space_services
from spaces.models import DocumentMove, personal_space
from tests.factories import make_source, make_source_external, note

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}
VIEWPORTS = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])


def fits(page, name: str) -> None:
    page.wait_for_load_state("load")
    viewport = page.viewport_size["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport, name
    folder = os.environ.get("LODE_PHONE_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        width = "phone" if viewport < 600 else "desktop"
        page.screenshot(path=str(Path(folder) / f"{width}-{name}.png"), full_page=True)


@VIEWPORTS
def test_upload_markdown_as_notes_and_reload_the_report(
    open_session, alice, settings, tmp_path, viewport
):
    settings.DATA_DIR = tmp_path / "data"
    (tmp_path / "failover.md").write_text("# Failover runbook\n\nPromote the replica.\n")
    (tmp_path / "on-call.txt").write_text("Pages go to the falcon-pager alias.\n")
    (tmp_path / "scan.pdf").write_bytes(b"%PDF-1.4 not really")
    session = open_session(alice)
    page = session.page
    page.set_viewport_size(viewport)
    page.goto("/sources/")
    page.locator("#add-upload summary").click()
    page.get_by_label("As editable notes").check()
    page.locator('#add-upload input[type="file"]').set_input_files(
        [str(tmp_path / name) for name in ("failover.md", "on-call.txt", "scan.pdf")]
    )
    fits(page, "upload-as-notes-form")

    page.locator("#add-upload button[type=submit]").click()
    expect(page.locator("#upload-results")).to_contain_text("as editable notes")
    expect(page.locator('[data-upload-result="saved"]')).to_have_count(2)
    refused = page.locator('[data-upload-result="refused"]')
    expect(refused).to_contain_text("scan.pdf")
    expect(refused).to_contain_text("A .pdf file cannot be an editable note")
    expect(refused).to_contain_text("choosing “As a mirrored source”")
    assert "?upload=" in page.url
    fits(page, "upload-as-notes-report")

    page.reload()  # a GET: the report again, nothing sent twice
    expect(page.locator("[data-upload-result]")).to_have_count(3)
    assert Document.objects.filter(owner=alice, kind="note").count() == 2
    assert not Source.objects.exists()

    page.locator("#upload-results a", has_text="Failover runbook").click()
    expect(page.locator("h1").first).to_contain_text("Failover runbook")
    assert "/notes/" in page.url
    assert session.errors == [] and session.dialogs == []


@VIEWPORTS
def test_move_a_folder_source_and_a_note_into_a_shared_space(open_session, alice, viewport):
    team = space_services.space_create(by=alice, name="Platform team")
    source = make_source(alice, name="Platform runbooks", location="/srv/docs/platform")
    make_source_external(source, path="failover.md", title="Failover procedures")
    runbook = note(alice, "Deploy checklist", "Tag, build, roll out, watch the graphs.\n")
    session = open_session(alice)
    page = session.page
    page.set_viewport_size(viewport)

    page.goto(f"/sources/{source.pk}/")
    form = page.locator("form.source-move")
    form.get_by_label("Move to space").select_option(label="Platform team")
    fits(page, "source-move-form")
    form.get_by_role("button", name="Move").click()
    expect(page.locator(".messages")).to_contain_text(
        "Moved “Platform runbooks” to Platform team, with 1 document."
    )
    fits(page, "source-moved")
    source.refresh_from_db()
    assert source.space_id == team.pk
    assert DocumentMove.objects.filter(to_space=team).count() == 1

    page.goto(f"/notes/{runbook.pk}")
    move = page.locator("form.move-form")
    move.locator("select[name=to_space]").select_option(label="Platform team")
    fits(page, "note-move-form")
    move.get_by_role("button", name="Move").click()
    expect(page.locator("body")).to_contain_text("Moved “Deploy checklist” to Platform team.")
    fits(page, "note-moved")
    runbook.refresh_from_db()
    assert runbook.space_id == team.pk and runbook.space_id != personal_space(alice).pk
    assert session.errors == [] and session.dialogs == []
