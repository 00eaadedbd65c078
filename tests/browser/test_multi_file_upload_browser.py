"""Several files at once by drag-and-drop, and the rendered view of a snapshot, in a real
browser. Debian's chromium drops two files on the upload form's zone (a
DragEvent carrying a DataTransfer, as a drag from the desktop delivers), sees both listed,
uploads them as one mirrored source and finds both saved in the report the upload redirects
to; then opens one external's rendered view. Every page fits
1280 px and 360 px without sideways scrolling.

`LODE_PHONE_SHOTS=/some/folder` writes a full-page screenshot of each page at both widths
there, for a person to look at (off by default, as in test_phone_width.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from externals.models import Source

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}

DROP = """([files]) => {
  const data = new DataTransfer();
  for (const [name, text] of files) {
    data.items.add(new File([text], name, {type: "text/markdown"}));
  }
  const zone = document.querySelector("#add-upload [data-drop-zone]");
  for (const type of ["dragenter", "dragover", "drop"]) {
    zone.dispatchEvent(new DragEvent(type, {dataTransfer: data, bubbles: true, cancelable: true}));
  }
}"""
FILES = [
    ["failover.md", "# Failover runbook\n\nPromote the **replica** after `pg_ctl promote`.\n"],
    ["backups.md", "# Backup policy\n\n- [x] nightly\n- [ ] weekly off-site\n"],
]


def shoot(page, name: str) -> None:
    folder = os.environ.get("LODE_PHONE_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def fits(page, name: str) -> None:
    page.wait_for_load_state("load")
    viewport = page.viewport_size["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport, name
    shoot(page, f"{'phone' if viewport < 600 else 'desktop'}-{name}")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_drop_two_files_and_see_both_added(open_session, alice, settings, tmp_path, viewport):
    settings.DATA_DIR = tmp_path / "data"
    session = open_session(alice)
    page = session.page
    page.set_viewport_size(viewport)
    page.goto("/sources/")
    page.locator("#add-upload summary").click()
    zone = page.locator("#add-upload [data-drop-zone]")
    expect(zone.locator("[data-drop-hint]")).to_be_visible()  # the script set the zone up

    page.evaluate(DROP, [FILES])
    listed = zone.locator("[data-drop-list] li")
    expect(listed).to_have_count(2)
    expect(listed.nth(0)).to_contain_text("failover.md")
    expect(listed.nth(1)).to_contain_text("backups.md")
    assert page.evaluate(
        "Array.from(document.querySelector('#add-upload input[type=file]').files, f => f.name)"
    ) == ["failover.md", "backups.md"]
    fits(page, "upload-dropped")

    page.locator("#add-upload button[type=submit]").click()
    results = page.locator("[data-upload-result]")
    expect(results).to_have_count(2)
    expect(page.locator('[data-upload-result="saved"]')).to_have_count(2)
    assert "?upload=" in page.url
    expect(page.locator("#upload-results")).to_contain_text("failover.md")
    expect(page.locator("#upload-results")).to_contain_text("backups.md")
    fits(page, "upload-results")
    [source] = Source.objects.filter(owner=alice)
    assert source.name.startswith("Uploads ") and source.items.count() == 2

    # The external of one of them, exact text first, then rendered.
    page.locator("#upload-results a", has_text="Failover runbook").click()
    expect(page.locator("#snapshot-text")).to_contain_text("**replica**")
    page.get_by_role("link", name="Rendered", exact=True).click()
    rendered = page.locator("#snapshot-rendered")
    expect(rendered.locator("strong")).to_have_text("replica")
    expect(rendered.locator("code")).to_have_text("pg_ctl promote")
    assert "view=rendered" in page.url
    fits(page, "upload-rendered")
    assert session.errors == [] and session.dialogs == []
