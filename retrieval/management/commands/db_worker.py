"""`manage.py db_worker`: django-tasks-db's worker, plus a sweep of vector work on start.

A worker killed mid-task (SIGKILL, OOM, power loss) leaves that task's row RUNNING, and
django-tasks-db never runs it again. The vector work it was doing is still derivable from
canonical rows, so before the worker loop starts this queues one `sync_pending_vectors`
when any head passage lacks a vector or any stale vector remains. Before that it re-chunks
head versions whose passages are longer than `LODE_CHUNK_MAX_CHARS` (saved before the
character bound existed), so an upgraded install is bounded without an operator running
`lode_index repair`; the sweep then embeds the new passages. This command shadows the
stock one because "retrieval" precedes "django_tasks_db" in INSTALLED_APPS; every option
is the stock command's.
"""

from __future__ import annotations

import logging
from typing import Any

from django_tasks_db.management.commands.db_worker import Command as StockWorkerCommand

from retrieval.index.passages import oversized_head_passages, rechunk_oversized
from retrieval.index.sync import enqueue_pending_sweep

logger = logging.getLogger("lode.tasks")


class Command(StockWorkerCommand):
    help = (
        "Run a database background worker (first queuing a sweep for vector work that a "
        "killed worker left pending)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if oversized_head_passages():
                report = rechunk_oversized()
                logger.info(
                    "re-chunked %d document(s) with over-long passages: %d passages retired, "
                    "%d written",
                    report.documents,
                    report.retired,
                    report.written,
                )
        except Exception:  # as below: the worker starts regardless; health reports the rest
            logger.exception("could not re-chunk over-long passages")
        try:
            if enqueue_pending_sweep():
                logger.info("queued a sweep for pending vector work")
        except Exception:  # never keep the worker from starting; the sweep is a courtesy
            logger.exception("could not check for pending vector work")
        super().handle(*args, **options)
