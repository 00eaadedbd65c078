"""Spaces in a real browser: alice creates a shared space from the spaces
page, invites bob by username, and both switch to it with the header's switcher; the pages
fit a phone (360 px) and a desktop (1280 px) without scrolling sideways.

`LODE_SPACES_SHOTS=/some/folder` writes full-page screenshots of /spaces/ and the space page
at both widths there, for a person to look at (off by default).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from spaces.models import Membership, Role, Space

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}


def _shot(page, name: str) -> None:
    folder = os.environ.get("LODE_SPACES_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def _fits(page, width: int) -> None:
    scroll_width = page.evaluate("document.documentElement.scrollWidth")
    assert scroll_width <= width, f"{page.url} scrolls sideways at {width} px ({scroll_width})"
    switcher = page.locator("header.topbar form.space-switch")
    for control in (switcher.locator("select"), switcher.get_by_role("button", name="Switch")):
        box = control.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width


def test_create_invite_and_switch_space(open_session, alice, bob):
    session = open_session(alice)
    page = session.page
    page.goto("/spaces/")
    expect(page.get_by_role("heading", name="Spaces", exact=True)).to_be_visible()
    page.get_by_label("Name").fill("Platform team")
    page.get_by_label("Description (optional)").fill("Runbooks we share")
    page.get_by_role("button", name="Create space").click()
    expect(page.get_by_role("heading", name="Platform team")).to_be_visible()
    space = Space.objects.get(name="Platform team")
    assert page.url.endswith(f"/spaces/{space.pk}/")

    invite = page.locator("form.member-add")
    invite.get_by_label("Username").fill("bob")
    invite.get_by_label("Role").select_option("editor")
    invite.get_by_role("button", name="Add member").click()
    expect(page.locator(".messages")).to_contain_text("Added bob as editor.")
    expect(page.locator('li.member[data-member="bob"]')).to_be_visible()
    assert Membership.objects.get(space=space, user=bob).role == Role.EDITOR
    # The only admin cannot leave, and the page says why.
    expect(page.get_by_role("button", name="Leave this space")).to_be_disabled()
    expect(page.locator("#leave-why")).to_contain_text("only admin")

    # The header's switcher: choose the space, land back on the same page, see it chosen.
    page.goto("/notes/")
    switcher = page.locator("header.topbar form.space-switch")
    switcher.locator("select").select_option(label="Platform team")
    switcher.get_by_role("button", name="Switch").click()
    expect(page).to_have_url(re.compile(r"/notes/$"))
    expect(switcher.locator("select")).to_have_value(str(space.pk))
    switcher.locator("select").select_option("all")
    switcher.get_by_role("button", name="Switch").click()
    expect(switcher.locator("select")).to_have_value("all")

    # bob, in his own browser, has the space in his switcher and can choose it.
    bobs = open_session(bob).page
    bobs.goto("/spaces/")
    expect(bobs.locator("tr.space-row", has_text="Platform team")).to_contain_text("Editor")
    bob_switcher = bobs.locator("header.topbar form.space-switch")
    bob_switcher.locator("select").select_option(label="Platform team")
    bob_switcher.get_by_role("button", name="Switch").click()
    expect(bob_switcher.locator("select")).to_have_value(str(space.pk))
    expect(bobs.locator("tr.space-row", has_text="Platform team")).to_contain_text("current")
    assert not session.errors

    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        for name, url in (("list", "/spaces/"), ("space", f"/spaces/{space.pk}/")):
            page.goto(url)
            _fits(page, size["width"])
            _shot(page, f"spaces-{name}-{label}")
