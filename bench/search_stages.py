"""Where a search's time goes, stage by stage, on whichever database the environment names.

    LODE_DATA_DIR=DIR [DATABASE_URL=postgres://…] .venv/bin/python bench/search_stages.py \
        [--mode lexical] [--queries 300] [--page]

The data folder (and database) must hold SciFact for user `eval` (`manage.py lode_load_beir
../shared/data/scifact`; semantic and hybrid modes also `manage.py lode_embed_pending`). It
runs the first `--queries` SciFact train claims (after 30 for warm-up) through
`retrieval.search.pipeline.search()` as `lode_eval` does (every hit, no highlighting; with
`--page`, as the search page does: its page size, highlighted) and times the whole call and
its stages by wrapping them: the lexical leg, the dense leg, the candidates' canonical rows,
fusion, the rerank, loading the returned hits (`in_bulk`), graph expansion and highlighting.
Run it once per database, back to back, to see which stage makes the difference between
them. Prints p50 / p95 / mean in ms per stage.
"""

from __future__ import annotations

import argparse
import csv
import functools
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
WARMUP = 30


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", default="lexical")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--page", action="store_true", help="the page's size, highlighted")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.db.models.query import QuerySet

    from retrieval.search import pipeline
    from retrieval.search.evaluation import eval_modes

    timings: dict[str, list[float]] = defaultdict(list)

    def timed(owner: Any, name: str, label: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                timings[label].append((time.perf_counter() - started) * 1000)

        setattr(owner, name, wrapper)

    timed(pipeline, "_lexical_leg", "lexical leg")
    timed(pipeline, "_dense_leg", "dense leg")
    timed(pipeline, "_canonical_rows", "canonical rows")
    timed(pipeline, "fuse", "fusion")
    timed(pipeline, "_rerank", "rerank")
    timed(pipeline, "highlight_hits", "highlighting")
    timed(QuerySet, "in_bulk", "hits loaded (in_bulk)")
    timed(pipeline, "expand", "graph expansion")
    timed(pipeline, "search", "search (whole)")

    train = {row[0] for row in csv.reader((SCIFACT / "qrels" / "train.tsv").open(), delimiter="\t")}
    with (SCIFACT / "queries.jsonl").open() as handle:
        queries = [json.loads(line) for line in handle]
    texts = [q["text"] for q in queries if q["_id"] in train][: args.queries + WARMUP]
    user = get_user_model().objects.get(username="eval")
    search_mode, rerank = eval_modes()[args.mode]
    for i, text in enumerate(texts):
        if i == WARMUP:
            timings.clear()
        pipeline.search(
            user=user,
            query=text,
            mode=search_mode,
            rerank=rerank,
            limit=pipeline.DEFAULT_PAGE_SIZE if args.page else pipeline.MAX_LIMIT,
            highlight=args.page,
        )
    shape = "the page's size, highlighted" if args.page else "every hit, no highlighting"
    print(f"{connection.vendor}, mode {args.mode}, {len(texts) - WARMUP} queries, {shape}")
    print(f"{'stage':24s} {'calls':>6s} {'p50':>7s} {'p95':>7s} {'mean':>7s}")
    for label, values in timings.items():
        print(
            f"{label:24s} {len(values):6d} {percentile(values, 50):7.1f} "
            f"{percentile(values, 95):7.1f} {sum(values) / len(values):7.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
