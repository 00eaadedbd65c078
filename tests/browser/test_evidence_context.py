"""The evidence page's "In context" box: it opens with the marked passage
in view — the box scrolled, not the page — and a keyboard reaches it with Tab, named and
with a visible focus ring, so its text can be scrolled without a mouse."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from notes import services
from retrieval import links
from retrieval.models import Passage

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Forty steps before the cited section: ~1,500 characters of context above the passage, far
# taller than the box.
STEPS = "\n\n".join(f"Step {n}: check dashboard panel {n} for errors." for n in range(1, 41))
BODY = (
    "# Failover runbook\n\n## Checklist\n\n"
    f"{STEPS}\n\n"
    "## Promote\n\n"
    "Promote the replica with pg_ctl promote and point the failover DNS record at it.\n"
)
MAX_TABS = 40  # the top bar, the back link and the meta links come first


def test_context_box_opens_at_the_mark_and_takes_focus(open_session, alice):
    note = services.note_create(owner=alice, title="Failover runbook", body=BODY)
    passage = Passage.objects.get(document=note, is_head=True, text__contains="pg_ctl promote")
    session = open_session(alice)
    page = session.page
    page.goto(links.evidence_url(passage))

    box = page.locator("pre.evidence-context")
    mark = box.locator("mark")
    expect(mark).to_contain_text("pg_ctl promote")
    # The box has text to scroll through, and it was scrolled to the mark: the mark's top
    # lies within the box's visible area. The page itself stays at its top.
    box_rect, mark_rect, scroll_top, scroll_height, client_height = box.evaluate(
        """el => {
          const m = el.querySelector("mark").getBoundingClientRect();
          const b = el.getBoundingClientRect();
          return [{top: b.top, bottom: b.bottom}, {top: m.top, bottom: m.bottom},
                  el.scrollTop, el.scrollHeight, el.clientHeight];
        }"""
    )
    assert scroll_height > client_height
    assert scroll_top > 0
    assert box_rect["top"] <= mark_rect["top"] < box_rect["bottom"], (box_rect, mark_rect)
    assert mark_rect["bottom"] <= box_rect["bottom"], (box_rect, mark_rect)
    assert page.evaluate("window.scrollY") == 0

    # Named by its heading, reachable with Tab, with a visible focus ring.
    expect(box).to_have_attribute("tabindex", "0")
    expect(page.get_by_role("region", name="In context")).to_have_count(1)
    page.locator("body").focus()
    for _ in range(MAX_TABS):
        page.keyboard.press("Tab")
        if box.evaluate("el => el === document.activeElement"):
            break
    expect(box).to_be_focused()
    outline = box.evaluate("el => getComputedStyle(el).outlineStyle")
    assert outline not in ("none", ""), outline
    assert session.errors == []
