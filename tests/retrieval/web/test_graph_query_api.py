"""`POST /api/graph/query`: discovery by lookups, the answer's shape
(query, parameters, generation, rows with kind/basis/tier, evidence with verified links),
422 with a clear message for each refusal, authentication, CSRF and spaces; and the
`/graph/query` page: its form, shareable URL, table, evidence, picture and error box."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from notes import services
from retrieval.index.edges import current_generation
from spaces import services as space_services
from tests import factories

pytestmark = pytest.mark.django_db

URL = "/api/graph/query"


def post(client: Client, body: object, **kwargs):
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post(URL, data=data, content_type="application/json", **kwargs)


@pytest.fixture
def linked(alice):
    target = factories.note(alice, "Backup Policy", "Snapshots are kept for 35 days.")
    middle = factories.note(alice, "Restore runbook", "Restore per [[Backup Policy]] first.")
    start = factories.note(alice, "Incident index", "Start at [[Restore runbook]].")
    return start, middle, target


def test_neighbours_by_lookup_title(alice_client, linked):
    _, middle, target = linked
    body = {
        "lookups": ["restore runbook"],
        "query": {"op": "neighbours", "seed": middle.pk, "direction": "out", "kind": "links_to"},
    }
    response = post(alice_client, body)
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["query"] == body["query"]
    assert data["parameters"]["lookups"] == ["restore runbook"]
    assert data["parameters"]["max_rows"] == 20 and data["parameters"]["max_hops"] == 4
    assert data["generation"] == current_generation()
    assert data["candidates"][0] == {
        **data["candidates"][0],
        "document_id": middle.pk,
        "match": "title",
    }
    [row] = data["rows"]
    assert (row["from"]["id"], row["to"]["id"], row["kind"]) == (middle.pk, target.pk, "links_to")
    assert row["basis"]["rule"] == "wiki-link" and row["tier"] == "note"
    [evidence] = data["evidence"]
    assert "[[Backup Policy]]" in evidence["text"]
    assert alice_client.get(evidence["evidence_url"]).status_code == 200
    assert data["evidence_chars"] == len(evidence["text"]) <= 2400


def test_path_between_two_lookups(alice_client, linked):
    start, middle, target = linked
    body = {
        "lookups": ["Incident index", "Backup Policy"],
        "query": {"op": "path", "from": start.pk, "to": target.pk, "max_hops": 2},
    }
    data = post(alice_client, body).json()
    assert [(r["from"]["id"], r["to"]["id"], r["hop"]) for r in data["rows"]] == [
        (start.pk, middle.pk, 1),
        (middle.pk, target.pk, 2),
    ]
    assert data["query"]["kinds"] == ["links_to", "contains", "annotates"]
    assert data["query"]["follow"] == "both"
    assert [r["direction"] for r in data["rows"]] == ["forward", "forward"]
    # From the far end: the same edges, each followed against its arrow.
    back = {**body, "query": {**body["query"], "from": target.pk, "to": start.pk}}
    back["lookups"] = ["Backup Policy", "Incident index"]
    data = post(alice_client, back).json()
    assert [(r["from"]["id"], r["direction"]) for r in data["rows"]] == [
        (middle.pk, "backward"),
        (start.pk, "backward"),
    ]
    only_out = {**back, "query": {**back["query"], "follow": "out"}}
    assert post(alice_client, only_out).json()["rows"] == []


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"query": {"kind": "cites"}}, "query.kind"),
        ({"extra": True}, "extra: unknown property"),
        ({"query": {"op": "path", "max_hops": 5}}, "1 to 4 hops"),
        ({"query": {"seed": "SEED"}}, "query.seed"),
        ({"query": {"direction": "sideways"}}, "query.direction"),
        ({"lookups": ["a", "b", "c", "d"]}, "at most 3"),
        ({"lookups": []}, "at least one"),
    ],
)
def test_refusals_are_422_with_a_clear_message(alice_client, linked, change, words):
    _, middle, target = linked
    body = {
        "lookups": ["restore runbook"],
        "query": {"op": "neighbours", "seed": middle.pk, "direction": "out", "kind": "links_to"},
    }
    query = {**body["query"], **change.pop("query", {})}
    if query["op"] == "path":
        query = {"op": "path", "from": middle.pk, "to": target.pk, "max_hops": query["max_hops"]}
    if query.get("seed") == "SEED":
        query["seed"] = str(middle.pk)
    response = post(alice_client, {**body, **change, "query": query})
    assert response.status_code == 422
    assert words in response.json()["detail"]


def test_a_body_that_is_not_json_is_400(alice_client):
    assert post(alice_client, "{not json").status_code == 400


def test_a_seed_the_lookups_did_not_find_is_404(alice_client, linked):
    """A well-formed query naming a document its lookups did not discover: 404, saying so."""
    body = {
        "lookups": ["restore runbook"],
        "query": {"op": "neighbours", "seed": 999_999_999, "direction": "out", "kind": "links_to"},
    }
    response = post(alice_client, body)
    assert response.status_code == 404
    assert "Seeds must come from discovery" in response.json()["detail"]


def test_another_users_document_is_never_a_seed(alice_client, bob):
    bobs = factories.note(bob, "Bob secret", "[[Bob other]]")
    body = {
        "lookups": ["Bob secret"],
        "query": {"op": "neighbours", "seed": bobs.pk, "direction": "out", "kind": "links_to"},
    }
    response = post(alice_client, body)
    assert response.status_code == 404
    assert "candidates: none" in response.json()["detail"]


def test_space_narrows_and_a_foreign_space_is_404(alice, alice_client, bob, linked):
    shared = space_services.space_create(by=bob, name="Bobs")
    body = {
        "lookups": ["restore runbook"],
        "query": {"op": "neighbours", "seed": linked[1].pk, "direction": "out", "kind": "links_to"},
        "space": shared.pk,
    }
    assert post(alice_client, body).status_code == 404
    mine = space_services.space_create(by=alice, name="Team")
    response = post(alice_client, {**body, "space": mine.pk})
    assert response.status_code == 404  # the runbook is not in Team: not discovered there
    services.note_create(owner=alice, title="Restore runbook", body="in team", space=mine)
    assert post(alice_client, {**body, "space": mine.pk}).status_code == 404  # other id


def test_login_and_csrf_are_required(alice, linked):
    body = {
        "lookups": ["restore runbook"],
        "query": {"op": "neighbours", "seed": linked[1].pk, "direction": "out", "kind": "links_to"},
    }
    assert post(Client(), body).status_code == 401
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert post(strict, body).status_code == 403


def test_the_schema_documents_the_body_and_refusals(alice_client):
    schema = alice_client.get("/api/openapi.json").json()
    operation = schema["paths"][URL]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body["additionalProperties"] is False and "lookups" in body["properties"]
    assert {"200", "400", "401", "404", "422"} <= set(operation["responses"])


# --- the page ---------------------------------------------------------------------------------


def test_page_requires_login(client):
    response = client.get("/graph/query")
    assert response.status_code == 302 and "/accounts/login" in response["Location"]


def test_page_runs_a_shareable_query(alice_client, linked):
    start, _, target = linked
    response = alice_client.get(
        "/graph/query",
        {"lookup": ["Incident index", "Backup Policy"], "op": "path", "max_hops": "3"},
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert 'class="gq-rows"' in html and "<svg" in html
    assert "Restore runbook" in html and "wiki-link" in html
    assert "/evidence/" in html
    assert "lookup=Incident+index" in html and "op=path" in html  # the shareable URL
    assert f"seed={start.pk}" in html and f"to={target.pk}" in html


def test_page_shows_refusals_in_an_error_box(alice_client, linked, bob):
    bobs = factories.note(bob, "Bob secret", "b")
    for params in (
        {"lookup": "Restore runbook", "op": "neighbours", "kind": "cites"},
        {"lookup": "Restore runbook", "op": "path", "max_hops": "9"},
        {"lookup": "Restore runbook", "op": "neighbours", "seed": str(bobs.pk)},
        {"lookup": "Restore runbook", "op": "neighbours", "seed": "abc"},
    ):
        response = alice_client.get("/graph/query", params)
        assert response.status_code == 200
        html = response.content.decode()
        assert 'class="error graph-error"' in html, params
        assert "Bob secret" not in html


def test_page_escapes_titles(alice, alice_client):
    evil = factories.note(alice, "<script>alert(1)</script>", "x")
    factories.note(alice, "Links evil", "[[<script>alert(1)</script>]]")
    response = alice_client.get(
        "/graph/query", {"lookup": "Links evil", "op": "neighbours", "kind": "links_to"}
    )
    html = response.content.decode()
    assert evil.title not in html and "&lt;script&gt;" in html


# --- a question in words on the page --------------------------------------


def test_question_in_words_redirects_to_the_query_it_became(alice, alice_client):
    from tests import factories

    target = factories.note(alice, "Backup Policy", "Keep 35 days.")
    factories.note(alice, "Restore runbook", "Restore per [[Backup Policy]].")
    response = alice_client.post("/graph/ask", {"question": "what links to Backup Policy?"})
    assert response.status_code == 302
    page = alice_client.get(response["Location"])
    html = page.content.decode()
    assert "Restore runbook" in html and f"seed={target.pk}" in response["Location"]
    assert "Read by lode" in html  # the rules, not a model, made the query


def test_question_in_words_refused_shows_why_and_runs_nothing(alice, alice_client):
    response = alice_client.post("/graph/ask", {"question": "tell me a joke"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "Not answered." in html and "gq-rows" not in html
    assert "tell me a joke" in html  # kept in the box, escaped by the template


def test_question_in_words_needs_csrf_and_login(alice):
    from django.test import Client

    assert Client().post("/graph/ask", {"question": "what links to X"}).status_code == 302
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post("/graph/ask", {"question": "what links to X"}).status_code == 403


# --- the graph of a search's results ----------------------------------------


def test_results_graph_draws_the_hits_and_their_links(alice, alice_client):
    from tests import factories

    factories.note(alice, "Team Falcon", "Pager alias falcon-pager.")
    factories.note(alice, "Billing API", "Zebracorn billing. On-call: [[Team Falcon]].")
    page = alice_client.get("/graph/results", {"q": "zebracorn", "mode": "lexical"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "<svg" in html and "graph-picture" in html
    results, _, linked = html.partition("One link away")
    assert "Billing API" in results and "Team Falcon" in linked


def test_results_graph_never_shows_what_the_user_cannot_see(alice, bob, bob_client):
    from tests import factories

    factories.note(alice, "Secret Falcon", "Hidden.")
    factories.note(bob, "Bob zebracorn", "Zebracorn notes, see [[Secret Falcon]].")
    factories.note(alice, "Alice zebracorn", "Zebracorn too, [[Secret Falcon]].")
    html = bob_client.get("/graph/results", {"q": "zebracorn", "mode": "lexical"}).content
    assert b"Bob zebracorn" in html
    assert b"Secret Falcon" not in html and b"Alice zebracorn" not in html


def test_search_page_links_to_its_graph(alice, alice_client):
    from tests import factories

    factories.note(alice, "Zebracorn", "zebracorn")
    html = alice_client.get("/search", {"q": "zebracorn", "mode": "lexical"}).content.decode()
    assert "/graph/results?q=zebracorn" in html
