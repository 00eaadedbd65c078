"""Workers in the health report, its repair and the admin (the gap it closes: stale
workers were not reported anywhere)."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from retrieval.index import sync
from retrieval.index.health import index_health
from retrieval.index.worker_health import (
    STALE_AFTER_SECONDS,
    forget_gone_workers,
    worker_health,
)
from retrieval.management.commands import db_worker
from retrieval.models import VectorClaim, WorkerHeartbeat


def beat(worker_id: str, age_seconds: float) -> WorkerHeartbeat:
    now = timezone.now()
    return WorkerHeartbeat.objects.create(
        worker_id=worker_id,
        hostname="web-1",
        pid=4242,
        started_at=now - timedelta(hours=1),
        seen_at=now - timedelta(seconds=age_seconds),
    )


@pytest.mark.django_db
def test_no_worker_rows_is_healthy() -> None:
    health = worker_health()
    assert (health.alive, health.stale, health.problems) == (0, 0, [])


@pytest.mark.django_db
def test_a_stale_worker_is_a_problem_and_says_when_none_is_alive() -> None:
    beat("gone", STALE_AFTER_SECONDS * 4)
    alone = worker_health()
    assert (alone.alive, alone.stale) == (0, 1)
    assert "gone on web-1, pid 4242" in alone.problems[0]
    assert "no worker is alive" in alone.problems[0]

    beat("here", 1)
    with_company = worker_health()
    assert (with_company.alive, with_company.stale) == (1, 1)
    assert with_company.problems == []  # the live one takes the gone one's tasks back
    assert with_company.stale_examples  # still reported


@pytest.mark.django_db
def test_expired_claims_are_counted_but_are_not_a_problem(alice_note) -> None:
    now = timezone.now()
    passage = alice_note.passages.first()
    VectorClaim.objects.create(
        passage_id=passage.pk,
        owner="killed-command",
        token="t" * 32,
        claimed_at=now - timedelta(hours=1),
        expires_at=now - timedelta(minutes=1),
    )
    health = worker_health()
    assert health.expired_claims == 1
    assert health.problems == []


@pytest.mark.django_db
def test_the_health_report_carries_the_workers(alice_note) -> None:
    beat("gone", STALE_AFTER_SECONDS * 4)
    report = index_health(vectors=False, edges=False)
    assert not report.healthy
    assert any("no worker is alive" in p for p in report.problems)
    assert report.as_dict()["workers"]["stale"] == 1


@pytest.mark.django_db
def test_repair_forgets_gone_workers_but_not_one_a_running_task_still_names(alice_note) -> None:
    DBTaskResult.objects.all().delete()
    sync.embed_document.enqueue(alice_note.pk)
    DBTaskResult.objects.get().claim("busy-gone")  # RUNNING under a worker that went silent
    beat("busy-gone", STALE_AFTER_SECONDS * 4)
    beat("idle-gone", STALE_AFTER_SECONDS * 4)
    beat("here", 1)

    assert forget_gone_workers() == 1
    assert set(WorkerHeartbeat.objects.values_list("worker_id", flat=True)) == {
        "busy-gone",  # waits for a worker's sweep to take its task back
        "here",
    }


@pytest.mark.django_db
def test_lode_index_health_prints_the_workers(alice_note, capsys) -> None:
    beat("gone", STALE_AFTER_SECONDS * 4)
    with pytest.raises(CommandError):
        call_command("lode_index", "health", "--skip-vectors", "--skip-edges")
    out = capsys.readouterr().out
    assert "workers    0 alive, 1 stale" in out
    assert "stopped renewing its heartbeat" in out


@pytest.mark.django_db
def test_the_admin_lists_workers_to_those_allowed_to_view_them(staff_client, alice) -> None:
    beat("gone", STALE_AFTER_SECONDS * 4)
    beat("here", 1)
    page = staff_client.get(reverse("admin:retrieval_workerheartbeat_changelist"))
    assert page.status_code == 200
    text = page.content.decode()
    assert "alive" in text and "stale (" in text
    assert staff_client.get(reverse("admin:retrieval_vectorclaim_changelist")).status_code == 200
    health = staff_client.get(reverse("admin:retrieval_index_health"))
    assert 'id="index-health-workers"' in health.content.decode()

    alice.is_staff = True  # staff without the view permission
    alice.save()
    client = Client()
    client.force_login(alice)
    assert client.get(reverse("admin:retrieval_workerheartbeat_changelist")).status_code == 403


def sqlite_worker(**options: object) -> db_worker.ResilientWorker:
    settings_ = {
        "queue_names": ["default"],
        "interval": 0.0,
        "batch": True,
        "backend_name": "default",
        "startup_delay": False,
        "max_tasks": None,
        "worker_id": "loop-beats",
        "excluded_queue_names": [],
    }
    return db_worker.ResilientWorker(**{**settings_, **options})


def _needs_sqlite() -> None:
    if sync.claims_enabled():
        pytest.skip("the loop beats where no heartbeat thread runs: SQLite's single worker")


@pytest.mark.django_db(transaction=True)
def test_the_single_sqlite_worker_beats_from_its_loop_and_counts_as_alive() -> None:
    _needs_sqlite()
    worker = sqlite_worker()
    worker.beats_in_loop = True
    worker.run()  # batch mode: polls once, finds nothing, returns
    row = WorkerHeartbeat.objects.get(worker_id="loop-beats")
    assert (row.pid, row.task_id) == (os.getpid(), "")
    assert worker_health().alive == 1
    seen = row.seen_at
    assert worker.running  # a poll right after: not due, no write
    assert WorkerHeartbeat.objects.get(worker_id="loop-beats").seen_at == seen


@pytest.mark.django_db(transaction=True)
def test_the_sqlite_workers_row_names_the_task_it_runs_and_goes_on_a_clean_stop(
    monkeypatch,
) -> None:
    _needs_sqlite()
    seen_during: list[str] = []

    def run_stock_task(self, db_task_result) -> None:
        seen_during.append(WorkerHeartbeat.objects.get(worker_id=self.worker_id).task_id)

    monkeypatch.setattr(db_worker.Worker, "run_task", run_stock_task)
    task = sync.sync_pending_vectors.using(backend="default").enqueue()
    worker = sqlite_worker(max_tasks=1)
    db_worker.run_worker(worker)
    assert seen_during == [str(task.id)]
    assert not WorkerHeartbeat.objects.filter(worker_id="loop-beats").exists()


@pytest.mark.django_db
def test_a_quiet_sqlite_row_is_alive_while_its_process_runs_a_long_task() -> None:
    busy = beat("busy", age_seconds=STALE_AFTER_SECONDS + 120)
    busy.hostname, busy.pid, busy.task_id = socket.gethostname()[:255], os.getpid(), "t-1"
    busy.save()
    health = worker_health()
    if sync.claims_enabled():  # a thread beats during tasks there: quiet means hung
        assert (health.alive, health.stale) == (0, 1)
    else:
        assert (health.alive, health.stale, health.problems) == (1, 0, [])
    busy.task_id = ""  # between tasks a live worker beats: a quiet idle row is a gone one
    busy.save()
    assert (worker_health().alive, worker_health().stale) == (0, 1)
