"""The answer page's three tiers and the stale-answer notice in Debian's chromium, at desktop
width and at 360 px: each tier says what it is in words, a best match is shown with its
passage and never as an answer's claims, no score shows until *Advanced* is opened, the page
never scrolls sideways, and a stale answer's *Re-run* asks again and compares.

`LODE_TIER_SHOTS=/some/folder` writes a full-page screenshot of each view at both widths."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from notes import services
from tests.factories import edit

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

NOTE = (
    "# Deploy runbook\n\n"
    "Rotate the staging certs with certbot before Friday.\n\n"
    "## Redis\n\n"
    "Set maxmemory-policy allkeys-lru on the cache.\n"
)
QUESTION = "When do I rotate the staging certs?"
PERMALINK = re.compile(r"/ask/(\d+)")
WIDTHS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 360, "height": 740}}


def shoot(page, name: str) -> None:
    folder = os.environ.get("LODE_TIER_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def ask(page, question: str = QUESTION):
    page.goto("/ask")
    box = page.locator("form.ask input[name=question]")
    box.fill(question)
    box.press("Enter")
    page.wait_for_url(PERMALINK)
    answer = page.locator("#answer section.answer")
    expect(answer).to_have_count(1)
    return answer


def calm(page, answer, width: int) -> None:
    """No score in the everyday view, the gate's reasons behind a closed Advanced, and the page
    fits its width."""
    advanced = answer.locator("details.answer-advanced")
    expect(advanced).to_have_count(1)
    assert advanced.get_attribute("open") is None
    everyday = answer.inner_text().split("Advanced")[0]
    assert "score" not in everyday and "threshold" not in everyday
    page.wait_for_load_state("load")
    assert page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("label", list(WIDTHS))
def test_each_tier_says_what_it_is(open_session, alice, settings, label):
    viewport = WIDTHS[label]
    services.note_create(owner=alice, title="Deploy runbook", body=NOTE)
    session = open_session(alice)
    page = session.page
    page.set_viewport_size(viewport)

    settings.LODE_RELEVANCE_THRESHOLD = 0.999999  # the relevance step drops every claim
    settings.LODE_BEST_MATCH_FLOOR = 0.000001
    answer = ask(page)
    expect(answer).to_have_attribute("data-tier", "best_match")
    expect(answer.locator(".decision-words")).to_have_text("Best match — check it")
    best = answer.locator("section.best-match")
    expect(best.locator("mark")).to_contain_text("Rotate the staging certs")
    expect(best.locator("a.evidence-link")).to_be_visible()
    expect(answer.locator("ol.claims")).to_have_count(0)
    assert "do not answer" not in answer.inner_text()
    calm(page, answer, viewport["width"])
    shoot(page, f"tier-best-match-{label}")
    answer.locator("details.answer-advanced > summary").click()
    expect(answer.locator("details.dropped")).to_be_visible()
    shoot(page, f"tier-best-match-advanced-{label}")

    settings.LODE_BEST_MATCH_FLOOR = 0.999998
    answer = ask(page)
    expect(answer).to_have_attribute("data-tier", "not_in_notes")
    expect(answer.locator(".decision-words")).to_have_text("Not in your notes")
    expect(answer.locator("section.closest h3")).to_have_text(
        "Closest passages — these do not answer the question"
    )
    expect(answer.locator("section.best-match")).to_have_count(0)
    calm(page, answer, viewport["width"])
    shoot(page, f"tier-not-in-notes-{label}")

    settings.LODE_RELEVANCE_THRESHOLD = 0.000001
    answer = ask(page)
    expect(answer).to_have_attribute("data-tier", "answer")
    expect(answer.locator(".decision-words")).to_have_text("Answered")
    expect(answer.locator("ol.claims li.claim").first).to_be_visible()
    calm(page, answer, viewport["width"])
    shoot(page, f"tier-answer-{label}")
    assert session.errors == [] and session.dialogs == []


@pytest.mark.parametrize("label", list(WIDTHS))
def test_a_stale_answer_says_so_and_reruns(open_session, alice, settings, label):
    viewport = WIDTHS[label]
    note = services.note_create(owner=alice, title="Deploy runbook", body=NOTE)
    session = open_session(alice)
    page = session.page
    page.set_viewport_size(viewport)
    settings.LODE_RELEVANCE_THRESHOLD = 0.000001
    ask(page)
    first = PERMALINK.search(page.url).group(1)
    expect(page.locator(".stale-notice")).to_have_count(0)

    edit(note, alice, NOTE + "\nRenew the prod certs in March.\n")
    page.goto(f"/ask/{first}")
    notice = page.locator("#answer .stale-notice")
    expect(notice).to_contain_text("The notes cited here changed since this answer")
    page.wait_for_load_state("load")
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    shoot(page, f"stale-notice-{label}")

    notice.get_by_role("button", name="Re-run").click()
    page.wait_for_url(re.compile(rf"/ask/(?!{first}\b)\d+"))
    expect(page.locator("#answer .rerun-compare .previous-link")).to_have_attribute(
        "href", f"/ask/{first}"
    )
    expect(page.locator("#answer .stale-notice")).to_have_count(0)
    shoot(page, f"stale-rerun-{label}")
    assert session.errors == [] and session.dialogs == []
