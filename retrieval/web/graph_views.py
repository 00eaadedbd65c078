"""The graph query page, `/graph/query`: the restricted graph query of
`retrieval.search.graph_query` as a form, a result table, the evidence excerpts with their
verified links and a picture of the result.

**Shareable URL.** Everything that decides the result is in the query string:
`lookup` (repeated, up to three), `op` (neighbours | path), `direction`, `kind`, `max_hops`,
`kinds` (repeated, for a path), `seed` and `to` (document ids) and `space`. The page always
offers the canonical URL with every parameter spelled out — the seeds it actually used
included — so a shared link re-runs the same query (for someone who may see the same
documents; the seeds are re-discovered and re-validated on every opening, never trusted).

**Seeds.** As in the API, a seed must be a document the lookups discovered. Without `seed`
the page takes the first candidate of the first lookup; without `to` (a path) the first of
the second lookup. Each candidate is offered as a link that re-runs the query from it.
Anything the validator refuses is shown in an error box with its message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from lode_site.errors import no_access
from lode_site.ids import parse_id
from retrieval.answer.graph_words import WordsError, ask_graph
from retrieval.eligibility import NoAccess, audience_for, member_spaces
from retrieval.links import search_path
from retrieval.models import Edge
from retrieval.search import graph_query
from retrieval.search.backlinks import seeds_neighbourhood
from retrieval.search.graph_query import (
    ALL_KINDS,
    DECLARED_KINDS,
    FORWARD,
    MAX_HOPS,
    MAX_LOOKUP_CHARS,
    MAX_LOOKUPS,
    Candidate,
    GraphQueryError,
    GraphResult,
    Node,
    Row,
)
from retrieval.search.pipeline import DEFAULT_MODE, MODES, search
from retrieval.trust import document_tier_labels, tier_label
from retrieval.web.graph_picture import (
    NARROW,
    PictureEdge,
    PictureNode,
    graph_svg,
    hood_picture_nodes,
)
from retrieval.web.search_views import chosen_space

KINDS = [str(kind) for kind in ALL_KINDS]
# The form's choices: each kind's value and its words ("links to", "mentions (inferred)").
KIND_CHOICES = [(str(kind), str(Edge.Kind(kind).label)) for kind in ALL_KINDS]
DEFAULT_KINDS = [str(kind) for kind in DECLARED_KINDS]

# Each kind read from the hop's first document to its second: along the edge's arrow, and
# against it ("Deploy runbook is linked from Backup runbook").
HOP_WORDS: dict[str, tuple[str, str]] = {
    "links_to": ("links to", "is linked from"),
    "contains": ("contains", "is contained in"),
    "annotates": ("annotates", "is annotated by"),
    "mentions": ("mentions", "is mentioned by"),
    "related": ("is similar to", "is similar to"),
}


@dataclass(frozen=True)
class Step:
    """A result row as the page reads it: from the document the hop leaves to the one it
    reaches, the link's words in that order, and where the link is written."""

    row: Row
    departs: Node
    arrives: Node
    words: str
    forward: bool
    written_in: Node  # the document (or source) whose text holds the link


def steps_of(result: GraphResult) -> list[Step]:
    """The rows in reading order: a path hop by hop (a hop against a link's arrow says so),
    a neighbour from the seed outwards."""
    steps = []
    for row in result.rows:
        forward = row.direction == FORWARD
        along, against = HOP_WORDS.get(row.kind, (row.kind, f"is reached by {row.kind} from"))
        steps.append(
            Step(
                row=row,
                departs=row.departs,
                arrives=row.arrives,
                words=along if forward else against,
                forward=forward,
                written_in=row.source,
            )
        )
    return steps


MAX_QUESTION_ECHO = 500  # characters of the asked question shown back on the page


def _number(value: str | None) -> int | str | None:
    """A URL parameter as the validator should see it: an int when it is one, else the
    text itself (so "abc" is refused as "not a valid integer", not silently dropped)."""
    if value is None or value == "":
        return None
    parsed = parse_id(value)
    if parsed is not None:
        return parsed
    stripped = value.strip()
    if stripped.lstrip("-").isdigit() and len(stripped) <= 20:
        return int(stripped)  # 0 or negative: refused by the validator with its message
    return value


def _first_of(candidates: list[Candidate], lookup_index: int) -> int | None:
    for c in candidates:
        if c.lookup_index == lookup_index:
            return c.document_id
    return None


def query_path(params: dict[str, Any]) -> str:
    """The page's URL for these parameters (lists become repeated parameters)."""
    items: list[tuple[str, str]] = []
    for key in ("lookup", "op", "direction", "kind", "max_hops", "kinds", "seed", "to", "space"):
        value = params.get(key)
        if value is None or value == "":
            continue
        for one in value if isinstance(value, list) else [value]:
            items.append((key, str(one)))
    path = reverse("graph-query")
    return f"{path}?{urlencode(items)}" if items else path


def picture(
    result: GraphResult,
    focus: int | None,
    *,
    viewer_id: int | None,
    width: int = 640,
    height: int = 420,
) -> str:
    """The result graph as SVG (helper A's `graph_svg`, which escapes every string), trust
    tiers in `viewer_id`'s words. A source (the `from` end of `contains`) is drawn under a
    negative id, so it never collides with a document's."""

    def node_id(node) -> int:
        return node.id if node.type == "document" else -node.id

    labels = document_tier_labels(viewer_id, [n.id for n in result.nodes if n.type == "document"])
    nodes = [
        PictureNode(
            id=node_id(n),
            label=n.title,
            url=n.url,
            kind=n.kind if n.type == "document" else "source",
            tier_label=(labels.get(n.id) if n.type == "document" else None)
            or tier_label(n.tier, mine=False),
        )
        for n in result.nodes
    ]
    edges = [
        PictureEdge(
            source=node_id(r.source), target=node_id(r.target), kind=r.kind, inferred=r.inferred
        )
        for r in result.rows
    ]
    return graph_svg(nodes, edges, focus=focus, width=width, height=height) if nodes else ""


@require_GET
def graph_query_page(request: HttpRequest) -> HttpResponse:
    get = request.GET
    lookups = [v.strip() for v in get.getlist("lookup") if v.strip()]
    op = get.get("op") or "neighbours"
    direction = get.get("direction") or "out"
    kind = get.get("kind") or "links_to"
    kinds = get.getlist("kinds") or DEFAULT_KINDS
    max_hops = _number(get.get("max_hops"))
    max_hops = MAX_HOPS if max_hops is None else max_hops
    raw_space = get.get("space", "").strip()
    space_id = parse_id(raw_space) if raw_space and raw_space != "all" else None
    try:
        if raw_space and raw_space != "all" and space_id is None:
            raise NoAccess(raw_space)
        audience = audience_for(request.user.pk, space_id=space_id)
    except NoAccess:
        return no_access(request)

    error = ""
    result: GraphResult | None = None
    candidates: list[Candidate] = []
    seed = _number(get.get("seed"))
    to = _number(get.get("to"))
    if lookups:
        if len(lookups) <= MAX_LOOKUPS and all(len(v) <= MAX_LOOKUP_CHARS for v in lookups):
            candidates = graph_query.discover(audience, lookups)
        if seed is None:
            seed = _first_of(candidates, 0)
        if op == "path" and to is None:
            to = _first_of(candidates, 1)
        if op == "path":
            query: dict[str, Any] = {
                "op": op,
                "from": seed,
                "to": to,
                "max_hops": max_hops,
                "kinds": kinds,
            }
        else:
            query = {"op": op, "seed": seed, "direction": direction, "kind": kind}
        raw: dict[str, Any] = {"lookups": lookups, "query": query}
        if space_id is not None:
            raw["space"] = space_id
        try:
            if seed is None:
                raise GraphQueryError("The first lookup found no document you can see.")
            if op == "path" and to is None:
                raise GraphQueryError(
                    "A path needs a second lookup that finds a document: it is the end."
                )
            valid = graph_query.validate(raw, candidates)
            result = graph_query.run(audience, valid, candidates)
        except GraphQueryError as exc:
            error = exc.message

    params = {
        "lookup": lookups,
        "op": op,
        "direction": direction if op == "neighbours" else "",
        "kind": kind if op == "neighbours" else "",
        "max_hops": max_hops if op == "path" else "",
        "kinds": kinds if op == "path" else [],
        "seed": seed,
        "to": to if op == "path" else "",
        "space": raw_space,
    }
    # Each candidate with the URLs that re-run this query starting (or ending) at it.
    by_lookup = [
        (
            lookup,
            [
                (
                    c,
                    query_path({**params, "seed": c.document_id}),
                    query_path({**params, "to": c.document_id}),
                )
                for c in candidates
                if c.lookup_index == index
            ],
        )
        for index, lookup in enumerate(lookups)
    ]
    # A neighbourhood around its seed; a path on one ring in path order (a focus would put
    # its far end on the seed's other side, its last edge drawn across it).
    focus = seed if op == "neighbours" else None
    return render(
        request,
        "graph/query.html",
        {
            "lookups": [*lookups, "", "", ""][:MAX_LOOKUPS],
            "op": op,
            "direction": direction,
            "kind": kind,
            "kinds_chosen": kinds,
            "max_hops": max_hops,
            "hop_choices": range(1, MAX_HOPS + 1),
            "kind_choices": KIND_CHOICES,
            "space": raw_space,
            "spaces": list(member_spaces(request.user.pk)),
            "seed": seed,
            "to": to,
            "by_lookup": by_lookup,
            "error": error,
            "result": result,
            "steps": steps_of(result) if result else [],
            "picture": picture(result, focus, viewer_id=request.user.pk) if result else "",
            # A phone gets its own layout (lode.css shows one of the two): the wide one
            # scaled to 360 px leaves its labels unreadable.
            "picture_narrow": picture(result, focus, viewer_id=request.user.pk, **NARROW)
            if result
            else "",
            "share_url": request.build_absolute_uri(query_path(params)) if lookups else "",
            # Carried on each evidence link, so the evidence page leads back to this query.
            "back_path": query_path(params),
            # Arrived from a question in words (`graph_ask_page`): what was asked, and whether
            # the rules or the model turned it into this query.
            "question": get.get("asked", "")[:MAX_QUESTION_ECHO],
            "asked_by": get.get("by", "") if get.get("by") in ("rules", "model") else "",
        },
    )


def _empty_page_context(request: HttpRequest) -> dict[str, Any]:
    """The page's form with nothing filled in (for a refused question in words)."""
    return {
        "lookups": ["", "", ""][:MAX_LOOKUPS],
        "op": "neighbours",
        "direction": "out",
        "kind": "links_to",
        "kinds_chosen": DEFAULT_KINDS,
        "max_hops": MAX_HOPS,
        "hop_choices": range(1, MAX_HOPS + 1),
        "kind_choices": KIND_CHOICES,
        "space": request.POST.get("space", ""),
        "spaces": list(member_spaces(request.user.pk)),
        "by_lookup": [],
    }


@require_POST
def graph_ask_page(request: HttpRequest) -> HttpResponse:
    """A graph question in words (`retrieval.answer.graph_words.ask_graph`: the offline rules,
    or the two model stages when an LLM is configured). An answered question redirects to
    the structured query it became — the page then shows it, with a URL to share, run on the
    same candidates; a refusal shows the page with its reason and nothing executed. POST,
    because the model path sends the question off the machine (egress log, time budget)."""
    question = request.POST.get("question", "")
    raw_space = request.POST.get("space", "").strip()
    space_id = parse_id(raw_space) if raw_space and raw_space != "all" else None
    try:
        if raw_space and raw_space != "all" and space_id is None:
            raise NoAccess(raw_space)
        outcome = ask_graph(user=request.user, question=question, space_id=space_id)
    except NoAccess:
        return no_access(request)
    except WordsError as exc:
        return _words_refused(request, question, str(exc))
    if not outcome.answered or outcome.query is None:
        return _words_refused(request, question, outcome.message)
    query = outcome.query
    params: dict[str, Any] = {"lookup": outcome.lookups, "op": query.get("op"), "space": raw_space}
    if query.get("op") == "path":
        params |= {
            "seed": query.get("from"),
            "to": query.get("to"),
            "max_hops": query.get("max_hops"),
            "kinds": query.get("kinds") or [],
        }
    else:
        params |= {
            "seed": query.get("seed"),
            "direction": query.get("direction"),
            "kind": query.get("kind"),
        }
    path = query_path(params)
    separator = "&" if "?" in path else "?"
    return redirect(f"{path}{separator}{urlencode({'asked': question, 'by': outcome.path})}")


def _words_refused(request: HttpRequest, question: str, message: str) -> HttpResponse:
    return render(
        request,
        "graph/query.html",
        {
            **_empty_page_context(request),
            "question": question,
            "words_error": message or "That question could not be answered from the graph.",
        },
        status=200,
    )


MAX_RESULT_SEEDS = 15  # documents of a search drawn as the graph's starting points


@require_GET
def graph_results_page(request: HttpRequest) -> HttpResponse:
    """The graph of a search's results: the documents of its top hits (at most
    `MAX_RESULT_SEEDS`, in rank order) and the documents one link away, with every edge
    between them the user may see (`backlinks.seeds_neighbourhood`). The search runs as the
    search page runs it, without graph expansion: the picture shows the results themselves
    and where their links lead."""
    query = request.GET.get("q", "").strip()
    mode = request.GET.get("mode") or DEFAULT_MODE
    if mode not in MODES:
        mode = DEFAULT_MODE
    try:
        space_id, space = chosen_space(request)
        audience = audience_for(request.user.pk, space_id=space_id)
    except NoAccess:
        return no_access(request)
    hood = None
    error = ""
    seeds: list[int] = []
    if query:
        result = search(
            user=request.user, audience=audience, query=query, mode=mode, follow_links=False
        )
        error = result.error or ""
        for hit in result.hits:
            if hit.passage.document_id not in seeds:
                seeds.append(hit.passage.document_id)
        seeds = seeds[:MAX_RESULT_SEEDS]
        hood = seeds_neighbourhood(audience, seeds) if seeds else None

    def drawn(width: int, height: int) -> str:
        if hood is None:
            return ""
        nodes = hood_picture_nodes(hood, viewer_id=request.user.pk)
        edges = [PictureEdge(e.source, e.target, e.kind, e.inferred) for e in hood.edges]
        return graph_svg(nodes, edges, width=width, height=height)

    hop_of = {node.id: node.hop for node in hood.nodes} if hood else {}
    return render(
        request,
        "graph/results.html",
        {
            "q": query,
            "mode": mode,
            "modes": MODES,
            "space": space,
            "error": error,
            "hood": hood,
            "results": [n for n in hood.nodes if hop_of.get(n.id) == 0] if hood else [],
            "linked": [n for n in hood.nodes if hop_of.get(n.id) == 1] if hood else [],
            "picture": drawn(640, 460),
            "picture_narrow": drawn(**NARROW),
            "search_url": search_path(
                query=query, mode=mode, rerank=settings.LODE_RERANK, space=space
            )
            if query
            else "",
        },
    )
