"""Which documents a search may return: the one place query filters become a condition.

DESIGN.md invariant 4 (seeds/loom-chain-of-custody.md, "Apply eligibility before ranking and
truncation"): a filtered-out passage never appears and never displaces an eligible one. So
the condition is built once per search, as a queryset over `Document`, and every stage gets
the same one:

* the lexical backends put it into their SQL as a subquery with bound parameters
  (`subquery_sql`), before `ORDER BY … LIMIT`;
* the dense leg turns it into Chroma's `where` (`document` `$in` the eligible ids), so the
  nearest-neighbour cut only ever sees eligible vectors;
* `search.fused_candidates` re-checks every candidate against it on canonical rows.

Filters compare canonical columns only (never Chroma metadata, which may lag a trust-tier
change): `type:` → `Document.kind`, `trust:` → `Document.trust_tier`, `source:` →
`Document.source_name` (case-insensitive, whole name), `tag:` → the document's tag names,
`path:` → the head version's `source_path` (case-insensitive substring; ASCII-only case
folding on SQLite, whose LIKE folds only ASCII), `before:`/`after:` → the head version's
`created_at`. Values of one key are ORed, keys are ANDed, exclusions all apply (the rules
`retrieval.query` documents).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, time

from django.db.models import Q, QuerySet
from django.utils import timezone

from notes.models import Document
from retrieval.query import Filter, ParsedQuery


def day_start(value: str) -> datetime:
    """The first instant of the ISO date `value` in the current time zone, as UTC.

    Clamped to the representable range: year 1 or 9999 in a zone away from UTC would
    otherwise overflow when converted.
    """
    day = date.fromisoformat(value)
    local = datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())
    try:
        return local.astimezone(UTC)
    except OverflowError:
        return (datetime.min if day.year < 5000 else datetime.max).replace(tzinfo=UTC)


def filter_q(item: Filter) -> Q:
    """The condition on `Document` that `item` keeps (ignoring `item.negated`)."""
    match item.key:
        case "type":
            return Q(kind=item.value)
        case "trust":
            return Q(trust_tier=item.value)
        case "source":
            return Q(source_name__iexact=item.value)
        case "tag":
            return Q(tags__name=item.value)
        case "path":
            return Q(head__source_path__icontains=item.value)
        case "after":
            return Q(head__created_at__gte=day_start(item.value))
        case "before":
            return Q(head__created_at__lt=day_start(item.value))
    raise ValueError(f"unknown filter key {item.key!r}")


def apply_filters(documents: QuerySet[Document], filters: Iterable[Filter]) -> QuerySet[Document]:
    """`documents` narrowed by `filters`: per key, kept values ORed (one `filter()`, so one
    join for tags) and excluded values each excluded; keys ANDed."""
    filters = list(filters)
    for key in dict.fromkeys(item.key for item in filters):
        kept = [filter_q(item) for item in filters if item.key == key and not item.negated]
        if kept:
            either = kept[0]
            for condition in kept[1:]:
                either |= condition
            documents = documents.filter(either)
        for item in filters:
            if item.key == key and item.negated:
                documents = documents.exclude(filter_q(item))
    return documents


def eligible_documents(parsed: ParsedQuery, *, owner_id: int) -> QuerySet[Document] | None:
    """`owner_id`'s live documents that `parsed`'s filters keep; None when the query has no
    filters (each leg already restricts to the owner's live head passages, more cheaply)."""
    if not parsed.filters:
        return None
    live = Document.objects.filter(owner_id=owner_id, deleted_at__isnull=True)
    return apply_filters(live, parsed.filters).order_by()


def eligible_ids(documents: QuerySet[Document]) -> list[int]:
    """The ids of `documents`, sorted (the tag join can repeat a document)."""
    return sorted(set(documents.values_list("pk", flat=True)))


def subquery_sql(documents: QuerySet[Document]) -> tuple[str, Sequence[object]]:
    """`SELECT id FROM …` for `documents`, and its parameters, for `… IN (subquery)`.

    Every user value stays a bound parameter (Django compiles the lookups); the SQL uses
    the `%s` placeholders that `connection.cursor().execute` takes on both vendors.
    """
    sql, params = documents.order_by().values("pk").query.sql_with_params()
    return sql, params


def eligible_clause(
    query: ParsedQuery, *, owner_id: int, documents: QuerySet[Document] | None
) -> tuple[str, list[object]]:
    """The lexical SQL's filter condition on `d.id` (`notes_document` aliased `d`) and its
    parameters, or ("", []) when the query has no filters. `documents` is the search's
    eligible-document queryset; built here from `query` when the caller has none."""
    if documents is None:
        documents = eligible_documents(query, owner_id=owner_id)
    if documents is None:
        return "", []
    subquery, params = subquery_sql(documents)
    return f"AND d.id IN ({subquery}) ", list(params)
