"""Annotations on external snapshots: create, list, and carry them to new snapshots.

An annotation is anchored three ways — code-point offsets into the snapshot body, the exact
quote, and a little context before and after — because offsets alone go wrong the moment a
refresh inserts a line above the span, and a quote alone is ambiguous when it repeats. When a
new snapshot becomes an external's head, `migrate_annotations` moves every annotation to
where its quote now is, letting the context pick among repeats, or marks it orphaned. An
orphan keeps its last snapshot and its quote and is shown as orphaned; nothing is dropped.

The annotation's own words are stored as an ordinary `notes.Document` of trust tier
"annotation" (written with `notes.services.version_create`, so its passages are indexed in
the same transaction), which makes annotations searchable as their own tier and lets
evidence for them open like a note's.

Offsets are in code points (Python `str` indices), never UTF-16 units: the browser converts
(static/annotate.js), and the service checks `body[start:end] == quote` before saving.

Annotations belong to their external's space: every member sees them, an editor
or admin of the space writes one (its note goes to the same space), and an annotation is
deleted by its author or an admin of the space.
"""

from __future__ import annotations

from typing import NamedTuple

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from externals.models import QUOTE_SEPARATOR, Annotation
from notes.models import Document, TrustTier, Version
from notes.services import document_discard, validate_content, version_create
from retrieval.eligibility import can, member_space_ids
from retrieval.index.edges import refresh_edges
from spaces.models import Role

# Characters of context kept either side of the quote: enough to tell repeats apart, small
# enough that an edit near (not in) the span rarely matters.
CONTEXT_CHARS = 48
MAX_QUOTE_CHARS = 10_000
MAX_TEXT_CHARS = 20_000
ANNOTATION_EXTRACTOR = "annotation"
ANNOTATION_EXTRACTOR_VERSION = "1"


class MigrationResult(NamedTuple):
    """What `migrate_annotations` did: annotations moved onto the new snapshot (including
    orphans found again), and annotations newly orphaned by it."""

    moved: int
    orphaned: int


# --- pure anchoring ----------------------------------------------------------------------


def _common_suffix(a: str, b: str) -> int:
    n = 0
    limit = min(len(a), len(b))
    while n < limit and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def _common_prefix(a: str, b: str) -> int:
    n = 0
    limit = min(len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    return n


def occurrences(body: str, quote: str) -> list[int]:
    """Every start index of `quote` in `body`, overlapping ones included."""
    found: list[int] = []
    if not quote:
        return found
    index = body.find(quote)
    while index != -1:
        found.append(index)
        index = body.find(quote, index + 1)
    return found


def reanchor(
    body: str, quote: str, prefix: str, suffix: str, old_start: int
) -> tuple[int, int] | None:
    """Where `quote` sits in `body`, as code-point `(start, end)`, or None (orphaned).

    One occurrence is taken as is. Among several, the one whose surroundings best match the
    stored context wins: the length of the common suffix of `prefix` and the text before it,
    plus the common prefix of `suffix` and the text after it. Ties go to the occurrence
    nearest `old_start` (then the earlier one), since refreshes mostly shift text a little.
    Pure: no database, deterministic.
    """
    starts = occurrences(body, quote)
    if not starts:
        return None
    if len(starts) == 1:
        return starts[0], starts[0] + len(quote)

    def score(start: int) -> tuple[int, int, int]:
        end = start + len(quote)
        before = body[max(0, start - len(prefix)) : start]
        after = body[end : end + len(suffix)]
        context = _common_suffix(prefix, before) + _common_prefix(suffix, after)
        return (-context, abs(start - old_start), start)

    best = min(starts, key=score)
    return best, best + len(quote)


def context_around(body: str, start: int, end: int) -> tuple[str, str]:
    """The `CONTEXT_CHARS` before `start` and after `end`."""
    return body[max(0, start - CONTEXT_CHARS) : start], body[end : end + CONTEXT_CHARS]


# --- writes ------------------------------------------------------------------------------


def _quote_block(quote: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in quote.split("\n"))


def annotation_body(*, text: str, quote: str, external: Document, version: Version) -> str:
    """The searchable body of an annotation's note: its text, then the quoted span and the
    snapshot it was quoted from (true forever: it names where the quote was taken)."""
    fetched = version.created_at.strftime("%Y-%m-%d %H:%M UTC") if version.created_at else ""
    return (
        f"{text.strip()}{QUOTE_SEPARATOR}{_quote_block(quote)}\n\n"
        f"Quoted from snapshot {version.number} of \u201c{external.title}\u201d"
        f" (fetched {fetched}, sha256 {version.sha256[:12]}).\n"
    )


def annotation_title(external: Document) -> str:
    return f"Annotation on \u201c{external.title}\u201d"[:500]


def _locked_external(owner: AbstractBaseUser, document_id: int) -> Document:
    external = (
        Document.objects.select_for_update(of=("self",))
        .select_related("head")
        .filter(pk=document_id)
        .first()
    )
    if (
        external is None
        or not can(owner.pk, external.space_id, Role.EDITOR)
        or external.kind != Document.Kind.EXTERNAL
        or external.deleted_at is not None
    ):
        # The same error whether it is in another space or missing: ids leak nothing.
        raise PermissionDenied("You cannot annotate this document.")
    return external


def _move(annotation: Annotation, version: Version, start: int, end: int) -> None:
    annotation.version = version
    annotation.start, annotation.end = start, end
    annotation.prefix, annotation.suffix = context_around(version.body, start, end)
    annotation.status = Annotation.Status.ANCHORED
    annotation.orphaned_at = None


def _orphan(annotation: Annotation) -> None:
    if annotation.status != Annotation.Status.ORPHANED:
        annotation.status = Annotation.Status.ORPHANED
        annotation.orphaned_at = timezone.now()


def annotation_create(
    *,
    owner: AbstractBaseUser,
    version: Version,
    start: int,
    end: int,
    quote: str,
    text: str,
    document: Document | None = None,
) -> Annotation:
    """Attach `text` to the span `[start, end)` (code points) of snapshot `version`.

    Checks that `owner` is an editor or admin of the external's space (`PermissionDenied`
    otherwise, also for a document that is not an external), that the version is a
    snapshot of it (and of `document`, when the caller names one, as the URL does), and
    that `body[start:end]` is exactly `quote` (`ValidationError` otherwise: the browser
    sends both, so a mismatch means the page and the stored snapshot disagree). Annotating
    an older snapshot is allowed; the annotation then moves to the head at once, as a
    refresh would move it. The annotation's note goes to the external's space.
    """
    text = (text or "").strip()
    if not text:
        raise ValidationError("Write something to attach to the selected text.")
    if len(text) > MAX_TEXT_CHARS:
        raise ValidationError(f"An annotation is limited to {MAX_TEXT_CHARS:,} characters.")
    if not quote:
        raise ValidationError("Select some text of the snapshot to annotate.")
    if len(quote) > MAX_QUOTE_CHARS:
        raise ValidationError(f"Select at most {MAX_QUOTE_CHARS:,} characters.")
    with transaction.atomic():
        # Lock the external so a refresh cannot swap its head (and migrate annotations)
        # between the check below and the insert.
        external = _locked_external(owner, version.document_id)
        if document is not None and document.pk != external.pk:
            raise ValidationError("That snapshot belongs to another document.")
        body = version.body
        if not (0 <= start < end <= len(body)):
            raise ValidationError("The selection is outside the snapshot text.")
        if body[start:end] != quote:
            raise ValidationError(
                "The selected text does not match the stored snapshot at that position; "
                "reload the page and select it again."
            )
        title, note_body = validate_content(
            title=annotation_title(external),
            body=annotation_body(text=text, quote=quote, external=external, version=version),
        )
        note = Document.objects.create(
            owner=owner,
            # Readable by exactly those who read the external it quotes.
            space_id=external.space_id,
            kind=Document.Kind.NOTE,
            title=title,
            trust_tier=TrustTier.ANNOTATION,
            # The note quotes the external, so it must not leave the machine if the
            # external may not; `source:` filters find it next to its external.
            no_egress=external.no_egress,
            source_name=external.source_name,
        )
        version_create(
            document=note,
            title=title,
            body=note_body,
            user=owner,
            extractor_name=ANNOTATION_EXTRACTOR,
            extractor_version=ANNOTATION_EXTRACTOR_VERSION,
        )
        prefix, suffix = context_around(body, start, end)
        annotation = Annotation(
            owner=owner,
            document=external,
            version=version,
            start=start,
            end=end,
            quote=quote,
            prefix=prefix,
            suffix=suffix,
            note_document=note,
        )
        head = external.head
        if head is not None and head.pk != version.pk:
            found = reanchor(head.body, quote, prefix, suffix, start)
            if found is None:
                _orphan(annotation)
            else:
                _move(annotation, head, *found)
        annotation.full_clean()
        annotation.save()
        refresh_edges([note.pk], reverse=False)  # the annotation's `annotates` edge
    return annotation


def migrate_annotations(document: Document, new_version: Version) -> MigrationResult:
    """Carry `document`'s annotations onto its new head snapshot `new_version`.

    Called by the refresh pipeline in the transaction that makes `new_version` the head.
    Each annotation not already on it is re-anchored in the new body: found → moved there
    (an orphan found again is anchored again); not found → orphaned, keeping its last
    snapshot and quote. Nothing is deleted. Idempotent: a second call moves nothing more.
    """
    moved = orphaned = 0
    touched: list[int] = []
    with transaction.atomic():
        rows = (
            Annotation.objects.select_for_update()
            .filter(document_id=document.pk)
            .exclude(version_id=new_version.pk)
            .order_by("id")
        )
        body = new_version.body
        for annotation in rows:
            found = reanchor(
                body, annotation.quote, annotation.prefix, annotation.suffix, annotation.start
            )
            if found is None:
                if annotation.status == Annotation.Status.ORPHANED:
                    continue  # still orphaned: nothing changes, nothing to count
                _orphan(annotation)
                orphaned += 1
                # An orphan keeps the snapshot it was last found in.
                annotation.save(update_fields=["status", "orphaned_at"])
            else:
                _move(annotation, new_version, *found)
                moved += 1
                annotation.save(
                    update_fields=[
                        "version",
                        "start",
                        "end",
                        "prefix",
                        "suffix",
                        "status",
                        "orphaned_at",
                    ]
                )
            touched.append(annotation.note_document_id)
        refresh_edges(touched, reverse=False, changed=False)  # `annotates` follows them
    return MigrationResult(moved, orphaned)


def annotation_get(user: AbstractBaseUser, document_id: int, annotation_id: int) -> Annotation:
    """One live annotation on external `document_id` of one of the user's spaces;
    `Annotation.DoesNotExist` for one in a space they are not in, a deleted one, or a
    mismatched external (ids leak nothing)."""
    return Annotation.objects.select_related("document", "version", "note_document__head").get(
        pk=annotation_id,
        document_id=document_id,
        document__space_id__in=sorted(member_space_ids(user.pk)),
        note_document__deleted_at__isnull=True,
    )


def may_delete(user: AbstractBaseUser, annotation: Annotation) -> bool:
    """Its author, or an admin of its external's space, may delete an annotation."""
    return annotation.owner_id == user.pk or can(user.pk, annotation.document.space_id, Role.ADMIN)


def annotation_delete(*, owner: AbstractBaseUser, annotation: Annotation) -> None:
    """Delete an annotation (`owner`: who deletes it, its author or an admin of the
    space; `PermissionDenied` for anyone else): its note is soft-deleted, which takes its
    words out of search and hides it on the snapshot page (`annotations_for`). The row
    stays, like every deleted note's history, so the snapshot it sat on is still protected
    from deletion."""
    if not may_delete(owner, annotation):
        raise PermissionDenied("You cannot delete this annotation.")
    document_discard(document=annotation.note_document)


# --- reads -------------------------------------------------------------------------------


def annotations_for(user: AbstractBaseUser, version: Version) -> QuerySet[Annotation]:
    """The annotations to show the user on the page of snapshot `version` (every member's,
    when the user is a member of the external's space; none otherwise): those anchored on
    it (by position), then the external's orphans (they have no place in the text but must
    stay visible). Deleting an annotation's note (from the notes pages) hides the
    annotation, as the user would expect."""
    return (
        Annotation.objects.filter(
            document_id=version.document_id,
            document__space_id__in=sorted(member_space_ids(user.pk)),
            note_document__deleted_at__isnull=True,
        )
        .filter(Q(version_id=version.pk) | Q(status=Annotation.Status.ORPHANED))
        .select_related("document", "owner", "version", "note_document__head")
        .order_by("status", "start", "id")  # "anchored" sorts before "orphaned"
    )
