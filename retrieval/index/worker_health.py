"""The workers' health: which `db_worker`s are alive, which stopped without saying
so, and which vector claims outlived their run — for `lode_index health`, its repair and the
admin's health page.

A worker that stops cleanly deletes its `WorkerHeartbeat` row; a row not renewed for
`STALE_AFTER_SECONDS` is a worker that was killed or hangs. Its RUNNING tasks are taken back
by a surviving worker's sweep (`db_worker.recover_lost_tasks`), so stale rows are reported in
the figures, and are a problem only when no worker is alive (then nothing queued runs).
Repair deletes the stale rows no RUNNING task names any more (their work was recovered); a
row still named waits for a worker's sweep, which repair cannot stand in for.

An expired `VectorClaim` (a SIGKILLed command's) needs nothing: the next sync takes the
passage over. It is counted, not reported as a problem.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from lode_site.models import _process_exists as process_exists
from retrieval.index.sync import WORKER_CLAIM_TTL_SECONDS, claims_enabled
from retrieval.models import VectorClaim, WorkerHeartbeat

# Matches `db_worker.STALE_AFTER_SECONDS` (the sweep's limit): a row this old is a gone worker.
STALE_AFTER_SECONDS = WORKER_CLAIM_TTL_SECONDS
EXAMPLES = 5


@dataclass(frozen=True)
class WorkerHealth:
    """Live and stale workers and expired vector claims. SQLite's single worker beats from
    its own loop, between polls and tasks, so during one long task its row goes quiet: there
    a quiet row naming a task, whose process still exists on this host, counts as alive."""

    alive: int = 0
    stale: int = 0
    # A few stale workers as "id on host, pid N, last seen T".
    stale_examples: list[str] = field(default_factory=list)
    expired_claims: int = 0

    @property
    def problems(self) -> list[str]:
        """A problem only when workers stopped and none is left alive: while one runs, it
        takes a gone worker's tasks back (the stale rows stay in the figures and the admin)."""
        if not self.stale or self.alive:
            return []
        what = f"{self.stale} worker{'s' if self.stale != 1 else ''}"
        seen = "; ".join(self.stale_examples)
        return [
            f"{what} stopped renewing {'their' if self.stale != 1 else 'its'} heartbeat "
            f"for over {STALE_AFTER_SECONDS} s (killed or hung: {seen}) and no worker is "
            "alive: queued work waits until `manage.py db_worker` runs again"
        ]


def _describe(row: WorkerHeartbeat) -> str:
    host = row.hostname or "?"
    return f"{row.worker_id} on {host}, pid {row.pid}, last seen {row.seen_at:%Y-%m-%d %H:%M:%S}"


def worker_health(now: datetime | None = None) -> WorkerHealth:
    """Count live and stale heartbeats and expired claims (read-only, three queries)."""
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=STALE_AFTER_SECONDS)
    stale = list(WorkerHeartbeat.objects.filter(seen_at__lt=stale_before).order_by("seen_at"))
    busy = [] if claims_enabled() else [row for row in stale if _busy_on_this_host(row)]
    stale = [row for row in stale if row not in busy]
    return WorkerHealth(
        alive=WorkerHeartbeat.objects.filter(seen_at__gte=stale_before).count() + len(busy),
        stale=len(stale),
        stale_examples=[_describe(row) for row in stale[:EXAMPLES]],
        expired_claims=VectorClaim.objects.filter(expires_at__lt=now).count(),
    )


def _busy_on_this_host(row: WorkerHeartbeat) -> bool:
    # Only this host's pids mean anything here; a reused pid makes a dead worker look busy
    # (as `JobProgress.mark_vanished` accepts), never a busy one dead.
    host = socket.gethostname()[:255]
    return bool(row.task_id) and row.hostname == host and bool(row.pid) and process_exists(row.pid)


def forget_gone_workers(now: datetime | None = None) -> int:
    """Delete stale heartbeat rows that no RUNNING task names as its worker (their tasks were
    recovered by a sweep or finished); returns how many."""
    from django_tasks_db.compat import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    now = now or timezone.now()
    stale_before = now - timedelta(seconds=STALE_AFTER_SECONDS)
    running = DBTaskResult.objects.filter(status=TaskResultStatus.RUNNING)
    named = {row.worker_ids[-1] for row in running.only("worker_ids") if row.worker_ids}
    gone = WorkerHeartbeat.objects.filter(seen_at__lt=stale_before).exclude(worker_id__in=named)
    deleted, _ = gone.delete()
    return deleted
