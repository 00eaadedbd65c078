"""Backlinks: what a document's page shows about its place in the graph.

`document_links(audience, document)` reads the edges around one document and returns four
bounded lists, each row plain data a template renders with auto-escaping:

* *Linked from* — resolved declared edges into the document (`links_to`, `contains`,
  `annotates`), each with the linking document, the version it was read from and the
  linking sentence, the edge's code-point span highlighted as `retrieval.highlight`
  segments (never markup: the template escapes every piece);
* *Links to* — resolved declared edges out of it;
* *Unresolved* — its own links that name nothing (`missing`) or more than one document
  (`ambiguous`, with the candidates this reader may see);
* *Unlinked mentions* — inferred edges: other documents whose text holds this one's title
  without linking it (`mentions`), and `related` ones (embedding similarity), labelled
  inferred with their rule as basis. A mention in a note the reader may edit offers
  "Link it": `link_mention` turns it into a `[[wiki link]]` as a new version.

`neighbourhood` gives the 1–2 hop picture of the same edges (`retrieval/web/graph_picture.py`
draws it).

Every read starts from `graph_read.visible_edges` / `resolved_edges`, so eligibility holds at
both ends: a note in a space the reader is not in never shows, even when it links to one
they can see.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django.urls import reverse

from notes import services as note_services
from notes.models import Document, TrustTier, Version, title_key
from retrieval import links
from retrieval.eligibility import Audience, audience_documents
from retrieval.highlight import Segment
from retrieval.index.link_parsing import blank_code, find_links
from retrieval.models import Edge
from retrieval.search.graph_read import (
    DECLARED_KINDS,
    basis_of,
    edge_tier,
    resolved_edges,
    visible_edges,
)
from retrieval.text.sentences import split_sentences
from spaces.models import Membership

# At most this many rows per list (the count of all of them is given beside it).
MAX_ROWS = 50
# The linking sentence: at most this many code points either side of the link when the
# passage has no sentence around it (a table row, a run-on line).
CONTEXT_CHARS = 160
MIN_CONTEXT_CHARS = 60
SHORT_CONTEXT_CHARS = 24  # a "sentence" with less than this around the link is widened
# The picture: at most this many documents (the focus included) and hops.
MAX_PICTURE_NODES = 30
MAX_HOPS = 2
# Edges read per hop when building the picture (ordered, so the cut is deterministic).
MAX_PICTURE_EDGES_PER_HOP = 400


@dataclass(frozen=True)
class Excerpt:
    """The sentence around an edge's span: `segments` (the span highlighted) concatenate to
    an exact slice of the passage text; `cut_before`/`cut_after` say text was left out."""

    segments: tuple[Segment, ...]
    cut_before: bool = False
    cut_after: bool = False


@dataclass(frozen=True)
class Candidate:
    """A document an ambiguous link may mean (one the reader may see)."""

    document_id: int
    title: str
    url: str


@dataclass(frozen=True)
class LinkIt:
    """What the "Link it" form posts: the mentioning note, the head it was read from, the
    mention's span in that version's body and the document it mentions."""

    note_id: int
    base_version_id: int
    start: int
    end: int
    target_id: int


@dataclass(frozen=True)
class LinkRow:
    """One edge as a page shows it, seen from the page's document: `other_*` is the document
    (or, for `contains`, the source) at the far end."""

    edge_id: int
    kind: str
    kind_label: str
    inferred: bool
    tier: str
    other_id: int | None
    other_title: str
    other_url: str
    other_kind: str  # "note", "external" or "source"
    version_number: int | None  # the version the edge was read from
    version_url: str
    excerpt: Excerpt | None
    label: str  # the link's text or alias (what it said, for unresolved ones)
    target: str
    resolution: str
    basis: dict[str, object]
    basis_text: str
    candidates: tuple[Candidate, ...] = ()
    create_url: str = ""
    link_it: LinkIt | None = None


@dataclass(frozen=True)
class LinkList:
    rows: tuple[LinkRow, ...]
    total: int

    @property
    def hidden(self) -> int:
        """How many rows the bound left out."""
        return self.total - len(self.rows)


@dataclass(frozen=True)
class DocumentLinks:
    document_id: int
    linked_from: LinkList
    links_to: LinkList
    unresolved: LinkList
    mentions: LinkList

    @property
    def empty(self) -> bool:
        return not any(
            part.total for part in (self.linked_from, self.links_to, self.unresolved, self.mentions)
        )


# --- reading -------------------------------------------------------------------------------


def _with_ends(edges: QuerySet[Edge]) -> QuerySet[Edge]:
    return edges.select_related(
        "from_document", "from_version", "from_source", "to_document", "passage"
    )


def _bounded(edges: QuerySet[Edge], order: Sequence[str]) -> tuple[list[Edge], int]:
    total = edges.count()
    return list(_with_ends(edges).order_by(*order)[:MAX_ROWS]), total


def document_links(
    audience: Audience,
    document: Document,
    *,
    user: AbstractBaseUser | None = None,
    annotations_listed: bool = False,
) -> DocumentLinks:
    """The backlinks sections of `document`'s page for `audience` (the reader's spaces).

    With `user`, unlinked mentions in notes that user may edit carry a `link_it`. With
    `annotations_listed` (a snapshot page, which lists its annotations itself) the notes
    that annotate it are left out of *Linked from*, so each annotation is shown once.
    """
    visible = visible_edges(audience)
    resolved = resolved_edges(audience)

    incoming_kinds = [
        k for k in DECLARED_KINDS if not (annotations_listed and k == Edge.Kind.ANNOTATES)
    ]
    incoming, incoming_total = _bounded(
        resolved.filter(to_document=document, kind__in=incoming_kinds).exclude(
            from_document=document
        ),
        ("from_document__title_key", "from_document_id", "from_source_id", "start", "id"),
    )
    outgoing, outgoing_total = _bounded(
        resolved.filter(from_document=document, kind__in=DECLARED_KINDS),
        ("start", "to_document__title_key", "id"),
    )
    unresolved, unresolved_total = _bounded(
        visible.filter(from_document=document).filter(
            ~Q(resolution=Edge.Resolution.RESOLVED) | Q(to_document__isnull=True)
        ),
        ("start", "id"),
    )
    # A document already linked either way is listed under Linked from / Links to, so its
    # mentions and similarity are left out here: the section lists only what is not linked.
    declared = resolved.filter(kind__in=DECLARED_KINDS)
    linked_from_ids = declared.filter(to_document=document, from_document__isnull=False).values(
        "from_document_id"
    )
    links_to_ids = declared.filter(from_document=document).values("to_document_id")
    linked = Q(from_document_id__in=linked_from_ids) | Q(from_document_id__in=links_to_ids)
    linked_far = Q(to_document_id__in=linked_from_ids) | Q(to_document_id__in=links_to_ids)
    inferred, inferred_total = _bounded(
        resolved.filter(
            Q(kind=Edge.Kind.MENTIONS, to_document=document)
            | (Q(kind=Edge.Kind.RELATED) & (Q(to_document=document) | Q(from_document=document)))
        )
        .exclude(from_document=document, to_document=document)
        .exclude(Q(to_document=document) & linked)
        .exclude(Q(from_document=document) & linked_far),
        ("kind", "-score", "from_document__title_key", "from_document_id", "start", "id"),
    )
    candidates = _candidates(audience, unresolved)
    writable = _writable_notes(user, [e.from_document for e in inferred if e.from_document])
    return DocumentLinks(
        document_id=document.pk,
        linked_from=LinkList(
            tuple(_row(e, incoming=True) for e in incoming),
            incoming_total,
        ),
        links_to=LinkList(tuple(_row(e, incoming=False) for e in outgoing), outgoing_total),
        unresolved=LinkList(
            tuple(_unresolved_row(e, candidates) for e in unresolved), unresolved_total
        ),
        mentions=LinkList(
            tuple(_inferred_row(e, document, writable) for e in inferred), inferred_total
        ),
    )


def _candidates(audience: Audience, edges: Iterable[Edge]) -> dict[int, Candidate]:
    """The candidate documents of ambiguous links that the reader may see (live ones)."""
    wanted = {
        int(pk)
        for edge in edges
        for pk in (edge.basis or {}).get("candidates", ())
        if isinstance(pk, int) or (isinstance(pk, str) and pk.isdigit())
    }
    if not wanted:
        return {}
    rows = (
        audience_documents(audience)
        .filter(pk__in=sorted(wanted), deleted_at__isnull=True)
        .values_list("pk", "title", "kind")
    )
    return {
        pk: Candidate(pk, title, links.document_url(kind=kind, document_id=pk))
        for pk, title, kind in rows
    }


def _writable_notes(user: AbstractBaseUser | None, documents: Iterable[Document]) -> set[int]:
    """The ids of `documents` that are notes `user` may edit (`notes.services.may_change`)."""
    documents = [d for d in documents if d.kind == Document.Kind.NOTE]
    if user is None or not documents:
        return set()
    roles = dict(
        Membership.objects.filter(
            user_id=user.pk, space_id__in={d.space_id for d in documents}
        ).values_list("space_id", "role")
    )
    return {d.pk for d in documents if note_services.may_change_as(user, d, roles.get(d.space_id))}


def _document_end(document: Document) -> tuple[int, str, str, str]:
    return (
        document.pk,
        document.title,
        links.document_url(kind=document.kind, document_id=document.pk),
        document.kind,
    )


def _from_end(edge: Edge) -> tuple[int | None, str, str, str]:
    if edge.from_document is not None:
        return _document_end(edge.from_document)
    source = edge.from_source
    if source is None:
        return None, "", "", ""
    return (
        source.pk,
        source.name,
        reverse("externals:source", kwargs={"source_id": source.pk}),
        "source",
    )


def _version_of(edge: Edge) -> tuple[int | None, str]:
    version, document = edge.from_version, edge.from_document
    if version is None or document is None:
        return None, ""
    url = links.version_url(kind=document.kind, document_id=document.pk, version_id=version.pk)
    return version.number, url


def _tier(edge: Edge) -> str:
    source_tier = edge.from_document.trust_tier if edge.from_document else None
    if edge.from_document is None and edge.to_document is not None:
        source_tier = edge.to_document.trust_tier  # a source's `contains`: the external's
    return edge_tier(edge.kind, source_tier)


def basis_text(edge: Edge, version_number: int | None) -> str:
    """The basis in words, for an Advanced view: the rule and version, where it was read."""
    words = [f"rule {edge.rule} v{edge.rule_version}"]
    if edge.kind in (Edge.Kind.MENTIONS, Edge.Kind.RELATED):
        words.append("inferred, not written as a link")
    if edge.start is not None and edge.end is not None:
        where = f"characters {edge.start}–{edge.end}"
        if version_number is not None:
            where += f" of version {version_number}"
        words.append(where)
    if edge.score is not None:
        words.append(f"similarity {edge.score:.3f}")
    model = (edge.basis or {}).get("model")
    if model:
        words.append(f"model {model}")
    threshold = (edge.basis or {}).get("threshold")
    if threshold is not None:
        words.append(f"threshold {threshold}")
    return "; ".join(words)


def _common(edge: Edge, other: tuple[int | None, str, str, str]) -> dict[str, object]:
    number, version_url = _version_of(edge)
    return {
        "edge_id": edge.pk,
        "kind": edge.kind,
        "kind_label": Edge.Kind(edge.kind).label,
        "inferred": edge.inferred,
        "tier": _tier(edge),
        "other_id": other[0],
        "other_title": other[1],
        "other_url": other[2],
        "other_kind": other[3],
        "version_number": number,
        "version_url": version_url,
        "excerpt": excerpt_of(edge),
        "label": edge.label,
        "target": edge.target,
        "resolution": edge.resolution,
        "basis": basis_of(edge),
        "basis_text": basis_text(edge, number),
    }


def _row(edge: Edge, *, incoming: bool) -> LinkRow:
    if incoming:
        other = _from_end(edge)
    else:
        assert edge.to_document is not None
        other = _document_end(edge.to_document)
    return LinkRow(**_common(edge, other))


def _unresolved_row(edge: Edge, candidates: dict[int, Candidate]) -> LinkRow:
    chosen = tuple(
        candidates[int(pk)]
        for pk in (edge.basis or {}).get("candidates", ())
        if str(pk).isdigit() and int(pk) in candidates
    )
    create = ""
    if edge.rule == "wiki-link" and edge.resolution == Edge.Resolution.MISSING and edge.target:
        create = f"{reverse('notes:create')}?{urlencode({'title': edge.target[:500]})}"
    return LinkRow(
        **_common(edge, (None, edge.target, "", "")), candidates=chosen, create_url=create
    )


def _inferred_row(edge: Edge, document: Document, writable: set[int]) -> LinkRow:
    if edge.to_document_id == document.pk:
        other = _from_end(edge)
    else:
        assert edge.to_document is not None
        other = _document_end(edge.to_document)
    link_it = None
    source = edge.from_document
    if (
        edge.kind == Edge.Kind.MENTIONS
        and source is not None
        and source.pk in writable
        and source.trust_tier == TrustTier.NOTE
        and edge.from_version_id == source.head_id
        and edge.start is not None
        and edge.end is not None
    ):
        link_it = LinkIt(source.pk, edge.from_version_id, edge.start, edge.end, document.pk)
    return LinkRow(**_common(edge, other), link_it=link_it)


# --- the linking sentence -----------------------------------------------------------------


def excerpt_of(edge: Edge) -> Excerpt | None:
    """The sentence of the edge's passage around its span, the span highlighted; None when
    the edge has no span or passage (a `contains`, a `related` edge)."""
    passage = edge.passage
    if passage is None or edge.start is None or edge.end is None:
        return None
    return excerpt(passage.text, edge.start - passage.start, edge.end - passage.start)


def excerpt(text: str, start: int, end: int) -> Excerpt | None:
    """`text` around `[start, end)` (code points of `text`): the sentences holding the span
    (or `CONTEXT_CHARS` either side, cut at white space), the span highlighted. None when
    the span is not inside `text` (a stale offset shows nothing rather than a wrong mark)."""
    if not (0 <= start < end <= len(text)):
        return None
    sentences = [s for s in split_sentences(text) if s.start < end and start < s.end]
    if sentences:
        left = min(sentences[0].start, start)
        right = max(sentences[-1].end, end)
    else:
        left, right = start, end
    if start - left > CONTEXT_CHARS:
        left = _cut_at_space(text, start - CONTEXT_CHARS, start)
    if right - end > CONTEXT_CHARS:
        right = _cut_at_space_back(text, end, end + CONTEXT_CHARS)
    if not sentences:
        left, right = start, end
    # A short sentence (or none: a table cell, inline HTML) gets some of its paragraph
    # around it, so the reader sees what the link is about.
    paragraph_start = text.rfind("\n\n", 0, start) + 1 if "\n\n" in text[:start] else 0
    paragraph_end = text.find("\n\n", end)
    paragraph_end = len(text) if paragraph_end < 0 else paragraph_end
    if (start - left) + (right - end) < SHORT_CONTEXT_CHARS:
        if left > paragraph_start:
            left = max(paragraph_start, _cut_at_space(text, start - MIN_CONTEXT_CHARS, start))
        if right < paragraph_end:
            right = min(paragraph_end, _cut_at_space_back(text, end, end + MIN_CONTEXT_CHARS))
    pieces = [
        Segment(text[left:start], False),
        Segment(text[start:end], True),
        Segment(text[end:right], False),
    ]
    return Excerpt(
        segments=tuple(p for p in pieces if p.text),
        cut_before=left > 0 and bool(text[:left].strip()),
        cut_after=right < len(text) and bool(text[right:].strip()),
    )


def _cut_at_space(text: str, lower: int, upper: int) -> int:
    """The first position after white space in text[lower:upper] (or `lower`); 0 when
    `lower` is at or before the start (the whole beginning fits)."""
    if lower <= 0:
        return 0
    for i in range(lower, upper):
        if text[i].isspace():
            return i + 1
    return lower


def _cut_at_space_back(text: str, lower: int, upper: int) -> int:
    """The last white space position in text[lower:upper] (or `upper`); the end of `text`
    when `upper` reaches it."""
    if upper >= len(text):
        return len(text)
    for i in range(upper - 1, lower - 1, -1):
        if text[i].isspace():
            return i
    return upper


# --- "Link it" ----------------------------------------------------------------------------


class LinkItRefused(ValidationError):
    """The mention cannot be linked as asked; nothing was saved. The message says why."""


def link_mention(
    *,
    user: AbstractBaseUser,
    note: Document,
    base_version_id: int,
    start: int,
    end: int,
    target: Document,
) -> Version:
    """Write a new version of `note` in which the unlinked mention of `target` at
    `[start, end)` of version `base_version_id` becomes `[[Title|text]]` (`[[Title]]` when
    the text is the title as written).

    The caller has checked that the user may see `note` and `target`; the role (editor or
    admin of the note's space) is checked again by `notes.services.note_update`, which also
    refuses with `EditConflict` when the head moved past `base_version_id` (nothing saved).
    `LinkItRefused` when the span no longer holds the mention (nothing saved either).
    """
    if note.kind != Document.Kind.NOTE or note.trust_tier != TrustTier.NOTE:
        raise LinkItRefused("Only notes can be changed here.")
    version = Version.objects.filter(pk=base_version_id, document=note).first()
    if version is None:
        raise LinkItRefused(
            "That version is not a version of this note; reload the page and try again."
        )
    body = version.body
    text = body[start:end] if 0 <= start < end <= len(body) else ""
    stale = LinkItRefused(
        "The note changed since this page was loaded; the mention is no longer where it was. "
        "Nothing was saved. Reload to see the current mentions."
    )
    if not text or title_key(text) != target.title_key or not target.title_key:
        raise stale
    if blank_code(body)[start:end] != text or any(
        link.start < end and start < link.end for link in find_links(body)
    ):
        raise stale  # inside code or already inside a link
    title = " ".join(target.title.split())
    label = " ".join(text.split())
    if any(c in title for c in "[]|") or any(c in label for c in "[]"):
        raise LinkItRefused(
            f"“{target.title}” cannot be written as a [[wiki link]] (its title or the "
            "mentioning text holds a bracket or a “|”); edit the note to link it."
        )
    link = f"[[{title}]]" if label == title else f"[[{title}|{label}]]"
    return note_services.note_update(
        document=note,
        user=user,
        base_version_id=version.pk,
        title=version.title,
        body=body[:start] + link + body[end:],
    )


# --- the neighbourhood picture ------------------------------------------------------------


@dataclass(frozen=True)
class HoodNode:
    id: int
    title: str
    url: str
    kind: str
    tier: str
    hop: int


@dataclass(frozen=True)
class HoodEdge:
    source: int
    target: int
    kind: str
    inferred: bool


@dataclass(frozen=True)
class Neighbourhood:
    focus: int
    hops: int
    nodes: tuple[HoodNode, ...]
    edges: tuple[HoodEdge, ...]
    truncated: bool = False  # more documents were within reach than the picture shows
    notes: tuple[str, ...] = field(default_factory=tuple)


def neighbourhood(
    audience: Audience, document: Document, *, hops: int = 1, max_nodes: int = MAX_PICTURE_NODES
) -> Neighbourhood:
    """The documents within `hops` (1 or 2) resolved edges of `document`, either direction,
    every kind (inferred ones included, marked), at most `max_nodes` of them with the focus;
    nearer ones first, then by title and id, so the same graph gives the same picture."""
    return seeds_neighbourhood(audience, [document.pk], hops=hops, max_nodes=max_nodes)


def seeds_neighbourhood(
    audience: Audience,
    seeds: Sequence[int],
    *,
    hops: int = 1,
    max_nodes: int = MAX_PICTURE_NODES,
) -> Neighbourhood:
    """`neighbourhood` around several documents at once (a search's results: the graph page
    of a query), each at hop 0; the focus is the first seed. Seeds the audience cannot see
    (or that are deleted) are left out."""
    hops = 1 if hops < 1 else min(hops, MAX_HOPS)
    resolved = resolved_edges(audience).filter(from_document__isnull=False)
    visible = set(
        audience_documents(audience)
        .filter(pk__in=list(seeds), deleted_at__isnull=True)
        .values_list("pk", flat=True)
    )
    ordered = [pk for pk in dict.fromkeys(seeds) if pk in visible][:max_nodes]
    seen: dict[int, int] = {pk: 0 for pk in ordered}  # document id → hop
    frontier = list(ordered)
    kept_edges: set[tuple[int, int, str]] = set()
    truncated = False
    for hop in range(1, hops + 1):
        if not frontier:
            break
        rows = list(
            resolved.filter(Q(from_document_id__in=frontier) | Q(to_document_id__in=frontier))
            .order_by("kind", "from_document_id", "to_document_id", "id")
            .values_list("from_document_id", "to_document_id", "kind")[
                : MAX_PICTURE_EDGES_PER_HOP + 1
            ]
        )
        truncated |= len(rows) > MAX_PICTURE_EDGES_PER_HOP
        rows = rows[:MAX_PICTURE_EDGES_PER_HOP]
        new = sorted(
            {end for a, b, _ in rows for end in (a, b) if end not in seen and a != b},
        )
        titles = dict(Document.objects.filter(pk__in=new).values_list("pk", "title_key"))
        new.sort(key=lambda pk: (titles.get(pk, ""), pk))
        room = max_nodes - len(seen)
        if len(new) > room:
            truncated = True
            new = new[: max(room, 0)]
        for pk in new:
            seen[pk] = hop
        frontier = new
        for a, b, kind in rows:
            if a in seen and b in seen and a != b:
                kept_edges.add((a, b, kind))
    documents = {
        d.pk: d
        for d in Document.objects.filter(pk__in=list(seen)).only(
            "pk", "title", "kind", "trust_tier"
        )
    }
    nodes = tuple(
        HoodNode(
            id=pk,
            title=documents[pk].title,
            url=links.document_url(kind=documents[pk].kind, document_id=pk),
            kind=documents[pk].kind,
            tier=documents[pk].trust_tier,
            hop=hop,
        )
        for pk, hop in sorted(seen.items(), key=lambda item: (item[1], item[0]))
        if pk in documents
    )
    edges = tuple(
        HoodEdge(a, b, kind, kind in (Edge.Kind.MENTIONS, Edge.Kind.RELATED))
        for a, b, kind in sorted(kept_edges)
    )
    return Neighbourhood(
        focus=ordered[0] if ordered else 0,
        hops=hops,
        nodes=nodes,
        edges=edges,
        truncated=truncated,
    )


def completions(audience: Audience, prefix: str, *, limit: int = 10) -> list[tuple[int, str]]:
    """Titles for `[[` completion: live documents of the audience whose title key starts
    with `prefix`'s key, then those containing it, each by title; at most `limit`."""
    key = title_key(prefix)[:200]
    if not key:
        return []
    # A title with a bracket or "|" cannot be written inside `[[…]]`: not offered.
    live = (
        audience_documents(audience)
        .filter(deleted_at__isnull=True, head__isnull=False)
        .exclude(Q(title__contains="[") | Q(title__contains="]") | Q(title__contains="|"))
    )
    first = list(
        live.filter(title_key__startswith=key)
        .order_by("title_key", "pk")
        .values_list("pk", "title")[:limit]
    )
    if len(first) < limit:
        taken = [pk for pk, _ in first]
        first += list(
            live.filter(title_key__contains=key)
            .exclude(pk__in=taken)
            .order_by("title_key", "pk")
            .values_list("pk", "title")[: limit - len(first)]
        )
    return first
