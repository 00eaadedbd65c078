"""Reads behind the source and external pages (issue 6, item 4), always scoped to the
owner: another user's source, external or snapshot is `DoesNotExist`, so ids leak nothing.

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

SCAN_HISTORY = 10


def sources_for_user(user: AbstractBaseUser) -> QuerySet[Source]:
    """The user's sources, each annotated with `external_count` (live externals it feeds)."""
    return Source.objects.filter(owner_id=user.pk).annotate(
        external_count=Count(
            "items__document",
            filter=Q(items__document__deleted_at__isnull=True),
            distinct=True,
        )
    )


def source_get(user: AbstractBaseUser, source_id: int) -> Source:
    """One source of the user's; `Source.DoesNotExist` otherwise (also for other owners)."""
    return sources_for_user(user).get(pk=source_id)


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
    """The user's externals, including pruned ones (their history stays viewable)."""
    return Document.objects.filter(owner_id=user.pk, kind=Document.Kind.EXTERNAL).select_related(
        "head"
    )


def external_get(user: AbstractBaseUser, document_id: int) -> Document:
    """One external of the user's with a head snapshot; `Document.DoesNotExist` otherwise."""
    return externals_for_user(user).filter(head__isnull=False).get(pk=document_id)


def external_source(document: Document) -> tuple[Source | None, SourceItem | None]:
    """The source (and its item row) that mirrors `document`, if any."""
    item = (
        SourceItem.objects.filter(document=document, source__owner_id=document.owner_id)
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
