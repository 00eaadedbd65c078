"""Folder roots in a real browser (Debian's chromium): a staff member who is not a superuser
tries to add lode's own data folder and a folder outside the roots, and reads why not; a
source whose root was taken out of the setting says on its page that its scans are stopped.
Both pages fit 1280 px and 360 px without sideways scrolling.

`LODE_PHONE_SHOTS=/some/folder` writes a full-page screenshot of each page at both widths
there, for a person to look at (off by default, as in test_sources_13.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import expect

from externals.models import Source
from tests.factories import make_source

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WIDTHS = {"desktop": {"width": 1280, "height": 860}, "phone": {"width": 360, "height": 740}}


def fits(page, name: str) -> None:
    """The page does not scroll sideways at its width, and is shot when asked to."""
    page.wait_for_load_state("load")
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    folder = os.environ.get("LODE_PHONE_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


@pytest.mark.parametrize("width", list(WIDTHS))
def test_staff_read_why_a_folder_is_refused(open_session, alice, tmp_path, settings, width):
    allowed = tmp_path / "imports"
    allowed.mkdir()
    data_dir = Path(django_settings.DATA_DIR)
    settings.LODE_SOURCE_FOLDER_ROOTS = [str(allowed), str(data_dir.parent)]
    alice.is_staff = True  # staff, not a superuser
    alice.save()
    page = open_session(alice).page
    page.set_viewport_size(WIDTHS[width])
    page.goto("/sources/")
    page.locator("#add-folder").evaluate("details => { details.open = true; }")
    form = page.locator("#add-folder form")
    expect(form).to_contain_text(f"An absolute path inside {allowed}")

    form.get_by_label("Name").fill("lode data")
    form.get_by_label("Folder path on the server").fill(str(data_dir))
    form.get_by_role("button", name="Add folder").click()
    expect(page.locator("#add-folder .error")).to_contain_text("is lode's data folder")
    fits(page, f"{width}-folder-refused-lode-data")

    settings.LODE_SOURCE_FOLDER_ROOTS = [str(allowed)]
    page.goto("/sources/")
    page.locator("#add-folder").evaluate("details => { details.open = true; }")
    form = page.locator("#add-folder form")
    form.get_by_label("Name").fill("etc")
    form.get_by_label("Folder path on the server").fill("/etc")
    form.get_by_role("button", name="Add folder").click()
    expect(page.locator("#add-folder .error")).to_contain_text(
        f"can be mirrored only from inside: {allowed}"
    )
    fits(page, f"{width}-folder-refused-outside")
    assert not Source.objects.exists()


@pytest.mark.parametrize("width", list(WIDTHS))
def test_a_source_outside_the_roots_says_its_scans_are_stopped(
    open_session, alice, tmp_path, settings, width
):
    settings.LODE_SOURCE_FOLDER_ROOTS = [str(tmp_path / "imports")]
    source = make_source(
        alice, name="Old runbooks", location=str(tmp_path / "runbooks" / "platform")
    )
    page = open_session(alice).page
    page.set_viewport_size(WIDTHS[width])
    page.goto(f"/sources/{source.pk}/")
    refusal = page.locator(".scan-refusal")
    expect(refusal).to_contain_text("Stopped: This folder cannot be mirrored")
    expect(refusal).to_contain_text(str(tmp_path / "imports"))
    fits(page, f"{width}-source-scans-stopped")
    page.get_by_role("button", name="Scan now").click()
    expect(page.locator("body")).to_contain_text("cannot be scanned now")
    assert source.scans.count() == 0
