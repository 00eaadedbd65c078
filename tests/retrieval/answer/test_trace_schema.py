"""The trace's JSON layout (retrieval/answer/trace.py): `Trace` reads every trace `ask()`
stores and writes it back key for key — the traces stored before `Trace` existed
(tests/fixtures/ask_trace_schema1.json, copied from a real run) and the ones stored now, on
every path an ask can end on — and the readers (permalink, page, replay) get typed answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from notes import services
from retrieval.answer.ask import ask
from retrieval.answer.display import outcome_from_trace
from retrieval.answer.replay import replay
from retrieval.answer.trace import TRACE_SCHEMA, Trace
from retrieval.answer.types import ClaimVerdict, Decision, PackItem
from retrieval.models import AskTrace
from retrieval.web.ask_views import answerer_offline, trace_mode
from tests.factories import RUNBOOK, VENDOR, ScriptedAnswerer, claim, make_external

pytestmark = pytest.mark.django_db

FIXTURE = Path(__file__).parents[2] / "fixtures" / "ask_trace_schema1.json"
SPAN = "Rotate the staging certs with certbot before Friday."


def stored_fixture() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text("utf-8"))


def shape(value: Any) -> Any:
    """The layout of a JSON value: dict keys (in order) and element shapes, not values."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


# Keys added since the fixture was stored, each optional (written only when set, so an older
# trace still round-trips byte for byte): the relevance score on a gate verdict, the
# relevance scorer among the manifests and a pack item's heading path.
ADDED_KEYS = {"relevance_score", "heading_path", "relevance", "expansion", "plan", "tier"}


def without_added(value: Any, found: set[str]) -> Any:
    """`value` without `ADDED_KEYS` at any depth; the keys removed are collected in `found`."""
    if isinstance(value, dict):
        found.update(ADDED_KEYS & set(value))
        return {k: without_added(v, found) for k, v in value.items() if k not in ADDED_KEYS}
    if isinstance(value, list):
        return [without_added(item, found) for item in value]
    return value


def test_a_trace_stored_before_the_typed_trace_reads_and_writes_back_unchanged():
    stored = stored_fixture()["trace"]
    trace = Trace.from_dict(stored)
    assert trace.to_dict() == stored
    assert json.dumps(trace.to_dict()) == json.dumps(stored)  # key order too
    assert trace.schema_version == TRACE_SCHEMA
    assert trace.settings.answerer == "chat" and trace.settings.answerer_remote is True
    assert not trace.answerer_offline and trace.reached_gate
    assert trace.search is not None and trace.search.reranked == [1, 2, 3]
    assert trace.pack is not None and all(isinstance(i, PackItem) for i in trace.pack.items)
    withheld = [i for i in trace.pack.items if i.passage_id in trace.withheld_passage_ids]
    assert [(i.document_title, i.no_egress) for i in withheld] == [("Private vendor notes", True)]
    assert trace.draft is not None and trace.draft.sent_versions == [1]
    assert trace.gate is not None and all(isinstance(v, ClaimVerdict) for v in trace.gate)
    assert [(v.passed, v.step) for v in trace.gate] == [(True, "coupling")]
    assert trace.decision is not None and trace.decision.decision == "ANSWER_WITH_CONFLICTS"


def test_a_stored_row_from_before_opens_as_its_permalink(alice):
    data = stored_fixture()
    row = AskTrace.objects.create(
        user=alice,
        question=data["trace"]["question"],
        decision=data["answer"]["decision"],
        answerer=data["answer"]["answerer"],
        answer=data["answer"],
        trace=data["trace"],
    )
    outcome = outcome_from_trace(row)
    assert outcome.decision == Decision.ANSWER_WITH_CONFLICTS
    assert [w.document_title for w in outcome.withheld] == ["Private vendor notes"]
    # It writes back as it was stored, with the tier it reads as (answered: an Answer).
    assert outcome.as_dict() | {"trace_id": None} == data["answer"] | {
        "trace_id": None,
        "tier": "answer",
    }
    assert answerer_offline(row) is False and trace_mode(row) == "lexical"


@pytest.mark.parametrize(
    "path", ["answered", "pinned unavailable", "abstained early", "answerer failed", "chat"]
)
def test_every_trace_ask_stores_round_trips(alice, fake_llm, path):
    runbook = services.note_create(owner=alice, title="Deploy runbook", body=RUNBOOK)
    make_external(alice, "Private vendor notes", VENDOR, no_egress=True)
    if path == "answered":
        claims = [claim(runbook.head_id, SPAN), claim(runbook.head_id, "x", "nowhere")]
        outcome = ask(
            user=alice,
            question="When do I rotate the staging certs?",
            answerer=ScriptedAnswerer(claims),
        )
    elif path == "pinned unavailable":
        outcome = ask(
            user=alice, question="certs", pinned_document_id=10**9, answerer=ScriptedAnswerer()
        )
    elif path == "abstained early":
        outcome = ask(user=alice, question="zebra quantum violin", answerer=ScriptedAnswerer())
    elif path == "answerer failed":
        outcome = ask(user=alice, question="staging certs", answerer=ScriptedAnswerer(error="boom"))
    else:
        from retrieval.answer.answerers import ChatAnswerer

        span = "The staging timeout is 30 seconds."
        support = [{"version_id": runbook.head_id, "quoted_span": span}]
        fake_llm.reply({"claims": [{"text": span, "support": support}]})
        outcome = ask(
            user=alice,
            question="What is the staging timeout?",
            mode="lexical",
            answerer=ChatAnswerer(),
        )
    row = AskTrace.objects.get(pk=outcome.trace_id)
    stored = row.trace
    assert Trace.from_row(row).to_dict() == stored
    assert Trace.from_dict(json.loads(json.dumps(stored))).to_dict() == stored
    if path == "chat":  # the same layout, key for key, as the trace stored before `Trace`
        added: set[str] = set()
        assert shape(without_added(stored, added)) == shape(stored_fixture()["trace"])
        assert added == ADDED_KEYS  # the new keys are the only difference, and they are written
        assert outcome.withheld and Trace.from_row(row).withheld_passage_ids
    if path == "pinned unavailable":
        assert "search" not in stored and Trace.from_row(row).search is None
    if path == "answerer failed":
        assert "gate" not in stored and not Trace.from_row(row).reached_gate


def test_an_empty_or_partial_trace_reads_as_not_reached():
    empty = Trace.from_dict({})
    assert empty.search is None and empty.pack is None and empty.gate is None
    assert not empty.reached_gate and not empty.answerer_offline
    assert empty.schema_version is None
    # Older traces recorded "offline" only in the model section.
    older = Trace.from_dict({"settings": {"mode": "hybrid"}, "model": {"remote": False}})
    assert older.answerer_offline and older.settings.mode == "hybrid"


def test_a_row_without_a_trace_replays_as_a_schema_mismatch(alice):
    row = AskTrace.objects.create(user=alice, question="q", decision="ANSWER", answerer="x")
    assert replay(row) == [f"trace schema None cannot be replayed by schema {TRACE_SCHEMA}"]
    assert answerer_offline(row) is False
