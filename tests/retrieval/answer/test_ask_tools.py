"""Ask-time tools against a real local site on 127.0.0.1: snapshot-then-cite, the egress row
committed before each fetch, no-egress refusals, redacted arguments, dedup of identical
refetches, the per-ask call and byte limits, replay from stored snapshots, and who may
refresh a source item."""

from __future__ import annotations

import json
import threading

import pytest
from django.urls import reverse

from externals import fetch, pipeline
from externals.models import DiscoveredVia, Source, SourceItem
from lode_site.budget import time_budget
from notes.models import Version
from retrieval.answer import tools
from retrieval.answer.answerers import ExtractiveAnswerer
from retrieval.answer.ask import ask
from retrieval.answer.egress import request_sha256
from retrieval.answer.replay import replay
from retrieval.answer.tools import MAX_TOOL_BYTES, ToolSession, replay_result
from retrieval.answer.types import Decision
from retrieval.models import AskTrace, EgressLog
from tests.factories import make_source, note
from tests.fake_llm import Scripted
from tests.local_http import local_server

PAGE = (
    b"<html><head><title>Rollout guide</title></head><body><h1>Rollout guide</h1>"
    b"<p>Canary deploys run for forty minutes before the fleet is upgraded.</p></body></html>"
)
HTML = {"Content-Type": "text/html; charset=utf-8"}


@pytest.fixture(autouse=True)
def _loopback_fetches(settings):
    settings.LODE_FETCH_ALLOW_PRIVATE = True


def test_fetch_writes_the_snapshot_before_the_model_sees_it(alice):
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        session = ToolSession(alice)
        result = json.loads(session.run("fetch_url", {"url": site.url("/guide")}))
    version = Version.objects.get(pk=result["snapshot_id"])
    assert "forty minutes" in version.body
    assert result["text"] == version.body
    source = Source.objects.get(owner=alice, location=site.url("/guide"))
    assert source.discovered_via == DiscoveredVia.ASK
    item = SourceItem.objects.get(source=source)
    assert item.document.head_id == version.pk
    assert item.sha256 and version.created_at is not None
    assert session.snapshot_ids == [version.pk]


def test_the_egress_row_is_written_before_the_request_leaves(alice, monkeypatch):
    rows_at_fetch: list[int] = []

    def counting_fetch(url: str, **kwargs):
        rows_at_fetch.append(EgressLog.objects.filter(purpose="tool").count())
        return fetch.fetch_url(url, **kwargs)

    monkeypatch.setattr(tools, "fetch_url", counting_fetch)
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        session = ToolSession(alice)
        session.run("fetch_url", {"url": site.url("/guide")})
        session.run("fetch_url", {"url": site.url("/guide")})
        assert len(site.hits) == 2
    assert rows_at_fetch == [1, 2]
    row = EgressLog.objects.filter(purpose="tool").first()
    assert row.user == alice
    assert row.destination_host == site.url("/").split("//")[1].rstrip("/")
    assert [call["egress_log_id"] for call in session.trace()] == list(
        EgressLog.objects.filter(purpose="tool").order_by("pk").values_list("pk", flat=True)
    )


def test_a_secret_in_a_tool_argument_is_redacted_in_the_egress_row_and_trace(alice):
    secret = "sk-proj-" + "Zq7Xv9Lm2Np4Rt6Wy8Ab1Cd3Ef5Gh7Jk"
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        session = ToolSession(alice)
        arguments = json.dumps({"url": site.url("/guide"), "note": f"api_key={secret}"})
        session.run("fetch_url", arguments)
    row = EgressLog.objects.get(purpose="tool")
    assert row.redaction_count >= 1
    traced = session.trace()[0]
    assert secret not in traced["arguments"]
    assert "[REDACTED" in traced["arguments"]
    body = json.dumps({"tool": "fetch_url", "arguments": traced["arguments"]}).encode()
    assert row.request_sha256 == request_sha256(body)


def test_an_identical_refetch_returns_the_same_snapshot(alice):
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        first = json.loads(ToolSession(alice).run("fetch_url", {"url": site.url("/guide")}))
        second = json.loads(ToolSession(alice).run("fetch_url", {"url": site.url("/guide")}))
        site.routes["/guide"] = (200, HTML, PAGE.replace(b"forty", b"fifty"))
        third = json.loads(ToolSession(alice).run("fetch_url", {"url": site.url("/guide")}))
    assert first["snapshot_id"] == second["snapshot_id"]
    assert third["snapshot_id"] != first["snapshot_id"]
    source = Source.objects.get(owner=alice, discovered_via=DiscoveredVia.ASK)
    assert Version.objects.filter(document__source_items__source=source).count() == 2


def test_a_destination_under_a_no_egress_source_is_refused(alice, bob):
    with local_server() as site:
        site.routes["/private/plan"] = (200, HTML, PAGE)
        make_source(
            bob, "Private", kind=Source.Kind.URL, location=site.url("/private/"), no_egress=True
        )
        session = ToolSession(alice)
        result = json.loads(session.run("fetch_url", {"url": site.url("/private/plan")}))
        assert site.hits == []
    assert "withheld from egress" in result["refused"]
    assert not EgressLog.objects.filter(purpose="tool").exists()
    assert session.trace()[0]["outcome"] == "refused"


def test_at_most_five_calls_per_ask(alice):
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        session = ToolSession(alice)
        results = [
            json.loads(session.run("fetch_url", {"url": site.url("/guide")})) for _ in range(6)
        ]
        assert len(site.hits) == 5
    assert all("snapshot_id" in result for result in results[:5])
    assert "at most 5 tool calls" in results[5]["refused"]
    assert EgressLog.objects.filter(purpose="tool").count() == 5


def test_at_most_two_megabytes_fetched_per_ask(alice, settings):
    settings.LODE_FETCH_MAX_BYTES = 3 * MAX_TOOL_BYTES
    big = b"<html><body><p>" + b"a" * (MAX_TOOL_BYTES - 100) + b"</p></body></html>"
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        site.routes["/big"] = (200, HTML, big)
        session = ToolSession(alice)
        first = json.loads(session.run("fetch_url", {"url": site.url("/guide")}))
        second = json.loads(session.run("fetch_url", {"url": site.url("/big")}))
    assert "snapshot_id" in first
    assert "cap" in second["refused"]
    assert session.bytes_fetched == len(PAGE)
    assert not Source.objects.filter(location=site.url("/big"), items__isnull=False).exists()


def test_replay_rebuilds_results_from_stored_snapshots_without_fetching(alice):
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        session = ToolSession(alice)
        results = [
            session.run("fetch_url", {"url": site.url("/guide")}),
            session.run("fetch_url", {"url": "file:///etc/passwd"}),
        ]
        hits = len(site.hits)
        trace = json.loads(json.dumps(session.trace()))
        replayed = [replay_result(call) for call in trace]
        assert len(site.hits) == hits
    assert replayed == results


def test_search_notes_returns_titles_and_ids_never_a_snapshot(alice):
    note(alice, "Canary deploys", "Canary deploys run for forty minutes. " * 20)
    result = json.loads(ToolSession(alice).run("search_notes", {"query": "canary deploys"}))
    assert result["results"]
    for hit in result["results"]:
        assert set(hit) == {"document_id", "title", "snippet"}
        assert len(hit["snippet"]) <= 160
    assert "snapshot_id" not in json.dumps(result)


def test_only_a_user_who_may_see_a_source_can_refresh_its_item(alice, bob):
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        source = make_source(alice, "Guides", kind=Source.Kind.URL, location=site.url("/guide"))
        pipeline.scan_source(source)
        item = SourceItem.objects.get(source=source)
        hits = len(site.hits)
        refused = json.loads(ToolSession(bob).run("refresh_source_item", {"item_id": item.pk}))
        assert len(site.hits) == hits
        site.routes["/guide"] = (200, HTML, PAGE.replace(b"forty", b"fifty"))
        refreshed = json.loads(ToolSession(alice).run("refresh_source_item", {"item_id": item.pk}))
    assert "no source item" in refused["refused"]
    assert "fifty minutes" in Version.objects.get(pk=refreshed["snapshot_id"]).body
    assert EgressLog.objects.filter(purpose="tool", user=bob).count() == 0


# --- through ask ---------------------------------------------------------------------------

SPAN = "Canary deploys run for forty minutes before the fleet is upgraded."


def _tool_call_reply(url: str) -> Scripted:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "fetch_url", "arguments": json.dumps({"url": url})},
            }
        ],
    }
    return Scripted(body={"choices": [{"index": 0, "message": message}]})


def test_a_model_fetches_a_page_and_its_claim_cites_the_stored_snapshot(alice, fake_llm, settings):
    settings.LODE_ASK_TOOLS = True
    snapshot_ids: list[int] = []

    def answer_from_tool_result(received) -> None:
        results = [m for m in received.messages if m["role"] == "tool"]
        if results and not snapshot_ids:
            snapshot_ids.append(json.loads(results[0]["content"])["snapshot_id"])
            fake_llm.reply("I have what I need.")
            fake_llm.reply(
                {
                    "claims": [
                        {
                            "text": SPAN,
                            "support": [{"version_id": snapshot_ids[0], "quoted_span": SPAN}],
                        }
                    ]
                }
            )

    fake_llm.on_request = answer_from_tool_result
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        fake_llm.script(_tool_call_reply(site.url("/guide")))
        outcome = ask(user=alice, question="How long do canary deploys run?", mode="lexical")
        hits = len(site.hits)
        row = AskTrace.objects.get(pk=outcome.trace_id)
        assert replay(row) == []
        assert len(site.hits) == hits == 1
    assert fake_llm.callback_errors == []
    assert outcome.decision == Decision.ANSWER, (outcome.message, outcome.notes)
    assert outcome.fetched_version_ids == snapshot_ids
    assert [s.version_id for c in outcome.claims for s in c.support] == snapshot_ids
    tool_row = EgressLog.objects.get(purpose="tool")
    first_answer_row = EgressLog.objects.filter(purpose="qa").order_by("pk").last()
    assert tool_row.pk < first_answer_row.pk
    assert row.trace["tools"][0]["snapshot_id"] == snapshot_ids[0]


def test_a_user_started_fetch_answers_from_the_page_without_a_model(alice):
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        url = site.url("/guide")
        outcome = ask(
            user=alice,
            question=f"How long do canary deploys run? {url}",
            mode="lexical",
            answerer=ExtractiveAnswerer(),
            fetch_urls=[url],
        )
        row = AskTrace.objects.get(pk=outcome.trace_id)
        assert replay(row) == []
        assert len(site.hits) == 1
    assert outcome.decision == Decision.ANSWER, (outcome.message, outcome.notes)
    assert outcome.fetched_version_ids
    cited = {s.version_id for c in outcome.claims for s in c.support}
    assert cited == set(outcome.fetched_version_ids)
    assert EgressLog.objects.filter(purpose="tool").count() == 1
    assert not EgressLog.objects.exclude(purpose="tool").exists()


def test_the_answer_page_offers_to_fetch_a_page_named_in_the_question(alice_client):
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        url = site.url("/guide")
        question = f"How long do canary deploys run? {url}"
        first = alice_client.post(reverse("ask"), {"question": question, "mode": "lexical"})
        page = alice_client.get(first["Location"]).content.decode()
        assert "Fetch this page and answer from it" in page
        assert 'name="csrfmiddlewaretoken"' in page.split('class="fetch-offer"')[1]
        assert site.hits == []
        fetched = alice_client.post(
            reverse("ask"), {"question": question, "mode": "lexical", "fetch_url": url}
        )
        answer = alice_client.get(fetched["Location"]).content.decode()
        assert len(site.hits) == 1
    assert "from a page fetched for this answer" in answer
    assert "forty minutes" in answer
    assert "Fetch this page and answer from it" not in answer


def test_only_an_address_written_in_the_question_is_fetched(alice_client):
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        response = alice_client.post(
            reverse("ask"),
            {"question": "How long do canary deploys run?", "fetch_url": site.url("/guide")},
        )
        assert site.hits == []
    assert response.status_code == 200
    assert "Only a web address written in the question is fetched." in response.content.decode()


def test_the_source_list_shows_pages_found_by_an_ask(alice, alice_client):
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        ToolSession(alice).run("fetch_url", {"url": site.url("/guide")})
    page = alice_client.get(reverse("externals:sources")).content.decode()
    assert "found by an ask" in page
    assert site.url("/guide") in page


# --- the ask's time budget and the model's egress rows --------------------------------------


def _tool_calls_reply(*calls: tuple[str, dict]) -> Scripted:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for i, (name, arguments) in enumerate(calls, start=1)
        ],
    }
    return Scripted(body={"choices": [{"index": 0, "message": message}]})


def _answer_citing_the_first_snapshot(fake_llm) -> list[int]:
    """Once a tool result holding a snapshot reaches the model: stop calling tools, then
    answer with SPAN citing that snapshot. Returns the list the snapshot id is put in."""
    snapshot_ids: list[int] = []

    def on_request(received) -> None:
        results = [json.loads(m["content"]) for m in received.messages if m["role"] == "tool"]
        found = [r["snapshot_id"] for r in results if "snapshot_id" in r]
        if found and not snapshot_ids:
            snapshot_ids.append(found[0])
            fake_llm.reply("I have what I need.")
            fake_llm.reply(
                {
                    "claims": [
                        {"text": SPAN, "support": [{"version_id": found[0], "quoted_span": SPAN}]}
                    ]
                }
            )

    fake_llm.on_request = on_request
    return snapshot_ids


def test_tool_calls_past_the_asks_time_budget_are_refused_and_traced(
    alice, fake_llm, settings, monkeypatch
):
    settings.LODE_ASK_TOOLS = True
    settings.LODE_FETCH_TIMEOUT_SECONDS = 120  # the ask's budget, not the fetch's own, binds
    # Tools get one tenth of a 20 s budget; the rest stays for answering.
    monkeypatch.setattr(tools, "TOOL_BUDGET_SHARE", 0.1)
    snapshot_ids = _answer_citing_the_first_snapshot(fake_llm)
    released = threading.Event()

    def slow_page():
        released.wait(120)
        return 200, HTML, PAGE

    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        site.routes["/slow"] = slow_page
        site.routes["/later"] = (200, HTML, PAGE)
        fake_llm.script(
            _tool_calls_reply(
                ("fetch_url", {"url": site.url("/guide")}),
                ("fetch_url", {"url": site.url("/slow")}),
                ("fetch_url", {"url": site.url("/later")}),
                ("search_notes", {"query": "canary"}),
            )
        )
        try:
            with time_budget(20):
                outcome = ask(
                    user=alice, question="How long do canary deploys run?", mode="lexical"
                )
        finally:
            released.set()
        assert "/later" not in site.hits
    calls = AskTrace.objects.get(pk=outcome.trace_id).trace["tools"]
    assert [call["outcome"] for call in calls] == ["ok", "refused", "refused", "refused"]
    assert calls[1]["reason"].startswith("could not fetch")
    assert calls[2]["reason"] == calls[3]["reason"] == tools.TIME_SPENT
    assert calls[2]["egress_log_id"] is None
    assert f"Not fetched: {tools.TIME_SPENT}" in outcome.notes
    assert outcome.decision == Decision.ANSWER, (outcome.message, outcome.notes)
    assert [s.version_id for c in outcome.claims for s in c.support] == snapshot_ids


def test_a_tool_loop_request_lists_the_snapshot_its_tool_results_carry(alice, fake_llm, settings):
    settings.LODE_ASK_TOOLS = True
    snapshot_ids = _answer_citing_the_first_snapshot(fake_llm)
    with local_server() as site:
        site.routes["/guide"] = (200, HTML, PAGE)
        fake_llm.script(_tool_calls_reply(("fetch_url", {"url": site.url("/guide")})))
        outcome = ask(user=alice, question="How long do canary deploys run?", mode="lexical")
    assert outcome.decision == Decision.ANSWER, (outcome.message, outcome.notes)
    version = Version.objects.get(pk=snapshot_ids[0])
    rows = list(EgressLog.objects.order_by("pk"))
    assert [row.purpose for row in rows[:3]] == ["qa", "tool", "qa"]
    first_round, _, second_round = rows[:3]
    assert first_round.items == []
    assert second_round.items == [
        {"document_id": version.document_id, "version_id": version.pk, "chars": len(version.body)}
    ]


def test_search_results_leave_out_documents_withheld_from_egress(alice):
    shared = note(alice, "Canary deploys", "Canary deploys run for forty minutes. " * 5)
    note(
        alice,
        "Canary secrets",
        "Canary deploys use the private canary cluster. " * 5,
        no_egress=True,
    )
    session = ToolSession(alice)
    result = json.loads(session.run("search_notes", {"query": "canary deploys"}))
    assert [hit["document_id"] for hit in result["results"]] == [shared.pk]
    assert [row["document_id"] for row in session.carried(session.calls)] == [shared.pk]
