"""The search service: the one function the page, the API and the evaluation harness call.

Pipeline (issue 2 scope): parse → eligibility + lexical leg (in SQL, before the limit) →
hits with provenance. Later stages (dense leg, fusion, rerank) plug in here by `mode`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser

from retrieval import lexical
from retrieval.models import Passage
from retrieval.query import ParsedQuery, QueryError, parse

MODES = ("lexical",)
DEFAULT_MODE = "lexical"
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


@dataclass(frozen=True)
class Hit:
    rank: int  # 1-based position in the final ranking
    passage: Passage
    score: float
    score_name: str  # what `score` is: "bm25" or "ts_rank_cd" — never a confidence


@dataclass
class SearchResult:
    query: str
    mode: str
    parsed: ParsedQuery | None = None
    hits: list[Hit] = field(default_factory=list)
    error: str = ""
    notes: list[str] = field(default_factory=list)
    elapsed_ms: float = 0.0

    @property
    def is_empty_query(self) -> bool:
        return not self.error and (self.parsed is None or self.parsed.is_empty)


def search(
    *,
    user: AbstractBaseUser,
    query: str,
    mode: str = DEFAULT_MODE,
    limit: int = DEFAULT_PAGE_SIZE,
) -> SearchResult:
    """Search the passages `user` may see. Never raises for bad input: `error` says why."""
    started = time.perf_counter()
    result = SearchResult(query=query, mode=mode)
    if mode not in MODES:
        result.error = f"Unknown search mode {mode!r}; choose one of: {', '.join(MODES)}."
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
    limit = max(1, min(limit, lexical.LEXICAL_LIMIT))
    legs = lexical.backend().search(parsed, owner_id=user.pk, limit=limit)
    passages = Passage.objects.select_related("document", "version").in_bulk(
        [hit.passage_id for hit in legs]
    )
    result.hits = [
        Hit(rank=i, passage=passages[hit.passage_id], score=hit.score, score_name=hit.score_name)
        for i, hit in enumerate(legs, start=1)
        if hit.passage_id in passages
    ]
    result.elapsed_ms = (time.perf_counter() - started) * 1000
    return result
