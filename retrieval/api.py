"""Search over the API: the same `search()` the page calls."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.http import HttpRequest
from ninja import Router, Schema, Status

from retrieval.search import DEFAULT_MODE, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Hit, search

router = Router(tags=["search"])


class LegOut(Schema):
    rank: int
    score: float
    score_name: str  # "bm25" (negated, higher is better), "ts_rank_cd" or "cosine"


class ParentOut(Schema):
    """Small-to-big context: the passage's heading section. Citations use the passage range."""

    start: int
    end: int
    text: str


class HitOut(Schema):
    rank: int
    score: float
    score_name: str
    passage_id: int
    document_id: int
    document_title: str
    document_kind: str
    trust_tier: str
    version_id: int
    version_number: int
    version_created_at: datetime
    heading_path: list[str]
    text: str
    offset_unit: str = "unicode_code_point"
    start: int
    end: int
    start_line: int
    end_line: int
    parent: ParentOut
    lexical: LegOut | None
    dense: LegOut | None
    rrf: float
    exact_matches: list[str]
    rerank_score: float | None
    rerank_score_name: str
    reasons: list[str]


class SearchOut(Schema):
    query: str
    mode: str
    rerank: str
    error: str
    notes: list[str]
    degraded: list[str]
    lexical_candidates: int
    dense_candidates: int
    elapsed_ms: float
    hits: list[HitOut]


def _leg(leg) -> LegOut | None:
    return LegOut(rank=leg.rank, score=leg.score, score_name=leg.score_name) if leg else None


def hit_out(hit: Hit) -> HitOut:
    p = hit.passage
    return HitOut(
        rank=hit.rank,
        score=hit.score,
        score_name=hit.score_name,
        passage_id=p.pk,
        document_id=p.document_id,
        document_title=p.document.title,
        document_kind=p.document.kind,
        trust_tier=p.document.trust_tier,
        version_id=p.version_id,
        version_number=p.version.number,
        version_created_at=p.version.created_at,
        heading_path=p.heading_path,
        text=p.text,
        start=p.start,
        end=p.end,
        start_line=p.start_line,
        end_line=p.end_line,
        parent=ParentOut(start=p.parent_start, end=p.parent_end, text=hit.parent_text),
        lexical=_leg(hit.fused.lexical),
        dense=_leg(hit.fused.dense),
        rrf=hit.fused.rrf,
        exact_matches=list(hit.fused.exact_matches),
        rerank_score=hit.rerank_score,
        rerank_score_name=hit.rerank_score_name,
        reasons=hit.reasons,
    )


@router.get("/", response={200: SearchOut, 400: SearchOut})
def search_endpoint(
    request: HttpRequest,
    q: str,
    mode: str = DEFAULT_MODE,
    rerank: str | None = None,
    limit: int = DEFAULT_PAGE_SIZE,
):
    """Hybrid search over the caller's notes. `mode`: hybrid | lexical | semantic;
    `rerank`: learned | cross-encoder | off (default from settings). Offsets are Unicode
    code points. `degraded` lists anything that limited this search (e.g. semantic search
    unavailable)."""
    result = search(
        user=request.auth,
        query=q,
        mode=mode or DEFAULT_MODE,
        rerank=rerank or settings.LODE_RERANK,
        limit=max(1, min(limit, MAX_PAGE_SIZE)),
    )
    body = SearchOut(
        query=result.query,
        mode=result.mode,
        rerank=result.rerank,
        error=result.error,
        notes=result.notes,
        degraded=result.degraded,
        lexical_candidates=result.lexical_candidates,
        dense_candidates=result.dense_candidates,
        elapsed_ms=result.elapsed_ms,
        hits=[hit_out(hit) for hit in result.hits],
    )
    return Status(400 if result.error else 200, body)
