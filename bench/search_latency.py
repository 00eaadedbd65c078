"""Search latency at SciFact size and at >= 50k passages, next to the floor.

    .venv/bin/python bench/search_latency.py --data-dir var/fit [--replicas 6] [--queries 200]

`--data-dir` must hold SciFact loaded and embedded for user `eval`
(`manage.py lode_load_beir ../shared/data/scifact` then `manage.py lode_embed_pending`).

Phase 1 measures that corpus. Phase 2 (with `--replicas R`) copies the data folder to a
temporary one and scales it up by replication with perturbation: each replica re-loads every
abstract with two adjacent words swapped (same length, so the same chunk boundaries) under a
new id, and gives each new passage its source passage's vector plus Gaussian noise (σ 0.01,
renormalised) — no model run needed — recorded exactly as the worker records vectors.

For each query (SciFact train claims) it times:
* the service: `retrieval.search.pipeline.search()` in hybrid mode, rerank off and learned;
* the floor: the same parsed query straight to FTS5 (`floor_search`, no joins) + the query
  embedding + a raw Chroma query of 256 without a filter — the parts no search can skip.
It prints p50/p95 in ms and service/floor ratios, and writes bench/out/search_latency.json.

The model runs as the web server runs it: one inference thread (`LODE_EMBED_THREADS=1`, what
lode_site/gunicorn_conf.py sets), for the floor's embedding and the service's alike; in hybrid
search the service embeds on a background thread while its lexical leg runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import percentile

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("LODE_EMBED_THREADS", "1")  # as gunicorn_conf.py sets for the web server
ROOT = Path(__file__).resolve().parent.parent
SCIFACT = Path(os.environ.get("LODE_BENCH_SCIFACT", ROOT.parent / "shared" / "data" / "scifact"))
OUT = ROOT / "bench" / "out"


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()


def replicate(replicas: int, seed: int = 7) -> None:
    """Scale the corpus in the current LODE_DATA_DIR up by `replicas` perturbed copies."""
    import numpy as np
    from django.core.management import call_command

    from notes.models import Document
    from retrieval.index.embeddings import input_sha256, passage_input
    from retrieval.index.sync import record_vectors
    from retrieval.index.vectors import active_manifest_key, get_vector_store
    from retrieval.models import Passage

    rng = random.Random(seed)
    noise = np.random.default_rng(seed)
    store = get_vector_store()
    manifest_key = active_manifest_key()
    rows = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open(encoding="utf-8")]
    for r in range(1, replicas + 1):
        folder = Path(tempfile.mkdtemp(prefix="lode-replica-"))
        with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
            for row in rows:
                words = row["text"].split(" ")
                plain = [
                    i
                    for i in range(len(words) - 1)
                    if words[i].isalpha() and words[i + 1].isalpha()
                ]
                if plain:
                    i = rng.choice(plain)
                    words[i], words[i + 1] = words[i + 1], words[i]
                copy = {"_id": f"r{r}-{row['_id']}", "title": row["title"], "text": " ".join(words)}
                handle.write(json.dumps(copy, ensure_ascii=False) + "\n")
        call_command("lode_load_beir", str(folder), user="eval", verbosity=0)
        shutil.rmtree(folder)
        # SciFact ids are numeric, so the originals are exactly the keys "beir:<digit>...".
        sources = {
            (key.removeprefix("beir:"), position): pid
            for pid, key, position in Passage.objects.filter(
                is_head=True, document__external_key__regex=r"^beir:[0-9]"
            ).values_list("id", "document__external_key", "position")
        }
        new = list(
            Passage.objects.filter(is_head=True, document__external_key__startswith=f"beir:r{r}-")
            .select_related("document", "version")
            .order_by("id")
        )
        for start in range(0, len(new), 512):
            batch = [
                p
                for p in new[start : start + 512]
                if (p.document.external_key.removeprefix(f"beir:r{r}-"), p.position) in sources
            ]
            source_ids = [
                sources[(p.document.external_key.removeprefix(f"beir:r{r}-"), p.position)]
                for p in batch
            ]
            stored = store.get_embeddings(source_ids)
            keep = [(p, stored[s]) for p, s in zip(batch, source_ids, strict=True) if s in stored]
            if not keep:
                continue
            vectors = np.stack([v for _, v in keep]) + noise.normal(0, 0.01, (len(keep), 384))
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            passages = [p for p, _ in keep]
            store.upsert(passages, vectors.astype(np.float32))
            record_vectors(
                passages, [input_sha256(passage_input(p)) for p in passages], manifest_key
            )
        print(
            f"  replica {r}: {Document.objects.count():,} documents, "
            f"{Passage.objects.filter(is_head=True).count():,} head passages",
            file=sys.stderr,
        )


def measure(query_count: int) -> dict[str, object]:
    from django.contrib.auth import get_user_model

    from retrieval.eligibility import member_space_ids
    from retrieval.index import lexical
    from retrieval.index.embeddings import get_embedder
    from retrieval.index.vectors import get_vector_store, pending_count
    from retrieval.models import Passage
    from retrieval.query import parse
    from retrieval.search.evaluation import load_queries
    from retrieval.search.pipeline import search

    user = get_user_model().objects.get(username="eval")
    queries = list(load_queries(SCIFACT / "queries.jsonl").values())[:query_count]
    backend, embedder, store = lexical.backend(), get_embedder(), get_vector_store()
    search(user=user, query=queries[0])  # warm: model load, Chroma open, caches
    timings: dict[str, list[float]] = {"hybrid": [], "hybrid+learned": [], "floor": []}
    for text in queries:
        started = time.perf_counter()
        search(user=user, query=text, mode="hybrid", rerank="off")
        timings["hybrid"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        search(user=user, query=text, mode="hybrid", rerank="learned")
        timings["hybrid+learned"].append((time.perf_counter() - started) * 1000)
        parsed = parse(text)
        started = time.perf_counter()
        backend.floor_search(parsed)
        vector = embedder.embed_query(parsed.text)
        with store._use("query", write=False, create=False) as collection:  # raw, no filter
            collection.query(query_embeddings=[vector], n_results=256, include=["distances"])
        timings["floor"].append((time.perf_counter() - started) * 1000)
    import resource

    figures: dict[str, object] = {
        # Peak resident memory of this process, which does what a web worker does per search
        # (model loaded, Chroma open, SQLite/FTS5): ru_maxrss is in KiB on Linux.
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "head_passages": Passage.objects.filter(is_head=True).count(),
        "pending_vectors": pending_count(member_space_ids(user.pk)),
        "queries": len(queries),
    }
    for name, values in timings.items():
        figures[name] = {
            "p50": round(percentile(values, 50), 1),
            "p95": round(percentile(values, 95), 1),
        }
    for name in ("hybrid", "hybrid+learned"):
        figures[f"{name}/floor"] = {
            q: round(figures[name][q] / figures["floor"][q], 2) for q in ("p50", "p95")
        }
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--replicas", type=int, default=0)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--phase", choices=["measure", "scale"], default=None, help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.phase:  # a child process with LODE_DATA_DIR already set
        setup_django()
        if args.phase == "scale":
            replicate(args.replicas)
        print(json.dumps(measure(args.queries)))
        return 0

    def child(data_dir: str, phase: str) -> dict[str, object]:
        env = dict(os.environ, LODE_DATA_DIR=str(Path(data_dir).resolve()))
        env.pop("DATABASE_URL", None)
        command = [
            sys.executable,
            __file__,
            "--data-dir",
            data_dir,
            "--phase",
            phase,
            "--replicas",
            str(args.replicas),
            "--queries",
            str(args.queries),
        ]
        done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
        sys.stderr.write(done.stderr[-2000:])
        return json.loads(done.stdout.strip().splitlines()[-1])

    results = {"corpus": child(args.data_dir, "measure")}
    print(json.dumps({"corpus": results["corpus"]}, indent=2))
    if args.replicas:
        scaled = tempfile.mkdtemp(prefix="lode-scaled-")
        try:
            shutil.copytree(args.data_dir, scaled, dirs_exist_ok=True)
            results["scaled"] = child(scaled, "scale")
        finally:
            shutil.rmtree(scaled, ignore_errors=True)
        print(json.dumps({"scaled": results["scaled"]}, indent=2))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "search_latency.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
