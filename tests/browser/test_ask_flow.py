"""The answer page in a real browser: Debian's chromium, headless,
against the live server, with the offline extractive answerer.

(a) ask a question a note answers (htmx POST) → the address bar holds the answer's
    permalink → the claim shows its verified span inside <mark> → its "Open verified
    evidence" link says verified · current; the permalink reloads the same answer; Re-run
    links back to it;
(b) ask an off-topic question → the abstention text, no claim;
(c) "ask about this note" from the note page, without htmx (a plain form POST and 303).

With LODE_SCREENSHOTS=1, (a) writes docs/screenshots/answer.png.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from notes import services
from retrieval.models import AskTrace
from retrieval.web.ask_views import NOT_IN_NOTES_WORDS

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CURRENT = re.compile(r"verified\s*·\s*current", re.IGNORECASE)
PERMALINK = re.compile(r"/ask/(\d+)(\?previous=\d+)?$")
RUNBOOK = (
    "# Deploy runbook\n\n"
    "Rotate the staging certs with certbot before Friday, then reload nginx.\n\n"
    "## Redis\n\n"
    "Set maxmemory-policy allkeys-lru on the cache. #ops\n"
)


def assert_inert(session) -> None:
    """No dialog, no page error, only lode's own static scripts, no inline handlers."""
    page = session.page
    assert session.dialogs == []
    assert session.errors == []
    sources = page.locator("script").evaluate_all("els => els.map(e => e.getAttribute('src'))")
    assert all(src and src.startswith("/static/") for src in sources), sources
    with_handlers = page.locator("*").evaluate_all(
        "els => els.filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on')))"
        ".map(e => e.outerHTML.slice(0, 80))"
    )
    assert with_handlers == []


def ask(page, question: str) -> int:
    """Ask from the answer page's form; returns the stored answer's id from the pushed URL."""
    page.goto("/ask")
    box = page.locator("form.ask input[name=question]")
    box.fill(question)
    box.press("Enter")
    page.wait_for_url(PERMALINK)
    expect(page.locator("#answer section.answer")).to_have_count(1)
    return int(PERMALINK.search(page.url).group(1))


def test_answer_with_verified_span_opens_evidence(open_session, screenshot, alice):
    note = services.note_create(owner=alice, title="Deploy runbook", body=RUNBOOK, tags="infra")
    session = open_session(alice)
    page = session.page
    trace_id = ask(page, "Which maxmemory-policy is set on the cache?")
    assert AskTrace.objects.get(pk=trace_id).user_id == alice.pk

    answer = page.locator("#answer section.answer")
    expect(answer).to_have_attribute("data-decision", "ANSWER")
    expect(answer.locator(".decision-words")).to_have_text("Answered")
    claim = answer.locator("li.claim").filter(has_text="allkeys-lru")
    expect(claim).not_to_have_count(0)
    mark = claim.first.locator("blockquote.support-text mark")
    expect(mark.first).to_contain_text("allkeys-lru")
    expect(claim.first.locator(".badge")).to_contain_text("Your note")
    expect(claim.first.locator(".provenance")).to_contain_text("version 1")
    expect(page.locator("#permalink")).to_have_value(page.url)
    assert_inert(session)
    screenshot(page, "answer")

    # The permalink is a plain GET of the stored answer: a reload shows the same claim.
    page.reload()
    expect(
        page.locator("section.answer li.claim").filter(has_text="allkeys-lru")
    ).not_to_have_count(0)
    assert AskTrace.objects.count() == 1  # reloading re-ran nothing

    # Re-run: a new stored answer that links back to this one and compares.
    page.get_by_role("button", name="Re-run").click()
    page.wait_for_url(re.compile(rf"/ask/\d+\?previous={trace_id}$"))
    expect(page.locator(".rerun-compare")).to_contain_text("Same decision")
    expect(page.locator(".rerun-compare a.previous-link")).to_have_attribute(
        "href", f"/ask/{trace_id}"
    )
    assert AskTrace.objects.count() == 2

    claim = page.locator("section.answer li.claim").filter(has_text="allkeys-lru").first
    claim.get_by_role("link", name="Open verified evidence").first.click()
    page.wait_for_url(re.compile(rf"/evidence/{note.pk}/{note.head_id}/"))
    expect(page.locator("main")).to_contain_text(CURRENT)
    expect(page.locator("main")).to_contain_text("allkeys-lru")
    assert_inert(session)


def test_off_topic_question_abstains(open_session, alice):
    services.note_create(owner=alice, title="Deploy runbook", body=RUNBOOK)
    session = open_session(alice)
    page = session.page
    ask(page, "How long should I boil a soft egg for breakfast?")
    answer = page.locator("#answer section.answer")
    expect(answer).to_have_attribute("data-decision", "ABSTAIN_NO_EVIDENCE")
    # The decision in words: the tier's name.
    expect(answer.locator(".abstain")).to_have_text(NOT_IN_NOTES_WORDS)
    expect(answer.locator("li.claim")).to_have_count(0)
    assert_inert(session)


def test_ask_about_this_note_without_htmx(open_session, alice):
    note = services.note_create(owner=alice, title="Deploy runbook", body=RUNBOOK)
    services.note_create(owner=alice, title="Other", body="Nothing about certificates here.")
    session = open_session(alice, java_script_enabled=False)
    page = session.page
    page.goto(f"/notes/{note.pk}")
    form = page.locator("form.ask-note")
    form.locator("input[name=question]").fill("When are the staging certs rotated?")
    form.get_by_role("button", name="Ask").click()
    page.wait_for_url(PERMALINK)
    answer = page.locator("section.answer")
    expect(answer).to_contain_text("About the note")
    expect(answer.locator("li.claim").filter(has_text="certbot")).not_to_have_count(0)
    trace = AskTrace.objects.get()
    assert trace.pinned_document_id == note.pk
