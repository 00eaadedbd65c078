"""lode's MCP server on the official SDK (`mcp`): the tools of retrieval/web/mcp_tools.py,
served over stdio (`manage.py lode_mcp`) or Streamable HTTP at `/mcp`.

The tools are async only at the edge: their work runs as synchronous code where Django's ORM
may run — over stdio on asgiref's single sync thread (`sync_to_async` with
`thread_sensitive=True`), over HTTP inline on the request's own thread (`answer_http`), so a
request's database connection and transaction are the ones Django manages.

HTTP runs the SDK's *stateless* Streamable HTTP with JSON responses, one
`StreamableHTTPSessionManager` per request: no session or stream outlives a request, so it
fits a WSGI worker under gunicorn without an ASGI server, and any worker can answer any
request. Both the initialize handshake and the single-exchange protocol (2026-07-28) work.
The server, its tool list and schemas are built once per process; each request thread keeps
one event loop for its exchanges (`answer_http`) and runs a tool's database work inline on
itself, so an HTTP call makes no new thread or loop and no thread hop.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Iterable
from typing import Annotated, Any

import anyio
from asgiref.sync import sync_to_async
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from pydantic import Field

from retrieval.search.graph_query import MAX_HOPS
from retrieval.web import mcp_tools
from retrieval.web.mcp_tools import Grant, Refused

# The token a connection speaks for; set by the stdio command or per HTTP request.
current_grant: contextvars.ContextVar[Grant] = contextvars.ContextVar("lode_mcp_grant")
# Set over HTTP: a tool's synchronous work runs inline on the request's thread.
run_inline: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "lode_mcp_run_inline", default=False
)

INSTRUCTIONS = (
    "lode answers from the user's own notes and mirrored sources, with verified citations. "
    "Start with `search` to find passages (snippets only), then `open` a hit's evidence_url "
    "for its verified text, or `ask` for a cited answer whose every claim was verified "
    "against stored text. `graph_query` follows links between documents; `list_spaces` "
    "gives the space ids the other tools take."
)

server = MCPServer(name="lode", instructions=INSTRUCTIONS)


async def _call(tool: str, work: Any) -> str:
    grant = current_grant.get()
    try:
        if run_inline.get():
            return _run_outside_loop(functools.partial(mcp_tools.run_tool, grant, tool, work))
        return await sync_to_async(mcp_tools.run_tool, thread_sensitive=True)(grant, tool, work)
    except Refused as exc:
        raise ToolError(exc.message) from None


SpaceArg = Annotated[
    int | None,
    Field(description="Only this space (an id from list_spaces); default: all the token's."),
]


@server.tool(
    name="search",
    description=(
        "Search the user's notes and mirrored sources (hybrid keyword + meaning). Use it "
        "first. Returns up to `limit` hits in rank order, each with ids, title, trust tier, "
        f"a snippet of at most {mcp_tools.SNIPPET_CHARS} characters as segments (highlighted "
        "ones matched the query) and an evidence_url to pass to `open`. Never whole texts. "
        'The query language takes words, "phrases", -exclusions and filters such as '
        "tag:ops, type:note, after:2024-03."
    ),
)
async def search(
    query: Annotated[str, Field(description="What to look for.")],
    mode: Annotated[str, Field(description="hybrid (default) | lexical | semantic")] = "hybrid",
    limit: Annotated[
        int, Field(description=f"Hits, 1 to {mcp_tools.SEARCH_MAX_LIMIT}.")
    ] = mcp_tools.SEARCH_DEFAULT_LIMIT,
    space: SpaceArg = None,
) -> str:
    return await _call(
        "search",
        lambda token: mcp_tools.search_tool(
            token, query=query, mode=mode, limit=limit, space=space
        ),
    )


@server.tool(
    name="open",
    description=(
        "Open one search hit's evidence: pass its evidence_url. lode re-checks the passage "
        "against its pinned version's SHA-256 and returns the verified passage text (at most "
        f"{mcp_tools.OPEN_MAX_CHARS} characters), its text_sha256, its range in the version "
        "(Unicode code points, lines) and status verified_current | verified_superseded | "
        "source_changed | unavailable. Quote from this, not from snippets."
    ),
)
async def open_(
    evidence_url: Annotated[str, Field(description="A hit's evidence_url from `search`.")],
) -> str:
    return await _call("open", lambda token: mcp_tools.open_tool(token, evidence_url=evidence_url))


@server.tool(
    name="ask",
    description=(
        "Ask a question and get a cited answer: decision (ANSWER, ABSTAIN_NO_EVIDENCE, "
        "ASK_CLARIFYING, ANSWER_WITH_CONFLICTS), and claims that passed lode's faithfulness "
        "gate, each with its verbatim quoted span, the version it is pinned to, its trust "
        "tier and an evidence_url. `tier` says what to lead with: answer; best_match (no "
        "claim answered, and `best_match` is the verified sentence that came closest: to be "
        "checked, not stated as the answer); not_in_notes. "
        "Slower than search; needs a token with the ask scope. "
        "Every ask is stored (permalink) and anything sent to a remote model is logged."
    ),
)
async def ask(
    question: Annotated[str, Field(description="The question, in words.")],
    space: SpaceArg = None,
    mode: Annotated[str | None, Field(description="hybrid | lexical | semantic")] = None,
) -> str:
    base_url = current_grant.get().base_url
    return await _call(
        "ask",
        lambda token: mcp_tools.ask_tool(
            token, question=question, space=space, mode=mode, base_url=base_url
        ),
    )


@server.tool(
    name="graph_query",
    description=(
        "A restricted query over the graph of links between documents. `lookups` (titles, "
        "paths or words) discover candidate documents; `query` is either "
        '{"op": "neighbours", "seed": <document id>, "direction": "out"|"in", "kind": '
        '"links_to"|"contains"|"annotates"|"mentions"|"related"} or {"op": "path", "from": '
        f'<id>, "to": <id>, "max_hops": 1..{MAX_HOPS}}}. Seeds must be among the '
        "discovered documents: call once with a placeholder seed to see `candidates`, or "
        "use ids from `search`. At most 20 rows and 4 evidence excerpts."
    ),
)
async def graph_query(
    lookups: Annotated[list[str], Field(description="1 to 4 titles, paths or words.")],
    query: Annotated[dict[str, Any], Field(description="The neighbours or path query.")],
    space: SpaceArg = None,
) -> str:
    request: dict[str, Any] = {"lookups": lookups, "query": query}
    if space is not None:
        request["space"] = space
    return await _call(
        "graph_query", lambda token: mcp_tools.graph_query_tool(token, request=request)
    )


@server.tool(
    name="list_spaces",
    description=(
        "The spaces this token may read (id, name, personal or shared, the user's role, "
        "document count). Pass an id as `space` to the other tools to narrow them."
    ),
)
async def list_spaces() -> str:
    return await _call("list_spaces", mcp_tools.list_spaces)


def serve_stdio(grant: Grant) -> None:
    """Serve MCP over this process's stdin/stdout for `grant` until the client closes."""
    current_grant.set(grant)
    server.run("stdio")


_thread_loops = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    """This thread's event loop for HTTP exchanges, made on first use and kept."""
    loop = getattr(_thread_loops, "loop", None)
    if loop is None or loop.is_closed():
        loop = _thread_loops.loop = asyncio.new_event_loop()
    return loop


def _run_outside_loop(call: functools.partial[str]) -> str:
    """Run `call` on this thread as plain synchronous code: the exchange's loop is marked not
    running meanwhile, so Django's ORM (which refuses to run inside an event loop) does its
    work on the request's own connection. The loop waits: it serves only this request."""
    loop = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    try:
        return call()
    finally:
        asyncio.events._set_running_loop(loop)


def answer_http(
    grant: Grant, method: str, headers: Iterable[tuple[str, str]], body: bytes
) -> tuple[int, list[tuple[str, str]], bytes]:
    """`http_exchange` from a synchronous view, on this thread's kept event loop, with the
    tools' database work run inline on this thread (no thread hop)."""

    async def exchange() -> tuple[int, list[tuple[str, str]], bytes]:
        run_inline.set(True)
        return await http_exchange(grant, method, headers, body)

    return _thread_loop().run_until_complete(exchange())


async def http_exchange(
    grant: Grant, method: str, headers: Iterable[tuple[str, str]], body: bytes
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One HTTP request through the SDK's stateless, JSON-response Streamable HTTP
    transport: (status, headers, body) of its answer."""
    current_grant.set(grant)
    manager = StreamableHTTPSessionManager(
        server._lowlevel_server, json_response=True, stateless=True
    )
    status = 500
    response_headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            response_headers.extend(
                (key.decode("latin-1"), value.decode("latin-1"))
                for key, value in message.get("headers", [])
            )
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 0),
    }
    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return status, response_headers, b"".join(chunks)
