"""The search page's "nothing matches" and its weaker-matches toggle in a real browser: a
page heading; an htmx search for words the notes never use says
plainly that nothing matches and offers the weaker (meaning-only) matches; the toggle is kept
in the URL, in the copy-link field and across a mode change made through the form (htmx);
hiding them again brings back "nothing matches".
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from notes import services
from retrieval.index.sync import sync_vectors

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

NOTES = {
    "Sourdough": "Bake the sourdough loaf at 220 degrees for forty minutes, then let it cool.",
    "Garden": "Water the tomato plants every second evening in July and pinch out side shoots.",
    "Redis cache": "Set maxmemory-policy allkeys-lru on the cache and restart it after the deploy.",
}
QUERY = "kubernetes helm chart"


def params(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def test_nothing_matches_then_weaker_matches_on_request(
    open_session, alice, private_vectors
) -> None:
    for title, body in NOTES.items():
        services.note_create(owner=alice, title=title, body=body)
    sync_vectors()
    session = open_session(alice)
    page = session.page

    page.goto("/search")
    expect(page.locator("h1")).to_have_text("Search your notes")
    box = page.locator("form.search input[name=q]")
    box.fill(QUERY)
    box.press("Enter")
    page.wait_for_url(lambda url: params(url).get("q") == [QUERY])
    results = page.locator("#results")
    expect(results).to_contain_text(f"Nothing in your notes matches “{QUERY}”.")
    expect(page.locator("li.hit")).to_have_count(0)
    # The calm view offers the weaker matches; how many were hidden is for Advanced.
    expect(results).to_contain_text("What to try")
    expect(results).not_to_contain_text("weaker matches hidden")

    page.locator("a.show-weaker").click()
    page.wait_for_url(lambda url: params(url).get("weaker") == ["1"])
    expect(page.locator("li.hit")).to_have_count(len(NOTES))
    expect(page.locator("li.hit .weak-label")).to_have_count(len(NOTES))
    expect(results).not_to_contain_text("Nothing in your notes matches")
    expect(page.locator("#results [data-share-url]")).to_have_value(re.compile(r"weaker=1"))

    # A mode change (in the Advanced view) re-searches through the form
    # (htmx); the weaker view stays.
    page.get_by_role("link", name="Advanced", exact=True).click()
    page.wait_for_url(lambda url: params(url).get("adv") == ["1"])
    assert params(page.url).get("weaker") == ["1"]
    page.locator("form.search select[name=mode]").select_option("semantic")
    page.wait_for_url(lambda url: params(url).get("mode") == ["semantic"])
    assert params(page.url).get("weaker") == ["1"]
    expect(page.locator("li.hit")).to_have_count(len(NOTES))
    expect(page.locator("#results .search-stats")).to_contain_text("semantic search")

    page.locator("a.hide-weaker").click()
    page.wait_for_url(lambda url: "weaker" not in params(url))
    expect(page.locator("#results")).to_contain_text("Nothing in your notes matches")
    expect(page.locator("li.hit")).to_have_count(0)
    assert session.errors == [] and session.dialogs == []
