"""Writes to spaces: creating and changing them, their members and roles, and moving
documents and sources between them.

Plain functions with keyword-only arguments (HackSoft's `services.py` shape), each checking
the actor's role through `retrieval.eligibility` — the one place access is decided — and
refusing with `PermissionDenied` (the actor lacks the role), `ValidationError` (the request
itself is malformed), `Conflict` (the stored state does not allow it: the last admin, a
personal space) or `NotFound` (an unknown user or member) in words a user can read. Pages
and the API call the same functions, so a rule holds everywhere at once.

**The last admin.** A shared space always keeps at least one admin: nobody can leave, be
removed or be demoted when that would leave none. Two admins demoting each other at the same
moment must not both succeed, so every membership change first locks the space's row
(`select_for_update`) and only then counts its admins: the second change waits for the first
to commit and then sees its result.
"""

from __future__ import annotations

from collections.abc import Collection

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from externals.models import Annotation, Source, SourceItem
from lode_site.refusals import Conflict, NotFound
from notes.models import Document
from retrieval.eligibility import member_spaces, role_in
from retrieval.index.edges import refresh_edges
from retrieval.index.sync import enqueue_document_sync_on_commit
from spaces.models import (
    DocumentMove,
    Membership,
    PublicLink,
    Role,
    Space,
    live_link_q,
    role_at_least,
)

NAME_MAX_CHARS = 100
DESCRIPTION_MAX_CHARS = 500

NOT_ADMIN = "Only an admin of this space can do that."
NOT_MEMBER = "You are not a member of that space."
REVIVE_NOT_TURNING_ON = (
    "Earlier public links can only be brought back while turning public links on."
)
NOT_EARLIER_LINK = "Not an earlier public link of this space: {ids}."
LAST_ADMIN = (
    "This space needs at least one admin: make another member an admin first, then try again."
)


# --- checks --------------------------------------------------------------------------------


def _require_role(user: AbstractBaseUser, space: Space, needed: Role, refusal: str) -> str:
    """`user`'s role in `space` when it carries `needed`; `PermissionDenied(refusal)` (or
    "not a member") otherwise."""
    role = role_in(user.pk, space.pk)
    if role is None:
        raise PermissionDenied(NOT_MEMBER)
    if not role_at_least(role, needed):
        raise PermissionDenied(refusal)
    return role


def _clean_name(name: str) -> str:
    cleaned = (name or "").strip()
    if not cleaned:
        raise ValidationError("A space needs a name.")
    if len(cleaned) > NAME_MAX_CHARS:
        raise ValidationError(f"A space's name is at most {NAME_MAX_CHARS} characters.")
    return cleaned


def _clean_description(description: str) -> str:
    cleaned = (description or "").strip()
    if len(cleaned) > DESCRIPTION_MAX_CHARS:
        raise ValidationError(
            f"A space's description is at most {DESCRIPTION_MAX_CHARS} characters."
        )
    return cleaned


def _clean_role(role: str) -> Role:
    try:
        return Role(role)
    except ValueError:
        raise ValidationError(f"Unknown role {role!r}: choose viewer, editor or admin.") from None


def _locked(space: Space) -> Space:
    """`space` re-read with its row locked until the transaction ends: every membership
    change of one space runs one at a time (the last-admin rule counts after the lock)."""
    return Space.objects.select_for_update().get(pk=space.pk)


def _admin_count(space: Space) -> int:
    return Membership.objects.filter(space_id=space.pk, role=Role.ADMIN).count()


def _membership(space: Space, user_id: int) -> Membership:
    try:
        return Membership.objects.select_for_update().get(space_id=space.pk, user_id=user_id)
    except Membership.DoesNotExist:
        raise NotFound("That person is not a member of this space.") from None


# --- spaces --------------------------------------------------------------------------------


def space_create(*, by: AbstractBaseUser, name: str, description: str = "") -> Space:
    """A new shared space, with `by` as its first (and only) member and admin."""
    name = _clean_name(name)
    description = _clean_description(description)
    with transaction.atomic():
        space = Space(name=name, description=description, created_by_id=by.pk)
        space.full_clean()
        space.save()
        Membership.objects.create(space=space, user_id=by.pk, role=Role.ADMIN, added_by_id=by.pk)
    return space


def space_update(
    *,
    by: AbstractBaseUser,
    space: Space,
    name: str | None = None,
    description: str | None = None,
    no_egress: bool | None = None,
    public_links_enabled: bool | None = None,
    revive_links: Collection[int] = (),
) -> Space:
    """Change a space's name, description, no-egress or public-link setting (admins only).
    None leaves a field as it is. A personal space's settings may change too, but its name
    can never become empty.

    Turning public links back on brings back only the earlier links named in `revive_links`
    (ids of links that were live when they were turned off); every other one is revoked, by
    `by`, so its token opens nothing ever again — the default revives none. `revive_links`
    is refused unless public links are being turned on."""
    with transaction.atomic():
        space = _locked(space)
        _require_role(by, space, Role.ADMIN, NOT_ADMIN)
        if name is not None:
            space.name = _clean_name(name)
        if description is not None:
            space.description = _clean_description(description)
        if no_egress is not None:
            space.no_egress = bool(no_egress)
        turning_on = bool(public_links_enabled) and not space.public_links_enabled
        if revive_links and not turning_on:
            raise Conflict(REVIVE_NOT_TURNING_ON)
        if turning_on:
            earlier_links_revoke(space=space, by=by, keep=revive_links)
        if public_links_enabled is not None:
            space.public_links_enabled = bool(public_links_enabled)
        space.full_clean()
        space.save()
    return space


def earlier_links_revoke(*, space: Space, by: AbstractBaseUser, keep: Collection[int] = ()) -> int:
    """Revoke the space's live public links except those in `keep` (which must all be among
    them); how many were revoked. Called while public links are off, so every live link is
    one made before they were turned off. The caller has checked that `by` may manage the
    space (`space_update`: its admin; the Django admin: staff)."""
    earlier = PublicLink.objects.filter(live_link_q(), space_id=space.pk)
    keep = set(keep)
    unknown = keep - set(earlier.filter(pk__in=keep).values_list("pk", flat=True))
    if unknown:
        raise NotFound(NOT_EARLIER_LINK.format(ids=", ".join(map(str, sorted(unknown)))))
    return earlier.exclude(pk__in=keep).update(revoked_at=timezone.now(), revoked_by_id=by.pk)


def space_delete(*, by: AbstractBaseUser, space: Space) -> None:
    """Delete an empty shared space (admins only). A space that still holds a document (live
    or in the trash) or a source is refused, so nothing is ever deleted along with it; a
    personal space is never deleted (it goes with its account)."""
    with transaction.atomic():
        space = _locked(space)
        _require_role(by, space, Role.ADMIN, NOT_ADMIN)
        if space.is_personal:
            raise Conflict("A personal space cannot be deleted.")
        if Document.objects.filter(space_id=space.pk).exists() or (
            Source.objects.filter(space_id=space.pk).exists()
        ):
            raise Conflict(
                "This space still holds documents or sources (the trash counts): move or "
                "delete them first."
            )
        space.delete()


# --- members -------------------------------------------------------------------------------


def member_add(
    *, by: AbstractBaseUser, space: Space, username: str, role: str = Role.VIEWER
) -> Membership:
    """Add the user named `username` to a shared space with `role` (admins only)."""
    role = _clean_role(role)
    username = (username or "").strip()
    with transaction.atomic():
        space = _locked(space)
        _require_role(by, space, Role.ADMIN, NOT_ADMIN)
        if space.is_personal:
            raise Conflict(
                "A personal space has no other members: create a shared space to work with others."
            )
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise NotFound(f"There is no user named {username!r}.")
        if Membership.objects.filter(space_id=space.pk, user_id=user.pk).exists():
            raise Conflict(f"{username} is already a member of this space.")
        return Membership.objects.create(space=space, user=user, role=role, added_by_id=by.pk)


def member_set_role(*, by: AbstractBaseUser, space: Space, user_id: int, role: str) -> Membership:
    """Give a member another role (admins only); never demotes the last admin."""
    role = _clean_role(role)
    with transaction.atomic():
        space = _locked(space)
        _require_role(by, space, Role.ADMIN, NOT_ADMIN)
        membership = _membership(space, user_id)
        if membership.role == role:
            return membership
        if membership.role == Role.ADMIN and _admin_count(space) <= 1:
            raise Conflict(LAST_ADMIN)
        membership.role = role
        membership.save(update_fields=["role"])
        return membership


def member_remove(*, by: AbstractBaseUser, space: Space, user_id: int) -> None:
    """Remove a member (admins only); never the last admin."""
    with transaction.atomic():
        space = _locked(space)
        _require_role(by, space, Role.ADMIN, NOT_ADMIN)
        _remove(space, _membership(space, user_id))


def space_leave(*, user: AbstractBaseUser, space: Space) -> None:
    """`user` leaves a shared space; the last admin cannot, and nobody leaves their
    personal space."""
    with transaction.atomic():
        space = _locked(space)
        if space.is_personal:
            raise Conflict("You cannot leave your personal space.")
        try:
            membership = Membership.objects.select_for_update().get(
                space_id=space.pk, user_id=user.pk
            )
        except Membership.DoesNotExist:
            raise PermissionDenied(NOT_MEMBER) from None
        _remove(space, membership)


def _remove(space: Space, membership: Membership) -> None:
    if space.is_personal:
        raise Conflict("Nobody can be removed from a personal space.")
    if membership.role == Role.ADMIN and _admin_count(space) <= 1:
        raise Conflict(LAST_ADMIN)
    membership.delete()


def last_admin(space: Space, user_id: int) -> bool:
    """Whether the user is the only admin of `space` (so may neither leave, be removed nor
    be demoted): pages disable those controls and say why."""
    admins = list(
        Membership.objects.filter(space_id=space.pk, role=Role.ADMIN).values_list(
            "user_id", flat=True
        )[:2]
    )
    return admins == [user_id]


# --- moving documents and sources -------------------------------------------------------------


def _record_move(document: Document, *, by: AbstractBaseUser, from_space: Space, to: Space) -> None:
    """Move one document row, record it and re-stamp its vectors' space after commit."""
    Document.objects.filter(pk=document.pk).update(space=to)
    DocumentMove.objects.create(
        document_id=document.pk,
        from_space=from_space,
        to_space=to,
        from_space_name=from_space.name,
        to_space_name=to.name,
        moved_by_id=by.pk,
    )
    # Same text, new space: a `[[Title]]` shared by notes of two spaces may now resolve
    # differently (the linking note's own space wins), here and in the notes that link to it.
    refresh_edges([document.pk], changed=False)
    enqueue_document_sync_on_commit(document.pk)


def document_move(*, by: AbstractBaseUser, document: Document, to_space: Space) -> DocumentMove:
    """Move a note to another space. `by` must be an editor (or admin) both where the note is
    and in `to_space`. An external moves only with its source (`source_move`), and an
    annotation's note only with its external; both are refused here."""
    with transaction.atomic():
        document = Document.objects.select_for_update().select_related("space").get(pk=document.pk)
        from_space = document.space
        _require_role(
            by, from_space, Role.EDITOR, "Only an editor of a document's space can move it."
        )
        _require_role(
            by, to_space, Role.EDITOR, "You need to be an editor of the space you move it to."
        )
        if document.kind == Document.Kind.EXTERNAL:
            raise Conflict("An external document moves with its source: move the source instead.")
        if Annotation.objects.filter(note_document_id=document.pk).exists():
            raise Conflict(
                "An annotation moves with the external it annotates: move that source instead."
            )
        if from_space.pk == to_space.pk:
            raise Conflict(f"It is already in {to_space.name}.")
        _record_move(document, by=by, from_space=from_space, to=to_space)
        document.space = to_space
        return DocumentMove.objects.filter(document_id=document.pk).first()


def source_move(*, by: AbstractBaseUser, source: Source, to_space: Space) -> int:
    """Move a source to another space together with every document it feeds and the notes
    of their annotations (one `DocumentMove` each), in one transaction. `by` must be an
    editor (or admin) of the source's space and of `to_space`, as for moving a note.
    Returns how many documents moved."""
    with transaction.atomic():
        source = Source.objects.select_for_update().select_related("space").get(pk=source.pk)
        from_space = source.space
        _require_role(
            by, from_space, Role.EDITOR, "Only an editor of a source's space can move the source."
        )
        _require_role(
            by, to_space, Role.EDITOR, "You need to be an editor of the space you move it to."
        )
        if from_space.pk == to_space.pk:
            raise Conflict(f"It is already in {to_space.name}.")
        fed = set(SourceItem.objects.filter(source=source).values_list("document_id", flat=True))
        notes = set(
            Annotation.objects.filter(document_id__in=fed).values_list(
                "note_document_id", flat=True
            )
        )
        moving = Document.objects.select_for_update().filter(pk__in=fed | notes).order_by("pk")
        count = 0
        for document in moving:
            # Documents of this source that sit elsewhere (they should not) are still brought
            # along, recorded from where they actually were.
            origin = document.space if document.space_id != from_space.pk else from_space
            if document.space_id == to_space.pk:
                continue
            _record_move(document, by=by, from_space=origin, to=to_space)
            count += 1
        Source.objects.filter(pk=source.pk).update(space=to_space)
        source.space = to_space
        return count


# --- reads the pages and the API share -------------------------------------------------------


def member_spaces_with_counts(user_id: int) -> QuerySet[Space]:
    """`retrieval.eligibility.member_spaces` (each with the user's `role`) annotated with
    `member_count` and `document_count` (live documents). Subqueries, not joins: the
    membership join that picks the user's spaces would otherwise count only them."""
    members = (
        Membership.objects.filter(space_id=OuterRef("pk"))
        .order_by()
        .values("space_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    documents = (
        Document.objects.filter(space_id=OuterRef("pk"), deleted_at__isnull=True)
        .order_by()
        .values("space_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return member_spaces(user_id).annotate(
        member_count=Coalesce(Subquery(members), 0),
        document_count=Coalesce(Subquery(documents), 0),
    )
