"""Answerability decisions (rules first): clarifying questions for short or deictic
questions, abstention on an empty or word-disjoint pack, the gate's abstention, and
conflicts between sources (the higher trust tier leads). Pure: no database."""

from __future__ import annotations

import pytest

from retrieval.answer.decision import (
    MAX_CLARIFYING,
    Statement,
    claim_statements,
    content_words,
    coverage,
    decide_after_gate,
    decide_before_answer,
    evidence_statements,
    facts,
    find_conflicts,
)
from retrieval.answer.types import (
    ABSTAIN_MESSAGE,
    Decision,
    EvidencePack,
    PackItem,
    ShownClaim,
    ShownSupport,
)
from retrieval.query import parse
from retrieval.text import sentence_spans
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
