"""`manage.py lode_restore SRC [--force] [--skip-vectors]`: restore a `lode_backup` (folder
or `.tar.gz`) into this install (SQLite), then rebuild the derived indexes from the restored
passages and print `lode_index health`.

Refused: a backup made by a newer lode (migrations this code lacks), an install that holds
accounts or notes already or whose server is running (unless `--force`; what is replaced is
kept beside it), and PostgreSQL (use pg_restore, docs/deploy.md). `--skip-vectors` leaves
embedding to the worker (`db_worker` picks the pending passages up when it starts).
"""

from __future__ import annotations

from pathlib import Path

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from lode_site.backup import BackupRefused, restore_backup


class Command(BaseCommand):
    help = "Restore a lode_backup, rebuild the derived indexes, print index health."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("src", type=Path, help="a backup folder or .tar.gz file")
        parser.add_argument(
            "--force", action="store_true", help="replace an install that holds data"
        )
        parser.add_argument(
            "--skip-vectors",
            action="store_true",
            help="do not embed now; the worker embeds the passages when it runs",
        )

    def handle(self, *args: object, **options: object) -> None:
        vectors = not options["skip_vectors"]
        try:
            report = restore_backup(
                Path(options["src"]), force=bool(options["force"]), vectors=vectors
            )
        except BackupRefused as exc:
            raise CommandError(str(exc)) from exc
        counts = ", ".join(f"{table} {count}" for table, count in report.counts.items())
        self.stdout.write(
            f"restored the backup of {report.manifest.created_at} "
            f"(lode {report.manifest.lode_version}): {counts}"
        )
        for path in report.kept_aside:
            self.stdout.write(f"kept the replaced copy at {path}")
        if report.repair is not None:
            repaired = report.repair.vectors
            if repaired.error:
                embedded = f"vectors not rebuilt ({repaired.error}): run `lode_index repair`"
            elif vectors:
                embedded = f"{repaired.embedded} passages embedded"
            else:
                embedded = "the worker embeds the passages (--skip-vectors)"
            self.stdout.write(f"indexes rebuilt from the restored passages; {embedded}")
        health = ["health"] + ([] if vectors else ["--skip-vectors"])
        call_command("lode_index", *health, stdout=self.stdout, stderr=self.stderr)
