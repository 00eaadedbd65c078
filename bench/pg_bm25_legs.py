"""Benchmark: the PostgreSQL BM25 lexical leg next to SQLite's FTS5 bm25 and the old ts_rank_cd.

    DATABASE_URL=postgres://…/DB .venv/bin/python bench/pg_bm25_legs.py --sqlite-dir DIR

Both databases must hold the SciFact corpus for user `eval` (`lode_load_beir`, the same load
order, so passage ids and texts agree). Django runs on PostgreSQL; SQLite is read through the
sqlite3 module with the FTS5 leg's own SQL (SciFact queries carry no filters).

1. Latency, interleaved per query so every leg sees the same load: SQLite FTS5 `bm25()`,
   PostgreSQL `ts_rank_cd` (the lexical leg's earlier SQL) and PostgreSQL BM25
   (`postgresql.search`), p50/p95 over the train queries after a warm-up.
2. Whether the learned reranker's lexical features mean the same on both: its lexical
   features are per-query normalisations of the raw score (`lexical_norm` min–max,
   `lexical_z`, `lexical_rr`, `doc_lexical_max`; retrieval/search/rerank.py), so it is enough
   that the raw scores agree. Over passages both legs return for a query: the PostgreSQL /
   SQLite score ratio, the Spearman correlation per query, the mean |Δ lexical_norm|, and
   the top-10 overlap.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, SCIFACT

WARMUP = 50
LIMIT = 256
# The lexical leg's earlier SQL (ts_rank_cd), for the comparison.
TS_RANK_CD_SQL = (
    "WITH q AS (SELECT {tsquery} AS query) "
    "SELECT p.id, ts_rank_cd('{{0.1, 0.2, 0.33, 1.0}}', p.search_vector, q.query) AS score "
    "FROM retrieval_passage p JOIN notes_document d ON d.id = p.document_id, q "
    "WHERE p.is_head AND p.search_vector @@ q.query AND d.owner_id = %s "
    "AND d.deleted_at IS NULL ORDER BY score DESC, p.id LIMIT %s"
)


def ranks(values: list[float]) -> list[int]:
    order = sorted(range(len(values)), key=values.__getitem__)
    result = [0] * len(values)
    for rank, index in enumerate(order):
        result[index] = rank
    return result


def spearman(x: list[float], y: list[float]) -> float | None:
    if len(x) < 3:
        return None
    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return num / den if den else None


def minmax(scores: dict[int, float]) -> dict[int, float]:
    low, high = min(scores.values()), max(scores.values())
    return {k: (v - low) / (high - low) if high > low else 0.0 for k, v in scores.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sqlite-dir", required=True, help="LODE_DATA_DIR of the SQLite copy")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("set DATABASE_URL to the PostgreSQL database holding SciFact")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.db import connection

    from retrieval.eligibility import audience_for
    from retrieval.index.lexical import postgresql, sqlite
    from retrieval.query import ParsedQuery, parse
    from retrieval.search import evaluation
    from retrieval.search.evaluation import percentile

    qrels = evaluation.load_qrels(SCIFACT / "qrels" / "train.tsv")
    texts = evaluation.load_queries(SCIFACT / "queries.jsonl")
    queries = [parse(t) for q, t in texts.items() if q in qrels]
    owner = User.objects.get(username="eval").pk
    # The raw comparison legs filter on the owner: the eval user's documents all live in
    # their personal space, so that is the same set the space-scoped leg searches.
    audience = audience_for(owner)
    lite = sqlite3.connect(Path(args.sqlite_dir) / "lode.sqlite3")
    lite_owner = lite.execute("SELECT id FROM auth_user WHERE username = 'eval'").fetchone()[0]
    fts = sqlite.FTS_TABLE
    lite_sql = (
        f"SELECT p.id, -bm25({fts}, ?, ?) AS score FROM {fts} "
        f"JOIN retrieval_passage p ON p.id = {fts}.rowid "
        "JOIN notes_document d ON d.id = p.document_id "
        f"WHERE {fts} MATCH ? AND p.is_head AND d.owner_id = ? AND d.deleted_at IS NULL "
        "ORDER BY score DESC, p.id LIMIT ?"
    )

    def sqlite_leg(q: ParsedQuery) -> list[tuple[int, float]]:
        params = [sqlite.TITLE_WEIGHT, sqlite.TEXT_WEIGHT, sqlite.match_expression(q)]
        return lite.execute(lite_sql, [*params, lite_owner, LIMIT]).fetchall()

    def ts_rank_cd_leg(q: ParsedQuery) -> list[tuple[int, float]]:
        tsquery, params = postgresql.tsquery_sql(q)
        with connection.cursor() as cursor:
            cursor.execute(TS_RANK_CD_SQL.format(tsquery=tsquery), [*params, owner, LIMIT])
            return cursor.fetchall()

    def bm25_leg(q: ParsedQuery) -> list[tuple[int, float]]:
        return [(h.passage_id, h.score) for h in postgresql.search(q, audience=audience)]

    legs = {
        "SQLite FTS5 bm25": sqlite_leg,
        "PostgreSQL ts_rank_cd (before)": ts_rank_cd_leg,
        "PostgreSQL BM25": bm25_leg,
    }
    for q in queries[:WARMUP]:
        for leg in legs.values():
            leg(q)
    times: dict[str, list[float]] = {name: [] for name in legs}
    found: dict[str, list[list[tuple[int, float]]]] = {name: [] for name in legs}
    for q in queries:
        for name, leg in legs.items():
            started = time.perf_counter()
            rows = leg(q)
            times[name].append((time.perf_counter() - started) * 1000)
            found[name].append(rows)
    print(f"SciFact train, {len(queries)} queries, lexical leg only (limit {LIMIT})")
    print(f"{'leg':<34} {'p50 ms':>8} {'p95 ms':>8}")
    for name, values in times.items():
        print(f"{name:<34} {percentile(values, 50):>8.1f} {percentile(values, 95):>8.1f}")

    # Passage ids agree between the two loads (same corpus, same order): compare directly.
    ratios: list[float] = []
    correlations: list[float] = []
    norm_diffs: list[float] = []
    overlaps: list[float] = []
    for lite_rows, pg_rows in zip(
        found["SQLite FTS5 bm25"], found["PostgreSQL BM25"], strict=True
    ):
        a, b = dict(lite_rows), dict(pg_rows)
        if not a or not b:
            continue
        top_a, top_b = {p for p, _ in lite_rows[:10]}, {p for p, _ in pg_rows[:10]}
        overlaps.append(len(top_a & top_b) / max(1, len(top_a)))
        common = sorted(set(a) & set(b))
        ratios.extend(b[p] / a[p] for p in common if a[p] > 0)
        rho = spearman([a[p] for p in common], [b[p] for p in common])
        if rho is not None:
            correlations.append(rho)
        na, nb = minmax(a), minmax(b)
        norm_diffs.extend(abs(na[p] - nb[p]) for p in common)
    ratios.sort()
    print("\nlexical features, PostgreSQL BM25 against SQLite bm25 (passages both returned):")
    print(
        f"score ratio PG/SQLite: median {statistics.median(ratios):.3f}, "
        f"p5 {ratios[len(ratios) // 20]:.3f}, p95 {ratios[len(ratios) * 19 // 20]:.3f}"
    )
    print(
        f"Spearman per query: mean {statistics.mean(correlations):.3f}, "
        f"median {statistics.median(correlations):.3f}"
    )
    print(f"mean |delta lexical_norm|: {statistics.mean(norm_diffs):.3f}")
    print(f"top-10 overlap: {statistics.mean(overlaps):.3f}")


if __name__ == "__main__":
    main()
