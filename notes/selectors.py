"""Reads of notes, always scoped to what the user may see (their own live notes)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from notes.models import Document, Tag, Version


def notes_for_user(user: AbstractBaseUser, *, tag: str | None = None) -> QuerySet[Document]:
    """The user's live notes, newest edit first."""
    qs = Document.objects.filter(
        owner_id=user.pk, kind=Document.Kind.NOTE, deleted_at__isnull=True
    ).select_related("head")
    if tag:
        qs = qs.filter(tags__name=tag.casefold()).distinct()
    return qs


def note_get(user: AbstractBaseUser, note_id: int) -> Document:
    """One live note of the user's; raises `Document.DoesNotExist` otherwise (even if it
    exists but belongs to someone else, so ids leak nothing)."""
    return notes_for_user(user).get(pk=note_id)


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


def tags_for_user(user: AbstractBaseUser) -> QuerySet[Tag]:
    return Tag.objects.filter(owner_id=user.pk, documents__deleted_at__isnull=True).distinct()


def trashed_notes_for_user(user: AbstractBaseUser) -> QuerySet[Document]:
    """The user's deleted notes (the trash), most recently deleted first."""
    return (
        Document.objects.filter(owner_id=user.pk, kind=Document.Kind.NOTE, deleted_at__isnull=False)
        .select_related("head")
        .order_by("-deleted_at", "-id")
    )


def trashed_note_get(user: AbstractBaseUser, note_id: int) -> Document:
    """One note in the user's trash; raises `Document.DoesNotExist` otherwise (someone
    else's note, or a live one), so ids leak nothing."""
    return trashed_notes_for_user(user).get(pk=note_id)
