"""Search latency with spaces: one user in 1 space and in 20, on SciFact.

    .venv/bin/python bench/space_latency.py --data-dir /work/scifact-data [--queries 200]

`--data-dir` must hold SciFact loaded and embedded for user `eval` (see bench/README.md).
It is copied to a temporary folder first (the copy is changed; the original never is), then
measured in three layouts, one child process each, in order:

* `single`: every document in eval's personal space — today's single-owner install, where
  the search sees every document and so leaves the space clause out of Chroma's `where`;
* `one_space`: 10% of the documents moved to another user's personal space, so eval's
  searches carry `{"space": {"$eq": …}}`;
* `twenty_spaces`: eval's 90% spread round-robin over eval's personal space and 19 shared
  spaces eval is a member of (the other user keeps its 10%), so searches carry
  `{"space": {"$in": [20 ids]}}`.

Moves are made as lode makes them (`Document.space`, then `sync.restamp_spaces()` re-stamps
the vectors' metadata). For each of the first `--queries` SciFact train queries it times
`search()` in hybrid mode with rerank off and learned, and the Chroma query alone (256
nearest, the same `where` the dense leg sends) next to the same query with no filter. Prints
p50/p95 (ms) and writes bench/out/space_latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import percentile

os.environ["OPENBLAS_NUM_THREADS"] = "1"
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SCIFACT = Path(os.environ.get("LODE_BENCH_SCIFACT", ROOT.parent / "shared" / "data" / "scifact"))
OUT = ROOT / "bench" / "out"
LAYOUTS = ("single", "one_space", "twenty_spaces")
SHARED_SPACES = 19


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()


def arrange(layout: str) -> dict[str, int]:
    """Put the documents where `layout` says (idempotent per layout on a fresh copy)."""
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from notes.models import Document
    from retrieval.index.sync import restamp_spaces
    from spaces.models import Membership, Role, Space, personal_space

    users = get_user_model().objects
    eval_user = users.get(username="eval")
    mine = personal_space(eval_user)
    ids = list(Document.objects.order_by("pk").values_list("pk", flat=True))
    with transaction.atomic():
        if layout in ("one_space", "twenty_spaces"):
            other, _ = users.get_or_create(username="bench-other")
            theirs = personal_space(other)
            moved = ids[::10]  # every tenth document leaves eval's spaces
            Document.objects.filter(pk__in=moved).update(space=theirs)
            ids = [pk for pk in ids if pk not in set(moved)]
        if layout == "twenty_spaces":
            spaces = [mine]
            for n in range(SHARED_SPACES):
                space = Space.objects.create(name=f"Bench {n + 1}", created_by=eval_user)
                Membership.objects.create(space=space, user=eval_user, role=Role.EDITOR)
                spaces.append(space)
            for i, space in enumerate(spaces):
                Document.objects.filter(pk__in=ids[i :: len(spaces)]).update(space=space)
    started = time.perf_counter()
    restamped = restamp_spaces()
    return {
        "restamped_vectors": restamped,
        "restamp_ms": round((time.perf_counter() - started) * 1000),
    }


def measure(layout: str, query_count: int) -> dict[str, object]:
    arranged = arrange(layout)
    from django.contrib.auth import get_user_model

    from retrieval.eligibility import audience_for
    from retrieval.index.embeddings import get_embedder
    from retrieval.index.vectors import eligibility_where, get_vector_store, sees_every_document
    from retrieval.search.evaluation import load_queries
    from retrieval.search.pipeline import search

    user = get_user_model().objects.get(username="eval")
    audience = audience_for(user.pk)
    queries = list(load_queries(SCIFACT / "queries.jsonl").values())[:query_count]
    embedder, store = get_embedder(), get_vector_store()
    search(user=user, query=queries[0])  # warm: model load, Chroma open, caches
    where = (
        None if sees_every_document(audience.space_ids) else eligibility_where(audience.space_ids)
    )
    timings: dict[str, list[float]] = {
        "hybrid": [],
        "hybrid+learned": [],
        "chroma_filtered": [],
        "chroma_unfiltered": [],
    }
    for text in queries:
        started = time.perf_counter()
        search(user=user, query=text, mode="hybrid", rerank="off")
        timings["hybrid"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        search(user=user, query=text, mode="hybrid", rerank="learned")
        timings["hybrid+learned"].append((time.perf_counter() - started) * 1000)
        vector = embedder.embed_query(text)
        with store._use("query", write=False, create=False) as collection:
            for name, clause in (("chroma_filtered", where), ("chroma_unfiltered", None)):
                started = time.perf_counter()
                collection.query(
                    query_embeddings=[vector], n_results=288, where=clause, include=["distances"]
                )
                timings[name].append((time.perf_counter() - started) * 1000)
    figures: dict[str, object] = {
        "layout": layout,
        "spaces": len(audience.space_ids),
        "where": where,
        "queries": len(queries),
        **arranged,
    }
    for name, values in timings.items():
        figures[name] = {
            "p50": round(percentile(values, 50), 1),
            "p95": round(percentile(values, 95), 1),
        }
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--layout", choices=LAYOUTS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.layout:  # a child with LODE_DATA_DIR set to the copy
        setup_django()
        print(json.dumps(measure(args.layout, args.queries)))
        return 0
    results: dict[str, object] = {}
    for layout in LAYOUTS:
        copy = tempfile.mkdtemp(prefix="lode-spaces-")
        try:
            shutil.copytree(args.data_dir, copy, dirs_exist_ok=True)
            env = dict(os.environ, LODE_DATA_DIR=copy)
            env.pop("DATABASE_URL", None)
            subprocess.run(
                [sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], env=env, check=True
            )
            command = [sys.executable, __file__, "--data-dir", copy, "--layout", layout]
            command += ["--queries", str(args.queries)]
            done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
            sys.stderr.write(done.stderr[-2000:])
            results[layout] = json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps({layout: results[layout]}, indent=2), flush=True)
        finally:
            shutil.rmtree(copy, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "space_latency.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
