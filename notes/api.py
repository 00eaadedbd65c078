"""Notes over the API: the same selectors and services as the pages."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status
from ninja.errors import HttpError

from lode_site.ids import DbId, Offset
from notes import selectors, services
from notes.models import Document, Version

router = Router(tags=["notes"])


class VersionSummary(Schema):
    id: int
    number: int
    title: str
    sha256: str
    byte_size: int
    created_at: datetime


class NoteOut(Schema):
    id: int
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


class NoteIn(Schema):
    title: str
    body: str = ""
    tags: list[str] = []


class NoteUpdateIn(NoteIn):
    base_version_id: DbId = Field(
        description="The id of the version this edit started from (the head you read). If "
        "the note has moved on since, the edit is refused with 409 and both texts; an id "
        "that is not a version of this note is a 400."
    )


class RestoreIn(Schema):
    base_version_id: DbId = Field(
        description="The id of the head version you saw when choosing to restore. If the "
        "note has moved on since, nothing is restored (409); an id that is not a version of "
        "this note is a 400."
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
        title=note.title,
        body=note.head.body,
        tags=[name for name, _ in selectors.note_tags(note)],
        version=_summary(note.head),
        created_at=note.created_at,
        updated_at=note.updated_at,
    )


def _get(request: HttpRequest, note_id: int) -> Document:
    """The caller's live note, or a 404 (someone else's note looks like a missing one)."""
    try:
        return selectors.note_get(request.auth, note_id)
    except Document.DoesNotExist:
        raise HttpError(404, "No such note.") from None


@router.get("/", response=list[NoteOut])
def list_notes(
    request: HttpRequest,
    tag: str | None = None,
    limit: int = Query(100, description="At most this many notes (clamped to 1..500)."),
    offset: Offset = 0,
):
    limit = max(1, min(limit, 500))
    notes = selectors.notes_for_user(request.auth, tag=tag)[offset : offset + limit]
    # Bound the response (issue 10, item 2): 500 notes of up to LODE_MAX_NOTE_BYTES each
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


@router.post("/", response={201: NoteOut, 400: ErrorOut})
def create_note(request: HttpRequest, payload: NoteIn):
    note = services.note_create(
        owner=request.auth, title=payload.title, body=payload.body, tags=payload.tags
    )
    return Status(201, _note_out(note))


@router.get("/{id:note_id}", response={200: NoteOut, 404: ErrorOut})
def get_note(request: HttpRequest, note_id: DbId):
    return _note_out(_get(request, note_id))


@router.put(
    "/{id:note_id}", response={200: NoteOut, 400: ErrorOut, 404: ErrorOut, 409: ConflictOut}
)
def update_note(request: HttpRequest, note_id: DbId, payload: NoteUpdateIn):
    """Save an edit. 409 (with both texts) when the note changed since `base_version_id`;
    400 when `base_version_id` is not a version of this note or the content is invalid."""
    note = _get(request, note_id)
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


@router.delete("/{id:note_id}", response={204: None, 404: ErrorOut})
def delete_note(request: HttpRequest, note_id: DbId):
    services.note_delete(document=_get(request, note_id), user=request.auth)
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
    response={200: NoteOut, 400: ErrorOut, 404: ErrorOut, 409: ConflictOut},
)
def restore_version(request: HttpRequest, note_id: DbId, version_id: DbId, payload: RestoreIn):
    """Write an old version's content as a new head version. `base_version_id` is the head
    you saw: 409 (nothing restored, the current text returned) when the note changed since,
    as for an edit; 400 when it is not a version of this note."""
    note = _get(request, note_id)
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
