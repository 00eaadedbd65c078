"""Workers in the health report, its repair and the admin (the gap it closes: stale
workers were not reported anywhere)."""

from __future__ import annotations

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
