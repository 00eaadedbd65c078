"""The restricted graph query over the API: the same `graph_query.answer`
the `/graph/query` page runs.

    POST /api/graph/query   {"lookups": [...], "query": {...}, "space": <id>?}

The body is read and validated by `retrieval.search.graph_query` itself (pydantic, strict,
`extra="forbid"`), not by Ninja, so every refusal of its shape — an unknown kind, an extra
property, more hops, a malformed parameter — is a 422 whose `detail` is one clear sentence
(a model writing queries can act on it). A well-formed query whose seed is not among the
documents its lookups found is a 404 with such a sentence. A body that is not JSON, or
nests deeper than the API reads (`lode_site.api_bodies`), is a 400; a space the user is not
a member of is a 404, as everywhere in the API.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Field, Router, Schema, Status

from lode_site.api_bodies import JsonBodyRefused, integral_floats_as_ints, parse_json_body
from lode_site.errors import NO_ACCESS
from retrieval.eligibility import NoAccess, audience_for
from retrieval.search import graph_query
from retrieval.search.graph_query import QUERY_JSON_SCHEMA, GraphQueryError, UnknownSeed

router = Router(tags=["graph"])


class ErrorOut(Schema):
    detail: str


class CandidateOut(Schema):
    lookup: str
    lookup_index: int
    document_id: int
    title: str
    kind: str
    match: str = Field(description='How the lookup found it: "title", "path" or "search".')
    url: str
    excerpt: str


class NodeOut(Schema):
    type: str = Field(description='"document", or "source" (the from end of `contains`).')
    id: int
    title: str
    kind: str
    tier: str
    url: str


class RowOut(Schema):
    edge_id: int
    kind: str
    inferred: bool = Field(description="An inferred edge (mentions, related): lowest trust.")
    from_: NodeOut = Field(alias="from")
    to: NodeOut
    label: str
    basis: dict[str, Any] = Field(
        description="How the edge was established: rule, rule_version, inferred, and where "
        "(version_id, the version_number people see, passage_id, span in code points) or "
        "its score."
    )
    tier: str = Field(description="The edge's trust tier.")
    hop: int
    direction: str = Field(
        default="forward",
        description='"forward": the hop went from the edge\'s `from` end to its `to` end (a '
        'neighbour "out", or a path along the link\'s arrow); "backward": against it.',
    )


class GraphEvidenceOut(Schema):
    row: int = Field(description="The index of the row this excerpt supports.")
    document_id: int
    version_id: int
    passage_id: int
    title: str
    text: str = Field(description="Plain text; render as text.")
    start: int = Field(description="Where `text` starts in the passage text (code points).")
    end: int
    truncated: bool
    more_after: bool = Field(description="The passage goes on after `text`.")
    evidence_url: str = Field(description="Opens the passage re-verified against its hash.")
    tier: str


class GraphOut(Schema):
    query: dict[str, Any] = Field(description="The query as executed (defaults explicit).")
    parameters: dict[str, Any] = Field(description="The lookups, space, bounds and tie rule.")
    generation: int = Field(description="The graph generation the query ran on.")
    candidates: list[CandidateOut]
    nodes: list[NodeOut]
    rows: list[RowOut]
    truncated: bool
    message: str
    evidence: list[GraphEvidenceOut]
    evidence_chars: int
    elapsed_ms: float


_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": QUERY_JSON_SCHEMA}},
    }
}


@router.post(
    "/query",
    response={200: GraphOut, 400: ErrorOut, 404: ErrorOut, 422: ErrorOut},
    openapi_extra=_BODY,
    by_alias=True,  # a row's ends are "from" and "to"
    summary="Run a restricted graph query",
)
def graph_query_endpoint(request: HttpRequest):
    """One-hop neighbours of a seed, or the bounded shortest path between two seeds; the
    seeds must be among the documents the `lookups` discover. At most 20 rows and 4
    evidence excerpts (2,400 characters in all), on one graph generation."""
    try:
        # The API's depth limit, too; `516.0` is the integer JSON Schema says it is.
        raw = integral_floats_as_ints(parse_json_body(request.body or b"null"))
    except JsonBodyRefused as exc:
        return Status(400, ErrorOut(detail=str(exc)))
    try:
        parsed = graph_query.parse(raw)
        audience = audience_for(request.user.pk, space_id=parsed.space)
        result = graph_query.answer(audience, raw)
    except UnknownSeed as exc:
        return Status(404, ErrorOut(detail=exc.message))
    except GraphQueryError as exc:
        return Status(422, ErrorOut(detail=exc.message))
    except NoAccess:
        return Status(404, ErrorOut(detail=NO_ACCESS))
    return Status(200, result.as_dict())
