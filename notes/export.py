"""Export: a folder (or zip) of Markdown files Obsidian opens as a vault.

What a user may see is exported: the live notes of every space they belong to (`everything`:
every live document, for a superuser's command). Layout, all plain UTF-8 Markdown:

    <space>/<title>.md                   a note: front matter, then its body byte for byte
    annotations/<space>/<title>.md       an annotation's note (marked `lode_kind: annotation`)
    external/<space>/<title>.md          a mirrored external's latest snapshot text, marked
                                         `lode_kind: external` with its source; the import
                                         skips these (a source is re-added, not imported)
    .lode/export.json                    what was exported, by which lode, for whom
    .lode/versions/<lode_id>/<n>.md      with `versions`: every version of every note

Obsidian hides folders starting with a dot, so the history stays out of the vault's file
list. A note's front matter (`notes.front_matter`) holds lode_id, title, tags (the ones
typed in the tag field; `#hashtags` stay in the body), space, created, updated, version,
and lode_key (the note's import key, `Document.external_key`) and source when it has them;
a file name that had to differ from the title lists the title in `aliases`, so Obsidian
resolves `[[Title]]` links to it. Bodies are never rewritten: `[[links]]` stay as written.

`notes.markdown_import` reads this layout back.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
import zipfile
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO, Protocol

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.utils import timezone

from externals.models import SourceItem
from notes.front_matter import FrontMatterValue, render_front_matter
from notes.models import Document, DocumentTag, TrustTier, Version
from retrieval.eligibility import visible_documents
from spaces.models import Space

FORMAT = "lode-export"
FORMAT_VERSION = 1
MANIFEST_PATH = ".lode/export.json"
VERSIONS_FOLDER = ".lode/versions"
EXTERNAL_FOLDER = "external"
ANNOTATIONS_FOLDER = "annotations"
MARKDOWN = ".md"
KIND_NOTE = "note"
KIND_EXTERNAL = "external"
KIND_ANNOTATION = "annotation"
SPACE_PERSONAL = "personal"
SPACE_SHARED = "shared"

# A file name's stem at most this many UTF-8 bytes: with " (NNN).md" it stays far under the
# 255 bytes every common file system allows.
MAX_STEM_BYTES = 150
# Characters no portable file name holds (Windows, macOS) or that Obsidian reads as link
# syntax in a file name (`#`, `^`, `[`, `]`, `|`).
_UNSAFE = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|#^\[\]]')
_WINDOWS_RESERVED = {
    "con", "prn", "aux", "nul",
    *(f"com{n}" for n in range(1, 10)),
    *(f"lpt{n}" for n in range(1, 10)),
}  # fmt: skip
_RESERVED_TOP = {EXTERNAL_FOLDER, ANNOTATIONS_FOLDER}
PAGE = 200


class ExportTooLarge(Exception):
    """The export went past its size or time bound; nothing of it is kept."""


class ExportSink(Protocol):
    """Where exported files go: a folder or a zip."""

    def write(self, path: str, data: bytes) -> None: ...


class FolderSink:
    """Writes under `root`, which must be empty or not exist yet (nothing is overwritten)."""

    def __init__(self, root: Path) -> None:
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise FileExistsError(f"{root} exists and is not an empty folder")
        root.mkdir(parents=True, exist_ok=True)
        self.root = root

    def write(self, path: str, data: bytes) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as handle:
            handle.write(data)


class ZipSink:
    """Writes into a zip archive on `file` (a path or an open binary file)."""

    def __init__(self, file: Path | IO[bytes]) -> None:
        self.archive = zipfile.ZipFile(file, "w", compression=zipfile.ZIP_DEFLATED)

    def write(self, path: str, data: bytes) -> None:
        self.archive.writestr(path, data)

    def close(self) -> None:
        self.archive.close()


@dataclass
class ExportReport:
    """What an export wrote: counts per kind, bytes of file content, wall time."""

    notes: int = 0
    versions: int = 0  # version files under .lode/versions
    externals: int = 0
    annotations: int = 0
    bytes: int = 0
    seconds: float = 0.0
    spaces: list[dict[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"exported {self.notes} notes, {self.annotations} annotations, {self.externals} "
            f"externals (latest snapshot text, not imported back), {self.versions} version "
            f"files; {self.bytes:,} bytes in {self.seconds:.1f} s"
        )


@dataclass
class _Bounds:
    max_bytes: int | None
    deadline: float | None
    written: int = 0

    def add(self, size: int) -> None:
        self.written += size
        if self.max_bytes is not None and self.written > self.max_bytes:
            raise ExportTooLarge(
                f"The export is over {self.max_bytes:,} bytes, the most one download may "
                "carry. Ask the server's operator for a `manage.py lode_export` of your notes."
            )
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise ExportTooLarge(
                "The export took longer than the time one download may take. Ask the "
                "server's operator for a `manage.py lode_export` of your notes."
            )


def lode_version() -> str:
    """The installed lode's version (`pyproject.toml`), or "unknown" outside an install."""
    try:
        return metadata.version("lode")
    except metadata.PackageNotFoundError:
        return "unknown"


def safe_stem(title: str) -> str:
    """A file name stem for `title` that every common file system and Obsidian accept:
    unsafe characters become "-", no leading dot or trailing dot or space, no reserved
    Windows name, at most `MAX_STEM_BYTES` UTF-8 bytes, never empty."""
    stem = unicodedata.normalize("NFC", title)
    stem = _UNSAFE.sub("-", stem)
    stem = " ".join(stem.split()).lstrip(".").rstrip(". ")
    encoded = stem.encode("utf-8")[:MAX_STEM_BYTES]
    stem = encoded.decode("utf-8", errors="ignore").rstrip(". ")
    if not stem:
        stem = "Untitled"
    if stem.split(".")[0].casefold() in _WINDOWS_RESERVED:
        stem = f"{stem}_"
    return stem


class _Names:
    """Unique names within each folder, case-insensitively (macOS and Windows fold case)."""

    def __init__(self) -> None:
        self.taken: dict[str, set[str]] = defaultdict(set)

    def claim(self, folder: str, stem: str, suffix: str = "") -> str:
        taken = self.taken[folder.casefold()]
        candidate, n = stem, 1
        while f"{candidate}{suffix}".casefold() in taken:
            n += 1
            candidate = f"{stem} ({n})"
        taken.add(f"{candidate}{suffix}".casefold())
        return f"{candidate}{suffix}"


def exportable_documents(
    user: AbstractBaseUser | None, *, everything: bool = False
) -> QuerySet[Document]:
    """The live documents an export covers: those of `user`'s spaces, or every one."""
    documents = Document.objects.all() if everything else visible_documents(user.pk)
    return (
        documents.filter(deleted_at__isnull=True, head__isnull=False)
        .select_related("head", "space", "owner")
        .order_by("pk")
    )


def _space_folders(spaces: list[Space], *, names: _Names) -> dict[int, str]:
    """A folder name per space: its name made safe, made unique (two spaces named alike,
    several users' personal spaces), never one of the reserved top-level folders."""
    folders: dict[int, str] = {}
    for space in sorted(spaces, key=lambda s: (s.personal_of_id is None, s.name, s.pk)):
        stem = safe_stem(space.name)
        if stem.casefold() in _RESERVED_TOP:
            stem = f"{stem} (space)"
        folders[space.pk] = names.claim("", stem)
    return folders


def _manual_tags(document_ids: list[int]) -> dict[int, list[str]]:
    tags: dict[int, list[str]] = defaultdict(list)
    rows = (
        DocumentTag.objects.filter(document_id__in=document_ids, from_body=False)
        .order_by("document_id", "tag__name")
        .values_list("document_id", "tag__name")
    )
    for document_id, name in rows:
        tags[document_id].append(name)
    return tags


def _sources(document_ids: list[int]) -> dict[int, tuple[str, str]]:
    """(source name, item path or URL) of each external."""
    rows = SourceItem.objects.filter(document_id__in=document_ids).values_list(
        "document_id", "source__name", "path"
    )
    return {document_id: (name, path) for document_id, name, path in rows}


def _stamp(value) -> str:
    return value.isoformat()


def note_fields(
    document: Document, *, tags: list[str], file_stem: str, kind: str
) -> dict[str, FrontMatterValue]:
    """The front matter of one exported document, in the order it is written."""
    head = document.head
    fields: dict[str, FrontMatterValue] = {"lode_id": document.pk, "title": document.title}
    if kind != KIND_NOTE:
        fields["lode_kind"] = kind
    if file_stem != document.title:
        fields["aliases"] = [document.title]
    fields["tags"] = tags
    fields["space"] = document.space.name
    fields["space_kind"] = SPACE_PERSONAL if document.space.is_personal else SPACE_SHARED
    fields["owner"] = document.owner.get_username()
    fields["created"] = _stamp(document.created_at)
    fields["updated"] = _stamp(document.updated_at)
    fields["version"] = head.number
    if document.external_key:
        fields["lode_key"] = document.external_key
    if document.source_name:
        fields["source"] = document.source_name
    return fields


def version_file(version: Version) -> bytes:
    """One history file: the version's own front matter, then its body."""
    fields: dict[str, FrontMatterValue] = {
        "lode_id": version.document_id,
        "version": version.number,
        "title": version.title,
        "created": _stamp(version.created_at),
        "sha256": version.sha256,
    }
    return (render_front_matter(fields) + version.body).encode("utf-8")


def _pages(documents: QuerySet[Document]) -> Iterator[list[Document]]:
    """The documents a page at a time, by id, so memory stays bounded by the page."""
    last = 0
    while True:
        page = list(documents.filter(pk__gt=last)[:PAGE])
        if not page:
            return
        yield page
        last = page[-1].pk


def export_documents(
    sink: ExportSink,
    *,
    user: AbstractBaseUser | None,
    everything: bool = False,
    versions: bool = False,
    max_bytes: int | None = None,
    max_seconds: float | None = None,
) -> ExportReport:
    """Write `user`'s documents (or, `everything`, all) into `sink`; see the module docstring.

    `max_bytes` and `max_seconds` bound the export (`ExportTooLarge` past either).
    """
    if user is None and not everything:
        raise ValueError("export_documents: name a user, or ask for everything")
    started = time.monotonic()
    bounds = _Bounds(max_bytes, started + max_seconds if max_seconds else None)
    report = ExportReport()
    documents = exportable_documents(user, everything=everything)
    spaces = list(Space.objects.filter(pk__in=documents.values("space_id")))
    names = _Names()
    for reserved in (EXTERNAL_FOLDER, ANNOTATIONS_FOLDER, ".lode"):
        names.claim("", reserved)
    folders = _space_folders(spaces, names=names)
    report.spaces = [
        {
            "folder": folders[space.pk],
            "name": space.name,
            "kind": SPACE_PERSONAL if space.is_personal else SPACE_SHARED,
        }
        for space in spaces
    ]

    def put(path: str, data: bytes) -> None:
        bounds.add(len(data))
        sink.write(path, data)

    for page in _pages(documents):
        ids = [document.pk for document in page]
        tags = _manual_tags(ids)
        sources = _sources([d.pk for d in page if d.kind == Document.Kind.EXTERNAL])
        for document in page:
            if document.kind == Document.Kind.EXTERNAL:
                kind, folder = KIND_EXTERNAL, f"{EXTERNAL_FOLDER}/{folders[document.space_id]}"
            elif document.trust_tier == TrustTier.ANNOTATION:
                kind = KIND_ANNOTATION
                folder = f"{ANNOTATIONS_FOLDER}/{folders[document.space_id]}"
            else:
                kind, folder = KIND_NOTE, folders[document.space_id]
            file_name = names.claim(folder, safe_stem(document.title), MARKDOWN)
            fields = note_fields(
                document,
                tags=tags.get(document.pk, []),
                file_stem=file_name.removesuffix(MARKDOWN),
                kind=kind,
            )
            if kind == KIND_EXTERNAL:
                source, location = sources.get(document.pk, ("", ""))
                fields["source"] = source or document.source_name
                fields["location"] = location
            text = render_front_matter(fields) + document.head.body
            put(f"{folder}/{file_name}", text.encode("utf-8"))
            if kind == KIND_EXTERNAL:
                report.externals += 1
                continue
            if kind == KIND_ANNOTATION:
                report.annotations += 1
            else:
                report.notes += 1
            if versions and kind == KIND_NOTE:
                history = Version.objects.filter(document=document).order_by("number")
                for version in history.iterator(chunk_size=50):
                    path = f"{VERSIONS_FOLDER}/{document.pk}/{version.number}{MARKDOWN}"
                    put(path, version_file(version))
                    report.versions += 1
    report.seconds = time.monotonic() - started
    report.bytes = bounds.written
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "lode_version": lode_version(),
        "exported_at": _stamp(timezone.now()),
        "exported_by": user.get_username() if user is not None else "",
        "everything": everything,
        "versions": versions,
        **{k: v for k, v in asdict(report).items() if k not in ("seconds",)},
    }
    sink.write(MANIFEST_PATH, (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode())
    return report


def export_to_path(
    destination: Path,
    *,
    user: AbstractBaseUser | None,
    everything: bool = False,
    versions: bool = False,
) -> ExportReport:
    """`export_documents` into a new folder, or a zip when `destination` ends in `.zip`."""
    if destination.suffix.lower() == ".zip":
        if destination.exists():
            raise FileExistsError(f"{destination} exists; name a new file")
        sink = ZipSink(destination)
        try:
            return export_documents(sink, user=user, everything=everything, versions=versions)
        except BaseException:
            sink.close()
            destination.unlink(missing_ok=True)
            raise
        finally:
            sink.close()
    return export_documents(
        FolderSink(destination), user=user, everything=everything, versions=versions
    )
