"""Background refresh of sources: the webhook, the "scan now"
button and `lode_sources reconcile` all queue `refresh_source`, which runs the one scan
pipeline (`externals.pipeline.scan_source`) in `manage.py db_worker`.

One scan per source at a time: a refresh that finds its source already
being scanned does not wait in the worker (it would hold the only worker); it queues itself
again `RETRY_BUSY_AFTER` later, at most `MAX_BUSY_RETRIES` times, because the push that
queued it may describe a change the running scan has already passed.

At most one pending refresh per source: `Source.refresh_queued_at` is set (one conditional
UPDATE) when a refresh is queued and cleared when it starts, so pushes, clicks and busy
retries that find one already pending are folded into it — it scans after them, so it
covers what they asked for — instead of piling up tasks (each of which could re-queue
itself `MAX_BUSY_RETRIES` times).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db.models import Q
from django.tasks import task
from django.utils import timezone

from externals.models import Source
from externals.pipeline import ScanAlreadyRunning, scan_source

logger = logging.getLogger("lode.externals")

RETRY_BUSY_AFTER = timedelta(seconds=30)
MAX_BUSY_RETRIES = 40  # 20 minutes: longer than a scan claim can go stale
# A pending mark older than this is taken to belong to a task that was lost (a queue
# emptied by hand, a crash between queueing and running): a new refresh may be queued.
REFRESH_PENDING_STALE_AFTER = RETRY_BUSY_AFTER * (MAX_BUSY_RETRIES + 2)


@task()
def refresh_source(
    source_id: int, trigger: str = "manual", busy_retries: int = 0
) -> dict[str, object]:
    """Scan one source; a deleted or disabled source is a no-op (the push may be late)."""
    # Started: no longer pending, so a push that arrives from now on queues a new refresh
    # (this scan may already have passed what it changed).
    Source.objects.filter(pk=source_id).update(refresh_queued_at=None)
    source = Source.objects.filter(pk=source_id).first()
    if source is None or not source.enabled:
        return {"source_id": source_id, "status": "skipped", "reason": "missing or disabled"}
    try:
        record = scan_source(source, trigger=trigger)
    except ScanAlreadyRunning as exc:
        return _retry_later(source, trigger, busy_retries, str(exc))
    return {
        "source_id": source_id,
        "scan_id": record.pk,
        "status": record.status,
        "new": record.items_new,
        "changed": record.items_changed,
        "unchanged": record.items_unchanged,
        "pruned": record.items_pruned,
        "failed": record.items_failed,
    }


def _retry_later(source: Source, trigger: str, retries: int, reason: str) -> dict[str, object]:
    outcome: dict[str, object] = {"source_id": source.pk, "reason": reason}
    if retries >= MAX_BUSY_RETRIES or not refresh_source.get_backend().supports_defer:
        logger.warning("refresh of source %s skipped: %s", source.pk, reason)
        return {**outcome, "status": "skipped"}
    marked = _mark_pending(source.pk)
    if marked is None:  # a refresh was queued meanwhile (a push): that one will scan
        return {**outcome, "status": "coalesced"}
    run_after = timezone.now() + RETRY_BUSY_AFTER
    try:
        refresh_source.using(run_after=run_after).enqueue(source.pk, trigger, retries + 1)
    except Exception:
        _unmark_pending(source.pk, marked)
        raise
    return {**outcome, "status": "deferred", "run_after": run_after.isoformat()}


def _mark_pending(source_id: int) -> datetime | None:
    """Mark a refresh of the source as pending and return the mark, or None when one is
    pending already. One conditional UPDATE: of concurrent callers exactly one wins."""
    now = timezone.now()
    free = Q(refresh_queued_at__isnull=True) | Q(
        refresh_queued_at__lt=now - REFRESH_PENDING_STALE_AFTER
    )
    marked = Source.objects.filter(free, pk=source_id).update(refresh_queued_at=now)
    return now if marked else None


def _unmark_pending(source_id: int, mark: datetime) -> None:
    Source.objects.filter(pk=source_id, refresh_queued_at=mark).update(refresh_queued_at=None)


def enqueue_refresh(source: Source, trigger: str = "manual") -> bool:
    """Queue a refresh of `source`, unless one is pending already (then this request is
    folded into it); returns whether a task was queued. With the database backend the task
    row is part of the caller's transaction, so it only becomes visible (and runs) once
    that commits. Raises if the queue is unavailable (nothing is left marked pending), so a
    webhook can answer with an error and be retried."""
    mark = _mark_pending(source.pk)
    if mark is None:
        logger.info("refresh of source %s already queued; %s folded into it", source.pk, trigger)
        return False
    try:
        refresh_source.enqueue(source.pk, trigger)
    except Exception:
        _unmark_pending(source.pk, mark)
        raise
    return True
