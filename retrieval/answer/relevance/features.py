"""The features of a question × claim pair, in `FEATURE_NAMES` order (pure), and the cosines
they take from the embedding model. Every feature is per pair, none relative to the other
candidates, so a score means the same for one claim at the gate as for one of fifty sentences in
the answerer.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence

import numpy as np

from retrieval.answer.relevance.candidate import Candidate
from retrieval.answer.relevance.claim_types import (
    answer_types,
    is_decision,
    is_step,
    named_present,
    number_near,
    stems,
)
from retrieval.answer.relevance.rarity import IdfTable
from retrieval.plan.question import (
    INTENT_DECISION,
    INTENT_PROCEDURE,
    KIND_COUNT,
    TYPED_KINDS,
    QuestionProfile,
)
from retrieval.text.stemming import surface_stems
from retrieval.text.tokens import TOKEN_RE

FEATURE_NAMES: tuple[str, ...] = (
    "cosine",  # question vector · claim vector (all-MiniLM-L6-v2)
    "context_cosine",  # the same with the claim's heading path before it (`embedding_text`)
    "coverage",  # share of the question's content stems in the claim
    "idf_coverage",  # the same, weighted by rarity (`rarity`)
    "context_idf_coverage",  # the same over claim + heading path + title
    "heading_coverage",  # share in the heading path + title alone
    "missing_max_idf",  # rarity of the rarest question word found nowhere, relative
    "typed",  # the question asks for a number, time, person, place or reason
    "type_match",  # the claim has one (`claim_types.answer_types`)
    "count_near",  # a *how many* question's counted thing near a number
    "has_focus",  # the question has an X (*which/what X*, or the counted thing)
    "focus_in_text",  # the X is in the claim
    "focus_in_context",  # the X is only in its heading path or title
    "rank_rr",  # 1 / the passage's search rank (pinned counts as rank 1)
    "log_words",  # the claim's length
    "log_question_words",  # the question's length in content words
    "has_named",  # the question names things (`question.named_things`)
    "named_missing",  # share of them found nowhere in claim, heading path or title
    "bigram_coverage",  # share of the question's adjacent content-word pairs, in order
    "has_value",  # the claim holds a digit or a code span
    "procedure",  # the question asks how to do something
    "step_match",  # … and the claim reads as a step
    "decision",  # the question asks what was decided
    "decision_match",  # … and the claim records a decision
)
EMBEDDING_FEATURES = frozenset({"cosine", "context_cosine"})
FALLBACK_FEATURE_NAMES: tuple[str, ...] = tuple(
    name for name in FEATURE_NAMES if name not in EMBEDDING_FEATURES
)

_VALUE_RE = re.compile(r"\d|`")


def _weighted_share(stems_: Sequence[str], weights: Sequence[float], present: set[str]) -> float:
    total = sum(weights)
    if total <= 0:
        return 0.0
    return sum(w for s, w in zip(stems_, weights, strict=True) if s in present) / total


def features(
    profile: QuestionProfile,
    candidates: Sequence[Candidate],
    idf: IdfTable,
    cosines: Sequence[tuple[float, float]] | None,
) -> np.ndarray:
    """The feature matrix, len(candidates) × len(FEATURE_NAMES), in `FEATURE_NAMES` order.
    `cosines` None (no embedding model) fills the cosine column with 0; the no-embedding model
    never reads it. Pure and deterministic."""
    width = len(FEATURE_NAMES)
    if not candidates:
        return np.zeros((0, width), dtype=np.float64)
    question_stems = profile.content_stems
    weights = [idf.idf(s) for s in question_stems]
    max_weight = max(weights, default=0.0)
    focus = set(profile.focus)
    typed = profile.kind in TYPED_KINDS
    named = profile.named
    question_pairs = set(itertools.pairwise(question_stems))
    wanted = set(question_stems)
    procedure = profile.intent == INTENT_PROCEDURE
    decision = profile.intent == INTENT_DECISION
    rows = []
    for i, candidate in enumerate(candidates):
        text_stems = set(stems(candidate.text))
        context = f"{candidate.title}\n{candidate.heading_path}"
        context_stems = set(stems(context))
        everywhere = text_stems | context_stems
        whole = f"{context}\n{candidate.text}".casefold()
        named_missing = sum(not named_present(item, whole, frozenset(everywhere)) for item in named)
        in_order = [stem for _, stem in surface_stems(candidate.text) if stem in wanted]
        pairs = set(itertools.pairwise(in_order))
        n = len(question_stems)
        coverage = sum(s in text_stems for s in question_stems) / n if n else 0.0
        heading_coverage = sum(s in context_stems for s in question_stems) / n if n else 0.0
        missing = [w for s, w in zip(question_stems, weights, strict=True) if s not in everywhere]
        missing_max = (max(missing) / max_weight) if missing and max_weight > 0 else 0.0
        kinds = answer_types(candidate.text) if typed else frozenset()
        count_near = (
            profile.kind == KIND_COUNT
            and KIND_COUNT in kinds
            and bool(focus)
            and number_near(candidate.text, focus)
        )
        rank = max(candidate.rank, 1)
        words = len(TOKEN_RE.findall(candidate.text))
        rows.append(
            [
                float(cosines[i][0]) if cosines is not None else 0.0,
                float(cosines[i][1]) if cosines is not None else 0.0,
                coverage,
                _weighted_share(question_stems, weights, text_stems),
                _weighted_share(question_stems, weights, everywhere),
                heading_coverage,
                missing_max,
                1.0 if typed else 0.0,
                1.0 if typed and profile.kind in kinds else 0.0,
                1.0 if count_near else 0.0,
                1.0 if focus else 0.0,
                1.0 if focus and focus <= text_stems else 0.0,
                1.0 if focus and not focus <= text_stems and focus <= context_stems else 0.0,
                1.0 / rank,
                math.log1p(words),
                math.log1p(len(question_stems)),
                1.0 if named else 0.0,
                named_missing / len(named) if named else 0.0,
                len(question_pairs & pairs) / len(question_pairs) if question_pairs else 0.0,
                1.0 if _VALUE_RE.search(candidate.text) else 0.0,
                1.0 if procedure else 0.0,
                1.0 if procedure and is_step(candidate.text) else 0.0,
                1.0 if decision else 0.0,
                1.0 if decision and is_decision(candidate.text, context) else 0.0,
            ]
        )
    return np.asarray(rows, dtype=np.float64)


def embedding_text(candidate: Candidate) -> str:
    """What the `context_cosine` feature embeds for a candidate: its heading path, then its
    text. A step under "Failover > Promote the replica" is about promoting the replica
    although its own words ("Run `pg_ctl promote` on the standby host") never say "replica";
    a sentence outside any section is embedded as it is (both cosines are then the same). The
    title stays out: every sentence of a document shares it, so it would blur which of them
    answers. The heading can also pull a sentence away from the question ("Redis" above "Set
    maxmemory-policy …"), which is why the text's own cosine is kept beside it."""
    if not candidate.heading_path:
        return candidate.text
    return f"{candidate.heading_path}\n{candidate.text}"


def cosine_pairs(
    candidates: Sequence[Candidate], cosines_of: Callable[[list[str]], list[float]]
) -> list[tuple[float, float]]:
    """(cosine of the text, cosine of `embedding_text`) per candidate, from one call of
    `cosines_of` over the distinct texts (a candidate outside any section is embedded once)."""
    texts = [c.text for c in candidates] + [embedding_text(c) for c in candidates]
    texts = list(dict.fromkeys(texts))
    by_text = dict(zip(texts, cosines_of(texts), strict=True))
    return [(by_text[c.text], by_text[embedding_text(c)]) for c in candidates]


def embedding_cosines(question: str, texts: Sequence[str]) -> list[float]:
    """Cosine of the question's query vector with each text's passage vector: one call for the
    question and one batched call for all texts. Nothing is cached (vectors of one user's
    text never outlive the call). Raises `EmbeddingUnavailable`."""
    from retrieval.index.embeddings import get_embedder

    if not texts:
        return []
    embedder = get_embedder()
    query = embedder.embed_query(question)
    vectors = embedder.embed_passages(list(texts))
    return [float(v) for v in vectors @ query]  # both L2-normalised
