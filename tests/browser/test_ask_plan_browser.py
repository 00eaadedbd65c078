"""The retrieval plan under *Advanced* on the answer page, in Debian's chromium at desktop
(1280 px) and phone (360 px) width: asked with a period the question names, the plan's words
say what the question asks for and what it was narrowed to, and the page does not scroll
sideways on a phone.

`LODE_PLAN_SHOTS=/some/folder` writes a screenshot of the opened plan at both widths there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from notes import services

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PERMALINK = re.compile(r"/ask/(\d+)$")
WIDTHS = {"desktop": {"width": 1280, "height": 860}, "phone": {"width": 360, "height": 740}}


@pytest.mark.parametrize("width", list(WIDTHS))
def test_the_plan_reads_in_words_under_advanced(open_session, alice, width):
    services.note_create(
        owner=alice,
        title="Ops sync 2024-05-14",
        body="# Ops sync 2024-05-14\n\nWe decided backups move to 03:30 UTC.\n",
    )
    services.note_create(
        owner=alice,
        title="Ops sync 2024-06-11",
        body="# Ops sync 2024-06-11\n\nWe decided backups move to 04:00 UTC.\n",
    )
    session = open_session(alice)
    page = session.page
    page.set_viewport_size(WIDTHS[width])
    page.goto("/ask")
    box = page.locator("form.ask input[name=question]")
    box.fill("What did we decide about backups in May 2024?")
    box.press("Enter")
    page.wait_for_url(PERMALINK)
    advanced = page.locator("details.answer-advanced")
    advanced.locator("summary").first.click()
    plan = advanced.locator("details.answer-plan")
    expect(plan).to_have_count(1)
    plan.locator("summary").click()
    lines = plan.locator("ul.plan-lines li")
    expect(lines.first).to_contain_text("Asks for a decision taken")
    expect(plan).to_contain_text("Narrowed to: notes dated 2024-05-01 to 2024-05-31")
    expect(plan).to_contain_text("Links are followed only if the graph rule")
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTHS[width]["width"]
    assert session.errors == []
    folder = os.environ.get("LODE_PLAN_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        plan.scroll_into_view_if_needed()
        page.screenshot(path=str(Path(folder) / f"ask-plan-{width}.png"), full_page=True)
