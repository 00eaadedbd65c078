"""The three tiers an answer leads with (Answer, Best match — check it, Not in your notes):
the rule that picks a best match among the gate's verdicts, the tier read from what an
answer recorded (older answers read as they were), a real ask at each tier with its trace
and stored answer, and a stored answer that says when the notes it cites changed."""

from __future__ import annotations

import math

import pytest

from retrieval.answer.decision import best_match_candidates
from retrieval.answer.display import BEST_MATCH_MESSAGE, outcome_from_trace
from retrieval.answer.gate import JUDGE_SAYS_NOT_AN_ANSWER, NOT_AN_ANSWER
from retrieval.answer.stored_view import read_stored_answer
from retrieval.answer.types import (
    ABSTAIN_MESSAGE,
    Claim,
    ClaimVerdict,
    Decision,
    Support,
    Tier,
    tier_of,
)
from retrieval.models import AskTrace
from tests.factories import ScriptedAnswerer, claim, edit

pytestmark = pytest.mark.django_db

SPAN = "Rotate the staging certs with certbot before Friday."
QUESTION = "When do I rotate the staging certs?"


def verdict(
    text: str,
    *,
    step: str = "relevance",
    passed: bool = False,
    reason: str = f"{NOT_AN_ANSWER}: its relevance score is below the threshold",
    score: float | None = 0.2,
    shape: str = "",
    hidden: bool = False,
) -> ClaimVerdict:
    return ClaimVerdict(
        claim=Claim(text=text, support=(Support(version_id=1, quoted_span=text),)),
        passed=passed,
        step=step,
        reason=reason,
        relevance_score=score,
        shape_problem=shape,
        hidden=hidden,
    )


# --- the rule -------------------------------------------------------------------------------


def test_the_best_match_is_the_highest_scored_claim_dropped_only_for_relevance():
    verdicts = [
        verdict("low", score=0.12),
        verdict("high", score=0.25),
        verdict("tie, later", score=0.25),
        verdict("under the floor", score=0.05),
    ]
    assert [v.claim.text for v in best_match_candidates(verdicts, 0.1)] == [
        "high",
        "tie, later",
        "low",
    ]
    assert best_match_candidates(verdicts, 0.3) == []


@pytest.mark.parametrize(
    "failed",
    [
        # A relevance-looking reason and score do not make a faithfulness failure eligible.
        verdict("not verbatim", step="verbatim", score=0.9),
        verdict("not coupled", step="coupling", score=0.9),
        verdict("not entailed", step="entailment", score=0.9),
        verdict("wrong shape", reason=f"{NOT_AN_ANSWER}: it names no one", shape="names no one"),
        verdict("judge said no", reason=f"{JUDGE_SAYS_NOT_AN_ANSWER} (judge) says it does not"),
        verdict("unchecked", reason="could not check that it answers the question: x", score=None),
        verdict("no usable score", score=math.nan),
        verdict("hidden", hidden=True),
        verdict("passed", passed=True, step="coupling", reason="every payload word"),
    ],
    ids=lambda v: v.claim.text,
)
def test_a_claim_that_failed_anything_but_the_relevance_score_is_never_a_best_match(failed):
    assert best_match_candidates([failed], 0.0) == []


@pytest.mark.parametrize(
    ("decision", "error", "best", "tier"),
    [
        (Decision.ANSWER, "", False, Tier.ANSWER),
        (Decision.ANSWER_WITH_CONFLICTS, "", False, Tier.ANSWER),
        (Decision.ABSTAIN_NO_EVIDENCE, "", False, Tier.NOT_IN_NOTES),
        (Decision.ABSTAIN_NO_EVIDENCE, "", True, Tier.BEST_MATCH),
        (Decision.ABSTAIN_NO_EVIDENCE, "timeout", False, None),
        (Decision.ASK_CLARIFYING, "", False, None),
    ],
)
def test_the_tier_follows_from_what_the_answer_recorded(decision, error, best, tier):
    assert tier_of(str(decision), error=error, has_best_match=best) == tier


@pytest.mark.parametrize(
    ("decision", "tier"),
    [("ANSWER", Tier.ANSWER), ("ABSTAIN_NO_EVIDENCE", Tier.NOT_IN_NOTES)],
)
def test_an_answer_stored_without_a_tier_reads_as_it_was(alice, decision, tier):
    row = AskTrace.objects.create(
        user=alice,
        question="q",
        decision=decision,
        answerer="extractive",
        answer={"question": "q", "decision": decision, "claims": [], "dropped": []},
    )
    outcome = outcome_from_trace(row)
    assert outcome.tier == tier and outcome.best_match is None
    assert outcome.as_dict()["tier"] == str(tier)


# --- through ask() ----------------------------------------------------------------------------


def scripted_ask(user, runbook, *, claims=None):
    from retrieval.answer.ask import ask

    answerer = ScriptedAnswerer(claims if claims is not None else [claim(runbook.head_id, SPAN)])
    return ask(user=user, question=QUESTION, answerer=answerer, mode="lexical")


def test_a_verified_claim_dropped_for_relevance_is_the_best_match(alice, runbook, settings):
    settings.LODE_RELEVANCE_THRESHOLD = 0.999999  # the relevance step drops every claim
    settings.LODE_BEST_MATCH_FLOOR = 0.000001
    outcome = scripted_ask(alice, runbook)
    assert outcome.decision == Decision.ABSTAIN_NO_EVIDENCE and outcome.claims == []
    assert outcome.tier == Tier.BEST_MATCH and outcome.message == BEST_MATCH_MESSAGE
    [support] = outcome.best_match.support
    assert runbook.head.body[support.start : support.end] == SPAN
    assert support.evidence_url and [t for t, h in support.segments if h] == [SPAN]
    assert [v.step for v in outcome.dropped] == ["relevance"]  # it did not pass the gate
    row = AskTrace.objects.get(pk=outcome.trace_id)
    assert row.answer["tier"] == "best_match" and row.answer["best_match"]["text"] == SPAN
    assert row.trace["decision"]["tier"] == "best_match"
    assert row.decision == "ABSTAIN_NO_EVIDENCE"
    stored = outcome_from_trace(row)
    assert stored.tier == Tier.BEST_MATCH and stored.best_match == outcome.best_match


def test_under_the_floor_there_is_no_best_match_and_the_notes_do_not_answer(
    alice, runbook, settings
):
    settings.LODE_RELEVANCE_THRESHOLD = 0.999999
    settings.LODE_BEST_MATCH_FLOOR = 0.999998
    outcome = scripted_ask(alice, runbook)
    assert outcome.tier == Tier.NOT_IN_NOTES and outcome.best_match is None
    assert outcome.message == ABSTAIN_MESSAGE and outcome.closest
    row = AskTrace.objects.get(pk=outcome.trace_id)
    assert row.answer["tier"] == "not_in_notes" and "best_match" not in row.answer
    assert row.trace["decision"]["tier"] == "not_in_notes"


def test_a_claim_that_failed_entailment_is_never_the_best_match(alice, runbook, settings):
    settings.LODE_ENTAILMENT = "none"
    settings.LODE_BEST_MATCH_FLOOR = 0.000001
    drifted = claim(runbook.head_id, "Certificates must be renewed weekly.", SPAN)
    outcome = scripted_ask(alice, runbook, claims=[drifted])
    assert [v.step for v in outcome.dropped] == ["entailment"]
    assert outcome.best_match is None and outcome.tier == Tier.NOT_IN_NOTES


def test_a_passing_claim_is_an_answer_with_no_best_match(alice, runbook):
    outcome = scripted_ask(alice, runbook)
    assert outcome.tier == Tier.ANSWER and outcome.best_match is None
    assert AskTrace.objects.get(pk=outcome.trace_id).trace["decision"]["tier"] == "answer"


# --- stale stored answers -------------------------------------------------------------------


def test_a_stored_answer_is_stale_once_a_cited_note_has_a_new_version(alice, runbook):
    outcome = scripted_ask(alice, runbook)
    row = AskTrace.objects.get(pk=outcome.trace_id)
    assert read_stored_answer(row, user_id=alice.pk).stale is False
    edit(runbook, alice, runbook.head.body + "\nRenew the prod certs too.\n")
    assert read_stored_answer(row, user_id=alice.pk).stale is True


def test_a_stale_best_match_is_stale_too(alice, runbook, settings):
    settings.LODE_RELEVANCE_THRESHOLD = 0.999999
    settings.LODE_BEST_MATCH_FLOOR = 0.000001
    outcome = scripted_ask(alice, runbook)
    row = AskTrace.objects.get(pk=outcome.trace_id)
    edit(runbook, alice, runbook.head.body + "\nRenew the prod certs too.\n")
    stored = read_stored_answer(row, user_id=alice.pk)
    assert stored.stale is True and stored.outcome.best_match == outcome.best_match


def test_an_abstention_quoting_nothing_is_never_stale(alice, runbook, settings):
    settings.LODE_RELEVANCE_THRESHOLD = 0.999999
    settings.LODE_BEST_MATCH_FLOOR = 0.999998
    outcome = scripted_ask(alice, runbook)
    edit(runbook, alice, runbook.head.body + "\nRenew the prod certs too.\n")
    row = AskTrace.objects.get(pk=outcome.trace_id)
    assert read_stored_answer(row, user_id=alice.pk).stale is False
