"""Shareable searches through Django's test client: the search page's URL
carries the query (filters included), mode and reranker; the copy-link field holds that URL
absolute and escaped; opening it in a fresh session reproduces the same hits in the same
order; htmx pushes the same canonical URL into the address bar."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings
from django.test import Client

from notes import services
from retrieval.search.pipeline import DEFAULT_MODE
from tests.factories import CACHE_NOTES

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_notes(alice):
    return [
        services.note_create(owner=alice, title=title, body=body, tags="ops")
        for title, body in CACHE_NOTES
    ]


def fresh_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def passage_ids(response) -> list[int]:
    result = response.context["result"]
    assert result is not None and not result.error, result and result.error
    return [hit.passage.pk for hit in result.hits]


class _ShareField(HTMLParser):
    """Collects the attributes of the copy-link field and of the copy button."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.fields: list[dict[str, str | None]] = []
        self.buttons: list[dict[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "input" and "data-share-url" in attributes:
            self.fields.append(attributes)
        if tag == "button" and "data-copy-link" in attributes:
            self.buttons.append(attributes)


def share_field(page: str) -> _ShareField:
    parser = _ShareField()
    parser.feed(page)
    parser.close()
    return parser


def share_url(response) -> str:
    parsed = share_field(response.content.decode())
    assert len(parsed.fields) == 1, parsed.fields
    value = parsed.fields[0]["value"]
    assert value
    return value


def test_shared_url_reproduces_hits_in_order_in_fresh_sessions(alice, alice_notes):
    first = fresh_client(alice).get("/search", {"q": "cache eviction"})
    original = passage_ids(first)
    assert len(original) >= 3  # a real ranking, not a single hit
    url = share_url(first)

    orders = [passage_ids(fresh_client(alice).get(url)) for _ in range(2)]
    assert orders == [original, original]


def test_shared_url_with_explicit_mode_and_rerank_reproduces_them(alice, alice_notes):
    response = fresh_client(alice).get(
        "/search", {"q": "cache -stampede tag:ops", "mode": "lexical", "rerank": "off"}
    )
    assert passage_ids(response)
    url = share_url(response)
    reopened = fresh_client(alice).get(url)
    assert reopened.context["result"].mode == "lexical"
    assert reopened.context["result"].rerank == "off"
    assert passage_ids(reopened) == passage_ids(response)
    # The calm view carries the mode in the form unseen; the Advanced view shows it chosen.
    assert '<input type="hidden" name="mode" value="lexical">' in reopened.content.decode()
    advanced = fresh_client(alice).get(url + "&adv=1").content.decode()
    assert '<option value="lexical" selected>' in advanced


def test_share_url_is_absolute_with_every_parameter(alice_client, alice_notes):
    response = alice_client.get("/search", {"q": "cache"})
    url = share_url(response)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("http", "testserver", "/search")
    # Defaults are spelled out, so a later change of default does not change a shared link;
    # so is the space, so the link searches the same space whoever opens it.
    assert parse_qs(parts.query, strict_parsing=True) == {
        "q": ["cache"],
        "mode": [DEFAULT_MODE],
        "rerank": [settings.LODE_RERANK],
        "space": ["all"],
    }


HOSTILE_QUERY = 'cache "hit ratio" -sourdough tag:ops & x=<b> #frag ✓ \'quote'


def test_share_url_escapes_query_in_html_and_in_url(alice_client, alice_notes):
    response = alice_client.get("/search", {"q": HOSTILE_QUERY, "mode": "lexical", "rerank": "off"})
    page = response.content.decode()
    url = share_url(response)
    assert parse_qs(urlsplit(url).query, strict_parsing=True) == {
        "q": [HOSTILE_QUERY],
        "mode": ["lexical"],
        "rerank": ["off"],
        "space": ["all"],
    }
    # Percent-encoded in the URL, and its separators HTML-escaped in the attribute.
    assert "#" not in url and " " not in url and "<" not in url and '"' not in url
    assert 'value="http://testserver/search?q=cache+%22hit+ratio%22' in page
    assert "&amp;mode=lexical&amp;rerank=off" in page


def test_copy_button_needs_javascript_and_field_is_read_only(alice_client, alice_notes):
    parsed = share_field(alice_client.get("/search", {"q": "cache"}).content.decode())
    assert "readonly" in parsed.fields[0]
    # Hidden until static/share.js reveals it; without JavaScript the field is the control.
    assert len(parsed.buttons) == 1 and "hidden" in parsed.buttons[0]


def test_no_share_field_without_a_query_or_with_an_error(alice_client, alice_notes):
    for params in ({}, {"q": "  "}, {"q": "cache", "mode": "telepathy"}):
        page = alice_client.get("/search", params).content.decode()
        assert share_field(page).fields == [], params


def test_htmx_pushes_the_canonical_url(alice_client, alice_notes):
    response = alice_client.get("/search", {"q": "cache"}, headers={"HX-Request": "true"})
    pushed = response["HX-Push-Url"]
    assert pushed.startswith("/search?")
    assert parse_qs(urlsplit(pushed).query) == {
        "q": ["cache"],
        "mode": [DEFAULT_MODE],
        "rerank": [settings.LODE_RERANK],
        "space": ["all"],
    }
    # The swapped partial carries the copy-link field for the same URL.
    assert share_url(response) == "http://testserver" + pushed


def test_full_page_does_not_set_push_header(alice_client, alice_notes):
    assert "HX-Push-Url" not in alice_client.get("/search", {"q": "cache"})


def test_shared_link_shows_another_user_nothing_of_the_owners(alice, bob, alice_notes):
    """Sharing between users is not there yet: another user opening the link sees only what
    they may see (today: their own notes), never the owner's passages."""
    url = share_url(fresh_client(alice).get("/search", {"q": "cache"}))
    response = fresh_client(bob).get(url)
    assert passage_ids(response) == []
    assert "Redis cache eviction" not in response.content.decode()


# --- a search link into a shared space --------------------------------------------


@pytest.fixture
def team(alice, bob):
    """A shared space: alice its admin, bob a viewer; the cache notes live in it, and alice
    has one more cache note in her personal space that bob must never see."""
    from spaces.models import Membership, Role, Space

    space = Space.objects.create(name="Team", created_by=alice)
    Membership.objects.create(space=space, user=alice, role=Role.ADMIN)
    Membership.objects.create(space=space, user=bob, role=Role.VIEWER)
    for title, body in CACHE_NOTES:
        services.note_create(owner=alice, title=title, body=body, tags="ops", space=space)
    services.note_create(
        owner=alice, title="Private cache diary", body="My cache thoughts, not for the team."
    )
    return space


def test_a_space_search_link_means_the_same_to_another_member(alice, bob, team):
    url = share_url(fresh_client(alice).get("/search", {"q": "cache", "space": team.pk}))
    assert parse_qs(urlsplit(url).query)["space"] == [str(team.pk)]
    sent = passage_ids(fresh_client(alice).get(url))
    opened = fresh_client(bob).get(url)
    assert sent and passage_ids(opened) == sent
    assert "Private cache diary" not in opened.content.decode()
    # Everything found is in the space, none of alice's personal notes.
    assert {hit.passage.document.space_id for hit in opened.context["result"].hits} == {team.pk}


def test_a_space_search_link_says_who_can_open_it(alice, bob, team):
    page = fresh_client(alice).get("/search", {"q": "cache", "space": team.pk}).content.decode()
    assert "Members of Team (1 other) can open this link" in page
    everything = fresh_client(alice).get("/search", {"q": "cache", "space": "all"})
    assert "a colleague who opens the link sees results" in everything.content.decode()


def test_a_non_member_opening_a_space_link_sees_no_access_and_nothing_else(alice, team):
    from django.contrib.auth import get_user_model

    dave = get_user_model().objects.create_user("dave", "dave@example.com", "pw-dave-123")
    url = share_url(fresh_client(alice).get("/search", {"q": "cache", "space": team.pk}))
    response = fresh_client(dave).get(url)
    page = response.content.decode()
    assert response.status_code == 404
    assert "have access to this" in page
    for secret in ("Team", "Redis cache eviction", "passage"):
        assert secret not in page
    # The same page as a space that does not exist at all.
    missing = fresh_client(dave).get("/search", {"q": "cache", "space": 999_999})
    assert missing.status_code == 404
    assert "have access to this" in missing.content.decode()


def test_the_space_filter_in_the_query_narrows_like_the_parameter(alice, bob, team):
    alice_client = fresh_client(alice)
    by_param = passage_ids(alice_client.get("/search", {"q": "cache", "space": team.pk}))
    by_filter = passage_ids(alice_client.get("/search", {"q": "cache space:team", "space": "all"}))
    assert by_param and by_filter == by_param
    # A space the user is not in is not a way in: it matches nothing and says so.
    response = fresh_client(bob).get("/search", {"q": "cache space:personal", "space": "all"})
    result = response.context["result"]
    assert all(hit.passage.document.space.personal_of_id == bob.pk for hit in result.hits)
