"""A query of filters and nothing else (`tag:ops`, `source:Runbooks`, `space:"Team docs"`)
lists the documents those filters keep, newest first, one page at a time.

There is nothing to rank, so nothing goes near the indexes: the same eligibility the search
legs apply (`retrieval.eligibility`: the audience's spaces, narrowed by `space:`, then the
document filters) becomes one ORM query ordered by when each document's current text was
saved (what `after:` and `before:` compare with). Bounded: a page holds at most
`MAX_PAGE_SIZE` documents, the page number is capped, and each row carries only the first
`EXCERPT_CHARS` characters of its current text, cut in SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import QuerySet
from django.db.models.functions import Substr

from notes.models import Document
from retrieval.eligibility import Audience, apply_filters, audience_documents, narrow_audience
from retrieval.query import ParsedQuery, QueryError, parse

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
# Deep pages cost an OFFSET scan; a list this long is better narrowed with another filter.
MAX_PAGE = 500
EXCERPT_CHARS = 240


@dataclass(frozen=True)
class DocumentList:
    """One page of the documents a filter-only query keeps, newest first. Each document
    has `excerpt` (the start of its current text) and its `head` and `space` loaded."""

    parsed: ParsedQuery
    documents: list[Document]
    page: int
    page_size: int
    total: int
    notes: list[str] = field(default_factory=list)

    @property
    def has_next(self) -> bool:
        return self.page * self.page_size < self.total and self.page < MAX_PAGE

    @property
    def first_position(self) -> int:
        """The 1-based position of this page's first document in the whole list."""
        return (self.page - 1) * self.page_size + 1

    @property
    def last_position(self) -> int:
        """The 1-based position of this page's last document in the whole list."""
        return self.first_position + len(self.documents) - 1


def filters_only_query(query: str) -> ParsedQuery | None:
    """`query` parsed when it is filters and nothing else; None for anything else, a bad
    filter value included (search reports that with the same message)."""
    try:
        parsed = parse(query, filters_alone=True)
    except QueryError:
        return None
    return parsed if parsed.filters_only else None


def kept_documents(parsed: ParsedQuery, audience: Audience) -> tuple[QuerySet[Document], list[str]]:
    """The live documents with a current version that `parsed`'s filters keep among those
    `audience` may see, newest first, and notes on `space:` values naming none of its
    spaces."""
    audience, notes = narrow_audience(parsed, audience)
    filtered = apply_filters(
        audience_documents(audience).filter(deleted_at__isnull=True, head__isnull=False),
        [item for item in parsed.filters if item.key != "space"],
    )
    # By id through a subquery: a tag join would repeat a document carrying two kept tags.
    documents = Document.objects.filter(pk__in=filtered.values("pk")).order_by(
        "-head__created_at", "-pk"
    )
    return documents, notes


def list_documents(
    parsed: ParsedQuery, *, audience: Audience, page: int = 1, page_size: int = DEFAULT_PAGE_SIZE
) -> DocumentList:
    """Page `page` (1-based, clamped to 1..MAX_PAGE) of the documents `parsed` keeps."""
    page = max(1, min(page, MAX_PAGE))
    page_size = max(1, min(page_size, MAX_PAGE_SIZE))
    documents, notes = kept_documents(parsed, audience)
    start = (page - 1) * page_size
    rows = list(
        documents.select_related("head", "space")
        .defer("head__body")
        .annotate(excerpt=Substr("head__body", 1, EXCERPT_CHARS))[start : start + page_size]
    )
    return DocumentList(
        parsed=parsed,
        documents=rows,
        page=page,
        page_size=page_size,
        total=documents.count(),
        notes=notes,
    )


def tag_names(document_ids: list[int]) -> dict[int, list[str]]:
    """Each document's tag names, sorted, in one query."""
    names: dict[int, set[str]] = {}
    through = Document.tags.through
    for document_id, name in through.objects.filter(document_id__in=document_ids).values_list(
        "document_id", "tag__name"
    ):
        names.setdefault(document_id, set()).add(name)
    return {document_id: sorted(found) for document_id, found in names.items()}
