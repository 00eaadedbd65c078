"""Reads of notes, scoped to what the user may see: the notes of the spaces they belong to,
decided through `retrieval.eligibility` only.

A list covers every space of the user, or one (`space_id`, which must be one of theirs:
`eligibility.NoAccess` otherwise). A single note someone may not see is
`Document.DoesNotExist`, the same as a missing one, so ids leak nothing. What a member may
*do* with a note is their role in its space (`may_write`).
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from notes import services
from notes.models import Document, Tag, Version
from retrieval import eligibility
from spaces.models import Role, Space


def notes_for_user(
    user: AbstractBaseUser, *, tag: str | None = None, space_id: int | None = None
) -> QuerySet[Document]:
    """The live notes of the user's spaces (or of `space_id`), newest edit first. A tag
    filter matches tag names whoever owns the tag row (tags are per owner)."""
    audience = eligibility.audience_for(user.pk, space_id=space_id)
    qs = (
        eligibility.audience_documents(audience)
        .filter(kind=Document.Kind.NOTE, deleted_at__isnull=True)
        .select_related("head", "space")
    )
    if tag:
        qs = qs.filter(tags__name=tag.casefold()).distinct()
    return qs


def note_get(user: AbstractBaseUser, note_id: int) -> Document:
    """One live note of one of the user's spaces; raises `Document.DoesNotExist` otherwise
    (even if it exists in a space they are not in, so ids leak nothing)."""
    return (
        eligibility.visible_documents(user.pk)
        .filter(kind=Document.Kind.NOTE, deleted_at__isnull=True)
        .select_related("head", "space")
        .get(pk=note_id)
    )


def note_versions(document: Document) -> QuerySet[Version]:
    return document.versions.order_by("-number")


def note_tags(document: Document) -> list[tuple[str, bool]]:
    """(name, from_body) pairs, manual tags first, each name once."""
    rows = document.documenttag_set.select_related("tag").order_by("from_body", "tag__name")
    seen: set[str] = set()
    result = []
    for row in rows:
        if row.tag.name not in seen:
            seen.add(row.tag.name)
            result.append((row.tag.name, row.from_body))
    return result


def tags_for_user(user: AbstractBaseUser, *, space_id: int | None = None) -> QuerySet:
    """The distinct tag names (`{"name": …}` rows) on the live documents of the user's
    spaces (or of `space_id`): a shared space's notes carry their writers' tags."""
    audience = eligibility.audience_for(user.pk, space_id=space_id)
    live = eligibility.audience_documents(audience).filter(deleted_at__isnull=True)
    return (
        Tag.objects.filter(documents__in=live.values("pk"))
        .values("name")
        .distinct()
        .order_by("name")
    )


def trashed_notes_for_user(
    user: AbstractBaseUser, *, space_id: int | None = None
) -> QuerySet[Document]:
    """The deleted notes of the user's spaces (the trash), most recently deleted first."""
    audience = eligibility.audience_for(user.pk, space_id=space_id)
    return (
        eligibility.audience_documents(audience)
        .filter(kind=Document.Kind.NOTE, deleted_at__isnull=False)
        .select_related("head", "space")
        .order_by("-deleted_at", "-id")
    )


def trashed_note_get(user: AbstractBaseUser, note_id: int) -> Document:
    """One note in the trash of one of the user's spaces; raises `Document.DoesNotExist`
    otherwise (a note of a space they are not in, or a live one), so ids leak nothing."""
    return trashed_notes_for_user(user).get(pk=note_id)


def may_write(user: AbstractBaseUser, document: Document) -> bool:
    """Whether the user may change `document` (edit, delete, restore): editor or admin of
    its space; an annotation's note only its author or an admin (`notes.services.
    may_change`, the rule the services enforce)."""
    return services.may_change(user, document)


def writable_spaces(user: AbstractBaseUser) -> list[Space]:
    """The spaces the user may write notes or add sources in (editor or admin), personal
    first: the choices of a create form's space select."""
    return [
        space
        for space in eligibility.member_spaces(user.pk)
        if space.role in (Role.EDITOR, Role.ADMIN)
    ]


def writable_ids(user: AbstractBaseUser, documents: list[Document]) -> frozenset[int]:
    """The ids of those of `documents` the user may write (`may_write`, decided with one
    query for the whole list), for pages that show a write button per row."""
    roles = {space.pk: space.role for space in eligibility.member_spaces(user.pk)}
    return frozenset(
        document.pk
        for document in documents
        if services.may_change_as(user, document, roles.get(document.space_id))
    )


def shows_space_badges(user: AbstractBaseUser) -> bool:
    """Whether lists name each item's space: only when the user has more than one (with a
    single space a badge would say nothing)."""
    return len(eligibility.member_space_ids(user.pk)) > 1
