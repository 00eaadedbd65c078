"""`manage.py lode_backup DEST`: back up the default install (SQLite) while lode runs — the
database (SQLite's online backup API), the uploads, the generated secret key and a manifest —
into a new folder, or a `.tar.gz` when DEST ends so. Not the vector store: a restore
rebuilds it from the passages. On PostgreSQL it refuses and names pg_dump
(`lode_site.backup`, docs/backup.md)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from lode_site.backup import BackupRefused, take_backup


class Command(BaseCommand):
    help = "Back up lode's database, uploads and settings (SQLite installs; online)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dest", type=Path, help="a new folder, or a file ending in .tar.gz")

    def handle(self, *args: object, **options: object) -> None:
        destination = Path(options["dest"])
        try:
            manifest = take_backup(destination)
        except BackupRefused as exc:
            raise CommandError(str(exc)) from exc
        key = "included" if manifest.secret_key_included else "from the environment (not included)"
        counts = ", ".join(f"{table} {count}" for table, count in manifest.counts.items())
        self.stdout.write(
            f"backup written to {destination}: lode {manifest.lode_version}, {counts}; "
            f"{manifest.uploads_files} uploaded files; secret key "
            f"{key}"
        )
