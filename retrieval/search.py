"""The search service: the one function the page, the API and the evaluation harness call.

    parse → eligibility (owner, live, head) inside each leg, before its limit
          → lexical leg (≤256) ‖ dense leg (≤256)
          → RRF k=60 + exact phrase/identifier boosts + deterministic ties (fusion.py)
          → rerank of the fused top N (rerank.py; learned by default, toggle per request)
          → trust rank (trust.py) → hits with their parent block (small-to-big)

If the dense leg cannot run (model missing or corrupt, Chroma down) search answers from
the lexical leg and says so in `degraded`; passages not yet embedded are counted there too.
Never raises for bad input: `error` carries the message.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from retrieval import lexical
from retrieval.fusion import FusedHit, LegHit, exact_matches, fuse
from retrieval.models import Passage
from retrieval.query import ParsedQuery, QueryError, parse
from retrieval.rerank import (
    RERANK_CHOICES,
    RERANK_TOP_N,
    Candidate,
    RerankUnavailable,
    get_reranker,
)
from retrieval.trust import trust_rank

logger = logging.getLogger("lode.search")

MODES = ("hybrid", "lexical", "semantic")
DEFAULT_MODE = "hybrid"
# Modes the evaluation harness measures: (search mode, reranker; None = the configured default).
EVAL_MODES: dict[str, tuple[str, str | None]] = {
    "lexical": ("lexical", "off"),
    "semantic": ("semantic", "off"),
    "hybrid": ("hybrid", "off"),
    "hybrid+rerank": ("hybrid", None),
}
DENSE_LIMIT = 256
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
# Internal callers (evaluation, answers) may take the whole fused list.
MAX_LIMIT = lexical.LEXICAL_LIMIT + DENSE_LIMIT


@dataclass
class Hit:
    rank: int  # 1-based position in the final ranking
    passage: Passage
    fused: FusedHit
    rerank_score: float | None = None
    rerank_score_name: str = ""
    reasons: list[str] = field(default_factory=list)

    @property
    def parent_text(self) -> str:
        """Small-to-big: the passage's heading section, for context. The citation stays the
        passage's own range."""
        p = self.passage
        return p.version.body[p.parent_start : p.parent_end]

    @property
    def score(self) -> float:
        """The score that decided the rank (see `score_name`)."""
        if self.rerank_score is not None:
            return self.rerank_score
        if self.fused.lexical and not self.fused.dense:
            return self.fused.lexical.score
        if self.fused.dense and not self.fused.lexical:
            return self.fused.dense.score
        return self.fused.fused_score

    @property
    def score_name(self) -> str:
        if self.rerank_score is not None:
            return self.rerank_score_name
        if self.fused.lexical and not self.fused.dense:
            return self.fused.lexical.score_name
        if self.fused.dense and not self.fused.lexical:
            return self.fused.dense.score_name
        return "reciprocal rank fusion"


@dataclass
class SearchResult:
    query: str
    mode: str
    rerank: str = "off"
    parsed: ParsedQuery | None = None
    hits: list[Hit] = field(default_factory=list)
    error: str = ""
    notes: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    lexical_candidates: int = 0
    dense_candidates: int = 0
    elapsed_ms: float = 0.0

    @property
    def is_empty_query(self) -> bool:
        return not self.error and (self.parsed is None or self.parsed.is_empty)


def _dense_leg(parsed: ParsedQuery, owner_id: int) -> list[LegHit]:
    """Dense candidates, eligibility-filtered inside Chroma's `where`. Raises the
    Unavailable errors of the embedding and vector modules."""
    from retrieval.embeddings import get_embedder
    from retrieval.vectors import get_vector_store

    vector = get_embedder().embed_query(parsed.text)
    hits = get_vector_store().query(vector, owner_id=owner_id, limit=DENSE_LIMIT)
    return [
        LegHit(passage_id=h.passage_id, rank=i, score=h.cosine, score_name="cosine")
        for i, h in enumerate(hits, start=1)
    ]


def _dense_unavailable_errors() -> tuple[type[Exception], ...]:
    from retrieval.embeddings import EmbeddingUnavailable
    from retrieval.vectors import VectorStoreUnavailable

    return (EmbeddingUnavailable, VectorStoreUnavailable)


def _pending_note(owner_id: int, mode: str) -> str | None:
    from retrieval.vectors import pending_count

    pending = pending_count(owner_id)
    if not pending:
        return None
    what = f"{pending:,} passage{'s' if pending != 1 else ''} not yet embedded"
    if mode == "semantic":
        return f"{what}: not searchable by meaning until the worker catches up."
    return f"{what}: found by keywords only until the worker catches up."


def _lexical_leg(parsed: ParsedQuery, owner_id: int) -> list[LegHit]:
    return [
        LegHit(passage_id=h.passage_id, rank=i, score=h.score, score_name=h.score_name)
        for i, h in enumerate(lexical.backend().search(parsed, owner_id=owner_id), start=1)
    ]


@dataclass(frozen=True, slots=True)
class CandidateRow:
    """The few columns ranking needs, loaded for every candidate; full rows (with the version
    body for small-to-big) are loaded only for the hits actually returned."""

    passage_id: int
    document_id: int
    title_text: str
    text: str
    position: int
    trust_tier: str
    external_key: str


CANDIDATE_FIELDS = (
    "id",
    "document_id",
    "title_text",
    "text",
    "position",
    "document__trust_tier",
    "document__external_key",
    "is_head",
    "document__owner_id",
    "document__deleted_at",
)


def fused_candidates(
    parsed: ParsedQuery, *, owner_id: int, mode: str, result: SearchResult
) -> tuple[list[FusedHit], dict[int, CandidateRow]]:
    """Both legs, canonical eligibility, exact matches and fusion: everything before rerank.

    Records candidate counts and any degradation on `result`. Also used by the reranker's
    fitting script, so the model is trained on exactly what search feeds it.
    """
    lexical_hits: list[LegHit] = []
    if mode in ("hybrid", "lexical"):
        lexical_hits = _lexical_leg(parsed, owner_id)
    dense_hits: list[LegHit] = []
    if mode in ("hybrid", "semantic"):
        try:
            dense_hits = _dense_leg(parsed, owner_id)
            note = _pending_note(owner_id, mode)
            if note:
                result.degraded.append(note)
        except _dense_unavailable_errors() as exc:
            logger.warning("dense leg unavailable: %s", exc)
            result.degraded.append(f"Semantic search unavailable: {exc}. Showing keyword matches.")
            if mode == "semantic":
                lexical_hits = _lexical_leg(parsed, owner_id)
    result.lexical_candidates, result.dense_candidates = len(lexical_hits), len(dense_hits)

    # Canonical eligibility for every candidate (a vector may outlive its head passage for a
    # moment, until the worker deletes it). Fetched by primary key and checked here: letting
    # SQL filter on the owner too makes SQLite walk every document the owner has.
    ids = {h.passage_id for h in lexical_hits} | {h.passage_id for h in dense_hits}
    rows: dict[int, CandidateRow] = {}
    for (
        pid,
        doc_id,
        title,
        text,
        position,
        tier,
        key,
        is_head,
        owner,
        deleted,
    ) in Passage.objects.filter(pk__in=ids).values_list(*CANDIDATE_FIELDS):
        if is_head and owner == owner_id and deleted is None:
            rows[pid] = CandidateRow(pid, doc_id, title, text, position, tier, key)
    lexical_hits = [h for h in lexical_hits if h.passage_id in rows]
    dense_hits = [h for h in dense_hits if h.passage_id in rows]
    exact = {}
    if parsed.needles:
        for pid, row in rows.items():
            found = exact_matches(parsed.needles, row.text)
            if found:
                exact[pid] = found
    return fuse(lexical_hits, dense_hits, exact=exact), rows


@dataclass
class _Ranked:
    fused: FusedHit
    row: CandidateRow
    rerank_score: float | None = None
    reasons: list[str] = field(default_factory=list)


def _rerank(
    ranked: list[_Ranked], parsed: ParsedQuery, name: str, result: SearchResult
) -> tuple[list[_Ranked], str]:
    """Re-score the top N with reranker `name`; returns the new order and the score's name.
    On failure the fused order stands and `result.degraded` says why."""
    try:
        reranker = get_reranker(name)
    except RerankUnavailable as exc:
        result.degraded.append(f"Reranking unavailable: {exc}. Showing fused order.")
        return ranked, ""
    if reranker is None:
        return ranked, ""
    head, tail = ranked[:RERANK_TOP_N], ranked[RERANK_TOP_N:]
    candidates = [
        Candidate(
            passage_id=r.row.passage_id,
            document_id=r.row.document_id,
            title_text=r.row.title_text,
            text=r.row.text,
            position=r.row.position,
            fused=r.fused,
        )
        for r in head
    ]
    try:
        scores = reranker.scores(parsed, candidates)
    except RerankUnavailable as exc:
        result.degraded.append(f"Reranking unavailable: {exc}. Showing fused order.")
        return ranked, ""
    for r, score in zip(head, scores, strict=True):
        r.rerank_score = score
        r.reasons.append(f"{reranker.score_name} {score:.4g}")
    # Exact matches stay first; equal scores keep the fused order (the sort is stable).
    head.sort(key=lambda r: (not r.fused.exact_matches, -(r.rerank_score or 0.0)))
    result.rerank = reranker.name
    return head + tail, reranker.score_name


def search(
    *,
    user: AbstractBaseUser,
    query: str,
    mode: str = DEFAULT_MODE,
    rerank: str | None = None,
    limit: int = DEFAULT_PAGE_SIZE,
) -> SearchResult:
    """Search the passages `user` may see."""
    started = time.perf_counter()
    rerank = rerank or settings.LODE_RERANK
    # `result.rerank` names the reranker that actually ran; it stays "off" if none could.
    result = SearchResult(query=query, mode=mode, rerank="off")
    if mode not in MODES:
        result.error = f"Unknown search mode {mode!r}; choose one of: {', '.join(MODES)}."
        return result
    if rerank not in RERANK_CHOICES:
        result.error = f"Unknown reranker {rerank!r}; choose one of: {', '.join(RERANK_CHOICES)}."
        return result
    try:
        parsed = parse(query)
    except QueryError as exc:
        result.error = str(exc)
        return result
    result.parsed = parsed
    result.notes.extend(parsed.notes)
    if parsed.is_empty:
        return result

    fused, rows = fused_candidates(parsed, owner_id=user.pk, mode=mode, result=result)
    ranked = [_Ranked(fused=f, row=rows[f.passage_id], reasons=list(f.reasons)) for f in fused]
    score_name = ""
    if rerank != "off" and ranked:
        ranked, score_name = _rerank(ranked, parsed, rerank, result)
    ranked = trust_rank(
        ranked, tier_of=lambda r: r.row.trust_tier, passage_id_of=lambda r: r.row.passage_id
    )
    ranked = ranked[: max(1, min(limit, MAX_LIMIT))]

    passages = Passage.objects.select_related("document", "version").in_bulk(
        [r.row.passage_id for r in ranked]
    )
    result.hits = [
        Hit(
            rank=i,
            passage=passages[r.row.passage_id],
            fused=r.fused,
            rerank_score=r.rerank_score,
            rerank_score_name=score_name if r.rerank_score is not None else "",
            reasons=r.reasons,
        )
        for i, r in enumerate(ranked, start=1)
        if r.row.passage_id in passages  # deleted between the two reads: drop, never guess
    ]
    result.elapsed_ms = (time.perf_counter() - started) * 1000
    return result
