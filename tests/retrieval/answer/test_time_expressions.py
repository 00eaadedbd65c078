"""Time expressions (retrieval/answer/time_expressions.py), read by the relevance scorer's
answer types and by the answer-shape rules for *when* questions: the cues each pattern finds,
the words it leaves alone, and both callers deciding by them."""

from __future__ import annotations

import pytest

from retrieval.answer import answer_shape as shape
from retrieval.answer.relevance.candidate import Candidate
from retrieval.answer.relevance.claim_types import answer_types
from retrieval.answer.relevance.question import KIND_TIME
from retrieval.answer.time_expressions import OCCASION_RE, TIME_RE


@pytest.mark.parametrize(
    "text",
    ["at 03:30 UTC", "by 5pm", "in 2026", "on 2026-10-22", "in Q3", "after 30s", "every 2 hrs",
     "a cron job"],
)  # fmt: skip
def test_a_time_cue_is_found(text: str) -> None:
    assert TIME_RE.search(text)


@pytest.mark.parametrize(
    "text", ["version 3 of the API", "room 12", "port 8080", "the second replica", "Q5"]
)
def test_numbers_and_words_that_are_not_times_are_not_time_cues(text: str) -> None:
    assert TIME_RE.search(text) is None


@pytest.mark.parametrize(
    "text",
    ["on 2026-10-22", "on 22/10/2026", "on 3/4", "on the 5th of March", "on 5 March",
     "on March 5th", "in March 2026", "at 09:15", "on Tuesday", "yesterday", "tonight"],
)  # fmt: skip
def test_an_occasion_is_found(text: str) -> None:
    assert OCCASION_RE.search(text)


@pytest.mark.parametrize(
    "text", ["yearly, in January", "quarterly visits", "in 2026"]
)
def test_a_schedule_or_a_year_alone_is_not_an_occasion(text: str) -> None:
    assert OCCASION_RE.search(text) is None


def test_the_relevance_scorer_reads_time_from_the_shared_patterns() -> None:
    assert KIND_TIME in answer_types("The nightly backup runs at 03:30.")
    assert KIND_TIME in answer_types("Rotated in Q3 by the platform team.")
    assert KIND_TIME not in answer_types("The backup is stored on host db-01.")


def test_the_answer_shape_rules_read_time_from_the_shared_patterns() -> None:
    question = "When was the SECRET_KEY last rotated?"
    words = shape.question_words(question)
    assert shape.only_schedule(words, "The SECRET_KEY is rotated yearly, in January.")
    assert not shape.only_schedule(words, "The SECRET_KEY is rotated yearly; last on 2026-01-14.")
    when = "When do the nightly backups run?"
    assert shape.shape_problem(when, Candidate(text="Backups run nightly at 02:00.")) == ""
    assert (
        shape.shape_problem(when, Candidate(text="Backups are stored in S3 with pgBackRest."))
        == shape.NO_TIME
    )
