"""The rerank stage: re-score the fused top N behind one Protocol.

Three implementations, chosen per request (`rerank=` on the page and API) or by the
`LODE_RERANK` setting:

* `learned` (default) — a linear model over features of the query–passage pair (leg scores
  and ranks, query-term coverage, exact matches, lengths), fitted with pairwise logistic
  loss on the SciFact *train* split and the tune half of the notes question set
  (`bench/data/questions/`) by `training/fit_rerank.py` (not shipped); its weights are
  checked in as `retrieval/data/rerank_learned.json`, which records what they were fitted on.
  Features describe the pair only — never a document's identity or its training label.
* `cross-encoder` — fastembed's `TextCrossEncoder` loaded from a local folder named by
  `LODE_RERANK_MODEL_DIR` (no model ships offline; see MODELS.md).
* `off` — fused order stands.

Scores are named for what they are ("learned fusion score", "cross-encoder logit"), never
"confidence".
"""

from __future__ import annotations

import itertools
import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np
from django.conf import settings

from retrieval.query import ParsedQuery
from retrieval.search.fusion import FusedHit
from retrieval.text.tokens import tokens
from retrieval.words.stopwords import QUERY_STOPWORDS

RERANK_CHOICES = ("learned", "cross-encoder", "off")
LEARNED_MODEL_FILE = Path(__file__).resolve().parent.parent / "data" / "rerank_learned.json"
# How many fused candidates the reranker re-scores; the rest keep their fused order below.
RERANK_TOP_N = 100


class RerankUnavailable(Exception):
    """The chosen reranker cannot run; str() is a short user-facing reason."""


@dataclass(frozen=True, slots=True)
class Candidate:
    passage_id: int
    document_id: int
    title_text: str
    text: str
    position: int
    fused: FusedHit


class Reranker(Protocol):
    name: str
    score_name: str

    def scores(self, query: ParsedQuery, candidates: Sequence[Candidate]) -> list[float]:
        """One score per candidate, higher is better."""
        ...


# --- features -------------------------------------------------------------------------------

FEATURE_NAMES = (
    "lexical_norm",  # lexical score min–max normalised over this query's candidates (0 if absent)
    "dense_norm",  # cosine min–max normalised over this query's candidates (0 if absent)
    "dense_cosine",  # raw cosine similarity (0 if absent)
    "lexical_rr",  # 1 / lexical rank (0 if absent)
    "dense_rr",  # 1 / dense rank (0 if absent)
    "in_lexical",
    "in_dense",
    "rrf",  # reciprocal rank fusion sum, scaled by k + 1
    "coverage",  # share of the query's content words present in title + text (stem-prefix match)
    "idf_coverage",  # the same, weighted by the word's rarity among this query's candidates
    "title_coverage",  # share present in the title text
    "bigram_coverage",  # share of adjacent query word pairs present as adjacent pairs
    "exact_match",  # a quoted phrase or identifier occurs verbatim
    "log_words",  # log(1 + words in passage)
    "first_passage",  # the passage opens its document (position 0)
    "lexical_x_dense",  # lexical_norm * dense_norm
    "lexical_z",  # lexical score as a z-score over this query's lexical candidates (0 if absent)
    "dense_z",  # cosine as a z-score over this query's dense candidates (0 if absent)
    "dense_gap",  # cosine minus the best cosine among the candidates (≤ 0; -1 if absent)
    "doc_lexical_max",  # best lexical_norm among candidates from the same document
    "doc_dense_max",  # best cosine among candidates from the same document
    "dense_cosine_sq",  # cosine squared: lets the linear model bend
)

STEM_CHARS = 5


def _stem(token: str) -> str:
    # A crude prefix stem, shared by query and passage, so "rotating" meets "rotate".
    return token[:STEM_CHARS]


def _content_stems(query: ParsedQuery) -> list[str]:
    stems = []
    for token in query.all_tokens():
        if token not in QUERY_STOPWORDS:
            stem = _stem(token)
            if stem not in stems:
                stems.append(stem)
    return stems


def _bigrams(stems: Sequence[str]) -> set[tuple[str, str]]:
    return set(itertools.pairwise(stems))


def pairs_present(query_pairs: set[tuple[str, str]], stems: Sequence[str]) -> int:
    """How many of `query_pairs` occur as adjacent stems in `stems`:
    `len(query_pairs & _bigrams(stems))`, without building every pair."""
    if not query_pairs:
        return 0
    firsts = {first for first, _ in query_pairs}
    return len(
        {pair for pair in itertools.pairwise(stems) if pair[0] in firsts and pair in query_pairs}
    )


def _zscore(values: list[float | None]) -> list[float]:
    present = [v for v in values if v is not None]
    if len(present) < 2:
        return [0.0 for _ in values]
    mean = sum(present) / len(present)
    std = math.sqrt(sum((v - mean) ** 2 for v in present) / len(present)) or 1.0
    return [0.0 if v is None else (v - mean) / std for v in values]


def _minmax(values: list[float | None]) -> list[float]:
    present = [v for v in values if v is not None]
    if not present:
        return [0.0 for _ in values]
    low, high = min(present), max(present)
    span = high - low
    return [0.0 if v is None else (1.0 if span == 0 else (v - low) / span) for v in values]


# Passages analysed recently, per process: the same passages come back as candidates query
# after query, and tokenising each one's title and text was most of the reranker's cost
# (bench/README.md). Keyed by the strings themselves, so an edited passage is a
# new entry; the bound keeps memory to a few MB per process.
PASSAGE_TERMS_CACHE_SIZE = 4096


@lru_cache(maxsize=PASSAGE_TERMS_CACHE_SIZE)
def passage_terms(
    title_text: str, text: str
) -> tuple[frozenset[str], frozenset[str], tuple[str, ...], float]:
    """(stems of title + text, stems of the title, the stems in order, log(1 + words)).

    The stems in order, not the set of their adjacent pairs: a query asks for a handful of
    pairs, which `pairs_present` finds in one pass, while building every pair of a passage
    was a third of the cost of analysing it the first time it is a candidate."""
    text_tokens = tuple(_stem(t) for t in tokens(title_text + "\n" + text))
    return (
        frozenset(text_tokens),
        frozenset(_stem(t) for t in tokens(title_text)),
        text_tokens,
        # Whitespace-separated words: str.split() splits where `SPACED_WORD_RE` does (every
        # code point checked in tests/retrieval/test_text.py), at a fifth of the cost.
        math.log1p(len(text.split())),
    )


def features(query: ParsedQuery, candidates: Sequence[Candidate]) -> np.ndarray:
    """The feature matrix (len(candidates) × len(FEATURE_NAMES)). Pure and deterministic."""
    if not candidates:
        return np.zeros((0, len(FEATURE_NAMES)), dtype=np.float64)
    query_stems = _content_stems(query)
    query_pairs = _bigrams([_stem(t) for t in query.all_tokens()])
    analysed = [passage_terms(c.title_text, c.text) for c in candidates]
    passage_stems = [a[0] for a in analysed]
    title_stems = [a[1] for a in analysed]
    passage_sequences = [a[2] for a in analysed]
    # Rarity among this query's candidates: a word in every candidate tells them apart least.
    n = len(candidates)
    weights = {
        stem: math.log(1 + n / (1 + sum(stem in s for s in passage_stems))) for stem in query_stems
    }
    total_weight = sum(weights.values()) or 1.0
    lexical_raw = [c.fused.lexical.score if c.fused.lexical else None for c in candidates]
    dense_raw = [c.fused.dense.score if c.fused.dense else None for c in candidates]
    lexical_norm, dense_norm = _minmax(lexical_raw), _minmax(dense_raw)
    lexical_z, dense_z = _zscore(lexical_raw), _zscore(dense_raw)
    best_cosine = max((v for v in dense_raw if v is not None), default=0.0)
    # The same document's best evidence among the candidates: a passage of a document whose
    # other passage matches strongly is more likely on topic (small-to-big for ranking).
    doc_lexical: dict[int, float] = {}
    doc_dense: dict[int, float] = {}
    for i, c in enumerate(candidates):
        doc_lexical[c.document_id] = max(doc_lexical.get(c.document_id, 0.0), lexical_norm[i])
        if dense_raw[i] is not None:
            doc_dense[c.document_id] = max(doc_dense.get(c.document_id, 0.0), dense_raw[i])
    rows = []
    for i, c in enumerate(candidates):
        lex, den = c.fused.lexical, c.fused.dense
        present = [s for s in query_stems if s in passage_stems[i]]
        rows.append(
            [
                lexical_norm[i],
                dense_norm[i],
                den.score if den else 0.0,
                1.0 / lex.rank if lex else 0.0,
                1.0 / den.rank if den else 0.0,
                1.0 if lex else 0.0,
                1.0 if den else 0.0,
                c.fused.rrf * 61.0,
                len(present) / len(query_stems) if query_stems else 0.0,
                sum(weights[s] for s in present) / total_weight,
                (sum(s in title_stems[i] for s in query_stems) / len(query_stems))
                if query_stems
                else 0.0,
                (pairs_present(query_pairs, passage_sequences[i]) / len(query_pairs))
                if query_pairs
                else 0.0,
                1.0 if c.fused.exact_matches else 0.0,
                analysed[i][3],
                1.0 if c.position == 0 else 0.0,
                lexical_norm[i] * dense_norm[i],
                lexical_z[i],
                dense_z[i],
                (den.score - best_cosine) if den else -1.0,
                doc_lexical[c.document_id],
                doc_dense.get(c.document_id, 0.0),
                (den.score**2) if den else 0.0,
            ]
        )
    return np.asarray(rows, dtype=np.float64)


# --- implementations ------------------------------------------------------------------------


@dataclass(frozen=True)
class LinearModel:
    feature_names: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray

    def score(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale) @ self.weights

    def to_json(self, **extra: object) -> str:
        return json.dumps(
            {
                "feature_names": list(self.feature_names),
                "mean": self.mean.tolist(),
                "scale": self.scale.tolist(),
                "weights": self.weights.tolist(),
                **extra,
            },
            indent=2,
        )

    @classmethod
    def from_file(cls, path: Path) -> LinearModel:
        """Load weights; any damage (unreadable, truncated, wrong shape) is RerankUnavailable,
        so search degrades to fused order instead of failing."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            names = tuple(data["feature_names"])
            arrays = [np.asarray(data[k], dtype=np.float64) for k in ("mean", "scale", "weights")]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            reason = exc.__class__.__name__
            raise RerankUnavailable(f"{path.name} is unreadable ({reason})") from exc
        if names != FEATURE_NAMES:
            raise RerankUnavailable(
                f"{path.name} was fitted on other features; "
                "re-run training/fit_rerank.py"
            )
        width = len(FEATURE_NAMES)
        if any(a.shape != (width,) or not np.all(np.isfinite(a)) for a in arrays) or np.any(
            arrays[1] <= 0
        ):
            raise RerankUnavailable(f"{path.name} has weights of the wrong shape or value")
        mean, scale, weights = arrays
        return cls(feature_names=names, mean=mean, scale=scale, weights=weights)


class LearnedReranker:
    name = "learned"
    score_name = "learned fusion score"

    def __init__(self, model: LinearModel):
        self.model = model

    def scores(self, query: ParsedQuery, candidates: Sequence[Candidate]) -> list[float]:
        if not candidates:
            return []
        return self.model.score(features(query, candidates)).tolist()


class CrossEncoderReranker:
    """fastembed `TextCrossEncoder` from a local folder (layout: DIR/onnx/model.onnx plus the
    tokenizer files at DIR). Loaded once per process on first use."""

    name = "cross-encoder"
    score_name = "cross-encoder logit"

    def __init__(self, folder: Path, model_name: str):
        self.folder = folder
        self.model_name = model_name
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                if not (self.folder / "onnx" / "model.onnx").is_file():
                    raise RerankUnavailable(
                        f"no cross-encoder model at {self.folder}/onnx/model.onnx"
                    )
                from fastembed.rerank.cross_encoder import TextCrossEncoder

                try:
                    self._model = TextCrossEncoder(
                        self.model_name, specific_model_path=str(self.folder)
                    )
                except Exception as exc:  # onnxruntime/tokenizers raise many types
                    raise RerankUnavailable(f"cross-encoder failed to load: {exc}") from exc
        return self._model

    def scores(self, query: ParsedQuery, candidates: Sequence[Candidate]) -> list[float]:
        if not candidates:
            return []
        model = self._load()
        documents = [c.text for c in candidates]
        try:
            return [float(s) for s in model.rerank(query.text, documents, batch_size=32)]
        except Exception as exc:
            raise RerankUnavailable(f"cross-encoder failed: {exc}") from exc


@cache
def _learned() -> LearnedReranker:
    if not LEARNED_MODEL_FILE.is_file():
        raise RerankUnavailable("the learned reranker's weights are missing")
    return LearnedReranker(LinearModel.from_file(LEARNED_MODEL_FILE))


@cache
def _cross_encoder(folder: str, model_name: str) -> CrossEncoderReranker:
    return CrossEncoderReranker(Path(folder), model_name)


def get_reranker(name: str) -> Reranker | None:
    """The reranker called `name`, or None for `off`. Raises RerankUnavailable."""
    if name == "off":
        return None
    if name == "learned":
        return _learned()
    if name == "cross-encoder":
        folder = settings.LODE_RERANK_MODEL_DIR
        if not folder:
            raise RerankUnavailable("no cross-encoder configured (set LODE_RERANK_MODEL_DIR)")
        return _cross_encoder(str(folder), settings.LODE_RERANK_MODEL_NAME)
    raise RerankUnavailable(f"unknown reranker {name!r}; choose one of {', '.join(RERANK_CHOICES)}")
