"""Are the meta rows what the head versions say? (`lode_index health`), and rewriting those
that are not (`lode_index repair`).

Every live document's meta is re-derived from its head version (`store.derive_meta`, the
writer's own function) and compared with its rows: *missing* (no row: a document written
before meta existed), *stale* (a row of another version or under older rules) and *altered*
(the row's date, kind, terms or aliases differ from what its version says now). Repair
rewrites exactly those documents' rows, in one transaction per batch.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.db import transaction

from notes.models import Document, Version
from retrieval.meta.store import (
    BATCH,
    RULES,
    DerivedMeta,
    derive_meta,
    first_version_times,
    write_meta,
)
from retrieval.models import DocumentAlias, DocumentMeta, DocumentTerm

EXAMPLES = 10


@dataclass(frozen=True)
class MetaHealth:
    """The meta rows against the live documents' head versions."""

    checked: bool = True
    documents: int = 0  # live documents with a head version
    rows: int = 0  # meta rows of those documents
    missing: int = 0
    stale: int = 0
    altered: int = 0
    examples: dict[str, list[int]] = field(default_factory=dict)  # document ids per finding

    @property
    def problems(self) -> list[str]:
        if not self.checked:
            return []
        counts = [
            (self.missing, "documents have no meta row (date, kind, terms, aliases)"),
            (self.stale, "meta rows were derived from another version or under older rules"),
            (self.altered, "meta rows differ from what their head version says now"),
        ]
        return [
            f"{count} {what}; `lode_index repair` re-derives them"
            for count, what in counts
            if count
        ]


@dataclass(frozen=True)
class _Findings:
    documents: int
    rows: int
    missing: list[int]
    stale: list[int]
    altered: list[int]
    derived: dict[int, DerivedMeta]  # of the documents found wanting


def _stored(document_ids: list[int]) -> tuple[dict[int, DocumentMeta], dict, dict]:
    metas = DocumentMeta.objects.in_bulk(document_ids)
    terms: dict[int, set[tuple[str, int]]] = defaultdict(set)
    for pk, term, weight in DocumentTerm.objects.filter(document_id__in=document_ids).values_list(
        "document_id", "term", "weight"
    ):
        terms[pk].add((term, weight))
    aliases: dict[int, set[tuple[str, ...]]] = defaultdict(set)
    for pk, *rest in DocumentAlias.objects.filter(document_id__in=document_ids).values_list(
        "document_id", "short", "long", "short_key", "long_key", "pattern"
    ):
        aliases[pk].add(tuple(rest))
    return metas, terms, aliases


def _same(derived: DerivedMeta, row: DocumentMeta, terms: set, aliases: set) -> bool:
    expected = derived.meta_row()
    fields = ("date", "date_source", "date_precision", "kind", "kind_source")
    return (
        all(getattr(expected, name) == getattr(row, name) for name in fields)
        and {(t.term, t.weight) for t in derived.term_rows()} == terms
        and {(a.short, a.long, a.short_key, a.long_key, a.pattern) for a in derived.alias_rows()}
        == aliases
    )


def _findings() -> _Findings:
    live = list(
        Document.objects.filter(deleted_at=None, head__isnull=False)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    rows = 0
    missing: list[int] = []
    stale: list[int] = []
    altered: list[int] = []
    derived: dict[int, DerivedMeta] = {}
    for start in range(0, len(live), BATCH):
        ids = live[start : start + BATCH]
        documents = Document.objects.only("pk", "kind", "external_key", "head_id").in_bulk(ids)
        heads = Version.objects.only("pk", "document_id", "title", "body", "source_path").in_bulk(
            [d.head_id for d in documents.values()]
        )
        first = first_version_times(ids)
        metas, terms, aliases = _stored(ids)
        rows += len(metas)
        for pk in ids:
            document = documents[pk]
            item = derive_meta(document, heads[document.head_id], first.get(pk))
            row = metas.get(pk)
            if row is None:
                missing.append(pk)
            elif row.version_id != document.head_id or row.rules != RULES:
                stale.append(pk)
            elif not _same(item, row, terms.get(pk, set()), aliases.get(pk, set())):
                altered.append(pk)
            else:
                continue
            derived[pk] = item
    return _Findings(len(live), rows, missing, stale, altered, derived)


def meta_health() -> MetaHealth:
    """Re-derive every live document's meta and compare (read-only)."""
    found = _findings()
    named = {"missing": found.missing, "stale": found.stale, "altered": found.altered}
    return MetaHealth(
        documents=found.documents,
        rows=found.rows,
        missing=len(found.missing),
        stale=len(found.stale),
        altered=len(found.altered),
        examples={name: ids[:EXAMPLES] for name, ids in named.items() if ids},
    )


@dataclass(frozen=True)
class MetaRepair:
    attempted: bool = True
    rewritten: int = 0  # documents whose meta rows were re-derived


def repair_meta() -> MetaRepair:
    """Rewrite the meta rows of every document found missing, stale or altered."""
    derived = list(_findings().derived.values())
    rewritten = 0
    for start in range(0, len(derived), BATCH):
        part = derived[start : start + BATCH]
        with transaction.atomic():
            # A version saved since the check wrote its own rows: leave those alone.
            heads = dict(
                Document.objects.select_for_update()
                .filter(pk__in=[item.document_id for item in part])
                .values_list("pk", "head_id")
            )
            current = [item for item in part if heads.get(item.document_id) == item.version_id]
            write_meta(current)
            rewritten += len(current)
    return MetaRepair(rewritten=rewritten)
