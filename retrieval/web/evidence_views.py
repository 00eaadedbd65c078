"""The evidence page: `GET /evidence/<document>/<version>/<passage>/<sha256>/[?…]`.

Thin: `open_evidence` does every check; the page shows its outcome. 404 when unavailable
(the body still says so), 200 otherwise.

What the query string may add, none of it trusted:

* `span=<start>-<end>` — the quoted words an answer cited (version code points): marked
  inside the passage instead of the whole passage; a span outside the passage is ignored.
* where the reader came from, for the back link — never a URL taken as it is:
  `q` (with mode, rerank, weaker and adv) rebuilds the search's URL; `from=answer&answer=<id>`
  the stored answer's permalink (which checks access when opened); `from=graph&back=<path>`
  a graph query's path, kept only when it is a same-site path to the graph query page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET

from lode_site.ids import parse_id
from retrieval.links import permalink_path, search_path
from retrieval.search.evidence import open_evidence, passage_context
from retrieval.search.pipeline import DEFAULT_MODE

_SPAN = re.compile(r"(\d{1,12})-(\d{1,12})")
MAX_BACK_CHARS = 2000  # a graph query's path with every parameter fits well within this


@dataclass(frozen=True)
class BackLink:
    url: str
    words: str  # "back to the answer", …


def quoted_span(raw: str) -> tuple[int, int] | None:
    """`start-end` as two code-point offsets, or None when it is not exactly that."""
    match = _SPAN.fullmatch(raw.strip())
    if match is None:
        return None
    start, end = int(match[1]), int(match[2])
    return (start, end) if start < end else None


def _graph_back(request: HttpRequest) -> str:
    back = request.GET.get("back", "")
    if not back or len(back) > MAX_BACK_CHARS:
        return ""
    # Same site only, and only the graph query page: never an open redirect.
    if not url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return ""
    page = reverse("graph-query")
    if not back.startswith(page) or back[len(page) : len(page) + 1] not in ("", "?"):
        return ""
    return back


def back_link(request: HttpRequest) -> BackLink:
    """Where the reader came from, in words, from what the link carried (see the module)."""
    came_from = request.GET.get("from", "")
    if came_from == "answer":
        answer_id = parse_id(request.GET.get("answer", ""))
        if answer_id is not None:
            return BackLink(permalink_path(answer_id), "back to the answer")
    if came_from == "graph":
        back = _graph_back(request)
        if back:
            return BackLink(back, "back to the graph query")
    query = request.GET.get("q", "")
    if query.strip():
        url = search_path(
            query=query,
            mode=request.GET.get("mode") or DEFAULT_MODE,
            rerank=request.GET.get("rerank") or settings.LODE_RERANK,
            weaker=request.GET.get("weaker") == "1",  # the view the results were in
            advanced=request.GET.get("adv") == "1",
        )
        return BackLink(url, "back to results")
    return BackLink(reverse("retrieval:search"), "search")


@transaction.non_atomic_requests  # the source file is read outside any transaction
@require_GET
def evidence_page(
    request: HttpRequest, document_id: int, version_id: int, passage_id: int, sha256: str
) -> HttpResponse:
    outcome = open_evidence(request.user, document_id, version_id, passage_id, sha256)
    context = None
    if outcome.passage is not None:
        context = passage_context(
            outcome.version.body,
            outcome.passage.start,
            outcome.passage.end,
            quote_span=quoted_span(request.GET.get("span", "")),
        )
    back = back_link(request)
    return render(
        request,
        "search/evidence.html",
        {
            "outcome": outcome,
            "context": context,
            "q": request.GET.get("q", ""),
            "back": back,
            # The "Search again" of an unavailable passage keeps the reader's query.
            "back_url": back.url if back.words == "back to results" else "",
        },
        status=outcome.http_status,
    )
