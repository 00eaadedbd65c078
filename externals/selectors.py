"""Reads behind the source and external pages, always scoped to the spaces the user is
a member of (through `retrieval.eligibility`): a source,
external or snapshot of a space they are not in is `DoesNotExist`, so ids leak nothing.
What a member may do is their role in the source's or external's space (`may`).

Externals are `notes.Document` rows of kind "external"; the source feeding one is found
through its `SourceItem` (an ask-time snapshot may have none).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q, QuerySet

from externals import services
from externals.models import (
    DEFAULT_STALE_AFTER_DAYS,
    ScanRecord,
    Source,
    SourceItem,
    confirmed_before,
    stale_cutoff,
)
from notes.models import Document, Version
from retrieval import eligibility
from spaces.models import Role

SCAN_HISTORY = 10


def sources_for_user(user: AbstractBaseUser, *, space_id: int | None = None) -> QuerySet[Source]:
    """The sources of the user's spaces (or of `space_id`, which must be one of them:
    `eligibility.NoAccess` otherwise), each annotated with `external_count` (live
    externals it feeds)."""
    audience = eligibility.audience_for(user.pk, space_id=space_id)
    return (
        Source.objects.filter(space_id__in=audience.sorted_space_ids)
        .select_related("space")
        .annotate(
            external_count=Count(
                "items__document",
                filter=Q(items__document__deleted_at__isnull=True),
                distinct=True,
            )
        )
    )


def source_get(user: AbstractBaseUser, source_id: int) -> Source:
    """One source of the user's spaces; `Source.DoesNotExist` otherwise (also for a space
    they are not in)."""
    return sources_for_user(user).get(pk=source_id)


def may(user: AbstractBaseUser, space_id: int, needed: Role) -> bool:
    """Whether the user's role in the space carries `needed` (sources: editor adds and
    scans, admin edits, enables, deletes and rotates secrets)."""
    return eligibility.can(user.pk, space_id, needed)


def latest_scans(sources: list[Source]) -> dict[int, ScanRecord]:
    """The most recent scan of each source, in one query per page rather than per row."""
    result: dict[int, ScanRecord] = {}
    ids = [source.pk for source in sources]
    for scan in ScanRecord.objects.filter(source_id__in=ids).order_by("-started_at", "-id"):
        result.setdefault(scan.source_id, scan)
    return result


def latest_scan(source: Source) -> ScanRecord | None:
    return source.scans.order_by("-started_at", "-id").first()


def scan_history(source: Source, limit: int = SCAN_HISTORY) -> list[ScanRecord]:
    return list(source.scans.order_by("-started_at", "-id")[:limit])


def source_items(source: Source) -> QuerySet[SourceItem]:
    """The live externals of a source with their head snapshots, by path."""
    return (
        source.items.filter(document__deleted_at__isnull=True)
        .select_related("document", "document__head")
        .order_by("path")
    )


def externals_for_user(user: AbstractBaseUser) -> QuerySet[Document]:
    """The externals of the user's spaces, including pruned ones (their history stays
    viewable)."""
    return (
        eligibility.visible_documents(user.pk)
        .filter(kind=Document.Kind.EXTERNAL)
        .select_related("head", "space")
    )


def external_get(user: AbstractBaseUser, document_id: int) -> Document:
    """One external of the user's spaces with a head snapshot; `Document.DoesNotExist`
    otherwise."""
    return externals_for_user(user).filter(head__isnull=False).get(pk=document_id)


def external_source(document: Document) -> tuple[Source | None, SourceItem | None]:
    """The source (and its item row) that mirrors `document`, if any: only a source of the
    document's own space (a document moved elsewhere no longer shows the source it left,
    whose space its new readers may not be in)."""
    item = (
        SourceItem.objects.filter(document=document, source__space_id=document.space_id)
        .select_related("source")
        .first()
    )
    return (item.source if item else None), item


def snapshots(document: Document) -> QuerySet[Version]:
    """Every snapshot of an external, newest first (history for audit and annotations)."""
    return document.versions.order_by("-number")


@dataclass(frozen=True)
class SnapshotAge:
    """How old a snapshot is and whether that makes it stale for its source."""

    age: timedelta
    stale: bool
    stale_after_days: int


def snapshot_age(
    version: Version, source: Source | None, item: SourceItem | None = None
) -> SnapshotAge:
    """Age and staleness by the one rule the ranker also uses (`externals.models.
    confirmed_before`); a snapshot with no source is judged by its fetch time against the
    default age limit."""
    if source is None:
        days = DEFAULT_STALE_AFTER_DAYS
        stale = confirmed_before(version.created_at, None, stale_cutoff(days))
    else:
        days = source.stale_after_days
        stale = services.is_stale(version, source, item)
    return SnapshotAge(age=services.snapshot_age(version), stale=stale, stale_after_days=days)
