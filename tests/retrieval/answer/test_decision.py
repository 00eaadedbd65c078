"""Answerability decisions (rules first): clarifying questions for short or deictic
questions, abstention on an empty or word-disjoint pack, the gate's abstention, and
conflicts between sources (the higher trust tier leads). Pure: no database."""

from __future__ import annotations

from dataclasses import replace

import pytest

from retrieval.answer.decision import (
    MAX_CHOICES,
    MAX_CLARIFYING,
    PreDecision,
    Statement,
    claim_statements,
    closest_items,
    content_words,
    coverage,
    decide_after_gate,
    decide_before_answer,
    evidence_statements,
    facts,
    find_conflicts,
    query_error_choices,
)
from retrieval.answer.types import (
    ABSTAIN_MESSAGE,
    ClarifyingChoice,
    Decision,
    EvidencePack,
    PackItem,
    ShownClaim,
    ShownSupport,
)
from retrieval.query import parse
from retrieval.text.sentences import sentence_spans
from retrieval.trust import tier_order


def item(
    pid: int,
    text: str,
    *,
    title: str = "Deploy runbook",
    pinned: bool = False,
    tier: str = "note",
    doc: int | None = None,
) -> PackItem:
    return PackItem(
        passage_id=pid,
        document_id=doc if doc is not None else pid,
        version_id=100 + pid,
        version_number=1,
        document_title=title,
        kind="note" if tier == "note" else "external",
        trust_tier=tier,
        text=text,
        start=0,
        end=len(text),
        start_line=1,
        end_line=1,
        parent_start=0,
        parent_end=len(text),
        version_created_at="2025-01-01T00:00:00+00:00",
        pinned=pinned,
        rank=0 if pinned else pid,
    )


PACK = EvidencePack(
    items=[
        item(1, "Rotate the staging certs with certbot before Friday.", title="Deploy runbook"),
        item(2, "Certbot renews staging certificates weekly.", title="Certbot docs"),
        item(3, "Set maxmemory-policy allkeys-lru on the staging cache.", title="Redis notes"),
    ]
)


# --- before answering: clarifying -------------------------------------------------------------


@pytest.mark.parametrize(
    "question", ["what about it?", "how do I fix this", "Why does it not work?", "this?", ""]
)
def test_deictic_or_empty_questions_ask_for_clarification(question):
    pre = decide_before_answer(question, PACK)
    assert pre.decision == Decision.ASK_CLARIFYING
    assert 1 <= len(pre.clarifying_questions) <= MAX_CLARIFYING
    assert pre.message


def test_a_deictic_question_asks_what_the_pronoun_refers_to_first():
    pre = decide_before_answer("how do I fix this", PACK)
    assert pre.clarifying_questions[0].startswith("What does “this” refer to?")


def test_clarifying_questions_suggest_top_titles_and_distinctive_words():
    pre = decide_before_answer("staging?", PACK)
    assert pre.decision == Decision.ASK_CLARIFYING
    questions = " ".join(pre.clarifying_questions)
    assert "“Deploy runbook” or “Certbot docs”" in questions
    assert "Are you asking about certbot" in questions  # in 2 of the 3 items, not asked
    assert "staging," not in questions.split("about", 1)[1]  # never suggests what was asked


def test_clarifying_questions_are_deterministic():
    first = decide_before_answer("redis", PACK).clarifying_questions
    assert all(decide_before_answer("redis", PACK).clarifying_questions == first for _ in range(3))


def test_clarifying_with_an_empty_pack_still_asks_something():
    pre = decide_before_answer("cache?", EvidencePack())
    assert pre.decision == Decision.ASK_CLARIFYING
    assert pre.clarifying_questions == ["Which note, system or term is this about?"]


def test_an_identifier_or_a_quoted_phrase_is_specific_enough_alone():
    pre = decide_before_answer("allkeys-lru?", PACK, parsed=parse("allkeys-lru?"))
    assert pre.decision is None
    pre = decide_before_answer('"maxmemory"', PACK, parsed=parse('"maxmemory"'))
    assert pre.decision is None


def test_two_content_words_are_enough():
    pre = decide_before_answer("How do I rotate the staging certs?", PACK)
    assert pre.decision is None
    assert pre.content_words == ["rotate", "staging", "certs"]


def test_content_words_drop_stop_words_question_words_and_generic_verbs():
    assert content_words("What does it mean when the Redis cache fails?") == [
        "redis",
        "cache",
        "fails",
    ]


def test_a_pinned_note_is_the_referent_of_a_vague_question():
    pinned = EvidencePack(items=[item(1, "Rotate the certs on Friday.", pinned=True)])
    assert decide_before_answer("what about it?", pinned).decision is None
    assert decide_before_answer("summarise", pinned).decision is None
    assert decide_before_answer("?", pinned).decision == Decision.ASK_CLARIFYING


# --- before answering: abstain ---------------------------------------------------------------


def test_an_empty_pack_abstains():
    pre = decide_before_answer("How do I rotate the staging certs?", EvidencePack())
    assert pre.decision == Decision.ABSTAIN_NO_EVIDENCE
    assert pre.message == ABSTAIN_MESSAGE


def test_a_pack_sharing_no_content_word_abstains():
    # What a meaning-only leg returns for an off-topic question: passages with no shared word.
    pre = decide_before_answer("What is the capital of France?", PACK)
    assert pre.decision == Decision.ABSTAIN_NO_EVIDENCE
    assert pre.best_coverage == 0.0


def test_a_pack_covering_too_few_content_words_abstains():
    pre = decide_before_answer(
        "How long should sourdough bread proof in a cold staging oven?", PACK
    )
    assert pre.decision == Decision.ABSTAIN_NO_EVIDENCE
    assert 0 < pre.best_coverage < 0.5


def test_a_topic_word_no_pack_item_holds_abstains():
    # Half the words are in the best item, but "rugby" and "team" are nowhere in the pack.
    pre = decide_before_answer("Do rugby team staging certs rotate?", PACK)
    assert pre.decision == Decision.ABSTAIN_NO_EVIDENCE
    assert pre.best_coverage >= 0.5 and pre.pack_coverage < 0.8
    assert "rugbi" in pre.reason or "rugby" in pre.reason


def test_words_spread_over_several_items_are_enough_for_the_pack():
    pre = decide_before_answer("certbot staging certificates weekly friday?", PACK)
    assert pre.decision is None and pre.pack_coverage == 1.0


def test_coverage_is_stemmed_and_counts_the_title():
    assert coverage(["rotating", "certificates"], "Rotate the certificate.") == 1.0
    pre = decide_before_answer("redis notes policy?", PACK)
    assert pre.decision is None  # "redis notes" from the title, "policy" from the text


# --- after the gate ----------------------------------------------------------------------------


def support(doc: int, tier: str, span: str, *, title: str = "") -> ShownSupport:
    return ShownSupport(
        version_id=100 + doc,
        version_number=1,
        document_id=doc,
        document_title=title or f"doc {doc}",
        kind="note" if tier == "note" else "external",
        trust_tier=tier,
        quoted_span=span,
        start=0,
        end=len(span),
        segments=((span, True),),
        evidence_url="",
        version_created_at="2025-01-01T00:00:00+00:00",
    )


def claim(doc: int, tier: str, text: str, span: str | None = None) -> ShownClaim:
    return ShownClaim(text=text, support=(support(doc, tier, span or text),))


def test_no_surviving_claim_abstains_with_the_message():
    assert decide_after_gate([], []) == (Decision.ABSTAIN_NO_EVIDENCE, ABSTAIN_MESSAGE)


def test_surviving_claims_without_conflict_answer():
    claims = [claim(1, "note", "Rotate the staging certs before Friday.")]
    assert decide_after_gate(claims, find_conflicts(claim_statements(claims)))[0] == Decision.ANSWER


def test_conflicting_values_note_versus_external_note_leads():
    claims = [
        claim(2, "external", "The staging timeout is 60 seconds."),  # the external came first
        claim(1, "note", "The staging timeout is 30 seconds."),
    ]
    conflicts = find_conflicts(claim_statements(claims))
    assert len(conflicts) == 1
    conflict = conflicts[0]
    assert conflict["subject"] == "staging timeout"
    assert [v["value"] for v in conflict["values"]] == ["30 seconds", "60 seconds"]
    assert [v["trust_tier"] for v in conflict["values"]] == ["note", "external"]
    assert conflict["leading_tier"] == "note"
    decision, message = decide_after_gate(claims, conflicts)
    assert decision == Decision.ANSWER_WITH_CONFLICTS
    assert "disagree" in message


def test_tier_order_follows_the_trust_gradient():
    assert [
        tier_order(t)
        for t in ("note", "annotation", "external", "external_stale", "inferred", "bogus")
    ] == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    ("first", "second", "kind"),
    [
        ("maxmemory-policy: allkeys-lru", "maxmemory-policy: volatile-lru", "kv"),
        ("Feature flag beta = enabled", "Feature flag beta = disabled", "kv"),
        ("Run the backup every 6 hours.", "Run the backup every 12 hours.", "num"),
        ("Backups of the vault are encrypted.", "Backups of the vault are not encrypted.", "pol"),
        ("The vault backups are encrypted.", "The vault backups aren't encrypted.", "pol"),
    ],
)
def test_each_heuristic_finds_its_conflict(first, second, kind):
    conflicts = find_conflicts(
        claim_statements([claim(1, "note", first), claim(2, "external_stale", second)])
    )
    assert [c["kind"] for c in conflicts] == [kind]
    assert conflicts[0]["values"][0]["statement"] == first


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("The staging timeout is 30 seconds.", "The staging timeout is 30 seconds."),  # agree
        ("The staging timeout is 30 seconds.", "The deploy window is 2 hours."),  # other thing
        ("The cache is used to store sessions for users.", "The cache is fast."),  # prose
        ("Rotate the certs before Friday.", "Certbot renews certificates weekly."),
    ],
)
def test_no_conflict_where_sources_agree_or_talk_about_different_things(first, second):
    assert (
        find_conflicts(claim_statements([claim(1, "note", first), claim(2, "external", second)]))
        == []
    )


def test_two_values_in_one_document_are_not_a_conflict():
    claims = [
        claim(1, "note", "The staging timeout is 30 seconds."),
        claim(1, "note", "The staging timeout is 60 seconds."),
    ]
    assert find_conflicts(claim_statements(claims)) == []


def test_pack_evidence_on_a_claimed_subject_joins_the_conflict():
    claims = [claim(1, "note", "The staging timeout is 30 seconds.")]
    pack = EvidencePack(
        items=[
            item(1, "The staging timeout is 30 seconds.", doc=1),
            item(
                2,
                "Intro text. The staging timeout is 90 seconds. Other text.",
                doc=2,
                tier="external",
                title="Vendor docs",
            ),
            item(3, "The deploy window is 2 hours.", doc=3, tier="external"),
        ]
    )
    conflicts = find_conflicts(claim_statements(claims), evidence_statements(pack))
    assert len(conflicts) == 1
    values = conflicts[0]["values"]
    assert [(v["document_id"], v["value"], v["origin"]) for v in values] == [
        (1, "30 seconds", "claim"),
        (2, "90 seconds", "evidence"),
    ]
    # Body offsets of the evidence sentence inside its item (item starts at 0 here).
    text = pack.items[1].text
    assert text[values[1]["start"] : values[1]["end"]] == "The staging timeout is 90 seconds."


def test_evidence_alone_never_makes_a_conflict():
    claims = [claim(1, "note", "Rotate the certs before Friday.")]
    pack = EvidencePack(
        items=[
            item(2, "The staging timeout is 30 seconds.", doc=2),
            item(3, "The staging timeout is 60 seconds.", doc=3, tier="external"),
        ]
    )
    assert find_conflicts(claim_statements(claims), evidence_statements(pack)) == []


def test_a_claim_paraphrasing_its_span_contributes_both_statements():
    shown = [ShownClaim(text="Timeout on staging: 45s", support=(support(1, "note", "x"),))]
    statements = claim_statements(shown)
    assert [s.text for s in statements] == ["x", "Timeout on staging: 45s"]


def test_decimals_do_not_end_sentences_and_statistics_are_not_values():
    text = "The hazard ratio was 1.29, 95% confidence interval 1.02 to 1.63. Next one."
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "The hazard ratio was 1.29, 95% confidence interval 1.02 to 1.63.",
        "Next one.",
    ]
    assert not [f for f in facts(text.split(" Next")[0]) if f.subject_key.startswith("num:")]


def test_other_values_inside_a_claimed_document_are_not_a_second_source():
    claims = [claim(1, "note", "The staging timeout is 30 seconds.")]
    history = "Until May. The staging timeout is 10 seconds."
    pack = EvidencePack(items=[item(1, history, doc=1)])  # the claimed document itself
    assert find_conflicts(claim_statements(claims), evidence_statements(pack)) == []
    pack = EvidencePack(items=[item(2, history, doc=2)])  # control: another document
    [conflict] = find_conflicts(claim_statements(claims), evidence_statements(pack))
    assert [v["document_id"] for v in conflict["values"]] == [1, 2]


def test_sentences_and_facts_helpers():
    text = "  First one.  Second: 42\nThird "
    assert [text[a:b] for a, b in sentence_spans(text)] == ["First one.", "Second: 42", "Third"]
    kv = [f for f in facts("The staging timeout is 30 seconds.") if f.subject_key.startswith("kv:")]
    assert kv and kv[0].value == "30 seconds"


def test_statement_offsets_are_carried_into_conflicts():
    a = Statement("The limit is 5.", 1, "A", 11, "note", "claim", start=100, end=115)
    b = Statement("The limit is 7.", 2, "B", 12, "external", "claim")
    conflicts = find_conflicts([a, b])
    assert conflicts[0]["values"][0]["start"] == 100
    assert conflicts[0]["values"][1]["start"] is None


def test_how_long_questions_do_not_need_the_word_long() -> None:
    """ "How long are backups kept?" asks about backups; "long" only completes "how"."""
    from retrieval.answer.decision import content_words

    assert content_words("How long are the nightly backups kept?") == ["nightly", "backups", "kept"]
    assert "long" in content_words("symptoms of long covid")


# --- abstention that fails for the right reasons ------------------------------


def headed(pid: int, text: str, headings: tuple[str, ...], **kwargs) -> PackItem:
    return replace(item(pid, text, **kwargs), heading_path=headings)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("When do the nightly backups run now?", ["nightly", "backups"]),
        ("What did we decide about backups?", ["backups"]),
        ("Is the staging cache still currently enabled today?", ["staging", "cache", "enabled"]),
        ("How do I promote the replica during a failover?", ["promote", "replica", "failover"]),
        ("What did Priya actually say and mention about our plan?", ["priya"]),
    ],
)
def test_filler_time_and_reporting_words_are_not_content_words(question, expected):
    assert content_words(question) == expected


def test_filler_words_match_as_typed_never_by_stem():
    # "currently" is filler; "current" (an electrical current, a current smoker) is a topic.
    assert content_words("Is the current limit currently 5 A?") == ["current", "limit", "5"]
    assert "decisions" not in content_words("Which design decisions did we take?")


def test_a_time_word_the_notes_never_use_does_not_abstain():
    pack = EvidencePack(
        items=[item(1, "The nightly backups moved from 02:00 to 03:30 UTC.", title="Ops sync")]
    )
    pre = decide_before_answer("When do the nightly backups run now?", pack)
    assert pre.decision is None, pre.reason
    assert pre.content_words == ["nightly", "backups"]


def test_a_heading_path_counts_as_the_passages_text_for_coverage():
    steps = "1. Stop writes on the primary.\n2. Run `pg_ctl promote` on the standby."
    question = "How do I promote the replica during a failover?"
    without = EvidencePack(items=[item(1, steps, title="Database runbook")])
    assert decide_before_answer(question, without).decision == Decision.ABSTAIN_NO_EVIDENCE
    pack = EvidencePack(
        items=[headed(1, steps, ("Failover", "Promote the replica"), title="Database runbook")]
    )
    pre = decide_before_answer(question, pack)
    assert pre.decision is None, pre.reason
    assert pre.best_coverage == 1.0


def test_a_framing_verb_makes_a_one_topic_question_specific_but_is_not_searched_for():
    pack = EvidencePack(items=[item(1, "The nightly backups moved to 03:30 UTC.", title="Ops")])
    pre = decide_before_answer("What did we decide about backups?", pack)
    assert pre.decision is None, pre.reason
    assert pre.content_words == ["backups"]
    assert decide_before_answer("backups?", pack).decision == Decision.ASK_CLARIFYING
    assert decide_before_answer("What did we decide?", pack).decision == Decision.ASK_CLARIFYING


def test_a_negated_auxiliary_leaves_no_content_word_behind():
    assert content_words("Why didn't we go with Auth0?") == ["auth0"]
    assert content_words("Who won the final?") == ["won", "final"]  # "won" is a topic


@pytest.mark.parametrize(
    ("question", "vague"),
    [
        ("What is our RPO?", False),  # an acronym
        ("Why didn't we go with Auth0?", False),  # letters and digits
        ("When is the ShipBridge deadline?", False),  # an inner capital (and two words)
        ("What is Keycloak?", False),  # a capital after the first word
        ("How much is our rent?", True),
        ("Staging?", True),  # the first word's capital is only the sentence's
    ],
)
def test_a_single_named_word_is_specific_enough(question, vague):
    pre = decide_before_answer(question, PACK)
    assert (pre.decision == Decision.ASK_CLARIFYING) is vague, pre.reason


def test_filler_words_alone_leave_a_question_too_vague():
    pre = decide_before_answer("What did we decide now?", PACK)
    assert pre.decision == Decision.ASK_CLARIFYING


def test_a_real_topic_word_missing_from_the_pack_still_abstains():
    # Loosening filler must not loosen topics: "rugby" is nowhere, so still no answer.
    pre = decide_before_answer("What did we decide now about rugby staging certs?", PACK)
    assert pre.decision == Decision.ABSTAIN_NO_EVIDENCE
    assert "rugbi" in pre.reason or "rugby" in pre.reason


# --- closest passages -------------------------------------------------------------------------


def test_closest_items_rank_by_shared_words_then_pack_order():
    pack = EvidencePack(
        items=[
            item(1, "Nothing in common here."),
            item(2, "Certbot renews staging certificates weekly.", title="Certbot docs"),
            item(3, "Rotate the staging certs before Friday."),
            item(4, "Staging only."),
        ]
    )
    closest = closest_items(pack, ["rotate", "staging", "certs"], limit=3)
    assert [i.passage_id for i in closest] == [3, 2, 4]


def test_closest_items_of_an_empty_pack_are_empty():
    assert closest_items(EvidencePack(), ["anything"]) == []


def test_closest_items_count_headings():
    pack = EvidencePack(
        items=[
            item(1, "Restore from the latest snapshot."),
            headed(2, "Stop writes first.", ("Promote the replica",)),
        ]
    )
    assert [i.passage_id for i in closest_items(pack, ["promote", "replica"], limit=1)] == [2]


# --- clarifying choices -----------------------------------------------------------------------


def test_clarifying_suggestions_are_choices_that_rewrite_the_question():
    pre = decide_before_answer("staging?", PACK)
    assert pre.decision == Decision.ASK_CLARIFYING
    assert all(isinstance(c, ClarifyingChoice) and c.label for c in pre.choices)
    scoped = [c for c in pre.choices if c.pinned_document_id is not None]
    # Ask one of the top documents: the same question, pinned to it.
    assert [(c.pinned_document_id, c.question) for c in scoped] == [
        (1, "staging?"),
        (2, "staging?"),
    ]
    assert "Deploy runbook" in scoped[0].label
    # Add a word the top items share: the question rewritten, never replaced.
    added = [c.question for c in pre.choices if c.pinned_document_id is None]
    assert added and added[0] == "staging certbot?"
    assert all(q.startswith("staging ") and q.endswith("?") for q in added)
    assert len(pre.choices) <= MAX_CHOICES
    assert len({(c.question, c.pinned_document_id) for c in pre.choices}) == len(pre.choices)


def test_suggested_words_are_never_an_inflection_of_what_was_asked():
    pack = EvidencePack(
        items=[
            item(1, "The backup runs nightly; backups are kept 30 days.", title="Backups"),
            item(2, "Restore a backup from the bucket.", title="Restore"),
        ]
    )
    pre = decide_before_answer("backups?", pack)
    suggested = [c.question for c in pre.choices if c.pinned_document_id is None]
    assert suggested and not any(q.startswith("backups backup") for q in suggested)
    assert "backup," not in " ".join(pre.clarifying_questions)


def test_suggested_words_carry_a_topic():
    pack = EvidencePack(
        items=[
            item(1, "Every night the backup runs after the reindex, then it syncs.", title="A"),
            item(2, "Every week the backup is copied after midnight, then verified.", title="B"),
        ]
    )
    pre = decide_before_answer("backup?", pack)
    suggested = [c.question for c in pre.choices if c.pinned_document_id is None]
    assert suggested and not any(
        q.split()[1].rstrip("?") in {"every", "after", "then"} for q in suggested
    )


def test_a_word_choice_is_specific_enough_to_be_answered():
    pre = decide_before_answer("staging?", PACK)
    for choice in pre.choices:
        if choice.pinned_document_id is None:
            again = decide_before_answer(choice.question, PACK)
            assert again.decision is None, (choice.question, again.reason)


def test_choices_are_deterministic_and_round_trip():
    first = decide_before_answer("redis", PACK)
    assert all(decide_before_answer("redis", PACK).choices == first.choices for _ in range(3))
    assert PreDecision.from_dict(first.as_dict()) == first
    assert [ClarifyingChoice.from_dict(c.as_dict()) for c in first.choices] == first.choices


def test_a_decision_without_choices_stores_no_choices_key():
    # Stored traces from before choices existed must write back key for key.
    pre = decide_before_answer("How do I rotate the staging certs?", PACK)
    assert "choices" not in pre.as_dict()
    assert PreDecision.from_dict(pre.as_dict()).choices == []


def test_an_empty_pack_offers_no_choices():
    assert decide_before_answer("cache?", EvidencePack()).choices == []


def test_a_query_error_offers_the_question_without_its_filters():
    [choice] = query_error_choices("staging certs type:banana")
    assert choice.question == "staging certs"
    assert query_error_choices("type:banana") == []  # nothing left to ask
