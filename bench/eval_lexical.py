"""Benchmark: lexical search quality and latency on SciFact train, against the backend floor.

    .venv/bin/python bench/eval_lexical.py [--db sqlite|postgres|both] [--limit-queries N]

For each backend, in a fresh database (see `_common.fresh_environment`):

1. load the SciFact corpus (`lode_load_beir`), then warm caches with a few queries;
2. run `manage.py lode_eval --mode lexical` on the train queries/qrels: nDCG@10, Recall@100,
   MRR@10 and the latency of the `search()` service (parse, eligibility SQL, ORM hydration);
3. time the lexical leg alone (`backend.search`: joins and eligibility, no hydration);
4. time the FLOOR: the same parsed queries sent straight to the backend's `floor_search`
   (index only: no joins, no eligibility, no ORM), and print the service/floor ratio.

Reports go to stdout and `bench/out/eval_lexical_<db>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BACKENDS, ROOT, SCIFACT, fresh_environment

OUT = ROOT / "bench" / "out"
WARMUP_QUERIES = 100


def _timed(fn, *args, **kwargs) -> tuple[object, float]:
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, (time.perf_counter() - started) * 1000


def run(db: str, limit_queries: int | None) -> dict:
    """Everything for one backend, in this process (Django is set up for that database)."""
    with fresh_environment(db, pg_name="lode_bench_eval") as env:
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection, connections

        from notes.management.commands.lode_import_markdown import ensure_user
        from notes.models import Document
        from retrieval.eligibility import audience_for
        from retrieval.index import lexical
        from retrieval.models import Passage
        from retrieval.query import parse
        from retrieval.search import evaluation
        from retrieval.search.evaluation import ndcg_at_k, percentile
        from retrieval.search.pipeline import search

        queries_file = SCIFACT / "queries.jsonl"
        qrels_file = SCIFACT / "qrels" / "train.tsv"
        call_command("migrate", verbosity=0)
        call_command("lode_load_beir", str(SCIFACT), no_progress=True)
        if connection.vendor == "postgresql":
            # A just-loaded table has no planner statistics until autovacuum gets to it;
            # measure the steady state a running install would be in.
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")

        user = ensure_user("eval")
        audience = audience_for(user.pk)
        backend = lexical.backend()
        qrels = evaluation.load_qrels(qrels_file)
        queries = {q: t for q, t in evaluation.load_queries(queries_file).items() if q in qrels}
        if limit_queries:
            queries = dict(list(queries.items())[:limit_queries])
        parsed = {qid: parse(text) for qid, text in queries.items()}

        for qid, text in list(queries.items())[:WARMUP_QUERIES]:
            search(user=user, query=text, limit=lexical.LEXICAL_LIMIT)
            backend.floor_search(parsed[qid], limit=lexical.LEXICAL_LIMIT)

        OUT.mkdir(parents=True, exist_ok=True)
        report_file = OUT / f"eval_lexical_{db}.json"
        args = ["--corpus-dir", str(SCIFACT), "--queries", str(queries_file)]
        args += ["--qrels", str(qrels_file), "--mode", "lexical", "--json", str(report_file)]
        if limit_queries:
            args += ["--limit-queries", str(limit_queries)]
        call_command("lode_eval", *args, no_progress=True)
        service = json.loads(report_file.read_text())

        leg_ms: list[float] = []
        floor_ms: list[float] = []
        floor_runs: dict[str, list[int]] = {}
        for qid, query in parsed.items():
            if query.is_empty:
                continue
            _, ms = _timed(backend.search, query, audience=audience, limit=lexical.LEXICAL_LIMIT)
            leg_ms.append(ms)
            rows, ms = _timed(backend.floor_search, query, limit=lexical.LEXICAL_LIMIT)
            floor_ms.append(ms)
            floor_runs[qid] = [row[0] for row in rows]

        # Outside the timings: map floor passages to BEIR ids to score the floor's ranking.
        key_of = dict(
            Passage.objects.filter(is_head=True).values_list("id", "document__external_key")
        )
        floor_ndcg = [
            ndcg_at_k(
                list(dict.fromkeys(key_of[p].removeprefix("beir:") for p in floor_runs[qid])),
                qrels[qid],
                10,
            )
            for qid in floor_runs
        ]
        report = {
            "db": db,
            "documents": Document.objects.filter(owner=user).count(),
            "passages": Passage.objects.filter(is_head=True).count(),
            "service": service,
            "lexical_leg_ms": {"p50": percentile(leg_ms, 50), "p95": percentile(leg_ms, 95)},
            "floor_ms": {"p50": percentile(floor_ms, 50), "p95": percentile(floor_ms, 95)},
            "floor_ndcg@10": sum(floor_ndcg) / len(queries),
        }
        report["ratio_service_floor"] = {
            p: service["latency_ms"][p] / report["floor_ms"][p] for p in ("p50", "p95")
        }
        report_file.write_text(json.dumps(report, indent=2) + "\n")
        connections.close_all()  # so the scratch PostgreSQL database can be dropped
    return report


def show(r: dict) -> None:
    s = r["service"]
    print(
        f"\n== {r['db']}: SciFact train, {s['queries']} queries, mode {s['mode']}, "
        f"{r['documents']} documents / {r['passages']} passages"
    )
    print(
        f"nDCG@10 {s['ndcg@10']:.4f}   Recall@100 {s['recall@100']:.4f}   "
        f"MRR@10 {s['mrr@10']:.4f}   (floor ranking nDCG@10 {r['floor_ndcg@10']:.4f})"
    )
    print(f"{'latency ms':<40} {'p50':>8} {'p95':>8}")
    rows = (
        ("search() service (lode_eval)", s["latency_ms"]),
        ("lexical leg: backend.search (no ORM)", r["lexical_leg_ms"]),
        ("floor: backend.floor_search", r["floor_ms"]),
    )
    for name, lat in rows:
        print(f"{name:<40} {lat['p50']:>8.2f} {lat['p95']:>8.2f}")
    ratio = r["ratio_service_floor"]
    print(f"{'ratio service / floor':<40} {ratio['p50']:>7.2f}x {ratio['p95']:>7.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=(*BACKENDS, "both"), default="both")
    parser.add_argument("--limit-queries", type=int, default=None)
    args = parser.parse_args()
    if args.db == "both":
        # Django binds to one database per process: one child process per backend.
        for db in BACKENDS:
            cmd = [sys.executable, __file__, "--db", db]
            if args.limit_queries:
                cmd += ["--limit-queries", str(args.limit_queries)]
            subprocess.run(cmd, check=True)
        return
    show(run(args.db, args.limit_queries))


if __name__ == "__main__":
    main()
