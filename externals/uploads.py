"""Bringing uploaded files in, one of two ways the uploader chooses, with a report per file.

* As a mirrored source: every file of the upload goes into ONE upload source (named by the
  uploader, or after its one file, or "Uploads <date>"), scanned once; each file becomes an
  external of it. A file whose bytes one of the uploader's sources in that space already
  holds is "already there" and is not stored again.
* As editable notes: each Markdown or plain-text file becomes a note, titled by its front
  matter's `title`, else its first heading, else its file name; its text is kept whole. A
  note of the uploader's in that space with the same title and text is "already there".
  Other types (PDF, Office, HTML) cannot be edited as notes: refused with a pointer to the
  source route.

Every file is judged on its own (empty, over the size cap, binary, not UTF-8, a type lode
does not read), so one bad file never loses the others. The callers (the sources page)
bound how many files and bytes one upload carries.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from externals.extract import READABLE_EXTENSIONS, TEXT_EXTENSIONS
from externals.models import DEFAULT_STALE_AFTER_DAYS, ScanRecord, Source, SourceItem
from externals.pipeline import scan_source, upload_folder
from externals.services import safe_filename, source_create, source_delete, source_space_id
from notes.front_matter import FrontMatterError, split_front_matter
from notes.models import Document, TrustTier
from notes.services import MAX_TITLE_CHARS, note_create

AS_NOTES = "notes"
AS_SOURCE = "source"
SAVED = "saved"
ALREADY_THERE = "already there"
REFUSED = "refused"
# A refusal's reason is shown as it is; kept short so a stored report stays small.
MAX_REASON_CHARS = 300
MAX_SHOWN_CHARS = 255
_HEADING_RE = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class FileOutcome:
    """What became of one file: saved, already there or refused (with the reason).
    `document_id` is the note or external it is (saved, already there); `source_route` is
    set when a file refused as a note could be brought in as a mirrored source instead."""

    filename: str
    outcome: str
    reason: str = ""
    document_id: int | None = None
    title: str = ""
    source_route: bool = False


@dataclass
class UploadReport:
    """One upload's outcome: how the files were brought in, the source they went into
    (mirrored source), and each file's outcome, in the order they were sent."""

    brought_in_as: str
    files: list[FileOutcome] = field(default_factory=list)
    source_id: int | None = None
    source_name: str = ""

    def count(self, outcome: str) -> int:
        return sum(1 for item in self.files if item.outcome == outcome)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> UploadReport:
        files = [FileOutcome(**item) for item in data.get("files", [])]
        return cls(
            brought_in_as=str(data.get("brought_in_as", AS_SOURCE)),
            files=files,
            source_id=data.get("source_id"),
            source_name=str(data.get("source_name", "")),
        )


def shown_name(filename: str) -> str:
    """The file's own name, without any folder part the browser sent (shortened: it is
    kept in the report)."""
    return ((filename or "").replace("\\", "/").rpartition("/")[2] or "(no name)")[:MAX_SHOWN_CHARS]


def _refused(filename: str, reason: str, *, source_route: bool = False) -> FileOutcome:
    return FileOutcome(
        filename, REFUSED, reason=reason[:MAX_REASON_CHARS], source_route=source_route
    )


def _size_refusal(data: bytes, limit: int) -> str:
    if not data:
        return "The submitted file is empty."
    if len(data) > limit:
        return f"The file is {len(data):,} bytes; the limit is {limit:,} bytes."
    return ""


# --- as editable notes ----------------------------------------------------------------------


def note_title(text: str, filename: str) -> str:
    """The front matter's `title`, else the first Markdown heading outside code fences,
    else the file name without its extension."""
    body = text
    try:
        split = split_front_matter(text)
    except FrontMatterError:
        split = None  # not lode's kind of front matter: the heading or file name decides
    if split is not None:
        fields, body = split
        title = fields.get("title")
        if isinstance(title, str) and title.strip():
            return title.strip()[:MAX_TITLE_CHARS]
    fence = ""
    for line in body.splitlines():
        opening = _FENCE_RE.match(line)
        if opening:
            marker = opening.group(1)
            if not fence:
                fence = marker[0]
            elif marker[0] == fence:
                fence = ""
            continue
        if not fence:
            heading = _HEADING_RE.match(line)
            if heading:
                return heading.group(1).strip()[:MAX_TITLE_CHARS]
    return (PurePosixPath(filename).stem.strip() or filename)[:MAX_TITLE_CHARS]


def _note_text(filename: str, data: bytes) -> str:
    """The file's text, or `ValidationError` saying why it cannot be a note."""
    suffix = PurePosixPath(filename).suffix.lower()
    if suffix not in TEXT_EXTENSIONS:
        kind = f"A {suffix} file" if suffix else "A file without an extension"
        raise ValidationError(
            f"{kind} cannot be an editable note (only Markdown and plain text can)."
        )
    refusal = _size_refusal(data, settings.LODE_MAX_NOTE_BYTES)
    if refusal:
        raise ValidationError(refusal)
    if b"\x00" in data:
        raise ValidationError("A binary file (it holds NUL bytes), not text.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"Not valid UTF-8 (byte {exc.start}).") from None


def upload_as_notes(
    *, owner: AbstractBaseUser, space_id: int, files: list[tuple[str, bytes]]
) -> UploadReport:
    """Each Markdown or text file a note of `owner`'s in `space_id` (where `owner` must be
    an editor: `PermissionDenied` otherwise, before anything is saved)."""
    space_id = source_space_id(owner, space_id)
    report = UploadReport(brought_in_as=AS_NOTES)
    for filename, data in files:
        name = shown_name(filename)
        try:
            text = _note_text(name, data)
        except ValidationError as exc:
            suffix = PurePosixPath(name).suffix.lower()
            offer = suffix in READABLE_EXTENSIONS and suffix not in TEXT_EXTENSIONS
            report.files.append(_refused(name, " ".join(exc.messages), source_route=offer))
            continue
        report.files.append(_one_note(owner, space_id, name, text))
    return report


def _one_note(owner: AbstractBaseUser, space_id: int, name: str, text: str) -> FileOutcome:
    title = note_title(text, name)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    same = (
        Document.objects.filter(
            owner=owner,
            space_id=space_id,
            kind=Document.Kind.NOTE,
            deleted_at__isnull=True,
            head__sha256=digest,
            head__title=title,
        )
        .order_by("pk")
        .first()
    )
    if same is not None:
        return FileOutcome(name, ALREADY_THERE, document_id=same.pk, title=title)
    try:
        with transaction.atomic():
            document = note_create(owner=owner, title=title, body=text, space=space_id)
    except (ValidationError, PermissionDenied) as exc:
        reason = " ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
        return _refused(name, reason)
    return FileOutcome(name, SAVED, document_id=document.pk, title=title)


# --- as one mirrored source -----------------------------------------------------------------


def default_source_name(owner: AbstractBaseUser, filenames: list[str]) -> str:
    """The one file's name, or "Uploads <date time>" for several; " (2)", " (3)"… added
    while the user already has a source of that name."""
    if len(filenames) == 1:
        base = filenames[0][:190]
    else:
        base = f"Uploads {timezone.localtime():%Y-%m-%d %H:%M}"
    taken = set(
        Source.objects.filter(owner_id=owner.pk, name__startswith=base).values_list(
            "name", flat=True
        )
    )
    name, number = base, 1
    while name in taken:
        number += 1
        name = f"{base} ({number})"
    return name


def upload_as_source(
    *,
    owner: AbstractBaseUser,
    space_id: int,
    files: list[tuple[str, bytes]],
    name: str = "",
    trust_tier: str = TrustTier.EXTERNAL_CURRENT,
    no_egress: bool = False,
    stale_after_days: int = DEFAULT_STALE_AFTER_DAYS,
) -> UploadReport:
    """Every acceptable file of the upload into one new upload source of `owner`'s in
    `space_id`, scanned once. `name` blank: `default_source_name`; a name the user already
    has is a `ValidationError` (nothing saved). A file the scan cannot read is refused and
    removed again; when no file is saved, no source is left behind."""
    space_id = source_space_id(owner, space_id)
    name = (name or "").strip()
    if name and Source.objects.filter(owner_id=owner.pk, name=name).exists():
        raise ValidationError(f"You already have a source named “{name}”.")
    report = UploadReport(brought_in_as=AS_SOURCE)
    outcomes: dict[int, FileOutcome] = {}
    keep: dict[str, tuple[int, bytes]] = {}  # stored name → (position, bytes)
    limit = settings.LODE_SOURCE_MAX_FILE_BYTES
    for position, (filename, data) in enumerate(files):
        shown = shown_name(filename)
        refusal = _size_refusal(data, limit)
        if refusal:
            outcomes[position] = _refused(shown, refusal)
            continue
        try:
            stored = safe_filename(filename)
        except ValidationError as exc:
            outcomes[position] = _refused(shown, " ".join(exc.messages))
            continue
        if stored in keep:
            outcomes[position] = _refused(shown, "Another file of this upload has this name.")
            continue
        present = _same_bytes(owner, space_id, data)
        if present is not None:
            outcomes[position] = FileOutcome(
                shown, ALREADY_THERE, document_id=present.document_id, title=present.title
            )
            continue
        keep[stored] = (position, data)
    if keep:
        source = source_create(
            owner=owner,
            name=name or default_source_name(owner, list(keep)),
            kind=Source.Kind.UPLOAD,
            location=next(iter(keep)),
            trust_tier=trust_tier,
            no_egress=no_egress,
            stale_after_days=stale_after_days,
            space=space_id,
        )
        outcomes |= _store_and_scan(source, keep, files)
        if any(outcomes[position].outcome == SAVED for position, _ in keep.values()):
            report.source_id, report.source_name = source.pk, source.name
        else:
            source_delete(source=source)
    report.files = [outcomes[position] for position in range(len(files))]
    return report


@dataclass(frozen=True)
class _Present:
    document_id: int
    title: str


def _same_bytes(owner: AbstractBaseUser, space_id: int, data: bytes) -> _Present | None:
    """A live external of one of `owner`'s sources in `space_id` with exactly these bytes."""
    digest = hashlib.sha256(data).hexdigest()
    item = (
        SourceItem.objects.filter(
            sha256=digest,
            source__owner_id=owner.pk,
            source__space_id=space_id,
            document__deleted_at__isnull=True,
        )
        .select_related("document__head")
        .order_by("pk")
        .first()
    )
    if item is None:
        return None
    head = item.document.head
    return _Present(item.document_id, head.title if head is not None else item.path)


def _store_and_scan(
    source: Source, keep: dict[str, tuple[int, bytes]], files: list[tuple[str, bytes]]
) -> dict[int, FileOutcome]:
    folder = upload_folder(source)
    folder.mkdir(parents=True, exist_ok=True)
    for stored, (_, data) in keep.items():
        (folder / stored).write_bytes(data)
    record = scan_source(source, trigger="upload")
    reasons = _scan_reasons(record)
    items = {
        item.path: item
        for item in SourceItem.objects.filter(source=source).select_related("document__head")
    }
    outcomes: dict[int, FileOutcome] = {}
    removed = False
    for stored, (position, _) in keep.items():
        shown = shown_name(files[position][0])
        item = items.get(stored)
        if item is not None and item.document.head is not None:
            outcomes[position] = FileOutcome(
                shown, SAVED, document_id=item.document_id, title=item.document.head.title
            )
            continue
        # Not read: removed, so a later scan of this source does not fail on it again.
        (folder / stored).unlink(missing_ok=True)
        removed = True
        reason = reasons.get(stored) or record.error or "The file could not be read as text."
        outcomes[position] = _refused(shown, reason)
    if removed and items:
        # Scanned again without the refused files, so the source's latest scan says what
        # it holds (its saved files are unchanged, so nothing is read twice).
        scan_source(source, trigger="upload")
    return outcomes


def _scan_reasons(record: ScanRecord) -> dict[str, str]:
    """Why the scan did not read each file it failed, rejected or skipped, by path."""
    return {
        str(entry.get("path", "")): str(entry.get("reason", ""))
        for entry in (*record.failures, *record.rejected, *record.skipped)
        if entry.get("reason")
    }
