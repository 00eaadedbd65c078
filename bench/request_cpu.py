"""CPU per search request, stage by stage: where the two cores go when lode serves searches.

    LODE_DATA_DIR=DIR [DATABASE_URL=postgres://…] .venv/bin/python bench/request_cpu.py \
        [--mode hybrid] [--queries 200] [--user eval] [--json FILE]

The data folder (and database) must hold SciFact for `--user` (`manage.py lode_load_beir
../shared/data/scifact`, then `manage.py lode_embed_pending`). The requests are the ones
`bench/throughput.py` sends — `GET /search?q=…&mode=…` signed in and `GET /api/search/?q=…`
with a bearer token, alternating, with SciFact's test queries in turn — made in this process
with Django's test client, one at a time, so every CPU second the process spends (onnxruntime's
inference threads included: `time.process_time()`) belongs to the request being timed. Each
stage is timed exclusively (a stage's own time, without the stages it calls), so the rows add
up to the whole request; `rest` is what no stage claims — middleware, sessions,
authentication, URL routing, the views' own glue.

Printed per endpoint: CPU ms and wall ms per request by stage (mean, and p50 / p95 of the
whole), and the response size. A search's CPU here is what a server process pays; under load
the load generator and context switches come on top (`bench/throughput.py`). The model
runs as the web server runs it (`LODE_EMBED_THREADS=1` unless set).
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import percentile

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = Path(os.environ.get("LODE_BENCH_SCIFACT", ROOT.parent / "shared" / "data" / "scifact"))
WARMUP = 20


class StageClock:
    """Exclusive CPU and wall time per stage: entering a stage pauses the one it runs in."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.wall: dict[str, float] = defaultdict(float)
        self._stack: list[list[Any]] = []  # [label, cpu at (re)start, wall at (re)start]

    def _charge_top(self, cpu: float, wall: float) -> None:
        if self._stack:
            top = self._stack[-1]
            self.cpu[top[0]] += cpu - top[1]
            self.wall[top[0]] += wall - top[2]

    def enter(self, label: str) -> None:
        cpu, wall = time.process_time(), time.perf_counter()
        self._charge_top(cpu, wall)
        self._stack.append([label, cpu, wall])

    def leave(self) -> None:
        cpu, wall = time.process_time(), time.perf_counter()
        self._charge_top(cpu, wall)
        self._stack.pop()
        if self._stack:
            self._stack[-1][1], self._stack[-1][2] = cpu, wall

    def wrap(self, owner: Any, name: str, label: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.enter(label)
            try:
                return original(*args, **kwargs)
            finally:
                self.leave()

        setattr(owner, name, wrapper)

    def take(self) -> tuple[dict[str, float], dict[str, float]]:
        cpu, wall = dict(self.cpu), dict(self.wall)
        self.cpu.clear()
        self.wall.clear()
        return cpu, wall


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--user", default="eval")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("LODE_EMBED_THREADS", "1")  # as gunicorn_conf.py sets for the web
    os.environ["ALLOWED_HOSTS"] = "testserver"
    import django

    django.setup()
    import ninja.operation
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.db.models.query import QuerySet
    from django.template.backends.django import Template
    from django.test import Client

    from retrieval.index import embeddings, vectors
    from retrieval.search import pipeline
    from retrieval.web import search_api, search_views

    clock = StageClock()
    clock.wrap(embeddings.Embedder, "embed_query", "query embedding")
    clock.wrap(pipeline, "_lexical_leg", "lexical leg")
    clock.wrap(pipeline, "_dense_leg", "dense leg (rest)")
    clock.wrap(vectors.VectorStore, "_nearest", "dense: Chroma query")
    clock.wrap(vectors, "live_passage_ids", "dense: live check")
    clock.wrap(vectors, "pending_note_count", "dense: pending note")
    clock.wrap(pipeline, "_canonical_rows", "canonical rows")
    clock.wrap(pipeline, "fuse", "fusion")
    clock.wrap(pipeline, "_rerank", "rerank")
    clock.wrap(pipeline, "highlight_hits", "highlighting")
    clock.wrap(QuerySet, "in_bulk", "hits loaded")
    clock.wrap(pipeline, "expand", "graph expansion")
    # The views call `search` by the name they imported.
    clock.wrap(search_views, "search", "search (rest)")
    clock.wrap(search_api, "search", "search (rest)")
    clock.wrap(search_views, "shown_hits", "page: readable hits")
    clock.wrap(Template, "render", "page: template")
    clock.wrap(search_api, "hit_out", "api: hit objects")
    clock.wrap(ninja.operation.Operation, "_result_to_response", "api: validate + JSON")
    clock.wrap(Client, "get", "rest")

    user = get_user_model().objects.get(username=args.user)
    out = io.StringIO()
    call_command("lode_token", "create", args.user, "request-cpu bench", stdout=out)
    token = out.getvalue().split()[0]
    client = Client()
    client.force_login(user)
    with (SCIFACT / "queries.jsonl").open() as handle:
        texts = [json.loads(line)["text"] for line in handle]
    texts = texts[: args.queries + WARMUP]

    kinds = ("page", "api")
    per_kind: dict[str, dict[str, list[float]]] = {
        k: {"cpu": [], "wall": [], "bytes": []} for k in kinds
    }
    stage_cpu: dict[str, dict[str, float]] = {k: defaultdict(float) for k in kinds}
    stage_wall: dict[str, dict[str, float]] = {k: defaultdict(float) for k in kinds}
    for i, text in enumerate(texts):
        for kind in kinds:
            if kind == "page":
                response = client.get("/search", {"q": text, "mode": args.mode})
            else:
                response = client.get(
                    "/api/search/",
                    {"q": text, "mode": args.mode},
                    headers={"Authorization": f"Bearer {token}"},
                )
            cpu, wall = clock.take()
            if response.status_code != 200:
                raise SystemExit(f"{kind} answered {response.status_code} for {text!r}")
            if i < WARMUP:
                continue
            per_kind[kind]["cpu"].append(sum(cpu.values()) * 1000)
            per_kind[kind]["wall"].append(sum(wall.values()) * 1000)
            per_kind[kind]["bytes"].append(len(response.content))
            for label, seconds in cpu.items():
                stage_cpu[kind][label] += seconds * 1000
            for label, seconds in wall.items():
                stage_wall[kind][label] += seconds * 1000

    count = len(texts) - WARMUP
    report: dict[str, Any] = {"vendor": connection.vendor, "mode": args.mode, "requests": count}
    print(f"{connection.vendor}, mode {args.mode}, {count} requests of each kind, one at a time")
    for kind in kinds:
        figures = per_kind[kind]
        print(
            f"\n{kind}: CPU p50 / p95 {percentile(figures['cpu'], 50):.1f} / "
            f"{percentile(figures['cpu'], 95):.1f} ms, wall p50 / p95 "
            f"{percentile(figures['wall'], 50):.1f} / {percentile(figures['wall'], 95):.1f} ms, "
            f"response {sum(figures['bytes']) / count / 1000:.1f} kB mean"
        )
        print(f"  {'stage (mean per request)':28s} {'CPU ms':>8s} {'wall ms':>8s} {'CPU %':>6s}")
        total = sum(stage_cpu[kind].values())
        rows = sorted(stage_cpu[kind].items(), key=lambda item: -item[1])
        for label, cpu_ms in rows:
            print(
                f"  {label:28s} {cpu_ms / count:8.2f} {stage_wall[kind][label] / count:8.2f} "
                f"{100 * cpu_ms / total:6.1f}"
            )
        wall_total = sum(stage_wall[kind].values())
        print(f"  {'whole request':28s} {total / count:8.2f} {wall_total / count:8.2f}")
        report[kind] = {
            "cpu_ms_p50": percentile(figures["cpu"], 50),
            "cpu_ms_p95": percentile(figures["cpu"], 95),
            "wall_ms_p50": percentile(figures["wall"], 50),
            "wall_ms_p95": percentile(figures["wall"], 95),
            "bytes_mean": sum(figures["bytes"]) / count,
            "cpu_ms_mean_by_stage": {label: ms / count for label, ms in rows},
        }
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
