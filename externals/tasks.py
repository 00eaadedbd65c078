"""Background refresh of sources (issue 6, items 3 and 6): the webhook, the "scan now"
button and `lode_sources reconcile` all queue `refresh_source`, which runs the one scan
pipeline (`externals.pipeline.scan_source`) in `manage.py db_worker`.

One scan per source at a time (issue 10, item 5): a refresh that finds its source already
being scanned does not wait in the worker (it would hold the only worker); it queues itself
again `RETRY_BUSY_AFTER` later, at most `MAX_BUSY_RETRIES` times, because the push that
queued it may describe a change the running scan has already passed.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.tasks import task
from django.utils import timezone

from externals.models import Source
from externals.pipeline import ScanAlreadyRunning, scan_source

logger = logging.getLogger("lode.externals")

RETRY_BUSY_AFTER = timedelta(seconds=30)
MAX_BUSY_RETRIES = 40  # 20 minutes: longer than a scan claim can go stale


@task()
def refresh_source(
    source_id: int, trigger: str = "manual", busy_retries: int = 0
) -> dict[str, object]:
    """Scan one source; a deleted or disabled source is a no-op (the push may be late)."""
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
    run_after = timezone.now() + RETRY_BUSY_AFTER
    refresh_source.using(run_after=run_after).enqueue(source.pk, trigger, retries + 1)
    return {**outcome, "status": "deferred", "run_after": run_after.isoformat()}


def enqueue_refresh(source: Source, trigger: str = "manual") -> None:
    """Queue a refresh of `source`. With the database backend the task row is part of the
    caller's transaction, so it only becomes visible (and runs) once that commits. Raises
    if the queue is unavailable, so a webhook can answer with an error and be retried."""
    refresh_source.enqueue(source.pk, trigger)
