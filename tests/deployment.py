"""A lode install run as separate processes, for the scale-out tests and the worker benchmark.

A private PostgreSQL cluster (`tests/pg_cluster.py`), a `chroma run` server on a free port
(`CHROMA_URL`), a data folder, and `manage.py` commands — `db_worker`s above all — started
through `tests/embed_probe.py`, so every passage embedding is logged with its process id.
Everything listens on 127.0.0.1 only and is stopped by `close()`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.pg_cluster import PrivatePostgres, free_port

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "tests" / "embed_probe.py"
CHROMA = Path(sys.executable).parent / "chroma"

# Documents whose passages are all distinct (so an input hash names one passage): one
# heading and one sentence per passage.
CREATE_CORPUS = textwrap.dedent(
    """
    from django.contrib.auth.models import User
    from notes.services import note_create

    owner, _ = User.objects.get_or_create(username="alice")
    for d in range({documents}):
        body = "\\n\\n".join(
            f"## Part {{p}}\\n\\nDocument {{d}} part {{p}}: the {{d}}-{{p}} sample ledger "
            f"lists compound {{d * 1000 + p}} beside marker {{(d * 31 + p * 7) % 997}}."
            for p in range({passages})
        )
        note_create(owner=owner, title=f"Ledger {{d}}", body=body)
    """
)

VECTOR_STATE = textwrap.dedent(
    """
    import json
    from retrieval.index.embeddings import current_manifest
    from retrieval.index.vectors import get_vector_store, head_passages
    from retrieval.models import PassageVector

    key = current_manifest().key
    store = get_vector_store()
    print(json.dumps({
        "head": sorted(head_passages().values_list("pk", flat=True)),
        "recorded": sorted(PassageVector.objects.filter(manifest_key=key)
                           .values_list("passage_id", flat=True)),
        "input_hashes": dict(PassageVector.objects.filter(manifest_key=key)
                             .values_list("input_sha256", "passage_id")),
        "chroma_ids": sorted(store.ids()),
    }))
    """
)


class Deployment:
    """One install: cluster + database + Chroma server + data folder + worker processes."""

    def __init__(self, folder: Path, pg: PrivatePostgres, *, model_dir: Path) -> None:
        self.folder = folder
        self.pg = pg
        self.probe_log = folder / "embeddings.log"
        self.database_url = pg.create_database("lode")
        self.chroma_port = free_port()
        self.env = {
            key: value
            for key, value in os.environ.items()
            if key not in {"DATABASE_URL", "CHROMA_URL", "LODE_MODEL_DIR", "LODE_TASKS_BACKEND"}
        }
        self.env.update(
            DATABASE_URL=self.database_url,
            CHROMA_URL=f"http://127.0.0.1:{self.chroma_port}",
            LODE_DATA_DIR=str(folder / "data"),
            LODE_MODEL_DIR=str(model_dir),
            LODE_EMBED_PROBE_LOG=str(self.probe_log),
            PYTHONUNBUFFERED="1",
        )
        (folder / "data").mkdir(exist_ok=True)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.chroma: subprocess.Popen[bytes] | None = None

    # --- processes ----------------------------------------------------------------------

    def manage(self, *args: str, timeout: float = 300, check: bool = True) -> str:
        done = subprocess.run(
            [sys.executable, str(PROBE), *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-4000:]}")
        return done.stdout

    def start_chroma(self) -> None:
        log = (self.folder / "chroma.log").open("wb")
        self.chroma = subprocess.Popen(
            [str(CHROMA), "run", "--path", str(self.folder / "chroma"), "--host", "127.0.0.1",
             "--port", str(self.chroma_port)],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        import urllib.request

        deadline = time.monotonic() + 60
        while True:
            try:
                url = f"http://127.0.0.1:{self.chroma_port}/api/v2/heartbeat"
                urllib.request.urlopen(url, timeout=2).close()
                return
            except OSError:
                assert self.chroma.poll() is None, (self.folder / "chroma.log").read_text()
                assert time.monotonic() < deadline, "the Chroma server did not come up"
                time.sleep(0.2)

    def start_worker(self, worker_id: str, *extra: str) -> subprocess.Popen[bytes]:
        log = (self.folder / f"{worker_id}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, str(PROBE), "db_worker", "--no-reload", "--no-startup-delay",
             "--interval", "0.2", "--worker-id", worker_id, *extra],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.processes[worker_id] = process
        return process

    def start(self, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        log = (self.folder / f"{name}.log").open("wb")
        process = subprocess.Popen(
            command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        self.processes[name] = process
        return process

    def log_of(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def stop(self, name: str, sig: int = signal.SIGTERM) -> None:
        process = self.processes[name]
        if process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def close(self) -> None:
        for name in list(self.processes):
            self.stop(name)
        if self.chroma is not None and self.chroma.poll() is None:
            self.chroma.terminate()
            try:
                self.chroma.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.chroma.kill()
                self.chroma.wait()

    # --- the database -------------------------------------------------------------------

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.database_url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute(query, params).fetchall()

    def task_counts(self) -> dict[str, int]:
        rows = self.sql(
            "select status, count(*) from django_tasks_database_dbtaskresult group by 1"
        )
        return {status: count for status, count in rows}

    def pending_passages(self) -> int:
        ((count,),) = self.sql(
            "select count(*) from retrieval_passage p where p.is_head and not exists "
            "(select 1 from retrieval_passagevector v where v.passage_id = p.id)"
        )
        return count

    def wait_until_done(self, timeout: float, watch: list[str]) -> None:
        """Until every head passage has a vector and no task is queued or running."""
        deadline = time.monotonic() + timeout
        while True:
            counts = self.task_counts()
            if (
                not counts.get("READY")
                and not counts.get("RUNNING")
                and not self.pending_passages()
            ):
                return
            for name in watch:
                assert self.processes[name].poll() is None, f"{name} died:\n{self.log_of(name)}"
            assert time.monotonic() < deadline, (
                f"not done after {timeout}s: tasks {counts}, "
                f"{self.pending_passages()} passages pending"
            )
            time.sleep(0.5)

    # --- what was embedded ----------------------------------------------------------------

    def create_corpus(self, documents: int, passages: int) -> None:
        self.manage(
            "shell", "-v", "0", "-c", CREATE_CORPUS.format(documents=documents, passages=passages)
        )

    def vector_state(self) -> dict[str, Any]:
        return json.loads(self.manage("shell", "-v", "0", "-c", VECTOR_STATE))

    def embed_log(self) -> list[tuple[int, str]]:
        if not self.probe_log.exists():
            return []
        rows = []
        for line in self.probe_log.read_text().splitlines():
            pid, digest = line.split("\t")[:2]
            rows.append((int(pid), digest))
        return rows

    def embed_span(self) -> tuple[float, float]:
        """(first model call's start, last one's end), in time.time() seconds."""
        starts, ends = [], []
        for line in self.probe_log.read_text().splitlines():
            fields = line.split("\t")
            starts.append(float(fields[2]))
            ends.append(float(fields[3]))
        return min(starts), max(ends)

    def embed_counts(self) -> Counter[str]:
        return Counter(digest for _, digest in self.embed_log())
