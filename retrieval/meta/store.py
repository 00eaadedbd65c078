"""Keeping the meta rows (`DocumentMeta`, `DocumentTerm`, `DocumentAlias`) in step with head
versions, and reading dates and kinds.

`refresh_meta(versions)` runs where a version's passages are written
(`retrieval.index.passages`), in the same transaction, so the rows always describe the
head search finds. `derive_meta` is the one derivation: the writer, health's comparison and
repair all call it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from django.db.models import Min

from notes.models import Document, Version
from retrieval.meta.extract import (
    AliasPair,
    Dated,
    Kind,
    alias_key,
    aliases_in,
    date_of,
    front_matter,
    kind_of,
    top_terms,
)
from retrieval.models import DocumentAlias, DocumentMeta, DocumentTerm

# The extraction rules' version: raise it when `extract.py` changes what it derives, so
# `lode_index health` reports every row made under the old rules as stale and `repair`
# re-derives them.
RULES = 2
# Bounds per document: a note listing hundreds of acronyms keeps its first ones.
MAX_ALIASES_PER_DOCUMENT = 50
BATCH = 500


@dataclass(frozen=True)
class DerivedMeta:
    """Everything the meta rows say about one document's head version."""

    document_id: int
    version_id: int
    dated: Dated
    kind: str
    kind_source: str
    terms: tuple[tuple[str, int], ...]
    aliases: tuple[AliasPair, ...]

    def meta_row(self) -> DocumentMeta:
        return DocumentMeta(
            document_id=self.document_id,
            version_id=self.version_id,
            date=self.dated.value,
            date_source=self.dated.source,
            date_precision=self.dated.precision,
            kind=self.kind,
            kind_source=self.kind_source,
            rules=RULES,
        )

    def term_rows(self) -> list[DocumentTerm]:
        return [
            DocumentTerm(document_id=self.document_id, term=term, weight=weight)
            for term, weight in self.terms
        ]

    def alias_rows(self) -> list[DocumentAlias]:
        return [
            DocumentAlias(
                document_id=self.document_id,
                short=pair.short[:100],
                long=pair.long[:200],
                short_key=alias_key(pair.short),
                long_key=alias_key(pair.long),
                pattern=pair.pattern,
            )
            for pair in self.aliases
        ]


def derive_meta(
    document: Document, version: Version, first_version_at: datetime | None
) -> DerivedMeta:
    """The meta of `document` as `version` (its head) states it."""
    meta = front_matter(version.body)
    path = version.source_path or document.external_key
    kind, kind_source = kind_of(
        title=version.title,
        body=version.body,
        path=path,
        external=document.kind == Document.Kind.EXTERNAL,
        meta=meta,
    )
    return DerivedMeta(
        document_id=document.pk,
        version_id=version.pk,
        dated=date_of(
            title=version.title,
            body=version.body,
            first_version_at=first_version_at,
            path=path,
            meta=meta,
        ),
        kind=kind,
        kind_source=kind_source,
        terms=tuple(top_terms(title=version.title, body=version.body)),
        aliases=tuple(aliases_in(version.body)[:MAX_ALIASES_PER_DOCUMENT]),
    )


def first_version_times(document_ids: Iterable[int]) -> dict[int, datetime]:
    """When each document's first version was written."""
    ids = list(document_ids)
    found: dict[int, datetime] = {}
    for start in range(0, len(ids), BATCH):
        rows = (
            Version.objects.filter(document_id__in=ids[start : start + BATCH])
            .values("document_id")
            .annotate(first=Min("created_at"))
            .values_list("document_id", "first")
        )
        found.update(dict(rows))
    return found


def derive_for_versions(versions: Sequence[Version]) -> list[DerivedMeta]:
    """`derive_meta` for each version as its document's head (three queries in all)."""
    document_ids = [version.document_id for version in versions]
    documents = Document.objects.only("pk", "kind", "external_key").in_bulk(document_ids)
    first = first_version_times(document_ids)
    return [
        derive_meta(documents[version.document_id], version, first.get(version.document_id))
        for version in versions
        if version.document_id in documents
    ]


def write_meta(derived: Sequence[DerivedMeta]) -> None:
    """Replace the meta rows of these documents with `derived` (the caller's transaction)."""
    ids = [item.document_id for item in derived]
    for start in range(0, len(ids), BATCH):
        part = ids[start : start + BATCH]
        DocumentMeta.objects.filter(document_id__in=part).delete()
        DocumentTerm.objects.filter(document_id__in=part).delete()
        DocumentAlias.objects.filter(document_id__in=part).delete()
    DocumentMeta.objects.bulk_create([item.meta_row() for item in derived], batch_size=BATCH)
    DocumentTerm.objects.bulk_create(
        [row for item in derived for row in item.term_rows()], batch_size=BATCH
    )
    DocumentAlias.objects.bulk_create(
        [row for item in derived for row in item.alias_rows()], batch_size=BATCH
    )


def refresh_meta(versions: Sequence[Version]) -> None:
    """Derive and store the meta rows of each version's document, the version being its
    new head (called where head passages are written)."""
    write_meta(derive_for_versions(versions))


# --- reading -------------------------------------------------------------------------------


def _derived_on_the_fly(document_ids: list[int]) -> dict[int, DerivedMeta]:
    """Meta for documents without a row yet (written before meta existed, until `lode_index
    repair`): derived from their head now, not stored."""
    heads = list(
        Version.objects.filter(head_of__pk__in=document_ids).only(
            "pk", "document_id", "title", "body", "source_path"
        )
    )
    return {item.document_id: item for item in derive_for_versions(heads)}


def _meta_rows(document_ids: Iterable[int]) -> dict[int, tuple[date | None, str]]:
    ids = sorted({int(pk) for pk in document_ids})
    rows: dict[int, tuple[date | None, str]] = {}
    for start in range(0, len(ids), BATCH):
        rows.update(
            {
                pk: (value, kind)
                for pk, value, kind in DocumentMeta.objects.filter(
                    document_id__in=ids[start : start + BATCH]
                ).values_list("document_id", "date", "kind")
            }
        )
    missing = [pk for pk in ids if pk not in rows]
    for start in range(0, len(missing), BATCH):
        derived = _derived_on_the_fly(missing[start : start + BATCH])
        rows.update({pk: (item.dated.value, item.kind) for pk, item in derived.items()})
    return rows


def document_dates(document_ids: Iterable[int]) -> dict[int, date]:
    """The date each document is about (front matter, title, first heading, else its first
    version's day); documents that do not exist or have no date are left out. No access
    check: the caller passes ids its reader may see."""
    return {pk: value for pk, (value, _) in _meta_rows(document_ids).items() if value is not None}


def document_kinds(document_ids: Iterable[int]) -> dict[int, str]:
    """Each document's kind (`retrieval.meta.extract.Kind`: meeting, runbook, decision,
    design, personal, external, other); documents that do not exist are left out."""
    return {pk: kind or Kind.OTHER for pk, (_, kind) in _meta_rows(document_ids).items()}
