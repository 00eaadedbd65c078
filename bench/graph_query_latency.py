"""Benchmark: the restricted graph query at ≥ 100,000 edges.

    .venv/bin/python bench/graph_query_latency.py [--db sqlite|postgres|both]
        [--notes 20100] [--links 5] [--queries 300] [--batch 1000]

For each backend, in a fresh database (`_common.fresh_environment`; PostgreSQL: the scratch
database `bench_graph_query`), in one process:

1. builds a synthetic linked corpus through lode's own bulk import path
   (`notes.services.notes_import`, which writes the same rows as `note_create`, indexes the
   passages and derives the edges with `refresh_edges` in the same transaction): `--notes`
   runbook-style notes, each with `--links` wiki links `[[Service N runbook]]` to notes
   written before it (the previous one, one a few back, one ~50 back and the rest
   pseudo-random, seeded), so every link resolves when it is written and the graph has both
   short local chains and long-range shortcuts. 20,100 notes × 5 links (the first few have
   fewer) = 100,485 real `links_to` edges (PostgreSQL: then ANALYZE);
2. times `graph_query.run()` — the executor: one REPEATABLE READ / IMMEDIATE transaction,
   the generation read, the traversal from `resolved_edges`, the rows with basis and tier,
   and evidence hydration — for `--queries` seeded random queries of each shape:
   * `neighbours out` (links_to) and `neighbours in` (links_to) of a random note;
   * `path` from a random note to one older (half 1–200 notes back, half 1–4000; max_hops
     4, declared kinds), following links either way (`path`, the default) and only along
     their arrows (`path_out`), on the same pairs; found and not-found paths are timed apart
     (a not-found one explores the whole 4-hop ball);
3. discovery is not in these figures (it is the search pipeline plus two indexed lookups;
   bench/search_latency.py measures search). Candidates are built for the chosen seeds.

Prints p50/p95 in ms and writes `bench/out/graph_query_<db>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BACKENDS, ROOT, fresh_environment, percentile

OUT = ROOT / "bench" / "out"
SEED = 20261216


def title(i: int) -> str:
    return f"Service {i:05d} runbook"


def targets(i: int, links: int, rng: random.Random) -> list[int]:
    """The notes note `i` links to: all older than it, distinct."""
    if i == 0:
        return []
    chosen: list[int] = []
    for candidate in (i - 1, i - 7, i - 50):
        if candidate >= 0 and candidate not in chosen and len(chosen) < links:
            chosen.append(candidate)
    while len(chosen) < min(links, i):
        candidate = rng.randrange(0, i)
        if candidate not in chosen:
            chosen.append(candidate)
    return chosen


def body(i: int, links: list[int]) -> str:
    lines = [
        f"# {title(i)}",
        "",
        f"Owner: team {i % 37}. This runbook restarts service {i} and checks its health.",
        "",
        "## Dependencies",
        "",
    ]
    lines += [f"- Before a restart, follow [[{title(j)}]] for the upstream." for j in links]
    lines += ["", "## Steps", "", f"Drain the node, deploy build {i * 7 % 1000}, then verify."]
    return "\n".join(lines) + "\n"


def build(notes: int, links: int, batch: int) -> dict:
    from django.contrib.auth import get_user_model

    from notes.services import NoteImport, notes_import
    from retrieval.models import Edge

    user = get_user_model().objects.create_user("bench", "bench@example.com", "pw")
    rng = random.Random(SEED)
    started = time.perf_counter()
    for start in range(0, notes, batch):
        rows = [
            NoteImport(
                external_key=f"bench/{i:05d}.md",
                title=title(i),
                body=body(i, targets(i, links, rng)),
            )
            for i in range(start, min(notes, start + batch))
        ]
        notes_import(owner=user, notes=rows, source_name="bench")
        done = min(notes, start + batch)
        if done % (batch * 5) == 0 or done == notes:
            print(f"  {done} notes, {time.perf_counter() - started:.0f} s", flush=True)
    elapsed = time.perf_counter() - started
    edges = Edge.objects.count()
    resolved = Edge.objects.filter(resolution=Edge.Resolution.RESOLVED).count()
    kinds = {k: Edge.objects.filter(kind=k).count() for k in ("links_to", "mentions")}
    return {
        "user_id": user.pk,
        "notes": notes,
        "edges": edges,
        "resolved_edges": resolved,
        "by_kind": kinds,
        "build_seconds": round(elapsed, 1),
    }


def neighbours(seed: int, direction: str) -> dict:
    query = {"op": "neighbours", "seed": seed, "direction": direction, "kind": "links_to"}
    return {"lookups": ["bench"], "query": query}


def measure(user_id: int, notes: int, queries: int) -> dict:
    from notes.models import Document
    from retrieval.eligibility import audience_for
    from retrieval.search.graph_query import Candidate, run, validate

    audience = audience_for(user_id)
    ids = dict(
        Document.objects.filter(external_key__startswith="bench/").values_list("external_key", "pk")
    )
    by_index = [ids[f"bench/{i:05d}.md"] for i in range(notes)]
    rng = random.Random(SEED + 1)

    def candidates(*document_ids: int) -> list[Candidate]:
        return [
            Candidate("bench", n, pk, "", "note", "title", "") for n, pk in enumerate(document_ids)
        ]

    def time_one(raw: dict, cands: list[Candidate]) -> tuple[float, object]:
        valid = validate(raw, cands)
        started = time.perf_counter()
        result = run(audience, valid, cands)
        return (time.perf_counter() - started) * 1000, result

    for _ in range(20):  # warm-up: connection, caches, the first-query costs
        seed = by_index[rng.randrange(1, notes)]
        time_one(neighbours(seed, "out"), candidates(seed))
    figures: dict[str, dict] = {}
    for direction in ("out", "in"):
        times, rows = [], []
        for _ in range(queries):
            seed = by_index[rng.randrange(1, notes)]
            ms, result = time_one(neighbours(seed, direction), candidates(seed))
            times.append(ms)
            rows.append(len(result.rows))
        figures[f"neighbours_{direction}"] = {
            "p50_ms": round(percentile(times, 50), 2),
            "p95_ms": round(percentile(times, 95), 2),
            "mean_rows": round(sum(rows) / len(rows), 1),
        }
    # The same pairs for both ways of following links: "both" (the default) may go against an
    # edge's arrow, so its ball is larger; "out" only along the arrows.
    pairs = []
    for _ in range(queries):
        start = rng.randrange(1, notes)
        # Half near (mostly found within 4 hops), half far (mostly not: the whole ball).
        goal = max(0, start - rng.randint(1, 200 if rng.random() < 0.5 else 4000))
        pairs.append((by_index[start], by_index[goal]))
    for follow, name in (("both", "path"), ("out", "path_out")):
        times, found, hops, found_times, not_found_times = [], 0, [], [], []
        for a, b in pairs:
            query = {"op": "path", "from": a, "to": b, "max_hops": 4, "follow": follow}
            ms, result = time_one({"lookups": ["a", "b"], "query": query}, candidates(a, b))
            times.append(ms)
            if result.rows:
                found += 1
                hops.append(len(result.rows))
                found_times.append(ms)
            else:
                not_found_times.append(ms)
        figures[name] = {
            "p50_ms": round(percentile(times, 50), 2),
            "p95_ms": round(percentile(times, 95), 2),
            "found": found,
            "queries": queries,
            "mean_hops_found": round(sum(hops) / len(hops), 2) if hops else None,
            "found_p50_ms": round(percentile(found_times, 50), 2) if found_times else None,
            "not_found_p50_ms": round(percentile(not_found_times, 50), 2)
            if not_found_times
            else None,
            "not_found_p95_ms": round(percentile(not_found_times, 95), 2)
            if not_found_times
            else None,
        }
    return figures


def run_backend(db: str, notes: int, links: int, queries: int, batch: int) -> dict:
    with fresh_environment(db, pg_name="bench_graph_query") as env:
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)
        print(f"[{db}] building {notes} notes × {links} links", flush=True)
        corpus = build(notes, links, batch)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        print(f"[{db}] {corpus['edges']} edges; timing {queries} queries per shape", flush=True)
        figures = measure(corpus["user_id"], notes, queries)
        result = {"db": db, "corpus": corpus, "queries": queries, "figures": figures}
        connection.close()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"graph_query_{db}.json").write_text(json.dumps(result, indent=2))
    return result


def show(result: dict) -> None:
    corpus = result["corpus"]
    print(
        f"\n{result['db']}: {corpus['notes']} notes, {corpus['edges']} edges "
        f"({corpus['resolved_edges']} resolved; {corpus['by_kind']}), "
        f"built in {corpus['build_seconds']} s"
    )
    for name, figure in result["figures"].items():
        extra = {k: v for k, v in figure.items() if not k.startswith("p")}
        print(
            f"  {name:15s} p50 {figure['p50_ms']:8.2f} ms  p95 {figure['p95_ms']:8.2f} ms  {extra}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=(*BACKENDS, "both"), default="both")
    parser.add_argument("--notes", type=int, default=20_100)
    parser.add_argument("--links", type=int, default=5)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    if args.db == "both":
        # Django binds to one database per process: one child process per backend.
        for db in BACKENDS:
            cmd = [sys.executable, __file__, "--db", db, "--notes", str(args.notes)]
            cmd += ["--links", str(args.links), "--queries", str(args.queries)]
            cmd += ["--batch", str(args.batch)]
            subprocess.run(cmd, check=True)
        return
    show(run_backend(args.db, args.notes, args.links, args.queries, args.batch))


if __name__ == "__main__":
    main()
