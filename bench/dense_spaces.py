"""The dense leg for an audience that sees part of the documents: Chroma's space filter
against the unfiltered, deeper query checked on the database (`VectorStore.query`,
`UNFILTERED_SHARE`), next to the floor.

    .venv/bin/python bench/dense_spaces.py --data-dir DIR [--share 0.25] [--queries 100]

`--data-dir` holds SciFact loaded and embedded for user `eval` (a folder scaled by
`bench/search_latency.py --replicas`/`bench/pending_note.py --scaled-dir` gives ~56k
passages). The folder is copied (never written to). In the copy, every document whose id is
not a multiple of 1 / `--share` moves to one of three other users' personal spaces, and
the vectors are re-stamped (`sync.restamp_spaces`) so Chroma's metadata agrees. Then, per
SciFact train claim (its real query embedding), for user `eval`'s audience:

* `filtered`: `VectorStore.query(limit=256)` with the space clause in Chroma's `where`
  (`UNFILTERED_SHARE` set above 1);
* `unfiltered`: the same call as lode makes it (share >= `UNFILTERED_SHARE`: no `where`,
  fetched deeper, checked on the database);
* `floor`: a raw `collection.query` of 256 without a filter.

Prints p50/p95 ms, each ÷ floor, and how many of the filtered query's hits the unfiltered
one returns (both are approximate nearest-neighbour searches).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import percentile

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = Path(os.environ.get("LODE_BENCH_SCIFACT", ROOT.parent / "shared" / "data" / "scifact"))


def measure(share: float, query_count: int) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from notes.models import Document
    from retrieval.index import vectors
    from retrieval.index.embeddings import get_embedder
    from retrieval.index.sync import restamp_spaces
    from retrieval.search.evaluation import load_queries
    from spaces.models import personal_space_id

    users = get_user_model()
    owner = users.objects.get(username="eval")
    others = [users.objects.get_or_create(username=f"other{i}")[0] for i in range(3)]
    step = round(1 / share)
    ids = list(Document.objects.order_by("pk").values_list("pk", flat=True))
    moving = [pk for pk in ids if pk % step]
    for i, other in enumerate(others):
        part = moving[i::3]
        for start in range(0, len(part), 900):
            Document.objects.filter(pk__in=part[start : start + 900]).update(
                space_id=personal_space_id(other.pk), owner=other
            )
    started = time.perf_counter()
    restamped = restamp_spaces()
    print(
        f"moved {len(moving)} of {len(ids)} documents; re-stamped {restamped} vectors in "
        f"{time.perf_counter() - started:.0f} s"
    )
    spaces = [personal_space_id(owner.pk)]
    print(f"audience share {vectors.audience_share(spaces):.3f}")
    store, embedder = vectors.get_vector_store(), get_embedder()
    queries = list(load_queries(SCIFACT / "queries.jsonl").values())[: query_count + 10]
    timings: dict[str, list[float]] = {"filtered": [], "unfiltered": [], "floor": []}
    overlap: list[float] = []
    for i, text in enumerate(queries):
        vector = embedder.embed_query(text)
        vectors.UNFILTERED_SHARE = 2.0
        t0 = time.perf_counter()
        filtered = store.query(vector, space_ids=spaces, limit=256)
        t1 = time.perf_counter()
        vectors.UNFILTERED_SHARE = 0.2
        unfiltered = store.query(vector, space_ids=spaces, limit=256)
        t2 = time.perf_counter()
        with store._use("query", write=False, create=False) as collection:
            collection.query(query_embeddings=[vector], n_results=256, include=["distances"])
        t3 = time.perf_counter()
        if i < 10:
            continue  # warm-up
        timings["filtered"].append((t1 - t0) * 1000)
        timings["unfiltered"].append((t2 - t1) * 1000)
        timings["floor"].append((t3 - t2) * 1000)
        same = {h.passage_id for h in filtered} & {h.passage_id for h in unfiltered}
        overlap.append(len(same) / max(len(filtered), 1))
    floor = {q: percentile(timings["floor"], q) for q in (50, 95)}
    print(f"{'query':12s} {'p50':>8s} {'p95':>8s} {'÷ floor p50':>12s} {'÷ floor p95':>12s}")
    for name, values in timings.items():
        p50, p95 = percentile(values, 50), percentile(values, 95)
        print(f"{name:12s} {p50:8.1f} {p95:8.1f} {p50 / floor[50]:12.2f} {p95 / floor[95]:12.2f}")
    mean = sum(overlap) / len(overlap)
    print(f"hits of the filtered query the unfiltered one returns: mean {mean:.4f}, ", end="")
    print(f"min {min(overlap):.4f}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--share", type=float, default=0.25)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:  # the child, in the copy
        measure(args.share, args.queries)
        return 0
    with tempfile.TemporaryDirectory(prefix="lode-dense-spaces-") as scratch:
        copy = Path(scratch) / "data"
        shutil.copytree(args.data_dir, copy)
        env = dict(os.environ, LODE_DATA_DIR=str(copy), OPENBLAS_NUM_THREADS="1")
        env.pop("DATABASE_URL", None)
        command = [
            sys.executable,
            __file__,
            "--data-dir",
            str(copy),
            "--measure",
            "--share",
            str(args.share),
            "--queries",
            str(args.queries),
        ]
        return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
