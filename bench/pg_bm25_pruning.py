"""Benchmark: PostgreSQL BM25 with MaxScore pruning, beside exhaustive scoring and FTS5.

    .venv/bin/python bench/pg_bm25_pruning.py build [--pg-name lode_h_bm25] [--passages 200000]
    .venv/bin/python bench/pg_bm25_pruning.py measure [--pg-name lode_h_bm25] [--queries 300]

`build` loads SciFact for user `eval` into the (scratch) PostgreSQL database `--pg-name`,
scales it to >= `--passages` head passages the way bench/scale_latency.py does (perturbed
replicas written with the ORM; the BM25 statistics trigger off during the copy and lode's
`rebuild()` refilling the statistics after), then VACUUM ANALYZE. `measure` copies the head
passages' titles and texts into an SQLite FTS5 table in a temporary file (lode's tokenizer
and column weights), then per SciFact claim, interleaved so every leg sees the same load:

* `FTS5`: the FTS5 floor, `bm25()` over every match, best first, LIMIT;
* `PG exhaustive`: `postgresql.floor_search(parsed, pruned=False)`, every posting scored;
* `PG pruned`: `postgresql.floor_search(parsed)`, MaxScore;
* `PG leg`: `postgresql.search(parsed, audience=…)`, what the lexical leg runs;

p50 / p95 ms at limits 256 (the lexical leg's) and 10, and whether pruned and exhaustive
return the same list (ids, order and scores) for every query.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PG_SERVER, ROOT, SCIFACT, percentile

WARMUP = 10


def setup(pg_name: str) -> None:
    os.environ["DATABASE_URL"] = f"{PG_SERVER}/{pg_name}"
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()


def build(args: argparse.Namespace) -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.pg_name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{args.pg_name}"')
    setup(args.pg_name)
    from django.core.management import call_command
    from django.db import connection, transaction
    from scale_latency import replicate_bulk

    from retrieval.index.lexical import postgresql

    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    call_command("lode_load_beir", str(SCIFACT), user="eval", verbosity=0)
    print(f"SciFact loaded in {time.perf_counter() - started:.0f}s", file=sys.stderr)
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE retrieval_passage DISABLE TRIGGER retrieval_bm25_ai")
    try:
        replicate_bulk(args.passages)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE retrieval_passage ENABLE TRIGGER retrieval_bm25_ai")
    with transaction.atomic():
        postgresql.rebuild()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(f"built in {time.perf_counter() - started:.0f}s", file=sys.stderr)


def fts5_copy(path: Path) -> sqlite3.Connection:
    """The head passages' titles and texts in an FTS5 table with lode's tokenizer."""
    from django.db import connection

    from retrieval.index.lexical import sqlite

    lite = sqlite3.connect(path)
    lite.execute(
        f"CREATE VIRTUAL TABLE {sqlite.FTS_TABLE} USING fts5(title_text, text, "
        f"tokenize='{sqlite.TOKENIZER}')"
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, title_text, text FROM retrieval_passage WHERE is_head")
        while rows := cursor.fetchmany(10_000):
            lite.executemany(
                f"INSERT INTO {sqlite.FTS_TABLE}(rowid, title_text, text) VALUES (?, ?, ?)", rows
            )
    # Merged into one segment, as a long-lived index ends up after its automerges.
    lite.execute(f"INSERT INTO {sqlite.FTS_TABLE}({sqlite.FTS_TABLE}) VALUES ('optimize')")
    lite.commit()
    return lite


def measure(args: argparse.Namespace) -> None:
    setup(args.pg_name)
    from django.contrib.auth.models import User

    from retrieval.eligibility import audience_for
    from retrieval.index.lexical import postgresql, sqlite
    from retrieval.query import parse
    from retrieval.search.evaluation import load_queries

    queries = [parse(t) for t in load_queries(SCIFACT / "queries.jsonl").values()]
    queries = [q for q in queries if not q.is_empty][: args.queries]
    audience = audience_for(User.objects.get(username="eval").pk)
    with tempfile.TemporaryDirectory(prefix="lode-fts5-") as scratch:
        started = time.perf_counter()
        lite = fts5_copy(Path(scratch) / "fts5.sqlite3")
        print(f"FTS5 copy built in {time.perf_counter() - started:.0f}s", file=sys.stderr)
        fts_sql = (
            f"SELECT rowid, -bm25({sqlite.FTS_TABLE}, ?, ?) AS score FROM {sqlite.FTS_TABLE} "
            f"WHERE {sqlite.FTS_TABLE} MATCH ? ORDER BY bm25({sqlite.FTS_TABLE}, ?, ?) LIMIT ?"
        )
        weights = [sqlite.TITLE_WEIGHT, sqlite.TEXT_WEIGHT]
        passages = lite.execute(f"SELECT count(*) FROM {sqlite.FTS_TABLE}").fetchone()[0]
        for limit in (256, 10):
            legs = {
                "FTS5 floor": lambda q, n=limit: lite.execute(
                    fts_sql, [*weights, sqlite.match_expression(q), *weights, n]
                ).fetchall(),
                "PG exhaustive floor": lambda q, n=limit: postgresql.floor_search(
                    q, limit=n, pruned=False
                ),
                "PG pruned floor": lambda q, n=limit: postgresql.floor_search(q, limit=n),
            }
            if limit == 256:
                legs["PG leg (search)"] = lambda q: [
                    (h.passage_id, h.score) for h in postgresql.search(q, audience=audience)
                ]
            for q in queries[:WARMUP]:
                for leg in legs.values():
                    leg(q)
            times: dict[str, list[float]] = {name: [] for name in legs}
            differ = 0
            for q in queries:
                found = {}
                for name, leg in legs.items():
                    started = time.perf_counter()
                    found[name] = leg(q)
                    times[name].append((time.perf_counter() - started) * 1000)
                differ += found["PG pruned floor"] != found["PG exhaustive floor"]
            print(
                f"\n{passages:,} head passages, {len(queries)} SciFact claims, limit {limit}, "
                f"load {os.getloadavg()[0]:.1f}"
            )
            print(f"{'leg':<22} {'p50 ms':>8} {'p95 ms':>8}")
            for name, values in times.items():
                print(f"{name:<22} {percentile(values, 50):>8.1f} {percentile(values, 95):>8.1f}")
            print(f"pruned list != exhaustive list: {differ} of {len(queries)} queries")
        lite.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("phase", choices=["build", "measure"])
    parser.add_argument("--pg-name", default="lode_h_bm25")
    parser.add_argument("--passages", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    if args.phase == "build":
        build(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
