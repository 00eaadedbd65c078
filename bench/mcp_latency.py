"""MCP `search` and `ask` latency beside the JSON API's, and bytes per search result.

    .venv/bin/python bench/mcp_latency.py [--notes 100] [--queries 40] [--asks 8]
        [--db sqlite|postgres] [--mode hybrid|lexical]

A fresh lode (SQLite in a temporary data folder, or the scratch PostgreSQL database
`lode_bench_mcp`, dropped afterwards) with the first `--notes` SciFact abstracts as notes of
the first account, embedded, served by gunicorn as `bootstrap run` serves it. For the same
SciFact test queries in turn, one client on the same machine calls `GET /api/search/`
(bearer token) and the MCP `search` tool over Streamable HTTP at `/mcp` (the SDK's client,
one connection reused), each with `limit` 8, alternating so both see the same warm server;
then `--asks` questions through `POST /api/ask` and the MCP `ask` tool, and for each of them
one scripted agent turn over MCP (search → open the first hit → ask). Printed: median and
p95 wall-clock milliseconds per call for each, and the bytes of the response body per search
hit (the API's JSON against the MCP tool result's JSON text). Wall-clock figures on a shared
machine: compare figures printed by one run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, fresh_environment, percentile
from throughput import PYTHON, free_port, manage, queries, wait_serving

sys.path.insert(0, str(ROOT))

from lode_site import bootstrap

PG_NAME = "lode_bench_mcp"
LIMIT = 8


def load(env: dict[str, str], notes: int) -> str:
    """Migrate, create the first account, load and embed `notes` abstracts; an API token."""
    from _common import SCIFACT

    manage(env, "migrate", "--noinput")
    manage(env, "collectstatic", "--noinput", "-v", "0")
    manage(env, "lode_first_user")
    manage(env, "lode_load_beir", str(SCIFACT), "--limit", str(notes), "--user", "lode",
           "--no-progress")  # fmt: skip
    manage(env, "lode_embed_pending", "--no-progress")
    return manage(env, "lode_token", "create", "lode", "bench").split()[0]


def measure(base: str, token: str, args) -> dict[str, list[float]]:
    import anyio
    import httpx
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    texts = queries()[: args.queries]
    questions = texts[: args.asks]
    headers = {"Authorization": f"Bearer {token}"}
    figures: dict[str, list[float]] = {
        "api search": [], "mcp search": [], "api ask": [], "mcp ask": [],
        "api bytes/hit": [], "mcp bytes/hit": [],
    }  # fmt: skip

    async def run() -> None:
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(600))
        transport = streamable_http_client(f"{base}/mcp", http_client=http)
        async with http, Client(transport) as client, httpx.AsyncClient(
            base_url=base, headers=headers, timeout=600
        ) as api:
            for text in texts[:3]:  # warm up: the models loaded in every worker
                await api.get("/api/search/", params={"q": text, "mode": args.mode})
                await client.call_tool("search", {"query": text, "mode": args.mode})
            for text in texts:
                started = time.perf_counter()
                response = await api.get(
                    "/api/search/", params={"q": text, "mode": args.mode, "limit": LIMIT}
                )
                figures["api search"].append((time.perf_counter() - started) * 1000)
                hits = len(response.json()["hits"])
                if hits:
                    figures["api bytes/hit"].append(len(response.content) / hits)
                started = time.perf_counter()
                result = await client.call_tool(
                    "search", {"query": text, "mode": args.mode, "limit": LIMIT}
                )
                figures["mcp search"].append((time.perf_counter() - started) * 1000)
                body = result.content[0].text
                hits = len(json.loads(body)["hits"])
                if hits:
                    figures["mcp bytes/hit"].append(len(body.encode()) / hits)
            for question in questions:
                started = time.perf_counter()
                await api.post("/api/ask", json={"question": question, "mode": args.mode})
                figures["api ask"].append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                await client.call_tool("ask", {"question": question, "mode": args.mode})
                figures["mcp ask"].append((time.perf_counter() - started) * 1000)
            for question in questions:
                await agent_session(client, question, args.mode, figures)

    anyio.run(run)
    return figures


async def agent_session(client, question: str, mode: str, figures: dict) -> None:
    """One scripted agent turn as a model would run it: `search`, `open` the first hit's
    evidence, then `ask`; the wall-clock milliseconds of each step and of the whole turn,
    and the bytes the agent read."""
    session_started = time.perf_counter()
    read = 0
    started = time.perf_counter()
    result = await client.call_tool("search", {"query": question, "mode": mode, "limit": LIMIT})
    figures.setdefault("agent search", []).append((time.perf_counter() - started) * 1000)
    body = result.content[0].text
    read += len(body.encode())
    hits = json.loads(body)["hits"]
    if hits:
        started = time.perf_counter()
        opened = await client.call_tool("open", {"evidence_url": hits[0]["evidence_url"]})
        figures.setdefault("agent open", []).append((time.perf_counter() - started) * 1000)
        read += len(opened.content[0].text.encode())
    started = time.perf_counter()
    answer = await client.call_tool("ask", {"question": question, "mode": mode})
    figures.setdefault("agent ask", []).append((time.perf_counter() - started) * 1000)
    read += len(answer.content[0].text.encode())
    figures.setdefault("agent turn", []).append((time.perf_counter() - session_started) * 1000)
    figures.setdefault("agent bytes", []).append(read)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=100)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--asks", type=int, default=8)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--mode", choices=("hybrid", "lexical"), default="hybrid")
    args = parser.parse_args()
    with fresh_environment(args.db, PG_NAME) as env:
        env.pop("DEBUG", None)
        env.pop("CHROMA_URL", None)
        token = load(env, args.notes)
        port = free_port()
        log = Path(env["LODE_DATA_DIR"]) / "gunicorn.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                bootstrap.web_server_command("127.0.0.1", port, debug=False),
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        try:
            wait_serving(port, process)
            figures = measure(f"http://127.0.0.1:{port}", token, args)
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    print(
        f"{args.notes} SciFact abstracts, {args.db}, mode {args.mode}, gunicorn "
        f"(lode_site/gunicorn_conf.py), limit {LIMIT}; python {PYTHON}"
    )
    for name, values in figures.items():
        if not values:
            print(f"{name:14} no samples")
            continue
        unit = "bytes" if "bytes" in name else "ms"
        print(
            f"{name:14} n={len(values):3}  p50 {percentile(values, 50):8.1f} {unit}  "
            f"p95 {percentile(values, 95):8.1f} {unit}"
        )


if __name__ == "__main__":
    main()
