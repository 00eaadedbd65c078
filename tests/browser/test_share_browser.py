"""Sharing a search with a colleague, in a real browser.

alice searches in the shared space "Team", copies the link from the page's copy-link field,
and sends it: bob (a viewer of Team), in a browser context of his own, sees the same results
in the same order — none of alice's private notes, none of his own; dave (no membership)
sees the no-access page, which names no title, count or snippet.

Screenshots at 1280 and 360 px wide go to /tmp/shots/h4/ when LODE_SHOTS_DIR is unset and
the folder can be made (they are for a person to look at; nothing is asserted on them).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from retrieval.index.sync import sync_vectors
from spaces.models import Membership, Role, Space, personal_space
from tests.access_world import world_note
from tests.factories import CACHE_NOTES

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUERY = "cache"
PHONE = {"width": 360, "height": 740}
SHOTS = Path(os.environ.get("LODE_SHOTS_DIR", "/tmp/shots/h4"))
# Words that only the private notes hold: they must show on nobody's shared results.
ALICE_PRIVATE = "Cache zeppelin diary"
BOB_PRIVATE = "Cache xylophone list"


def shoot(page, name: str) -> None:
    """Full-page screenshot `name`.png into SHOTS, for a person to look at."""
    try:
        SHOTS.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def hit_keys(page) -> list[str]:
    """The hits in order, each named by its evidence link (document, version, passage and
    hash) without the search parameters appended to it."""
    hrefs = page.locator("li.hit a.evidence-link").evaluate_all(
        "links => links.map(link => link.getAttribute('href'))"
    )
    return [href.split("?", 1)[0] for href in hrefs]


@pytest.fixture
def team(db) -> dict[str, object]:
    alice = User.objects.create_user("alice", "alice@example.com", "pw")
    bob = User.objects.create_user("bob", "bob@example.com", "pw")
    dave = User.objects.create_user("dave", "dave@example.com", "pw")
    space = Space.objects.create(name="Team", created_by=alice)
    Membership.objects.create(space=space, user=alice, role=Role.ADMIN)
    Membership.objects.create(space=space, user=bob, role=Role.VIEWER)
    titles = []
    for title, body in CACHE_NOTES:
        world_note(alice, space, title, body)
        titles.append(title)
    world_note(
        alice,
        personal_space(alice),
        ALICE_PRIVATE,
        "The cache of zeppelin plans: private to alice, cache cache.",
    )
    world_note(
        bob, personal_space(bob), BOB_PRIVATE, "Cache the xylophone scores; bob's own cache."
    )
    return {"alice": alice, "bob": bob, "dave": dave, "space": space, "titles": titles}


def test_shared_search_link_means_the_same_to_members_and_nothing_to_others(
    open_session, live_server, team, private_vectors
) -> None:
    space: Space = team["space"]
    sync_vectors()  # both legs (the default, hybrid) rank what the link reproduces

    # alice: search in Team, as the page offers it (the space select), then copy the link.
    alice = open_session(team["alice"])
    alice.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page = alice.page
    page.goto("/search")
    page.locator("form.search select[name=space]").select_option(str(space.pk))
    box = page.locator("form.search input[name=q]")
    box.fill(QUERY)
    box.press("Enter")
    page.wait_for_url(lambda url: parse_qs(urlsplit(url).query).get("q") == [QUERY])
    expect(page.locator("li.hit").first).to_be_visible()
    sent = hit_keys(page)
    assert len(sent) >= 3, sent  # a real ranking, not one lone hit
    expect(page.locator("#results")).not_to_contain_text("zeppelin")
    expect(page.locator("#results")).not_to_contain_text("being indexed for meaning search")
    field = page.locator("[data-share-url]")
    expect(page.locator(".share-audience")).to_contain_text("Team")
    page.locator("[data-copy-link]").click()
    expect(page.locator("[data-copy-status]")).to_contain_text("copied")
    link = page.evaluate("navigator.clipboard.readText()")
    assert link == field.input_value()
    assert parse_qs(urlsplit(link).query).get("space") == [str(space.pk)], link
    shoot(page, "share-alice-1280")
    page.set_viewport_size(PHONE)
    shoot(page, "share-alice-360")

    # bob: the same link, his own browser context and session.
    bob = open_session(team["bob"])
    bob.page.goto(link)
    expect(bob.page.locator("li.hit").first).to_be_visible()
    assert hit_keys(bob.page) == sent
    results = bob.page.locator("#results")
    expect(results).not_to_contain_text("zeppelin")
    expect(results).not_to_contain_text("xylophone")
    shoot(bob.page, "share-bob-1280")
    bob.page.set_viewport_size(PHONE)
    shoot(bob.page, "share-bob-360")

    # dave: no access, and nothing of what the link holds.
    dave = open_session(team["dave"])
    response = dave.page.goto(link)
    assert response is not None and response.status == 404
    expect(dave.page.locator("h1")).to_have_text("You don't have access to this")
    content = dave.page.content()
    for title in [*team["titles"], "Team", ALICE_PRIVATE]:
        assert title not in content, title
    expect(dave.page.locator("li.hit")).to_have_count(0)
    shoot(dave.page, "share-dave-1280")
    dave.page.set_viewport_size(PHONE)
    shoot(dave.page, "share-dave-360")

    for session in (alice, bob, dave):
        assert session.errors == [] and session.dialogs == [], (session.errors, session.dialogs)
