"""Writes to notes: create, edit (with conflict detection), soft delete and restore from the
trash, restore of an old version, tags, and imports (one note at a time, or a batch in bulk
for large data sets). Also the bounded word diff the compare and conflict pages show.

Every write runs in one transaction that also writes the version's passages, so the
lexical index is current when it commits. Callers pass the user; permission checks happen
here as well as in the selectors, so a view cannot forget them: writing a note (create,
edit, delete, restore, import) needs the role editor or admin in the note's space (issue
15), decided by `retrieval.eligibility.can`.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from lode_site.refusals import NotFound
from notes.models import Document, DocumentTag, Tag, TrustTier, Version, title_key
from retrieval.eligibility import can, role_in
from retrieval.index.edges import refresh_edges
from retrieval.index.passages import (
    index_new_head,
    index_new_heads,
    passages_for_version,
    rechunk_head,
    unindex_document,
)
from retrieval.index.sync import enqueue_document_sync_on_commit
from retrieval.index.vectors import mark_pending_again
from retrieval.models import Passage
from spaces.models import Role, Space, personal_space_id, role_at_least

NOTE_EXTRACTOR = "markdown-note"
NOTE_EXTRACTOR_VERSION = "1"
MAX_TITLE_CHARS = 500
MAX_TAG_CHARS = 100

TAG_RE = re.compile(r"^[^\W_][\w-]*$")
# One item of a tag list as `parse_tags` accepts it (the API's schema states it): a tag name
# with optional surrounding spaces and leading `#`s, or nothing but those (skipped).
TAG_ITEM_PATTERN = rf"^\s*#*(?:[^\W_][\w-]{{0,{MAX_TAG_CHARS - 1}}})?\s*$"
# `#tag` not preceded by a word char, `&` (entities), `/` (URL fragments) or another `#`,
# starting with a letter so that `#1` (issue numbers) and markdown headings (`# Title`) don't count.
HASHTAG_RE = re.compile(r"(?<![\w&/#])#([^\W\d_][\w-]{0,99})")
# Markdown link destinations: `[setup](#setup-steps)` is an anchor, not a tag.
LINK_DEST_RE = re.compile(r"\]\([^)]*\)")
CODE_RE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]*`", re.DOTALL)


class EditConflict(Exception):
    """The note's head moved since the edit began; nothing was saved."""

    def __init__(self, *, document: Document, base: Version, head: Version, title: str, body: str):
        super().__init__(self.describe(base=base, head=head))
        self.document = document
        self.base = base
        self.head = head
        self.title = title
        self.body = body

    @staticmethod
    def describe(*, base: Version, head: Version) -> str:
        return (
            f"This note was changed (version {head.number}) after you started editing "
            f"version {base.number}. Your text was not saved; compare and save again."
        )


class RestoreConflict(EditConflict):
    """The note's head moved since the user chose to restore an old version; nothing was
    saved. `title` and `body` are the old version's, the text the restore would have written.
    """

    @staticmethod
    def describe(*, base: Version, head: Version) -> str:
        return (
            f"This note was changed (now version {head.number}) after you looked at it as "
            f"version {base.number}. Nothing was restored; review the current version and "
            "restore again if you still want to."
        )


class UnknownBaseVersion(NotFound):
    """The version a write says it was based on is not a version of this note."""

    def __init__(self, *, base_version_id: int, head: Version):
        super().__init__(
            f"Version id {base_version_id} is not a version of this note, so there is "
            f"nothing to base this change on. The current version is id {head.pk} "
            f"(version {head.number}); reload the note and try again."
        )
        self.head = head


def _check_base(
    locked: Document, base_version_id: int, *, title: str, body: str, conflict: type[EditConflict]
) -> Version:
    """The head, if it is the version the write was based on; raise otherwise.

    A base that is not a version of this note at all (a typo, another note's version, a
    version that never existed) is an `UnknownBaseVersion` that says so, not a conflict: there
    is nothing to compare with. A real older version of this note is a `conflict`.
    """
    head = locked.head
    if locked.head_id == base_version_id:
        return head
    base = Version.objects.filter(pk=base_version_id, document=locked).first()
    if base is None:
        raise UnknownBaseVersion(base_version_id=base_version_id, head=head)
    raise conflict(document=locked, base=base, head=head, title=title, body=body)


def parse_tags(raw: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Tags from the tag field: comma or space separated, `#` optional, case-folded."""
    items = raw if isinstance(raw, (list, tuple)) else re.split(r"[\s,]+", raw or "")
    seen: list[str] = []
    for item in items:
        name = item.strip().lstrip("#")
        if not name:
            continue
        # Checked as typed (`TAG_ITEM_PATTERN`), then case-folded: folding can turn a letter
        # into a letter plus a combining mark ("İ"), which is not a word character.
        valid = len(name) <= MAX_TAG_CHARS and TAG_RE.match(name)
        name = name.casefold()
        if not valid or len(name) > MAX_TAG_CHARS:
            raise ValidationError(
                f"Tag {item!r} is not valid: use letters, digits, '-' and '_' "
                f"(up to {MAX_TAG_CHARS} characters), starting with a letter or digit."
            )
        if name not in seen:
            seen.append(name)
    return tuple(seen)


def hashtags(body: str) -> tuple[str, ...]:
    """`#hashtags` in a note body, outside code spans and fences."""
    prose = LINK_DEST_RE.sub(" ", CODE_RE.sub(" ", body))
    found: list[str] = []
    for match in HASHTAG_RE.finditer(prose):
        name = match.group(1).rstrip("-").casefold()
        if name and name not in found:
            found.append(name)
    return tuple(found)


def validate_content(*, title: str, body: str) -> tuple[str, str]:
    title = (title or "").strip()
    if "\x00" in title or "\x00" in body:
        raise ValidationError("Notes cannot contain NUL characters.")
    if not title:
        raise ValidationError("A note needs a title.")
    if len(title) > MAX_TITLE_CHARS:
        raise ValidationError(f"The title is over {MAX_TITLE_CHARS} characters.")
    size = len(body.encode("utf-8", errors="surrogatepass"))
    if size > settings.LODE_MAX_NOTE_BYTES:
        raise ValidationError(
            f"The note is {size:,} bytes; the limit is {settings.LODE_MAX_NOTE_BYTES:,} bytes."
        )
    try:
        (title + body).encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("The note contains characters that are not valid Unicode.") from None
    return title, body


def _set_tags(document: Document, *, manual: tuple[str, ...], body: str) -> None:
    DocumentTag.objects.filter(document=document).delete()
    rows = []
    for names, from_body in ((manual, False), (hashtags(body), True)):
        for name in names:
            tag, _ = Tag.objects.get_or_create(owner=document.owner, name=name)
            rows.append(DocumentTag(document=document, tag=tag, from_body=from_body))
    DocumentTag.objects.bulk_create(rows)


def _new_version(
    *,
    document: Document,
    parent: Version | None,
    title: str,
    body: str,
    user: AbstractBaseUser | None,
    extractor_name: str = NOTE_EXTRACTOR,
    extractor_version: str = NOTE_EXTRACTOR_VERSION,
    source_path: str = "",
    source_sha256: str = "",
) -> Version:
    """The unsaved version row that follows `parent` (None: the first), content-addressed
    by the SHA-256 of its UTF-8 body. `version_create` and the bulk import both build with
    it, so a version is the same row whichever path wrote it."""
    data = body.encode("utf-8")
    return Version(
        document=document,
        number=(parent.number + 1) if parent else 1,
        parent=parent,
        title=title,
        body=body,
        sha256=hashlib.sha256(data).hexdigest(),
        byte_size=len(data),
        extractor_name=extractor_name,
        extractor_version=extractor_version,
        source_path=source_path,
        source_sha256=source_sha256,
        created_by=user,
    )


def version_create(
    *,
    document: Document,
    title: str,
    body: str,
    user: AbstractBaseUser | None,
    extractor_name: str = NOTE_EXTRACTOR,
    extractor_version: str = NOTE_EXTRACTOR_VERSION,
    source_path: str = "",
    source_sha256: str = "",
) -> Version:
    """Append an immutable version, make it the head and index its passages.

    Must run inside a transaction that holds the document row (see `note_update`).
    `source_path` (absolute) and `source_sha256` (of the file's raw bytes) record the file a
    version was read from, so verified opening can re-check it; blank for typed text.
    """
    version = _new_version(
        document=document,
        parent=document.head,
        title=title,
        body=body,
        user=user,
        extractor_name=extractor_name,
        extractor_version=extractor_version,
        source_path=source_path,
        source_sha256=source_sha256,
    )
    version.save(force_insert=True)
    document.head = version
    document.title = title
    document.save(update_fields=["head", "title", "updated_at"])
    index_new_head(document, version)
    return version


def target_space_id(owner: AbstractBaseUser, space: Space | int | None) -> int:
    """The id of the space a new note of `owner`'s goes to: `space` (a space or its id),
    where `owner` must be editor or admin (`PermissionDenied` otherwise, also for a space
    they are not in), or their personal space when None."""
    if space is None:
        return personal_space_id(owner.pk)
    space_id = space if isinstance(space, int) else space.pk
    if not can(owner.pk, space_id, Role.EDITOR):
        raise PermissionDenied("You cannot write notes in this space.")
    return space_id


def note_create(
    *,
    owner: AbstractBaseUser,
    title: str,
    body: str,
    tags: str | list[str] | tuple[str, ...] = (),
    space: Space | int | None = None,
    external_key: str = "",
    source_name: str = "",
    source_path: str = "",
    source_sha256: str = "",
) -> Document:
    """Create a note with its first version in `space` (None: the owner's personal space;
    otherwise the owner must be an editor there); the note is searchable on commit.

    The `source_*` arguments are for imports: see `version_create`; `source_name` is the
    import's name (a folder's name), used by the `source:` search filter.
    """
    title, body = validate_content(title=title, body=body)
    manual = parse_tags(tags)
    space_id = target_space_id(owner, space)
    with transaction.atomic():
        document = Document.objects.create(
            owner=owner,
            space_id=space_id,
            kind=Document.Kind.NOTE,
            title=title,
            trust_tier=TrustTier.NOTE,
            external_key=external_key,
            source_name=source_name,
        )
        version_create(
            document=document,
            title=title,
            body=body,
            user=owner,
            source_path=source_path,
            source_sha256=source_sha256,
        )
        _set_tags(document, manual=manual, body=body)
    return document


def may_change(user: AbstractBaseUser, document: Document) -> bool:
    """Whether `user` may write `document` (edit, delete, restore a version or from the
    trash): an editor or admin of its space. An annotation's note holds its author's words,
    so of the editors only its author may (admins still may: they may delete any
    annotation, `externals.annotations.may_delete`)."""
    return may_change_as(user, document, role_in(user.pk, document.space_id))


def may_change_as(user: AbstractBaseUser, document: Document, role: str | None) -> bool:
    """`may_change` for a caller that already knows the user's `role` in the document's
    space (None: not a member)."""
    if document.trust_tier == TrustTier.ANNOTATION and document.owner_id != user.pk:
        return role_at_least(role, Role.ADMIN)
    return role_at_least(role, Role.EDITOR)


def _locked(document: Document, user: AbstractBaseUser) -> Document:
    """Re-read the document under a row lock and check the user may write in its space
    (editor or admin) and it is live.

    The head is not joined into the locking query: on PostgreSQL a writer that waited for
    the lock gets the document row as committed meanwhile, but a joined row as of its first
    read (a stale or missing head). `locked.head` is read after the lock, from `head_id`.
    """
    locked = Document.objects.select_for_update().get(pk=document.pk)
    if not may_change(user, locked):
        raise PermissionDenied("You cannot change this note.")
    if locked.deleted_at is not None:
        raise NotFound("This note was deleted.")
    return locked


def note_update(
    *,
    document: Document,
    user: AbstractBaseUser,
    base_version_id: int,
    title: str,
    body: str,
    tags: str | list[str] | tuple[str, ...] | None = None,
) -> Version:
    """Save an edit made on top of `base_version_id`.

    Raises `EditConflict` (and saves nothing) when the head moved since that version: no
    silent last-write-wins. An edit that changes neither title nor body writes no version
    but still updates the tags.
    """
    title, body = validate_content(title=title, body=body)
    manual = parse_tags(tags) if tags is not None else None
    with transaction.atomic():
        locked = _locked(document, user)
        head = _check_base(locked, base_version_id, title=title, body=body, conflict=EditConflict)
        if manual is None:
            manual = tuple(
                locked.documenttag_set.filter(from_body=False).values_list("tag__name", flat=True)
            )
        version = head
        if head.title != title or head.body != body:
            version = version_create(document=locked, title=title, body=body, user=user)
        _set_tags(locked, manual=manual, body=body)
    document.refresh_from_db()
    return version


def note_restore(
    *, document: Document, user: AbstractBaseUser, version_id: int, base_version_id: int
) -> Version:
    """Restore an old version by writing its content as a new head version.

    `base_version_id` is the head the user saw when choosing to restore. Like an edit, the
    restore is refused with a `RestoreConflict` (and saves nothing) when the head has moved
    since: two restores started from the same page make one new version, not two, and a
    restore never silently overwrites an edit saved meanwhile. Raises `Version.DoesNotExist`
    when `version_id` is not a version of this note.
    """
    with transaction.atomic():
        locked = _locked(document, user)
        old = Version.objects.get(pk=version_id, document=locked)
        _check_base(
            locked, base_version_id, title=old.title, body=old.body, conflict=RestoreConflict
        )
        manual = tuple(
            locked.documenttag_set.filter(from_body=False).values_list("tag__name", flat=True)
        )
        version = version_create(document=locked, title=old.title, body=old.body, user=user)
        _set_tags(locked, manual=manual, body=old.body)
    document.refresh_from_db()
    return version


def note_delete(*, document: Document, user: AbstractBaseUser) -> None:
    """Soft-delete: the note and its history stay stored but leave every search at once."""
    with transaction.atomic():
        _discard(_locked(document, user))


def document_discard(*, document: Document) -> None:
    """`note_delete` without its role check, for a caller that made its own: an
    annotation's author may delete it (its note) whatever their role now
    (`externals.annotations.annotation_delete`). A document already deleted stays as is."""
    with transaction.atomic():
        locked = Document.objects.select_for_update().get(pk=document.pk)
        if locked.deleted_at is None:
            _discard(locked)


def _discard(locked: Document) -> None:
    locked.deleted_at = timezone.now()
    locked.save(update_fields=["deleted_at", "updated_at"])
    unindex_document(locked)


def note_undelete(*, document: Document, user: AbstractBaseUser) -> Document:
    """Take a note out of the trash: it is live again with all its versions, and its head is
    searchable again when this commits (lexically at once, vectors through the worker).

    Only an editor or admin of its space may; a note that is not in the trash is a
    `ValidationError`. The head
    version's passages were only taken out of the head set by `note_delete`, so they are put
    back as they were (same rows: evidence links made before the delete open again as
    current) when they are still what the chunker makes of that version; otherwise the head
    is re-chunked under the current bounds (`rechunk_head`, as `lode_index repair` does).
    """
    with transaction.atomic():
        locked = Document.objects.select_for_update().get(pk=document.pk)
        if not may_change(user, locked) or locked.kind != Document.Kind.NOTE:
            raise PermissionDenied("You cannot restore this note.")
        if locked.deleted_at is None:
            raise ValidationError("This note is not in the trash.")
        locked.deleted_at = None
        locked.save(update_fields=["deleted_at", "updated_at"])
        _reindex_head(locked)
    document.refresh_from_db()
    return document


def _reindex_head(document: Document) -> None:
    """Make the head version's passages the document's head passages again."""
    head = Version.objects.get(pk=document.head_id)
    fresh = passages_for_version(head, is_head=True)
    stored = {
        (p.position, p.start, p.end, p.text_sha256): p.pk
        for p in Passage.objects.filter(version=head, position__lt=len(fresh))
    }
    keys = [(p.position, p.start, p.end, p.text_sha256) for p in fresh]
    if all(key in stored for key in keys):
        restored = [stored[key] for key in keys]
        Passage.objects.filter(pk__in=restored).update(is_head=True)
        mark_pending_again(restored)  # those whose vectors the worker already pruned
        enqueue_document_sync_on_commit(document.pk)  # the worker embeds them again
    else:
        rechunk_head(document.pk)
    refresh_edges([document.pk])  # back in the graph, and links to it resolve again


# --- comparing versions -------------------------------------------------------------------

# difflib's matcher is quadratic or worse on repetitive text (two 1,500-word runs of a few
# repeated words took 5 s), so a diff is bounded by counts, never by a clock: texts over
# MAX_DIFF_WORDS words are refused, lines are aligned first (difflib's popular-line junk
# heuristic keeps that fast), and words are aligned only inside a changed run of lines of
# at most MAX_WORD_ALIGN words a side, while the products of the aligned runs' sizes stay
# within MAX_ALIGN_WORK (the matcher's worst case grows with it: about 0.8 s in all on such
# text); a changed run past either bound shows as removed and added whole.
MAX_DIFF_WORDS = 50_000
MAX_WORD_ALIGN = 400
MAX_ALIGN_WORK = 1_000_000

# A word, or a run of punctuation, with the whitespace after it, or leading whitespace:
# tokens concatenate to the text, and "minutes." changed to "minutes, then" keeps "minutes".
_WORD_RE = re.compile(r"\s+|\w+\s*|[^\w\s]+\s*")

DiffOp = Literal["equal", "insert", "delete"]


@dataclass(frozen=True, slots=True)
class DiffSegment:
    """A run of text that both versions share (`equal`), or only the newer (`insert`) or
    only the older (`delete`) has. Plain text: templates escape it."""

    op: DiffOp
    text: str


@dataclass(frozen=True, slots=True)
class WordDiff:
    """A word-level diff of `old` → `new`. `refused` says why no diff was made (too large);
    otherwise the `equal` and `insert` segments concatenate to `new`, and the `equal` and
    `delete` ones to `old` up to spacing (a change of whitespace alone is not marked: `equal`
    text is `new`'s). `whole_blocks` counts changed runs too long to align word by word,
    shown as removed and added whole."""

    segments: tuple[DiffSegment, ...] = ()
    refused: str = ""
    inserted_words: int = 0
    deleted_words: int = 0
    whole_blocks: int = 0

    @property
    def same(self) -> bool:
        return not self.refused and all(s.op == "equal" for s in self.segments)


def _diff_tokens(text: str) -> list[str]:
    """A word with the whitespace after it, or a run of punctuation: the units the compare
    view aligns (not the index's tokens — spacing is kept so the diff rebuilds the text)."""
    return _WORD_RE.findall(text)


def word_diff(
    old: str,
    new: str,
    *,
    max_words: int = MAX_DIFF_WORDS,
    max_align: int = MAX_WORD_ALIGN,
    max_work: int = MAX_ALIGN_WORK,
) -> WordDiff:
    """The word-level diff of `old` → `new`, bounded as `MAX_DIFF_WORDS` says."""
    old_words, new_words = len(old.split()), len(new.split())
    if max(old_words, new_words) > max_words:
        return WordDiff(
            refused=(
                f"Too large to compare word by word: the texts have {old_words:,} and "
                f"{new_words:,} words, and a comparison takes at most {max_words:,} words a "
                "side. Open each version to read it whole."
            )
        )
    segments: list[DiffSegment] = []
    counts = {"insert": 0, "delete": 0}
    whole = 0
    work = max_work

    def add(op: DiffOp, text: str) -> None:
        if not text:
            return
        if op != "equal":
            counts[op] += len(text.split())
        if segments and segments[-1].op == op:
            segments[-1] = DiffSegment(op, segments[-1].text + text)
        else:
            segments.append(DiffSegment(op, text))

    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    # Lines are compared without trailing spacing too: a browser sends CRLF line ends, so
    # the text of a conflicting edit would otherwise differ from the stored one on every line.
    lines = difflib.SequenceMatcher(
        None, [line.rstrip() for line in old_lines], [line.rstrip() for line in new_lines]
    )
    for tag, i1, i2, j1, j2 in lines.get_opcodes():
        before, after = "".join(old_lines[i1:i2]), "".join(new_lines[j1:j2])
        if tag == "equal":
            add("equal", after)
            continue
        a, b = _diff_tokens(before), _diff_tokens(after)
        if tag != "replace" or max(len(a), len(b)) > max_align or len(a) * len(b) > work:
            whole += tag == "replace"
            add("delete", before)
            add("insert", after)
            continue
        work -= len(a) * len(b)
        # Within a small changed run, every word counts (no junk heuristic), and words are
        # compared without the spacing after them: text re-wrapped is not text changed.
        words = difflib.SequenceMatcher(
            None, [t.rstrip() for t in a], [t.rstrip() for t in b], autojunk=False
        )
        for op, k1, k2, m1, m2 in words.get_opcodes():
            if op == "equal":
                add("equal", "".join(b[m1:m2]))
            else:
                add("delete", "".join(a[k1:k2]))
                add("insert", "".join(b[m1:m2]))
    return WordDiff(
        segments=tuple(segments),
        inserted_words=counts["insert"],
        deleted_words=counts["delete"],
        whole_blocks=whole,
    )


# --- imports ------------------------------------------------------------------------------

ImportOutcome = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True, slots=True)
class NoteImport:
    """One note as an import brings it. `external_key` names it within its owner's notes
    (a path, `beir:<id>`), so importing again updates the note instead of duplicating it;
    `source_path`/`source_sha256` record the file it was read from (see `version_create`),
    blank for records of a data set."""

    external_key: str
    title: str
    body: str
    source_path: str = ""
    source_sha256: str = ""


@dataclass(frozen=True, slots=True)
class Imported:
    """What importing one note did: its outcome and the passages written, or (`outcome`
    None) why it was skipped."""

    external_key: str
    outcome: ImportOutcome | None
    passages: int = 0
    reason: str = ""


def note_import(
    *,
    owner: AbstractBaseUser,
    note: NoteImport,
    source_name: str = "",
    space: Space | int | None = None,
) -> Imported:
    """Create the note `note.external_key` of `owner` (`note_create`, in `space`: None is
    the personal space), or give it a new version if its title or body changed; unchanged
    content writes nothing. A note imported before stays in the space it is in now.

    `source_name` (when not blank) becomes the note's source name. Content the services
    reject, and a note deleted in lode, are skipped with the reason.
    """
    try:
        title, body = validate_content(title=note.title, body=note.body)
    except ValidationError as exc:
        return Imported(note.external_key, None, reason=" ".join(exc.messages))
    note = replace(note, title=title, body=body)
    existing = Document.objects.filter(owner=owner, external_key=note.external_key).first()
    if existing is None:
        document = note_create(
            owner=owner,
            title=note.title,
            body=note.body,
            space=space,
            external_key=note.external_key,
            source_name=source_name,
            source_path=note.source_path,
            source_sha256=note.source_sha256,
        )
        written = Passage.objects.filter(version_id=document.head_id).count()
        return Imported(note.external_key, "created", written)
    with transaction.atomic():
        return _import_version(existing, owner=owner, note=note, source_name=source_name)


def notes_import(
    *,
    owner: AbstractBaseUser,
    notes: Sequence[NoteImport],
    source_name: str = "",
    space: Space | int | None = None,
) -> list[Imported]:
    """`note_import` for a batch, in bulk and in one transaction (loaders of large data sets):
    the notes that are new are written with a few statements for the whole batch, as the
    same rows `note_create` writes; changed ones get a version one by one as `note_import`
    gives them; unchanged ones cost nothing beyond the batch's one read. A non-blank
    `source_name` is set, in one UPDATE, on the batch's notes that have another.

    New notes go to `space` (None: the owner's personal space; otherwise the owner must be
    an editor there); notes imported before stay where they are.

    Returns what happened to each note, in order. `external_key`s must be unique within
    the batch.
    """
    space_id = target_space_id(owner, space)
    keys = [note.external_key for note in notes]
    if len(set(keys)) != len(keys):
        raise ValueError("notes_import: an external_key appears twice in the batch")
    results: dict[str, Imported] = {}
    valid = _validated(notes, rejected=results)
    with transaction.atomic():
        # Locked up front, as `_import_version` locks one note: no concurrent import can
        # append a version on top of the head read here.
        existing = {
            document.external_key: document
            for document in Document.objects.select_for_update(of=("self",))
            .select_related("head")
            .filter(owner=owner, external_key__in=[note.external_key for note in valid])
        }
        if source_name:
            Document.objects.filter(
                pk__in=[d.pk for d in existing.values() if d.source_name != source_name]
            ).update(source_name=source_name)
        new = [note for note in valid if note.external_key not in existing]
        if new:
            written = _notes_create_bulk(
                owner=owner, notes=new, source_name=source_name, space_id=space_id
            )
            for note, passages in zip(new, written, strict=True):
                results[note.external_key] = Imported(note.external_key, "created", passages)
        for note in valid:
            document = existing.get(note.external_key)
            if document is None:
                continue
            if _same_content(document, note):
                # The common re-run case: decided without another query.
                results[note.external_key] = Imported(note.external_key, "unchanged")
                continue
            results[note.external_key] = _import_version(document, owner=owner, note=note)
    return [results[key] for key in keys]


def _validated(notes: Sequence[NoteImport], *, rejected: dict[str, Imported]) -> list[NoteImport]:
    """The notes whose content the services accept, cleaned as `validate_content` cleans
    it; each rejected one goes into `rejected` with the reason."""
    valid: list[NoteImport] = []
    for note in notes:
        try:
            title, body = validate_content(title=note.title, body=note.body)
        except ValidationError as exc:
            rejected[note.external_key] = Imported(
                note.external_key, None, reason=" ".join(exc.messages)
            )
        else:
            valid.append(replace(note, title=title, body=body))
    return valid


def _same_content(document: Document, note: NoteImport) -> bool:
    """A live document whose head already holds the note's title and body."""
    head = document.head
    return (
        document.deleted_at is None
        and head is not None
        and (head.title, head.body) == (note.title, note.body)
    )


def _import_version(
    document: Document, *, owner: AbstractBaseUser, note: NoteImport, source_name: str = ""
) -> Imported:
    """Write a new version of `document` if its head differs from the note's content.

    Runs under a row lock, as `note_update` does, so two imports cannot both append a
    version on top of the same head; must be called inside `transaction.atomic()`. Tags
    typed by hand are kept; `#hashtags` are re-read from the new body. A non-blank
    `source_name` replaces the document's; the source path and hash go on the new version
    only (unchanged content writes no version, so the head keeps its own).
    """
    locked = (
        Document.objects.select_for_update(of=("self",)).select_related("head").get(pk=document.pk)
    )
    if locked.deleted_at is not None:
        return Imported(
            note.external_key,
            None,
            reason="the note was deleted in lode; restore it to import this file again",
        )
    if source_name and locked.source_name != source_name:
        locked.source_name = source_name
        locked.save(update_fields=["source_name"])
    head = locked.head
    if head is not None and head.title == note.title and head.body == note.body:
        return Imported(note.external_key, "unchanged")
    version = version_create(
        document=locked,
        title=note.title,
        body=note.body,
        user=owner,
        source_path=note.source_path,
        source_sha256=note.source_sha256,
    )
    manual = tuple(
        locked.documenttag_set.filter(from_body=False).values_list("tag__name", flat=True)
    )
    _set_tags(locked, manual=manual, body=note.body)
    return Imported(note.external_key, "updated", Passage.objects.filter(version=version).count())


def _notes_create_bulk(
    *, owner: AbstractBaseUser, notes: Sequence[NoteImport], source_name: str, space_id: int
) -> list[int]:
    """`note_create` for notes none of which exists yet, in bulk: the same document rows,
    first versions (`_new_version`), head passages (`index_new_heads`) and `#hashtag` tags.
    Must run inside a transaction; returns the passages written per note, in order.
    `space_id` is set explicitly: bulk_create skips `Document.save`'s personal default."""
    documents = Document.objects.bulk_create(
        [
            Document(
                owner=owner,
                space_id=space_id,
                kind=Document.Kind.NOTE,
                title=note.title,
                title_key=title_key(note.title),
                trust_tier=TrustTier.NOTE,
                external_key=note.external_key,
                source_name=source_name,
            )
            for note in notes
        ]
    )
    versions = Version.objects.bulk_create(
        [
            _new_version(
                document=document,
                parent=None,
                title=note.title,
                body=note.body,
                user=owner,
                source_path=note.source_path,
                source_sha256=note.source_sha256,
            )
            for document, note in zip(documents, notes, strict=True)
        ]
    )
    for document, version in zip(documents, versions, strict=True):
        document.head = version
    Document.objects.bulk_update(documents, ["head"])
    written = index_new_heads(versions)
    DocumentTag.objects.bulk_create(_body_tag_rows(owner, documents, [note.body for note in notes]))
    return written


def _body_tag_rows(
    owner: AbstractBaseUser, documents: Sequence[Document], bodies: Sequence[str]
) -> list[DocumentTag]:
    """The `#hashtag` tag rows `_set_tags` would write for new documents (no manual tags),
    creating the owner's missing tags in one statement."""
    wanted = {doc.pk: hashtags(body) for doc, body in zip(documents, bodies, strict=True)}
    names = {name for found in wanted.values() for name in found}
    if not names:
        return []
    tags = {tag.name: tag for tag in Tag.objects.filter(owner=owner, name__in=names)}
    missing = [Tag(owner=owner, name=name) for name in sorted(names - tags.keys())]
    for tag in Tag.objects.bulk_create(missing):
        tags[tag.name] = tag
    return [
        DocumentTag(document_id=pk, tag=tags[name], from_body=True)
        for pk, found in wanted.items()
        for name in found
    ]
