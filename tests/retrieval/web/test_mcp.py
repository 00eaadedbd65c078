"""The MCP server through the SDK's own client: Streamable HTTP against a live server, stdio
against `manage.py lode_mcp` in a subprocess. Tools, refusals, bounds, equality with the
JSON API and the call log."""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from lode_site.models import ApiToken, McpCall, token_create, token_revoke
from retrieval.web import mcp_tools
from spaces.models import Space
from spaces.services import document_move, space_create
from tests import factories

ROOT = Path(__file__).resolve().parents[3]
TOOLS = {"search", "open", "ask", "graph_query", "list_spaces"}
LONG_BODY = "# Failover\n\n" + " ".join(
    f"Promote the replica when the primary fails, step {n}." for n in range(200)
)


def http_call(url: str, token: str | None, steps: Any) -> Any:
    """Run `steps(client)` with the SDK client connected to `url` over Streamable HTTP."""

    async def run() -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        timeout = httpx2.Timeout(300)
        async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http_client:
            transport = streamable_http_client(url, http_client=http_client)
            async with Client(transport) as client:
                return await steps(client)

    return anyio.run(run)


def payload(result) -> dict[str, Any]:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def refusal(result) -> str:
    assert result.is_error
    return result.content[0].text


@pytest.fixture
def corpus(transactional_db):
    alice = User.objects.create_user("alice", "alice@example.com", "pw")
    bob = User.objects.create_user("bob", "bob@example.com", "pw")
    runbook = factories.note(
        alice,
        "Deploy runbook",
        "# Deploy runbook\n\nRotate the staging certs with certbot before Friday.\n\n"
        "## Redis\n\nSet maxmemory-policy allkeys-lru on the cache.\n",
    )
    long_note = factories.note(alice, "Failover", LONG_BODY)
    team = space_create(by=alice, name="Team docs")
    team_note = factories.note(alice, "Team certs", "The team rotates certbot certs monthly.")
    document_move(by=alice, document=team_note, to_space=team)
    factories.note(bob, "Bob certs", "Bob rotates certbot certs on Mondays.")
    return {
        "alice": alice,
        "bob": bob,
        "runbook": runbook,
        "long": long_note,
        "team": team,
        "team_note": team_note,
    }


@pytest.fixture
def mcp_url(live_server) -> str:
    return live_server.url + "/mcp"


def test_http_lists_tools_and_searches_with_bounded_snippets(corpus, mcp_url, live_server):
    _, raw = token_create(user=corpus["alice"], name="agent")

    async def steps(client):
        tools = await client.list_tools()
        found = await client.call_tool("search", {"query": "certbot", "mode": "lexical"})
        long = await client.call_tool("search", {"query": "replica primary", "mode": "lexical"})
        return tools, found, long

    tools, found, long = http_call(mcp_url, raw, steps)
    assert {tool.name for tool in tools.tools} == TOOLS
    assert all(tool.description for tool in tools.tools)
    hits = payload(found)["hits"]
    titles = {hit["title"] for hit in hits}
    assert titles == {"Deploy runbook", "Team certs"}  # never bob's
    assert all("text" not in hit for hit in hits)
    assert any(seg["highlighted"] for hit in hits for seg in hit["snippet"]["segments"])
    long_hits = payload(long)["hits"]
    assert long_hits and long_hits[0]["title"] == "Failover"
    for hit in long_hits:
        shown = "".join(seg["text"] for seg in hit["snippet"]["segments"])
        assert len(shown) <= mcp_tools.SNIPPET_CHARS
    assert any(hit["snippet"]["after"] for hit in long_hits)
    rows = list(McpCall.objects.filter(tool="search").order_by("id"))
    assert len(rows) == 2 and all(row.transport == "http" for row in rows)
    assert rows[0].response_bytes == len(found.content[0].text.encode())
    assert rows[0].token.name == "agent" and rows[0].refused == ""


def test_http_search_matches_the_json_api(corpus, mcp_url, live_server):
    _, raw = token_create(user=corpus["alice"], name="agent")

    async def steps(client):
        return await client.call_tool(
            "search", {"query": "certbot certs", "mode": "lexical", "limit": 5}
        )

    hits = payload(http_call(mcp_url, raw, steps))["hits"]
    api = httpx.get(
        live_server.url + "/api/search/",
        params={"q": "certbot certs", "mode": "lexical", "limit": 5},
        headers={"Authorization": f"Bearer {raw}"},
    ).json()["hits"]
    keys = ("passage_id", "document_id", "version_id", "trust_tier", "evidence_url", "rank")
    assert [{k: h[k] for k in keys} for h in hits] == [{k: h[k] for k in keys} for h in api]
    assert [h["title"] for h in hits] == [h["document_title"] for h in api]


def test_http_open_returns_verified_text_with_its_hash(corpus, mcp_url):
    _, raw = token_create(user=corpus["alice"], name="agent")

    async def steps(client):
        found = payload(await client.call_tool("search", {"query": "maxmemory", "mode": "lexical"}))
        url = found["hits"][0]["evidence_url"]
        opened = await client.call_tool("open", {"evidence_url": url})
        junk = await client.call_tool("open", {"evidence_url": "/notes/"})
        return opened, junk

    opened, junk = http_call(mcp_url, raw, steps)
    body = payload(opened)
    assert body["status"] == "verified_current"
    assert "maxmemory-policy allkeys-lru" in body["text"]
    import hashlib

    assert hashlib.sha256(body["text"].encode()).hexdigest() == body["text_sha256"]
    assert "not an evidence URL" in refusal(junk)


def test_http_ask_gives_cited_claims(corpus, mcp_url):
    _, raw = token_create(user=corpus["alice"], name="agent")

    async def steps(client):
        return await client.call_tool(
            "ask", {"question": "Which maxmemory-policy is set on the cache?"}
        )

    body = payload(http_call(mcp_url, raw, steps))
    assert body["decision"].startswith("ANSWER")
    assert (body["tier"], body["best_match"]) == ("answer", None)
    support = body["claims"][0]["support"][0]
    assert support["document_title"] == "Deploy runbook"
    assert "allkeys-lru" in support["quoted_span"]
    assert body["permalink"].startswith("http://")
    assert McpCall.objects.filter(tool="ask", refused="").count() == 1


def test_http_graph_query_and_list_spaces(corpus, mcp_url):
    _, raw = token_create(user=corpus["alice"], name="agent")
    runbook = corpus["runbook"]

    async def steps(client):
        spaces = await client.call_tool("list_spaces", {})
        graph = await client.call_tool(
            "graph_query",
            {
                "lookups": ["Deploy runbook"],
                "query": {"op": "neighbours", "seed": runbook.pk, "direction": "out",
                          "kind": "links_to"},
            },
        )
        bad = await client.call_tool(
            "graph_query",
            {"lookups": ["Deploy runbook"], "query": {"op": "neighbours", "seed": 1}},
        )
        return spaces, graph, bad

    spaces, graph, bad = http_call(mcp_url, raw, steps)
    names = {space["name"] for space in payload(spaces)["spaces"]}
    assert names == {"Team docs", corpus["alice"].personal_space.name}
    result = payload(graph)
    assert result["rows"] == [] and any(
        c["document_id"] == runbook.pk for c in result["candidates"]
    )
    assert refusal(bad)


def test_http_refuses_missing_unknown_revoked_and_expired_tokens(corpus, mcp_url):
    token, raw = token_create(user=corpus["alice"], name="agent")
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    missing = httpx.post(mcp_url, json=initialize, headers=headers)
    assert missing.status_code == 401 and "No access token" in missing.json()["error"]
    unknown = httpx.post(mcp_url, json=initialize, headers={**headers, "Authorization": "Bearer x"})
    assert unknown.status_code == 401 and "not known" in unknown.json()["error"]
    token_revoke(token)
    revoked = httpx.post(
        mcp_url, json=initialize, headers={**headers, "Authorization": f"Bearer {raw}"}
    )
    assert revoked.status_code == 401 and "revoked" in revoked.json()["error"]
    _, expiring = token_create(
        user=corpus["alice"], name="short", expires_at=timezone.now() + timedelta(hours=1)
    )
    ApiToken.objects.filter(name="short").update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = httpx.post(
        mcp_url, json=initialize, headers={**headers, "Authorization": f"Bearer {expiring}"}
    )
    assert expired.status_code == 401 and "expired" in expired.json()["error"]
    # The JSON API refuses them too.
    assert httpx.get(
        mcp_url.replace("/mcp", "/api/search/"),
        params={"q": "certbot"},
        headers={"Authorization": f"Bearer {raw}"},
    ).status_code == 401


def test_http_scoped_read_token_refuses_ask_and_other_spaces(corpus, mcp_url):
    team: Space = corpus["team"]
    personal = corpus["alice"].personal_space
    _, raw = token_create(
        user=corpus["alice"], name="team-read", scope="read", space_ids=[team.pk]
    )

    async def steps(client):
        found = await client.call_tool("search", {"query": "certbot", "mode": "lexical"})
        outside = await client.call_tool("search", {"query": "certbot", "space": personal.pk})
        asked = await client.call_tool("ask", {"question": "Who rotates the certs?"})
        spaces = await client.call_tool("list_spaces", {})
        return found, outside, asked, spaces

    found, outside, asked, spaces = http_call(mcp_url, raw, steps)
    assert {hit["title"] for hit in payload(found)["hits"]} == {"Team certs"}
    assert "outside the spaces this token covers" in refusal(outside)
    assert "may only read" in refusal(asked)
    assert [space["id"] for space in payload(spaces)["spaces"]] == [team.pk]
    refused = McpCall.objects.exclude(refused="").values_list("tool", flat=True)
    assert sorted(refused) == ["ask", "search"]
    # A narrowed token is for MCP only: the JSON API would read every space.
    api = httpx.get(
        mcp_url.replace("/mcp", "/api/search/"),
        params={"q": "certbot"},
        headers={"Authorization": f"Bearer {raw}"},
    )
    assert api.status_code == 401


def test_open_refuses_evidence_outside_the_token(corpus, mcp_url):
    team = corpus["team"]
    _, full = token_create(user=corpus["alice"], name="full")
    _, narrow = token_create(user=corpus["alice"], name="narrow", space_ids=[team.pk])

    async def find(client):
        found = await client.call_tool("search", {"query": "maxmemory", "mode": "lexical"})
        return payload(found)["hits"][0]["evidence_url"]

    url = http_call(mcp_url, full, find)

    async def steps(client):
        return await client.call_tool("open", {"evidence_url": url})

    assert "No evidence this token may see" in refusal(http_call(mcp_url, narrow, steps))


# --- stdio ----------------------------------------------------------------------------------


def stdio_env(tmp_path: Path) -> dict[str, str]:
    """The environment for `manage.py lode_mcp`: on PostgreSQL the test database itself; on
    SQLite (whose test database lives in this process's memory) a file database of its own,
    migrated and seeded by `manage.py` before the test."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "lode_site.settings", "HF_HUB_OFFLINE": "1"}
    env["LODE_DATA_DIR"] = str(tmp_path / "data")
    if connection.vendor == "postgresql":
        s = connection.settings_dict
        env["DATABASE_URL"] = (
            f"postgres://{s['USER']}:{s['PASSWORD'] or ''}@{s['HOST']}:{s['PORT']}/{s['NAME']}"
        )
    else:
        env["DATABASE_URL"] = ""
    return env


SEED = """
from django.contrib.auth.models import User
from lode_site.models import token_create
from notes.services import note_create
alice = User.objects.create_user("alice", "a@example.com", "pw")
note_create(owner=alice, title="Deploy runbook",
            body="Set maxmemory-policy allkeys-lru on the cache.")
_, raw = token_create(user=alice, name="stdio")
_, read = token_create(user=alice, name="stdio-read", scope="read")
print("TOKENS", raw, read)
"""


def manage(env: dict[str, str], *args: str) -> str:
    import subprocess

    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_stdio_serves_the_tools_for_a_token(transactional_db, tmp_path):
    env = stdio_env(tmp_path)
    if connection.vendor == "postgresql":
        alice = User.objects.create_user("alice", "a@example.com", "pw")
        factories.note(alice, "Deploy runbook", "Set maxmemory-policy allkeys-lru on the cache.")
        raw = token_create(user=alice, name="stdio")[1]
        read = token_create(user=alice, name="stdio-read", scope="read")[1]
    else:
        manage(env, "migrate", "-v0")
        out = manage(env, "shell", "-c", SEED).splitlines()
        raw, read = next(ln for ln in out if ln.startswith("TOKENS")).split()[1:]

    def run(token: str, steps: Any) -> Any:
        params = StdioServerParameters(
            command=sys.executable,
            args=["manage.py", "lode_mcp"],
            env={**env, "LODE_MCP_TOKEN": token},
            cwd=str(ROOT),
        )

        async def go() -> Any:
            async with Client(params) as client:
                return await steps(client)

        return anyio.run(go)

    async def steps(client):
        tools = await client.list_tools()
        found = await client.call_tool("search", {"query": "maxmemory", "mode": "lexical"})
        return tools, found

    tools, found = run(raw, steps)
    assert {tool.name for tool in tools.tools} == TOOLS
    assert [hit["title"] for hit in payload(found)["hits"]] == ["Deploy runbook"]

    async def ask(client):
        return await client.call_tool("ask", {"question": "Which policy is set?"})

    assert "may only read" in refusal(run(read, ask))

    import subprocess

    refused = subprocess.run(
        [sys.executable, "manage.py", "lode_mcp"],
        cwd=ROOT, env={**env, "LODE_MCP_TOKEN": "lode_nope"},
        capture_output=True, text=True, timeout=120,
    )
    assert refused.returncode != 0 and "not known" in refused.stderr
    if connection.vendor == "postgresql":
        assert McpCall.objects.filter(transport="stdio").count() == 2


def test_http_ask_through_a_remote_answerer_writes_its_egress_row(corpus, mcp_url, fake_llm):
    from retrieval.models import EgressLog

    fake_llm.reply({"claims": []}).reply({"claims": []})
    _, raw = token_create(user=corpus["alice"], name="agent")

    async def steps(client):
        return await client.call_tool(
            "ask", {"question": "Which maxmemory-policy is set on the cache?"}
        )

    body = payload(http_call(mcp_url, raw, steps))
    assert body["claims"] == []
    row = EgressLog.objects.get()
    assert row.user == corpus["alice"] and row.purpose == EgressLog.Purpose.QA
    assert row.chars_sent > 0


def test_ask_with_a_token_over_several_spaces_must_name_one(corpus, mcp_url):
    team = corpus["team"]
    personal = corpus["alice"].personal_space
    _, raw = token_create(user=corpus["alice"], name="two", space_ids=[team.pk, personal.pk])

    async def steps(client):
        unnamed = await client.call_tool("ask", {"question": "Who rotates the certs?"})
        named = await client.call_tool(
            "ask", {"question": "Who rotates the certs?", "space": team.pk}
        )
        return unnamed, named

    unnamed, named = http_call(mcp_url, raw, steps)
    assert "pass `space`" in refusal(unnamed)
    body = payload(named)
    assert body["space"] == team.pk
    cited = {s["document_title"] for c in body["claims"] for s in c["support"]}
    assert cited <= {"Team certs"}


def test_a_call_past_its_time_budget_is_refused_and_logged(corpus, mcp_url, settings):
    settings.LODE_REQUEST_BUDGET_SECONDS = 1e-9  # spent before the first statement
    _, raw = token_create(user=corpus["alice"], name="agent")

    async def steps(client):
        return await client.call_tool("search", {"query": "certbot", "mode": "lexical"})

    assert "time budget" in refusal(http_call(mcp_url, raw, steps))
    assert "time budget" in McpCall.objects.get(tool="search").refused


def test_http_answers_post_only(corpus, mcp_url):
    _, raw = token_create(user=corpus["alice"], name="agent")
    headers = {"Authorization": f"Bearer {raw}", "Accept": "application/json, text/event-stream"}
    for method in ("GET", "DELETE"):
        response = httpx.request(method, mcp_url, headers=headers, timeout=30)
        assert response.status_code == 405 and response.headers["Allow"] == "POST"
