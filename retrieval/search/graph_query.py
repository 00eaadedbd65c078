"""The restricted graph query: discovery, the validator, the executor and
evidence hydration — what `POST /api/graph/query`, the `/graph/query` page and questions in
words (where a model writes the `query` part) all call.

The query language is deliberately small (seeds/fidelity-graph-retrieval.md, "A Small Model
with a Specific Job"): a JSON object, validated strictly (`extra="forbid"` everywhere, no
type coercion), of exactly this shape — `QUERY_JSON_SCHEMA` below is its JSON schema::

    {"lookups": ["<title or path or words>", ... 1 to 3],
     "query": {"op": "neighbours", "seed": <document id>, "direction": "out" | "in",
               "kind": "links_to" | "contains" | "annotates" | "mentions" | "related"}
            | {"op": "path", "from": <document id>, "to": <document id>,
               "max_hops": 1..4, "kinds": [<kind>, ...]   (default: the declared kinds),
               "follow": "both" | "out"   (default "both": links in either direction)},
     "space": <space id, optional>}

`answer()` runs four steps, each a function with its own rules: `discover` turns lookups into
candidate documents the audience may see; `validate` checks the shape and that every seed is
a discovered candidate (never a free id); `run` reads the edges on one graph generation,
with eligibility on both ends, so a path never passes through a document the user cannot see;
`_hydrate` attaches bounded, verified evidence. The result (`GraphResult.as_dict()`) carries
the query, its bounds and tie rule, the generation, the candidates, the nodes and rows — each
edge with its kind, basis and trust tier (inferred edges at the bottom), and which way it was
followed (`direction`: "forward" along its arrow, "backward" against it) — and the evidence.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Q
from django.urls import reverse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic import ValidationError as PydanticValidationError

from notes.models import Document, Version, title_key
from retrieval import links
from retrieval.eligibility import Audience
from retrieval.index.edges import current_generation
from retrieval.models import Edge, Passage
from retrieval.search.graph_read import (
    ALL_KINDS,
    DECLARED_KINDS,
    basis_of,
    edge_tier,
    resolved_edges,
)

MAX_LOOKUPS = 3
MAX_LOOKUP_CHARS = 200
LOOKUP_PATTERN = r"^\s*[^\s\x00][^\x00]*$"
CANDIDATES_PER_LOOKUP = 4
MAX_HOPS = 4
MAX_ROWS = 20
MAX_EVIDENCE = 4
# Document ids are bigint primary keys; a larger number is refused by the schema itself.
MAX_DOCUMENT_ID = 2**63 - 1
EVIDENCE_BUDGET = 2400
# Below this an excerpt says too little to be worth its link; the budget is then spent.
MIN_EXCERPT = 40
# Documents per `IN (...)` when a BFS level is read (SQLite's bound-parameter limit).
_BATCH = 900

TIE_RULE = (
    "breadth-first; each level expanded in ascending document id, neighbours visited in "
    "ascending id; a document's parent is the first expanded document that reached it; "
    "between two documents the edge of the first kind in declared-first order, then one "
    "followed forward before one followed backward, then the lowest edge id"
)
FOLLOW_BOTH, FOLLOW_OUT = "both", "out"
FORWARD, BACKWARD = "forward", "backward"

_KINDS = tuple(str(kind) for kind in ALL_KINDS)
_DECLARED = [str(kind) for kind in DECLARED_KINDS]

# The JSON schema of a query request, written out (helper D hands the `query` part of it,
# `QUERY_JSON_SCHEMA["properties"]["query"]`, to a model as its output schema).
# tests/retrieval/search/test_graph_query.py checks it accepts and refuses what the validator does.
QUERY_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "lode graph query",
    "type": "object",
    "additionalProperties": False,
    "required": ["lookups", "query"],
    "properties": {
        "lookups": {
            "description": "Titles, paths or words naming the documents the query starts "
            "from; each is looked up (exact title, exact path, then search).",
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_LOOKUPS,
            "items": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_LOOKUP_CHARS,
                # Not blank; no NUL (PostgreSQL text cannot hold one).
                "pattern": LOOKUP_PATTERN,
            },
        },
        "query": {
            "oneOf": [
                {
                    "type": "object",
                    "description": "One-hop neighbours of a discovered document.",
                    "additionalProperties": False,
                    "required": ["op", "seed", "direction", "kind"],
                    "properties": {
                        "op": {"const": "neighbours"},
                        "seed": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_DOCUMENT_ID,
                            "description": "The document id of a discovered candidate.",
                        },
                        "direction": {
                            "enum": ["out", "in"],
                            "description": "out: what the seed links to; in: what links "
                            "to the seed.",
                        },
                        "kind": {"enum": list(_KINDS)},
                    },
                },
                {
                    "type": "object",
                    "description": "Shortest path between two discovered documents, along "
                    "links in either direction (or, with follow: out, only along their arrows).",
                    "additionalProperties": False,
                    "required": ["op", "from", "to"],
                    "properties": {
                        "op": {"const": "path"},
                        "from": {"type": "integer", "minimum": 1, "maximum": MAX_DOCUMENT_ID},
                        "to": {"type": "integer", "minimum": 1, "maximum": MAX_DOCUMENT_ID},
                        "max_hops": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_HOPS,
                            "default": MAX_HOPS,
                        },
                        "kinds": {
                            "type": "array",
                            "minItems": 1,
                            "uniqueItems": True,
                            "items": {"enum": list(_KINDS)},
                            "default": _DECLARED,
                        },
                        "follow": {
                            "enum": [FOLLOW_BOTH, FOLLOW_OUT],
                            "default": FOLLOW_BOTH,
                            "description": "both: a hop may go against a link's arrow (each "
                            "row says which way it went); out: only from the linking document.",
                        },
                    },
                },
            ]
        },
        "space": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": MAX_DOCUMENT_ID,
            "description": "Only this space's documents (one of yours).",
        },
    },
}


class GraphQueryError(ValueError):
    """A query refused: `message` says why, in words a person (or a model) can act on."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnknownSeed(GraphQueryError):
    """A well-formed query whose seed is not among the documents its lookups found (the
    API answers 404: the query names a document it cannot start from)."""


# --- the validator's model -------------------------------------------------------------------

Kind = Literal["links_to", "contains", "annotates", "mentions", "related"]
DocumentId = Annotated[int, Field(ge=1, le=MAX_DOCUMENT_ID)]
Lookup = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True,
        min_length=1,
        max_length=MAX_LOOKUP_CHARS,
        pattern=r"^[^\x00]*$",
    ),
]
_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


class NeighboursQuery(BaseModel):
    model_config = _STRICT
    op: Literal["neighbours"]
    seed: DocumentId
    direction: Literal["out", "in"]
    kind: Kind

    def seeds(self) -> list[int]:
        return [self.seed]


class PathQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=False)
    op: Literal["path"]
    from_: DocumentId = Field(alias="from")
    to: DocumentId
    max_hops: Annotated[int, Field(ge=1, le=MAX_HOPS)] = MAX_HOPS
    kinds: Annotated[list[Kind], Field(min_length=1, max_length=len(_KINDS))] = Field(
        default_factory=lambda: list(_DECLARED)
    )
    follow: Literal["both", "out"] = FOLLOW_BOTH

    def seeds(self) -> list[int]:
        return [self.from_, self.to]


class GraphQueryIn(BaseModel):
    model_config = _STRICT
    lookups: Annotated[list[Lookup], Field(min_length=1, max_length=MAX_LOOKUPS)]
    query: Annotated[NeighboursQuery | PathQuery, Field(discriminator="op")]
    space: DocumentId | None = None


@dataclass(frozen=True)
class ValidQuery:
    """A query that passed `validate`: its parsed form, and the seeds it may start from."""

    request: GraphQueryIn
    candidate_ids: frozenset[int]

    @property
    def query(self) -> NeighboursQuery | PathQuery:
        return self.request.query

    def query_dict(self) -> dict[str, Any]:
        """The query as executed (defaults made explicit), in the request's own spelling."""
        return self.query.model_dump(by_alias=True)


def _where(location: tuple) -> str:
    parts = [str(p) for p in location]
    # A tagged union reports the tag ("neighbours"/"path") as a location step: drop it.
    if len(parts) > 2 and parts[0] == "query" and parts[1] in ("neighbours", "path"):
        del parts[1]
    return ".".join(parts) or "the query"


def _message(exc: PydanticValidationError) -> str:
    """Pydantic's errors as one clear sentence per problem."""
    problems = []
    for error in exc.errors(include_url=False):
        where = _where(error["loc"])
        kind = error["type"]
        if kind == "extra_forbidden":
            problems.append(f"{where}: unknown property (allowed: see the query schema)")
        elif kind == "missing":
            problems.append(f"{where}: required")
        elif kind in ("literal_error", "union_tag_invalid"):
            problems.append(f"{where}: {error['msg']}")
        elif kind == "union_tag_not_found":
            problems.append(f'{where}: needs "op": "neighbours" or "path"')
        elif where.endswith("max_hops") and kind in ("less_than_equal", "greater_than_equal"):
            problems.append(f"{where}: a path has 1 to {MAX_HOPS} hops")
        elif where == "lookups" and kind == "too_long":
            problems.append(f"lookups: at most {MAX_LOOKUPS}")
        elif where.startswith("lookups.") and kind == "string_too_short":
            problems.append(f"{where}: a lookup must not be empty")
        elif where == "lookups" and kind == "too_short":
            problems.append("lookups: at least one is needed")
        else:
            problems.append(f"{where}: {error['msg']}")
    return "Invalid graph query — " + "; ".join(problems) + "."


def parse(raw: object) -> GraphQueryIn:
    """The request's shape checked (no seed check yet: that needs the candidates)."""
    if not isinstance(raw, dict):
        raise GraphQueryError("Invalid graph query — it must be a JSON object.")
    try:
        return GraphQueryIn.model_validate(raw)
    except PydanticValidationError as exc:
        raise GraphQueryError(_message(exc)) from None


def validate(raw: object, candidates: Sequence[Candidate]) -> ValidQuery:
    """`raw` checked in full: its shape (`parse`), then every seed among the discovered
    candidates' document ids — an id a model made up, or one the user may not see, is refused
    the same way. Raises `GraphQueryError` with what is wrong, in words."""
    request = parse(raw)
    query = request.query
    if isinstance(query, PathQuery) and len(set(query.kinds)) != len(query.kinds):
        raise GraphQueryError("Invalid graph query — query.kinds: a kind is repeated.")
    allowed = frozenset(c.document_id for c in candidates)
    for name, seed in _named_seeds(request.query):
        if seed not in allowed:
            offered = ", ".join(str(i) for i in sorted(allowed)) or "none"
            raise UnknownSeed(
                f"Invalid graph query — query.{name}: {seed} is not one of the documents "
                f"the lookups found (candidates: {offered}). Seeds must come from discovery."
            )
    return ValidQuery(request=request, candidate_ids=allowed)


def _named_seeds(query: NeighboursQuery | PathQuery) -> list[tuple[str, int]]:
    if isinstance(query, NeighboursQuery):
        return [("seed", query.seed)]
    return [("from", query.from_), ("to", query.to)]


# --- discovery --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A document a lookup found: how (`match`: "title", "path" or "search"), its identity
    and a short excerpt (what a model choosing seeds is shown)."""

    lookup: str
    lookup_index: int
    document_id: int
    title: str
    kind: str
    match: str
    url: str
    excerpt: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


EXCERPT_CHARS = 160


def _live(audience: Audience):
    return Document.objects.filter(
        space_id__in=audience.sorted_space_ids, deleted_at__isnull=True, head__isnull=False
    )


def _by_path(audience: Audience, lookup: str) -> list[int]:
    from externals.models import SourceItem

    ids = set(
        _live(audience)
        .filter(Q(external_key=lookup) | Q(head__source_path=lookup))
        .values_list("pk", flat=True)
    )
    ids.update(
        SourceItem.objects.filter(
            path=lookup,
            document__in=_live(audience),
            source__space_id__in=audience.sorted_space_ids,
        ).values_list("document_id", flat=True)
    )
    return sorted(ids)


def _by_search(audience: Audience, lookup: str, limit: int) -> list[tuple[int, str]]:
    from retrieval.search.pipeline import search

    user = get_user_model().objects.get(pk=audience.user_id)
    result = search(
        user=user, audience=audience, query=lookup, highlight=False, show_weaker=False, limit=20
    )
    found: list[tuple[int, str]] = []
    for hit in result.hits:
        if all(hit.passage.document_id != seen for seen, _ in found):
            found.append((hit.passage.document_id, hit.passage.text))
        if len(found) >= limit:
            break
    return found


def _first_passages(document_ids: Iterable[int]) -> dict[int, str]:
    texts: dict[int, str] = {}
    rows = (
        Passage.objects.filter(document_id__in=sorted(set(document_ids)), is_head=True)
        .order_by("document_id", "position", "pk")
        .values_list("document_id", "text")
    )
    for document_id, text in rows:
        texts.setdefault(document_id, text)
    return texts


def _short(text: str, limit: int = EXCERPT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _add(
    found: list[tuple[int, str, str]], document_id: int, match: str, excerpt: str = ""
) -> None:
    if len(found) < CANDIDATES_PER_LOOKUP and all(d != document_id for d, _, _ in found):
        found.append((document_id, match, excerpt))


def discover(audience: Audience, lookups: Sequence[str]) -> list[Candidate]:
    """The candidates each lookup names, in order: exact title matches (ascending id), then
    exact path matches, then search results (by rank); each document once per lookup and at
    most `CANDIDATES_PER_LOOKUP` per lookup. Only live documents the audience may see. A path
    is an imported note's `external_key`, a version's `source_path` or a source item's path;
    exact paths come before search, so a note that *mentions* `deploy.md` never stands in for
    `deploy.md`."""
    candidates: list[Candidate] = []
    for index, raw_lookup in enumerate(lookups):
        lookup = raw_lookup.strip()
        found: list[tuple[int, str, str]] = []  # (document id, match, excerpt)

        if lookup:
            key = title_key(lookup)
            for pk in (
                _live(audience)
                .filter(title_key=key)
                .order_by("pk")
                .values_list("pk", flat=True)[:CANDIDATES_PER_LOOKUP]
            ):
                _add(found, pk, "title")
            for pk in _by_path(audience, lookup):
                _add(found, pk, "path")
            if len(found) < CANDIDATES_PER_LOOKUP:
                for pk, text in _by_search(audience, lookup, CANDIDATES_PER_LOOKUP):
                    _add(found, pk, "search", text)
        documents = Document.objects.in_bulk([d for d, _, _ in found])
        first = _first_passages(d for d, _, excerpt in found if not excerpt)
        for document_id, match, excerpt in found:
            document = documents[document_id]
            candidates.append(
                Candidate(
                    lookup=lookup,
                    lookup_index=index,
                    document_id=document_id,
                    title=document.title,
                    kind=document.kind,
                    match=match,
                    url=links.document_url(kind=document.kind, document_id=document_id),
                    excerpt=_short(excerpt or first.get(document_id, "")),
                )
            )
    return candidates


# --- execution --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """A vertex of a result: a document, or (the `from` end of `contains`) a source."""

    type: str  # "document" | "source"
    id: int
    title: str
    kind: str  # a document's kind, or a source's kind (folder, upload, url)
    tier: str
    url: str


@dataclass(frozen=True)
class Row:
    """One edge of the result, with its kind, basis and trust tier."""

    edge_id: int
    kind: str
    inferred: bool
    source: Node  # the edge's `from` end
    target: Node  # its `to` end
    label: str
    basis: dict[str, Any]
    tier: str
    hop: int  # 1 for a neighbour; the position along a path
    # FORWARD: the query went from the edge's `from` end to its `to` end (a path's hop along
    # the link's arrow, or a neighbour "out"); BACKWARD: against it.
    direction: str = FORWARD

    @property
    def departs(self) -> Node:
        """The end this hop leaves from (for a path: the document before it)."""
        return self.source if self.direction == FORWARD else self.target

    @property
    def arrives(self) -> Node:
        """The end this hop reaches."""
        return self.target if self.direction == FORWARD else self.source


@dataclass(frozen=True)
class Evidence:
    """A hydrated excerpt: part of one head passage, with its verified-evidence link."""

    row: int  # the index of the row it supports
    document_id: int
    version_id: int
    passage_id: int
    title: str
    text: str
    start: int  # where `text` starts in the passage text (code points)
    end: int
    truncated: bool
    more_after: bool  # the passage goes on after `text` (`start > 0`: it began before)
    evidence_url: str
    tier: str


@dataclass
class GraphResult:
    query: dict[str, Any]
    parameters: dict[str, Any]
    generation: int
    candidates: list[Candidate]
    nodes: list[Node] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    truncated: bool = False
    message: str = ""
    elapsed_ms: float = 0.0

    @property
    def evidence_chars(self) -> int:
        return sum(len(e.text) for e in self.evidence)

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "parameters": self.parameters,
            "generation": self.generation,
            "candidates": [c.as_dict() for c in self.candidates],
            "nodes": [asdict(n) for n in self.nodes],
            "rows": [
                {
                    "edge_id": r.edge_id,
                    "kind": r.kind,
                    "inferred": r.inferred,
                    "from": asdict(r.source),
                    "to": asdict(r.target),
                    "label": r.label,
                    "basis": r.basis,
                    "tier": r.tier,
                    "hop": r.hop,
                    "direction": r.direction,
                }
                for r in self.rows
            ],
            "truncated": self.truncated,
            "message": self.message,
            "evidence": [asdict(e) for e in self.evidence],
            "evidence_chars": self.evidence_chars,
            "elapsed_ms": round(self.elapsed_ms, 2),
        }


def _parameters(valid: ValidQuery) -> dict[str, Any]:
    return {
        "lookups": list(valid.request.lookups),
        "space": valid.request.space,
        "max_rows": MAX_ROWS,
        "max_hops": MAX_HOPS,
        "candidates_per_lookup": CANDIDATES_PER_LOOKUP,
        "evidence_resources": MAX_EVIDENCE,
        "evidence_budget_chars": EVIDENCE_BUDGET,
        "tie_rule": TIE_RULE,
    }


class _Snapshot:
    """One transaction for the whole read: on PostgreSQL REPEATABLE READ, set as its first
    statement, so the generation and every edge come from the same snapshot. Inside a
    caller's transaction (a test, a request wrapped in one) that transaction is the snapshot:
    its isolation level can no longer be changed."""

    def __enter__(self) -> None:
        outer = connection.in_atomic_block
        self._atomic = transaction.atomic()
        self._atomic.__enter__()
        if connection.vendor == "postgresql" and not outer:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")

    def __exit__(self, *exc_info) -> None:
        self._atomic.__exit__(*exc_info)


_EDGE_FIELDS = (
    "id",
    "kind",
    "from_document_id",
    "from_source_id",
    "to_document_id",
    "passage_id",
    "start",
    "end",
    "label",
    "target",
    "rule",
    "rule_version",
    "from_version_id",
    "score",
    "basis",
)


def _edges(audience: Audience):
    return resolved_edges(audience).only(*_EDGE_FIELDS).order_by()


def _kind_rank(kind: str) -> int:
    return _KINDS.index(kind)


def run(audience: Audience, valid: ValidQuery, candidates: Sequence[Candidate]) -> GraphResult:
    """Execute a validated query on one graph generation.

    The generation and the edges are read inside ONE transaction (REPEATABLE READ on
    PostgreSQL, set as its first statement; on SQLite lode's transactions are IMMEDIATE, so
    no write commits while it runs): a save committed during the query is not seen, and the
    answer names the generation it ran on. Edges come from `graph_read.resolved_edges`, with
    eligibility on both ends.
    """
    started = time.perf_counter()
    allowed = {c.document_id for c in candidates} & valid.candidate_ids
    for name, seed in _named_seeds(valid.query):
        if seed not in allowed:  # `validate` refused it already; never trust a caller's object
            raise UnknownSeed(f"query.{name}: {seed} is not a discovered candidate.")
    with _Snapshot():
        generation = current_generation()
        query = valid.query
        if isinstance(query, NeighboursQuery):
            edges, truncated, hops, message = _neighbours(audience, query)
            directions = [FORWARD if query.direction == "out" else BACKWARD] * len(edges)
        else:
            edges, directions, message = _path(audience, query)
            truncated, hops = False, list(range(1, len(edges) + 1))
        nodes, rows = _rows(edges, hops, directions)
        evidence = _hydrate(audience, edges, rows)
    result = GraphResult(
        query=valid.query_dict(),
        parameters=_parameters(valid),
        generation=generation,
        candidates=list(candidates),
        nodes=nodes,
        rows=rows,
        evidence=evidence,
        truncated=truncated,
        message=message,
    )
    result.elapsed_ms = (time.perf_counter() - started) * 1000
    return result


def _neighbours(audience: Audience, query: NeighboursQuery):
    """The edges of one kind out of (or into) the seed, ordered by the other end's id then the
    edge id, at most `MAX_ROWS` (`truncated` says when more exist). `contains` edges start at
    a source: `in` from an external lists the sources that mirror it; `out` is always empty."""
    edges = _edges(audience).filter(kind=query.kind)
    if query.direction == "out":
        edges = edges.filter(from_document_id=query.seed).order_by("to_document_id", "id")
    else:
        edges = edges.filter(to_document_id=query.seed).order_by(
            "from_document_id", "from_source_id", "id"
        )
    found = list(edges[: MAX_ROWS + 1])
    truncated = len(found) > MAX_ROWS
    found = found[:MAX_ROWS]
    message = "" if found else "No edges of this kind in this direction."
    if truncated:
        message = f"Only the first {MAX_ROWS} edges are shown."
    return found, truncated, [1] * len(found), message


def _path(audience: Audience, query: PathQuery) -> tuple[list[Edge], list[str], str]:
    """Bounded breadth-first search; the tie rule is `TIE_RULE`, so among paths of equal
    length the one whose documents have the smallest ids, compared from the start, wins.

    With `follow="both"` a hop may go against an edge's arrow: "how is A connected to B"
    is answered when C links to both. Each edge comes back with the way it was followed
    (FORWARD or BACKWARD), so the page and the API can say so hop by hop.

    The search reads edges as (id, kind, from, to) tuples, one query per end and batch (an OR
    of both ends made SQLite scan), and loads only the path's own edges as rows."""
    start, goal = query.from_, query.to
    if start == goal:
        return [], [], "The two documents are the same: a path of no hops."
    kinds = sorted(set(query.kinds), key=_kind_rank)
    both = query.follow == FOLLOW_BOTH
    fields = ("pk", "kind", "from_document_id", "to_document_id")
    parent: dict[int, tuple[int, int, str]] = {}  # node → (edge id, previous node, direction)
    seen = {start}
    frontier = [start]
    for _level in range(query.max_hops):
        # (here, there) → the rank the tie rule orders by, the edge id and the way followed
        best: dict[tuple[int, int], tuple[tuple[int, int, int], int, str]] = {}
        for i in range(0, len(frontier), _BATCH):
            batch = frontier[i : i + _BATCH]
            members = set(batch)
            edges = _edges(audience).filter(kind__in=kinds)
            found = dict.fromkeys(edges.filter(from_document_id__in=batch).values_list(*fields))
            if both:
                backward = edges.filter(to_document_id__in=batch, from_document_id__isnull=False)
                found.update(dict.fromkeys(backward.values_list(*fields)))
            for pk, kind, source, target in found:
                steps = []
                if source in members:
                    steps.append((source, target, FORWARD))
                if both and target in members:
                    steps.append((target, source, BACKWARD))
                for here, there, way in steps:
                    if there in seen:
                        continue
                    rank = (_kind_rank(kind), 0 if way == FORWARD else 1, pk)
                    held = best.get((here, there))
                    if held is None or rank < held[0]:
                        best[(here, there)] = (rank, pk, way)
        following: list[int] = []
        for here, there in sorted(best):  # ascending parent id, then ascending child id
            if there not in seen:
                seen.add(there)
                _rank, pk, way = best[(here, there)]
                parent[there] = (pk, here, way)
                following.append(there)
        if goal in seen:
            steps_back: list[tuple[int, str]] = []
            node = goal
            while node != start:
                pk, node, way = parent[node]
                steps_back.append((pk, way))
            steps_back.reverse()
            rows = _edges(audience).in_bulk([pk for pk, _ in steps_back])
            return [rows[pk] for pk, _ in steps_back], [way for _, way in steps_back], ""
        if not following:
            break
        frontier = sorted(following)
    along = "in either direction" if both else "along their arrows"
    return [], [], f"No path of at most {query.max_hops} hops along these kinds, {along}."


def _rows(
    edges: list[Edge], hops: list[int], directions: list[str]
) -> tuple[list[Node], list[Row]]:
    from externals.models import Source

    document_ids = {e.from_document_id for e in edges if e.from_document_id} | {
        e.to_document_id for e in edges
    }
    documents = Document.objects.only("id", "title", "kind", "trust_tier").in_bulk(
        sorted(document_ids)
    )
    sources = Source.objects.only("id", "name", "kind", "trust_tier").in_bulk(
        sorted({e.from_source_id for e in edges if e.from_source_id})
    )
    # The basis names the version it was read from by the number people see, not its row id.
    numbers = dict(
        Version.objects.filter(
            pk__in=sorted({e.from_version_id for e in edges if e.from_version_id})
        ).values_list("pk", "number")
    )
    nodes: dict[tuple[str, int], Node] = {}

    def document_node(pk: int) -> Node:
        d = documents[pk]
        return nodes.setdefault(
            ("document", pk),
            Node(
                "document",
                pk,
                d.title,
                d.kind,
                d.trust_tier,
                links.document_url(kind=d.kind, document_id=pk),
            ),
        )

    def source_node(pk: int) -> Node:
        s = sources[pk]
        url = reverse("externals:source", kwargs={"source_id": pk})
        return nodes.setdefault(
            ("source", pk), Node("source", pk, s.name, s.kind, s.trust_tier, url)
        )

    rows = []
    for edge, hop, direction in zip(edges, hops, directions, strict=True):
        if edge.from_document_id is not None:
            source = document_node(edge.from_document_id)
        else:
            source = source_node(edge.from_source_id)
        target = document_node(edge.to_document_id)
        # A source's `contains` edge has the tier of the external it mirrors.
        from_tier = target.tier if source.type == "source" else source.tier
        rows.append(
            Row(
                edge_id=edge.pk,
                kind=edge.kind,
                inferred=edge.inferred,
                source=source,
                target=target,
                label=edge.label or edge.target,
                basis=_numbered(basis_of(edge), numbers),
                tier=edge_tier(edge.kind, from_tier),
                hop=hop,
                direction=direction,
            )
        )
    return list(nodes.values()), rows


def _numbered(basis: dict[str, Any], numbers: dict[int, int]) -> dict[str, Any]:
    number = numbers.get(basis.get("version_id"))  # type: ignore[arg-type]
    return {**basis, "version_number": number} if number is not None else basis


def _window(text: str, start: int | None, end: int | None, size: int) -> tuple[int, int]:
    """The `[a, b)` of `text` to show, at most `size` code points, around `[start, end)`
    (a link's span inside the passage) when there is one, else from the start."""
    if len(text) <= size:
        return 0, len(text)
    if start is None or end is None:
        return 0, size
    middle = (start + end) // 2
    a = max(0, min(middle - size // 2, len(text) - size))
    return a, a + size


def _first_passage_ids(audience: Audience, document_ids: set[int]) -> dict[int, int]:
    """Each document's first head passage (by position), for edges read from no passage."""
    first: dict[int, int] = {}
    if not document_ids:
        return first
    rows = (
        Passage.objects.filter(
            document_id__in=sorted(document_ids),
            is_head=True,
            document__space_id__in=audience.sorted_space_ids,
        )
        .order_by("document_id", "position", "pk")
        .values_list("document_id", "pk")
    )
    for document_id, pk in rows:
        first.setdefault(document_id, pk)
    return first


def _hydrate(audience: Audience, edges: list[Edge], rows: list[Row]) -> list[Evidence]:
    """At most MAX_EVIDENCE distinct passages, EVIDENCE_BUDGET characters in all, in row
    order: the passage the edge was read from, else the first head passage it leads to. Each
    excerpt is cut around the link's span and carries its verified-evidence link (pinned to
    the version's hash, re-verified on opening). The unspent share of one excerpt passes to
    the next."""
    wanted: list[tuple[int, int, int | None, int | None]] = []  # (row, passage, start, end)
    targets = {e.to_document_id for e in edges if e.passage_id is None}
    first = _first_passage_ids(audience, targets)
    chosen: set[int] = set()
    for index, edge in enumerate(edges):
        if edge.passage_id is not None:
            pick = (edge.passage_id, edge.start, edge.end)
        elif edge.to_document_id in first:
            pick = (first[edge.to_document_id], None, None)
        else:
            continue
        if pick[0] in chosen:
            continue
        chosen.add(pick[0])
        wanted.append((index, *pick))
        if len(wanted) == MAX_EVIDENCE:
            break
    passages = (
        Passage.objects.select_related("version", "document")
        .filter(document__space_id__in=audience.sorted_space_ids, is_head=True)
        .in_bulk([p for _, p, _, _ in wanted])
    )
    evidence: list[Evidence] = []
    budget = EVIDENCE_BUDGET
    for slot, (index, pk, start, end) in enumerate(wanted):
        passage = passages.get(pk)
        share = budget // (len(wanted) - slot)
        if passage is None or share < MIN_EXCERPT:
            continue
        # A link's span is in version code points; the passage text starts at passage.start.
        local = (start - passage.start, end - passage.start) if start is not None else (None, None)
        a, b = _window(passage.text, *local, share)
        text = passage.text[a:b]
        budget -= len(text)
        evidence.append(
            Evidence(
                row=index,
                document_id=passage.document_id,
                version_id=passage.version_id,
                passage_id=pk,
                title=passage.document.title,
                text=text,
                start=a,
                end=b,
                truncated=(a, b) != (0, len(passage.text)),
                more_after=b < len(passage.text),
                evidence_url=links.evidence_url(passage),
                tier=passage.document.trust_tier,
            )
        )
    return evidence


def answer(audience: Audience, raw: object) -> GraphResult:
    """The whole query: parse, discover the lookups, validate the seeds, run."""
    request = parse(raw)
    candidates = discover(audience, request.lookups)
    valid = validate(raw, candidates)
    return run(audience, valid, candidates)
