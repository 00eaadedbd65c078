"""The graph's declared and rule-inferred edges, derived from head versions.

Like passages, edges are a derived index: `derive_edges(document)` reads the document's head
version (and, for an external or an annotation, the row that places it) and returns the
edges it gives; `refresh_edges(ids)` replaces the stored edges of those documents with what
derivation gives now, in the caller's transaction, so a version's edges leave the graph in
the same transaction as its passages. `lode_index health` recomputes every document's edges
and compares (`edge_drift`); `repair` rewrites the ones that differ.

What each rule reads (the rule name and version are stored on each edge as its basis):

* `wiki-link` — `[[Title]]` / `[[Title|alias]]`, resolved by title (`notes.models.title_key`)
  among the live documents the version's author may see. One match resolves; several are
  resolved only when exactly one is in the linking document's own space; otherwise the edge
  is kept *ambiguous*, and with no match *missing* — shown, never guessed.
* `markdown-link` — `[text](target)`: a lode page (a note, an external, one of their
  versions, an evidence link: resolved through the URLconf, so the ids are checked by the
  same converters as the pages), a URL a source mirrors (→ that external), or a relative
  path: between imported notes (their `external_key` is the path inside the import) or
  between the files of one folder source, and inside a mirrored web page relative to its
  URL. Other web links are not edges.
* `title-mention` (inferred) — another document's exact title in the text, unlinked.
* `source-item` — a source contains each external it mirrors (`contains`).
* `annotation` — an annotation annotates the snapshot it sits on (`annotates`).

`related` edges (embedding similarity) are written by `retrieval/index/related.py` after the
vectors exist; `refresh_edges` leaves them alone.
"""

from __future__ import annotations

import logging
import posixpath
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.urls import Resolver404, resolve

from notes.models import Document, TrustTier, Version, title_key
from retrieval.index.link_parsing import (
    MARKDOWN_RULE,
    MENTION_RULE,
    RULE_VERSION,
    WIKI_RULE,
    Link,
    find_links,
    mention_candidates,
    mentionable,
)
from retrieval.models import Edge, GraphGeneration, Passage
from spaces.models import Membership

logger = logging.getLogger(__name__)

CONTAINS_RULE = "source-item"
ANNOTATION_RULE = "annotation"

# How many other documents one save may re-derive because they link to or mention it; past
# this the rest are left to `lode_index repair` (health reports them as drift).
MAX_REVERSE_DOCUMENTS = 500
# Deriving at least this many documents at once loads every title of their spaces once.
TITLE_INDEX_FROM = 20

# The lode pages a Markdown link may name, and which of their URL parameters say what.
_PAGE_VIEWS = {
    "notes:detail": ("note_id", None),
    "notes:version": ("note_id", "version_id"),
    "notes:history": ("note_id", None),
    "externals:external": ("document_id", None),
    "externals:snapshot": ("document_id", "version_id"),
    "evidence": ("document_id", "version_id"),
}
_SKIPPED_SCHEMES = frozenset({"mailto", "tel", "javascript", "data", "ftp", "file"})


@dataclass(frozen=True)
class _Context:
    """What resolving the links of one version needs to know."""

    document: Document
    version: Version
    space_ids: frozenset[int]  # what the version's author may see
    passages: list[tuple[int, int, int]]  # (start, end, id) of the head passages
    # Deriving many documents at once: every live title of the spaces involved, loaded once
    # (key → [(id, space id)]), instead of one lookup per document.
    titles: TitleIndex | None = None


@dataclass(frozen=True)
class TitleIndex:
    """Every live document title of `space_ids`, by key → [(id, space id)]."""

    space_ids: frozenset[int]
    keys: dict[str, list[tuple[int, int]]]


def title_index(space_ids: Iterable[int]) -> TitleIndex:
    """Every live document title of these spaces by key, for deriving many documents."""
    spaces = frozenset(space_ids)
    keys: dict[str, list[tuple[int, int]]] = defaultdict(list)
    rows = _live(spaces).order_by("pk").values_list("title_key", "pk", "space_id")
    for key, pk, space_id in rows.iterator(chunk_size=5000):
        keys[key].append((pk, space_id))
    return TitleIndex(spaces, dict(keys))


def _passage_at(context: _Context, start: int, end: int) -> int | None:
    """The head passage holding the span (the first that holds all of it, else the first
    that holds its start)."""
    holding_start = None
    for p_start, p_end, pk in context.passages:
        if p_start <= start and end <= p_end:
            return pk
        if holding_start is None and p_start <= start < p_end:
            holding_start = pk
    return holding_start


def _live(space_ids: Iterable[int]):
    return Document.objects.filter(
        space_id__in=sorted(space_ids), deleted_at__isnull=True, head__isnull=False
    )


def _edge(context: _Context, kind: str, rule: str, **fields) -> Edge:
    start, end = fields.get("start"), fields.get("end")
    passage_id = _passage_at(context, start, end) if start is not None else None
    return Edge(
        origin_id=context.document.pk,
        kind=kind,
        from_document_id=context.document.pk,
        from_version_id=context.version.pk,
        rule=rule,
        rule_version=RULE_VERSION,
        passage_id=passage_id,
        **fields,
    )


# --- links ---------------------------------------------------------------------------------


def _resolve_titles(context: _Context, keys: set[str]) -> dict[str, list[tuple[int, int]]]:
    """For each title key, the (id, space id) of the live documents the author may see."""
    found: dict[str, list[tuple[int, int]]] = defaultdict(list)
    keys = {key for key in keys if key}
    if context.titles is not None and context.space_ids <= context.titles.space_ids:
        for key in keys:
            for pk, space_id in context.titles.keys.get(key, ()):
                if space_id in context.space_ids:
                    found[key].append((pk, space_id))
        return found
    # Plain SQL: the ORM takes longer to build an IN of a few thousand keys than the
    # database takes to answer it through the title_key index.
    table = Document._meta.db_table
    spaces = sorted(context.space_ids)
    with connection.cursor() as cursor:
        for batch in _batches(sorted(keys), limit=len(spaces)):
            sql = (
                f"SELECT title_key, id, space_id FROM {table} "
                f"WHERE title_key IN ({', '.join(['%s'] * len(batch))}) "
                f"AND space_id IN ({', '.join(['%s'] * len(spaces))}) "
                "AND deleted_at IS NULL AND head_id IS NOT NULL ORDER BY id"
            )
            cursor.execute(sql, [*batch, *spaces])
            for key, pk, space_id in cursor.fetchall():
                found[key].append((pk, space_id))
    return found


def _pick(context: _Context, matches: list[tuple[int, int]]) -> tuple[str, int | None, list[int]]:
    """(resolution, the target id, the candidates) for a title's matches, self excluded."""
    matches = [m for m in matches if m[0] != context.document.pk]
    if not matches:
        return Edge.Resolution.MISSING, None, []
    if len(matches) == 1:
        return Edge.Resolution.RESOLVED, matches[0][0], []
    own_space = [pk for pk, space_id in matches if space_id == context.document.space_id]
    if len(own_space) == 1:
        return Edge.Resolution.RESOLVED, own_space[0], [pk for pk, _ in matches]
    return Edge.Resolution.AMBIGUOUS, None, [pk for pk, _ in matches]


def _wiki_edges(context: _Context, links: list[Link]) -> list[Edge]:
    wiki = [link for link in links if link.rule == WIKI_RULE]
    titles = _resolve_titles(context, {title_key(link.target) for link in wiki})
    edges = []
    for link in wiki:
        key = title_key(link.target)
        resolution, target, candidates = _pick(context, titles.get(key, []))
        if resolution == Edge.Resolution.RESOLVED and target is None:
            continue
        if target is None and not candidates and key == context.document.title_key:
            continue  # a link to itself
        edges.append(
            _edge(
                context,
                Edge.Kind.LINKS_TO,
                WIKI_RULE,
                to_document_id=target,
                resolution=resolution,
                target=link.target[:1000],
                target_key=key,
                label=link.label[:500],
                start=link.start,
                end=link.end,
                basis={"candidates": candidates} if candidates else {},
            )
        )
    return edges


@dataclass(frozen=True)
class _Target:
    """Where a Markdown link points, once read: a document (maybe a version or passage of
    it), or a key to remember an unresolved local path by."""

    document_id: int | None = None
    version_id: int | None = None
    passage_id: int | None = None
    key: str = ""  # "path:<source name>:<path>", "item:<source id>:<path>" or "url:<url>"


def _our_hosts() -> set[str]:
    hosts = {h.lower().lstrip(".") for h in settings.ALLOWED_HOSTS if h and h != "*"}
    base = getattr(settings, "LODE_BASE_URL", "") or ""
    if base:
        hosts.add((urlsplit(base).hostname or "").lower())
    return hosts - {""}


def _page_target(context: _Context, path: str) -> _Target | None:
    """A lode page named by `path`, if the author may see it; None when the path is not a
    document page, `_Target()` (missing) when it is one they cannot see or that is gone."""
    try:
        match = resolve(path)
    except Resolver404:
        return None
    names = _PAGE_VIEWS.get(match.view_name)
    if names is None:
        return None
    document_key, version_key = names
    document_id = match.kwargs.get(document_key)
    if not _live(context.space_ids).filter(pk=document_id).exists():
        return _Target(key=f"page:{path}")
    version_id = match.kwargs.get(version_key) if version_key else None
    if (
        version_id is not None
        and not Version.objects.filter(pk=version_id, document_id=document_id).exists()
    ):
        return _Target(key=f"page:{path}")
    passage_id = match.kwargs.get("passage_id")
    if (
        passage_id is not None
        and not Passage.objects.filter(pk=passage_id, version_id=version_id).exists()
    ):
        return _Target(key=f"page:{path}")
    return _Target(document_id, version_id, passage_id)


def _mirrored(context: _Context, url: str) -> _Target:
    """The external a URL source mirrors at `url` (the author must see it)."""
    from externals.models import Source, SourceItem

    item = (
        SourceItem.objects.filter(
            path=url,
            source__kind=Source.Kind.URL,
            document__space_id__in=sorted(context.space_ids),
            document__deleted_at__isnull=True,
        )
        .order_by("document_id")
        .values_list("document_id", flat=True)
        .first()
    )
    return _Target(document_id=item, key=f"url:{url}")


def _relative(context: _Context, target: str) -> _Target | None:
    """A relative path between imported notes, or between the files of one source."""
    from externals.models import SourceItem

    path = unquote(target)
    document = context.document
    item = None
    if document.kind == Document.Kind.EXTERNAL:
        item = SourceItem.objects.filter(document=document).select_related("source").first()
    if item is not None:
        if item.source.kind == item.source.Kind.URL:
            return _mirrored(context, urldefrag(urljoin(item.path, target))[0])
        # Inside a folder, "/x.md" is from the folder's root, "x.md" from the file's folder.
        base = "" if path.startswith("/") else posixpath.dirname(item.path)
        resolved = posixpath.normpath(posixpath.join(base, path.lstrip("/")))
        if resolved.startswith("../"):
            return None
        found = (
            SourceItem.objects.filter(
                source=item.source, path=resolved, document__deleted_at__isnull=True
            )
            .values_list("document_id", flat=True)
            .first()
        )
        return _Target(document_id=found, key=f"item:{item.source_id}:{resolved}")
    if document.kind != Document.Kind.NOTE or not document.external_key:
        return None
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(document.external_key), path))
    if resolved.startswith("../"):
        return None
    found = (
        _live(context.space_ids)
        .filter(
            kind=Document.Kind.NOTE,
            source_name=document.source_name,
            external_key=resolved,
        )
        .order_by("pk")
        .values_list("pk", flat=True)
        .first()
    )
    return _Target(document_id=found, key=f"path:{document.source_name}:{resolved}")


def _markdown_target(context: _Context, target: str) -> _Target | None:
    """What a Markdown link's target names; None when it is not an edge at all (a web page
    nobody mirrors, an e-mail address, an anchor)."""
    parts = urlsplit(target)
    scheme = parts.scheme.lower()
    if scheme in _SKIPPED_SCHEMES:
        return None
    if scheme in {"http", "https"}:
        if (parts.hostname or "").lower() in _our_hosts():
            return _page_target(context, parts.path or "/")
        found = _mirrored(context, urldefrag(target)[0])
        return found if found.document_id is not None else None
    if scheme or parts.netloc:
        return None
    if not parts.path or not any(ch.isalnum() for ch in parts.path):
        return None  # "[x](+)" in an abstract's text is not a link to a file named "+"
    if context.document.kind == Document.Kind.EXTERNAL:
        # A mirrored file's links are relative to where it was mirrored from, never to lode.
        return _relative(context, parts.path)
    if parts.path.startswith("/"):
        return _page_target(context, parts.path)
    return _relative(context, parts.path)


def _markdown_edges(context: _Context, links: list[Link]) -> list[Edge]:
    edges = []
    for link in links:
        if link.rule != MARKDOWN_RULE:
            continue
        target = _markdown_target(context, link.target)
        if target is None or target.document_id == context.document.pk:
            continue
        edges.append(
            _edge(
                context,
                Edge.Kind.LINKS_TO,
                MARKDOWN_RULE,
                to_document_id=target.document_id,
                to_version_id=target.version_id,
                to_passage_id=target.passage_id,
                resolution=(
                    Edge.Resolution.RESOLVED
                    if target.document_id is not None
                    else Edge.Resolution.MISSING
                ),
                target=link.target[:1000],
                target_key=target.key[:500],
                label=link.label[:500],
                start=link.start,
                end=link.end,
            )
        )
    return edges


# --- mentions, containment, annotations -----------------------------------------------------


def _batches(items: Sequence[str], *, limit: int = 0) -> Iterable[Sequence[str]]:
    """`items` in slices that fit one statement's parameters beside `limit` others."""
    size = max(100, min(connection.features.max_query_params or 5000, 5000) - 50 - limit)
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _mention_edges(context: _Context, links: list[Link], linked: set[int]) -> list[Edge]:
    body = context.version.body
    known = context.titles.keys if context.titles is not None else None
    candidates = mention_candidates(
        body, skip=[(link.start, link.end) for link in links], known=known
    )
    keys = set(candidates)
    keys.discard(context.document.title_key)
    titles = _resolve_titles(context, keys)
    edges = []
    for key in sorted(titles, key=lambda k: candidates[k]):
        resolution, target, _ = _pick(context, titles[key])
        if resolution != Edge.Resolution.RESOLVED or target is None or target in linked:
            continue
        linked.add(target)
        start, end = candidates[key]
        edges.append(
            _edge(
                context,
                Edge.Kind.MENTIONS,
                MENTION_RULE,
                to_document_id=target,
                target=body[start:end][:1000],
                target_key=key,
                label=body[start:end][:500],
                start=start,
                end=end,
            )
        )
    return edges


def _contains_edges(context: _Context) -> list[Edge]:
    from externals.models import SourceItem

    if context.document.kind != Document.Kind.EXTERNAL:
        return []
    edges = []
    for item in SourceItem.objects.filter(document=context.document).select_related("source"):
        edges.append(
            Edge(
                origin_id=context.document.pk,
                kind=Edge.Kind.CONTAINS,
                from_source_id=item.source_id,
                to_document_id=context.document.pk,
                to_version_id=context.version.pk,
                target=item.path[:1000],
                label=item.source.name[:500],
                rule=CONTAINS_RULE,
                rule_version=RULE_VERSION,
                basis={"source_kind": item.source.kind, "path": item.path[:1000]},
            )
        )
    return edges


def _annotation_edges(context: _Context) -> list[Edge]:
    from externals.models import Annotation

    if context.document.trust_tier != TrustTier.ANNOTATION:
        return []  # an annotation's note always has the annotation tier
    annotation = Annotation.objects.filter(note_document=context.document).first()
    if annotation is None:
        return []
    return [
        Edge(
            origin_id=context.document.pk,
            kind=Edge.Kind.ANNOTATES,
            from_document_id=context.document.pk,
            from_version_id=context.version.pk,
            to_document_id=annotation.document_id,
            to_version_id=annotation.version_id,
            target=annotation.quote[:1000],
            rule=ANNOTATION_RULE,
            rule_version=RULE_VERSION,
            basis={
                "annotation": annotation.pk,
                "start": annotation.start,
                "end": annotation.end,
                "status": annotation.status,
            },
        )
    ]


# --- deriving and writing -------------------------------------------------------------------


def _contexts(documents: Sequence[Document], titles: TitleIndex | None) -> list[_Context]:
    """What deriving each live document needs, read for all of them in three queries."""
    live = [d for d in documents if d.deleted_at is None and d.head_id is not None]
    versions = Version.objects.in_bulk([d.head_id for d in live])
    passages: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    rows = (
        Passage.objects.filter(version_id__in=list(versions), is_head=True)
        .order_by("version_id", "start", "pk")
        .values_list("version_id", "start", "end", "pk")
    )
    for version_id, start, end, pk in rows:
        passages[version_id].append((start, end, pk))
    authors = {versions[d.head_id].created_by_id or d.owner_id for d in live}
    spaces: dict[int, set[int]] = defaultdict(set)
    for user_id, space_id in Membership.objects.filter(user_id__in=authors).values_list(
        "user_id", "space_id"
    ):
        spaces[user_id].add(space_id)
    contexts = []
    for document in live:
        version = versions[document.head_id]
        author = version.created_by_id or document.owner_id
        contexts.append(
            _Context(
                document=document,
                version=version,
                space_ids=frozenset(spaces[author] | {document.space_id}),
                passages=passages[version.pk],
                titles=titles,
            )
        )
    return contexts


def _derive(context: _Context) -> list[Edge]:
    links = find_links(context.version.body)
    edges = _wiki_edges(context, links) + _markdown_edges(context, links)
    linked = {edge.to_document_id for edge in edges if edge.to_document_id is not None}
    edges += _mention_edges(context, links, linked)
    edges += _contains_edges(context)
    edges += _annotation_edges(context)
    return edges


def derive_edges(document: Document) -> list[Edge]:
    """The edges `document`'s head version gives now, unsaved; none for a deleted document.
    `related` edges are not derived here (they need the vectors; `related.py`)."""
    return [edge for context in _contexts([document], None) for edge in _derive(context)]


def derive_many(documents: Sequence[Document]) -> list[Edge]:
    """`derive_edges` for many documents: the same edges, with the reads done once for all
    (from `TITLE_INDEX_FROM` documents on, every title of their authors' spaces is loaded
    once instead of looked up per document)."""
    contexts = _contexts(documents, None)
    if len(contexts) >= TITLE_INDEX_FROM:
        spaces = frozenset().union(*(context.space_ids for context in contexts))
        titles = title_index(spaces)
        contexts = [replace(context, titles=titles) for context in contexts]
    return [edge for context in contexts for edge in _derive(context)]


# The fields that make two edges the same edge (health compares these).
EDGE_FIELDS = (
    "kind",
    "from_document_id",
    "from_version_id",
    "from_source_id",
    "to_document_id",
    "to_version_id",
    "to_passage_id",
    "resolution",
    "target",
    "target_key",
    "label",
    "rule",
    "rule_version",
    "passage_id",
    "start",
    "end",
)


def edge_signature(edge: Edge) -> tuple:
    """What makes an edge this edge, comparable between a stored row and a derived one
    (choices as their plain values: a derived edge holds the enum, a loaded one the str)."""
    values = (getattr(edge, name) for name in EDGE_FIELDS)
    return tuple(value.value if isinstance(value, Enum) else value for value in values)


def _write(documents: Sequence[Document], *, changed: bool) -> int:
    """Replace the derived edges of `documents`. `changed`: their content or state changed
    (not only what they link to), so their `related` edges, computed from the old content,
    go too, both ways; the worker computes new ones once the new passages have vectors."""
    ids = [d.pk for d in documents]
    Edge.objects.filter(origin_id__in=ids).exclude(kind=Edge.Kind.RELATED).delete()
    if changed:
        Edge.objects.filter(kind=Edge.Kind.RELATED).filter(
            Q(from_document_id__in=ids) | Q(to_document_id__in=ids)
        ).delete()
    edges = derive_many(documents)
    Edge.objects.bulk_create(edges, batch_size=500)
    return len(edges)


def _reverse_candidates(
    documents: Sequence[Document], old_keys: Iterable[str], *, scan_mentions: bool
) -> set[int]:
    """Other documents whose edges may change when these documents appear, change title,
    move or go: those linking to them (resolved or by title, path or URL) and those whose
    text holds one of their titles (mentions)."""
    from externals.models import Source, SourceItem

    ids = {d.pk for d in documents}
    # One save re-derives at most MAX_REVERSE_DOCUMENTS others; a batch (an import) that many
    # per document it writes, so notes linking forward to later batches resolve.
    limit = MAX_REVERSE_DOCUMENTS * len(documents)
    keys = {d.title_key for d in documents} | set(old_keys)
    keys.discard("")
    path_keys = {
        f"path:{d.source_name}:{d.external_key}"
        for d in documents
        if d.kind == Document.Kind.NOTE and d.external_key
    }
    for item in SourceItem.objects.filter(document_id__in=ids).select_related("source"):
        if item.source.kind == Source.Kind.URL:
            path_keys.add(f"url:{item.path}")
        else:
            path_keys.add(f"item:{item.source_id}:{item.path}")
    origins = set(
        Edge.objects.filter(Q(to_document_id__in=ids) | Q(target_key__in=sorted(keys | path_keys)))
        .exclude(kind__in=[Edge.Kind.CONTAINS, Edge.Kind.RELATED])
        .values_list("origin_id", flat=True)
        .distinct()[:limit]
    )
    if scan_mentions:
        origins |= _mentioning_documents(documents, limit=limit)
    return origins - ids


def _mentioning_documents(documents: Sequence[Document], *, limit: int | None) -> set[int]:
    """Other documents whose head text holds the title of one of `documents` (one substring
    scan of the head passages per mentionable title; at most `limit` per title)."""
    ids = {d.pk for d in documents}
    found: set[int] = set()
    for document in documents:
        if document.deleted_at is None and mentionable(document.title_key):
            phrase = " ".join(document.title.split())
            rows = (
                Passage.objects.filter(is_head=True, text__icontains=phrase)
                .exclude(document_id__in=ids)
                .values_list("document_id", flat=True)
                .distinct()
            )
            found.update(rows if limit is None else rows[:limit])
    return found


def refresh_edges(
    document_ids: Iterable[int],
    *,
    reverse: bool = True,
    scan_mentions: bool = True,
    changed: bool = True,
    old_keys: Iterable[str] = (),
) -> int:
    """Replace the stored edges of these documents with what their head versions give now
    (none for a deleted one), and — with `reverse` — re-derive the other documents whose
    edges depend on them (`old_keys`: titles they had before this change). `scan_mentions`
    also looks through other documents' text for these titles (one substring scan per
    document: bulk loaders skip it, health and repair catch up). `changed`: the documents
    themselves changed (new head, deleted, restored), so their `related` edges go too.
    Runs in the caller's transaction and appends one `GraphGeneration`; returns the edges
    written.

    A document another transaction holds locked (it is being saved right now) is skipped
    here and refreshed after this transaction commits, so two saves never wait on each
    other's rows (SQLite has one writer at a time anyway).
    """
    ids = sorted(set(document_ids))
    if not ids:
        return 0
    with transaction.atomic():
        documents = list(Document.objects.filter(pk__in=ids).order_by("pk"))
        written = _write(documents, changed=changed)
        count = len(documents)
        if reverse:
            others = _reverse_candidates(documents, old_keys, scan_mentions=scan_mentions)
            others = sorted(others)[: MAX_REVERSE_DOCUMENTS * len(documents)]
            locked = list(
                Document.objects.select_for_update(skip_locked=True)
                .filter(pk__in=others)
                .order_by("pk")
            )
            written += _write(locked, changed=False)
            count += len(locked)
            skipped = set(others) - {d.pk for d in locked}
            if skipped:
                transaction.on_commit(lambda: _refresh_later(sorted(skipped)))
        GraphGeneration.objects.create(documents=count)
    return written


def refresh_mentioning(document_ids: Iterable[int], *, batch: int = 200) -> int:
    """Re-derive every document whose head text mentions the title of one of these
    documents, `batch` documents per transaction, and return the edges written. A bulk
    loader writes its documents' edges without this scan (`refresh_edges(scan_mentions=
    False)`) and queues it as a background task (`sync.scan_title_mentions`), so earlier
    notes that mention a new title gain their `mentions` edge once the worker runs it.
    These documents themselves are not re-derived: they were derived together, in one
    transaction that saw each other's titles."""
    documents = list(Document.objects.filter(pk__in=set(document_ids)).order_by("pk"))
    others = sorted(_mentioning_documents(documents, limit=None))
    written = 0
    for i in range(0, len(others), batch):
        written += refresh_edges(others[i : i + batch], reverse=False, changed=False)
    return written


def _refresh_later(document_ids: list[int]) -> None:
    try:
        refresh_edges(document_ids, reverse=False, changed=False)
    except Exception:  # derived data: health reports the drift, repair rebuilds it
        logger.exception("could not re-derive the edges of documents %s", document_ids)


def current_generation() -> int:
    """The graph generation this transaction sees (0 before any edge was written)."""
    last = GraphGeneration.objects.order_by("-pk").values_list("pk", flat=True).first()
    return last or 0


def build_all_edges(*, batch: int = 200, only_if_never_built: bool = False) -> int | None:
    """Derive the edges of every live document, `batch` documents per transaction (an
    install upgraded to a lode with the graph, or after a rule changed). Returns the edges
    written, or None when `only_if_never_built` and a graph generation already exists."""
    if only_if_never_built and GraphGeneration.objects.exists():
        return None
    ids = list(
        Document.objects.filter(deleted_at__isnull=True, head__isnull=False)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    written = 0
    for i in range(0, len(ids), batch):
        written += refresh_edges(ids[i : i + batch], reverse=False, changed=False)
    if not ids:
        GraphGeneration.objects.create(documents=0)
    return written
