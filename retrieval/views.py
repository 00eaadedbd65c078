"""The search page. `GET /search?q=...` is the shareable URL and renders the whole page;
htmx requests get only the results partial."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from retrieval.search import DEFAULT_MODE, search


@require_GET
def search_page(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "")
    mode = request.GET.get("mode", DEFAULT_MODE)
    result = search(user=request.user, query=query, mode=mode) if query.strip() else None
    template = "search/search.html#results" if request.htmx else "search/search.html"
    return render(request, template, {"q": query, "mode": mode, "result": result})
