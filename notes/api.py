"""Notes over the API: the same selectors and services as the pages."""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest
from ninja import Router, Schema, Status
from ninja.errors import HttpError

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
    tags: list[str]
    version: VersionSummary
    created_at: datetime
    updated_at: datetime


class NoteIn(Schema):
    title: str
    body: str = ""
    tags: list[str] = []


class NoteUpdateIn(NoteIn):
    base_version_id: int


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
    try:
        return selectors.note_get(request.auth, note_id)
    except Document.DoesNotExist:
        raise HttpError(404, "No such note.") from None


@router.get("/", response=list[NoteOut])
def list_notes(request: HttpRequest, tag: str | None = None, limit: int = 100, offset: int = 0):
    limit = max(1, min(limit, 500))
    notes = selectors.notes_for_user(request.auth, tag=tag)[offset : offset + limit]
    return [_note_out(note) for note in notes]


@router.post("/", response={201: NoteOut})
def create_note(request: HttpRequest, payload: NoteIn):
    note = services.note_create(
        owner=request.auth, title=payload.title, body=payload.body, tags=payload.tags
    )
    return Status(201, _note_out(note))


@router.get("/{note_id}", response=NoteOut)
def get_note(request: HttpRequest, note_id: int):
    return _note_out(_get(request, note_id))


@router.put("/{note_id}", response={200: NoteOut, 409: ConflictOut})
def update_note(request: HttpRequest, note_id: int, payload: NoteUpdateIn):
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
        return Status(
            409,
            ConflictOut(
                detail=str(exc),
                base_version=_summary(exc.base),
                head_version=_summary(exc.head),
                head_title=exc.head.title,
                head_body=exc.head.body,
            ),
        )
    return Status(200, _note_out(_get(request, note_id)))


@router.delete("/{note_id}", response={204: None})
def delete_note(request: HttpRequest, note_id: int):
    services.note_delete(document=_get(request, note_id), user=request.auth)
    return Status(204, None)


@router.get("/{note_id}/versions", response=list[VersionSummary])
def list_versions(request: HttpRequest, note_id: int):
    return [_summary(v) for v in selectors.note_versions(_get(request, note_id))]


@router.get("/{note_id}/versions/{version_id}", response=VersionOut)
def get_version(request: HttpRequest, note_id: int, version_id: int):
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


@router.post("/{note_id}/versions/{version_id}/restore", response=NoteOut)
def restore_version(request: HttpRequest, note_id: int, version_id: int):
    note = _get(request, note_id)
    try:
        services.note_restore(document=note, user=request.auth, version_id=version_id)
    except Version.DoesNotExist:
        raise HttpError(404, "No such version of this note.") from None
    return _note_out(_get(request, note_id))
