"""`manage.py db_worker`: django-tasks-db's worker, made safe to run several of.

What the stock worker lacks, and what this command adds around it (subclassing, not forking):

- **A killed worker's task is not lost.** SIGKILL, OOM or power loss leaves the task's row
  RUNNING forever and django-tasks-db never runs it again. Each worker writes a heartbeat
  row (`WorkerHeartbeat`) every `HEARTBEAT_SECONDS` from a thread, so a long task does not
  silence it, and every `SWEEP_SECONDS` that thread looks for RUNNING rows whose worker has
  not been heard from for `STALE_AFTER_SECONDS`: each is marked FAILED (exception
  `WorkerLost`, so the admin shows the truth) and queued again — lode's tasks derive their
  work from canonical rows, so running one twice is safe — at most `MAX_LOST_REQUEUES`
  times per task and arguments, so a task that kills its worker cannot loop forever. The
  same sweep queues a `sync_pending_vectors` when head passages lack a vector with no live
  claim on them and no vector task is queued or running (a backstop for a task that failed
  for good).
- **No passage embedded twice.** The vector sync claims passages before embedding them
  (`retrieval.index.sync`); the heartbeat renews this worker's claims, so only a dead
  worker's claims lapse.
- **A killed management command shows as failed.** A `JobProgress` row (`lode_import_markdown`,
  `lode_reindex_vectors`) whose process no longer exists on this host is marked failed, on
  start and in the same sweep.
- **A PostgreSQL restart does not kill the worker.** The stock loop re-raises any database
  error that is not "database is locked". Here a `DatabaseError` from the loop closes the
  connection, backs off (`DB_BACKOFF_SECONDS`) and resumes; a row this worker left RUNNING
  when the error struck is recovered like a dead worker's. Connections are health-checked
  before reuse (`CONN_HEALTH_CHECKS`, lode_site/settings.py) and the stock loop calls
  `close_old_connections()` around every poll.

SQLite runs one worker (no `SKIP LOCKED`, one writer): there is no heartbeat thread (an
in-process second connection would contend for SQLite's lock) and no claims. Its heartbeat
row is written from the worker's own loop instead, in the loop's thread and connection:
between polls (at most every `HEARTBEAT_SECONDS`) and before and after each task, so the
admin and `lode_index health` count it alive; during one long task the row goes quiet, and
health counts it alive while its process exists (`worker_health`). On start, RUNNING rows
left by any other worker id are taken as lost — run one worker there.

On start the command also re-chunks head versions whose passages are longer than
`LODE_CHUNK_MAX_CHARS` (saved before the character bound existed) and queues one sweep when
vector work is pending. It shadows the stock command because "retrieval" precedes
"django_tasks_db" in INSTALLED_APPS; every option is the stock command's.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import datetime, timedelta
from types import FrameType
from typing import Any

from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV, run_with_reloader
from django_tasks_db.compat import TaskResultStatus
from django_tasks_db.management.commands.db_worker import Command as StockWorkerCommand
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from lode_site.models import JobProgress
from retrieval.index.embeddings import current_manifest
from retrieval.index.passages import oversized_head_passages, rechunk_oversized
from retrieval.index.sync import (
    WORKER_CLAIM_TTL_SECONDS,
    claims_enabled,
    embed_document,
    enqueue_pending_sweep,
    renew_claims,
    set_claim_owner,
    sync_pending_vectors,
    unclaimed_pending_exists,
)
from retrieval.models import WorkerHeartbeat

logger = logging.getLogger("lode.tasks")

HEARTBEAT_SECONDS = 5.0
# A worker unheard of for this long is dead: several missed beats, and a claim it held has
# lapsed by then too (the claim TTL is the same span).
STALE_AFTER_SECONDS = WORKER_CLAIM_TTL_SECONDS
SWEEP_SECONDS = 30.0
MAX_LOST_REQUEUES = 3
DB_BACKOFF_SECONDS = (1, 2, 5, 10, 30)
DB_BACKOFF_RESET_SECONDS = 300.0
VECTOR_TASK_PATHS = (embed_document.module_path, sync_pending_vectors.module_path)


class WorkerLost(Exception):
    """Recorded as the failure of a task whose worker died (or lost its database) mid-run."""


WORKER_LOST_PATH = f"{WorkerLost.__module__}.{WorkerLost.__qualname__}"


def recover_lost_tasks(
    *, own_worker_id: str | None = None, all_others: bool = False, now: datetime | None = None
) -> list[str]:
    """Mark RUNNING task rows whose worker is gone FAILED and queue them again.

    A row is lost when its worker (the last id in `worker_ids`) has no heartbeat newer than
    `STALE_AFTER_SECONDS` (a row without any heartbeat counts from its `started_at`), when
    it is `own_worker_id`'s (the caller runs nothing at this moment), or — `all_others`,
    SQLite's single worker on start — when it is anyone's. The FAILED update is conditional
    on the row still being RUNNING, so of several workers sweeping at once exactly one
    requeues it. Returns the ids of the rows recovered.
    """
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=STALE_AFTER_SECONDS)
    running = list(DBTaskResult.objects.running())
    if not running:
        return []
    workers = {row.worker_ids[-1] for row in running if row.worker_ids}
    seen = dict(
        WorkerHeartbeat.objects.filter(worker_id__in=workers).values_list("worker_id", "seen_at")
    )
    recovered: list[str] = []
    for row in running:
        worker = row.worker_ids[-1] if row.worker_ids else ""
        last_heard = seen.get(worker) or row.started_at or row.enqueued_at
        lost = all_others or worker == own_worker_id or last_heard < stale_before
        if lost and _fail_and_requeue(row, worker, last_heard, now):
            recovered.append(str(row.pk))
    return recovered


def _fail_and_requeue(row: DBTaskResult, worker: str, last_heard: datetime, now: datetime) -> bool:
    earlier = DBTaskResult.objects.filter(
        task_path=row.task_path,
        exception_class_path=WORKER_LOST_PATH,
        enqueued_at__gte=now - timedelta(days=1),
    )
    requeue = sum(1 for r in earlier if r.args_kwargs == row.args_kwargs) < MAX_LOST_REQUEUES
    note = (
        f"worker {worker or '?'} stopped while running this task (last heard from "
        f"{last_heard.isoformat()}); "
        + ("queued again" if requeue else f"not queued again: lost {MAX_LOST_REQUEUES} times")
    )
    with transaction.atomic():
        claimed = DBTaskResult.objects.filter(pk=row.pk, status=TaskResultStatus.RUNNING).update(
            status=TaskResultStatus.FAILED,
            finished_at=now,
            return_value=None,
            exception_class_path=WORKER_LOST_PATH,
            traceback=f"{WORKER_LOST_PATH}: {note}\n",
        )
        if not claimed:
            return False  # another worker recovered it a moment ago
        if requeue:
            try:
                args = row.args_kwargs
                again = row.task.enqueue(*args.get("args", []), **args.get("kwargs", {}))
            except Exception:  # a task path that no longer imports: failed is all we can say
                logger.exception("could not queue lost task %s again", row.pk)
                note = f"{note.removesuffix('queued again')}could not queue it again"
            else:
                note = f"{note} as {again.id}"
            DBTaskResult.objects.filter(pk=row.pk).update(traceback=f"{WORKER_LOST_PATH}: {note}\n")
    logger.warning("task %s (%s): %s", row.pk, row.task_path, note)
    return True


def sweep_pending_vectors() -> bool:
    """Queue `sync_pending_vectors` when passages lack a vector and nobody is on them."""
    busy = DBTaskResult.objects.filter(task_path__in=VECTOR_TASK_PATHS).filter(
        status__in=[TaskResultStatus.RUNNING, TaskResultStatus.READY]
    )
    if busy.filter(task_path=sync_pending_vectors.module_path).exists():
        return False  # one sweep queued (or scheduled for a retry) or running is enough
    if busy.filter(status=TaskResultStatus.RUNNING).exists() or busy.ready().exists():
        return False
    if not unclaimed_pending_exists(current_manifest().key):
        return False
    sync_pending_vectors.enqueue()
    logger.info("queued a sweep for vector work nobody was doing")
    return True


class Heartbeat(threading.Thread):
    """Says the worker is alive, renews its claims and runs the periodic sweep.

    A thread, so a task that embeds for minutes does not look like a dead worker. It has
    its own database connection (Django's are per thread); a database error skips one beat
    and drops the connection, so the next beat reconnects after a server restart.
    """

    def __init__(self, worker: ResilientWorker) -> None:
        super().__init__(name=f"heartbeat-{worker.worker_id}", daemon=True)
        self.worker = worker
        self.stopping = threading.Event()
        self.started_at = timezone.now()
        self.last_sweep = 0.0

    def beat(self) -> None:
        now = timezone.now()
        write_heartbeat(self.worker, started_at=self.started_at, now=now)
        renew_claims()
        if time.monotonic() - self.last_sweep >= SWEEP_SECONDS:
            self.last_sweep = time.monotonic()
            recover_lost_tasks(own_worker_id=None, now=now)
            sweep_pending_vectors()
            JobProgress.mark_vanished()

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    self.beat()
                except Exception:
                    logger.warning("worker heartbeat failed; retrying", exc_info=True)
                    connection.close()
                self.stopping.wait(HEARTBEAT_SECONDS)
        finally:
            connection.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=HEARTBEAT_SECONDS * 2)
        forget_heartbeat(self.worker)


def write_heartbeat(worker: ResilientWorker, *, started_at: datetime, now: datetime) -> None:
    """Create or renew `worker`'s heartbeat row, naming the task it runs now (if any)."""
    WorkerHeartbeat.objects.update_or_create(
        worker_id=worker.worker_id,
        defaults={"seen_at": now, "task_id": worker.current_task_id},
        create_defaults={
            "seen_at": now,
            "task_id": worker.current_task_id,
            "started_at": started_at,
            "hostname": socket.gethostname()[:255],
            "pid": os.getpid(),
        },
    )


def forget_heartbeat(worker: ResilientWorker) -> None:
    """A clean exit deletes the row: nobody needs to wait for this worker to go stale."""
    try:
        WorkerHeartbeat.objects.filter(worker_id=worker.worker_id).delete()
    except DatabaseError:
        logger.warning("could not remove the heartbeat of worker %s", worker.worker_id)


class ResilientWorker(Worker):
    """The stock worker, resumed after database errors instead of dying on them.

    With `beats_in_loop` (SQLite, where no heartbeat thread runs) it writes its own
    heartbeat row between polls and around each task, in the loop's thread and connection.
    """

    current_task_id = ""
    beats_in_loop = False
    _running = True
    _last_beat = float("-inf")
    _started_at: datetime | None = None

    @property
    def running(self) -> bool:
        # The stock loop reads this once per poll (outside its task-claiming transaction):
        # the one point between polls where a subclass runs code in the loop's own thread.
        if self.beats_in_loop:
            self.beat_in_loop()
        return self._running

    @running.setter
    def running(self, value: bool) -> None:
        self._running = value

    def shutdown(self, signum: int, frame: FrameType | None) -> None:
        # A signal handler may interrupt a query: no more beats from here on.
        self.beats_in_loop = False
        super().shutdown(signum, frame)

    def beat_in_loop(self, *, due_anyway: bool = False) -> None:
        """Renew the heartbeat row when `HEARTBEAT_SECONDS` passed (or `due_anyway`); a
        database error (SQLite busy) skips this beat, the next poll tries again."""
        if not due_anyway and time.monotonic() - self._last_beat < HEARTBEAT_SECONDS:
            return
        now = timezone.now()
        self._started_at = self._started_at or now
        try:
            write_heartbeat(self, started_at=self._started_at, now=now)
        except DatabaseError:
            logger.warning("worker %s: heartbeat skipped", self.worker_id, exc_info=True)
            return
        self._last_beat = time.monotonic()

    def run_task(self, db_task_result: DBTaskResult) -> None:
        self.current_task_id = str(db_task_result.pk)
        try:
            if self.beats_in_loop:
                self.beat_in_loop(due_anyway=True)  # the row names the task it runs
            super().run_task(db_task_result)
        finally:
            self.current_task_id = ""
            if self.beats_in_loop:
                self.beat_in_loop(due_anyway=True)

    def run(self) -> None:
        failures = 0
        last_failure = 0.0
        while self.running:
            try:
                if failures:
                    # Whatever this worker was running when the error struck is not
                    # running now; fail and requeue it rather than leave it RUNNING.
                    recover_lost_tasks(own_worker_id=self.worker_id)
                super().run()
                return
            except DatabaseError as exc:
                if time.monotonic() - last_failure > DB_BACKOFF_RESET_SECONDS:
                    failures = 0  # a new outage starts with the shortest wait again
                last_failure = time.monotonic()
                delay = DB_BACKOFF_SECONDS[min(failures, len(DB_BACKOFF_SECONDS) - 1)]
                failures += 1
                logger.warning(
                    "worker %s: database error (%s); retrying in %ss", self.worker_id, exc, delay
                )
                connection.close()
                time.sleep(delay)
                self.startup_delay = False


class Command(StockWorkerCommand):
    help = (
        "Run a database background worker (several may run on PostgreSQL: tasks of a dead "
        "worker are recovered, passages are claimed before embedding, database errors are "
        "retried)."
    )

    def handle(  # the stock command's options; its `handle` would build the stock Worker
        self,
        *,
        verbosity: int,
        queue_name: str,
        interval: float,
        batch: bool,
        backend_name: str,
        startup_delay: bool,
        reload: bool,
        max_tasks: int | None,
        worker_id: str,
        exclude_queues: str,
        **options: Any,
    ) -> None:
        self.configure_logging(verbosity)
        self.start_up()
        if reload and batch:
            logger.warning("--reload and --batch cannot be specified together; not reloading")
            reload = False
        queue_names = queue_name.split(",")
        excluded_queue_names = exclude_queues.split(",") if exclude_queues else []
        if excluded_queue_names and "*" not in queue_names:
            raise CommandError("--exclude-queues can only be used with --queue-name=*")
        worker = ResilientWorker(
            queue_names=queue_names,
            interval=interval,
            batch=batch,
            backend_name=backend_name,
            startup_delay=startup_delay,
            max_tasks=max_tasks,
            worker_id=worker_id,
            excluded_queue_names=excluded_queue_names,
        )
        if reload:
            if os.environ.get(DJANGO_AUTORELOAD_ENV) == "true":
                worker.configure_signals()  # only the child runs tasks
            run_with_reloader(lambda: run_worker(worker))
        else:
            worker.configure_signals()
            run_worker(worker)

    def start_up(self) -> None:
        """Re-chunk over-long passages, recover lost tasks, queue a vector sweep if needed;
        none of these keeps the worker from starting (health reports what stays wrong)."""
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
        except Exception:
            logger.exception("could not re-chunk over-long passages")
        try:
            recovered = recover_lost_tasks(all_others=not claims_enabled())
            if recovered:
                logger.info("recovered %d task(s) a dead worker left running", len(recovered))
        except Exception:
            logger.exception("could not recover the tasks of dead workers")
        try:
            JobProgress.mark_vanished()
        except Exception:
            logger.exception("could not check the running jobs")
        try:
            if enqueue_pending_sweep():
                logger.info("queued a sweep for pending vector work")
        except Exception:
            logger.exception("could not check for pending vector work")


def run_worker(worker: ResilientWorker) -> None:
    """Run the loop; where several workers may run, with a heartbeat beside it."""
    if not claims_enabled():
        worker.beats_in_loop = True
        try:
            worker.run()
        finally:
            forget_heartbeat(worker)
        return
    set_claim_owner(worker.worker_id)
    heartbeat = Heartbeat(worker)
    try:
        heartbeat.beat()  # the row exists before this worker claims anything
    except Exception:
        logger.warning("first heartbeat failed; the thread retries", exc_info=True)
    heartbeat.start()
    try:
        worker.run()
    finally:
        heartbeat.stop()
