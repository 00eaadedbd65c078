"""Graph expansion on the search page, the answer page and the API: the
*Follow links* box and `follow_links` parameter, "via link from X" on what was added, why
expansion ran or was skipped, and parameter validation."""

from __future__ import annotations

import re
from html import unescape

import pytest

from retrieval.models import AskTrace
from tests import factories
from tests.factories import (
    FALCON_SPAN,
    ON_CALL_QUESTION,
    service_and_team_notes,
)

pytestmark = pytest.mark.django_db

SINGLE = "What does Billing API take from checkout?"


def text_of(response) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", response.content.decode()))


def words(text: str) -> str:
    """The page's words, one space apart, without the spaces tags left inside quotes and
    before punctuation."""
    text = " ".join(text.split())
    return re.sub(r"\s+([”:.,])", r"\1", text).replace("“ ", "“")


def test_search_page_follow_links_shows_via_link_and_why(alice, alice_client):
    service_and_team_notes(alice)
    page = alice_client.get(
        "/search", {"q": SINGLE, "mode": "lexical", "rerank": "off", "follow": "1"}
    )
    assert page.status_code == 200
    html = page.content.decode()
    shown = words(text_of(page))
    assert 'name="follow" value="1" checked' in html
    assert "Links followed — you asked to follow links" in shown
    assert "via link from “Billing API”" in shown and 'data-kind="links_to"' in html
    # The rule and its offsets are the tooltip of the Advanced view only; otherwise words.
    assert "rule wiki-link" not in html and 'title="rule:' not in html
    assert 'title="a link written in the note"' in html
    advanced = alice_client.get(
        "/search", {"q": SINGLE, "mode": "lexical", "rerank": "off", "follow": "1", "adv": "1"}
    ).content.decode()
    assert "rule wiki-link v1" in advanced and 'title="rule: asked"' in advanced
    assert FALCON_SPAN.split(" in ")[0] in shown
    assert 'class="hit hit-expanded"' in html
    # The shareable link keeps the choice.
    assert "follow=1" in html


def test_search_page_says_why_links_were_not_followed(alice, alice_client):
    service_and_team_notes(alice)
    page = alice_client.get("/search", {"q": SINGLE, "mode": "lexical", "rerank": "off"})
    # The rule's "not followed" is an internal of the Advanced view.
    assert "Links not followed" not in words(text_of(page))
    page = alice_client.get(
        "/search", {"q": SINGLE, "mode": "lexical", "rerank": "off", "adv": "1"}
    )
    shown = words(text_of(page))
    assert "Links not followed — a single-hop question" in shown
    assert 'title="rule: single hop"' in page.content.decode()
    assert "via link from" not in shown
    assert 'name="follow" value="1" checked' not in page.content.decode()
    # The rule decides by itself for a relational question.
    decided = alice_client.get(
        "/search", {"q": ON_CALL_QUESTION, "mode": "lexical", "rerank": "off"}
    )
    shown = words(text_of(decided))
    assert "Links followed — the question asks who stands behind" in shown
    assert "via link from" in shown
    # follow=0 never follows, whatever the rule would say.
    never = alice_client.get(
        "/search", {"q": ON_CALL_QUESTION, "mode": "lexical", "rerank": "off", "follow": "0"}
    )
    shown = words(text_of(never))
    assert "Links not followed — you asked not to follow links" in shown
    assert "via link from" not in shown


def test_search_page_labels_inferred_edges(alice, alice_client):
    factories.note(alice, "Ledger DB", "Ledger DB snapshots run at 02:00.")
    factories.note(alice, "Billing API", "On call for Billing API uses Ledger DB.")
    # The page does not follow inferred edges; the API may ask for them.
    page = alice_client.get(
        "/search", {"q": "on call billing", "mode": "lexical", "rerank": "off", "follow": "1"}
    )
    assert "Ledger DB snapshots" not in text_of(page)
    api = alice_client.get(
        "/api/search/",
        {
            "q": "on call billing",
            "mode": "lexical",
            "rerank": "off",
            "follow_links": "true",
            "follow_inferred": "true",
        },
    ).json()
    [added] = [h for h in api["hits"] if h["via"]]
    assert added["via"]["inferred"] is True and added["via"]["tier"] == "inferred"
    assert added["via"]["kind"] == "mentions"


def test_search_api_reports_expansion_and_via(alice, alice_client):
    service, team = service_and_team_notes(alice)
    body = alice_client.get(
        "/api/search/",
        {"q": SINGLE, "mode": "lexical", "rerank": "off", "follow_links": "true"},
    ).json()
    assert body["expansion"]["ran"] is True and body["expansion"]["rule"] == "asked"
    [added] = [h for h in body["hits"] if h["via"]]
    assert added["document_id"] == team.pk
    via = added["via"]
    assert via["seed_document_id"] == service.pk and via["direction"] == "out"
    assert via["basis"]["rule"] == "wiki-link" and via["basis"]["inferred"] is False
    assert body["expansion"]["added"][0]["passage_id"] == added["passage_id"]
    skipped = alice_client.get("/api/search/", {"q": SINGLE, "mode": "lexical"}).json()
    assert skipped["expansion"]["ran"] is False
    assert skipped["expansion"]["rule"] == "single hop"
    assert all(h["via"] is None for h in skipped["hits"])


@pytest.mark.parametrize("value", ["maybe", "2", "yes please"])
def test_search_api_rejects_a_non_boolean_follow_links(alice_client, value):
    response = alice_client.get("/api/search/", {"q": "billing", "follow_links": value})
    assert response.status_code == 422


@pytest.mark.parametrize("value", ["yes", 1, "true", [True], {"x": 1}])
def test_ask_api_rejects_a_non_boolean_follow_links(alice_client, value):
    response = alice_client.post(
        "/api/ask",
        {"question": "billing", "follow_links": value},
        content_type="application/json",
    )
    assert response.status_code == 422


def test_ask_api_follow_links_and_stored_expansion(alice, alice_client):
    _, team = service_and_team_notes(alice)
    response = alice_client.post(
        "/api/ask",
        {"question": SINGLE, "mode": "lexical", "follow_links": True},
        content_type="application/json",
    )
    assert response.status_code == 200
    body = response.json()
    assert body["expansion"]["ran"] is True and body["expansion"]["follow_links"] is True
    assert [row["document_id"] for row in body["expansion"]["added"]] == [team.pk]
    stored = alice_client.get(f"/api/ask/{body['trace_id']}").json()
    assert stored["expansion"] == body["expansion"]
    # An answer stored before expansion existed: null, not an error.
    old = AskTrace.objects.get(pk=body["trace_id"])
    old.trace = {k: v for k, v in old.trace.items() if k != "expansion"}
    old.save(update_fields=["trace"])
    assert alice_client.get(f"/api/ask/{old.pk}").json()["expansion"] is None


def test_ask_page_follow_links_box_and_via_link(alice, alice_client):
    service_and_team_notes(alice)
    response = alice_client.post(
        "/ask", {"question": SINGLE, "mode": "lexical", "follow_links": "1"}, follow=True
    )
    assert response.status_code == 200
    shown = words(text_of(response))
    assert "Links followed — you asked to follow links" in shown
    assert "Team Falcon — via link from “Billing API”" in shown
    trace = AskTrace.objects.latest("pk")
    assert trace.trace["settings"]["follow_links"] is True
    html = response.content.decode()
    # Re-run keeps the choice.
    assert re.search(r'name="follow_links" value="1"', html)
    # Without the box, the rule decides (single hop here: skipped, said in plain words).
    again = alice_client.post("/ask", {"question": SINGLE, "mode": "lexical"}, follow=True)
    shown = words(text_of(again))
    assert "Links not followed — the question does not ask how notes connect" in shown
    assert "single-hop" not in shown
    assert "via link from" not in shown
