"""Notes over the API: the same selectors and services as the pages, with the same rules:
any member of a note's space reads it, an editor or admin writes it (403
otherwise), and a note or space the caller is not a member of is a 404 that names nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status
from ninja.errors import HttpError

from lode_site.api_bodies import NOT_BLANK_TEXT, STORABLE_TEXT, BodySchema
from lode_site.errors import NO_ACCESS
from lode_site.ids import DbId, Offset
from notes import selectors, services
from notes.models import Document, Version
from retrieval import eligibility

router = Router(tags=["notes"])
TAG_PARAM = Query(None, pattern=STORABLE_TEXT, description="Only the notes with this tag.")
# The lists' optional space filter (a module-level default: ruff's B008).
SPACE_PARAM = Query(
    None,
    description="Only the items of this space (one you are a member of; 404 otherwise). "
    "Default: every space you belong to.",
)


class VersionSummary(Schema):
    id: int
    number: int
    title: str
    sha256: str
    byte_size: int
    created_at: datetime


class NoteOut(Schema):
    id: int
    space: int = Field(description="The id of the space the note belongs to.")
    title: str
    body: str
    body_omitted: bool = Field(
        False,
        description="Lists only: true when this note's body was left out (`body` is empty) "
        "because the bodies before it filled the response's budget "
        "(LODE_API_LIST_MAX_BODY_CHARS); GET /api/notes/{id} gives the whole note.",
    )
    tags: list[str]
    version: VersionSummary
    created_at: datetime
    updated_at: datetime


# One tag as `services.parse_tags` reads it, in text the database can store.
TagItem = Annotated[str, Field(pattern=services.TAG_ITEM_PATTERN)]


class NoteIn(BodySchema):
    title: str = Field(
        max_length=services.MAX_TITLE_CHARS,
        pattern=NOT_BLANK_TEXT,
        description=f"Not blank, at most {services.MAX_TITLE_CHARS} characters (surrounding "
        "spaces are stripped); no NUL characters.",
    )
    body: str = Field(
        "",
        pattern=STORABLE_TEXT,
        description="Markdown; no NUL characters. At most LODE_MAX_NOTE_BYTES bytes of UTF-8 "
        "(a longer body is a 400).",
    )
    tags: list[TagItem] = Field(
        [],
        description="Tag names: letters, digits, '-' and '_', starting with a letter or digit, "
        f"at most {services.MAX_TAG_CHARS} characters; a leading '#' and surrounding spaces "
        "are dropped, an empty item is skipped. `#hashtags` in the body are tags too.",
    )


class NoteCreateIn(NoteIn):
    space: DbId | None = Field(
        None,
        description="The id of the space the note goes to: one where you are an editor or "
        "admin (403 where you are a viewer, 404 for a space you are not a member of). "
        "Default: your personal space.",
    )


class NoteUpdateIn(NoteIn):
    base_version_id: DbId = Field(
        description="The id of the version this edit started from (the head you read). If "
        "the note has moved on since, the edit is refused with 409 and both texts; an id "
        "that is not a version of this note is a 404."
    )


class RestoreIn(BodySchema):
    base_version_id: DbId = Field(
        description="The id of the head version you saw when choosing to restore. If the "
        "note has moved on since, nothing is restored (409); an id that is not a version of "
        "this note is a 404."
    )


class ErrorOut(Schema):
    detail: str


class ConflictOut(Schema):
    detail: str
    base_version: VersionSummary
    head_version: VersionSummary
    head_title: str
    head_body: str


class VersionOut(VersionSummary):
    body: str
    extractor_name: str
    extractor_version: str
    parent_id: int | None


def _summary(version: Version) -> VersionSummary:
    return VersionSummary(
        id=version.pk,
        number=version.number,
        title=version.title,
        sha256=version.sha256,
        byte_size=version.byte_size,
        created_at=version.created_at,
    )


def _note_out(note: Document) -> NoteOut:
    return NoteOut(
        id=note.pk,
        space=note.space_id,
        title=note.title,
        body=note.head.body,
        tags=[name for name, _ in selectors.note_tags(note)],
        version=_summary(note.head),
        created_at=note.created_at,
        updated_at=note.updated_at,
    )


def _get(request: HttpRequest, note_id: int) -> Document:
    """A live note of one of the caller's spaces, or a 404 (a note of a space they are not
    in looks like a missing one)."""
    try:
        return selectors.note_get(request.auth, note_id)
    except Document.DoesNotExist:
        raise HttpError(404, NO_ACCESS) from None


def _writable(request: HttpRequest, note_id: int) -> Document:
    """`_get`, and 403 unless the caller is an editor or admin of the note's space."""
    note = _get(request, note_id)
    if not selectors.may_write(request.auth, note):
        raise PermissionDenied("Only editors and admins of this space can change its notes.")
    return note


@router.get("/", response={200: list[NoteOut], 404: ErrorOut})
def list_notes(
    request: HttpRequest,
    tag: str | None = TAG_PARAM,
    space: DbId | None = SPACE_PARAM,
    limit: int = Query(100, description="At most this many notes (clamped to 1..500)."),
    offset: Offset = 0,
):
    limit = max(1, min(limit, 500))
    try:
        notes = selectors.notes_for_user(request.auth, tag=tag, space_id=space)
    except eligibility.NoAccess:
        raise HttpError(404, NO_ACCESS) from None
    notes = notes[offset : offset + limit]
    # Bound the response: 500 notes of up to LODE_MAX_NOTE_BYTES each
    # would be a gigabyte. Bodies are included in order until the budget is spent (the
    # first always is); later notes keep their metadata and say their body was left out.
    budget = settings.LODE_API_LIST_MAX_BODY_CHARS
    listed = []
    for note in notes:
        out = _note_out(note)
        if listed and len(out.body) > budget:
            out.body, out.body_omitted = "", True
        budget -= len(out.body)
        listed.append(out)
    return listed


@router.post("/", response={201: NoteOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut})
def create_note(request: HttpRequest, payload: NoteCreateIn):
    if payload.space is not None and eligibility.role_in(request.auth.pk, payload.space) is None:
        raise HttpError(404, NO_ACCESS)
    note = services.note_create(
        owner=request.auth,
        title=payload.title,
        body=payload.body,
        tags=payload.tags,
        space=payload.space,
    )
    return Status(201, _note_out(note))


@router.get("/{id:note_id}", response={200: NoteOut, 404: ErrorOut})
def get_note(request: HttpRequest, note_id: DbId):
    return _note_out(_get(request, note_id))


@router.put(
    "/{id:note_id}",
    response={200: NoteOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ConflictOut},
)
def update_note(request: HttpRequest, note_id: DbId, payload: NoteUpdateIn):
    """Save an edit. 409 (with both texts) when the note changed since `base_version_id`;
    404 when `base_version_id` is not a version of this note; 400 when the body is over
    LODE_MAX_NOTE_BYTES; 403 for a viewer of the note's space."""
    note = _writable(request, note_id)
    try:
        services.note_update(
            document=note,
            user=request.auth,
            base_version_id=payload.base_version_id,
            title=payload.title,
            body=payload.body,
            tags=payload.tags,
        )
    except services.EditConflict as exc:
        return Status(409, _conflict_out(exc))
    return Status(200, _note_out(_get(request, note_id)))


def _conflict_out(exc: services.EditConflict) -> ConflictOut:
    return ConflictOut(
        detail=str(exc),
        base_version=_summary(exc.base),
        head_version=_summary(exc.head),
        head_title=exc.head.title,
        head_body=exc.head.body,
    )


@router.delete("/{id:note_id}", response={204: None, 403: ErrorOut, 404: ErrorOut})
def delete_note(request: HttpRequest, note_id: DbId):
    services.note_delete(document=_writable(request, note_id), user=request.auth)
    return Status(204, None)


@router.get("/{id:note_id}/versions", response={200: list[VersionSummary], 404: ErrorOut})
def list_versions(request: HttpRequest, note_id: DbId):
    return [_summary(v) for v in selectors.note_versions(_get(request, note_id))]


@router.get("/{id:note_id}/versions/{id:version_id}", response={200: VersionOut, 404: ErrorOut})
def get_version(request: HttpRequest, note_id: DbId, version_id: DbId):
    note = _get(request, note_id)
    try:
        version = note.versions.get(pk=version_id)
    except Version.DoesNotExist:
        raise HttpError(404, "No such version of this note.") from None
    return VersionOut(
        **_summary(version).dict(),
        body=version.body,
        extractor_name=version.extractor_name,
        extractor_version=version.extractor_version,
        parent_id=version.parent_id,
    )


@router.post(
    "/{id:note_id}/versions/{id:version_id}/restore",
    response={200: NoteOut, 403: ErrorOut, 404: ErrorOut, 409: ConflictOut},
)
def restore_version(request: HttpRequest, note_id: DbId, version_id: DbId, payload: RestoreIn):
    """Write an old version's content as a new head version. `base_version_id` is the head
    you saw: 409 (nothing restored, the current text returned) when the note changed since,
    as for an edit; 404 when it is not a version of this note; 403 for a viewer."""
    note = _writable(request, note_id)
    try:
        services.note_restore(
            document=note,
            user=request.auth,
            version_id=version_id,
            base_version_id=payload.base_version_id,
        )
    except Version.DoesNotExist:
        raise HttpError(404, "No such version of this note.") from None
    except services.EditConflict as exc:
        return Status(409, _conflict_out(exc))
    return Status(200, _note_out(_get(request, note_id)))
