"""`manage.py lode_import_markdown DIR [--user NAME] [--source NAME] [--space ID]`: import a
folder of markdown files as notes (new ones in space ID, by default the user's personal one).

Each `.md` file becomes one note whose `external_key` is its path relative to DIR, so running
the import again updates notes in place (a new version when the file changed, nothing when it
did not) instead of duplicating them. Files lode cannot store faithfully (not UTF-8, over
`LODE_MAX_NOTE_BYTES`, NUL bytes, symbolic links) are skipped with a reason and the import
goes on. Every version written records the file's absolute path and the SHA-256 of its raw
bytes (verified opening re-reads the file and compares); every note records the source name
(DIR's folder name unless `--source` names it), for the `source:` search filter.

A folder `manage.py lode_export` wrote (it holds `.lode/export.json`) is read back losslessly
instead, by `notes.markdown_import`: each file's front matter names its note, space and tags,
and re-importing never duplicates (one result line per file).

Progress shows in the shell (tqdm on stderr) and on the admin page "Job progress": the
command keeps a `lode_site.models.JobProgress` row of files done out of files found,
finished at the end or failed with the error.

Notes are written by `notes.services.note_import` (one transaction per file, like a note
saved on its page). The command-line pieces both import commands share (the user, the
`--source` option, the tally and its report) live here as plain functions; `lode_load_beir`
writes through the batched `notes.services.notes_import` instead.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import BaseCommand, CommandError, CommandParser
from markdown_it import MarkdownIt
from tqdm import tqdm

from lode_site.models import JobProgress, job_progress
from notes import markdown_import, services
from notes.sources import SourceRefused, read_source_bytes, sha256_bytes
from retrieval import eligibility
from spaces.models import Role

DEFAULT_USER = "eval"
MAX_KEY_CHARS = 500  # Document.external_key max_length
MAX_SOURCE_CHARS = 200  # Document.source_name max_length
MAX_SOURCE_PATH_CHARS = 1000  # Version.source_path max_length
MARKDOWN_SUFFIX = ".md"

# Block structure only (the inline pass is not needed to find headings);
# see retrieval/index/chunking.py.
_BLOCK_MD = MarkdownIt("commonmark").disable("inline")
_INLINE_MD = MarkdownIt("commonmark")


class Skip(Exception):
    """A file or record that cannot be imported; the message is the reason shown to the user."""


@dataclass
class ImportStats:
    """What an import did. `seconds` is wall time of the whole run, reading included."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, reason)
    passages: int = 0  # passages written (created and updated notes only)
    seconds: float = 0.0

    @property
    def notes(self) -> int:
        """Notes looked at and kept (created, updated or found unchanged)."""
        return self.created + self.updated + self.unchanged

    def add(self, imported: services.Imported) -> None:
        """Count one note's outcome (or keep its skip reason) and its passages."""
        if imported.outcome is None:
            self.skipped.append((imported.external_key, imported.reason))
            return
        setattr(self, imported.outcome, getattr(self, imported.outcome) + 1)
        self.passages += imported.passages

    def summary(self) -> str:
        seconds = max(self.seconds, 1e-9)
        return (
            f"created {self.created}, updated {self.updated}, unchanged {self.unchanged}, "
            f"skipped {len(self.skipped)} in {self.seconds:.1f} s "
            f"({self.notes / seconds:.1f} notes/s); "
            f"{self.passages} passages written ({self.passages / seconds:.1f} passages/s)"
        )


def ensure_user(username: str) -> AbstractBaseUser:
    """The user to import for, created with an unusable password if absent.

    The user can never log in with a password until an admin sets one: import and evaluation
    users are owners of data, not people.
    """
    User = get_user_model()
    user, created = User.objects.get_or_create(**{User.USERNAME_FIELD: username})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def clip_title(title: str) -> str:
    """A note title within `services.MAX_TITLE_CHARS`; the body keeps the full text."""
    title = " ".join(title.split())
    if len(title) > services.MAX_TITLE_CHARS:
        title = title[: services.MAX_TITLE_CHARS - 1].rstrip() + "\u2026"
    return title


def first_heading(text: str) -> str:
    """Plain text of the first level-1 heading in markdown `text`, or "" if there is none.

    Parsed with markdown-it so a `# comment` inside a code fence is not taken for a title.
    """
    tokens = _BLOCK_MD.parse(text)
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag == "h1":
            inline = tokens[index + 1]
            parts: list[str] = []
            for child in _INLINE_MD.parseInline(inline.content)[0].children or ():
                if child.type in ("text", "code_inline", "image"):
                    parts.append(child.content)
                elif child.type in ("softbreak", "hardbreak"):
                    parts.append(" ")
            heading = " ".join("".join(parts).split())
            if heading:
                return heading
    return ""


def markdown_files(root: Path) -> list[Path]:
    """Every `.md` file under `root`, sorted, without following symlinked directories."""
    found: list[Path] = []
    for folder, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        found.extend(
            Path(folder) / name for name in filenames if name.lower().endswith(MARKDOWN_SUFFIX)
        )
    return sorted(found)


def read_markdown_bytes(path: Path) -> bytes:
    """The raw bytes of one markdown file, or `Skip` saying why lode will not read it.

    The rules (no symbolic links, the size limit) live in `notes.sources`, shared with
    verified evidence opening, which re-reads the file later.
    """
    try:
        return read_source_bytes(path)
    except SourceRefused as exc:
        raise Skip(str(exc)) from None


def decode_markdown(data: bytes) -> str:
    """The text of a markdown file's bytes, or `Skip` saying why lode will not store it."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Skip(f"not valid UTF-8 (byte {exc.start})") from None
    if "\x00" in text:
        raise Skip("contains NUL bytes")
    return text.removeprefix("\ufeff")  # a BOM is an encoding marker, not content


def import_markdown(
    root: Path,
    *,
    owner: AbstractBaseUser,
    progress: bool = True,
    source_name: str | None = None,
    on_progress: Callable[[int, int], object] | None = None,
    space: int | None = None,
) -> ImportStats:
    """Import every markdown file under `root` for `owner`; see the module docstring.
    New notes go to the space with id `space` (None: the owner's personal space).

    `source_name` defaults to the folder's name. `on_progress(done, total)` is called once
    the files are listed (done 0) and after each file, imported or skipped.
    """
    started = time.perf_counter()
    stats = ImportStats()
    # Absolute and free of symlinks, so each version's `source_path` names the file itself.
    root = root.resolve()
    if source_name is None:
        source_name = root.name[:MAX_SOURCE_CHARS]
    files = markdown_files(root)
    if on_progress is not None:
        on_progress(0, len(files))
    for done, path in enumerate(
        tqdm(files, unit="file", file=sys.stderr, disable=not progress), start=1
    ):
        key = path.relative_to(root).as_posix()
        try:
            if len(key) > MAX_KEY_CHARS:
                raise Skip(f"the path is over {MAX_KEY_CHARS} characters")
            if len(str(path)) > MAX_SOURCE_PATH_CHARS:
                raise Skip(f"the absolute path is over {MAX_SOURCE_PATH_CHARS} characters")
            data = read_markdown_bytes(path)
            body = decode_markdown(data)
            title = clip_title(first_heading(body) or path.stem)
            note = services.NoteImport(
                external_key=key,
                title=title,
                body=body,
                source_path=str(path),
                source_sha256=sha256_bytes(data),
            )
            imported = services.note_import(
                owner=owner, note=note, source_name=source_name, space=space
            )
        except Skip as exc:
            stats.skipped.append((key, str(exc)))
        except OSError as exc:
            stats.skipped.append((key, f"cannot read: {exc.strerror or exc}"))
        else:
            stats.add(imported)
        if on_progress is not None:
            on_progress(done, len(files))
    stats.seconds = time.perf_counter() - started
    return stats


def add_import_arguments(parser: CommandParser) -> None:
    """The options both import commands take: `--user`, `--source`, `--space`,
    `--no-progress`."""
    parser.add_argument(
        "--user", default=DEFAULT_USER, help=f"owner of the notes (default {DEFAULT_USER})"
    )
    parser.add_argument(
        "--source",
        default=None,
        help="source name for the `source:` search filter (default: DIR's folder name)",
    )
    parser.add_argument(
        "--space",
        type=int,
        default=None,
        help="id of the space new notes go to; the user must be an editor or admin there "
        "(default: the user's personal space)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def source_option(value: object) -> str | None:
    """The `--source` option checked: None when not given, else 1 to `MAX_SOURCE_CHARS`
    characters once stripped (a `CommandError` otherwise)."""
    if value is None:
        return None
    source = str(value).strip()
    if not source or len(source) > MAX_SOURCE_CHARS:
        raise CommandError(f"--source needs 1 to {MAX_SOURCE_CHARS} characters")
    return source


def space_option(value: object, owner: AbstractBaseUser) -> int | None:
    """The `--space` option checked: None when not given, else the id of a space where
    `owner` is an editor or admin (a `CommandError` otherwise, naming the reason)."""
    if value is None:
        return None
    space_id = int(str(value))
    role = eligibility.role_in(owner.pk, space_id)
    if role is None:
        raise CommandError(
            f"--space {space_id}: no such space, or {owner.get_username()} is not a member"
        )
    if not eligibility.can(owner.pk, space_id, Role.EDITOR):
        raise CommandError(
            f"--space {space_id}: {owner.get_username()} is a {role} there; importing needs "
            "editor or admin"
        )
    return space_id


def report(command: BaseCommand, stats: ImportStats) -> None:
    """Skip reasons to stderr, then the one-line summary to stdout."""
    for name, reason in stats.skipped:
        command.stderr.write(f"skipped {name}: {reason}")
    command.stdout.write(stats.summary())


class Command(BaseCommand):
    help = "Import every .md file under DIR (recursively) as a note; re-running updates."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", type=Path, help="folder of markdown files")
        add_import_arguments(parser)

    def handle(self, *args: object, **options: object) -> None:
        root = Path(options["dir"])
        if not root.is_dir():
            raise CommandError(f"{root} is not a folder")
        if markdown_import.is_export_folder(root):
            self._import_export(root, options)
            return
        source = source_option(options["source"])
        owner = ensure_user(str(options["user"]))
        space = space_option(options["space"], owner)
        summary = f"{root.resolve()} for {owner.get_username()}"
        if source is not None:
            summary += f", source {source}"
        with job_progress(kind=JobProgress.Kind.IMPORT_MARKDOWN, summary=summary) as job:
            stats = import_markdown(
                root.resolve(),
                owner=owner,
                progress=not options["no_progress"],
                source_name=source,
                on_progress=job.report,
                space=space,
            )
        report(self, stats)

    def _import_export(self, root: Path, options: dict[str, object]) -> None:
        """A lode export (`lode_export`): each file's front matter names its note and space."""
        if options["space"] is not None or options["source"] is not None:
            raise CommandError(
                "this folder is a lode export: its files name their spaces and sources, so "
                "--space and --source do not apply"
            )
        owner = ensure_user(str(options["user"]))
        summary = f"{root.resolve()} (a lode export) for {owner.get_username()}"
        with job_progress(kind=JobProgress.Kind.IMPORT_MARKDOWN, summary=summary) as job:
            try:
                result = markdown_import.import_export_folder(
                    root, user=owner, on_progress=job.report
                )
            except markdown_import.NotAnExport as exc:
                raise CommandError(str(exc)) from exc
        for line in result.files:
            stream = self.stderr if line.outcome == "skipped" else self.stdout
            stream.write(line.line())
        self.stdout.write(result.summary())
