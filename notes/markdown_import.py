"""Import an export folder (`notes.export`) back: titles, tags, spaces by name, bodies byte
for byte, and every version in order when the export holds them.

Which note a file is, in this order (so importing the same folder again never duplicates):

1. the note with id `lode_id` created at `created` (the install the file came from);
2. for a `lode_key` of the form `lode:<id>@<created>` (a note that came to this install by
   an earlier import), that id and creation time here;
3. the importing user's note whose import key (`Document.external_key`) is the file's
   `lode_key`, or `lode:<lode_id>@<created>` when it has none;
4. otherwise a new note, created under that key, in the file's space (by name: the user's
   personal space for a personal one; for a shared one the first space of that name where
   the user is an editor or admin, created when they are in none of that name).

A file without lode's front matter (a note written in Obsidian) is a new note keyed by its
path in the folder, titled by its file name, in the space of its top folder.

A note that exists already is never rolled back. A file whose title and body equal the
note's head writes nothing but sets the tags; one equal to an older version writes nothing
(the export is older than lode's note, whose newer version stays the head); any other text
becomes a new head version on top of whatever the head is now, so a version saved in lode
after the export stays in the history, one step back, and the report says so. History files
(`.lode/versions`) are read only when the note is created by this import.

New notes with a single version are written in batches through the services' bulk import
(`notes_import`), as a large data set is; the rest one by one, each like a note saved in lode.

Every file is read and judged on its own, in its own transaction: broken UTF-8, NUL bytes,
a file over the note limit, unreadable front matter, a symbolic link are refused with the
reason and the import goes on. Externals and annotations in the export are skipped with a
reason: a mirrored source is re-added, not imported, and an annotation needs its snapshot.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from notes import export
from notes.front_matter import (
    MAX_FRONT_MATTER_CHARS,
    FrontMatterError,
    FrontMatterValue,
    split_front_matter,
)
from notes.models import Document, Version
from notes.services import (
    MAX_TITLE_CHARS,
    NoteImport,
    may_change,
    note_create,
    note_update,
    notes_import,
    parse_tags,
    version_create,
)
from notes.sources import SourceRefused, read_source_file
from retrieval.eligibility import member_space_ids, role_in
from spaces.models import Role, Space, personal_space_id, role_at_least
from spaces.services import space_create

MAX_MANIFEST_BYTES = 1_000_000
MAX_KEY_CHARS = 500  # Document.external_key
MAX_SOURCE_CHARS = 200  # Document.source_name
# Folders of a vault that are not notes: lode's own, Obsidian's settings and trash.
HIDDEN_PREFIX = "."
# New notes written per bulk statement batch.
BATCH = 200

Outcome = Literal["created", "updated", "unchanged", "skipped"]


class NotAnExport(Exception):
    """The folder is not a lode export (no readable `.lode/export.json`)."""


class FileRefused(Exception):
    """One file cannot be imported; the message is the reason shown for it."""


@dataclass(frozen=True)
class FileResult:
    """What importing one file did: its outcome, the note (id) it went to, and details."""

    path: str
    outcome: Outcome
    document_id: int | None = None
    detail: str = ""

    def line(self) -> str:
        note = f" (note {self.document_id})" if self.document_id else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.outcome} {self.path}{note}{detail}"


@dataclass
class ImportReport:
    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, outcome: Outcome) -> int:
        return sum(1 for result in self.files if result.outcome == outcome)

    def summary(self) -> str:
        return (
            f"created {self.count('created')}, updated {self.count('updated')}, unchanged "
            f"{self.count('unchanged')}, skipped {self.count('skipped')} "
            f"in {self.seconds:.1f} s"
        )


def is_export_folder(root: Path) -> bool:
    """Whether `root` holds a lode export's manifest."""
    return (root / export.MANIFEST_PATH).is_file()


def read_manifest(root: Path) -> dict:
    """The export's manifest, checked: lode's format, a version this code reads."""
    try:
        data = read_source_file(root / export.MANIFEST_PATH, limit=MAX_MANIFEST_BYTES).data
        manifest = json.loads(data.decode("utf-8"))
    except (OSError, SourceRefused, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotAnExport(f"{export.MANIFEST_PATH} cannot be read: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != export.FORMAT:
        raise NotAnExport(f"{export.MANIFEST_PATH} is not a lode export's manifest")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > export.FORMAT_VERSION:
        raise NotAnExport(
            f"the export's format version is {version!r}; this lode reads up to "
            f"{export.FORMAT_VERSION} (upgrade lode to import it)"
        )
    return manifest


def note_files(root: Path) -> list[Path]:
    """Every `.md` file of the vault, sorted, leaving out hidden folders (`.lode`,
    `.obsidian`, `.trash`) and never following symlinked folders."""
    found: list[Path] = []
    for folder, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(HIDDEN_PREFIX))
        found.extend(
            Path(folder) / name
            for name in filenames
            if name.lower().endswith(export.MARKDOWN) and not name.startswith(HIDDEN_PREFIX)
        )
    return sorted(found)


def read_text(path: Path, *, extra: int = MAX_FRONT_MATTER_CHARS) -> str:
    """A file's text, or `FileRefused` saying why not: a link or not a regular file, over
    the note limit (plus room for front matter), not UTF-8, or binary (NUL bytes)."""
    try:
        data = read_source_file(path, limit=settings.LODE_MAX_NOTE_BYTES + extra).data
    except SourceRefused as exc:
        raise FileRefused(str(exc)) from None
    except OSError as exc:
        raise FileRefused(f"cannot read: {exc.strerror or exc}") from None
    if b"\x00" in data:
        raise FileRefused("a binary file (it holds NUL bytes), not Markdown")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRefused(f"not valid UTF-8 (byte {exc.start})") from None


# --- reading one exported file --------------------------------------------------------------


@dataclass(frozen=True)
class ExportedNote:
    """A note file of the export, its front matter checked."""

    lode_id: int
    title: str
    body: str
    tags: tuple[str, ...]
    space: str
    space_kind: str
    created: datetime
    updated: datetime | None
    version: int
    key: str  # the import key: the file's lode_key, or lode:<id>@<created>
    source: str


def _text(fields: dict[str, FrontMatterValue], name: str, *, required: bool = True) -> str:
    value = fields.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise FileRefused(f"front matter: {name} must be text")
    return value


def _integer(fields: dict[str, FrontMatterValue], name: str) -> int:
    value = fields.get(name)
    if not isinstance(value, int) or value < 1:
        raise FileRefused(f"front matter: {name} must be a whole number above 0")
    return value


def _time(value: str, name: str) -> datetime:
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        raise FileRefused(f"front matter: {name} is not a date and time ({value!r})") from None
    if stamp.tzinfo is None:
        raise FileRefused(f"front matter: {name} has no time zone ({value!r})")
    return stamp


def identity_key(lode_id: int, created: datetime) -> str:
    """The import key of an exported note that had none: its id and creation instant."""
    return f"lode:{lode_id}@{created.isoformat()}"


def parse_key(key: str) -> tuple[int, datetime] | None:
    """(id, created) of an identity key, or None for any other key."""
    if not key.startswith("lode:") or "@" not in key:
        return None
    raw_id, _, raw_time = key[5:].partition("@")
    try:
        return int(raw_id), datetime.fromisoformat(raw_time)
    except ValueError:
        return None


def exported_note(fields: dict[str, FrontMatterValue], body: str) -> ExportedNote:
    lode_id = _integer(fields, "lode_id")
    title = _text(fields, "title").strip()
    if not title or len(title) > MAX_TITLE_CHARS:
        raise FileRefused(f"front matter: title must be 1 to {MAX_TITLE_CHARS} characters")
    raw_tags = fields.get("tags", [])
    if isinstance(raw_tags, str):
        raw_tags = [raw_tags]
    if not isinstance(raw_tags, list):
        raise FileRefused("front matter: tags must be a list")
    try:
        tags = parse_tags([str(tag) for tag in raw_tags])
    except ValidationError as exc:
        raise FileRefused(f"front matter: {' '.join(exc.messages)}") from None
    created = _time(_text(fields, "created"), "created")
    updated_raw = _text(fields, "updated", required=False)
    key = _text(fields, "lode_key", required=False) or identity_key(lode_id, created)
    space_kind = _text(fields, "space_kind", required=False) or export.SPACE_SHARED
    if space_kind not in (export.SPACE_PERSONAL, export.SPACE_SHARED):
        raise FileRefused(f"front matter: space_kind is {space_kind!r}, not personal or shared")
    if len(key) > MAX_KEY_CHARS:
        raise FileRefused(f"front matter: lode_key is over {MAX_KEY_CHARS} characters")
    return ExportedNote(
        lode_id=lode_id,
        title=title,
        body=body,
        tags=tags,
        space=_text(fields, "space").strip() or export.safe_stem(""),
        space_kind=space_kind,
        created=created,
        updated=_time(updated_raw, "updated") if updated_raw else None,
        version=_integer(fields, "version") if "version" in fields else 1,
        key=key,
        source=_text(fields, "source", required=False)[:MAX_SOURCE_CHARS],
    )


@dataclass(frozen=True)
class HistoryVersion:
    number: int
    title: str
    body: str
    created: datetime


def read_history(root: Path, lode_id: int) -> tuple[list[HistoryVersion], str]:
    """The note's version files in order, or ([], why they are not used): numbered 1..n
    without a gap, each naming this note and its own number, its body hashing to its sha256."""
    folder = root / export.VERSIONS_FOLDER / str(lode_id)
    if not folder.is_dir():
        return [], ""
    history: list[HistoryVersion] = []
    names = sorted(
        (p for p in folder.iterdir() if p.suffix == export.MARKDOWN), key=lambda p: p.stem
    )
    try:
        numbers = sorted(int(p.stem) for p in names)
    except ValueError:
        return [], "the history folder holds a file not named <number>.md"
    if numbers != list(range(1, len(numbers) + 1)):
        return [], "the history's version numbers have gaps"
    for number in numbers:
        path = folder / f"{number}{export.MARKDOWN}"
        try:
            split = split_front_matter(read_text(path))
            if split is None:
                return [], f"version {number} has no front matter"
            fields, body = split
            if fields.get("lode_id") != lode_id or fields.get("version") != number:
                return [], f"version {number}'s front matter names another note or number"
            if hashlib.sha256(body.encode("utf-8")).hexdigest() != fields.get("sha256"):
                return [], f"version {number}'s text does not match its sha256"
            title = _text(fields, "title").strip()
            created = _time(_text(fields, "created"), "created")
        except (FileRefused, FrontMatterError) as exc:
            return [], f"version {number}: {exc}"
        history.append(HistoryVersion(number, title, body, created))
    return history, ""


# --- finding or making the note -----------------------------------------------------------


def find_note(user: AbstractBaseUser, note: ExportedNote) -> Document | None:
    """The note this file is, if this install has it (see the module docstring)."""
    visible = member_space_ids(user.pk)
    identities = [(note.lode_id, note.created)]
    if (from_key := parse_key(note.key)) is not None:
        identities.append(from_key)
    for pk, created in identities:
        found = Document.objects.filter(
            pk=pk, created_at=created, kind=Document.Kind.NOTE, space_id__in=visible
        ).first()
        if found is not None:
            return found
    return Document.objects.filter(owner=user, external_key=note.key).first()


def space_for(user: AbstractBaseUser, *, name: str, kind: str) -> int:
    """Where a new note of this space goes: the user's personal space for a personal one;
    else the first space named `name` where the user may write, created when they are in
    none of that name. Being only a viewer of such a space is a `FileRefused`."""
    if kind == export.SPACE_PERSONAL:
        return personal_space_id(user.pk)
    named = Space.objects.filter(
        name=name, personal_of__isnull=True, memberships__user_id=user.pk
    ).order_by("pk")
    viewer_only = False
    for space in named:
        if role_at_least(role_in(user.pk, space.pk), Role.EDITOR):
            return space.pk
        viewer_only = True
    if viewer_only:
        raise FileRefused(f"you are a viewer in the space “{name}” and cannot write notes there")
    try:
        return space_create(by=user, name=name).pk
    except ValidationError as exc:
        raise FileRefused(f"space “{name}”: {' '.join(exc.messages)}") from None


def _check_writable(user: AbstractBaseUser, existing: Document) -> None:
    """`FileRefused` unless `user` may write the live note `existing`."""
    if existing.deleted_at is not None:
        raise FileRefused("the note is in lode's trash; restore it there to import this file")
    if not may_change(user, existing):
        raise FileRefused("you may not change this note (you are not an editor of its space)")


def _save(
    document: Document, user: AbstractBaseUser, note: ExportedNote, *, base_version_id: int
) -> Version:
    """The file's title, body and tags on top of `base_version_id` (a version only when the
    text differs; `note_update` decides)."""
    return note_update(
        document=document,
        user=user,
        base_version_id=base_version_id,
        title=note.title,
        body=note.body,
        tags=note.tags,
    )


def _create(
    user: AbstractBaseUser, note: ExportedNote, history: list[HistoryVersion], space_id: int
) -> Document:
    """A new note holding `history` in order (when given), then the file's text if it
    differs from the last version; dates as exported."""
    first = history[0] if history else None
    document = note_create(
        owner=user,
        title=first.title if first else note.title,
        body=first.body if first else note.body,
        tags=note.tags,
        space=space_id,
        external_key=note.key,
        source_name=note.source,
    )
    locked = Document.objects.select_for_update().get(pk=document.pk)
    for version in history[1:]:
        version_create(document=locked, title=version.title, body=version.body, user=user)
    _save(locked, user, note, base_version_id=locked.head_id)
    for version in history:
        Version.objects.filter(document=document, number=version.number).update(
            created_at=version.created
        )
    Document.objects.filter(pk=document.pk).update(
        created_at=note.created, updated_at=note.updated or note.created
    )
    return document


def import_note(root: Path, user: AbstractBaseUser, path: str, note: ExportedNote) -> FileResult:
    """Import one exported note file (in the caller's transaction)."""
    existing = find_note(user, note)
    if existing is None:
        history, why_not = read_history(root, note.lode_id)
        space_id = space_for(user, name=note.space, kind=note.space_kind)
        document = _create(user, note, history, space_id)
        count = Version.objects.filter(document=document).count()
        detail = f"{count} version{'s' if count != 1 else ''}"
        if why_not:
            detail += f"; history not restored: {why_not}"
        return FileResult(path, "created", document.pk, detail)
    _check_writable(user, existing)
    head = Version.objects.get(pk=existing.head_id)
    if (head.title, head.body) == (note.title, note.body):
        current = tuple(
            existing.documenttag_set.filter(from_body=False)
            .order_by("tag__name")
            .values_list("tag__name", flat=True)
        )
        if tuple(sorted(note.tags)) == current:
            return FileResult(path, "unchanged", existing.pk)
        _save(existing, user, note, base_version_id=head.pk)
        return FileResult(path, "updated", existing.pk, "tags")
    # Matched by the body's SHA-256 first (short to compare), then on the text itself.
    digest = hashlib.sha256(note.body.encode("utf-8")).hexdigest()
    older = next(
        (
            number
            for number, title, body in Version.objects.filter(document=existing, sha256=digest)
            .order_by("-number")
            .values_list("number", "title", "body")
            if (title, body) == (note.title, note.body)
        ),
        None,
    )
    if older is not None:
        return FileResult(
            path,
            "unchanged",
            existing.pk,
            f"lode holds this text as version {older}; its newer version {head.number} stays",
        )
    version = _save(existing, user, note, base_version_id=head.pk)
    detail = f"new version {version.number}"
    if note.version < head.number:
        detail += (
            f"; lode's version {head.number} was newer than the exported version "
            f"{note.version} and stays in the history"
        )
    return FileResult(path, "updated", existing.pk, detail)


def import_plain(
    user: AbstractBaseUser, path: str, text: str, space_id: int, title: str
) -> FileResult:
    """A Markdown file without lode's front matter: a note keyed by its path."""
    key = f"vault:{path}"[:MAX_KEY_CHARS]
    existing = Document.objects.filter(owner=user, external_key=key).first()
    if existing is None:
        document = note_create(owner=user, title=title, body=text, space=space_id, external_key=key)
        return FileResult(path, "created", document.pk, "a new file without lode's front matter")
    _check_writable(user, existing)
    head = Version.objects.get(pk=existing.head_id)
    if (head.title, head.body) == (title, text):
        return FileResult(path, "unchanged", existing.pk)
    version = note_update(
        document=existing, user=user, base_version_id=head.pk, title=title, body=text
    )
    return FileResult(path, "updated", existing.pk, f"new version {version.number}")


def import_export_folder(
    root: Path,
    *,
    user: AbstractBaseUser,
    on_progress: Callable[[int, int], object] | None = None,
) -> ImportReport:
    """Import every note file of the export at `root` for `user`; see the module docstring.
    `on_progress(done, total)` is called once the files are listed and after each one."""
    started = time.perf_counter()
    root = root.resolve()
    manifest = read_manifest(root)
    folder_spaces = {
        str(item.get("folder")): (str(item.get("name")), str(item.get("kind")))
        for item in manifest.get("spaces", [])
        if isinstance(item, dict)
    }
    report = ImportReport()
    files = note_files(root)
    if on_progress is not None:
        on_progress(0, len(files))
    new: dict[str, _NewNote] = {}
    for done, file in enumerate(files, start=1):
        path = file.relative_to(root).as_posix()
        result = _guarded(
            path,
            lambda f=file, p=path: _import_file(root, user, f, p, folder_spaces, batch=new),
        )
        if isinstance(result, _NewNote):
            new[result.note.key] = result
        else:
            report.files.append(result)
        if on_progress is not None:
            on_progress(done, len(files))
    report.files.extend(_create_in_bulk(root, user, list(new.values())))
    report.files.sort(key=lambda result: result.path)
    report.seconds = time.perf_counter() - started
    return report


def _guarded(path: str, work: Callable[[], FileResult | _NewNote]) -> FileResult | _NewNote:
    """`work()` in its own transaction; a refusal becomes the file's `skipped` result."""
    try:
        with transaction.atomic():
            return work()
    except (FileRefused, FrontMatterError, SourceRefused) as exc:
        return FileResult(path, "skipped", detail=str(exc))
    except (ValidationError, PermissionDenied) as exc:
        reason = " ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
        return FileResult(path, "skipped", detail=reason)


@dataclass(frozen=True)
class _NewNote:
    """A file that becomes a new note with one version (its export holds no other): written
    with others in bulk."""

    path: str
    note: ExportedNote
    space_id: int
    version_created: datetime | None = None  # from its history file, when exported


def _create_in_bulk(root: Path, user: AbstractBaseUser, new: list[_NewNote]) -> list[FileResult]:
    """New notes without history, `BATCH` at a time per space and source, through the
    services' bulk import (`notes_import`: the rows `note_create` writes, in a few
    statements); then each one's typed tags and exported dates. A batch that fails is
    written again file by file, so one bad file refuses only itself."""
    groups: dict[tuple[int, str], list[_NewNote]] = {}
    for item in new:
        groups.setdefault((item.space_id, item.note.source), []).append(item)
    results: list[FileResult] = []
    for (space_id, source), items in groups.items():
        for start in range(0, len(items), BATCH):
            chunk = items[start : start + BATCH]
            try:
                with transaction.atomic():
                    results.extend(_create_batch(user, chunk, space_id=space_id, source=source))
            except (ValidationError, PermissionDenied, IntegrityError):
                for item in chunk:
                    results.append(
                        _guarded(item.path, lambda i=item: import_note(root, user, i.path, i.note))
                    )
    return results


def _create_batch(
    user: AbstractBaseUser, chunk: list[_NewNote], *, space_id: int, source: str
) -> list[FileResult]:
    imported = notes_import(
        owner=user,
        notes=[
            NoteImport(external_key=i.note.key, title=i.note.title, body=i.note.body) for i in chunk
        ],
        source_name=source,
        space=space_id,
    )
    documents = {
        document.external_key: document
        for document in Document.objects.filter(
            owner=user, external_key__in=[item.note.key for item in chunk]
        )
    }
    results: list[FileResult] = []
    for item, outcome in zip(chunk, imported, strict=True):
        if outcome.outcome is None:
            results.append(FileResult(item.path, "skipped", detail=outcome.reason))
            continue
        document = documents[item.note.key]
        if item.note.tags:
            _save(document, user, item.note, base_version_id=document.head_id)
        Document.objects.filter(pk=document.pk).update(
            created_at=item.note.created, updated_at=item.note.updated or item.note.created
        )
        if item.version_created is not None:
            Version.objects.filter(document=document, number=1).update(
                created_at=item.version_created
            )
        detail = "1 version" if outcome.outcome == "created" else ""
        results.append(FileResult(item.path, outcome.outcome, document.pk, detail))
    return results


def _import_file(
    root: Path,
    user: AbstractBaseUser,
    file: Path,
    path: str,
    folder_spaces: dict[str, tuple[str, str]],
    *,
    batch: dict[str, _NewNote],
) -> FileResult | _NewNote:
    """One file: imported now, or (a new note with one version, not yet in `batch`)
    returned to be written in bulk."""
    text = read_text(file)
    split = split_front_matter(text)
    fields = split[0] if split is not None else {}
    kind = fields.get("lode_kind", export.KIND_NOTE)
    if kind == export.KIND_EXTERNAL:
        return FileResult(path, "skipped", detail="a mirrored external: re-add its source instead")
    if kind == export.KIND_ANNOTATION:
        return FileResult(
            path, "skipped", detail="an annotation: it needs its snapshot (use lode_restore)"
        )
    if split is not None and "lode_id" in fields:
        note = exported_note(fields, split[1])
        if note.key not in batch and find_note(user, note) is None:
            history, why_not = read_history(root, note.lode_id)
            if not why_not and len(history) <= 1:
                first = history[0] if history else None
                if first is None or (first.title, first.body) == (note.title, note.body):
                    space_id = space_for(user, name=note.space, kind=note.space_kind)
                    return _NewNote(path, note, space_id, first.created if first else None)
        return import_note(root, user, path, note)
    top = path.split("/", 1)[0] if "/" in path else ""
    name, space_kind = folder_spaces.get(top, ("", export.SPACE_PERSONAL))
    space_id = space_for(user, name=name, kind=space_kind)
    title = file.stem.strip()[:MAX_TITLE_CHARS] or export.safe_stem("")
    return import_plain(user, path, text, space_id, title)
