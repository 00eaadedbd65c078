"""The ask pipeline end to end on the database: search → pack → decision → answerer → gate →
shown claims → trace. A scripted in-process answerer drives the gate paths; the offline
extractive answerer and the chat answerer (against the fake server on 127.0.0.1) run the
real ones."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import transaction

from notes import services
from notes.models import Document, TrustTier
from retrieval.answer.ask import (
    PINNED_UNAVAILABLE,
    WITHHELD_FROM_JUDGE,
    ask,
    pinnable,
    pinnable_documents,
)
from retrieval.answer.display import context_segments, locate_span, outcome_from_trace
from retrieval.answer.egress import EgressPlan
from retrieval.answer.trace import code_version
from retrieval.answer.types import (
    ABSTAIN_MESSAGE,
    Decision,
    EvidencePack,
)
from retrieval.eligibility import audience_for
from retrieval.models import AskTrace, EgressLog, Passage
from tests.factories import (
    VENDOR,
    ScriptedAnswerer,
    claim,
    extractive_ask,
    make_external,
)

pytestmark = pytest.mark.django_db


def lexical_ask(**kwargs) -> Any:
    return ask(mode="lexical", **kwargs)


# --- answering -----------------------------------------------------------------------------------


def test_a_verified_claim_is_shown_with_its_span_in_context_and_a_trace(alice, runbook):
    span = "Rotate the staging certs with certbot before Friday."
    answerer = ScriptedAnswerer([claim(runbook.head_id, span)])
    outcome = lexical_ask(
        user=alice, question="When do I rotate the staging certs?", answerer=answerer
    )
    assert outcome.decision == Decision.ANSWER
    assert outcome.error == "" and outcome.dropped == []
    [shown] = outcome.claims
    [support] = shown.support
    body = runbook.head.body
    assert body[support.start : support.end] == span
    assert support.version_id == runbook.head_id and support.version_number == 1
    assert support.trust_tier == "note" and support.kind == "note"
    assert [t for t, h in support.segments if h] == [span]
    context = "".join(t for t, _ in support.segments)
    assert context in body and span in context
    passage = Passage.objects.get(
        version=runbook.head, start__lte=support.start, end__gt=support.start
    )
    assert support.evidence_url.endswith(f"/{passage.pk}/{runbook.head.sha256}/") or (
        str(passage.pk) in support.evidence_url and runbook.head.sha256 in support.evidence_url
    )
    trace = AskTrace.objects.get(pk=outcome.trace_id)
    assert trace.user == alice and trace.decision == "ANSWER" and trace.answerer == "scripted"
    data = trace.trace
    for key in (
        "question",
        "settings",
        "search",
        "pack",
        "pre_decision",
        "decision",
        "model",
        "draft",
        "gate",
        "manifests",
        "code_version",
    ):
        assert key in data, key
    assert data["settings"]["mode"] == "lexical"
    assert data["settings"]["max_items"] > 0 and data["settings"]["answerer"] == "scripted"
    assert data["search"]["parsed"]["terms"]
    assert data["search"]["reranked"] == [c["passage_id"] for c in data["search"]["candidates"]]
    assert sorted(data["search"]["fused"]) == sorted(data["search"]["reranked"])
    assert data["search"]["candidates"][0]["lexical"]["score_name"]
    assert data["model"] == {
        "remote": False,
        "request": {"scripted": "When do I rotate the staging certs?"},
        "response": {"claims": 1},
        "error": "",
    }
    assert data["gate"][0]["passed"] is True and data["gate"][0]["step"] == "coupling"
    assert data["manifests"]["entailment"] == "none"
    assert {**trace.answer, "trace_id": trace.pk} == outcome.as_dict()
    json.dumps(data)  # JSON all the way down


def test_a_span_found_only_after_normalisation_is_mapped_back_to_the_body(alice, runbook):
    span = "Rotate   the staging\ncerts with certbot"  # whitespace differs from the body
    answerer = ScriptedAnswerer(
        [claim(runbook.head_id, "Rotate the staging certs with certbot", span)]
    )
    outcome = lexical_ask(user=alice, question="rotate staging certs", answerer=answerer)
    [support] = outcome.claims[0].support
    assert runbook.head.body[support.start : support.end] == "Rotate the staging certs with certbot"
    assert [t for t, h in support.segments if h] == ["Rotate the staging certs with certbot"]


def test_a_fabricated_quote_is_dropped_and_the_answer_abstains(alice, runbook):
    answerer = ScriptedAnswerer([claim(runbook.head_id, "Rotate the certs on Monday.")])
    outcome = lexical_ask(
        user=alice, question="When do I rotate the staging certs?", answerer=answerer
    )
    assert outcome.decision == Decision.ABSTAIN_NO_EVIDENCE
    assert outcome.message == ABSTAIN_MESSAGE
    assert outcome.claims == []
    assert [(v.passed, v.step) for v in outcome.dropped] == [(False, "verbatim")]
    trace = AskTrace.objects.get(pk=outcome.trace_id)
    assert trace.trace["gate"][0]["reason"]


def test_a_claim_needing_entailment_with_no_scorer_is_dropped(alice, runbook, settings):
    settings.LODE_ENTAILMENT = "none"
    span = "Rotate the staging certs with certbot before Friday."
    answerer = ScriptedAnswerer(
        [
            claim(runbook.head_id, span),
            claim(
                runbook.head_id, "Certificates must be renewed weekly.", span
            ),  # paraphrase drift
        ]
    )
    outcome = lexical_ask(
        user=alice, question="When do I rotate the staging certs?", answerer=answerer
    )
    assert outcome.decision == Decision.ANSWER
    assert [c.text for c in outcome.claims] == [span]
    assert [(v.step, v.passed) for v in outcome.dropped] == [("entailment", False)]


def test_a_claim_citing_another_users_version_is_never_shown(alice, bob, runbook):
    bobs = services.note_create(owner=bob, title="Bob", body="Rotate the staging certs daily.")
    answerer = ScriptedAnswerer([claim(bobs.head_id, "Rotate the staging certs daily.")])
    outcome = lexical_ask(user=alice, question="rotate the staging certs", answerer=answerer)
    assert outcome.claims == [] and outcome.decision == Decision.ABSTAIN_NO_EVIDENCE


def test_answerer_error_is_a_failure_state_with_nothing_verified(alice, runbook):
    answerer = ScriptedAnswerer(
        [claim(runbook.head_id, "Rotate the staging certs with certbot before Friday.")],
        error="HTTP 503 from the model endpoint",
    )
    outcome = lexical_ask(
        user=alice, question="When do I rotate the staging certs?", answerer=answerer
    )
    assert outcome.decision == Decision.ABSTAIN_NO_EVIDENCE
    assert outcome.error == "HTTP 503 from the model endpoint"
    assert "failed" in outcome.message and "nothing is shown as verified" in outcome.message
    assert outcome.claims == []
    trace = AskTrace.objects.get(pk=outcome.trace_id)
    assert trace.trace["model"]["error"] and "gate" not in trace.trace


def test_an_answerer_that_raises_fails_the_same_way(alice, runbook):
    answerer = ScriptedAnswerer(raises=RuntimeError("boom"))
    outcome = lexical_ask(
        user=alice, question="When do I rotate the staging certs?", answerer=answerer
    )
    assert outcome.error == "RuntimeError: boom"
    assert outcome.claims == [] and outcome.trace_id


# --- decisions before answering ------------------------------------------------------------------


def test_a_vague_question_asks_for_clarification_without_calling_the_answerer(alice, runbook):
    answerer = ScriptedAnswerer()
    outcome = lexical_ask(user=alice, question="how do I fix this?", answerer=answerer)
    assert outcome.decision == Decision.ASK_CLARIFYING
    assert 1 <= len(outcome.clarifying_questions) <= 3
    assert answerer.calls == []
    assert AskTrace.objects.get(pk=outcome.trace_id).decision == "ASK_CLARIFYING"


def test_a_question_the_notes_do_not_cover_abstains_without_calling_the_answerer(alice, runbook):
    answerer = ScriptedAnswerer()
    outcome = lexical_ask(user=alice, question="What is the capital of France?", answerer=answerer)
    assert outcome.decision == Decision.ABSTAIN_NO_EVIDENCE
    assert outcome.message == ABSTAIN_MESSAGE and outcome.error == ""
    assert answerer.calls == []


def test_a_bad_filter_asks_to_rephrase(alice, runbook):
    outcome = lexical_ask(
        user=alice, question="staging certs type:banana", answerer=ScriptedAnswerer()
    )
    assert outcome.decision == Decision.ASK_CLARIFYING
    assert "type:" in outcome.message


def test_bob_never_gets_evidence_from_alices_notes(bob, runbook):
    answerer = ScriptedAnswerer()
    outcome = lexical_ask(
        user=bob, question="When do I rotate the staging certs?", answerer=answerer
    )
    assert outcome.decision == Decision.ABSTAIN_NO_EVIDENCE
    assert answerer.calls == []
    assert AskTrace.objects.get(pk=outcome.trace_id).trace["pack"]["items"] == []


# --- conflicts -----------------------------------------------------------------------------------


def test_note_and_external_disagree_both_shown_note_leads(alice, runbook):
    vendor = make_external(alice, "Vendor docs", VENDOR)
    answerer = ScriptedAnswerer(
        [
            claim(vendor.head_id, "The staging timeout is 60 seconds."),
            claim(runbook.head_id, "The staging timeout is 30 seconds."),
        ]
    )
    outcome = lexical_ask(user=alice, question="What is the staging timeout?", answerer=answerer)
    assert outcome.decision == Decision.ANSWER_WITH_CONFLICTS
    assert [c.support[0].trust_tier for c in outcome.claims] == ["note", "external"]
    [conflict] = outcome.conflicts
    assert [(v["trust_tier"], v["value"]) for v in conflict["values"]] == [
        ("note", "30 seconds"),
        ("external", "60 seconds"),
    ]
    first = conflict["values"][0]
    assert [s["text"] for s in first["segments"] if s["highlighted"]] == [
        "The staging timeout is 30 seconds."
    ]
    assert first["evidence_url"]


def test_a_conflicting_pack_item_joins_a_single_sourced_answer(alice, runbook):
    vendor = make_external(alice, "Vendor docs", VENDOR, tier=TrustTier.EXTERNAL_STALE)
    answerer = ScriptedAnswerer([claim(runbook.head_id, "The staging timeout is 30 seconds.")])
    outcome = lexical_ask(user=alice, question="What is the staging timeout?", answerer=answerer)
    assert outcome.decision == Decision.ANSWER_WITH_CONFLICTS
    values = outcome.conflicts[0]["values"]
    assert [(v["document_id"], v["origin"]) for v in values] == [
        (runbook.pk, "claim"),
        (vendor.pk, "evidence"),
    ]
    body = vendor.head.body
    assert body[values[1]["start"] : values[1]["end"]] == "The staging timeout is 60 seconds."


# --- ask about this note -------------------------------------------------------------------------


def test_pinned_note_passages_come_first_uncapped(alice, settings):
    settings.LODE_ASK_MAX_ITEMS = 1
    sections = "\n\n".join(
        f"## Section {i}\n\n" + " ".join(f"w{i}x{j}" for j in range(150)) for i in range(4)
    )
    pinned = services.note_create(owner=alice, title="Long note", body=f"# Long\n\n{sections}\n")
    services.note_create(owner=alice, title="Other", body="Staging certs rotate on Friday.")
    head_passages = list(
        Passage.objects.filter(version=pinned.head, is_head=True).order_by("position")
    )
    assert len(head_passages) > 1  # more than max_items
    answerer = ScriptedAnswerer()
    outcome = lexical_ask(
        user=alice,
        question="staging certs rotation",
        pinned_document_id=pinned.pk,
        answerer=answerer,
    )
    [pack] = answerer.calls
    assert [i.passage_id for i in pack.items[: len(head_passages)]] == [p.pk for p in head_passages]
    assert all(i.pinned for i in pack.items[: len(head_passages)])
    assert len(pack.items) == len(head_passages) + 1  # plus max_items=1 hit
    trace = AskTrace.objects.get(pk=outcome.trace_id)
    assert trace.pinned_document == pinned
    assert any("Long note" in note for note in outcome.notes)


@pytest.mark.parametrize("whose", ["bob", "deleted", "missing"])
def test_pinning_a_note_that_is_not_yours_or_live_is_a_clean_error(alice, bob, runbook, whose):
    if whose == "bob":
        document_id = services.note_create(owner=bob, title="Bob", body="Bob's note.").pk
    elif whose == "deleted":
        services.note_delete(document=runbook, user=alice)
        document_id = runbook.pk
    else:
        document_id = 999_999
    answerer = ScriptedAnswerer()
    outcome = lexical_ask(
        user=alice, question="staging certs", pinned_document_id=document_id, answerer=answerer
    )
    assert outcome.error == PINNED_UNAVAILABLE and outcome.message == PINNED_UNAVAILABLE
    assert outcome.decision == Decision.ABSTAIN_NO_EVIDENCE and answerer.calls == []
    trace = AskTrace.objects.get(pk=outcome.trace_id)
    assert trace.pinned_document is None and "search" not in trace.trace


def test_the_form_and_ask_pin_by_one_rule(alice, bob, runbook):
    """ "Can this note be pinned" has one home (`pinnable_documents`): the form, the page and
    `ask()` accept exactly the user's live documents with a head version."""
    from retrieval.web.forms import AskForm

    headless = Document.objects.create(owner=alice, title="Being written")
    gone = services.note_create(owner=alice, title="Gone", body="Deleted note.")
    services.note_delete(document=gone, user=alice)
    bobs = services.note_create(owner=bob, title="Bob", body="Bob's note.")
    audience = audience_for(alice.pk)
    assert list(pinnable_documents(audience)) == [runbook]
    for document in (runbook, headless, gone, bobs):
        form = AskForm({"question": "certs", "pinned_document_id": document.pk}, user=alice)
        assert form.is_valid() == (document == runbook)
        assert (pinnable(audience, document.pk) is not None) == (document == runbook)


# --- permalinks ----------------------------------------------------------------------------------


def test_outcome_from_trace_rebuilds_the_stored_outcome(alice, runbook):
    vendor = make_external(alice, "Vendor docs", VENDOR)
    answerer = ScriptedAnswerer(
        [
            claim(runbook.head_id, "The staging timeout is 30 seconds."),
            claim(vendor.head_id, "The staging timeout is 60 seconds."),
            claim(runbook.head_id, "Made up.", "not in the note"),
        ]
    )
    outcome = lexical_ask(user=alice, question="What is the staging timeout?", answerer=answerer)
    rebuilt = outcome_from_trace(AskTrace.objects.get(pk=outcome.trace_id))
    assert rebuilt.as_dict() == outcome.as_dict()
    assert rebuilt.claims == outcome.claims and rebuilt.dropped == outcome.dropped


def test_outcome_from_trace_does_not_read_the_notes_again(alice, runbook):
    span = "Rotate the staging certs with certbot before Friday."
    outcome = lexical_ask(
        user=alice,
        question="rotate staging certs",
        answerer=ScriptedAnswerer([claim(runbook.head_id, span)]),
    )
    services.note_update(
        document=runbook,
        user=alice,
        base_version_id=runbook.head_id,
        title="Deploy runbook",
        body="Everything changed.",
    )
    rebuilt = outcome_from_trace(AskTrace.objects.get(pk=outcome.trace_id))
    assert rebuilt.claims[0].support[0].quoted_span == span


# --- the real answerers --------------------------------------------------------------------------


def test_with_the_extractive_answerer(alice, runbook):
    from retrieval.answer.answerers import ExtractiveAnswerer

    outcome = lexical_ask(
        user=alice,
        question="When do I rotate the staging certs with certbot?",
        answerer=ExtractiveAnswerer(),
    )
    assert outcome.decision == Decision.ANSWER
    assert outcome.answerer == "extractive"
    assert any("certbot before Friday" in c.text for c in outcome.claims)
    assert EgressLog.objects.count() == 0  # offline: nothing left the machine
    trace = AskTrace.objects.get(pk=outcome.trace_id)
    assert trace.trace["model"]["remote"] is False


def test_the_default_answerer_is_extractive_without_an_endpoint(alice, runbook, settings):
    settings.LODE_LLM_BASE_URL = ""
    outcome = lexical_ask(user=alice, question="When do I rotate the staging certs with certbot?")
    assert outcome.answerer == "extractive" and outcome.decision == Decision.ANSWER


def test_with_the_chat_answerer_no_egress_content_is_withheld_and_listed(alice, runbook, fake_llm):
    from retrieval.answer.answerers import ChatAnswerer

    secret = make_external(alice, "Private vendor notes", VENDOR, no_egress=True)
    fake_llm.reply(
        {
            "claims": [
                {
                    "text": "The staging timeout is 30 seconds.",
                    "support": [
                        {
                            "version_id": runbook.head_id,
                            "quoted_span": "The staging timeout is 30 seconds.",
                        }
                    ],
                }
            ]
        }
    )
    outcome = lexical_ask(
        user=alice, question="What is the staging timeout?", answerer=ChatAnswerer()
    )
    assert [(w.document_id, w.no_egress) for w in outcome.withheld] == [(secret.pk, True)]
    assert "60 seconds" not in fake_llm.requests[0].body.decode()
    assert outcome.decision in (Decision.ANSWER, Decision.ANSWER_WITH_CONFLICTS)
    trace = AskTrace.objects.get(pk=outcome.trace_id)
    assert trace.trace["model"]["remote"] is True and trace.trace["model"]["request"]
    assert trace.trace["withheld_passage_ids"]
    rebuilt = outcome_from_trace(trace)
    assert [w.document_id for w in rebuilt.withheld] == [secret.pk]
    assert EgressLog.objects.count() == 1


def test_a_remote_answer_citing_a_withheld_version_fails_closed(alice, runbook, fake_llm):
    from retrieval.answer.answerers import ChatAnswerer

    secret = make_external(alice, "Private vendor notes", VENDOR, no_egress=True)
    fake_llm.reply(
        {
            "claims": [
                {
                    "text": "The staging timeout is 60 seconds.",
                    "support": [
                        {
                            "version_id": secret.head_id,
                            "quoted_span": "The staging timeout is 60 seconds.",
                        }
                    ],
                }
            ]
        }
    )
    outcome = lexical_ask(
        user=alice, question="What is the staging timeout?", answerer=ChatAnswerer()
    )
    assert outcome.claims == [] and outcome.decision == Decision.ABSTAIN_NO_EVIDENCE
    assert outcome.dropped[0].step == "verbatim"


@pytest.fixture
def egress_plans(monkeypatch) -> list[EgressPlan]:
    """Every egress plan `ask()` makes, in order (the real planner, counted)."""
    from retrieval.answer import ask as ask_module

    plans: list[EgressPlan] = []
    real = ask_module.plan_egress

    def counted(pack: EvidencePack, *, question: str = "", **needed: Any) -> EgressPlan:
        plans.append(real(pack, question=question, **needed))
        return plans[-1]

    monkeypatch.setattr(ask_module, "plan_egress", counted)
    return plans


def test_egress_is_planned_once_and_the_answerer_sends_that_plan(
    alice, runbook, fake_llm, egress_plans
):
    from retrieval.answer.answerers import ChatAnswerer

    secret = make_external(alice, "Private vendor notes", VENDOR, no_egress=True)
    fake_llm.reply({"claims": []})
    outcome = lexical_ask(
        user=alice, question="What is the staging timeout?", answerer=ChatAnswerer()
    )
    (plan,) = egress_plans
    assert [i.document_id for i in plan.withheld] == [secret.pk]
    assert outcome.withheld == plan.withheld
    user_message = fake_llm.requests[0].message("user")
    assert plan.question in user_message and all(b.text in user_message for b in plan.blocks)
    assert "60 seconds" not in user_message
    row = EgressLog.objects.get()
    assert row.withheld_count == len(plan.withheld) == 1
    assert row.redaction_count == plan.redaction_count


def test_a_local_answer_plans_no_egress(alice, runbook, egress_plans):
    span = "Rotate the staging certs with certbot before Friday."
    lexical_ask(
        user=alice,
        question="When do I rotate the staging certs?",
        answerer=ScriptedAnswerer([claim(runbook.head_id, span)]),
    )
    assert egress_plans == [] and EgressLog.objects.count() == 0


def test_a_remote_judge_is_only_asked_about_versions_cleared_for_egress(
    alice, runbook, fake_llm, settings, egress_plans
):
    """A local answerer may cite a no-egress document (nothing left the machine); the LLM
    judge may not be shown it. The ask plans egress once, at the gate, and the judge only
    hears about claims whose versions that plan cleared; the other is dropped, fail closed."""
    settings.LODE_ENTAILMENT = "llm-judge"
    secret = make_external(alice, "Private vendor notes", VENDOR, no_egress=True)
    cleared = claim(
        runbook.head_id,
        "The staging timeout is half a minute.",
        "The staging timeout is 30 seconds.",
    )
    withheld = claim(
        secret.head_id,
        "The staging timeout is a whole minute.",
        "The staging timeout is 60 seconds.",
    )
    # The judge is asked twice about the cleared claim: is it entailed, does it answer.
    fake_llm.reply('{"entailed": true}').reply('{"answers": true}')
    outcome = lexical_ask(
        user=alice,
        question="What is the staging timeout?",
        answerer=ScriptedAnswerer([cleared, withheld]),
    )
    assert len(egress_plans) == 1
    entailment, relevance = fake_llm.requests
    assert "30 seconds" in entailment.body.decode() and "half a minute" in relevance.body.decode()
    assert all("60 seconds" not in r.body.decode() for r in fake_llm.requests)
    assert all("a whole minute" not in r.body.decode() for r in fake_llm.requests)
    assert [c.text for c in outcome.claims] == [cleared.text]
    (dropped,) = outcome.dropped
    assert dropped.claim == withheld and dropped.step == "entailment"
    assert WITHHELD_FROM_JUDGE in dropped.reason
    rows = list(EgressLog.objects.order_by("pk"))
    assert [row.purpose for row in rows] == ["judge", "judge"]
    # Each judge row lists exactly what went: the cleared runbook version, never the vendor's,
    # with the characters of the quoted span.
    span_chars = len("The staging timeout is 30 seconds.")
    expected = [{"document_id": runbook.pk, "version_id": runbook.head_id, "chars": span_chars}]
    assert [row.items for row in rows] == [expected, expected]


# --- helpers -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "span", "expected"),
    [
        ("abc def ghi", "def", (4, 7)),
        ("abc  def\n\tghi", "def ghi", (5, 13)),
        ("café au lait", "cafe\u0301 au", (0, 7)),  # NFC on the span side
        ("cafe\u0301 au lait", "café au", (0, 8)),  # NFC on the body side
        ("abc", "xyz", None),
        ("abc", "   ", None),
    ],
)
def test_locate_span(body, span, expected):
    assert locate_span(span, body) == expected


def test_context_segments_concatenate_to_a_slice_of_the_body():
    body = "First line.\n" + "word " * 100 + "TARGET span here " + "tail " * 100
    start = body.index("TARGET")
    end = start + len("TARGET span")
    segments = context_segments(body, start, end)
    text = "".join(t for t, _ in segments)
    assert text in body and [t for t, h in segments if h] == ["TARGET span"]
    assert not text.startswith("ord") and not text.endswith("tai")  # whole words
    assert all(t for t, _ in segments)


def test_context_segments_stay_in_the_paragraph():
    body = "Heading\n\nThe span is\nhere, wrapped.\n\nNext paragraph."
    start = body.index("span")
    segments = context_segments(body, start, start + 4)
    assert "".join(t for t, _ in segments) == "The span is\nhere, wrapped."


def test_code_version_is_a_commit_or_empty_and_never_raises():
    value = code_version()
    assert isinstance(value, str)


def test_trace_rows_are_written_even_inside_an_outer_transaction(alice, runbook):
    with transaction.atomic():
        outcome = lexical_ask(
            user=alice, question="What is the capital of France?", answerer=ScriptedAnswerer()
        )
    assert AskTrace.objects.filter(pk=outcome.trace_id).exists()


# --- abstention that fails for the right reasons (the real extractive answerer) ---------------


def cited_documents(outcome) -> set[int]:
    return {s.document_id for c in outcome.claims for s in c.support}


# Both lexical backends rank with BM25: PostgreSQL's ts_rank_cd would put the backup
# runbook above the meeting note.
def test_a_time_word_does_not_sink_an_answerable_question(alice, ops_notes):
    outcome = extractive_ask(user=alice, question="When do the nightly backups run now?")
    assert outcome.decision == Decision.ANSWER, AskTrace.objects.get(pk=outcome.trace_id).trace[
        "decision"
    ]
    assert any("03:30 UTC" in c.text for c in outcome.claims)
    assert ops_notes["sync"].pk in cited_documents(outcome)


def test_a_section_heading_answers_a_how_do_i_question(alice, ops_notes):
    outcome = extractive_ask(user=alice, question="How do I promote the replica during a failover?")
    assert outcome.decision == Decision.ANSWER, AskTrace.objects.get(pk=outcome.trace_id).trace[
        "decision"
    ]
    assert any("pg_ctl promote" in c.text for c in outcome.claims)
    assert cited_documents(outcome) == {ops_notes["db"].pk}
    pack = AskTrace.objects.get(pk=outcome.trace_id).trace["pack"]["items"]
    promote = next(i for i in pack if "pg_ctl promote" in i["text"])
    assert promote["heading_path"] == ["Failover", "Promote the replica"]
    row = AskTrace.objects.get(pk=outcome.trace_id)
    verdicts = row.trace["gate"]
    assert any(v.get("section_match") for v in verdicts if v["passed"])
    assert "sections 1" in row.trace["manifests"]["relevance"]
    # replay runs the rule again, and names a stored verdict it no longer agrees with
    from retrieval.answer.replay import replay

    assert replay(row) == []
    matched = next(i for i, v in enumerate(verdicts) if v.get("section_match"))
    del row.trace["gate"][matched]["section_match"]
    assert any("section rule did not hold → holds" in d for d in replay(row))


def test_a_near_topic_procedure_question_is_not_answered_by_the_section(alice, ops_notes):
    # "staging" is in no heading: the promote steps are not its answer
    outcome = extractive_ask(user=alice, question="How do I promote the replica in staging?")
    assert not any("pg_ctl promote" in c.text for c in outcome.claims)


def test_a_pinned_ask_answers_from_that_note(alice, ops_notes):
    outcome = extractive_ask(
        user=alice,
        question="What did we decide about backups?",
        pinned_document_id=ops_notes["sync"].pk,
    )
    assert outcome.decision == Decision.ANSWER, AskTrace.objects.get(pk=outcome.trace_id).trace[
        "decision"
    ]
    assert any("03:30 UTC" in c.text for c in outcome.claims)
    assert cited_documents(outcome) == {ops_notes["sync"].pk}  # not the backup runbook


def test_an_abstention_stores_and_shows_the_closest_passages(alice, ops_notes):
    outcome = extractive_ask(
        user=alice, question="How do I restore the billing database from tape?"
    )
    assert outcome.decision == Decision.ABSTAIN_NO_EVIDENCE
    assert 1 <= len(outcome.closest) <= 3
    first = outcome.closest[0]
    assert first.document_id in {d.pk for d in ops_notes.values()}
    assert first.evidence_url.startswith(f"/evidence/{first.document_id}/{first.version_id}/")
    assert first.snippet and "restore" in first.snippet.casefold()
    assert all(c.evidence_url for c in outcome.closest)
    row = AskTrace.objects.get(pk=outcome.trace_id)
    assert row.answer["closest"][0]["evidence_url"] == first.evidence_url
    assert outcome_from_trace(row).closest == outcome.closest  # the permalink shows them too


def test_an_abstention_after_the_gate_shows_the_closest_passages(alice, runbook):
    outcome = lexical_ask(
        user=alice,
        question="When do I rotate the staging certs?",
        answerer=ScriptedAnswerer(
            [claim(runbook.head_id, "Certs rotate hourly.", "not in the note")]
        ),
    )
    assert outcome.decision == Decision.ABSTAIN_NO_EVIDENCE and outcome.dropped
    assert outcome.closest and "certbot" in outcome.closest[0].snippet


def test_an_answer_and_a_pinned_failure_store_no_closest_passages(alice, runbook):
    answered = lexical_ask(
        user=alice,
        question="When do I rotate the staging certs?",
        answerer=ScriptedAnswerer(
            [claim(runbook.head_id, "Rotate the staging certs with certbot before Friday.")]
        ),
    )
    assert answered.decision == Decision.ANSWER and answered.closest == []
    assert "closest" not in AskTrace.objects.get(pk=answered.trace_id).answer
    failed = lexical_ask(
        user=alice, question="certs", pinned_document_id=10**9, answerer=ScriptedAnswerer()
    )
    assert failed.closest == []


def test_clarifying_choices_are_stored_with_the_answer(alice, ops_notes):
    outcome = lexical_ask(user=alice, question="backups?", answerer=ScriptedAnswerer())
    assert outcome.decision == Decision.ASK_CLARIFYING
    assert outcome.clarifying_questions  # the plain-text list stays, for old readers
    assert outcome.clarifying_choices
    assert all("backups" in c.question for c in outcome.clarifying_choices)
    row = AskTrace.objects.get(pk=outcome.trace_id)
    assert row.answer["clarifying_choices"] == [c.as_dict() for c in outcome.clarifying_choices]
    assert outcome_from_trace(row).clarifying_choices == outcome.clarifying_choices


def test_a_clarifying_choice_asked_answers(alice, ops_notes):
    outcome = lexical_ask(user=alice, question="backups?", answerer=ScriptedAnswerer())
    scoped = next(c for c in outcome.clarifying_choices if "Ops sync" in c.label)
    assert scoped.pinned_document_id == ops_notes["sync"].pk
    again = extractive_ask(
        user=alice, question=scoped.question, pinned_document_id=scoped.pinned_document_id
    )
    assert again.decision == Decision.ANSWER, AskTrace.objects.get(pk=again.trace_id).trace[
        "decision"
    ]


def test_a_bad_filter_offers_the_question_without_it(alice, runbook):
    outcome = lexical_ask(
        user=alice, question="staging certs type:banana", answerer=ScriptedAnswerer()
    )
    assert [c.question for c in outcome.clarifying_choices] == ["staging certs"]
    assert outcome.closest == []  # nothing was searched


def test_a_closest_passage_snippet_is_short_readable_text_near_the_question_words():
    from retrieval.answer.display import SNIPPET_CHARS, passage_snippet

    text = (
        "## Restore\n\n"
        + "Filler words here. " * 20
        + "Restore **from** the `S3` bucket. "
        + ("More text follows. " * 30)
    )
    snippet = passage_snippet(text, ["restoring", "bucket"])
    assert "##" not in snippet and "**" not in snippet and "`" not in snippet
    assert "Restore from the S3 bucket." in snippet  # stemmed match, the lead cut at a word
    assert snippet.startswith("…") and snippet.endswith("…")
    assert len(snippet) <= SNIPPET_CHARS + 2
    assert passage_snippet("# Only a heading", ["x"]) == "Only a heading"
    assert passage_snippet("Short text.", []) == "Short text."


def test_a_closest_passage_snippet_keeps_list_items_apart():
    from retrieval.answer.display import passage_snippet

    text = "- Grafana admin: user admin\n- Wi-Fi at the office: in the welcome e-mail\n"
    snippet = passage_snippet(text, ["wifi"])
    assert snippet == "Grafana admin: user admin · Wi-Fi at the office: in the welcome e-mail"
    assert passage_snippet("One sentence.\nAnother one.", []) == "One sentence. Another one."
