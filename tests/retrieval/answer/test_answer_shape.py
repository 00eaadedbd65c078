"""Answer shape: a claim that cannot answer the question by its own words is
dropped with a reason a reader understands, and the extractive answerer offers a unit that
can before one that cannot."""

from __future__ import annotations

import pytest

from retrieval.answer import answer_shape as shape
from retrieval.answer.gate import NOT_AN_ANSWER, STEP_RELEVANCE, shape_verdict
from retrieval.answer.relevance.candidate import Candidate
from retrieval.answer.types import Claim, ClaimVerdict, Decision, Support
from retrieval.models import AskTrace
from tests.factories import extractive_ask


def problem(question: str, text: str, *, title: str = "", heading: str = "") -> str:
    return shape.shape_problem(question, Candidate(text=text, title=title, heading_path=heading))


# --- false answers from the near-topic sets: each is dropped, with the right reason ----------


@pytest.mark.parametrize(
    ("question", "claim", "reason"),
    [
        (
            "Which two customers reported missing notes?",
            "Two customers reported missing notes.",
            shape.RESTATES,
        ),
        ("How much is a Pena Palace ticket?", "Pena Palace tickets", shape.RESTATES),
        (
            "When will we upgrade to Keycloak 26?",
            "Sofia wants it after the Keycloak 26 upgrade.",
            shape.NO_TIME,
        ),
        (
            "When was the public zone moved to Route 53?",
            "The public zone `parcelbird.example.com` is hosted in Route 53 (hosted zone "
            "`Z0FAKEEXAMPLE42`).",
            shape.NO_TIME,
        ),
        (
            "Who gets paged when JobQueueBacklog fires?",
            "The alert `JobQueueBacklog` fires when more than 5,000 jobs are ready for over "
            "10 minutes.",
            shape.NO_PERSON,
        ),
        ("How many medical schools are there?", "Medical schools train doctors.", shape.NO_NUMBER),
        (
            "how long did the replica lag incident last",
            "Last reviewed: 2026-10-22, after the replica lag incident.",
            shape.NO_DURATION,
        ),
        (
            "Who moved the nightly backups?",
            "The nightly backups moved from 02:00 to 03:30 UTC, after the reindex job.",
            shape.NO_PERSON,
        ),
        (
            "Which three customers are in the search pilot?",
            "Lena: pick three pilot customers.",
            shape.COUNTS_NOT_NAMES,
        ),
        (
            "Which carriers push events to our webhook endpoint?",
            "four carriers push events to our webhook endpoint instead.",
            shape.COUNTS_NOT_NAMES,
        ),
        (
            "What did we decide about backups?",
            "Backups are stored in S3 with pgBackRest.",
            shape.NO_DECISION,
        ),
    ],
)
def test_near_topic_false_answers_are_dropped(question: str, claim: str, reason: str) -> None:
    assert problem(question, claim) == reason


def test_a_who_answer_names_someone_the_question_does_not() -> None:
    drill = (
        "The monthly restore drill is back on the calendar: first Tuesday of each month, "
        "owned by Mei."
    )
    # Mei is the question's; "Tuesday" is a day and "owned" names no one
    assert problem("Who runs the monthly restore drill while Mei is on holiday?", drill) == (
        shape.NO_PERSON
    )
    assert problem("who owns the monthly restore drill", drill) == ""  # Mei is the answer
    assert problem("Who owns the drill?", "The drill is owned by the SRE rotation.") == ""


@pytest.mark.parametrize(
    ("question", "claim", "asked", "said"),
    [
        (
            "how many km are on my old running shoes",
            "New shoes (Brooks Ghost 16) since 2026-11-01, 62 km on them.",
            "old",
            "new",
        ),
        (
            "How much does the GIN index slow down updates to shipment_notes?",
            "The GIN index adds about 9.4 GB and slows inserts into `shipment_notes` by "
            "roughly 6%.",
            "updates",
            "inserts",
        ),
        (
            "peak memory use on the app hosts",
            "App hosts: p95 CPU 44% at the Monday peak of about 900 requests per second.",
            "memory",
            "cpu",
        ),
    ],
)
def test_a_claim_about_the_contrasting_thing_is_dropped(
    question: str, claim: str, asked: str, said: str
) -> None:
    reason = problem(question, claim)
    assert reason == shape.CONTRAST.format(asked=repr(asked), said=repr(said))


def test_a_contrast_is_no_swap_when_the_claim_or_its_section_says_the_questions_word() -> None:
    both = "The old shoes have 812 km on them, the new ones 62 km."
    assert problem("how many km are on my old running shoes", both) == ""
    assert (
        problem(
            "how many km are on my old running shoes", "62 km on them.", heading="Old shoes > New"
        )
        == ""
    )
    # yes/no questions are answered by the other side
    assert problem("Does the GIN index slow down updates?", "The GIN index slows inserts.") == ""
    # the question's word in the title counts as the section's
    assert problem("how many km on my old shoes", "New: 62 km.", title="Old shoes log") == ""
    # a statement to check is held to no such rule
    assert (
        problem(
            "Patients on the old regimen recover faster than on any other regimen",
            "Patients on the new regimen recover faster.",
        )
        == ""
    )
    # neither side in the claim: not this rule's to judge
    assert (
        shape.contrast_swapped("how many km are on my old shoes", Candidate(text="62 km on them."))
        is None
    )


def test_a_swapped_named_thing_is_named_in_the_reason() -> None:
    why = problem(
        "When is the January book club meeting?",
        "Book club pick for December; meeting on 2026-12-16 at Jana's.",
        title="Personal notes",
    )
    assert "'january'" in why


def test_a_decision_is_read_from_the_sentence_or_its_section_not_the_title() -> None:
    context = "Twice in 2025 a Redis restart lost queued webhooks."
    question = "What did we decide about Redis persistence?"
    adr = {"title": "ADR-007: Redis persistence"}
    assert problem(question, context, heading="Context", **adr) == shape.NO_DECISION
    assert problem(question, "Turn on AOF with fsync always.", heading="Decision", **adr) == ""
    assert problem(question, "We agreed to turn on AOF for Redis.", heading="Context", **adr) == ""


def test_a_named_thing_in_the_heading_or_title_counts() -> None:
    claim = "Set maxmemory-policy to allkeys-lru and restart."
    assert problem("What eviction policy does Redis use?", claim) != ""
    assert problem("What eviction policy does Redis use?", claim, heading="Redis") == ""
    assert problem("What eviction policy does Redis use?", claim, title="Redis runbook") == ""


def test_a_word_identifier_may_be_written_as_words_but_a_numbered_one_must_be_whole() -> None:
    ok = "Finished jobs are deleted by a nightly cleanup at 04:30 UTC (after the backup)."
    assert problem("when does the finished-jobs cleanup run", ok) == ""
    swapped = "Log in to the chosen replica, normally `ssh db-2.int.example.com`."
    assert "'db-3'" in problem("How do I SSH to db-3?", swapped)


# --- right answers from the answerable sets: each is kept ------------------------------------


@pytest.mark.parametrize(
    ("question", "claim"),
    [
        (
            "When do the nightly backups run now?",
            "The nightly backup has run at 03:30 UTC for two weeks.",
        ),
        ("when is the on-call handover", "On-call handover: Mondays 10:00."),
        ("how often does prometheus scrape", "Prometheus scrapes every 30 seconds."),
        (
            "Who approves production database read access?",
            "production database read access | Priya",
        ),
        (
            "who owns the monthly restore drill",
            "The monthly restore drill is back on the calendar: first Tuesday of each month, "
            "owned by Mei.",
        ),
        ("How many carriers do we integrate now?", "We now integrate 23 carriers."),
        ("how long is the canary wait", "The canary wait is **15 minutes** by design."),
        ("How long is the audit log kept?", "audit log (staff actions) | 1 year | deleted"),
        ("how long does the dal simmer", "Simmer for about twenty minutes."),
        ("how long was my long run", "2026-11-29 16.0 km 1:36:20 long run"),
        ("How much does on-call pay?", "On-call pays a flat 300 EUR per week as primary."),
        (
            "Where should I restore to first?",
            "Always restore onto `db-restore-1` (10.20.5.41) first.",
        ),
        (
            "Which PgBouncer entry do search queries use?",
            "Search queries use the read-only PgBouncer entry `parcelbird_ro`, which points at "
            "`db-2`.",
        ),
        (
            "which hotel are we staying at in Príncipe Real",
            "2027-02-17 to 2027-02-21: Hotel Miradouro in Príncipe Real, breakfast included.",
        ),
        (
            "What did we decide about backup retention?",
            "Note added 2026-11-18: backup retention is now six weeks, decided at the ops sync.",
        ),
        ("what is our RTO for the main database", "Our RTO for the main database is 15 minutes."),
        # A place is often a common noun: *where* has no rule.
        (
            "Where did the otter 4000 eat a trout?",
            "The otter 4000 swam past the mill and ate a trout near stone 4000.",
        ),
        # Counted, and named too.
        (
            "Which carriers push events to our webhook endpoint?",
            "Four carriers push events to our webhook endpoint: DHL, UPS, GLS and PostNord.",
        ),
        # Yes/no questions are answered by restating them, negation included.
        (
            "Is a slow primary actually a reason to fail over?",
            "A slow primary is not a reason to fail over.",
        ),
    ],
)
def test_right_answers_are_kept(question: str, claim: str) -> None:
    assert problem(question, claim) == ""


def test_a_statement_is_confirmed_by_a_quote_that_says_it_again() -> None:
    claim = "ALDH1 expression is associated with poorer prognosis in breast cancer."
    assert (
        problem(claim, "ALDH1 expression is associated with poorer prognosis in breast cancer.")
        == ""
    )
    assert problem("pena palace ticket", "Pena Palace tickets") == shape.RESTATES


def test_a_statements_relative_who_or_when_asks_for_nothing() -> None:
    statement = "Patients who receive early statin therapy have lower mortality after stroke"
    quote = "Early statin treatment was associated with reduced mortality in stroke patients."
    assert problem(statement, quote) == ""
    # The same words asked as a question do ask for a person.
    assert problem("Who receives early statin therapy after a stroke?", quote) == shape.NO_PERSON
    # A statement still needs the thing it names: a quote about another gene confirms nothing.
    assert "'brca2'" in problem(
        "Mutations in BRCA2 that occur when cells divide raise the risk of breast cancer",
        "BRCA1 mutations raise the risk of breast cancer in carriers.",
    )


def test_a_question_without_its_mark_or_a_keyword_fragment_is_not_a_statement() -> None:
    quote = "The alert fires when more than 5,000 jobs are ready."
    assert problem("who gets paged when the backlog alert fires", quote) == shape.NO_PERSON
    assert problem("backlog alert pager", "Backlog alert pager.") == shape.RESTATES


def test_novel_words_leave_out_the_question_and_filler() -> None:
    novel = shape.novel_words(
        "When do the nightly backups run now?", "The nightly backups run at 03:30 UTC now."
    )
    assert [surface for _, surface, _ in novel] == ["03", "30", "utc"]


# --- the gate's verdict ------------------------------------------------------------------------


def _passed() -> ClaimVerdict:
    claim = Claim(text="Two customers reported missing notes.", support=(Support(1, "x"),))
    return ClaimVerdict(claim=claim, passed=True, step="", reason="", relevance_score=0.9)


def test_shape_verdict_drops_at_the_relevance_step_with_the_reason_in_words() -> None:
    dropped = shape_verdict(_passed(), shape.RESTATES)
    assert not dropped.passed
    assert dropped.step == STEP_RELEVANCE
    assert dropped.reason == f"{NOT_AN_ANSWER}: {shape.RESTATES}"
    assert dropped.relevance_score == 0.9  # the score is kept: the shape decided
    assert dropped.shape_problem == shape.RESTATES
    assert ClaimVerdict.from_dict(dropped.as_dict()) == dropped  # stored with the trace


def test_shape_verdict_leaves_a_passing_claim_without_a_problem_and_a_failed_one_alone() -> None:
    assert shape_verdict(_passed(), "") == _passed()
    failed = shape_verdict(_passed(), shape.RESTATES)
    assert shape_verdict(failed, shape.NO_TIME) == failed


# --- in a whole ask ----------------------------------------------------------------------------


def test_an_ask_drops_a_claim_of_the_wrong_shape_and_says_why(alice, ops_notes, settings):
    # The relevance threshold is lowered so that only the shape rules can drop the claim.
    settings.LODE_RELEVANCE_THRESHOLD = 0.000001
    outcome = extractive_ask(user=alice, question="Who moved the nightly backups?")
    assert outcome.decision != Decision.ANSWER
    assert not outcome.claims
    moved = [v for v in outcome.dropped if "03:30 UTC" in v.claim.text]
    assert moved and moved[0].reason == f"{NOT_AN_ANSWER}: {shape.NO_PERSON}"
    stored = AskTrace.objects.get(pk=outcome.trace_id).trace["gate"]
    assert any(v.get("shape_problem") == shape.NO_PERSON for v in stored)


def test_the_same_note_answers_the_question_it_does_answer(alice, ops_notes, settings):
    settings.LODE_RELEVANCE_THRESHOLD = 0.000001
    outcome = extractive_ask(user=alice, question="When do the nightly backups run now?")
    assert outcome.decision == Decision.ANSWER
    assert any("03:30 UTC" in c.text for c in outcome.claims)


@pytest.mark.parametrize(
    ("question", "claim"),
    [
        # another form of the question's own word is the word (index stems)
        (
            "How much does the index slow down updates?",
            "Updated rows take 6% longer; inserts are unaffected.",
        ),
        # the other side only inside a code span or an identifier is a name, not the word
        ("How big is the old pool?", "Set `new_pool_size = 20` for the old pool."),
        ("Which old host runs cron?", "The old cron host is backup-new-1."),
        # "how old" asks an age, not for the old one of a pair
        ("How old is my laptop?", "Bought new in March 2021."),
        # pairs whose two sides describe one thing are not pairs here
        ("When does the maintenance window start?", "The window must end by 04:00."),
        ("How do I write to the replica?", "The replica is read-only; send writes to db-1."),
    ],
)
def test_a_contrast_needs_the_other_thing_in_the_claims_own_words(question: str, claim: str):
    assert shape.contrast_swapped(question, Candidate(text=claim)) is None


@pytest.mark.parametrize("claim", ["Owned by June.", "April is on call.", "Ask May."])
def test_a_first_name_that_is_also_a_month_still_names_someone(claim: str) -> None:
    assert problem("Who owns the backups?", claim) == ""


def test_a_responsibility_word_alone_names_no_one() -> None:
    for claim in ("Backups are assigned weekly.", "Backups are owned and kept responsibly."):
        assert problem("Who rotates the backups?", claim) == shape.NO_PERSON, claim


def test_a_direction_refutes_a_fragment_but_does_not_answer_a_wh_question() -> None:
    # SciFact's train claim: the CONTRADICT evidence is its answer
    refutes = "DUSP4 overexpression increased chemotherapy-induced apoptosis."
    assert problem("DUSP4 decreases apoptosis.", refutes) == ""
    assert problem("Which drug decreases apoptosis?", "Drug X increased apoptosis.") == (
        shape.CONTRAST.format(asked="'decreases'", said="'increased'")
    )


# --- rules 4: money, and one occasion rather than a schedule ----------------------------------


@pytest.mark.parametrize(
    ("question", "claim", "reason"),
    [
        (
            "How much do we sell the 250 g bags of Harbour Blend for?",
            "**Retail bags**: Harbour Blend in 250 g bags for the shelf, 10 at a time.",
            shape.NO_MONEY,
        ),
        ("roaster delivery fee", "The roaster delivers on Tuesdays and Fridays.", shape.NO_MONEY),
        (
            "When is Shieldline's next pest control visit?",
            "**Pest control:** Shieldline, `+44 1632 960 544`, quarterly visits.",
            shape.ONLY_SCHEDULE,
        ),
        (
            "When was the SECRET_KEY last rotated?",
            "The SECRET_KEY is rotated yearly, in January.",
            shape.ONLY_SCHEDULE,
        ),
    ],
)
def test_rules_4_drop_a_claim_without_the_money_or_the_occasion_asked_for(
    question: str, claim: str, reason: str
) -> None:
    assert problem(question, claim) == reason


@pytest.mark.parametrize(
    ("question", "claim"),
    [
        # the amount of money is the answer
        ("How much do we sell the 250 g bags for?", "The 250 g bags sell for £7.50 each."),
        ("What does a flat white cost now?", "From 1 December a flat white is £3.60."),
        ("price of a latte", "Latte 3.70 GBP"),
        # counting things sold, naming things sold, or a decision about prices: no money asked
        ("How many loaves do we sell on Saturday?", "We sell about 120 loaves on a Saturday."),
        ("What do we sell at the market?", "Sourdough, rye and pastries."),
        ("What did we decide about prices?", "Decision: prices rise from 1 December."),
        # a schedule with a clock time or a day names the next occasion
        ("When is the next backup?", "Backups run nightly at 03:30 UTC."),
        ("When is the next -80 defrost?", "The -80 is de-iced on the last Friday of each month."),
        ("When was the oven last serviced?", "Its annual service was last done on 2026-06-18."),
        # without "last" or "next", a schedule answers *when*
        ("When is the SECRET_KEY rotated?", "The SECRET_KEY is rotated yearly, in January."),
    ],
)
def test_rules_4_keep_a_claim_with_the_money_or_occasion_or_asked_for_neither(
    question: str, claim: str
) -> None:
    assert problem(question, claim) == ""
