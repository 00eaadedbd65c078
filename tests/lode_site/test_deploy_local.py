"""`bootstrap deploy-local` runs the scale-out topology on one machine.

End to end on a private PostgreSQL database: a Chroma server, two background workers and
gunicorn with two processes start; a note written over the API is embedded by a worker into
the Chroma *server* (not an embedded Chroma folder) and found by a semantic and a hybrid
search over the API; a worker killed outright is started again while searches keep
answering; SIGTERM stops every process and frees both ports. Skipped when no
PostgreSQL server answers at 127.0.0.1:5432.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.factories import (
    STOP_TIMEOUT,
    accepts_connections,
    assert_stopped_cleanly,
    child_env,
    children_of,
    free_port,
    is_alive,
    kill_leftovers,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SERVER = "postgres://postgres@127.0.0.1:5432"
START_TIMEOUT = 300.0
EMBED_TIMEOUT = 180.0


def psql(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql)


@pytest.fixture
def database() -> Iterator[str]:
    """A fresh database of its own on the shared server, dropped afterwards."""
    name = f"lode_deploy_{uuid.uuid4().hex[:12]}"
    try:
        psql(f'CREATE DATABASE "{name}"')
    except Exception as exc:  # no server, or no rights: nothing to test against
        pytest.skip(f"no PostgreSQL at {SERVER}: {exc}")
    try:
        yield f"{SERVER}/{name}"
    finally:
        psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    except (FileNotFoundError, ProcessLookupError):
        return []


def api(method: str, url: str, token: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_deploy_local_runs_the_topology_and_stops_it(database, tmp_path):
    data_dir = tmp_path / "data"
    web_port, chroma_port = free_port(), free_port()
    while chroma_port == web_port:
        chroma_port = free_port()
    log = tmp_path / "deploy.log"
    env = child_env(data_dir)
    command = [
        sys.executable,
        "-m",
        "lode_site.bootstrap",
        "deploy-local",
        "--database-url",
        database,
        "--workers",
        "2",
        "--web-workers",
        "2",
        "--port",
        str(web_port),
        "--chroma-port",
        str(chroma_port),
    ]
    pids: set[int] = set()
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    pids.add(process.pid)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert is_alive(process.pid), f"deploy-local exited:\n{log.read_text()[-3000:]}"
            children = children_of(process.pid)
            pids |= children
            if len(children) == 4 and accepts_connections(web_port):
                break
            assert time.monotonic() < deadline, f"not serving:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)

        # What runs: one Chroma server, two db_workers, one gunicorn master with 2 workers.
        lines = {pid: " ".join(cmdline(pid)) for pid in children}
        assert sum("chroma" in line and " run " in line for line in lines.values()) == 1
        assert sum("db_worker" in line for line in lines.values()) == 2
        (master,) = (pid for pid, line in lines.items() if "gunicorn" in line)
        # The master accepts connections once its first worker is up; the second may still
        # be starting on a loaded machine.
        while len(children_of(master)) != 2:
            assert time.monotonic() < deadline, f"gunicorn workers: {children_of(master)}"
            time.sleep(0.5)
        pids |= children_of(master)
        assert accepts_connections(chroma_port)

        manage_env = env | {
            "DATABASE_URL": database,
            "CHROMA_URL": f"http://127.0.0.1:{chroma_port}",
        }
        token = subprocess.run(
            [sys.executable, "manage.py", "lode_token", "create", "lode"],
            cwd=ROOT,
            env=manage_env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout.split()[0]
        base = f"http://127.0.0.1:{web_port}/api"
        status, note = api(
            "POST",
            f"{base}/notes/",
            token,
            {"title": "Rotating the backup keys", "body": "The vault keys rotate each quarter."},
        )
        assert status == 201, note

        def search(mode: str) -> dict:
            query = urllib.parse.urlencode({"q": "when are vault keys rotated", "mode": mode})
            status, result = api("GET", f"{base}/search/?{query}", token)
            assert status == 200, result
            return result

        deadline = time.monotonic() + EMBED_TIMEOUT
        while True:  # a worker embeds the note into the Chroma server
            semantic = search("semantic")
            if semantic["hits"] and not semantic["degraded"]:
                break
            assert time.monotonic() < deadline, (semantic, log.read_text()[-3000:])
            time.sleep(1)
        assert semantic["hits"][0]["document_id"] == note["id"]
        hybrid = search("hybrid")
        assert hybrid["degraded"] == []
        assert hybrid["hits"][0]["document_id"] == note["id"]
        assert hybrid["dense_candidates"] >= 1 and hybrid["lexical_candidates"] >= 1
        # The vectors live in the server's folder, not in an embedded Chroma of the data dir.
        assert (data_dir / "chroma-server" / "chroma.sqlite3").exists()
        assert not (data_dir / "chroma").exists()

        # A worker killed outright is started again while the site keeps answering.
        victim = min(pid for pid, line in lines.items() if "db_worker" in line)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + EMBED_TIMEOUT
        while True:
            assert search("hybrid")["hits"]
            running = {p for p in children_of(process.pid) if "db_worker" in " ".join(cmdline(p))}
            if len(running) == 2 and victim not in running:
                break
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        pids |= running
        assert "exited (code -9); restarting it in 1 s" in log.read_text()

        process.send_signal(signal.SIGTERM)
        try:
            assert process.wait(timeout=STOP_TIMEOUT) == 0, log.read_text()[-2000:]
        except subprocess.TimeoutExpired:
            pytest.fail(f"deploy-local did not stop:\n{log.read_text()[-2000:]}")
        workers = {pid for pid in pids if pid != process.pid}
        assert_stopped_cleanly(process.pid, workers, web_port, log)
        assert not accepts_connections(chroma_port)
    finally:
        kill_leftovers(pids)


def test_deploy_local_refuses_sqlite(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lode_site.bootstrap",
            "deploy-local",
            "--database-url",
            f"sqlite:///{tmp_path}/x.sqlite3",
        ],
        cwd=ROOT,
        env=child_env(tmp_path / "data"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode != 0
    assert "needs a PostgreSQL DATABASE_URL" in result.stderr
