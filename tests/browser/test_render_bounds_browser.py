"""Rendering bounds and remote images in a real browser (Debian's chromium, headless):

* a note of 900 nested list levels (815 KB) opens with the notice and its text, at desktop
  width and at 360 px, and the page itself never scrolls sideways (the text scrolls in its
  own box);
* a note with an image from another site (a real HTTP server on 127.0.0.1, another origin)
  loads nothing from it: the image is a link, saying it was not loaded; following the link
  does reach that server (so the count of its requests means something).
"""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from notes import services
from tests.factories import nested_list
from tests.local_http import local_server

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}
NOTICE = "This note is nested too deeply to display formatted"
PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8Dw"
    "HwAFAAH/q842iQAAAABJRU5ErkJggg=="
)


@pytest.mark.parametrize(("width", "viewport"), [("desktop", DESKTOP), ("phone", PHONE)])
def test_a_note_nested_900_deep_opens_with_the_notice(
    open_session, live_server, alice, screenshot, width, viewport
):
    note = services.note_create(owner=alice, title="Deep outline", body=nested_list(900), tags="")
    session = open_session(alice)
    page = session.page
    page.set_viewport_size(viewport)
    response = page.goto(reverse("notes:detail", args=[note.pk]))
    assert response.status == 200
    expect(page.get_by_text(NOTICE)).to_be_visible()
    shown = page.locator(".rendered pre")
    expect(shown).to_contain_text("- level 0")
    expect(shown).to_contain_text("- level 100")
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    assert session.errors == []
    screenshot(page, f"deep-outline-{width}")


@pytest.mark.parametrize(("width", "viewport"), [("desktop", DESKTOP), ("phone", PHONE)])
def test_a_remote_image_is_a_link_and_nothing_is_fetched(
    open_session, live_server, alice, screenshot, width, viewport
):
    with local_server() as remote:
        remote.routes["/beach.png"] = (200, {"Content-Type": "image/png"}, b"\x89PNG\r\n")
        body = (
            "# Trip\n\n"
            f"Our beach: ![Beach at dawn]({remote.url('/beach.png')})\n\n"
            f"A drawing kept in the note: ![dot]({PNG})\n"
        )
        note = services.note_create(owner=alice, title="Trip", body=body, tags="")
        session = open_session(alice)
        page = session.page
        page.set_viewport_size(viewport)
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.goto(reverse("notes:detail", args=[note.pk]))
        page.wait_for_load_state("networkidle")
        link = page.get_by_role("link", name="Beach at dawn")
        expect(link).to_be_visible()
        expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
        expect(page.get_by_text("(remote image, not loaded)")).to_be_visible()
        assert page.locator(".rendered img").count() == 1  # the data: image only
        assert page.evaluate("document.querySelector('.rendered img').naturalWidth") == 1
        assert remote.hits == []
        assert [url for url in requested if not url.startswith((live_server.url, "data:"))] == []
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        screenshot(page, f"remote-image-{width}")
        link.click()
        page.wait_for_url(remote.url("/beach.png"))
        assert remote.hits[0] == "/beach.png"  # (the browser may then ask for a favicon)
