"""A stored answer whose cited note moved out of the space, in a real browser: Debian's
chromium, headless, against the live server. Bob asks in space Team (the answer quotes the
note), alice moves the note to a space only she is in, and Bob's permalink then shows the
one sentence in the claim's place and nothing of the note, at desktop width and at 360 px
(no sideways scroll). Alice, a member of both spaces, still sees the quote.

With LODE_SCREENSHOTS=1 it writes docs/screenshots/answer-hidden-claim.png and
phone-answer-hidden-claim.png.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from notes import services
from retrieval.eligibility import NO_LONGER_VISIBLE
from retrieval.models import AskTrace
from spaces.models import Membership, Role, Space
from spaces.services import document_move

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUESTION = "Which maxmemory-policy is set on the cache?"
TITLE = "Cache runbook"
QUOTE = "allkeys-lru"
PHONE = {"width": 360, "height": 740}


def test_a_moved_note_leaves_one_sentence_on_the_permalink_at_desktop_and_phone_width(
    open_session, screenshot, alice, bob
):
    team = Space.objects.create(name="Team", created_by=alice)
    vault = Space.objects.create(name="Vault", created_by=alice)
    Membership.objects.create(space=team, user=alice, role=Role.ADMIN)
    Membership.objects.create(space=team, user=bob, role=Role.EDITOR)
    Membership.objects.create(space=vault, user=alice, role=Role.ADMIN)
    note = services.note_create(
        owner=alice,
        title=TITLE,
        body=f"# {TITLE}\n\nSet maxmemory-policy {QUOTE} on the cache.\n",
        space=team,
    )
    services.note_create(
        owner=alice, title="Pager rota", body="The pager rotates every Monday.\n", space=team
    )

    bob_session = open_session(bob)
    page = bob_session.page
    page.goto("/ask")
    page.locator("form.ask select[name=space]").select_option(str(team.pk))
    box = page.locator("form.ask input[name=question]")
    box.fill(QUESTION)
    box.press("Enter")
    page.wait_for_url("**/ask/*")
    expect(page.locator("li.claim mark")).to_contain_text(QUOTE)
    answer = AskTrace.objects.get(user=bob)

    document_move(by=alice, document=note, to_space=vault)

    page.goto(f"/ask/{answer.pk}")
    claim = page.locator("li.claim")
    expect(claim).to_have_count(1)
    expect(claim).to_have_class("claim claim-hidden")
    expect(claim).to_have_text(NO_LONGER_VISIBLE)
    text = page.locator("#answer").inner_text()
    assert QUOTE not in text and TITLE not in text
    assert page.locator("a.evidence-link, a.support-title").count() == 0
    screenshot(page, "answer-hidden-claim")

    phone = open_session(bob).page
    phone.set_viewport_size(PHONE)
    phone.goto(f"/ask/{answer.pk}")
    expect(phone.locator("li.claim")).to_have_text(NO_LONGER_VISIBLE)
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(phone, "phone-answer-hidden-claim")

    alice_page = open_session(alice).page
    alice_page.goto(f"/ask/{answer.pk}")
    expect(alice_page.locator("li.claim mark")).to_contain_text(QUOTE)
    assert bob_session.errors == [] and bob_session.dialogs == []
