"""Turning a space's public links back on in a real browser: the admin ticks *Public links* on
the space's page, lands on the page listing the earlier links (none ticked), brings one back
and leaves the other revoked. The page fits a phone (360 px) and a desktop (1280 px) without
scrolling sideways.

`LODE_REVIVE_SHOTS=/some/folder` writes full-page screenshots of the page at both widths
there, for a person to look at (off by default).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.test import Client
from playwright.sync_api import expect

from notes import services as note_services
from spaces import public, services
from spaces.models import Membership, Role, Space

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}
LONG_TITLE = "Quarterly certificate rotation checklist for the edge proxies and relays"


def _shot(page, name: str) -> None:
    folder = os.environ.get("LODE_REVIVE_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def _fits(page, width: int) -> None:
    scroll_width = page.evaluate("document.documentElement.scrollWidth")
    assert scroll_width <= width, f"{page.url} scrolls sideways at {width} px ({scroll_width})"


def test_admin_turns_public_links_back_on_and_brings_back_one(open_session, alice, bob):
    team = Space.objects.create(name="Team Kestrel", created_by=alice, public_links_enabled=True)
    Membership.objects.create(space=team, user=alice, role=Role.ADMIN)
    Membership.objects.create(space=team, user=bob, role=Role.EDITOR)
    first = note_services.note_create(
        owner=bob, title=LONG_TITLE, body=f"# {LONG_TITLE}\n\nRotate them.\n", space=team
    )
    second = note_services.note_create(
        owner=alice, title="Relay restart", body="# Relay restart\n\nRestart it.\n", space=team
    )
    kept = public.link_create(by=bob, version=first.head)
    dropped = public.link_create(by=alice, version=second.head)
    services.space_update(by=alice, space=team, public_links_enabled=False)

    page = open_session(alice).page
    page.goto(f"/spaces/{team.pk}/")
    settings_form = page.locator("section.space-settings form.stack")
    settings_form.get_by_label("Public links").check()
    settings_form.get_by_role("button", name="Save settings").click()
    expect(page.get_by_role("heading", name="Turn public links on · Team Kestrel")).to_be_visible()
    expect(page.locator(".messages")).to_contain_text("Public links are still off")
    boxes = page.locator('input[name="revive"]')
    expect(boxes).to_have_count(2)
    for index in range(2):
        expect(boxes.nth(index)).not_to_be_checked()
    expect(page.locator(".earlier-link").first).to_contain_text("by alice")
    expect(page.locator(".earlier-links")).to_contain_text(LONG_TITLE)

    for name, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        _fits(page, size["width"])
        _shot(page, f"public-links-turn-on-{name}")
    page.set_viewport_size(DESKTOP)

    page.get_by_label(f"Note “{LONG_TITLE}”, version 1").check()
    page.get_by_role("button", name="Turn public links on").click()
    expect(page.locator(".messages")).to_contain_text("Earlier links brought back: 1.")
    expect(page.locator(".messages")).to_contain_text("revoked for good (they open nothing): 1.")
    anonymous = Client()
    assert anonymous.get(f"/p/{kept.token}").status_code == 200
    assert anonymous.get(f"/p/{dropped.token}").status_code == 404
