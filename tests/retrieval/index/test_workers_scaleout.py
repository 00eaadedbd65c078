"""Several workers on PostgreSQL: nothing embedded twice, no task lost,
and a database restart survived.

The slow tests run the real thing as processes: a private PostgreSQL cluster
(`tests/pg_cluster.py`, never the shared server), a `chroma run` server, three
`manage.py db_worker`s (through `tests/embed_probe.py`, which logs every embedded input
with its process id) and, for the restart, a gunicorn serving the API. The quick tests
exercise the claims and the lost-task recovery in-process on PostgreSQL.

What "embedded once" means here: the probe logs an input when the model call *returns*.
Every head passage must be logged exactly once, except the passages the killed worker held
claims on when it died: it may have embedded them without recording them, and the run that
takes them over embeds them again (at most twice). Recorded vectors are exactly one per
head passage in any case (the records and the Chroma ids are compared).
"""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from retrieval.index import sync
from retrieval.index.sync import claim_passages, release_claims
from retrieval.management.commands import db_worker
from retrieval.models import VectorClaim, WorkerHeartbeat
from tests import pg_cluster

PG_OK, PG_WHY = pg_cluster.available()
needs_pg_binaries = pytest.mark.skipif(not PG_OK, reason=PG_WHY)


@pytest.fixture(scope="module")
def model_dir() -> Path:
    from retrieval.index.embeddings import get_embedder

    return get_embedder().folder  # assembled and verified once; workers load it as-is


@pytest.fixture
def deployment(tmp_path, model_dir):
    from tests.deployment import Deployment

    with pg_cluster.PrivatePostgres() as pg:
        install = Deployment(tmp_path, pg, model_dir=model_dir)
        try:
            install.manage("migrate", "-v", "0")
            install.start_chroma()
            yield install
        finally:
            install.close()


# --- three workers, one SIGKILLed mid-batch --------------------------------------------------

SWEEP_FIRST = (
    "from retrieval.index.sync import sync_pending_vectors; "
    "sync_pending_vectors.using(priority=50).enqueue()"
)


@pytest.mark.slow
@needs_pg_binaries
def test_three_workers_embed_each_passage_once_and_recover_a_killed_ones_task(
    deployment,
) -> None:
    deployment.create_corpus(documents=36, passages=10)
    # A sweep first, so it overlaps the documents' tasks on the other workers: without
    # claims they would embed the same passages.
    deployment.manage("shell", "-v", "0", "-c", SWEEP_FIRST)
    assert deployment.task_counts() == {"READY": 37}
    workers = ["w1", "w2", "w3"]
    for worker in workers:
        deployment.start_worker(worker)

    # Kill w1 while it holds claims inside a running task: mid-batch, nothing recorded yet
    # for those passages.
    deadline = time.monotonic() + 180
    while True:
        running = deployment.sql(
            "select id from django_tasks_database_dbtaskresult "
            "where status = 'RUNNING' and worker_ids ->> -1 = 'w1'"
        )
        held = deployment.sql("select passage_id from retrieval_vectorclaim where owner = 'w1'")
        if running and held:
            break
        assert deployment.processes["w1"].poll() is None, deployment.log_of("w1")
        assert time.monotonic() < deadline, "w1 never held a claim inside a task"
        time.sleep(0.02)
    deployment.stop("w1", signal.SIGKILL)
    (killed_task,) = deployment.sql(
        "select id from django_tasks_database_dbtaskresult "
        "where status = 'RUNNING' and worker_ids ->> -1 = 'w1'"
    )
    in_flight = {
        pk
        for (pk,) in deployment.sql(
            "select passage_id from retrieval_vectorclaim where owner = 'w1'"
        )
    }
    assert in_flight

    deployment.wait_until_done(timeout=300, watch=["w2", "w3"])

    # Every head passage has exactly one vector, recorded and in Chroma.
    state = deployment.vector_state()
    assert len(state["head"]) == 360
    assert state["recorded"] == state["head"] == state["chroma_ids"]

    # Each passage went through the model once; only w1's in-flight ones may have twice.
    by_hash = state["input_hashes"]
    counts = deployment.embed_counts()
    assert set(counts) == set(by_hash)  # nothing embedded that is not a head passage
    twice = {by_hash[digest] for digest, n in counts.items() if n > 1}
    assert twice <= in_flight, f"embedded twice outside w1's claims: {sorted(twice - in_flight)}"
    assert max(counts.values()) <= 2
    survivors = {deployment.processes[w].pid for w in ("w2", "w3")}
    by_survivors = Counter(pid for pid, _ in deployment.embed_log() if pid in survivors)
    assert by_survivors, "the survivors embedded nothing"

    # The killed task is FAILED with WorkerLost (not RUNNING forever) and ran again.
    ((status, exception, note),) = deployment.sql(
        "select status, exception_class_path, traceback "
        "from django_tasks_database_dbtaskresult where id = %s",
        killed_task[0],
    )
    assert status == "FAILED"
    assert exception == db_worker.WORKER_LOST_PATH
    again = note.rsplit("queued again as ", 1)[1].strip()
    assert deployment.sql(
        "select status from django_tasks_database_dbtaskresult where id = %s", again
    ) == [("SUCCESSFUL",)]
    assert deployment.task_counts().get("RUNNING", 0) == 0
    assert not deployment.sql("select 1 from retrieval_vectorclaim")  # all released

    health = deployment.manage("lode_index", "health", check=False)
    assert "healthy" in health and "UNHEALTHY" not in health, health


# --- a PostgreSQL restart ---------------------------------------------------------------------

NOTE_AND_TOKEN = """
from django.contrib.auth.models import User
from lode_site.models import ApiToken, token_digest
from notes.services import note_create

owner, _ = User.objects.get_or_create(username="alice")
digest = token_digest("restart-token-" + "x" * 30)
ApiToken.objects.get_or_create(user=owner, name="t", digest=digest)
note_create(owner=owner, title="{title}", body="## One\\n\\n{title} survives the restart.")
"""


def api_status(port: int) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/notes/",
        headers={"Authorization": "Bearer restart-token-" + "x" * 30},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


@pytest.mark.slow
@needs_pg_binaries
def test_a_worker_and_the_web_keep_working_across_a_postgresql_restart(deployment) -> None:
    import sys

    deployment.manage("shell", "-v", "0", "-c", NOTE_AND_TOKEN.format(title="Before"))
    worker = deployment.start_worker("w1")
    port = pg_cluster.free_port()
    # One sync gunicorn worker: its connection persists between requests (CONN_MAX_AGE), so
    # after the restart it holds a dead connection that the health check must replace.
    deployment.start(
        "web",
        [sys.executable, "-m", "gunicorn", "lode_site.wsgi", "-w", "1", "-b", f"127.0.0.1:{port}"],
    )
    deadline = time.monotonic() + 90
    while api_status(port) != 200:
        assert deployment.processes["web"].poll() is None, deployment.log_of("web")
        assert time.monotonic() < deadline, f"the API never answered:\n{deployment.log_of('web')}"
        time.sleep(0.2)
    deployment.wait_until_done(timeout=180, watch=["w1"])

    # Down for a few seconds (the worker polls meanwhile and must back off, not die), then
    # up again: every session is gone, as in a real restart.
    deployment.pg.stop()
    time.sleep(4)
    assert worker.poll() is None, deployment.log_of("w1")
    deployment.pg.start()

    # The web: the first request after the restart already succeeds (its dead persistent
    # connection fails the health check and is replaced); so do the next ones.
    assert [api_status(port) for _ in range(3)] == [200, 200, 200], deployment.log_of("web")

    # The worker: still alive, and it runs a task queued after the restart.
    deployment.manage("shell", "-v", "0", "-c", NOTE_AND_TOKEN.format(title="After"))
    deployment.wait_until_done(timeout=180, watch=["w1"])
    ((status,),) = deployment.sql(
        "select status from django_tasks_database_dbtaskresult order by enqueued_at desc limit 1"
    )
    assert status == "SUCCESSFUL"
    # It did see the outage: the whole log (log_of keeps only its tail, which the heartbeat
    # thread's own connection errors may fill).
    assert "database error" in (deployment.folder / "w1.log").read_text(errors="replace")
    # A plain restart too (fast shutdown, immediately up).
    deployment.pg.restart()
    assert api_status(port) == 200
    deployment.manage("shell", "-v", "0", "-c", NOTE_AND_TOKEN.format(title="Again"))
    deployment.wait_until_done(timeout=180, watch=["w1"])
    assert worker.poll() is None


# --- claims and recovery, in-process (PostgreSQL only) ----------------------------------------


def _claims_or_skip() -> None:
    if not connection.features.has_select_for_update_skip_locked:
        pytest.skip("claims are used only where SELECT … FOR UPDATE SKIP LOCKED exists")


@pytest.mark.django_db
def test_a_claimed_passage_is_held_by_one_run_until_released_or_expired(alice_note) -> None:
    _claims_or_skip()
    ids = sorted(alice_note.passages.values_list("pk", flat=True))
    assert len(ids) >= 2
    first = claim_passages(ids[:1], "a" * 32)
    second = claim_passages(ids, "b" * 32)
    assert first == ids[:1]
    assert second == ids[1:]  # the other run skips what the first holds
    # A claim whose holder stopped renewing it is taken over.
    VectorClaim.objects.filter(token="a" * 32).update(expires_at=timezone.now())
    assert claim_passages(ids[:1], "c" * 32) == ids[:1]
    release_claims("b" * 32)
    release_claims("c" * 32)
    assert not VectorClaim.objects.exists()


@pytest.mark.django_db
def test_only_the_active_windows_claims_are_renewed(alice_note) -> None:
    _claims_or_skip()
    ids = sorted(alice_note.passages.values_list("pk", flat=True))
    claim_passages(ids[:1], "a" * 32)  # leaked: not registered as active
    with sync._claimer.lock:
        sync._claimer.active.add("b" * 32)
    try:
        claim_passages(ids[1:], "b" * 32)
        assert sync.renew_claims() == len(ids) - 1
    finally:
        release_claims("b" * 32)
        release_claims("a" * 32)


@pytest.mark.django_db
def test_a_task_of_a_silent_worker_is_failed_and_queued_again(alice_note) -> None:
    DBTaskResult.objects.all().delete()
    now = timezone.now()
    sync.embed_document.enqueue(alice_note.pk)
    sync.sync_pending_vectors.enqueue()
    dead, alive = DBTaskResult.objects.order_by("task_path")
    for row, worker in ((dead, "gone"), (alive, "here")):
        row.claim(worker)
    WorkerHeartbeat.objects.create(
        worker_id="gone", started_at=now, seen_at=now - timedelta(minutes=5)
    )
    WorkerHeartbeat.objects.create(worker_id="here", started_at=now, seen_at=now)

    assert db_worker.recover_lost_tasks(now=now) == [str(dead.pk)]
    assert db_worker.recover_lost_tasks(now=now) == []  # once only

    dead.refresh_from_db()
    alive.refresh_from_db()
    assert dead.status == "FAILED"
    assert dead.exception_class_path == db_worker.WORKER_LOST_PATH
    assert alive.status == "RUNNING"
    again = DBTaskResult.objects.filter(status="READY", task_path=dead.task_path).get()
    assert again.args_kwargs == dead.args_kwargs
    assert f"queued again as {again.pk}" in dead.traceback


@pytest.mark.django_db
def test_a_worker_that_keeps_dying_on_a_task_stops_requeuing_it(alice_note) -> None:
    DBTaskResult.objects.all().delete()
    for attempt in range(db_worker.MAX_LOST_REQUEUES + 1):
        DBTaskResult.objects.filter(status="READY").delete()
        sync.embed_document.enqueue(alice_note.pk)
        row = DBTaskResult.objects.get(status="READY")
        row.claim("crashy")
        recovered = db_worker.recover_lost_tasks(own_worker_id="crashy")
        assert recovered == [str(row.pk)]
        queued = DBTaskResult.objects.filter(status="READY").count()
        assert queued == (1 if attempt < db_worker.MAX_LOST_REQUEUES else 0)


@pytest.mark.django_db
def test_a_job_whose_process_vanished_is_marked_failed() -> None:
    import os
    import subprocess

    from lode_site.models import JobProgress

    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid now names no process (reaped)
    mine = JobProgress.start(kind=JobProgress.Kind.REINDEX_VECTORS)
    dead = JobProgress.start(kind=JobProgress.Kind.IMPORT_MARKDOWN)
    JobProgress.objects.filter(pk=dead.pk).update(pid=gone.pid)
    assert mine.pid == os.getpid()

    assert JobProgress.mark_vanished() == 1
    mine.refresh_from_db()
    dead.refresh_from_db()
    assert mine.status == JobProgress.Status.RUNNING
    assert dead.status == JobProgress.Status.FAILED
    assert f"process {gone.pid}" in dead.error
    assert JobProgress.mark_vanished() == 0


@pytest.mark.django_db
def test_the_periodic_sweep_queues_vector_work_only_when_nobody_does_it(alice_note) -> None:
    DBTaskResult.objects.all().delete()
    sync_path = sync.sync_pending_vectors.module_path
    sync.embed_document.enqueue(alice_note.pk)
    assert db_worker.sweep_pending_vectors() is False  # the document's task will do it
    DBTaskResult.objects.all().delete()
    if connection.features.has_select_for_update_skip_locked:
        ids = list(alice_note.passages.values_list("pk", flat=True))
        claim_passages(ids, "a" * 32)
        assert db_worker.sweep_pending_vectors() is False  # a live claim: someone is on it
        release_claims("a" * 32)
    assert db_worker.sweep_pending_vectors() is True
    assert db_worker.sweep_pending_vectors() is False  # one queued sweep is enough
    assert DBTaskResult.objects.filter(task_path=sync_path).count() == 1
