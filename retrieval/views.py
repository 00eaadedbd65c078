"""The search page. `GET /search?q=...&mode=...&rerank=...` is the shareable URL and renders
the whole page; htmx requests get only the results partial."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from retrieval.rerank import RERANK_CHOICES
from retrieval.search import DEFAULT_MODE, MODES, search


@require_GET
def search_page(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "")
    mode = request.GET.get("mode") or DEFAULT_MODE
    rerank = request.GET.get("rerank") or settings.LODE_RERANK
    result = (
        search(user=request.user, query=query, mode=mode, rerank=rerank) if query.strip() else None
    )
    template = "search/search.html#results" if request.htmx else "search/search.html"
    return render(
        request,
        template,
        {
            "q": query,
            "mode": mode,
            "rerank": rerank,
            "modes": MODES,
            "rerank_choices": RERANK_CHOICES,
            "result": result,
        },
    )
