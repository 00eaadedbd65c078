"""The plan in a real ask: stored in the trace, narrowing applied to the evidence (or dropped,
saying so), made again by replay (differences in words), refined by a chat model when asked,
and shown under Advanced on the answer page. Run on SQLite and PostgreSQL (DATABASE_URL)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from notes.models import Document
from retrieval.answer.replay import replay
from retrieval.answer.trace import Trace
from retrieval.models import AskTrace, EgressLog
from retrieval.plan.rules import RULES_VERSION
from retrieval.plan.words import plan_lines
from tests.factories import extractive_ask, note

pytestmark = pytest.mark.django_db


@pytest.fixture
def backup_notes(alice) -> tuple[Document, Document]:
    runbook = note(
        alice,
        "Backup runbook",
        "# Backup runbook\n\nBackups are kept for 30 days in the bucket.\n",
    )
    archive = note(
        alice,
        "Archive policy",
        "# Archive policy\n\nBackups are kept for 7 years in cold storage.\n",
        tags="records",
    )
    return runbook, archive


@pytest.fixture
def ops_syncs(alice) -> tuple[Document, Document]:
    may = note(
        alice,
        "Ops sync 2024-05-14",
        "# Ops sync 2024-05-14\n\nWe decided backups move to 03:30 UTC.\n",
    )
    june = note(
        alice,
        "Ops sync 2024-06-11",
        "# Ops sync 2024-06-11\n\nWe decided backups move to 04:00 UTC.\n",
    )
    return may, june


def stored(outcome) -> tuple[AskTrace, Trace]:
    row = AskTrace.objects.get(pk=outcome.trace_id)
    return row, Trace.from_row(row)


def pack_documents(trace: Trace) -> set[int]:
    assert trace.pack is not None
    return {item.document_id for item in trace.pack.items}


def test_an_ask_stores_its_plan_and_the_plan_round_trips(alice, backup_notes):
    outcome = extractive_ask(user=alice, question="How long are backups kept?")
    row, trace = stored(outcome)
    plan = row.trace["plan"]
    assert plan["rules_version"] == RULES_VERSION
    assert (plan["intent"], plan["rule"]) == ("number", "how many / how much")
    assert plan["legs"] == ["lexical"]
    assert plan["budget"]["search_hits"] == trace.settings.search_limit == 24
    assert plan["narrowing"]["applied"] is False and plan["narrowing"]["fallback"] == ""
    assert trace.plan is not None and trace.plan.as_dict() == plan
    assert trace.to_dict() == row.trace
    assert pack_documents(trace) == {d.pk for d in backup_notes}
    # Claims were shown, so whether they hold what a "how long" question wants is recorded.
    assert outcome.claims and plan["enough_met"] is True
    assert plan["enough_why"] == "a claim holds a number"


def test_a_named_note_narrows_the_evidence_to_it(alice, backup_notes):
    _runbook, archive = backup_notes
    outcome = extractive_ask(
        user=alice, question="How long are backups kept according to the archive policy?"
    )
    _row, trace = stored(outcome)
    assert trace.plan is not None
    assert trace.plan.narrowing.notes == ["Archive policy"]
    assert trace.plan.narrowing.applied is True
    assert pack_documents(trace) == {archive.pk}
    assert all("30 days" not in claim.text for claim in outcome.claims)


def test_a_tag_narrows_and_a_tag_nobody_uses_narrows_nothing(alice, backup_notes):
    runbook, archive = backup_notes
    outcome = extractive_ask(user=alice, question="How long are backups kept #records")
    _, trace = stored(outcome)
    assert trace.plan.narrowing.tags == ["records"]
    assert pack_documents(trace) == {archive.pk}
    outcome = extractive_ask(user=alice, question="How long are backups kept #nothing")
    _, trace = stored(outcome)
    assert trace.plan.narrowing.tags == [] and not trace.plan.narrowing.applied
    assert pack_documents(trace) == {runbook.pk, archive.pk}


def test_a_period_narrows_to_the_notes_dated_in_it(alice, ops_syncs):
    may, _june = ops_syncs
    outcome = extractive_ask(user=alice, question="What did we decide about backups in May 2024?")
    _, trace = stored(outcome)
    narrowing = trace.plan.narrowing
    assert narrowing.period is not None and narrowing.period.label == "2024-05-01 to 2024-05-31"
    assert narrowing.applied is True
    assert pack_documents(trace) == {may.pk}
    # "May 2024" is met by the narrowing, not asked of the evidence's words: it answers.
    assert [claim.text for claim in outcome.claims] == ["We decided backups move to 03:30 UTC."]


def test_narrowing_words_are_left_out_only_when_the_narrowing_applied():
    from datetime import date

    from retrieval.plan.narrowing import Narrowing, Period, without_narrowing_words

    period = Period(date(2024, 5, 1), date(2024, 6, 1), "May 2024")
    question = "What did we decide about #backups in May 2024?"
    applied = Narrowing(period=period, period_documents=1, tags=["backups"], applied=True)
    assert without_narrowing_words(question, applied) == "What did we decide about in ?"
    assert without_narrowing_words(question, Narrowing(period=period)) == question


def test_a_named_meeting_no_title_matches_narrows_to_meeting_notes_of_that_month(alice):
    from django.utils import timezone

    today = timezone.localdate()
    year = today.year if today.month >= 3 else today.year - 1
    meeting = note(
        alice,
        f"Ops sync {year}-03-10",
        f"# Ops sync {year}-03-10\n\nWe decided backups move to 03:30 UTC.\n",
    )
    note(
        alice,
        f"Backup runbook {year}-03-12",
        f"# Backup runbook {year}-03-12\n\nWe decided backups move to 05:00 UTC.\n",
    )
    outcome = extractive_ask(
        user=alice, question="What did we decide about backups in the March meeting?"
    )
    _, trace = stored(outcome)
    narrowing = trace.plan.narrowing
    assert narrowing.notes == [] and narrowing.kinds == ["meeting"] and narrowing.applied
    assert pack_documents(trace) == {meeting.pk}
    assert "Narrowed to: meeting notes; notes dated" in " ".join(plan_lines(trace.plan))


def test_a_period_no_note_is_dated_in_falls_back_and_says_so(alice, ops_syncs):
    outcome = extractive_ask(user=alice, question="What did we decide about backups in May 1999?")
    _, trace = stored(outcome)
    narrowing = trace.plan.narrowing
    assert narrowing.period_documents == 0 and not narrowing.applied
    assert "No note is dated 1999-05-01 to 1999-05-31" in narrowing.fallback
    assert narrowing.fallback in outcome.notes  # said on the answer, not only in the plan
    # Not narrowed, so the evidence is what search found: both meetings.
    assert pack_documents(trace) == {d.pk for d in ops_syncs}


def test_narrowed_notes_absent_from_the_hits_fall_back_to_the_hits(alice, backup_notes):
    note(alice, "Roses", "The roses need pruning in February.\n", tags="garden")
    outcome = extractive_ask(user=alice, question="How long are backups kept #garden")
    _, trace = stored(outcome)
    narrowing = trace.plan.narrowing
    assert narrowing.tags == ["garden"] and narrowing.applied is False
    assert "answered without narrowing" in narrowing.fallback
    assert pack_documents(trace) == {d.pk for d in backup_notes}


def test_another_users_note_title_narrows_nothing(alice, bob, backup_notes):
    note(bob, "Secret plan", "# Secret plan\n\nBackups are kept for 1 day.\n")
    outcome = extractive_ask(user=alice, question="How long are backups kept in the secret plan?")
    _, trace = stored(outcome)
    assert trace.plan.narrowing.notes == [] and not trace.plan.narrowing.applied


def test_replay_of_an_unchanged_world_reports_no_plan_difference(alice, backup_notes):
    outcome = extractive_ask(
        user=alice, question="How long are backups kept according to the archive policy?"
    )
    row, _ = stored(outcome)
    assert replay(row) == []


def test_replay_reports_a_changed_plan_in_words(alice, backup_notes):
    _runbook, archive = backup_notes
    outcome = extractive_ask(
        user=alice, question="How long are backups kept according to the archive policy?"
    )
    row, _ = stored(outcome)
    # The named note renamed: the plan made again narrows to nothing.
    Document.objects.filter(pk=archive.pk).update(title="Retention", title_key="retention")
    differences = replay(row)
    assert "plan narrowing notes differs: ['Archive policy'] → []" in differences
    # A stored plan from other rules: replay names the rules and the intent that moved.
    row.trace["plan"]["rules_version"] = "plan-rules-0"
    row.trace["plan"]["intent"] = "list"
    differences = replay(row)
    assert f"plan rules differ: plan-rules-0 → {RULES_VERSION}" in differences
    assert "plan intent differs: list → number" in differences


def test_the_answer_page_shows_the_plan_in_words_under_advanced(alice_client, alice, ops_syncs):
    outcome = extractive_ask(user=alice, question="What did we decide about backups in May 2024?")
    page = alice_client.get(reverse("ask-permalink", args=[outcome.trace_id])).content.decode()
    advanced = page[page.index("<summary>Advanced</summary>") :]
    assert "How lode planned the search" in advanced
    assert "Asks for a decision taken: rule “decided words” (“did we decide”)" in advanced
    assert "Narrowed to: notes dated 2024-05-01 to 2024-05-31 (“May 2024”)." in advanced


def test_a_page_for_a_trace_without_a_plan_shows_no_plan(alice_client, alice, backup_notes):
    outcome = extractive_ask(user=alice, question="How long are backups kept?")
    row = AskTrace.objects.get(pk=outcome.trace_id)
    del row.trace["plan"]
    row.save(update_fields=["trace"])
    page = alice_client.get(reverse("ask-permalink", args=[outcome.trace_id])).content.decode()
    assert "How lode planned the search" not in page


# --- a chat model refining the plan ---------------------------------------------------------------


REFINEMENT = {
    "intent": "list",
    "answer_shape": None,
    "links": None,
    "period_start": None,
    "period_end": None,
    "tags": ["records", "invented"],
    "notes": None,
}


def chat_ask(alice, question: str):
    from retrieval.answer.answerers import ChatAnswerer
    from retrieval.answer.ask import ask

    return ask(user=alice, question=question, mode="lexical", answerer=ChatAnswerer())


def test_a_chat_model_refines_the_plan_and_replay_reuses_its_reply(
    alice, backup_notes, fake_llm, settings
):
    _runbook, archive = backup_notes
    settings.LODE_PLAN_REFINE = True
    fake_llm.reply(REFINEMENT)
    fake_llm.reply({"claims": []})
    outcome = chat_ask(alice, "How long are backups kept for records?")
    row, trace = stored(outcome)
    plan = trace.plan
    assert plan.refined_by and plan.refined == ["intent", "tags"]
    assert plan.intent == "list" and plan.shape == "a list of items"
    # "invented" is not in the question: the model may not narrow by it.
    assert plan.narrowing.tags == ["records"] and plan.narrowing.applied
    assert pack_documents(trace) == {archive.pk}
    first = fake_llm.requests[0]
    assert first.json["response_format"]["json_schema"]["name"] == "retrieval_plan"
    assert "Backups are kept" not in first.body.decode()  # the question only, no evidence
    rows = list(EgressLog.objects.order_by("pk"))
    assert rows[0].purpose == "qa" and rows[0].items == []
    sent = len(fake_llm.requests)
    assert not any(d.startswith("plan ") for d in replay(row))
    assert len(fake_llm.requests) == sent  # replay never asks the model again


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ({**REFINEMENT, "intent": "banana"}, "does not match"),
        ({**REFINEMENT, "period_start": "2024-13-01", "period_end": "2024-12-01"}, "ISO date"),
        ({**REFINEMENT, "period_start": "2024-05-02", "period_end": "2024-05-01"}, "before"),
    ],
)
def test_an_invalid_refinement_keeps_the_rules_plan_and_says_so(
    alice, backup_notes, fake_llm, settings, reply, why
):
    settings.LODE_PLAN_REFINE = True
    fake_llm.reply(reply)
    fake_llm.reply({"claims": []})
    outcome = chat_ask(alice, "How long are backups kept?")
    _, trace = stored(outcome)
    plan = trace.plan
    assert plan.intent == "number" and not plan.refined_by
    assert any(why in line and "rules' plan was kept" in line for line in plan.notes)


def test_without_the_setting_the_chat_model_is_not_asked_about_the_plan(
    alice, backup_notes, fake_llm
):
    fake_llm.reply({"claims": []})
    outcome = chat_ask(alice, "How long are backups kept?")
    _, trace = stored(outcome)
    assert not trace.plan.refined_by and len(fake_llm.requests) == 1


def test_a_models_links_choice_applies_but_never_over_the_users(
    alice, backup_notes, fake_llm, settings
):
    from retrieval.answer.answerers import ChatAnswerer
    from retrieval.answer.ask import ask

    settings.LODE_PLAN_REFINE = True
    follow = {**REFINEMENT, "intent": None, "tags": None, "links": "follow"}
    fake_llm.reply(follow)
    fake_llm.reply({"claims": []})
    outcome = chat_ask(alice, "How long are backups kept?")
    row, trace = stored(outcome)
    assert trace.plan.refined == ["links"] and trace.plan.search_follow_links is True
    assert row.trace["expansion"]["rule"] == "asked"  # search was told to follow
    fake_llm.reply(follow)
    fake_llm.reply({"claims": []})
    outcome = ask(
        user=alice,
        question="How long are backups kept?",
        mode="lexical",
        answerer=ChatAnswerer(),
        follow_links=False,
    )
    _, trace = stored(outcome)
    assert trace.plan.links == "not asked" and trace.plan.refined == []
    assert trace.plan.search_follow_links is False
