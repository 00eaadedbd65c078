"""`manage.py lode_export DEST --user NAME [--versions]` or `lode_export DEST --all`: write
the notes a user may see (their own and their spaces'), or with `--all` every live
document, as a folder of Markdown files Obsidian opens, or a zip when DEST ends in `.zip`.

The layout and front matter are `notes.export`'s; `manage.py lode_import_markdown DEST`
reads the folder back (`notes.markdown_import`). DEST must not exist yet (a folder may
exist if empty): an export never overwrites files.
"""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from notes.export import export_to_path


class Command(BaseCommand):
    help = "Export notes as Markdown files with front matter (a folder, or a .zip)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dest", type=Path, help="a new folder, or a file ending in .zip")
        who = parser.add_mutually_exclusive_group(required=True)
        who.add_argument("--user", help="export what this user may see")
        who.add_argument(
            "--all", action="store_true", help="export every live document (all users)"
        )
        parser.add_argument(
            "--versions",
            action="store_true",
            help="also write every version of every note under .lode/versions/",
        )

    def handle(self, *args: object, **options: object) -> None:
        user = None
        if options["user"]:
            User = get_user_model()
            user = User.objects.filter(**{User.USERNAME_FIELD: options["user"]}).first()
            if user is None:
                raise CommandError(f"no user named {options['user']!r}")
        try:
            report = export_to_path(
                Path(options["dest"]),
                user=user,
                everything=bool(options["all"]),
                versions=bool(options["versions"]),
            )
        except (FileExistsError, NotADirectoryError, PermissionError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{report.summary()} → {options['dest']}")
