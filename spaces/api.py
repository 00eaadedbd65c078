"""Spaces over the API (`/api/spaces`): the same `spaces.services` as the pages, so the
same rules and the same refusals — 409 for a change the stored state does not allow (the last
admin, a personal space, someone already a member), 404 for an unknown username or member,
403 for a member without the role, 404 (`lode_site.errors.NO_ACCESS`) for a space, document
or source the caller is not a member of, which looks exactly like one that does not exist.
A malformed request (a blank name, NUL characters, an unknown role) is a 422 from the schema.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from django.db.models import QuerySet
from django.http import HttpRequest
from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError

from externals.models import Source
from lode_site.api_bodies import NOT_BLANK_TEXT, STORABLE_TEXT, BodySchema
from lode_site.errors import NO_ACCESS
from lode_site.ids import DbId
from retrieval.eligibility import member_space_ids, role_in, visible_documents
from spaces import public, services
from spaces.models import Membership, Role, Space

router = Router(tags=["spaces"])

RoleName = Literal["viewer", "editor", "admin"]


class ErrorOut(Schema):
    detail: str


class SpaceOut(Schema):
    id: int
    name: str
    description: str
    personal: bool = Field(description="True for your personal space (you are its only member).")
    role: RoleName = Field(description="Your role in this space.")
    member_count: int
    document_count: int = Field(description="Live documents (not in the trash).")
    no_egress: bool = Field(description="Its documents are never sent off this machine.")
    public_links_enabled: bool = Field(
        description="Members may create public read-only links to its content."
    )


class MemberOut(Schema):
    user_id: int
    username: str
    role: RoleName
    added_at: datetime


class SpaceDetailOut(SpaceOut):
    members: list[MemberOut]


class SpaceIn(BodySchema):
    name: str = Field(
        max_length=services.NAME_MAX_CHARS,
        pattern=NOT_BLANK_TEXT,
        description="1 to 100 characters, not only spaces (surrounding spaces are stripped).",
    )
    description: str = Field("", max_length=services.DESCRIPTION_MAX_CHARS, pattern=STORABLE_TEXT)


class SpaceUpdateIn(BodySchema):
    name: str | None = Field(
        None,
        max_length=services.NAME_MAX_CHARS,
        pattern=NOT_BLANK_TEXT,
        description="1 to 100 characters, not only spaces (surrounding spaces are stripped).",
    )
    description: str | None = Field(
        None, max_length=services.DESCRIPTION_MAX_CHARS, pattern=STORABLE_TEXT
    )
    no_egress: bool | None = None
    public_links_enabled: bool | None = None
    revive_public_links: list[DbId] = Field(
        default_factory=list,
        description="Only with `public_links_enabled: true` on a space whose public links are "
        "off: the ids of earlier links (`GET /api/spaces/{id}/public-links`) that work again. "
        "Every other earlier link is revoked for good; left out, none comes back. Given "
        "otherwise it is a 409; an id that is not an earlier link of this space is a 404.",
    )


class PublicLinkOut(Schema):
    id: int
    kind: Literal["version", "answer"]
    shows: str = Field(description="What the link shows, in words.")
    url: str = Field(description="The public page's path.")
    created_by: str | None = Field(description="The username of who made it.")
    created_at: datetime
    expires_at: datetime | None
    opens: bool = Field(
        description="False while the space's public links are off (an earlier link, waiting "
        "for an admin to bring it back or let it be revoked when they are turned on)."
    )


class MemberIn(BodySchema):
    username: str = Field(
        pattern=STORABLE_TEXT,
        description="Who to add (an active user; 404 otherwise, 409 if already a member).",
    )
    role: RoleName = "viewer"


class RoleIn(BodySchema):
    role: RoleName


class MoveIn(BodySchema):
    to_space: DbId = Field(description="The id of a space you are an editor (or admin) of.")


class MoveOut(Schema):
    moved_documents: int = Field(description="How many documents changed space.")
    to_space: int


def _annotated(user_id: int) -> QuerySet[Space]:
    return services.member_spaces_with_counts(user_id)


def _space_out(space: Space) -> SpaceOut:
    return SpaceOut(
        id=space.pk,
        name=space.name,
        description=space.description,
        personal=space.is_personal,
        role=space.role,
        member_count=space.member_count,
        document_count=space.document_count,
        no_egress=space.no_egress,
        public_links_enabled=space.public_links_enabled,
    )


def _member_space(request: HttpRequest, space_id: int) -> Space:
    """The space, if the caller is a member of it; else the no-access 404."""
    if role_in(request.auth.pk, space_id) is None:
        raise HttpError(404, NO_ACCESS)
    return Space.objects.get(pk=space_id)


def _detail(request: HttpRequest, space_id: int) -> SpaceDetailOut:
    space = _annotated(request.auth.pk).get(pk=space_id)
    members = [
        MemberOut(
            user_id=m.user_id, username=m.user.get_username(), role=m.role, added_at=m.added_at
        )
        for m in Membership.objects.filter(space_id=space_id).select_related("user")
    ]
    return SpaceDetailOut(**_space_out(space).dict(), members=members)


@router.get("/", response=list[SpaceOut])
def list_spaces(request: HttpRequest):
    """Your spaces, personal first, with your role in each."""
    return [_space_out(space) for space in _annotated(request.auth.pk)]


@router.post("/", response={201: SpaceDetailOut})
def create_space(request: HttpRequest, payload: SpaceIn):
    """A new shared space; you are its admin."""
    space = services.space_create(
        by=request.auth, name=payload.name, description=payload.description
    )
    return Status(201, _detail(request, space.pk))


@router.get("/{id:space_id}", response={200: SpaceDetailOut, 404: ErrorOut})
def get_space(request: HttpRequest, space_id: DbId):
    """One of your spaces with its members."""
    _member_space(request, space_id)
    return _detail(request, space_id)


@router.patch(
    "/{id:space_id}",
    response={200: SpaceDetailOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut},
)
def update_space(request: HttpRequest, space_id: DbId, payload: SpaceUpdateIn):
    """Change the name, description, no-egress or public-link setting (admins). Fields
    left out (or null) stay as they are. Turning public links back on revives only the
    earlier links listed in `revive_public_links`; the others are revoked."""
    space = _member_space(request, space_id)
    services.space_update(
        by=request.auth,
        space=space,
        name=payload.name,
        description=payload.description,
        no_egress=payload.no_egress,
        public_links_enabled=payload.public_links_enabled,
        revive_links=payload.revive_public_links,
    )
    return _detail(request, space_id)


@router.get("/{id:space_id}/public-links", response={200: list[PublicLinkOut], 404: ErrorOut})
def list_public_links(request: HttpRequest, space_id: DbId):
    """The space's live public links, newest first: every one for its admins, your own for
    other members (as on the space's links page). While public links are off these are the
    earlier links an admin may bring back when turning them on."""
    space = _member_space(request, space_id)
    is_admin = role_in(request.auth.pk, space_id) == Role.ADMIN
    links = public.live_links(space, created_by=None if is_admin else request.auth)
    return [
        PublicLinkOut(
            id=link.pk,
            kind=link.kind,
            shows=link.target_words(),
            url=public.public_url(link),
            created_by=link.created_by.get_username() if link.created_by else None,
            created_at=link.created_at,
            expires_at=link.expires_at,
            opens=space.public_links_enabled,
        )
        for link in links
    ]


@router.delete("/{id:space_id}", response={204: None, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut})
def delete_space(request: HttpRequest, space_id: DbId):
    """Delete an empty shared space (admins). Refused (409) while it holds any document or
    source, and always for a personal space."""
    services.space_delete(by=request.auth, space=_member_space(request, space_id))
    return Status(204, None)


@router.post(
    "/{id:space_id}/members",
    response={201: SpaceDetailOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut},
)
def add_member(request: HttpRequest, space_id: DbId, payload: MemberIn):
    """Invite someone by username with a role (admins; not into a personal space)."""
    services.member_add(
        by=request.auth,
        space=_member_space(request, space_id),
        username=payload.username,
        role=payload.role,
    )
    return Status(201, _detail(request, space_id))


@router.put(
    "/{id:space_id}/members/{id:user_id}",
    response={200: SpaceDetailOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut},
)
def set_member_role(request: HttpRequest, space_id: DbId, user_id: DbId, payload: RoleIn):
    """Change a member's role (admins). The last admin cannot be demoted (409); a user
    who is not a member is a 404."""
    services.member_set_role(
        by=request.auth,
        space=_member_space(request, space_id),
        user_id=user_id,
        role=payload.role,
    )
    return _detail(request, space_id)


@router.delete(
    "/{id:space_id}/members/{id:user_id}",
    response={204: None, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut},
)
def remove_member(request: HttpRequest, space_id: DbId, user_id: DbId):
    """Remove a member (admins; yourself: leave). The last admin cannot be removed (409);
    a user who is not a member is a 404."""
    space = _member_space(request, space_id)
    if user_id == request.auth.pk:
        services.space_leave(user=request.auth, space=space)
    else:
        services.member_remove(by=request.auth, space=space, user_id=user_id)
    return Status(204, None)


@router.post(
    "/{id:space_id}/leave", response={204: None, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut}
)
def leave_space(request: HttpRequest, space_id: DbId):
    """Leave a shared space. The last admin cannot (409); nobody leaves a personal space
    (409)."""
    services.space_leave(user=request.auth, space=_member_space(request, space_id))
    return Status(204, None)


def _target_space(request: HttpRequest, space_id: int) -> Space:
    if space_id not in member_space_ids(request.auth.pk):
        raise HttpError(404, NO_ACCESS)
    return Space.objects.get(pk=space_id)


@router.post(
    "/move/document/{id:document_id}",
    response={200: MoveOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut},
)
def move_document(request: HttpRequest, document_id: DbId, payload: MoveIn):
    """Move a note to another space: you must be an editor where it is and in `to_space`.
    Externals move with their source (409 here, as is a move to where it already is); the
    move is recorded."""
    document = visible_documents(request.auth.pk).filter(pk=document_id).first()
    if document is None:
        raise HttpError(404, NO_ACCESS)
    to_space = _target_space(request, payload.to_space)
    services.document_move(by=request.auth, document=document, to_space=to_space)
    return MoveOut(moved_documents=1, to_space=to_space.pk)


@router.post(
    "/move/source/{id:source_id}",
    response={200: MoveOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut},
)
def move_source(request: HttpRequest, source_id: DbId, payload: MoveIn):
    """Move a source, every external it feeds and their annotations to another space: you
    must be an editor of its space and of `to_space`."""
    source = Source.objects.filter(
        pk=source_id, space_id__in=member_space_ids(request.auth.pk)
    ).first()
    if source is None:
        raise HttpError(404, NO_ACCESS)
    to_space = _target_space(request, payload.to_space)
    moved = services.source_move(by=request.auth, source=source, to_space=to_space)
    return MoveOut(moved_documents=moved, to_space=to_space.pk)
