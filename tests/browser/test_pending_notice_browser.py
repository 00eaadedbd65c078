"""In chromium: a note saved from the form says on its page that meaning search has not
caught up yet, search results say how many passages wait, and the notice fits a phone
(360 px, no sideways scrolling). Once the worker has embedded them, both pages are quiet.

`LODE_PENDING_SHOTS=/some/folder` writes screenshots of both pages at both widths there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from retrieval.index.embeddings import get_embedder
from retrieval.index.sync import sync_vectors

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}
NOTICE = "New and changed notes are still being indexed for meaning search (1 passage waiting)"


def shot(page, name: str) -> None:
    folder = os.environ.get("LODE_PENDING_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def fits(page) -> None:
    width = page.viewport_size["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_the_pending_notice_on_a_saved_note_and_on_results(
    open_session, alice, private_vectors
) -> None:
    get_embedder().embed_query("warm up")  # the live server's first search loads no model
    page = open_session(alice).page
    page.goto(reverse("notes:create"))
    page.locator("input[name=title]").fill("Sourdough")
    page.locator("textarea[name=body]").fill("Bake the sourdough loaf at 220 degrees.")
    page.get_by_role("button", name="Save").click()
    notice = page.locator(".pending-notice")
    expect(notice).to_have_text(f"{NOTICE}; keyword search already finds them.")
    note_url = page.url
    for name, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        fits(page)
        shot(page, f"note-{name}")

    page.set_viewport_size(DESKTOP)
    page.goto("/search?q=sourdough")
    expect(page.locator("#results .degraded")).to_have_text(
        f"{NOTICE}; keyword search already finds them."
    )
    expect(page.locator("#results")).to_contain_text("Bake the sourdough loaf")
    for name, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        fits(page)
        shot(page, f"search-{name}")

    sync_vectors()
    page.goto(note_url)
    expect(page.locator("h1")).to_have_text("Sourdough")
    expect(page.locator(".pending-notice")).to_have_count(0)
    page.goto("/search?q=sourdough")
    expect(page.locator("#results")).to_contain_text("Bake the sourdough loaf")
    expect(page.locator("#results .degraded")).to_have_count(0)
