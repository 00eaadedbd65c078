"""What a user may see, and which documents a search may return: the one place both become
a condition (DESIGN.md invariant 4).

**Spaces.** A user sees exactly the documents of the spaces they are a member of
(`spaces.models`). `Audience` is that set of space ids for one request, narrowed by an
optional `space:` filter or API parameter; every reader takes one: both search legs (the
lexical SQL's `d.space_id IN …`, Chroma's `where` on the `space` metadata) before their
limits, the canonical re-check of candidates, highlights, verified opening, evidence packs,
stored answers, the note / source / external pages, the API and exports. `role_in` and
`document_role` say what a member may do (viewer < editor < admin).

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
from dataclasses import dataclass
from datetime import UTC, date, datetime, time

from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from notes.models import Document, Version
from retrieval.models import AskTrace
from retrieval.query import Filter, ParsedQuery
from spaces.models import Membership, Role, Space, role_at_least


class NoAccess(Exception):
    """The user is not a member of a space they asked for (or it does not exist: the two are
    never told apart, so space ids leak nothing)."""


@dataclass(frozen=True)
class Audience:
    """Whose eyes a read is for: the user, and the spaces whose documents they may see in it
    (all their spaces, or the one they narrowed to)."""

    user_id: int
    space_ids: frozenset[int]

    @property
    def sorted_space_ids(self) -> list[int]:
        return sorted(self.space_ids)


def member_space_ids(user_id: int | None) -> frozenset[int]:
    """The ids of every space the user is a member of (empty for an anonymous user)."""
    if user_id is None:
        return frozenset()
    return frozenset(Membership.objects.filter(user_id=user_id).values_list("space_id", flat=True))


def audience_for(user_id: int, *, space_id: int | None = None) -> Audience:
    """The audience of a request by `user_id`: every space they belong to, or only
    `space_id`, which must be one of them (`NoAccess` otherwise)."""
    spaces = member_space_ids(user_id)
    if space_id is not None:
        if space_id not in spaces:
            raise NoAccess(space_id)
        spaces = frozenset({space_id})
    return Audience(user_id=user_id, space_ids=spaces)


def member_spaces(user_id: int) -> QuerySet[Space]:
    """The spaces the user belongs to, personal first, each annotated with `role`."""
    role = Membership.objects.filter(space_id=OuterRef("pk"), user_id=user_id).values("role")[:1]
    return (
        Space.objects.filter(memberships__user_id=user_id)
        .annotate(role=Subquery(role))
        .order_by(F("personal_of_id").asc(nulls_last=True), "name", "id")
    )


def role_in(user_id: int | None, space_id: int) -> str | None:
    """The user's role in the space, or None when they are not a member."""
    if user_id is None:
        return None
    return (
        Membership.objects.filter(user_id=user_id, space_id=space_id)
        .values_list("role", flat=True)
        .first()
    )


def can(user_id: int | None, space_id: int, needed: Role) -> bool:
    """Whether the user's role in the space carries the rights of `needed`."""
    return role_at_least(role_in(user_id, space_id), needed)


def visible_documents(user_id: int | None) -> QuerySet[Document]:
    """Every document the user may see (live or in the trash): those of their spaces."""
    if user_id is None:
        return Document.objects.none()
    return Document.objects.filter(space__memberships__user_id=user_id)


def audience_documents(audience: Audience) -> QuerySet[Document]:
    """The documents of the audience's spaces (live or in the trash)."""
    return Document.objects.filter(space_id__in=audience.sorted_space_ids)


def document_role(user_id: int | None, document: Document) -> str | None:
    """The user's role over `document`: their role in its space (None: may not see it)."""
    return role_in(user_id, document.space_id)


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
        case "space":
            value = item.value.strip()
            by_id = Q(space_id=int(value)) if value.isdigit() else Q()
            return Q(space__name__iexact=value) | by_id
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


def space_filters(parsed: ParsedQuery) -> list[Filter]:
    """The query's `space:` filters (they narrow the audience, see `narrow_audience`)."""
    return [item for item in parsed.filters if item.key == "space"]


def document_filters(parsed: ParsedQuery) -> list[Filter]:
    """The query's filters on documents: every one but `space:`, which the audience holds."""
    return [item for item in parsed.filters if item.key != "space"]


def _space_matches(item: Filter, space: Space) -> bool:
    value = item.value.strip()
    return space.name.casefold() == value.casefold() or (value.isdigit() and int(value) == space.pk)


def narrow_audience(parsed: ParsedQuery, audience: Audience) -> tuple[Audience, list[str]]:
    """`audience` narrowed by the query's `space:` filters (a space's name, case-insensitive,
    or its id; values ORed, `-space:` excluding), and notes for values that name none of the
    user's spaces. Only the user's own spaces are ever matched, so a `space:` value can
    never widen what they see."""
    wanted = space_filters(parsed)
    if not wanted:
        return audience, []
    spaces = list(Space.objects.filter(pk__in=audience.sorted_space_ids))
    kept = {space.pk for space in spaces}
    notes: list[str] = []
    included = [item for item in wanted if not item.negated]
    if included:
        kept = {s.pk for s in spaces if any(_space_matches(item, s) for item in included)}
    for item in wanted:
        if not any(_space_matches(item, s) for s in spaces):
            notes.append(f"You are not a member of a space called {item.value!r}.")
        if item.negated:
            kept -= {s.pk for s in spaces if _space_matches(item, s)}
    return Audience(user_id=audience.user_id, space_ids=frozenset(kept)), notes


def eligible_documents(parsed: ParsedQuery, audience: Audience) -> QuerySet[Document] | None:
    """The audience's live documents that `parsed`'s document filters keep; None when the
    query has none (each leg already restricts to the audience's spaces, more cheaply)."""
    filters = document_filters(parsed)
    if not filters:
        return None
    live = Document.objects.filter(space_id__in=audience.sorted_space_ids, deleted_at__isnull=True)
    return apply_filters(live, filters).order_by()


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


def space_clause(audience: Audience) -> tuple[str, list[object]]:
    """The lexical SQL's condition that a document (`notes_document` aliased `d`) is in one
    of the audience's spaces, and its parameters (never true for an empty audience)."""
    ids = audience.sorted_space_ids
    if not ids:
        return "1 = 0", []
    return f"d.space_id IN ({', '.join(['%s'] * len(ids))})", list(ids)


def eligible_clause(
    query: ParsedQuery, *, audience: Audience, documents: QuerySet[Document] | None
) -> tuple[str, list[object]]:
    """The lexical SQL's filter condition on `d.id` (`notes_document` aliased `d`) and its
    parameters, or ("", []) when the query has no document filters. `documents` is the
    search's eligible-document queryset; built here from `query` when the caller has none."""
    if documents is None:
        documents = eligible_documents(query, audience)
    if documents is None:
        return "", []
    subquery, params = subquery_sql(documents)
    return f"AND d.id IN ({subquery}) ", list(params)


def visible_answers(user_id: int | None) -> QuerySet[AskTrace]:
    """The stored answers the user may open: those asked in a space they are a member of,
    and their own asked across all their spaces (`AskTrace.space` null: private to them).
    An answer asked in a space the asker has since left is closed to them too: it quotes
    that space's documents."""
    if user_id is None:
        return AskTrace.objects.none()
    return AskTrace.objects.filter(
        Q(space__memberships__user_id=user_id) | Q(space__isnull=True, user_id=user_id)
    ).distinct()


# --- what a stored answer may still quote (invariant 14) ------------------------------------

# What a stored answer shows in place of a claim (or a closest passage, a conflicting value)
# citing a document its reader may not see now: nothing of the claim's text, quote, title,
# link or version.
NO_LONGER_VISIBLE = "A note cited here is no longer visible to you."


@dataclass(frozen=True)
class Citable:
    """Of the versions and documents a stored answer cites, those its reader may see now."""

    version_ids: frozenset[int]
    document_ids: frozenset[int]

    def shows(self, *, versions: Iterable[object] = (), documents: Iterable[object] = ()) -> bool:
        """Whether every one of `versions` and `documents` (ids) may be shown; an id that is
        missing or not an integer never may (fail closed)."""
        return all(_as_id(v) in self.version_ids for v in versions) and all(
            _as_id(d) in self.document_ids for d in documents
        )


def _as_id(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def _ids(values: Iterable[object]) -> set[int]:
    return {i for i in map(_as_id, values) if i is not None}


def _citable(
    documents: QuerySet[Document], version_ids: Iterable[object], document_ids: Iterable[object]
) -> Citable:
    versions = Version.objects.filter(pk__in=_ids(version_ids), document__in=documents)
    return Citable(
        version_ids=frozenset(versions.values_list("pk", flat=True)),
        document_ids=frozenset(
            documents.filter(pk__in=_ids(document_ids)).values_list("pk", flat=True)
        ),
    )


def citable_for_user(
    user_id: int | None, *, version_ids: Iterable[object], document_ids: Iterable[object]
) -> Citable:
    """Which of the cited versions and documents a stored answer may show `user_id` now: those
    of documents still stored, not in the trash, and in a space the user is a member of now.
    A version counts through its own document row, never the document id stored beside it.

    A document in the trash counts as not visible: it left every search when it was deleted,
    and a stored answer quoting it would bring its text back; restoring it brings the claim
    back. Checked on every read, so leaving a space, a note moved out of it, or a new member
    joining it changes what the same stored answer shows at once."""
    live = Document.objects.filter(
        space_id__in=sorted(member_space_ids(user_id)), deleted_at__isnull=True
    )
    return _citable(live, version_ids, document_ids)


def citable_in_public_link(
    space_id: int, *, version_ids: Iterable[object], document_ids: Iterable[object]
) -> Citable:
    """Which of the cited versions and documents the public page of an answer published from
    `space_id` may show its anonymous reader: those of documents still stored, not in the
    trash, and still in that space (the space the answer was asked in and published from). A
    document moved to any other space, even one the publisher belongs to, is no longer
    published; moved back, it is again."""
    live = Document.objects.filter(space_id=space_id, deleted_at__isnull=True)
    return _citable(live, version_ids, document_ids)
