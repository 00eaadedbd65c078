"""The search page. `GET /search?q=...&mode=...&rerank=...` is the shareable URL and renders
the whole page; htmx requests get only the results partial.

Shareable searches (issue 4, item 6): the URL carries everything that decides the results —
the query with its filters (filters live inside `q`), the mode and the reranker — so opening
it in another session of a user who may see the same documents reproduces the same hits in
the same order. The page offers that URL with every parameter spelled out (defaults made
explicit, so a later change of default does not change what a shared link shows), built
server-side so it works without JavaScript, and htmx pushes the same URL into the address bar.

Weaker matches (issue 13, item 4): meaning-only hits below the similarity floor are left out
unless `weaker=1` is in the URL (the "Show weaker matches" link sets it; shared links keep it),
and a search that matches nothing says so in words.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django_htmx.http import push_url

from lode_site.htmx import HtmxHttpRequest
from retrieval.links import search_path
from retrieval.search.pipeline import DEFAULT_MODE, MODES, search
from retrieval.search.rerank import RERANK_CHOICES


@require_GET
def search_page(request: HtmxHttpRequest) -> HttpResponse:
    query = request.GET.get("q", "")
    mode = request.GET.get("mode") or DEFAULT_MODE
    rerank = request.GET.get("rerank") or settings.LODE_RERANK
    weaker = request.GET.get("weaker", "").lower() in ("1", "true", "on", "yes")
    result = (
        search(user=request.user, query=query, mode=mode, rerank=rerank, show_weaker=weaker)
        if query.strip()
        else None
    )
    share_path = search_path(query=query, mode=mode, rerank=rerank, weaker=weaker)
    template = "search/search.html#results" if request.htmx else "search/search.html"
    response = render(
        request,
        template,
        {
            "q": query,
            "mode": mode,
            "rerank": rerank,
            "modes": MODES,
            "rerank_choices": RERANK_CHOICES,
            "result": result,
            "weaker": weaker,
            # The same search with weaker matches shown, and without them.
            "weaker_path": search_path(query=query, mode=mode, rerank=rerank, weaker=True),
            "stronger_path": search_path(query=query, mode=mode, rerank=rerank),
            "share_url": request.build_absolute_uri(share_path),
            # Carried on each "Open evidence" link, so its "back to results" returns here.
            "search_params": share_path.partition("?")[2],
        },
    )
    if request.htmx:
        # The canonical URL (all parameters, defaults explicit) rather than whatever the
        # form happened to submit, so the address bar always holds a shareable link.
        push_url(response, share_path)
    return response
