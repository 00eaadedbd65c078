"""Search over the API: the same `search()` the page calls."""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest
from ninja import Router, Schema

from retrieval.search import DEFAULT_MODE, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, search

router = Router(tags=["search"])


class HitOut(Schema):
    rank: int
    score: float
    score_name: str
    passage_id: int
    document_id: int
    document_title: str
    document_kind: str
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


class SearchOut(Schema):
    query: str
    mode: str
    error: str
    notes: list[str]
    elapsed_ms: float
    hits: list[HitOut]


@router.get("/", response={200: SearchOut, 400: SearchOut})
def search_endpoint(
    request: HttpRequest, q: str, mode: str = DEFAULT_MODE, limit: int = DEFAULT_PAGE_SIZE
):
    result = search(
        user=request.auth, query=q, mode=mode, limit=max(1, min(limit, MAX_PAGE_SIZE))
    )
    body = SearchOut(
        query=result.query,
        mode=result.mode,
        error=result.error,
        notes=result.notes,
        elapsed_ms=result.elapsed_ms,
        hits=[
            HitOut(
                rank=hit.rank,
                score=hit.score,
                score_name=hit.score_name,
                passage_id=hit.passage.pk,
                document_id=hit.passage.document_id,
                document_title=hit.passage.document.title,
                document_kind=hit.passage.document.kind,
                version_id=hit.passage.version_id,
                version_number=hit.passage.version.number,
                version_created_at=hit.passage.version.created_at,
                heading_path=hit.passage.heading_path,
                text=hit.passage.text,
                start=hit.passage.start,
                end=hit.passage.end,
                start_line=hit.passage.start_line,
                end_line=hit.passage.end_line,
            )
            for hit in result.hits
        ],
    )
    return (400 if result.error else 200), body
