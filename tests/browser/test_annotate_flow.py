"""Annotating a snapshot in a real browser: Debian's chromium, headless,
against the live server. A selection inside #snapshot-text, made after astral characters
(each two UTF-16 units in JavaScript), is sent as code-point offsets the server accepts;
the annotation is listed, escaped, on the page; bob's session cannot post to alice's
external."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from externals.models import Annotation
from tests.factories import make_external

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BODY = "Otters 🦦🦦 and 𝔣𝔯𝔞𝔨𝔱𝔲𝔯 letters.\nThe cache needs allkeys-lru <b>now</b>.\n"
QUOTE = "allkeys-lru <b>now</b>"


def select_units(page, start: int, end: int) -> None:
    """Select UTF-16 units [start, end) of the snapshot text, as a mouse drag would."""
    page.evaluate(
        """([start, end]) => {
            const node = document.getElementById("snapshot-text").firstChild;
            const range = document.createRange();
            range.setStart(node, start);
            range.setEnd(node, end);
            const selection = document.getSelection();
            selection.removeAllRanges();
            selection.addRange(range);
            document.getElementById("snapshot-text")
                .dispatchEvent(new MouseEvent("mouseup", {bubbles: true}));
        }""",
        [start, end],
    )


def test_select_and_annotate_with_astral_characters(alice, bob, open_session):
    external = make_external(alice, "Cache page", BODY)
    session = open_session(alice)
    page = session.page
    page.goto(f"/externals/{external.pk}/")
    # The conversion helpers, on astral text.
    assert page.evaluate("window.lodeAnnotate.codePointsBefore('🦦a🦦b', 5)") == 3
    assert page.evaluate("window.lodeAnnotate.unitsBefore('🦦a🦦b', 3)") == 5
    utf16_start = len(BODY[: BODY.index(QUOTE)].encode("utf-16-le")) // 2
    select_units(page, utf16_start, utf16_start + len(QUOTE))
    expect(page.locator("[data-annotate-quote]")).to_have_text(QUOTE)
    page.locator("#annotation-text").fill("Remember to <i>check</i> this")
    page.locator("[data-annotate-submit]").click()
    expect(page.locator(".annotation.anchored")).to_have_count(1)
    annotation = Annotation.objects.get()
    assert annotation.start == BODY.index(QUOTE)  # code points, not UTF-16 units
    assert annotation.quote == QUOTE
    item = page.locator(".annotation.anchored")
    expect(item.locator(".annotation-quote")).to_have_text(QUOTE)
    expect(item.locator(".annotation-text")).to_have_text("Remember to <i>check</i> this")
    assert session.errors == [] and session.dialogs == []

    other = open_session(bob).page
    response = other.request.post(
        f"/externals/{external.pk}/annotations/",
        form={"version": str(external.head_id), "start": "0", "end": "6", "quote": "Otters"},
    )
    assert response.status in (403, 404)  # CSRF refusal or 404: never created
    assert Annotation.objects.count() == 1
