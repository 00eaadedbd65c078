"""The intent rules on questions from many walks of life: each question's intent, the row that
fired, and what the plan asks of search (links, budget)."""

from __future__ import annotations

from datetime import date

import pytest

from retrieval.plan.plan import LINKS_ASKED, LINKS_NOT_ASKED, rules_plan, search_hits
from retrieval.plan.question import question_profile
from retrieval.plan.rules import INTENT_RULES, INTENTS, LINKS_FOLLOW, first_rule, yes_no_question

TODAY = date(2026, 12, 5)

INTENT_CASES = [
    # household
    ("How many tablets does Gran take each morning?", "number"),
    ("How much was the plumber's invoice?", "number"),
    ("When are the bins collected?", "date"),
    ("How often do we water the fig tree?", "date"),
    ("Who fixed the boiler last time?", "who"),
    ("How do I bleed the radiators?", "procedure"),
    ("What did we decide about the summer holiday?", "decision"),
    ("What is the current rent for the flat?", "latest"),
    ("Is the spare key still under the mat?", "latest"),
    ("Is the dishwasher under warranty?", "yes/no"),
    ("List the allergies recorded for Sam", "list"),
    ("Compare the two mortgage offers", "comparison"),
    ("Where is the stopcock?", "fact"),
    ("Why did the fuse keep tripping?", "fact"),
    ("What colour is the hallway paint?", "fact"),
    # hospital
    ("What dose of amoxicillin was prescribed for bed 4?", "number"),
    ("Which nurse is responsible for ward 7 tonight?", "who"),
    ("How to prepare a patient for an MRI scan", "procedure"),
    ("What is the patient's latest potassium level?", "latest"),
    ("Does the ward accept visitors after 8pm?", "yes/no"),
    ("What are the steps of the sepsis bundle?", "procedure"),
    ("Who are the ward's consultants?", "list"),
    ("Why did we choose the Corvex mattresses?", "decision"),
    ("What does a DBS check cost?", "number"),
    ("What happens on completion day?", "procedure"),
    ("Which drugs interact with warfarin versus heparin?", "comparison"),
    # school
    ("When is the parent-teacher evening?", "date"),
    ("Who teaches year 9 chemistry?", "who"),
    ("What did the governors agree on uniforms?", "decision"),
    ("How should we run the fire drill?", "procedure"),
    ("Can pupils bring phones on the trip?", "yes/no"),
    ("What kinds of clubs run on Wednesdays?", "list"),
    # law office
    ("What did the court rule in the Smith appeal?", "fact"),
    ("Who is the owner of the Jones matter?", "who"),
    ("What is the deadline for filing the defence?", "date"),
    ("How is the Smith case related to the Jones estate?", "relational"),
    ("What is the difference between the two settlement drafts?", "comparison"),
    ("How many hours were billed to the Patel file?", "number"),
    # software
    ("How do I promote the replica?", "procedure"),
    ("What does the payments API depend on?", "relational"),
    ("Who owns the billing service?", "who"),
    ("What port does the metrics exporter listen on?", "number"),
    ("Which host runs the nightly backup?", "fact"),
]


@pytest.mark.parametrize(("question", "intent"), INTENT_CASES)
def test_each_question_gets_its_intent(question, intent):
    plan = rules_plan(
        question,
        today=TODAY,
        mode="hybrid",
        follow_links=None,
        max_items=12,
        max_chars=12_000,
        seconds=30,
    )
    assert plan.intent == intent, (question, plan.rule, plan.fired)
    assert plan.intent in INTENTS


def test_the_rows_are_in_the_order_they_are_tried_and_the_last_always_fires():
    assert INTENT_RULES[-1].fires("zzz", question_profile("zzz"))
    names = [rule.name for rule in INTENT_RULES]
    assert len(names) == len(set(names))
    # Comparison words outrank the yes/no opener and the wh-typing below them.
    rule, fired = first_rule("Is Postgres better than MySQL?", question_profile("x"))
    assert (rule.intent, fired) == ("comparison", "better than")


def test_a_wh_word_anywhere_makes_it_not_a_yes_no_question():
    assert yes_no_question("Is the clinic open on Sundays?")
    assert not yes_no_question("Can you tell me when the clinic opens?")
    assert not yes_no_question("When is the clinic open?")


@pytest.mark.parametrize(
    ("question", "follow_links", "links", "follow"),
    [
        ("What does the payments API depend on?", None, LINKS_FOLLOW, True),
        ("Who owns the billing service?", None, LINKS_FOLLOW, True),
        ("When are the bins collected?", None, "rule", None),
        ("When are the bins collected?", True, LINKS_ASKED, True),
        ("What does the payments API depend on?", False, LINKS_NOT_ASKED, False),
    ],
)
def test_links_follow_the_users_choice_then_the_rule(question, follow_links, links, follow):
    plan = rules_plan(
        question,
        today=TODAY,
        mode="hybrid",
        follow_links=follow_links,
        max_items=12,
        max_chars=12_000,
        seconds=30,
    )
    assert (plan.links, plan.follow_links) == (links, follow)
    # Search hears the user's choice; a rule's "follow" is re-read by the graph rule itself.
    assert plan.search_follow_links == (follow_links if follow_links is not None else None)


def test_the_budget_grows_for_questions_that_need_several_values():
    def hits(question: str, max_items: int = 12) -> int:
        plan = rules_plan(
            question,
            today=TODAY,
            mode="lexical",
            follow_links=None,
            max_items=max_items,
            max_chars=12_000,
            seconds=30,
        )
        assert plan.legs == ("lexical",)
        return plan.budget.search_hits

    assert hits("Where is the stopcock?") == search_hits(12) == 24
    assert hits("List the allergies recorded for Sam") == 48
    assert hits("Where is the stopcock?", max_items=3) == 20
