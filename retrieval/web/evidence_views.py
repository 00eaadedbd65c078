"""The evidence page: `GET /evidence/<document>/<version>/<passage>/<sha256>/[?q=…]` (the
search parameters q, mode, rerank, weaker and adv, when present, only build the "back to
results" link).

Thin: `open_evidence` does every check; the page shows its outcome. 404 when unavailable
(the body still says so), 200 otherwise.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from retrieval.links import search_path
from retrieval.search.evidence import open_evidence, passage_context
from retrieval.search.pipeline import DEFAULT_MODE


@transaction.non_atomic_requests  # the source file is read outside any transaction
@require_GET
def evidence_page(
    request: HttpRequest, document_id: int, version_id: int, passage_id: int, sha256: str
) -> HttpResponse:
    outcome = open_evidence(request.user, document_id, version_id, passage_id, sha256)
    context = None
    if outcome.passage is not None:
        context = passage_context(outcome.version.body, outcome.passage.start, outcome.passage.end)
    query = request.GET.get("q", "")
    back_url = ""
    if query.strip():
        back_url = search_path(
            query=query,
            mode=request.GET.get("mode") or DEFAULT_MODE,
            rerank=request.GET.get("rerank") or settings.LODE_RERANK,
            weaker=request.GET.get("weaker") == "1",  # the view the results were in
            advanced=request.GET.get("adv") == "1",
        )
    return render(
        request,
        "search/evidence.html",
        {"outcome": outcome, "context": context, "q": query, "back_url": back_url},
        status=outcome.http_status,
    )
