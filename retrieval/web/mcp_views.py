"""`/mcp`: lode's MCP server over Streamable HTTP, inside the WSGI app.

The view authenticates the bearer token itself (no session, so no CSRF: a browser cannot
send the header cross-site without a CORS preflight lode never grants) and hands the request
to the SDK (`retrieval/web/mcp_server.py` `answer_http`). A missing, unknown, revoked or
expired token is a 401 whose body is one sentence saying which.

Only POST: the stateless transport keeps no session to end (DELETE) and offers no stream of
server messages (GET, which the SDK would hold open for ever, tying up a worker); the
protocol lets a server answer both with 405.
"""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from retrieval.web.mcp_server import answer_http
from retrieval.web.mcp_tools import Grant, Refused, token_for

# Headers the SDK's transport reads; hop-by-hop and cookie headers are not passed on.
FORWARDED_HEADERS = ("accept", "content-type", "mcp-protocol-version", "mcp-session-id")
FORWARDED_PREFIX = "mcp-"


def _bearer(request: HttpRequest) -> str | None:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


@csrf_exempt
@login_not_required
@require_POST
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    try:
        token = token_for(_bearer(request))
    except Refused as exc:
        response = HttpResponse(
            json.dumps({"error": exc.message}), status=401, content_type="application/json"
        )
        response["WWW-Authenticate"] = 'Bearer realm="lode"'
        return response
    grant = Grant(
        token_id=token.pk,
        transport="http",
        base_url=request.build_absolute_uri("/")[:-1],
        token=token,
    )
    headers = [
        (name.lower(), value)
        for name, value in request.headers.items()
        if name.lower() in FORWARDED_HEADERS or name.lower().startswith(FORWARDED_PREFIX)
    ]
    status, response_headers, body = answer_http(grant, "POST", headers, request.body)
    response = HttpResponse(body, status=status)
    for name, value in response_headers:
        if name.lower() not in ("content-length", "connection", "transfer-encoding"):
            response[name] = value
    return response
