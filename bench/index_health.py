"""Benchmark: `lode_index health` and `repair` run time on the SciFact corpus.

    .venv/bin/python bench/index_health.py [--db sqlite|postgres|both] [--runs 3] [--drift 100]

For each backend, in a fresh database (`_common.fresh_environment`; PostgreSQL: the scratch
database `bench_h3`), in one process:

1. load the whole SciFact corpus with `lode_load_beir` (PostgreSQL: then ANALYZE);
2. fill the vector index for every head passage with *synthetic* vectors through the real
   `sync_vectors` (random unit vectors under the real manifest, records and Chroma metadata
   exactly as the worker writes them): the health check reads ids and metadata, never the
   vector values, so this measures it at full size without embedding 8k passages (many
   minutes on these shared cores);
3. time `index_health()` with and without vectors, the vector check alone, and `repair`
   of a healthy index (each the median of `--runs`);
4. let `--drift` head passages drift in the lexical index (SQLite: bogus tokens written into
   FTS5 for existing rows; PostgreSQL: stored tsvectors written under another text search
   mapping) and in the vector index (half the vectors deleted, half given another text
   hash), then time one `repair` — the lexical rebuild, and the re-embedding of the drifted
   passages with the real model (loaded before the clock starts).

Prints seconds; writes `bench/out/index_health_<db>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BACKENDS, ROOT, SCIFACT, fresh_environment

OUT = ROOT / "bench" / "out"


def _median_seconds(fn, runs: int) -> tuple[float, object]:
    times, value = [], None
    for _ in range(runs):
        started = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), value


def run(db: str, runs: int, drift: int) -> dict:
    with fresh_environment(db, pg_name="bench_h3") as env:
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
        import django

        django.setup()
        import numpy as np
        from django.core.management import call_command
        from django.db import connection, connections

        from retrieval.index import health, vectors
        from retrieval.index.embeddings import DIMENSION, current_manifest, get_embedder
        from retrieval.index.sync import sync_vectors
        from retrieval.models import Passage

        call_command("migrate", verbosity=0)
        call_command("lode_load_beir", str(SCIFACT), no_progress=True)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")

        class SyntheticEmbedder:
            manifest = current_manifest()
            rng = np.random.default_rng(7)

            def embed_passages(self, texts: list[str]) -> np.ndarray:
                matrix = self.rng.standard_normal((len(texts), DIMENSION)).astype(np.float32)
                return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)

        started = time.perf_counter()
        filled = sync_vectors(None, embedder=SyntheticEmbedder())
        fill_seconds = time.perf_counter() - started

        report: dict = {"db": db, "passages": Passage.objects.filter(is_head=True).count()}
        report["vectors_filled"] = filled.written
        report["fill_seconds"] = fill_seconds
        report["health_lexical_s"], lexical_only = _median_seconds(
            lambda: health.index_health(vectors=False), runs
        )
        report["health_full_s"], full = _median_seconds(health.index_health, runs)
        report["vector_check_s"], _ = _median_seconds(health.vector_health, runs)
        assert full.healthy, full.problems
        report["lexical_entries"] = lexical_only.lexical.actual_entries

        repair_times, rebuild_times = [], []
        for _ in range(runs):
            started = time.perf_counter()
            repaired = health.repair_indexes(vectors=True)
            repair_times.append(time.perf_counter() - started)
            rebuild_times.append(repaired.lexical_seconds)
        report["repair_healthy_s"] = statistics.median(repair_times)
        report["rebuild_only_s"] = statistics.median(rebuild_times)

        # Drift, then one repair that has real work to do.
        ids = list(Passage.objects.filter(is_head=True).order_by("pk").values_list("pk", flat=True))
        chosen = ids[:: max(1, len(ids) // drift)][:drift]
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                for pk in chosen:
                    cursor.execute(
                        "INSERT INTO retrieval_passage_fts(rowid, title_text, text) "
                        "VALUES (%s, 'bogus', 'drifted tokens')",
                        [pk],
                    )
            else:
                cursor.execute(
                    "ALTER TEXT SEARCH CONFIGURATION lode_english "
                    "ALTER MAPPING FOR asciiword WITH simple"
                )
                cursor.execute(
                    "UPDATE retrieval_passage SET text = text WHERE id = ANY(%s)", [chosen]
                )
                cursor.execute(
                    "ALTER TEXT SEARCH CONFIGURATION lode_english "
                    "ALTER MAPPING FOR asciiword WITH english_stem"
                )
        key = SyntheticEmbedder.manifest.key
        store = vectors.open_vector_store(key)
        half = len(chosen) // 2
        store.delete(chosen[:half])
        session = vectors._connection()
        with session.session(write=True):
            collection = session.collection(store.name, create=False, metadata={})
            got = collection.get(ids=[str(pk) for pk in chosen[half:]], include=["metadatas"])
            collection.update(
                ids=got["ids"],
                metadatas=[{**meta, "text_sha256": "0" * 64} for meta in got["metadatas"]],
            )
        drifted = health.index_health()
        report["drift_problems"] = drifted.problems
        embedder = get_embedder()  # model load outside the timing
        embedder.embed_passages(["warm up"])
        started = time.perf_counter()
        repaired = health.repair_indexes(vectors=True, embedder=embedder)
        report["repair_drifted_s"] = time.perf_counter() - started
        report["repair_drifted_rebuild_s"] = repaired.lexical_seconds
        report["repair_drifted_embedded"] = repaired.vectors.embedded
        report["repair_drifted_after_healthy"] = repaired.after.healthy
        report["repair_drifted_canonical_unchanged"] = repaired.canonical_unchanged

        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / f"index_health_{db}.json").write_text(json.dumps(report, indent=2) + "\n")
        connections.close_all()  # so the scratch PostgreSQL database can be dropped
    return report


def show(r: dict) -> None:
    print(
        f"\n== {r['db']}: SciFact, {r['passages']} head passages, "
        f"{r['lexical_entries']} lexical entries, {r['vectors_filled']} vectors "
        f"(synthetic, filled in {r['fill_seconds']:.1f} s)"
    )
    rows = [
        ("health --skip-vectors", r["health_lexical_s"]),
        ("health (lexical + vectors)", r["health_full_s"]),
        ("  vector check alone", r["vector_check_s"]),
        ("repair, healthy index (2 health checks incl.)", r["repair_healthy_s"]),
        ("  lexical rebuild alone (one transaction)", r["rebuild_only_s"]),
        (f"repair after drift ({r['repair_drifted_embedded']} re-embedded)", r["repair_drifted_s"]),
        ("  lexical rebuild alone", r["repair_drifted_rebuild_s"]),
    ]
    for name, seconds in rows:
        print(f"{name:<50} {seconds:>8.2f} s")
    print(
        f"after drift repair: healthy={r['repair_drifted_after_healthy']}, "
        f"canonical unchanged={r['repair_drifted_canonical_unchanged']}"
    )
    print("drift detected as: " + "; ".join(r["drift_problems"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=(*BACKENDS, "both"), default="both")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--drift", type=int, default=100)
    args = parser.parse_args()
    if args.db == "both":
        # Django binds to one database per process: one child process per backend.
        for db in BACKENDS:
            cmd = [sys.executable, __file__, "--db", db]
            cmd += ["--runs", str(args.runs), "--drift", str(args.drift)]
            subprocess.run(cmd, check=True)
        return
    show(run(args.db, args.runs, args.drift))


if __name__ == "__main__":
    main()
