"""Office files through the sources page in a real browser: the file picker offers them,
a Word file and a damaged Excel file are uploaded together, the Word file is added and the
Excel file refused with its reason in plain words; the Word file's external shows its exact
Markdown text and its rendered heading and table. Every page fits 1280 px and 360 px without
sideways scrolling.

`LODE_PHONE_SHOTS=/some/folder` writes a full-page screenshot of each page at both widths
there, for a person to look at (off by default, as in test_phone_width.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from externals.models import Source
from tests.factories import docx_file, xlsx_file

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}


def fits(page, name: str) -> None:
    page.wait_for_load_state("load")
    viewport = page.viewport_size["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport, name
    folder = os.environ.get("LODE_PHONE_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        width = "phone" if viewport < 600 else "desktop"
        page.screenshot(path=str(Path(folder) / f"{width}-{name}.png"), full_page=True)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_upload_a_word_file_and_read_it(open_session, alice, settings, tmp_path, viewport):
    settings.DATA_DIR = tmp_path / "data"
    runbook = tmp_path / "runbook.docx"
    runbook.write_bytes(docx_file())
    damaged = tmp_path / "costs.xlsx"
    damaged.write_bytes(xlsx_file()[:700])
    session = open_session(alice)
    page = session.page
    page.set_viewport_size(viewport)
    page.goto("/sources/")
    page.locator("#add-upload summary").click()
    picker = page.locator('#add-upload input[type="file"]')
    assert ".docx" in picker.get_attribute("accept").split(",")
    picker.set_input_files([str(runbook), str(damaged)])
    fits(page, "office-upload-chosen")

    page.locator("#add-upload button[type=submit]").click()
    expect(page.locator("[data-upload-result]")).to_have_count(2)
    added = page.locator('[data-upload-result="saved"]')
    expect(added).to_contain_text("runbook.docx")
    refused = page.locator('[data-upload-result="refused"]')
    expect(refused).to_contain_text("costs.xlsx")
    expect(refused).to_contain_text("not a readable .xlsx file: it is not a ZIP package")
    fits(page, "office-upload-results")
    # Both files went to one source; the damaged one was refused and left it again.
    [source] = Source.objects.filter(owner=alice)
    assert [item.path for item in source.items.all()] == ["runbook.docx"]

    page.locator("#upload-results .upload-source a", has_text=source.name).click()
    fits(page, "office-source")
    page.get_by_role("link", name="Failover runbook").click()
    expect(page.locator("#snapshot-text")).to_contain_text("| promote \\| verify | ops team |")
    fits(page, "office-external-exact")
    page.get_by_role("link", name="Rendered", exact=True).click()
    rendered = page.locator("#snapshot-rendered")
    expect(rendered.locator("h1")).to_have_text("Failover")
    expect(rendered.locator("td").first).to_have_text("promote | verify")
    fits(page, "office-external-rendered")
    assert session.errors == [] and session.dialogs == []
