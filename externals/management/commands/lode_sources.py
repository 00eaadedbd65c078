"""`manage.py lode_sources list|reconcile|secret`: operate sources from the shell.

    lode_sources list                 every source: id, owner, kind, enabled, last scan
    lode_sources reconcile [--enqueue] [--source ID ...]
                                      rescan every enabled source (schedules, missed pushes)
    lode_sources secret ID            rotate a source's webhook secret and print it once
                                      (stdout), with how to sign deliveries (stderr)

`reconcile` is the safety net behind push-triggered re-indexing: run it
from cron and a push that never arrived is caught up. It runs `scan_source` inline (trigger
"reconcile"), one source after another, printing a line per source with its status and
counts; a source whose scan raises is reported and the others still run; a source another
scan is holding is reported "already scanning" and skipped (not a failure). Exit status 1 when
any scan failed or partly failed, so cron mail and CI notice. With `--enqueue` it only queues
`refresh_source` tasks for the worker and exits 0 once they are queued.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from externals.models import ScanRecord, Source

FAILED = 1
NOT_FOUND = 2


class Command(BaseCommand):
    help = "List sources, rescan every enabled source, or rotate a source's webhook secret."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="Every source with its last scan.")
        reconcile = sub.add_parser("reconcile", help="Rescan every enabled source.")
        reconcile.add_argument(
            "--enqueue",
            action="store_true",
            help="Queue refresh tasks for the worker instead of scanning here.",
        )
        reconcile.add_argument(
            "--source",
            type=int,
            action="append",
            dest="source_ids",
            help="Only this source id (repeatable).",
        )
        secret = sub.add_parser("secret", help="Rotate a source's webhook secret, print it once.")
        secret.add_argument("source_id", type=int)

    def handle(self, *args, action: str, **options) -> None:
        if action == "list":
            self._list()
        elif action == "reconcile":
            self._reconcile(enqueue=options["enqueue"], source_ids=options["source_ids"])
        else:
            self._secret(options["source_id"])

    def _list(self) -> None:
        for source in Source.objects.select_related("owner").order_by("id"):
            scan = source.scans.order_by("-started_at", "-id").first()
            last = (
                f"{scan.status} {scan.started_at:%Y-%m-%d %H:%M} ({scan.trigger})"
                if scan
                else "never scanned"
            )
            self.stdout.write(
                f"{source.pk}\t{source.owner.get_username()}\t{source.kind}\t"
                f"{'enabled' if source.enabled else 'disabled'}\t{source.name}\t"
                f"{source.location}\t{last}"
            )

    def _reconcile(self, *, enqueue: bool, source_ids: list[int] | None) -> None:
        sources = Source.objects.filter(enabled=True).select_related("owner").order_by("id")
        if source_ids:
            sources = sources.filter(pk__in=source_ids)
        failed = 0
        count = 0
        for source in sources:
            count += 1
            if enqueue:
                from externals.tasks import enqueue_refresh

                enqueue_refresh(source, "reconcile")
                self.stdout.write(f"{source.pk} {source.name}: queued")
                continue
            from externals.pipeline import ScanAlreadyRunning, scan_source

            try:
                scan = scan_source(source, trigger="reconcile")
            except ScanAlreadyRunning as exc:
                # One scan per source at a time: the running one covers it; not a failure.
                self.stdout.write(f"{source.pk} {source.name}: already scanning — {exc} Skipped.")
                continue
            except Exception as exc:  # one broken source must not stop the others
                failed += 1
                self.stderr.write(f"{source.pk} {source.name}: error {type(exc).__name__}: {exc}")
                continue
            if scan.status != ScanRecord.Status.OK:
                failed += 1
            self.stdout.write(f"{source.pk} {source.name}: {_scan_line(scan)}")
        verb = "queued" if enqueue else "scanned"
        self.stdout.write(f"{count} source(s) {verb}, {failed} failed")
        if failed:
            raise CommandError(f"{failed} scan(s) failed.", returncode=FAILED)

    def _secret(self, source_id: int) -> None:
        source = Source.objects.filter(pk=source_id).first()
        if source is None:
            raise CommandError(f"No source {source_id}.", returncode=NOT_FOUND)
        from externals.services import rotate_webhook_secret

        secret = rotate_webhook_secret(source)
        self.stderr.write(
            f"New webhook secret for source {source.pk} ({source.name}); it is not shown again.\n"
            f"POST /api/sources/{source.pk}/webhook with X-Lode-Timestamp: <unix seconds> and "
            "X-Lode-Signature: sha256=<hex HMAC-SHA256, keyed with the secret, of "
            '"<timestamp>.<raw body>">; the timestamp must be within five minutes of this '
            "server's clock. Optional X-Lode-Delivery: <unique id>."
        )
        self.stdout.write(secret)


def _scan_line(scan: ScanRecord) -> str:
    counts = (
        f"seen {scan.items_seen}, new {scan.items_new}, changed {scan.items_changed}, "
        f"unchanged {scan.items_unchanged}, pruned {scan.items_pruned}, "
        f"failed {scan.items_failed}, rejected {scan.items_rejected}, "
        f"skipped {scan.items_skipped}"
    )
    error = f" — {scan.error}" if scan.error else ""
    return f"{scan.status} ({counts}){error}"
