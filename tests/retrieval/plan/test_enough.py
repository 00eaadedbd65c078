"""Whether the claims shown are enough for the plan's intent (pure)."""

from __future__ import annotations

import pytest

from retrieval.plan.enough import enough_for

ONE = [("Backups are kept for 30 days.", {1})]
TWO_NOTES = [("Backups are kept for 30 days.", {1}), ("Archives are kept 7 years.", {2})]
TWO_IN_ONE = [("Give paracetamol.", {1}), ("Record it on the chart.", {1})]


@pytest.mark.parametrize(
    ("intent", "shown", "met"),
    [
        ("list", ONE, False),
        ("list", TWO_IN_ONE, True),
        ("comparison", TWO_IN_ONE, False),
        ("comparison", TWO_NOTES, True),
        ("relational", TWO_NOTES, True),
        ("number", ONE, True),
        ("number", [("Ask the pharmacist first.", {1})], False),
        ("date", [("The bins go out on Tuesday.", {1})], True),
        ("date", [("The bins go out after tea.", {1})], False),
        ("fact", ONE, True),
        ("fact", [], False),
    ],
)
def test_enough_depends_on_what_the_question_asks_for(intent, shown, met):
    assert enough_for(intent, shown)[0] is met
