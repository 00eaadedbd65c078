"""What may leave the machine: the relevance floor an evidence item must reach to be sent to a
remote model, and each pack item's relevance (its best-scoring quotable unit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from retrieval.answer.relevance.candidate import Candidate, candidate_for
from retrieval.answer.relevance.model import RelevanceModel, load_model
from retrieval.answer.relevance.rarity import passage_idf
from retrieval.answer.relevance.scoring import score_pairs, threshold_of
from retrieval.eligibility import Audience
from retrieval.plan.question import question_profile
from retrieval.text.sentences import split_sentences

# Bounds on the egress scoring: sentences scored per pack item and in all (each is embedded).
EGRESS_SENTENCES_PER_ITEM = 12
EGRESS_SENTENCES = 120


def egress_floor(model: RelevanceModel | None = None) -> float:
    """The relevance an evidence item must reach to be sent to a remote model: the floor stored
    with the weights (chosen on data by bench/relevance_threshold.py), never above the
    threshold in force (evidence good enough to be shown is always good enough to send)."""
    fitted = model if model is not None else load_model()
    floor = float(fitted.meta.get("egress_floor", fitted.full.threshold))
    return min(floor, threshold_of(fitted.full))


def item_relevance(question: str, items: Sequence[Any], *, audience: Audience) -> dict[int, float]:
    """{passage_id: relevance} for pack items: the best score of the item's quotable units
    (`retrieval.text.sentences.split_sentences`, at most `EGRESS_SENTENCES_PER_ITEM` each and
    `EGRESS_SENTENCES` in all, one batched scoring). An item with no scored unit is absent,
    which the egress plan reads as below the floor. Raises `RelevanceUnavailable` when the
    weights cannot be read (the caller then sends nothing)."""
    owners: list[int] = []
    candidates: list[Candidate] = []
    # Every item gets its share of the scoring budget (pinned items come first and are not
    # capped: a long pinned note must not starve the rest of the pack).
    share = max(1, min(EGRESS_SENTENCES_PER_ITEM, EGRESS_SENTENCES // max(len(items), 1)))
    for item in items:
        if len(candidates) >= EGRESS_SENTENCES:
            break
        for sentence in split_sentences(item.text)[:share]:
            owners.append(item.passage_id)
            candidates.append(candidate_for(" ".join(sentence.text.split()), item))
    if not candidates:
        return {}
    idf = passage_idf(audience, question_profile(question))
    scores = score_pairs(question, candidates, idf=idf).scores
    best: dict[int, float] = {}
    for passage_id, score in zip(owners, scores, strict=True):
        if math.isfinite(score):  # a non-finite score never clears the floor
            best[passage_id] = max(score, best.get(passage_id, 0.0))
    return best
