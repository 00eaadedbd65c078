"""Site-wide models: API tokens for scripts and agents, the MCP call log; progress of long
commands."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone

from spaces.models import Membership

logger = logging.getLogger(__name__)


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class ApiToken(models.Model):
    """A bearer token for `/api/` and the MCP server (`/mcp`, `manage.py lode_mcp`). Only its
    SHA-256 is stored; the raw token is shown once.

    A token covers all of its user's spaces, or only the `spaces` chosen for it (always
    within the user's memberships, re-checked on every use), and may `read` (search, open
    evidence, graph queries, list spaces) or also `ask`. It stops working when revoked or past
    `expires_at`. `/api/` takes only tokens that cover every space and may ask, because its
    endpoints read the user's whole audience; narrowed tokens are for the MCP server.
    """

    # `last_used_at` is written at most this often: writing it on every request made each
    # API search a write transaction (on SQLite, every API read took a turn at the one
    # write lock).
    LAST_USED_RESOLUTION = timedelta(minutes=1)

    class Scope(models.TextChoices):
        READ = "read", "Read: search, open evidence, graph queries"
        READ_ASK = "read_ask", "Read and ask questions"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.READ_ASK)
    # Empty: every space the user is a member of at the time of each request.
    spaces = models.ManyToManyField("spaces.Space", blank=True, related_name="+")
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"

    @property
    def can_ask(self) -> bool:
        return self.scope == self.Scope.READ_ASK

    def refusal(self, now: datetime | None = None) -> str:
        """Why this token may not be used now, in one sentence ("" when it may)."""
        now = now or timezone.now()
        if self.revoked_at is not None:
            return "This token was revoked; create a new one under Settings → Access tokens."
        if self.expires_at is not None and self.expires_at <= now:
            return "This token has expired; create a new one under Settings → Access tokens."
        if not self.user.is_active:
            return "This token's account is deactivated."
        return ""

    def mark_used(self) -> None:
        """Record a use now, unless one was recorded within `LAST_USED_RESOLUTION`."""
        now = timezone.now()
        if self.last_used_at is None or now - self.last_used_at >= self.LAST_USED_RESOLUTION:
            self.last_used_at = now
            ApiToken.objects.filter(pk=self.pk).update(last_used_at=now)

    @property
    def status(self) -> str:
        """"active", "expired" or "revoked", for lists of tokens."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return "expired"
        return "active"


def new_raw_token() -> str:
    return "lode_" + secrets.token_urlsafe(32)


def token_create(
    *,
    user: AbstractBaseUser,
    name: str,
    scope: str = ApiToken.Scope.READ_ASK,
    space_ids: Iterable[int] = (),
    expires_at: datetime | None = None,
) -> tuple[ApiToken, str]:
    """A new token for `user` and its raw secret (shown once, never stored). `space_ids`
    must be spaces the user is a member of (`ValidationError` otherwise); none means all."""
    space_ids = sorted(set(space_ids))
    member_of = set(
        Membership.objects.filter(user=user, space_id__in=space_ids).values_list(
            "space_id", flat=True
        )
    )
    if set(space_ids) - member_of:
        raise ValidationError("A token can only cover spaces you are a member of.")
    if scope not in ApiToken.Scope.values:
        raise ValidationError(f"Unknown scope {scope!r}: use read or read_ask.")
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationError("The expiry must be in the future.")
    raw = new_raw_token()
    with transaction.atomic():
        token = ApiToken(
            user=user, name=name, digest=token_digest(raw), scope=scope, expires_at=expires_at
        )
        token.full_clean(exclude=["digest"])
        token.save()
        token.spaces.set(space_ids)
    return token, raw


def token_revoke(token: ApiToken) -> None:
    """Revoke `token` now (kept, so its call log still names it); revoking twice is a no-op."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        ApiToken.objects.filter(pk=token.pk, revoked_at=None).update(revoked_at=token.revoked_at)


def token_expire(token: ApiToken, *, at: datetime | None = None) -> None:
    """Set `token` to expire at `at` (now by default)."""
    token.expires_at = at or timezone.now()
    ApiToken.objects.filter(pk=token.pk).update(expires_at=token.expires_at)


class McpCall(models.Model):
    """One MCP tool call: which token called which tool, how long it took and how many bytes
    it returned; a refused call keeps its one-sentence reason. Shown in the admin."""

    token = models.ForeignKey(
        ApiToken, on_delete=models.SET_NULL, null=True, blank=True, related_name="mcp_calls"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    tool = models.CharField(max_length=40)
    transport = models.CharField(max_length=8)  # "stdio" or "http"
    milliseconds = models.FloatField()
    response_bytes = models.PositiveIntegerField()
    refused = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "MCP call"

    def __str__(self) -> str:
        return f"{self.tool} {self.created_at:%Y-%m-%d %H:%M:%S}"


class JobProgress(models.Model):
    """How far one long management command has got, for the admin page beside the shell's
    progress bar (`lode_import_markdown`, `lode_reindex_vectors`).

    A row is created when the command starts and finished or failed when it ends; in
    between `done` is written at most once every `WRITE_INTERVAL_SECONDS`, so a run of
    thousands of items costs a handful of UPDATEs. Each write is its own statement in
    autocommit (the commands run outside a transaction), so another process (the admin)
    sees it at once. A process killed outright (SIGKILL, power loss) cannot say so; the row
    keeps the host and pid of the process that runs it, and `mark_vanished` (called by every
    `db_worker` on start and in its periodic sweep) marks a *running* row failed when that
    process no longer exists on this host. `updated_at` shows when it was last heard from.
    """

    WRITE_INTERVAL_SECONDS = 1.0
    MAX_ERROR_CHARS = 4000

    class Kind(models.TextChoices):
        IMPORT_MARKDOWN = "import_markdown", "Markdown import"
        REINDEX_VECTORS = "reindex_vectors", "Vector re-index"

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    kind = models.CharField(max_length=32, choices=Kind.choices)
    # The command's arguments in words (folder, owner, source; batch size), for telling
    # runs apart on the admin page.
    summary = models.CharField(max_length=500, blank=True, default="")
    started_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.RUNNING)
    error = models.TextField(blank=True, default="")
    # Which process runs the job, so a vanished one can be told from a slow one.
    hostname = models.CharField(max_length=255, blank=True, default="")
    pid = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        verbose_name = "job progress"
        verbose_name_plural = "job progress"

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.started_at:%Y-%m-%d %H:%M} ({self.status})"

    @property
    def percent(self) -> int | None:
        """Whole percent done (0–100), or None while the total is not known yet."""
        if self.total == 0:
            return 100 if self.status == self.Status.DONE else None
        return min(100, self.done * 100 // self.total)

    @classmethod
    def start(cls, *, kind: str, summary: str = "", total: int = 0) -> JobProgress:
        """A new running row, written at once."""
        return cls.objects.create(
            kind=kind,
            summary=summary[:500],
            total=total,
            hostname=socket.gethostname()[:255],
            pid=os.getpid(),
        )

    @classmethod
    def mark_vanished(cls) -> int:
        """Mark failed the running jobs of this host whose process is gone; returns how many.

        Only this host's rows: another machine's pids mean nothing here. A reused pid makes
        a dead job look alive (it stays *running*, as before), never the reverse.
        """
        host = socket.gethostname()[:255]
        vanished = [
            job
            for job in cls.objects.filter(status=cls.Status.RUNNING, hostname=host)
            .exclude(pid=None)
            .only("pk", "pid")
            if not _process_exists(job.pid)
        ]
        for job in vanished:
            cls.objects.filter(pk=job.pk, status=cls.Status.RUNNING).update(
                status=cls.Status.FAILED,
                finished_at=timezone.now(),
                error=f"process {job.pid} on {host} ended without finishing (killed?)",
            )
        return len(vanished)

    def report(self, done: int, total: int | None = None) -> None:
        """Record `done` (and `total` when it changed); written when the total changed or
        the last write is `WRITE_INTERVAL_SECONDS` old, else kept for the next write."""
        total_changed = total is not None and total != self.total
        if total is not None:
            self.total = total
        self.done = done
        # A row never written by this object (just created or loaded) writes at once.
        written_at = getattr(self, "_written_at", float("-inf"))
        if total_changed or time.monotonic() - written_at >= self.WRITE_INTERVAL_SECONDS:
            self._write(done=self.done, total=self.total)

    def advance(self, count: int = 1) -> None:
        """`count` more items done (the shape of tqdm's `update`)."""
        self.report(self.done + count)

    def finish(self) -> None:
        """Mark the run done. Work that grew while it ran (notes saved during a re-index)
        raises the total to what was done, so a finished row never reads as short."""
        self.total = max(self.total, self.done)
        self.status = self.Status.DONE
        self.finished_at = timezone.now()
        self._write(
            done=self.done, total=self.total, status=self.status, finished_at=self.finished_at
        )

    def fail(self, error: BaseException) -> None:
        """Mark the run failed with `error`'s type and message, keeping how far it got."""
        self.status = self.Status.FAILED
        self.finished_at = timezone.now()
        message = str(error)
        text = f"{type(error).__name__}: {message}" if message else type(error).__name__
        self.error = text[: self.MAX_ERROR_CHARS]
        self._write(
            done=self.done,
            total=self.total,
            status=self.status,
            finished_at=self.finished_at,
            error=self.error,
        )

    def _write(self, **fields: object) -> None:
        # An UPDATE of the named columns only: cheap, and it never overwrites the row
        # with stale values of the others.
        self.updated_at = timezone.now()
        type(self).objects.filter(pk=self.pk).update(updated_at=self.updated_at, **fields)
        self._written_at = time.monotonic()


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


@contextlib.contextmanager
def job_progress(*, kind: str, summary: str = "", total: int = 0) -> Iterator[JobProgress]:
    """A `JobProgress` row for the `with` block: finished when the block ends, failed with
    the error when it raises (Ctrl-C included); the error is then raised on unchanged."""
    job = JobProgress.start(kind=kind, summary=summary, total=total)
    try:
        yield job
    except BaseException as exc:
        try:
            job.fail(exc)
        except Exception:  # e.g. the database went away: the original error matters more
            logger.exception("could not record the failure of job %s", job.pk)
        raise
    job.finish()
