"""The planner's reads of the meta-knowledge: a question's narrowing cues
(`narrowing.Cues`) resolved against what its asker may see — note titles, tags, spaces,
sources, and the documents dated in a period.

Everything is read through the audience (`retrieval.eligibility`), so a cue naming a note,
tag, space or source the asker may not see narrows nothing and is never shown back.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Q, QuerySet

from notes.models import Document, title_key
from retrieval.eligibility import Audience, audience_documents, day_start
from retrieval.meta.store import document_dates, document_kinds
from retrieval.plan.narrowing import Cues, Narrowing, Period
from spaces.models import Space

# The most documents one cue may name by title (a title shared by more is not a name).
MAX_NAMED = 20
# The most documents without a meta row dated from their text at ask time.
MAX_DERIVED = 200


def live_documents(audience: Audience) -> QuerySet[Document]:
    """The audience's live documents with a head version: what a search can find."""
    return audience_documents(audience).filter(deleted_at__isnull=True).exclude(head=None)


def named_notes(audience: Audience, phrases: Iterable[str]) -> list[Document]:
    """The documents whose title (by `title_key`) is one of `phrases`, in the phrases' order;
    a phrase inside a title already found is skipped ("backup runbook" before "backup")."""
    found: list[Document] = []
    documents = live_documents(audience)
    for phrase in phrases:
        key = title_key(phrase)
        if not key or any(key in d.title_key for d in found):
            continue
        found += list(documents.filter(title_key=key).order_by("pk")[:MAX_NAMED])
    return found


def documents_dated_in(documents: QuerySet[Document], period: Period) -> set[int]:
    """The ids of `documents` dated within `period`: the date each is about
    (`retrieval.meta`: front matter, title, first heading, else its first version's day).
    Documents whose meta row is not written yet are dated by `document_dates` when they are
    few, else by their first version's time (reading every head would be unbounded)."""
    dated = set(
        documents.filter(meta__date__gte=period.start, meta__date__lt=period.end).values_list(
            "pk", flat=True
        )
    )
    missing = list(
        documents.filter(meta__isnull=True).values_list("pk", flat=True)[: MAX_DERIVED + 1]
    )
    if len(missing) <= MAX_DERIVED:
        dates = document_dates(missing)
        return dated | {pk for pk, day in dates.items() if period.start <= day < period.end}
    by_first_version = documents.filter(
        meta__isnull=True,
        versions__number=1,
        versions__created_at__gte=day_start(period.start.isoformat()),
        versions__created_at__lt=day_start(period.end.isoformat()),
    )
    return dated | set(by_first_version.values_list("pk", flat=True))


def documents_of_kinds(documents: QuerySet[Document], kinds: Iterable[str]) -> set[int]:
    """The ids of `documents` of one of `kinds` (`retrieval.meta`); documents without a meta
    row yet are read by `document_kinds` when they are few, else left out."""
    kinds = list(kinds)
    found = set(documents.filter(meta__kind__in=kinds).values_list("pk", flat=True))
    missing = list(
        documents.filter(meta__isnull=True).values_list("pk", flat=True)[: MAX_DERIVED + 1]
    )
    if len(missing) <= MAX_DERIVED:
        found |= {pk for pk, kind in document_kinds(missing).items() if kind in kinds}
    return found


def resolve(cues: Cues, audience: Audience) -> Narrowing:
    """`cues` resolved for `audience`. Each kind of cue that names something narrows to its
    documents (two tags: either); kinds combine (a tag and a period: both). A named note's
    kind word ("meeting", "runbook") narrows to notes of that kind when no title matches. A
    period no document is dated in narrows nothing and says so in `fallback`."""
    narrowing = Narrowing(cues=cues)
    base = live_documents(audience)
    sets: list[set[int]] = []
    if cues.notes:
        notes = named_notes(audience, cues.notes)
        if notes:
            narrowing.notes = list(dict.fromkeys(d.title for d in notes))
            sets.append({d.pk for d in notes})
    if cues.kinds and not narrowing.notes:
        # No title is named: the kind word narrows to notes of that kind ("the March meeting").
        kinds = documents_of_kinds(base, cues.kinds)
        if kinds:
            narrowing.kinds = list(cues.kinds)
            sets.append(kinds)
    if cues.tags:
        rows = list(
            base.filter(tags__name__in=cues.tags).values_list("pk", "tags__name").distinct()
        )
        if rows:
            narrowing.tags = sorted({name for _, name in rows})
            sets.append({pk for pk, _ in rows})
    if cues.spaces:
        folded = {name.casefold() for name in cues.spaces}
        spaces = [
            s
            for s in Space.objects.filter(pk__in=audience.sorted_space_ids).order_by("pk")
            if s.name.casefold() in folded
        ]
        if spaces:
            narrowing.spaces = [s.name for s in spaces]
            sets.append(set(base.filter(space__in=spaces).values_list("pk", flat=True)))
    if cues.sources:
        named = Q()
        for name in cues.sources:
            named |= Q(source_name__iexact=name)
        rows = list(base.filter(named).values_list("pk", "source_name"))
        if rows:
            narrowing.sources = sorted({name for _, name in rows})
            sets.append({pk for pk, _ in rows})
    if cues.period is not None:
        narrowing.period = cues.period
        dated = documents_dated_in(base, cues.period)
        narrowing.period_documents = len(dated)
        if dated:
            sets.append(dated)
        else:
            narrowing.fallback = (
                f"No note is dated {cues.period.label} (“{cues.period.words}”): "
                "not narrowed by date."
            )
    if sets:
        kept = set.intersection(*sets)
        if kept:
            narrowing.document_ids = frozenset(kept)
            narrowing.documents = len(kept)
        else:
            narrowing.fallback = (
                narrowing.fallback + " " if narrowing.fallback else ""
            ) + "No note matches every narrowing at once: not narrowed."
    return narrowing
