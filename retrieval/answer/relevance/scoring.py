"""Scoring question × claim pairs with the fitted model, and the threshold in force. A dead
embedding model switches to the no-embedding model and says so in `RelevanceScores.note`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.answer.relevance.candidate import Candidate
from retrieval.answer.relevance.features import (
    FALLBACK_FEATURE_NAMES,
    FEATURE_NAMES,
    cosine_pairs,
    embedding_cosines,
    features,
)
from retrieval.answer.relevance.model import (
    FALLBACK_MODEL,
    FULL_MODEL,
    LogisticModel,
    RelevanceModel,
    load_model,
)
from retrieval.answer.relevance.rarity import UNIFORM_IDF, IdfTable, passage_idf
from retrieval.eligibility import Audience
from retrieval.plan.question import question_profile

logger = logging.getLogger("lode.relevance")


@dataclass(frozen=True)
class RelevanceScores:
    """One probability per candidate, the threshold of the model that produced them, which
    model that was (`FULL_MODEL` or `FALLBACK_MODEL`) and, when it was the fallback, a note
    in words saying why."""

    scores: list[float]
    threshold: float
    model: str
    note: str = ""


def score_pairs(
    question: str,
    candidates: Sequence[Candidate],
    *,
    idf: IdfTable = UNIFORM_IDF,
    model: RelevanceModel | None = None,
) -> RelevanceScores:
    """Score every candidate against `question` (one embedding call for all of them). Raises
    `RelevanceUnavailable` only when the weights cannot be read; a dead embedding model
    switches to the no-embedding model and says so in `note`."""
    from retrieval.index.embeddings import EmbeddingUnavailable

    fitted = model if model is not None else load_model()
    profile = question_profile(question)
    try:
        cosines: list[tuple[float, float]] | None = cosine_pairs(
            candidates, lambda texts: embedding_cosines(question, texts)
        )
        which, note = FULL_MODEL, ""
    except Exception as exc:  # a dead model, or one failing mid-inference: the same fallback
        if not isinstance(exc, EmbeddingUnavailable):
            logger.warning("embedding for the relevance check failed: %r", exc)
        cosines, which = None, FALLBACK_MODEL
        note = (
            f"The relevance check ran without the embedding model ({exc}): a model fitted "
            "without it decided."
        )
    chosen = fitted.model(which)
    x = features(profile, candidates, idf, cosines)
    if which == FALLBACK_MODEL:
        columns = [FEATURE_NAMES.index(name) for name in FALLBACK_FEATURE_NAMES]
        x = x[:, columns]
    scores = chosen.probabilities(x).tolist() if len(candidates) else []
    threshold = threshold_of(chosen, fitted.full)
    return RelevanceScores(scores=scores, threshold=threshold, model=which, note=note)


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def threshold_of(model: LogisticModel, full: LogisticModel | None = None) -> float:
    """The threshold in force for `model`: the fitted one, or with `LODE_RELEVANCE_THRESHOLD`
    set, that value for the full model (`full`, or `model` itself when not given) and, for the
    no-embedding model, its fitted threshold moved by the same log-odds — so an override never
    loosens the check more when the embedding model is down."""
    from django.conf import settings

    override = getattr(settings, "LODE_RELEVANCE_THRESHOLD", None)
    if override is None:
        return model.threshold
    reference = full if full is not None else model
    shift = _logit(float(override)) - _logit(reference.threshold)
    return 1.0 / (1.0 + math.exp(-(_logit(model.threshold) + shift)))


def score_candidates(
    question: str,
    candidates: Sequence[Candidate],
    *,
    audience: Audience | None = None,
    idf: IdfTable | None = None,
) -> list[float]:
    """One relevance probability per candidate sentence, for ranking them (higher answers
    better). Pass `audience` (the ask's) so words are weighed by their rarity in the
    passages it may quote, or an `idf` already looked up; with neither, every word weighs the
    same.
    Falls back to the no-embedding model when the embedding model cannot load."""
    if idf is None:
        idf = passage_idf(audience, question_profile(question)) if audience else UNIFORM_IDF
    return score_pairs(question, candidates, idf=idf).scores
