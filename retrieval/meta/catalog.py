"""The catalog: what a reader's notes hold, by kind and date, read from the meta rows.

* `space_catalog(audience)`: per space, documents by kind with their date range, sources
  and top terms (bounded sizes).
* `catalog_for_topic(audience, words)`: the documents *about* some words (one of their top
  terms), grouped by kind with dates and a few titles, and `sentence`: "About “loki”, your
  notes hold 3 meeting notes from March–April 2024 and the runbook “Logging”." An abstention
  shows it so "not in your notes" still says what the notes do hold.

Both are a few aggregate queries over indexed rows the index keeps current
(`retrieval.meta.store`), so reading is cheap and never stale; `lode_index repair`
rebuilds the rows they read. Only documents the audience may see, never those in the trash.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

from django.db.models import Count, Max, Min, Q

from notes.models import Document
from retrieval.eligibility import Audience
from retrieval.links import document_url
from retrieval.meta.extract import KIND_NAMES, Kind, Precision
from retrieval.models import DocumentMeta, DocumentTerm
from retrieval.text.tokens import tokens
from retrieval.words.stopwords import EXTRACTIVE_STOPWORDS, QUERY_STOPWORDS
from spaces.models import Space

MAX_TOPIC_WORDS = 8
MAX_TITLES = 3  # titles named per kind
MAX_TOP_TERMS = 20
MAX_SOURCES = 10
MAX_SPACES = 20

MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def month_range(first: date | None, last: date | None) -> str:
    """ "March 2024", "March–April 2024", "November 2023–February 2024", or ""."""
    if first is None or last is None:
        return ""
    start, end = MONTH_NAMES[first.month - 1], MONTH_NAMES[last.month - 1]
    if (first.year, first.month) == (last.year, last.month):
        return f"{start} {first.year}"
    if first.year == last.year:
        return f"{start}–{end} {first.year}"
    return f"{start} {first.year}–{end} {last.year}"


@dataclass(frozen=True)
class TitledDocument:
    document_id: int
    title: str
    date: date | None
    document_kind: str  # note or external (`notes.models.Document.Kind`): which page
    precision: str = Precision.DAY  # a month-only date shows as its month

    @property
    def when(self) -> str:
        """ "27 April 2024", "April 2024" (a date that names only its month) or ""."""
        if self.date is None:
            return ""
        month = f"{MONTH_NAMES[self.date.month - 1]} {self.date.year}"
        return month if self.precision == Precision.MONTH else f"{self.date.day} {month}"

    @property
    def url(self) -> str:
        return document_url(kind=self.document_kind, document_id=self.document_id)


@dataclass(frozen=True)
class KindGroup:
    """The documents of one kind: how many, their date range, the newest few."""

    kind: str
    count: int
    first: date | None
    last: date | None
    documents: tuple[TitledDocument, ...] = ()

    @property
    def label(self) -> str:
        singular, plural = KIND_NAMES.get(self.kind, KIND_NAMES[Kind.OTHER])
        return singular if self.count == 1 else plural

    @property
    def more(self) -> int:
        """How many of the group's documents `documents` does not name."""
        return self.count - len(self.documents)

    @property
    def months(self) -> str:
        return month_range(self.first, self.last)

    @property
    def phrase(self) -> str:
        """ "the runbook “Logging”" for one, "3 meeting notes from March–April 2024" for
        several."""
        if self.count == 1 and self.documents:
            return f"the {self.label} “{self.documents[0].title}”"
        when = f" from {self.months}" if self.months else ""
        return f"{self.count} {self.label}{when}"


def _join(parts: Sequence[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


@dataclass(frozen=True)
class TopicCatalog:
    """What the audience's notes hold about `words` (the words matched, of those asked)."""

    words: tuple[str, ...]
    matched: tuple[str, ...]
    groups: tuple[KindGroup, ...]
    total: int

    @property
    def empty(self) -> bool:
        return not self.total

    @property
    def sentence(self) -> str:
        if self.empty:
            return ""
        about = _join([f"“{word}”" for word in self.matched])
        return f"About {about}, your notes hold {_join([g.phrase for g in self.groups])}."


def topic_words(words: Sequence[str]) -> list[str]:
    """The content words of `words` (a question's or a query's), folded, in order, bounded."""
    found: list[str] = []
    for token in tokens(" ".join(words)):
        if (
            len(token) >= 2
            and token not in EXTRACTIVE_STOPWORDS
            and token not in QUERY_STOPWORDS
            and token not in found
        ):
            found.append(token)
    return found[:MAX_TOPIC_WORDS]


def _forms(word: str) -> list[str]:
    """A word and its singular, as top terms are stored as written ("logs" finds "log")."""
    forms = [word]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        forms.append(word[:-1])
    else:
        forms.append(word + "s")
    return forms


def _visible(audience: Audience) -> Q:
    return Q(
        document__space_id__in=audience.sorted_space_ids,
        document__deleted_at=None,
        document__head__isnull=False,
    )


def catalog_for_topic(audience: Audience, words: Sequence[str]) -> TopicCatalog:
    """The documents the audience may see whose top terms include one of `words`, grouped
    by kind (most documents first), each group with its date range and newest titles."""
    asked = topic_words(words)
    forms = {form: word for word in asked for form in _forms(word)}
    if not forms or not audience.space_ids:
        return TopicCatalog(tuple(asked), (), (), 0)
    term_rows = DocumentTerm.objects.filter(_visible(audience), term__in=list(forms))
    matched_terms = set(term_rows.values_list("term", flat=True).distinct())
    matched = tuple(word for word in asked if any(forms[t] == word for t in matched_terms))
    document_ids = term_rows.values("document_id")
    metas = DocumentMeta.objects.filter(document_id__in=document_ids)
    counts = list(
        metas.values("kind")
        .annotate(count=Count("pk"), first=Min("date"), last=Max("date"))
        .order_by("-count", "kind")
    )
    groups = []
    for row in counts:
        newest = (
            metas.filter(kind=row["kind"])
            .order_by("-date", "-document_id")
            .values_list(
                "document_id", "document__title", "date", "document__kind", "date_precision"
            )[:MAX_TITLES]
        )
        groups.append(
            KindGroup(
                kind=row["kind"],
                count=row["count"],
                first=row["first"],
                last=row["last"],
                documents=tuple(TitledDocument(*item) for item in newest),
            )
        )
    return TopicCatalog(tuple(asked), matched, tuple(groups), sum(g.count for g in groups))


@dataclass(frozen=True)
class SpaceCatalog:
    """One space's documents by kind and date, their sources and top terms."""

    space_id: int
    space_name: str
    documents: int
    kinds: tuple[KindGroup, ...]
    sources: tuple[tuple[str, int], ...]  # (source name, documents), most first
    top_terms: tuple[tuple[str, int], ...] = field(default=())  # (term, documents)


def space_catalog(audience: Audience) -> list[SpaceCatalog]:
    """The catalog of each space the audience covers (at most `MAX_SPACES`, by id)."""
    catalogs = []
    for space_id in audience.sorted_space_ids[:MAX_SPACES]:
        one = Audience(user_id=audience.user_id, space_ids=frozenset({space_id}))
        metas = DocumentMeta.objects.filter(_visible(one))
        kinds = tuple(
            KindGroup(kind=row["kind"], count=row["count"], first=row["first"], last=row["last"])
            for row in metas.values("kind")
            .annotate(count=Count("pk"), first=Min("date"), last=Max("date"))
            .order_by("-count", "kind")
        )
        sources = tuple(
            (row["source_name"] or "written in lode", row["count"])
            for row in Document.objects.filter(
                space_id=space_id, deleted_at=None, head__isnull=False
            )
            .values("source_name")
            .annotate(count=Count("pk"))
            .order_by("-count", "source_name")[:MAX_SOURCES]
        )
        terms = tuple(
            (row["term"], row["count"])
            for row in DocumentTerm.objects.filter(_visible(one))
            .values("term")
            .annotate(count=Count("document_id"))
            .order_by("-count", "term")[:MAX_TOP_TERMS]
        )
        name = Space.objects.filter(pk=space_id).values_list("name", flat=True)
        catalogs.append(
            SpaceCatalog(
                space_id=space_id,
                space_name=name.first() or "",
                documents=sum(k.count for k in kinds),
                kinds=kinds,
                sources=sources,
                top_terms=terms,
            )
        )
    return catalogs
