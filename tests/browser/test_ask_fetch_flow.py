"""Browser: a web address in the question offers "Fetch this page and answer from it"; the
answer made from the fetched page marks its claims as coming from that page, at desktop width
and at 360 px. The page is served by a local site on 127.0.0.1 (loopback fetches allowed by
the test setting only)."""

from __future__ import annotations

import os
import re

import pytest
from playwright.sync_api import expect

from tests.local_http import local_server

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PERMALINK = re.compile(r"/ask/(\d+)(\?previous=\d+)?$")
PAGE = (
    b"<html><head><title>Rollout guide</title></head><body><h1>Rollout guide</h1>"
    b"<p>Canary deploys run for forty minutes before the fleet is upgraded.</p></body></html>"
)


@pytest.mark.parametrize("width", [1280, 360])
def test_fetching_a_page_named_in_the_question_answers_from_it(
    open_session, alice, settings, width
):
    settings.LODE_FETCH_ALLOW_PRIVATE = True
    with local_server() as site:
        site.routes["/guide"] = (200, {"Content-Type": "text/html"}, PAGE)
        session = open_session(alice)
        page = session.page
        page.set_viewport_size({"width": width, "height": 800})
        page.goto("/ask")
        box = page.locator("form.ask input[name=question]")
        box.fill(f"How long do canary deploys run? {site.url('/guide')}")
        box.press("Enter")
        page.wait_for_url(PERMALINK)
        offer = page.locator("form.fetch-offer button")
        expect(offer).to_have_text("Fetch this page and answer from it")
        assert site.hits == []
        offer.click()
        expect(page.locator(".fetched-for-answer")).to_have_count(1)
        expect(page.locator(".claim-text")).to_contain_text("forty minutes")
        expect(page.locator("form.fetch-offer")).to_have_count(0)
        assert len(site.hits) == 1
        if os.environ.get("LODE_SCREENSHOT_DIR"):
            page.screenshot(
                path=os.path.join(os.environ["LODE_SCREENSHOT_DIR"], f"fetch-{width}.png"),
                full_page=True,
            )
    assert session.errors == []
