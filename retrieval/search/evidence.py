"""Verified evidence opening (seeds/loom-chain-of-custody.md, "Revalidate the
hit when the reader opens it"; DESIGN.md invariant 5).

An evidence URL binds four identifiers: document, version, passage and the version's content
SHA-256. A path alone is mutable and a document id alone can point at a newer version, so
opening a link checks every relationship again:

1. the user may see the document (their own, not deleted);
2. the version belongs to the document and the passage to the version;
3. the requested hash is the stored version's, and the stored rows still hash to what they
   claim (body → `Version.sha256`, passage → `text_sha256` and its range of the body);
4. whether the version is still the document's head.

Where the version was read from a file (`Version.source_path`), the file is re-read and
re-hashed *outside* any database transaction, and then the database state is read again: a
document edited, deleted or re-imported while the file was being read must not be answered
from the first read. The file check says nothing about the future: the file can change right
after it (the seed's "verified locator at the check boundary").

Failures stay visible and never substitute newer text: a superseded version is shown as such
with a link to the current one; anything the user may not see, and any identifier or hash
that does not match, is `unavailable`, worded the same whether the document is someone else's
or does not exist, so ids leak nothing.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from notes import sources
from notes.models import Document, Version
from retrieval import links
from retrieval.eligibility import visible_documents
from retrieval.highlight import Segment
from retrieval.models import Passage

# Characters of the version body shown around the passage on the evidence page, each side;
# the cut is moved back to a line break so the context starts and ends on whole lines.
CONTEXT_CHARS = 1500


class EvidenceStatus(StrEnum):
    VERIFIED_CURRENT = "verified_current"
    VERIFIED_SUPERSEDED = "verified_superseded"
    SOURCE_CHANGED = "source_changed"
    UNAVAILABLE = "unavailable"


class Unavailable(StrEnum):
    """Why a link is unavailable. Only `DELETED` is specific to a document, and only its
    owner ever gets it; everything else is one of two generic answers."""

    NOT_FOUND = "not_found"  # no such document, or not the user's: indistinguishable
    DELETED = "deleted"  # the user's own document, deleted
    MISMATCH = "mismatch"  # ids or hash don't fit together (an altered or broken link)
    INTEGRITY = "integrity"  # stored rows no longer hash to what they claim
    CHANGED = "changed"  # the stored version changed while its file was read (never expected)


UNAVAILABLE_MESSAGES = {
    Unavailable.NOT_FOUND: "No evidence you can see matches this link.",
    Unavailable.DELETED: "This note was deleted, so its evidence is no longer shown.",
    Unavailable.MISMATCH: (
        "The link's document, version, passage and content hash do not match what lode "
        "stores together; the link is broken or was altered."
    ),
    Unavailable.INTEGRITY: (
        "The stored version no longer matches its own content hash, so it cannot be shown "
        "as evidence. Check the database (manage.py lode_index health)."
    ),
    Unavailable.CHANGED: "The stored version changed while it was being verified; open it again.",
}


@dataclass(frozen=True)
class SourceCheck:
    """The result of re-reading a version's source file. `detail` says what differs."""

    matches: bool
    detail: str = ""


@dataclass(frozen=True)
class EvidenceOutcome:
    """The answer to opening an evidence link.

    For every status but `UNAVAILABLE`, `document`, `version` and `passage` are the rows the
    link names (the *old* version when superseded, never the head in its place) and were
    checked against each other and their hashes. `head` is the document's current version;
    `text_in_current` (superseded only) says whether the passage text still occurs verbatim
    in the head's body. `source_detail` (source_changed only) says what happened to the file.
    An unavailable outcome carries no rows at all, only `reason`.
    """

    status: EvidenceStatus
    message: str
    document: Document | None = None
    version: Version | None = None
    passage: Passage | None = None
    head: Version | None = None
    text_in_current: bool | None = None
    source_detail: str = ""
    reason: Unavailable | None = None

    @property
    def verified(self) -> bool:
        return self.status in (EvidenceStatus.VERIFIED_CURRENT, EvidenceStatus.VERIFIED_SUPERSEDED)

    @property
    def http_status(self) -> int:
        return 404 if self.status == EvidenceStatus.UNAVAILABLE else 200

    @property
    def current_url(self) -> str:
        """The page of the document's current version ("" when unavailable): the note, or
        the external's head snapshot."""
        if self.document is None:
            return ""
        return links.document_url(kind=self.document.kind, document_id=self.document.pk)

    @property
    def version_url(self) -> str:
        """The page of the cited version itself (the full stored text)."""
        if self.document is None or self.version is None:
            return ""
        return links.version_url(
            kind=self.document.kind, document_id=self.document.pk, version_id=self.version.pk
        )


def _unavailable(reason: Unavailable) -> EvidenceOutcome:
    return EvidenceOutcome(
        status=EvidenceStatus.UNAVAILABLE, message=UNAVAILABLE_MESSAGES[reason], reason=reason
    )


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _resolve(
    user: AbstractBaseUser | AnonymousUser,
    document_id: int,
    version_id: int,
    passage_id: int,
    sha256: str,
) -> EvidenceOutcome:
    """One read of the database state behind a link (no file I/O).

    Returns `VERIFIED_CURRENT` when the version is the head (the caller may still check its
    source file), `VERIFIED_SUPERSEDED` or `UNAVAILABLE`. One query when everything matches.
    """
    if not user.is_authenticated:
        return _unavailable(Unavailable.NOT_FOUND)
    passage = (
        Passage.objects.select_related("version", "document")
        .filter(
            pk=passage_id,
            version_id=version_id,
            version__document_id=document_id,
            document_id=document_id,
            document__space__memberships__user_id=user.pk,
        )
        .first()
    )
    if passage is None:
        return _unavailable(_why_no_passage(user, document_id))
    document, version = passage.document, passage.version
    if document.deleted_at is not None:
        return _unavailable(Unavailable.DELETED)
    if version.sha256 != sha256:
        return _unavailable(Unavailable.MISMATCH)
    if not _stored_rows_intact(version, passage):
        return _unavailable(Unavailable.INTEGRITY)
    if document.head_id is None:  # the first version is still being written
        return _unavailable(Unavailable.NOT_FOUND)
    if document.head_id == version.pk:
        return EvidenceOutcome(
            status=EvidenceStatus.VERIFIED_CURRENT,
            message="Verified: this passage is in the current version, unchanged.",
            document=document,
            version=version,
            passage=passage,
            head=version,
        )
    head = Version.objects.filter(pk=document.head_id, document_id=document.pk).first()
    if head is None:  # the head moved again between the two reads; report what we know
        return _unavailable(Unavailable.CHANGED)
    text_in_current = passage.text in head.body
    return EvidenceOutcome(
        status=EvidenceStatus.VERIFIED_SUPERSEDED,
        message=(
            f"Verified against version {version.number}, which has been superseded by "
            f"version {head.number}."
        ),
        document=document,
        version=version,
        passage=passage,
        head=head,
        text_in_current=text_in_current,
    )


def _why_no_passage(user: AbstractBaseUser | AnonymousUser, document_id: int) -> Unavailable:
    """Why a link's ids found no passage the user may see: tell a member's broken link from a
    document they cannot see, and nothing more (the filter on membership makes a document
    in someone else's space look exactly like no document)."""
    document = visible_documents(user.pk).filter(pk=document_id).first()
    if document is None:
        return Unavailable.NOT_FOUND
    if document.deleted_at is not None:
        return Unavailable.DELETED
    return Unavailable.MISMATCH


def _stored_rows_intact(version: Version, passage: Passage) -> bool:
    """Whether the stored rows still match their own hashes: the body its `sha256`, the
    passage its range of the body and its `text_sha256` (DESIGN: "opening a result
    re-verifies it against stored bytes"; a row edited behind lode's back is not evidence)."""
    return (
        _sha256(version.body) == version.sha256
        and version.body[passage.start : passage.end] == passage.text
        and _sha256(passage.text) == passage.text_sha256
    )


@dataclass(frozen=True)
class SizeLimit:
    """The byte cap a source file is read under, and its name in the reason a file over it
    is refused (the name of the cap actually applied, not another one)."""

    max_bytes: int
    name: str


def source_size_limit(document: Document) -> SizeLimit:
    """The size cap a document's source file was read under: a mirrored file's
    (`LODE_SOURCE_MAX_FILE_BYTES`) for an external, a note's (`LODE_MAX_NOTE_BYTES`)
    otherwise — so re-reading it for verification accepts what the first read accepted."""
    if document.kind == Document.Kind.EXTERNAL:
        return SizeLimit(settings.LODE_SOURCE_MAX_FILE_BYTES, "source file cap")
    return note_size_limit()


def note_size_limit() -> SizeLimit:
    """A note's size cap (`LODE_MAX_NOTE_BYTES`), the markdown import's."""
    return SizeLimit(settings.LODE_MAX_NOTE_BYTES, "note limit")


def check_source(
    source_path: str, source_sha256: str, *, limit: SizeLimit | None = None
) -> SourceCheck:
    """Re-read the file a version came from and compare the SHA-256 of its bytes.

    Uses the import's reading rules (`notes.sources`: no symbolic links, the size limit —
    `limit`, a note's when not given). The stored path was resolved at import, so a path that
    now resolves elsewhere means some folder on it became a symbolic link: refused like a
    link.
    """
    path = Path(source_path)
    if not path.is_absolute():
        return SourceCheck(False, "the recorded source path is not absolute")
    if path.is_symlink():
        return SourceCheck(False, "the source file is now a symbolic link (links are not followed)")
    if os.path.realpath(path) != os.path.normpath(path):
        return SourceCheck(False, "the source path now goes through a symbolic link")
    limit = limit or note_size_limit()
    try:
        data = sources.read_source_file(path, limit=limit.max_bytes).data
    except sources.SourceTooLarge as exc:
        return SourceCheck(
            False,
            f"the source file can no longer be read: {exc.size:,} bytes is over the "
            f"{exc.limit:,}-byte {limit.name}",
        )
    except sources.SourceRefused as exc:
        return SourceCheck(False, f"the source file can no longer be read: {exc}")
    except FileNotFoundError:
        return SourceCheck(False, "the source file is missing")
    except OSError as exc:
        return SourceCheck(False, f"the source file cannot be read: {exc.strerror or exc}")
    if sources.sha256_bytes(data) != source_sha256:
        return SourceCheck(False, "the source file's bytes changed since it was indexed")
    return SourceCheck(True)


def open_evidence(
    user: AbstractBaseUser | AnonymousUser,
    document_id: int,
    version_id: int,
    passage_id: int,
    sha256: str,
) -> EvidenceOutcome:
    """Verify an evidence link for `user`; see the module docstring for the checks.

    Do not call this inside `transaction.atomic()`: the source file is read between two
    database reads so no transaction (or row lock) is held during file I/O.
    """
    first = _resolve(user, document_id, version_id, passage_id, sha256)
    if first.status != EvidenceStatus.VERIFIED_CURRENT:
        return first  # unavailable, or superseded: the file has moved on with the head
    version = first.version
    if not version.source_path:
        return first  # typed into lode: the stored version is the original
    check = check_source(
        version.source_path, version.source_sha256, limit=source_size_limit(first.document)
    )
    # The file read took time; indexing, an edit or a delete may have happened meanwhile.
    # Answer from the state as it is now, and use the file result only if that state is the
    # one the file was checked for.
    second = _resolve(user, document_id, version_id, passage_id, sha256)
    if second.status != EvidenceStatus.VERIFIED_CURRENT:
        return second
    if (second.version.source_path, second.version.source_sha256) != (
        version.source_path,
        version.source_sha256,
    ):
        return _unavailable(Unavailable.CHANGED)
    if check.matches:
        return EvidenceOutcome(
            status=EvidenceStatus.VERIFIED_CURRENT,
            message=(
                "Verified: this passage is in the current version, unchanged, and the source "
                "file still has the bytes that were indexed."
            ),
            document=second.document,
            version=second.version,
            passage=second.passage,
            head=second.version,
        )
    return EvidenceOutcome(
        status=EvidenceStatus.SOURCE_CHANGED,
        message=(
            f"Source changed: {check.detail}. The text shown is lode's stored copy from "
            "when the file was indexed; import the folder again to index the file as it is now."
        ),
        document=second.document,
        version=second.version,
        passage=second.passage,
        head=second.version,
        source_detail=check.detail,
    )


@dataclass(frozen=True)
class PassageContext:
    """The passage inside its version body: `before + passage + after` is a contiguous slice
    of the body; `clipped_before`/`clipped_after` say whether the body goes on. `quote`, when
    a quoted span was asked for, is `(start, end)` of that span inside `passage` (code
    points): the words an answer cited, marked in place of the whole passage."""

    before: str
    passage: str
    after: str
    clipped_before: bool
    clipped_after: bool
    quote: tuple[int, int] | None = None

    @property
    def passage_segments(self) -> list[Segment]:
        """The passage alone: the quoted span marked, or nothing marked without one."""
        if self.quote is None:
            return [Segment(self.passage, False)]
        a, b = self.quote
        return [
            Segment(self.passage[:a], False),
            Segment(self.passage[a:b], True),
            Segment(self.passage[b:], False),
        ]

    @property
    def segments(self) -> list[Segment]:
        """The context as highlight segments — the quoted span highlighted, or without one
        the whole passage: the shape every page renders highlighted text from
        (templates/partials.html#segments)."""
        if self.quote is not None:
            return [Segment(self.before, False), *self.passage_segments, Segment(self.after, False)]
        return [
            Segment(self.before, False),
            Segment(self.passage, True),
            Segment(self.after, False),
        ]


def quote_within(
    passage_start: int, passage_end: int, span: tuple[int, int] | None
) -> tuple[int, int] | None:
    """`span` (version code points) as a range inside the passage `[passage_start,
    passage_end)`, cut to the passage; None when there is no span or it misses the passage
    (a stale or hand-made link marks the passage as a whole, never text outside it)."""
    if span is None:
        return None
    start, end = max(span[0], passage_start), min(span[1], passage_end)
    if start >= end:
        return None
    return start - passage_start, end - passage_start


def passage_context(
    body: str,
    start: int,
    end: int,
    chars: int = CONTEXT_CHARS,
    *,
    quote_span: tuple[int, int] | None = None,
) -> PassageContext:
    """Up to `chars` code points of `body` each side of `[start, end)`, cut at line breaks;
    `quote_span` (version code points) marks the quoted words inside the passage."""
    lo = max(0, start - chars)
    if lo > 0:
        newline = body.find("\n", lo, start)
        lo = newline + 1 if newline != -1 else lo
    hi = min(len(body), end + chars)
    if hi < len(body):
        newline = body.rfind("\n", end, hi)
        hi = newline if newline != -1 else hi
    return PassageContext(
        before=body[lo:start],
        passage=body[start:end],
        after=body[end:hi],
        clipped_before=lo > 0,
        clipped_after=hi < len(body),
        quote=quote_within(start, end, quote_span),
    )
