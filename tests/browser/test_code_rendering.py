"""Code in notes shows its source text exactly, in a real browser.

bleach's linkify pass escaped the already-escaped text inside code a second time, so
`psql -c "SELECT …"` was shown as `psql -c &quot;SELECT …&quot;` (notes/rendering.py now
sanitises with nh3 and linkifies inside markdown-it). Here a note holding `" & < > '` (and a
literal `&amp;`, which code must show as written, not decode) in inline code and a fenced
block is saved through the note form; the `textContent` of each rendered code element must
equal its source exactly on the note page and on an older version's page. Search results
and the evidence page show passage text (not rendered Markdown): there the code line must
appear verbatim too.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from notes.models import Document

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

INLINE = """psql -c "SELECT 1 & 2 < 3 > 0, 'x'" """.strip()
FENCED = (
    "psql -c \"SELECT * FROM jobs WHERE state <> 'done' & id > 3\"\n"
    'echo "<b>&amp;</b>" > /tmp/out && cat /tmp/out'
)
BODY = (
    "# Database runbook\n\n"
    f"Connect with `{INLINE}` first.\n\n"
    f"```sh\n{FENCED}\n```\n\n"
    "Then check the replica lag.\n"
)
TITLE = "Database runbook"


def code_texts(page, selector: str) -> list[str]:
    """The `textContent` of every element matching `selector` inside the rendered note."""
    return page.locator(f".rendered {selector}").evaluate_all("els => els.map(e => e.textContent)")


def assert_code_exact(page) -> None:
    # markdown-it ends a fenced block's code with the line break before the closing fence.
    assert code_texts(page, "p code") == [INLINE]
    assert code_texts(page, "pre code") == [FENCED + "\n"]


def test_code_in_a_note_shows_its_source_exactly(open_session, alice):
    session = open_session(alice)
    page = session.page

    # Saved through the form, as a person would.
    page.goto("/notes/new")
    page.locator("input[name=title]").fill(TITLE)
    page.locator("textarea[name=body]").fill(BODY)
    page.get_by_role("button", name="Save").click()
    expect(page.locator("main h1").first).to_have_text(TITLE)
    note = Document.objects.get(owner=alice, title=TITLE)
    # What the browser sent is what is compared against (a form sends CRLF line breaks).
    assert note.head.body.replace("\r\n", "\n") == BODY
    assert_code_exact(page)

    # A second version, so that the first is shown by the version page.
    page.get_by_role("link", name="Edit").click()
    body = page.locator("textarea[name=body]")
    body.fill(body.input_value() + "\nAsk in the on-call channel first.\n")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".messages")).to_contain_text("Note saved.")
    assert_code_exact(page)
    page.get_by_role("link", name="History").click()
    page.get_by_role("link", name="v1", exact=True).click()
    expect(page.locator("main .meta").first).to_contain_text("Version 1 of 2")
    assert_code_exact(page)

    # Search results and evidence show passage text: the code line appears as written.
    page.goto("/search?q=psql+replica&mode=lexical")
    hit = page.locator("li.hit").filter(has=page.locator(".hit-title", has_text=TITLE))
    expect(hit).to_have_count(1)
    hit_text = hit.locator(".hit-text").first.evaluate("e => e.textContent")
    assert INLINE in hit_text and "&quot;" not in hit_text and "&lt;" not in hit_text
    hit.get_by_role("link", name="Open evidence").click()
    page.wait_for_url(re.compile(r"/evidence/"))
    for selector in (".evidence-passage", ".evidence-context"):
        text = page.locator(selector).evaluate("e => e.textContent")
        assert INLINE in text and FENCED in text, (selector, text)
    assert session.errors == [] and session.dialogs == []
