"""The calm default view in a real browser, at 1280 px and at 360 px:

(a) a search over a runbook written in Markdown (headings, bold, inline code, a table, a
    fenced block, a link) shows each hit's title, where it lives, its age and its text as a
    person reads it, with the query's word marked exactly; no score, rank or offset until
    "Advanced" is followed, which puts `adv=1` in the URL (and the copy-link field), shows
    them with the mode and reranker selectors, and survives a mode change made through the
    form (htmx); the page never scrolls sideways on a phone;
(b) an empty library opens on a first screen linking to New note, Sources and Ask;
(c) an off-topic question is answered "Not in your notes", in words.

`LODE_CALM_SHOTS=/some/folder` writes a full-page screenshot of each view at both widths
there, for a person to look at (off by default).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from notes import services
from tests.factories import make_source, make_source_external

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}
RUNBOOK = (
    "# Database runbook\n\n"
    "## Failover\n\n"
    "Promote the **failover** replica with `pg_ctl promote` and check *lag* first.\n\n"
    "| Setting | Value |\n"
    "| --- | --- |\n"
    "| failover_timeout | 30s |\n"
    "| max_standby_streaming_delay | 30s |\n\n"
    "```sh\n"
    'psql -c "SELECT pg_is_in_recovery()"  # failover check\n'
    "```\n\n"
    "See [the failover guide](https://example.com/failover) for more.\n"
)
MARKDOWN_MARKERS = ("##", "**", "```", "|", "`", "](")
ADVANCED_WORDS = re.compile(r"\brank \d|Evidence anchor|code points|keyword /")


def params(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def shoot(page, name: str) -> None:
    folder = os.environ.get("LODE_CALM_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def fits(page, viewport_width: int) -> None:
    """The page itself does not scroll sideways."""
    page.wait_for_load_state("load")
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport_width


def test_search_hits_read_calmly_with_details_behind_advanced(open_session, alice) -> None:
    services.note_create(owner=alice, title="Database runbook", body=RUNBOOK)
    source = make_source(alice, name="Team wiki")
    make_source_external(
        source,
        path="ops/failover-drills.md",
        title="Failover drills",
        bodies=("Failover drills run every quarter; the on-call engineer leads them.\n",),
    )
    session = open_session(alice)
    page = session.page

    for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        page.goto("/search?q=failover&mode=lexical&rerank=off")
        hits = page.locator("li.hit")
        expect(hits).to_have_count(2)
        note_hit = hits.filter(has_text="Database runbook")
        expect(note_hit.locator(".hit-where")).to_contain_text("Note › Failover · saved")
        expect(hits.filter(has_text="Failover drills").locator(".hit-where")).to_contain_text(
            "Team wiki › ops/failover-drills.md · fetched"
        )
        shown = note_hit.locator(".hit-text").first.inner_text()
        for marker in MARKDOWN_MARKERS:
            assert marker not in shown, (marker, shown)
        assert "Promote the failover replica with pg_ctl promote and check lag first." in shown
        assert "failover_timeout · 30s" in shown
        marks = note_hit.locator(".hit-text").first.locator("mark").all_inner_texts()
        assert marks and {mark.casefold() for mark in marks} == {"failover"}
        assert not ADVANCED_WORDS.search(page.locator("#results").inner_text())
        expect(page.locator("form.search select")).to_have_count(0)
        fits(page, viewport["width"])
        shoot(page, f"search-{label}")

    # Advanced: a link that puts adv=1 in the URL (no script needed) and shows the details.
    page.set_viewport_size(DESKTOP)
    page.get_by_role("link", name="Advanced", exact=True).click()
    page.wait_for_url(lambda url: params(url).get("adv") == ["1"])
    expect(page.locator("li.hit .hit-advanced").first).to_contain_text("rank 1")
    expect(page.locator("#share-url")).to_have_value(re.compile(r"adv=1"))
    expect(page.locator("form.search select[name=mode]")).to_be_visible()
    shoot(page, "search-advanced-desktop")
    # A mode change re-searches through the form (htmx) and stays in the Advanced view.
    page.locator("form.search select[name=mode]").select_option("hybrid")
    page.wait_for_url(lambda url: params(url).get("mode") == ["hybrid"])
    assert params(page.url).get("adv") == ["1"]
    expect(page.locator("#results .search-stats")).to_contain_text("hybrid search")
    page.set_viewport_size(PHONE)
    fits(page, PHONE["width"])
    shoot(page, "search-advanced-phone")
    page.get_by_role("link", name="Hide advanced").click()
    page.wait_for_url(lambda url: "adv" not in params(url))
    expect(page.locator("li.hit .hit-advanced")).to_have_count(0)
    assert session.errors == [] and session.dialogs == []


def test_an_empty_library_opens_on_a_first_screen(open_session, bob) -> None:
    session = open_session(bob)
    page = session.page
    for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        page.goto("/search")
        first = page.locator("section.first-screen")
        expect(first).to_contain_text("Your library is empty")
        for name in ("Write your first note", "Add your first source", "Ask your first question"):
            expect(first.get_by_role("link", name=name)).to_be_visible()
        fits(page, viewport["width"])
        shoot(page, f"empty-library-{label}")
    page.get_by_role("link", name="Write your first note").click()
    page.wait_for_url(re.compile(r"/notes/new$"))
    assert session.errors == [] and session.dialogs == []


def test_an_unanswered_question_says_so_in_words(open_session, alice) -> None:
    services.note_create(owner=alice, title="Database runbook", body=RUNBOOK)
    session = open_session(alice)
    page = session.page
    for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        page.goto("/ask")
        box = page.locator("form.ask input[name=question]")
        box.fill("How long should I boil a soft egg for breakfast?")
        box.press("Enter")
        page.wait_for_url(re.compile(r"/ask/\d+$"))
        answer = page.locator("#answer section.answer")
        expect(answer.locator(".decision-words")).to_have_text("Not in your notes")
        assert "ABSTAIN_NO_EVIDENCE" not in answer.inner_text()
        fits(page, viewport["width"])
        shoot(page, f"answer-abstain-{label}")
    page.goto("/ask")
    expect(page.locator(".recent-decision").first).to_have_text("Not in your notes")
    assert session.errors == [] and session.dialogs == []
