"""Benchmark: vector-worker throughput with 1 and with 3 `db_worker` processes.

    .venv/bin/python bench/worker_throughput.py [--workers 1,3] [--documents 50]
        [--passages 10] [--repeats 1] [--json bench/out/worker_throughput.json]

Each run is a fresh install as separate processes (`tests/deployment.py`): a private
PostgreSQL cluster (`tests/pg_cluster.py`; never the shared server), a `chroma run` server,
`migrate`, then `--documents` notes of `--passages` distinct one-sentence sections each
(default 50 × 10 = 500 passages), which queues one `embed_document` task per note. Then N
workers start together and the clock runs until every head passage has a recorded vector
and no task is queued or running.

Figures per run:

* `passages/s (embedding span)`: passages / (end of the last model call − start of the
  first), from `tests/embed_probe.py`'s log — the steady state, model load excluded;
  includes the claims, Chroma upserts and records between model calls.
* `passages/s (end to end)`: passages / wall time from starting the workers to done —
  includes Django start-up and each worker loading the model.
* `embedded twice`: inputs the model saw more than once (must be 0: no worker is killed).

Workers run as deployed: each onnxruntime session keeps its default pool (a thread per
core), so on a 2-core machine shared with other work 3 workers contend for the same cores
and cannot be 3× one; what a second and third worker buy is overlap of the non-model work
(database, Chroma, start-up) and cover for a dead worker.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.deployment import Deployment  # noqa: E402
from tests.pg_cluster import PrivatePostgres, available  # noqa: E402

MODEL_FOLDER = "from retrieval.index.embeddings import get_embedder; print(get_embedder().folder)"


def model_folder() -> Path:
    """The verified model folder (`LODE_MODEL_DIR`, else the install's own, assembled on
    first use), asked of a throwaway process with this environment."""
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v", "0", "-c", MODEL_FOLDER],
        cwd=ROOT,
        env=os.environ,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return Path(out.strip().splitlines()[-1])  # the log lines go to stderr


def one_run(workers: int, documents: int, passages: int, model_dir: Path) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="lode-bench-") as folder, PrivatePostgres() as pg:
        install = Deployment(Path(folder), pg, model_dir=model_dir)
        try:
            install.manage("migrate", "-v", "0")
            install.start_chroma()
            install.create_corpus(documents=documents, passages=passages)
            names = [f"w{i + 1}" for i in range(workers)]
            started = time.time()
            for name in names:
                install.start_worker(name)
            install.wait_until_done(timeout=1800, watch=names)
            finished = time.time()
            total = len(install.vector_state()["head"])
            first, last = install.embed_span()
            counts = install.embed_counts()
            per_worker = {}
            pids = {install.processes[name].pid: name for name in names}
            for pid, _ in install.embed_log():
                per_worker[pids.get(pid, str(pid))] = per_worker.get(pids.get(pid, str(pid)), 0) + 1
            return {
                "workers": workers,
                "passages": total,
                "embedding_span_s": round(last - first, 2),
                "passages_per_s_span": round(total / (last - first), 1),
                "wall_s": round(finished - started, 2),
                "passages_per_s_end_to_end": round(total / (finished - started), 1),
                "embedded_twice": sum(1 for n in counts.values() if n > 1),
                "embedded_by_worker": per_worker,
            }
        finally:
            install.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,3")
    parser.add_argument("--documents", type=int, default=50)
    parser.add_argument("--passages", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    ok, why = available()
    if not ok:
        sys.exit(f"cannot start a private PostgreSQL cluster: {why}")
    model_dir = model_folder()
    results = []
    for _ in range(args.repeats):
        for workers in (int(n) for n in args.workers.split(",")):
            result = one_run(workers, args.documents, args.passages, model_dir)
            results.append(result)
            print(json.dumps(result), flush=True)
    print()
    print("| workers | passages | span s | passages/s (span) | wall s | passages/s (end to end) "
          "| embedded twice |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(
            f"| {r['workers']} | {r['passages']} | {r['embedding_span_s']} | "
            f"{r['passages_per_s_span']} | {r['wall_s']} | {r['passages_per_s_end_to_end']} | "
            f"{r['embedded_twice']} |"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
