"""Traces: replaying an unchanged world reports nothing; a changed world (an edited note, a
tampered stored verdict) is reported stage by stage; `manage.py lode_trace` exit statuses;
the read-only admin."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from notes import services
from notes.models import Document, Version
from retrieval.answer.ask import ask
from retrieval.answer.replay import RecordedScorer, replay
from retrieval.answer.types import Claim, Decision
from retrieval.eligibility import audience_for
from retrieval.models import AskTrace, EgressLog
from tests.factories import ScriptedAnswerer, claim

pytestmark = pytest.mark.django_db

SPAN = "Rotate the staging certs with certbot before Friday."
QUESTION = "When do I rotate the staging certs?"


@pytest.fixture
def answered(alice, runbook) -> AskTrace:
    outcome = ask(
        user=alice,
        question=QUESTION,
        mode="lexical",
        answerer=ScriptedAnswerer(
            [claim(runbook.head_id, SPAN), claim(runbook.head_id, "x", "nowhere")]
        ),
    )
    assert outcome.decision == Decision.ANSWER
    return AskTrace.objects.get(pk=outcome.trace_id)


def replay_command(trace_id: int, *extra: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("lode_trace", "replay", str(trace_id), *extra, stdout=out)
    except SystemExit as exc:
        return int(exc.code), out.getvalue()
    return 0, out.getvalue()


def test_replay_of_an_unchanged_world_reports_nothing(answered):
    assert replay(answered) == []


def test_replay_in_hybrid_mode_with_vectors_reports_nothing(alice, runbook, private_vectors):
    from retrieval.index.sync import sync_vectors

    services.note_create(owner=alice, title="Car", body="The automobile would not start.")
    sync_vectors()
    outcome = ask(
        user=alice, question=QUESTION, answerer=ScriptedAnswerer([claim(runbook.head_id, SPAN)])
    )
    trace = AskTrace.objects.get(pk=outcome.trace_id)
    assert trace.trace["search"]["degraded"] == []
    assert trace.trace["manifests"]["embedding"]
    assert any(c["dense"] for c in trace.trace["search"]["candidates"])
    assert replay(trace) == []


def test_replay_of_a_clarifying_and_an_abstaining_ask_reports_nothing(alice, runbook):
    for question in ("what about it?", "What is the capital of France?"):
        outcome = ask(user=alice, question=question, mode="lexical", answerer=ScriptedAnswerer())
        assert outcome.decision != Decision.ANSWER
        assert replay(AskTrace.objects.get(pk=outcome.trace_id)) == []


def test_the_trace_keeps_the_pack_as_built_when_the_answerer_changes_it(alice, runbook):
    """The flight recorder stores the evidence pack the answerer was handed, as it was then:
    an answerer that changes the pack in place (the Answerer protocol does not forbid it)
    changes neither the stored pack, nor what replay compares, nor the withheld documents the
    permalink lists."""
    from retrieval.answer.display import outcome_from_trace
    from tests.factories import make_external

    secret = make_external(
        alice, "Private cert notes", "Rotate the staging certs by hand.", no_egress=True
    )

    def tampering(pack):
        pack.items.clear()
        pack.dropped.append({"passage_id": 0, "reason": "tampered"})
        return []

    outcome = ask(
        user=alice,
        question=QUESTION,
        mode="lexical",
        answerer=ScriptedAnswerer(tampering, name="tampering", remote=True),
    )
    assert [w.document_id for w in outcome.withheld] == [secret.pk]
    row = AskTrace.objects.get(pk=outcome.trace_id)
    stored = row.trace["pack"]
    assert {i["document_id"] for i in stored["items"]} == {runbook.pk, secret.pk}
    assert all(d["reason"] != "tampered" for d in stored["dropped"])
    assert [w.document_id for w in outcome_from_trace(row).withheld] == [secret.pk]
    assert replay(row) == []


def test_editing_a_note_then_replaying_reports_the_difference(alice, runbook, answered):
    services.note_update(
        document=runbook,
        user=alice,
        base_version_id=runbook.head_id,
        title="Deploy runbook",
        body="# Deploy runbook\n\nRotate the staging certs on Monday instead.\n",
    )
    differences = replay(answered)
    assert differences
    assert any(d.startswith("fused list differs at rank 1") for d in differences)
    assert any(d.startswith("pack differs") for d in differences)
    # The stored claims cite the old version, which is immutable: the gate still agrees.
    assert not any("gate verdict" in d for d in differences)


def test_a_new_better_hit_is_reported_at_its_rank(alice, runbook, answered):
    services.note_create(
        owner=alice, title="Certs", body="Rotate the staging certs: rotate staging certs now."
    )
    differences = replay(answered)
    assert any(d.startswith("fused list differs at rank") for d in differences), differences


def test_a_changed_gate_verdict_is_reported(answered):
    stored = answered.trace
    stored["gate"][1]["passed"] = True  # pretend the fabricated quote had passed
    stored["gate"][1]["step"] = "coupling"
    answered.save(update_fields=["trace"])
    cited = Version.objects.get(pk=answered.trace["draft"]["claims"][1]["support"][0]["version_id"])
    assert replay(answered) == [
        "gate verdict for claim 2 changed: passed at coupling → dropped at verbatim "
        f"(quoted span 1 does not occur in version {cited.number} of “{cited.document.title}”)"
    ]


def test_a_changed_decision_is_reported(answered):
    stored = answered.trace
    stored["decision"]["decision"] = "ABSTAIN_NO_EVIDENCE"
    stored["pre_decision"]["decision"] = "ASK_CLARIFYING"
    answered.save(update_fields=["trace"])
    differences = replay(answered)
    assert "final decision differs: ABSTAIN_NO_EVIDENCE → ANSWER" in differences
    assert "decision before answering differs: ASK_CLARIFYING → None" in differences


def relevance_of(question: str, made: Claim, document: Document) -> float:
    """The relevance step's score for `made` quoted from `document` (rank 1, no heading)."""
    from retrieval.answer.relevance.candidate import Candidate
    from retrieval.answer.relevance.question import question_profile
    from retrieval.answer.relevance.rarity import passage_idf
    from retrieval.answer.relevance.scoring import score_pairs

    idf = passage_idf(audience_for(document.owner_id), question_profile(question))
    candidate = Candidate(text=made.text, title=document.title, rank=1)
    return score_pairs(question, [candidate], idf=idf).scores[0]


def test_replay_never_calls_the_answerer_and_reuses_llm_judge_scores(alice, runbook):
    # A paraphrase (it does not couple, so it needs entailment) that answers the question.
    paraphrase = claim(runbook.head_id, "You rotate the staging certs before Friday.", SPAN)
    answerer = ScriptedAnswerer([paraphrase])
    outcome = ask(user=alice, question=QUESTION, mode="lexical", answerer=answerer)
    assert outcome.dropped[0].step == "entailment"  # no scorer configured: dropped
    trace = AskTrace.objects.get(pk=outcome.trace_id)
    # Rewrite the trace as if an LLM judge had accepted the claim at 0.97.
    trace.trace["settings"]["entailment"] = "llm-judge"
    trace.trace["manifests"]["entailment"] = "llm-judge"
    trace.trace["gate"][0].update(passed=True, step="entailment", entailment_score=0.97)
    # …and as the relevance step (which a dropped claim never reached) would have scored it.
    replayed_score = relevance_of(QUESTION, paraphrase, runbook)
    trace.trace["gate"][0]["relevance_score"] = replayed_score
    trace.trace["decision"]["decision"] = "ANSWER"
    trace.save(update_fields=["trace"])
    assert replay(trace) == []
    assert len(answerer.calls) == 1 and EgressLog.objects.count() == 0


def test_recorded_scorer_answers_by_claim_text_and_fails_closed_otherwise():
    from retrieval.answer.entailment import EntailmentUnavailable

    scorer = RecordedScorer("llm-judge", {"The  claim.": 0.8})
    assert scorer.score("premise", "The claim.") == 0.8
    with pytest.raises(EntailmentUnavailable):
        scorer.score("premise", "Another claim.")


def test_a_pinned_note_deleted_since_is_reported(alice, runbook):
    outcome = ask(
        user=alice,
        question=QUESTION,
        mode="lexical",
        pinned_document_id=runbook.pk,
        answerer=ScriptedAnswerer([claim(runbook.head_id, SPAN)]),
    )
    trace = AskTrace.objects.get(pk=outcome.trace_id)
    assert replay(trace) == []
    services.note_delete(document=runbook, user=alice)
    assert replay(trace) == [f"pinned note {runbook.pk} is no longer available"]


# --- the command ---------------------------------------------------------------------------------


def test_command_replay_exit_status_zero_when_same(answered):
    status, out = replay_command(answered.pk)
    assert status == 0
    assert "same" in out and f"trace {answered.pk}" in out


def test_command_replay_exit_status_one_and_lists_differences(alice, runbook, answered):
    services.note_update(
        document=runbook,
        user=alice,
        base_version_id=runbook.head_id,
        title="Deploy runbook",
        body="Nothing about certificates any more.",
    )
    status, out = replay_command(answered.pk)
    assert status == 1
    assert "difference(s):" in out and "pack differs" in out


def test_command_replay_json(answered):
    status, out = replay_command(answered.pk, "--json")
    data = json.loads(out)
    assert status == 0 and data["same"] is True and data["differences"] == []
    assert data["trace_id"] == answered.pk and "code_version" in data


def test_command_with_an_unknown_trace_exits_two():
    with pytest.raises(CommandError) as info:
        call_command("lode_trace", "replay", "424242")
    assert info.value.returncode == 2


def test_command_show_prints_the_trace(answered):
    out = StringIO()
    call_command("lode_trace", "show", str(answered.pk), "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["question"] == QUESTION and data["decision"] == "ANSWER"
    assert data["trace"]["pack"]["items"]
    out = StringIO()
    call_command("lode_trace", "show", str(answered.pk), stdout=out)
    assert QUESTION in out.getvalue()


# --- admin ---------------------------------------------------------------------------------------


def test_admin_lists_and_shows_traces_read_only(answered, staff_client):
    listing = staff_client.get("/admin/retrieval/asktrace/")
    assert listing.status_code == 200
    assert QUESTION in listing.content.decode()
    detail = staff_client.get(f"/admin/retrieval/asktrace/{answered.pk}/change/")
    assert detail.status_code == 200
    page = detail.content.decode()
    assert "&quot;pre_decision&quot;" in page  # the JSON, escaped
    assert 'name="_save"' not in page
    assert staff_client.get("/admin/retrieval/asktrace/add/").status_code == 403


def test_admin_escapes_stored_text(alice, runbook, staff_client):
    outcome = ask(
        user=alice,
        question="<script>alert(1)</script> certs",
        mode="lexical",
        answerer=ScriptedAnswerer(),
    )
    page = staff_client.get(
        f"/admin/retrieval/asktrace/{outcome.trace_id}/change/"
    ).content.decode()
    assert "<script>alert(1)</script>" not in page


def test_replay_names_a_changed_relevance_scorer(alice, runbook):
    outcome = ask(
        user=alice,
        question=QUESTION,
        mode="lexical",
        answerer=ScriptedAnswerer([claim(runbook.head_id, SPAN)]),
    )
    trace = AskTrace.objects.get(pk=outcome.trace_id)
    recorded = trace.trace["manifests"]["relevance"]
    assert recorded.startswith("relevance-") and " threshold " in recorded
    trace.trace["manifests"]["relevance"] = "relevance-0-old threshold 0.9"
    trace.save(update_fields=["trace"])
    differences = replay(trace)
    assert f"relevance scorer differs: relevance-0-old threshold 0.9 → {recorded}" in differences
