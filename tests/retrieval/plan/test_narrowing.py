"""Narrowing cues read from a question's words, periods against a given day (pure)."""

from __future__ import annotations

from datetime import date

import pytest

from retrieval.plan.narrowing import Cues, Period, cues_in, note_phrases, period_in

TODAY = date(2026, 12, 5)  # a Saturday


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("What happened on 2024-05-03?", "2024-05-03", "2024-05-04"),
        ("What did the vet say on May 3, 2024?", "2024-05-03", "2024-05-04"),
        ("Minutes of 3rd March 2025", "2025-03-03", "2025-03-04"),
        ("What did we spend in May 2024?", "2024-05-01", "2024-06-01"),
        ("Rota for 2025-02", "2025-02-01", "2025-03-01"),
        ("Which invoices arrived in 2023?", "2023-01-01", "2024-01-01"),
        ("What did the school send yesterday?", "2026-12-04", "2026-12-05"),
        ("What came in today?", "2026-12-05", "2026-12-06"),
        ("What did we agree last week?", "2026-11-23", "2026-11-30"),
        ("Tasks for this week", "2026-11-30", "2026-12-07"),
        ("Bills from last month", "2026-11-01", "2026-12-01"),
        ("Bills from this month", "2026-12-01", "2027-01-01"),
        ("Court dates last year", "2025-01-01", "2026-01-01"),
        ("Symptoms in the past 10 days", "2026-11-25", "2026-12-06"),
        ("What did we decide in March?", "2026-03-01", "2026-04-01"),
        ("What did we decide at the December meeting?", "2026-12-01", "2027-01-01"),
        ("Notes from early January", "2026-01-01", "2026-02-01"),
        ("Last December's heating bill", "2025-12-01", "2026-01-01"),
    ],
)
def test_a_period_is_read_against_the_day_given(question, start, end):
    period = period_in(question, TODAY)
    assert period is not None, question
    assert (period.start.isoformat(), period.end.isoformat()) == (start, end)


@pytest.mark.parametrize(
    "question",
    [
        "May I park in the visitor bay?",
        "How do we march the pupils to the hall?",
        "How many days a week is the clinic open?",
        "What is the 2024 budget line for paint?",
        "Who signed the 30-day notice?",
        "What happened on 2024-02-30?",
    ],
)
def test_words_that_only_look_like_dates_name_no_period(question):
    assert period_in(question, TODAY) is None


def test_note_phrases_give_the_title_with_and_without_its_kind_word():
    assert note_phrases("What does the backup runbook say about restores?") == (
        "backup runbook",
        "backup",
    )
    assert note_phrases("What did we decide in the March meeting?") == ("March meeting", "March")
    assert note_phrases("In “Ward 7 handover”, who is on nights?") == ("Ward 7 handover",)
    assert note_phrases("Where is the stopcock?") == ()


def test_tags_spaces_and_sources_are_read_from_their_cue_words():
    cues = cues_in(
        "Which notes tagged ops mention #on-call in the Family space from the wiki source?",
        TODAY,
    )
    assert cues.tags == ("ops", "on-call")
    assert cues.spaces == ("Family",)
    assert cues.sources == ("wiki",)
    assert cues_in("How do I write C# and call extension #9?", TODAY).tags == ()


def test_cues_round_trip_through_their_stored_form():
    cues = cues_in("What did the #smith-case hearing decide in May 2024?", TODAY)
    assert cues.period == Period(date(2024, 5, 1), date(2024, 6, 1), "May 2024")
    assert Cues.from_dict(cues.as_dict()) == cues
    assert Cues.from_dict({"period": {"start": "2024-05-02", "end": "2024-05-01"}}).period is None
    assert cues_in("Where is the stopcock?", TODAY).empty


def test_a_named_notes_kind_word_gives_its_note_kind():
    assert cues_in("What did we decide in the March meeting?", TODAY).kinds == ("meeting",)
    assert cues_in("Step 3 of the restore runbook", TODAY).kinds == ("runbook",)
    assert cues_in("What is in the backup plan?", TODAY).kinds == ()
