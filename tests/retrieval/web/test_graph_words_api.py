"""`POST /api/graph/ask`: login, CSRF, eligibility and spaces, the input
errors, and both paths (rules offline, the two model stages against a fake model server)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from notes import services
from retrieval.models import EgressLog
from spaces import services as space_services
from tests import factories

pytestmark = pytest.mark.django_db

URL = "/api/graph/ask"


def post(client: Client, body: dict):
    return client.post(URL, data=json.dumps(body), content_type="application/json")


@pytest.fixture
def linked(alice):
    policy = factories.note(alice, "Backup Policy", "Snapshots are kept for 35 days.")
    runbook = factories.note(alice, "Restore runbook", "Restore per [[Backup Policy]] first.")
    return policy, runbook


def test_anonymous_is_401_and_session_post_needs_csrf(alice, linked, offline):
    assert post(Client(), {"question": "what links to Backup Policy"}).status_code == 401
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert post(strict, {"question": "what links to Backup Policy"}).status_code == 403


def test_offline_rules_answer(alice_client, linked, offline):
    policy, runbook = linked
    response = post(alice_client, {"question": "What links to Backup Policy?"})
    assert response.status_code == 200
    data = response.json()
    assert data["answered"] is True and data["path"] == "rules" and data["rule"] == "links-in"
    assert data["query"] == {
        "op": "neighbours",
        "seed": policy.pk,
        "direction": "in",
        "kind": "links_to",
    }
    [row] = data["result"]["rows"]
    assert row["from"]["id"] == runbook.pk and row["basis"]["rule"] == "wiki-link"
    assert data["result"]["evidence"][0]["evidence_url"].startswith("/evidence/")
    assert data["trace"]["prompt_version"]


def test_refusal_is_a_200_with_the_shapes(alice_client, linked, offline):
    data = post(alice_client, {"question": "How long are snapshots kept?"}).json()
    assert data["answered"] is False and data["result"] is None
    assert data["message"].startswith("I can answer questions of these shapes:")


@pytest.mark.parametrize("question", ["", "   ", "x" * 5000])
def test_empty_or_too_long_question_is_422(alice_client, offline, question):
    response = post(alice_client, {"question": question})
    assert response.status_code == 422 and response.json()["detail"]


def test_other_users_documents_are_invisible(bob_client, bob, linked, offline):
    data = post(bob_client, {"question": "What links to Backup Policy?"}).json()
    assert data["answered"] is False and data["candidates"] == []
    assert "Restore runbook" not in json.dumps(data)


def test_space_narrows_and_a_foreign_space_is_404(alice, bob_client, alice_client, offline):
    team = space_services.space_create(by=alice, name="Team")
    services.note_create(owner=alice, title="Pager", body="team pager", space=team)
    services.note_create(owner=alice, title="Rota", body="Carry the [[Pager]].", space=team)
    factories.note(alice, "Pager", "personal pager")
    ambiguous = post(alice_client, {"question": "what links to Pager"}).json()
    assert ambiguous["answered"] is False and "names 2 documents" in ambiguous["message"]
    narrowed = post(alice_client, {"question": "what links to Pager", "space": team.pk}).json()
    assert narrowed["answered"] is True
    assert [r["from"]["title"] for r in narrowed["result"]["rows"]] == ["Rota"]
    response = post(bob_client, {"question": "what links to Pager", "space": team.pk})
    assert response.status_code == 404


def test_model_path_over_the_api(alice_client, linked, fake_llm):
    policy, runbook = linked
    fake_llm.reply({"lookups": ["Backup Policy"]}).reply(
        {"query": {"op": "neighbours", "seed": policy.pk, "direction": "in", "kind": "links_to"}}
    )
    data = post(alice_client, {"question": "What links to Backup Policy?", "inputs": True}).json()
    assert data["answered"] is True and data["path"] == "model"
    assert [r["from"]["id"] for r in data["result"]["rows"]] == [runbook.pk]
    hashes = [stage["request_sha256"] for stage in data["trace"]["stages"]]
    assert hashes == list(EgressLog.objects.order_by("id").values_list("request_sha256", flat=True))
    assert data["trace"]["stages"][1]["messages"][0]["role"] == "system"


def test_model_direction_swap_is_refused_over_the_api(alice_client, linked, fake_llm):
    policy, _ = linked
    swapped = {"op": "neighbours", "seed": policy.pk, "direction": "out", "kind": "links_to"}
    fake_llm.reply({"lookups": ["Backup Policy"]}).reply({"query": swapped})
    data = post(alice_client, {"question": "What links to Backup Policy?"}).json()
    assert data["answered"] is False and data["result"] is None
    assert data["query"] == swapped and 'direction "out"' in data["message"]


def test_every_graph_question_is_stored_with_what_it_became(alice, alice_client):
    from retrieval.models import GraphQuestionTrace
    from tests import factories

    factories.note(alice, "Backup Policy", "Keep 35 days.")
    factories.note(alice, "Restore runbook", "Restore per [[Backup Policy]].")
    for question in ("what links to Backup Policy?", "tell me a joke"):
        response = alice_client.post(
            "/api/graph/ask", {"question": question}, content_type="application/json"
        )
        assert response.status_code == 200
        stored = GraphQuestionTrace.objects.get(pk=response.json()["trace_id"])
        assert stored.user_id == alice.pk and stored.question == question
        assert stored.path == "rules"
    answered, refused = GraphQuestionTrace.objects.order_by("id")
    assert answered.answered and answered.query["direction"] == "in"
    assert answered.generation is not None and answered.trace["rule"]
    assert not refused.answered and refused.query is None and refused.message


def test_graph_question_traces_in_the_admin_are_the_askers_own(alice, bob):
    from retrieval.models import GraphQuestionTrace
    from tests.factories import staff_client

    GraphQuestionTrace.objects.create(user=alice, question="alice's <b>q</b>", path="rules")
    GraphQuestionTrace.objects.create(user=bob, question="bob's question", path="rules")
    from django.contrib.auth.models import Permission

    client = staff_client(bob, superuser=False)
    bob.user_permissions.set(Permission.objects.filter(codename="view_graphquestiontrace"))
    listing = client.get("/admin/retrieval/graphquestiontrace/").content.decode()
    assert "bob&#x27;s question" in listing or "bob's question" in listing
    assert "alice" not in listing.split("<tbody>")[-1]
