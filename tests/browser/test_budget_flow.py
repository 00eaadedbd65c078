"""A search stopped by its time budget, in a real browser: the htmx form
gets a 503 and htmx swaps its message into the results (the `responseHandling` rule in
base.html), instead of silently showing nothing; the next search works."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from notes import services

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_stopped_search_shows_its_message_in_the_results(alice, open_session, settings) -> None:
    services.note_create(owner=alice, title="Otters", body="# Otters\n\nOtters hold hands.\n")
    session = open_session(user=alice)
    page = session.page
    page.goto("/search?adv=1")  # the mode selector lives under Advanced
    box = page.locator("form.search input[name=q]")
    page.locator("select[name=mode]").select_option("lexical")

    settings.LODE_REQUEST_BUDGET_SECONDS = 1e-9  # the live server shares these settings
    box.fill("otters")
    box.press("Enter")
    stopped = page.locator("#results .budget-exceeded")
    expect(stopped).to_contain_text("This search took too long and was stopped")

    settings.LODE_REQUEST_BUDGET_SECONDS = 10
    box.fill("otters hold")
    box.press("Enter")
    expect(page.locator("#results li.hit")).to_have_count(1)
    expect(page.locator("#results .budget-exceeded")).to_have_count(0)
    assert session.errors == [] and session.dialogs == []
