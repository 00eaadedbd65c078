"""What the MCP server's tools do, as plain synchronous functions over a token's grant.

Each tool calls the same service the JSON API calls for the same request — `search()` and
`hit_out` (retrieval/web/search_api.py), `open_evidence`, `ask()` with `AskForm`,
`graph_query.answer`, the spaces list — and then bounds what it returns: search gives
snippets around the highlights, never whole passage texts or bodies. Who may see what is the
rule of every page (`retrieval/eligibility.py`), with the audience narrowed to the token's
spaces. Every call, refused or not, writes an `McpCall` row (token, tool, milliseconds,
bytes of the JSON returned).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.urls import Resolver404, get_script_prefix, resolve

from lode_site.budget import as_budget_exceeded, time_budget
from lode_site.models import ApiToken, McpCall, token_digest
from retrieval.answer.ask import ask
from retrieval.eligibility import Audience, NoAccess, audience_documents, audience_for
from retrieval.links import permalink_path
from retrieval.search import graph_query
from retrieval.search.evidence import open_evidence
from retrieval.search.graph_query import GraphQueryError
from retrieval.search.pipeline import DEFAULT_MODE, MAX_PAGE_SIZE, search
from retrieval.web.forms import AskForm
from retrieval.web.search_api import hit_out
from spaces.services import member_spaces_with_counts

# Characters of passage text a search hit carries: a window around its highlights.
SNIPPET_CHARS = 320
# Hits a search returns by default and at most.
SEARCH_DEFAULT_LIMIT = 8
SEARCH_MAX_LIMIT = min(20, MAX_PAGE_SIZE)
# Characters of passage text `open` returns; a longer passage is cut (`truncated`).
OPEN_MAX_CHARS = 4000
MISSING_TOKEN = (
    "No access token: send `Authorization: Bearer <token>` (create one under Settings → "
    "Access tokens)."
)
# Tools budgeted like an ask (they search and may call a model); the rest like a read.
BUDGETED_AS_ASK = frozenset({"ask", "graph_query"})
UNKNOWN_TOKEN = "This access token is not known; create one under Settings → Access tokens."


class Refused(Exception):
    """A call lode will not answer; the message is one sentence for the caller."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Grant:
    """Who a connection speaks for: the token's id, the transport it arrived by, and the
    site's address for absolute links ("" over stdio: links stay paths)."""

    token_id: int
    transport: str
    base_url: str = ""
    # Over HTTP a grant lives for one request, so the token the view just read and checked
    # is reused; over stdio (a long-lived connection) each call reads it afresh.
    token: ApiToken | None = field(default=None, compare=False, repr=False)


def token_for(raw: str | None) -> ApiToken:
    """The usable token whose secret is `raw`, or `Refused` saying why not."""
    if not raw:
        raise Refused(MISSING_TOKEN)
    token = ApiToken.objects.select_related("user").filter(digest=token_digest(raw)).first()
    if token is None:
        raise Refused(UNKNOWN_TOKEN)
    if reason := token.refusal():
        raise Refused(reason)
    return token


def token_audience(token: ApiToken, space_id: int | None = None) -> Audience:
    """The audience of a call: the user's spaces (or `space_id`, one of them) narrowed to the
    token's spaces when it has some."""
    try:
        audience = audience_for(token.user_id, space_id=space_id)
    except NoAccess:
        raise Refused(f"Space {space_id} is not one of your spaces.") from None
    scoped = set(token.spaces.values_list("pk", flat=True))
    if not scoped:
        return audience
    if space_id is not None and space_id not in scoped:
        raise Refused(f"Space {space_id} is outside the spaces this token covers.")
    return Audience(user_id=token.user_id, space_ids=audience.space_ids & frozenset(scoped))


def run_tool(grant: Grant, tool: str, work: Callable[[ApiToken], dict[str, Any]]) -> str:
    """Run one tool call for `grant`: re-check the token (a revoke takes effect at once, even
    on a long-lived stdio connection), run `work`, log the call and return compact JSON.
    Raises `Refused` (logged too) when the token or the request is refused."""
    started = time.perf_counter()
    token = grant.token
    if token is None:
        token = ApiToken.objects.select_related("user").filter(pk=grant.token_id).first()
    try:
        if token is None:
            raise Refused(UNKNOWN_TOKEN)
        if reason := token.refusal():
            raise Refused(reason)
        text = json.dumps(
            _within_budget(tool, work, token),
            ensure_ascii=False,
            separators=(",", ":"),
            default=str,
        )
    except Refused as exc:
        _log(grant, token, tool, started, len(exc.message.encode()), exc.message)
        raise
    _log(grant, token, tool, started, len(text.encode()), "")
    token.mark_used()
    return text


def _within_budget(
    tool: str, work: Callable[[ApiToken], dict[str, Any]], token: ApiToken
) -> dict[str, Any]:
    """`work(token)` under the time budget its API twin gets (`lode_site/budget.py`): the
    ask budget for `ask` and `graph_query`, the read budget for the rest; 0 means none."""
    seconds = float(
        settings.LODE_ASK_BUDGET_SECONDS
        if tool in BUDGETED_AS_ASK
        else settings.LODE_REQUEST_BUDGET_SECONDS
    )
    if seconds <= 0:
        return work(token)
    with time_budget(seconds):
        try:
            return work(token)
        except Exception as exc:
            # Recognised while the budget is still active (a statement SQLite interrupted).
            if (stopped := as_budget_exceeded(exc)) is None:
                raise
            raise Refused(
                f"This {tool} took longer than its time budget of {stopped.seconds:g} s and "
                "was stopped; try a narrower query."
            ) from None


def _log(
    grant: Grant, token: ApiToken | None, tool: str, started: float, size: int, refused: str
) -> None:
    McpCall.objects.create(
        token=token,
        user_id=token.user_id if token else None,
        tool=tool,
        transport=grant.transport,
        milliseconds=round((time.perf_counter() - started) * 1000, 2),
        response_bytes=size,
        refused=refused[:300],
    )


# --- the tools -------------------------------------------------------------------------------


def list_spaces(token: ApiToken) -> dict[str, Any]:
    """The spaces this token reads, personal first, with the user's role in each."""
    audience = token_audience(token)
    spaces = [
        {
            "id": space.pk,
            "name": space.name,
            "description": space.description,
            "personal": space.is_personal,
            "role": space.role,
            "document_count": space.document_count,
        }
        for space in member_spaces_with_counts(token.user_id)
        if space.pk in audience.space_ids
    ]
    return {"spaces": spaces, "token_scope": token.scope}


def snippet(segments: list[dict[str, Any]], limit: int = SNIPPET_CHARS) -> dict[str, Any]:
    """At most `limit` characters of a passage as highlight segments: a window starting a
    little before the first highlighted segment, cut at the bound. `before`/`after` say
    whether passage text was left out on either side."""
    text = "".join(s["text"] for s in segments)
    first = 0
    position = 0
    for s in segments:
        if s["highlighted"]:
            first = position
            break
        position += len(s["text"])
    start = max(0, min(first - limit // 4, len(text) - limit))
    if start > 0:
        space = text.find(" ", start, first if first > start else start + limit // 4)
        start = space + 1 if space >= 0 else start
    end = min(len(text), start + limit)
    pieces: list[dict[str, Any]] = []
    position = 0
    for s in segments:
        left, right = position, position + len(s["text"])
        position = right
        lo, hi = max(left, start), min(right, end)
        if lo < hi:
            pieces.append({"text": text[lo:hi], "highlighted": s["highlighted"]})
    return {"segments": pieces, "before": start > 0, "after": end < len(text)}


def search_tool(
    token: ApiToken, *, query: str, mode: str = DEFAULT_MODE, limit: int = 0, space: int | None
) -> dict[str, Any]:
    """Hits for `query` as the API's search finds them, each with a bounded snippet."""
    audience = token_audience(token, space)
    limit = max(1, min(limit or SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT))
    result = search(
        user=token.user,
        audience=audience,
        query=query,
        mode=mode or DEFAULT_MODE,
        rerank=settings.LODE_RERANK,
        limit=limit,
    )
    if result.error:
        raise Refused(result.error)
    hits = []
    for hit in result.hits:
        out = hit_out(hit)
        hits.append(
            {
                "rank": out.rank,
                "passage_id": out.passage_id,
                "document_id": out.document_id,
                "title": out.document_title,
                "kind": out.document_kind,
                "trust_tier": out.trust_tier,
                "version_id": out.version_id,
                "version_number": out.version_number,
                "heading_path": out.heading_path,
                "score": out.score,
                "score_name": out.score_name,
                "snippet": snippet([s.model_dump() for s in out.segments]),
                "evidence_url": out.evidence_url,
            }
        )
    return {
        "query": result.query,
        "mode": result.mode,
        "degraded": result.degraded,
        "notes": result.notes,
        "snippet_chars": SNIPPET_CHARS,
        "hits": hits,
    }


def open_tool(token: ApiToken, *, evidence_url: str) -> dict[str, Any]:
    """The verified text of the passage an evidence URL names, re-checked against its
    version's content hash (`open_evidence`), bounded to `OPEN_MAX_CHARS`."""
    path = evidence_url.strip()
    if "://" in path:
        path = "/" + path.split("://", 1)[1].split("/", 1)[-1]
    path = path.split("?", 1)[0]
    prefix = get_script_prefix()  # evidence URLs are reversed with it; resolve() wants none
    if prefix != "/" and path.startswith(prefix):
        path = "/" + path[len(prefix) :]
    try:
        match = resolve(path)
    except Resolver404:
        match = None
    if match is None or match.url_name != "evidence":
        raise Refused("That is not an evidence URL; pass a search hit's `evidence_url`.")
    ids = match.kwargs
    audience = token_audience(token)
    if not audience_documents(audience).filter(pk=ids["document_id"]).exists():
        raise Refused("No evidence this token may see matches that URL.")
    outcome = open_evidence(
        token.user, ids["document_id"], ids["version_id"], ids["passage_id"], ids["sha256"]
    )
    if outcome.passage is None:
        return {"status": outcome.status.value, "message": outcome.message}
    passage, version = outcome.passage, outcome.version
    return {
        "status": outcome.status.value,
        "message": outcome.message,
        "document_id": outcome.document.pk,
        "title": outcome.document.title,
        "trust_tier": outcome.document.trust_tier,
        "version_id": version.pk,
        "version_number": version.number,
        "version_sha256": version.sha256,
        "head_version_id": outcome.head.pk,
        "passage_id": passage.pk,
        "text": passage.text[:OPEN_MAX_CHARS],
        "truncated": len(passage.text) > OPEN_MAX_CHARS,
        "text_sha256": passage.text_sha256,
        "offset_unit": "unicode_code_point",
        "start": passage.start,
        "end": passage.end,
        "start_line": passage.start_line,
        "end_line": passage.end_line,
        "evidence_url": evidence_url,
    }


def ask_tool(
    token: ApiToken,
    *,
    question: str,
    space: int | None = None,
    mode: str | None = None,
    base_url: str = "",
) -> dict[str, Any]:
    """A cited answer from `ask()`, checked as the API checks it (`AskForm`); egress is
    planned and logged by `ask()` itself. Only claims the faithfulness gate verified."""
    if not token.can_ask:
        raise Refused("This token may only read; create a token with the ask scope to ask.")
    audience = token_audience(token, space)
    if space is None and token.spaces.exists():
        if len(audience.space_ids) != 1:
            raise Refused(
                "This token covers several spaces; pass `space` (an id from list_spaces)."
            )
        space = next(iter(audience.space_ids))
    fields = {"question": question, "mode": mode or "", "space": "" if space is None else space}
    form = AskForm(fields, user=token.user)
    if not form.is_valid():
        raise Refused(form.first_error())
    data = form.cleaned_data
    outcome = ask(
        user=token.user, question=data["question"], mode=data["mode"], space_id=data["space"]
    )
    full = outcome.as_dict()
    permalink = permalink_path(outcome.trace_id) if outcome.trace_id else ""
    return {
        "question": full["question"],
        "decision": full["decision"],
        "tier": full["tier"],
        "message": full["message"],
        "error": full["error"],
        "claims": full["claims"],
        "dropped_claims": len(full["dropped"]),
        "conflicts": full["conflicts"],
        "clarifying_questions": full["clarifying_questions"],
        "best_match": full.get("best_match"),
        "closest": full.get("closest", []),
        "notes": full["notes"],
        "trace_id": full["trace_id"],
        "permalink": base_url.rstrip("/") + permalink if permalink else "",
        "space": data["space"],
    }


def graph_query_tool(token: ApiToken, *, request: dict[str, Any]) -> dict[str, Any]:
    """The restricted graph query (`graph_query.answer`), with the API's limits."""
    try:
        parsed = graph_query.parse(request)
        audience = token_audience(token, parsed.space)
        return graph_query.answer(audience, request).as_dict()
    except GraphQueryError as exc:
        raise Refused(exc.message) from None
