"""Benchmark: embedding throughput through the worker path vs raw fastembed, and peak RSS.

    .venv/bin/python bench/embed_throughput.py [--docs 1000] [--db sqlite|postgres]

1. A fresh database (see `_common.fresh_environment`), `migrate`, then the first `--docs`
   SciFact abstracts loaded with `lode_load_beir`.
2. Worker: one `sync_pending_vectors` task (queued by the loader, or here), run by a real
   `manage.py db_worker --batch`, which then exits. Throughput is the task's own
   measurement (`sync_vectors`: database reads, embedding, Chroma upserts, records; model
   load excluded); peak RSS is that process's `ru_maxrss` from `wait4` (Django + model +
   Chroma + the batches).
3. Paired comparison, in one process with one loaded model: the passages are split into
   chunks of 256 and, chunk by chunk, embedded by raw fastembed (`embed(texts,
   batch_size=32)` in input order, then sorted by length) and synced by `sync_vectors`
   into a scratch collection (a manifest of its own, so every passage is pending again);
   the order alternates per chunk. On a shared machine other processes' load hits all
   three equally, so the ratio stays meaningful even when absolute figures wobble.

Prints a table; `--json PATH` also writes the figures.
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

from _common import ROOT, SCIFACT, fresh_environment

QUEUE = """
from django_tasks_db.models import DBTaskResult
from retrieval.index.sync import enqueue_pending_sweep
enqueue_pending_sweep()  # lode_load_beir may have queued it already
assert DBTaskResult.objects.filter(task_path__endswith="sync_pending_vectors").count() == 1
"""

RESULT = """
import json
from django_tasks_db.models import DBTaskResult
row = DBTaskResult.objects.get(task_path="retrieval.index.sync.sync_pending_vectors")
print(json.dumps({"status": row.status, "value": row.return_value, "traceback": row.traceback}))
"""

PAIRED = """
import json, resource
from dataclasses import replace
from time import perf_counter
from retrieval.index.embeddings import get_embedder, passage_input
from retrieval.index.sync import sync_vectors
from retrieval.index.vectors import chunked, head_passages

real = get_embedder()

class Scratch:
    # Same model and inputs, a manifest of its own: a fresh collection, all pending again.
    manifest = replace(real.manifest, query_template="bench: {text}")
    embed_query = staticmethod(real.embed_query)
    embed_passages = staticmethod(real.embed_passages)

passages = list(head_passages().order_by("pk"))
texts = {p.pk: passage_input(p) for p in passages}
ids = [p.pk for p in passages]
raw_model = real._model
totals = {"raw, input order": 0.0, "raw, sorted by length": 0.0, "worker path": 0.0}

def raw(chunk):
    started = perf_counter()
    list(raw_model.embed([texts[i] for i in chunk], batch_size=32))
    totals["raw, input order"] += perf_counter() - started

def raw_sorted(chunk):
    started = perf_counter()
    list(raw_model.embed(sorted((texts[i] for i in chunk), key=len, reverse=True),
                         batch_size=32))
    totals["raw, sorted by length"] += perf_counter() - started

def worker(chunk):
    started = perf_counter()
    report = sync_vectors(chunk, embedder=Scratch())
    assert report.written == len(chunk), report
    totals["worker path"] += perf_counter() - started

list(raw_model.embed([texts[i] for i in ids[:32]], batch_size=32))  # warm-up
from retrieval.index.vectors import open_vector_store
open_vector_store(Scratch.manifest.key).count()  # import and open Chroma before timing
steps = [raw, raw_sorted, worker]
for n, chunk in enumerate(chunked(ids, 256)):
    for step in steps[n % 3:] + steps[: n % 3]:  # rotate the order chunk by chunk
        step(list(chunk))
print(json.dumps({"passages": len(ids),
                  "rows": {name: {"seconds": sec, "per_s": len(ids) / sec}
                           for name, sec in totals.items()},
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"manage.py {' '.join(args[:2])} failed ({done.returncode})")
    return done.stdout


def run_worker(env: dict[str, str]) -> tuple[float, float]:
    """Run `db_worker --batch` to completion; returns (wall seconds, peak RSS in MB)."""
    started = time.perf_counter()
    worker = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "db_worker",
            "--batch",
            "--no-reload",
            "--no-startup-delay",
            "-v",
            "0",
        ],
        cwd=ROOT,
        env=env,
    )
    _, status, usage = os.wait4(worker.pid, 0)
    worker.returncode = os.waitstatus_to_exitcode(status)
    if worker.returncode:
        raise SystemExit(f"db_worker failed ({worker.returncode})")
    return time.perf_counter() - started, usage.ru_maxrss / 1024


def bench(db: str, docs: int) -> dict[str, object]:
    with fresh_environment(db, pg_name="lode_bench_embed") as env:
        for name in ("LODE_MODEL_DIR", "CHROMA_URL", "LODE_TASKS_BACKEND"):
            env.pop(name, None)
        manage(env, "migrate", "-v", "0")
        manage(env, "lode_load_beir", str(SCIFACT), "--limit", str(docs), "--no-progress")
        manage(env, "shell", "-v", "0", "-c", QUEUE)
        worker_wall, worker_rss = run_worker(env)
        task = json.loads(manage(env, "shell", "-v", "0", "-c", RESULT))
        if task["status"] != "SUCCESSFUL":
            raise SystemExit(f"the sync task failed:\n{task['traceback']}")
        paired = json.loads(manage(env, "shell", "-v", "0", "-c", PAIRED))
    value = task["value"]
    return {
        "db": db,
        "docs": docs,
        "passages": value["embedded"] + value["reused"],
        "worker": {
            "sync_seconds": value["seconds"],
            "per_s": value["passages_per_second"],
            "embedded": value["embedded"],
            "reused": value["reused"],
            "process_wall_seconds": worker_wall,
            "peak_rss_mb": worker_rss,
        },
        "paired": paired,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1000, help="SciFact abstracts to load")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    started = time.perf_counter()
    result = bench(args.db, args.docs)
    worker, paired = result["worker"], result["paired"]
    print(f"{result['docs']} SciFact abstracts -> {result['passages']} passages ({result['db']})")
    print(
        f"db_worker: {worker['per_s']:.1f} passages/s ({worker['embedded']} embedded, "
        f"{worker['reused']} reused, {worker['sync_seconds']:.1f} s), peak RSS "
        f"{worker['peak_rss_mb']:.0f} MB, process wall {worker['process_wall_seconds']:.1f} s"
    )
    print(f"paired, same process and load ({paired['passages']} passages, chunks of 256):")
    base = paired["rows"]["raw, input order"]["per_s"]
    for name, row in paired["rows"].items():
        print(f"  {name:<24}{row['per_s']:>8.1f} passages/s {row['per_s'] / base:>7.2f}x")
    print(f"  peak RSS of that process {paired['peak_rss_mb']:.0f} MB")
    took = time.perf_counter() - started
    print(f"load average now {os.getloadavg()[0]:.1f}; bench took {took:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
