"""Background refresh of sources (issue 6, items 3 and 6): the webhook, the "scan now"
button and `lode_sources reconcile` all queue `refresh_source`, which runs the one scan
pipeline (`externals.pipeline.scan_source`) in `manage.py db_worker`."""

from __future__ import annotations

import logging

from django.tasks import task

from externals.models import Source
from externals.pipeline import scan_source

logger = logging.getLogger("lode.externals")


@task()
def refresh_source(source_id: int, trigger: str = "manual") -> dict[str, object]:
    """Scan one source; a deleted or disabled source is a no-op (the push may be late)."""
    source = Source.objects.filter(pk=source_id).first()
    if source is None or not source.enabled:
        return {"source_id": source_id, "status": "skipped", "reason": "missing or disabled"}
    record = scan_source(source, trigger=trigger)
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


def enqueue_refresh(source: Source, trigger: str = "manual") -> None:
    """Queue a refresh of `source`. With the database backend the task row is part of the
    caller's transaction, so it only becomes visible (and runs) once that commits. Raises
    if the queue is unavailable, so a webhook can answer with an error and be retried."""
    refresh_source.enqueue(source.pk, trigger)
