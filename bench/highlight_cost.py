"""Cost of highlight segments per returned hit on the SciFact corpus.

    .venv/bin/python bench/highlight_cost.py [--db sqlite|postgres|both] [--queries 300]
    .venv/bin/python bench/highlight_cost.py --db sqlite --data-dir var/fit   # reuse a folder

For each backend, a child process with its own database: SQLite in a temporary data folder
(or `--data-dir`, reused and loaded only if SciFact is not there yet), PostgreSQL in the
scratch database `lode_bench_highlight` (dropped and recreated, dropped at the end). The
child migrates, loads SciFact with `manage.py lode_load_beir` unless it is already loaded,
then runs the SciFact queries through `search()` in lexical mode (page size 20,
`highlight=False`) and times, per query, on the hits that search returned:

* `index`: `highlight_hits` (FTS5 `highlight()` or `ts_headline` for every hit in one
  statement with per-passage markers, strict parse, concatenation check, evidence anchor)
  plus each hit's code-point/UTF-16 spans (`Hit.highlights`, what the API returns);
* `python`: the path semantic-only hits take — `term_segments` (the query's terms found in
  Python with the index's tokenizer rules) and `evidence_anchor` on the same hits.

Each query's time is divided by its number of hits; the script prints the median and p95
of those µs-per-hit figures, the index step's share of the search time (search without
highlights plus that step), any fallbacks (engine output that failed the strict parse) and
the load average (the timings are wall clock), and writes bench/out/highlight_cost.json.

Hostile passages:

    .venv/bin/python bench/highlight_cost.py --hostile [--db sqlite|postgres|both] \
        [--matches 10000,40000,80000,160000]

For each N, in a fresh database: a note `"|x" * N` stored as ONE passage (chunked with
`LODE_CHUNK_MAX_CHARS` raised out of the way, as every note was before the character
bound), and the `highlight_hits` step timed for the query `x` (N matches in one passage;
the engine's cost grows with N²); then the same body saved under the default bounds and a
whole lexical `search()` (page size 20, highlights on) timed. Prints seconds, marked
segments and `highlights_truncated`; writes bench/out/highlight_hostile.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BACKENDS, ROOT, SCIFACT, fresh_environment, percentile

OUT = ROOT / "bench" / "out"
PG_NAME = "lode_bench_highlight"
WARMUP_QUERIES = 10


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def ensure_loaded() -> int:
    """Migrate and load SciFact for user `eval` unless it is there already; head passages."""
    from django.core.management import call_command

    from notes.management.commands.lode_import_markdown import DEFAULT_USER
    from notes.models import Document
    from retrieval.models import Passage

    call_command("migrate", verbosity=0)
    with (SCIFACT / "corpus.jsonl").open(encoding="utf-8") as handle:
        expected = sum(1 for line in handle if line.strip())
    loaded = Document.objects.filter(
        owner__username=DEFAULT_USER, external_key__startswith="beir:"
    ).count()
    if loaded < expected:
        started = time.perf_counter()
        call_command("lode_load_beir", str(SCIFACT), no_progress=True, verbosity=0)
        print(f"  loaded SciFact in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return Passage.objects.filter(is_head=True).count()


def measure(query_count: int) -> dict[str, object]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from notes.management.commands.lode_import_markdown import DEFAULT_USER
    from retrieval.highlight import evidence_anchor, term_segments
    from retrieval.search.evaluation import load_queries
    from retrieval.search.pipeline import highlight_hits, search

    head_passages = ensure_loaded()
    user = get_user_model().objects.get(username=DEFAULT_USER)
    queries = list(load_queries(SCIFACT / "queries.jsonl").values())
    for text in queries[:WARMUP_QUERIES]:
        search(user=user, query=text, mode="lexical", rerank="off")
    queries = queries[WARMUP_QUERIES : WARMUP_QUERIES + query_count]

    fallbacks = _Count()
    logging.getLogger("lode.highlight").addHandler(fallbacks)
    index_us: list[float] = []
    python_us: list[float] = []
    shares: list[float] = []
    hits_total = highlighted_hits = 0
    for text in queries:
        result = search(user=user, query=text, mode="lexical", rerank="off", highlight=False)
        hits = result.hits
        if result.error or not hits:
            continue
        started = time.perf_counter()
        highlight_hits(result.parsed, hits)
        for hit in hits:
            hit.highlights  # noqa: B018 - what the API serialises
        index = time.perf_counter() - started
        index_us.append(index * 1e6 / len(hits))
        shares.append(index * 1000 / (result.elapsed_ms + index * 1000))
        hits_total += len(hits)
        highlighted_hits += sum(1 for h in hits if h.anchor is not None)

        groups = [*result.parsed.terms, *result.parsed.phrases]
        started = time.perf_counter()
        for hit in hits:
            p = hit.passage
            segments = term_segments(p.text, groups)
            evidence_anchor(
                segments, text=p.text, passage_start=p.start, passage_start_line=p.start_line
            )
        python_us.append((time.perf_counter() - started) * 1e6 / len(hits))

    def summary(values: list[float], digits: int = 1) -> dict[str, float]:
        return {
            "median": round(percentile(values, 50), digits),
            "p95": round(percentile(values, 95), digits),
        }

    return {
        "vendor": connection.vendor,
        "head_passages": head_passages,
        "queries": len(index_us),
        "hits": hits_total,
        "hits_with_highlights": highlighted_hits,
        "fallbacks": fallbacks.count,
        "index_us_per_hit": summary(index_us),
        "python_us_per_hit": summary(python_us),
        "share_of_search_time": summary(shares, 3),
        # Timings are wall clock: on a shared machine they scale with the load.
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def measure_hostile(match_counts: list[int]) -> dict[str, object]:
    """Time highlighting one passage of N matches, and a search over the same note chunked
    under the current bounds (see the module docstring)."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from notes.services import note_create
    from retrieval.models import Passage
    from retrieval.search.pipeline import highlight_hits, search

    call_command("migrate", verbosity=0)
    default_max_chars = getattr(settings, "LODE_CHUNK_MAX_CHARS", None)
    rows = []
    for n in match_counts:
        body = "|x" * n
        # One passage of n matches: a user of its own, so only this note matches.
        settings.LODE_CHUNK_MAX_CHARS = 10 * len(body)
        user = get_user_model().objects.create_user(f"one{n}")
        note_create(owner=user, title="Wide table", body=body)
        result = search(user=user, query="x", mode="lexical", rerank="off", highlight=False)
        started = time.perf_counter()
        highlight_hits(result.parsed, result.hits)
        for hit in result.hits:
            hit.highlights  # noqa: B018 - what the API serialises
        one_passage = time.perf_counter() - started
        (hit,) = result.hits
        marked = sum(1 for s in hit.segments if s.highlighted)
        # The same body under the default bounds (before the character bound: one passage).
        settings.LODE_CHUNK_MAX_CHARS = default_max_chars
        user = get_user_model().objects.create_user(f"bounded{n}")
        document = note_create(owner=user, title="Wide table", body=body)
        passages = list(
            Passage.objects.filter(document=document, is_head=True).values_list("text", flat=True)
        )
        started = time.perf_counter()
        searched = search(user=user, query="x", mode="lexical", rerank="off")
        search_seconds = time.perf_counter() - started
        rows.append(
            {
                "matches": n,
                "one_passage_highlight_s": round(one_passage, 4),
                "one_passage_marked": marked,
                "one_passage_highlighted_by": hit.highlighted_by,
                "one_passage_truncated": getattr(hit, "highlights_truncated", None),
                "bounded_passages": len(passages),
                "bounded_longest": max(len(t) for t in passages),
                "bounded_search_s": round(search_seconds, 4),
                "bounded_hits": len(searched.hits),
                "bounded_marked": sum(
                    1 for h in searched.hits for s in h.segments if s.highlighted
                ),
            }
        )
        print(f"  {connection.vendor} {n}: {rows[-1]}", file=sys.stderr)
    return {
        "vendor": connection.vendor,
        "rows": rows,
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def run_child(
    env: dict[str, str], query_count: int, hostile: list[int] | None = None
) -> dict[str, object]:
    command = [sys.executable, __file__, "--phase", "measure", "--queries", str(query_count)]
    if hostile:
        command = [
            sys.executable, __file__, "--phase", "hostile",
            "--matches", ",".join(str(n) for n in hostile),
        ]  # fmt: skip
    env = dict(env, DJANGO_SETTINGS_MODULE="lode_site.settings")
    done = subprocess.run(command, cwd=ROOT, env=env, check=False, capture_output=True, text=True)
    sys.stderr.write(done.stderr[-3000:])
    if done.returncode:
        raise SystemExit(f"measuring failed ({done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_hostile(db: str, match_counts: list[int]) -> dict[str, object]:
    with fresh_environment(db, pg_name=PG_NAME + "_hostile") as env:
        return run_child(env, 0, hostile=match_counts)


def print_hostile(results: dict[str, dict[str, object]]) -> None:
    print("one passage of N matches of `x`: the highlight step; the same note chunked now: a")
    print("whole lexical search (page size 20, highlights on). Seconds, wall clock.")
    print(
        f"{'db':<9} {'matches':>8} {'highlight s':>11} {'marked':>7} {'by':>12} {'trunc':>5} "
        f"{'passages':>8} {'longest':>8} {'search s':>8} {'marked':>7}"
    )
    for db, r in results.items():
        for row in r["rows"]:
            print(
                f"{db:<9} {row['matches']:>8} {row['one_passage_highlight_s']:>11.3f} "
                f"{row['one_passage_marked']:>7} {row['one_passage_highlighted_by']:>12} "
                f"{row['one_passage_truncated']!s:>5} {row['bounded_passages']:>8} "
                f"{row['bounded_longest']:>8} {row['bounded_search_s']:>8.3f} "
                f"{row['bounded_marked']:>7}"
            )
        print(f"{db:<9} load average (1 min) {r['load_average_1min']}")


def bench(db: str, data_dir: str | None, query_count: int) -> dict[str, object]:
    if db == "sqlite" and data_dir:
        folder = Path(data_dir).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        env.update(LODE_DATA_DIR=str(folder), OPENBLAS_NUM_THREADS="1")
        return run_child(env, query_count)
    with fresh_environment(db, pg_name=PG_NAME) as env:
        return run_child(env, query_count)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=(*BACKENDS, "both"), default="both")
    parser.add_argument("--data-dir", help="SQLite only: a data folder to reuse (loaded once)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--hostile", action="store_true", help="one passage of N matches")
    parser.add_argument("--matches", default="10000,40000,80000,160000", help="with --hostile")
    parser.add_argument(
        "--phase", choices=["measure", "hostile"], default=None, help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    match_counts = [int(n) for n in args.matches.split(",") if n.strip()]
    if args.phase:  # the child: LODE_DATA_DIR / DATABASE_URL already point at its database
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        if args.phase == "hostile":
            print(json.dumps(measure_hostile(match_counts)))
        else:
            print(json.dumps(measure(args.queries)))
        return 0

    backends = BACKENDS if args.db == "both" else (args.db,)
    if args.hostile:
        hostile = {db: bench_hostile(db, match_counts) for db in backends}
        print_hostile(hostile)
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "highlight_hostile.json").write_text(json.dumps(hostile, indent=2) + "\n")
        return 0
    results = {db: bench(db, args.data_dir, args.queries) for db in backends}
    print("highlight segments per returned hit (lexical search, page size 20), µs")
    print(
        f"{'db':<9} {'passages':>8} {'queries':>7} {'hits':>5} {'marked':>6} {'fallbk':>6} "
        f"{'index med':>9} {'p95':>7} {'python med':>10} {'p95':>7} {'share med':>9} {'load':>5}"
    )
    for db, r in results.items():
        print(
            f"{db:<9} {r['head_passages']:>8} {r['queries']:>7} {r['hits']:>5} "
            f"{r['hits_with_highlights']:>6} {r['fallbacks']:>6} "
            f"{r['index_us_per_hit']['median']:>9.0f} {r['index_us_per_hit']['p95']:>7.0f} "
            f"{r['python_us_per_hit']['median']:>10.0f} {r['python_us_per_hit']['p95']:>7.0f} "
            f"{r['share_of_search_time']['median']:>9.1%} {r['load_average_1min']:>5.1f}"
        )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "highlight_cost.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
