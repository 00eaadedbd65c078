"""Graph questions in words over the API: a thin shell over
`retrieval.answer.graph_words.ask_graph`, with the same authentication as every endpoint
(session with CSRF, or a bearer token; lode_site/api.py).

    POST /api/graph/ask  {question, space?, inputs?} → the query it became, and its result

A question the rules (offline) or the model cannot turn into a valid query is still a 200:
`answered` is false and `message` says why (the shapes the rules know, the validator's
message, the direction check); nothing was executed. A blank or too long question is a 422;
a space the user is not a member of is a 404, like a missing one.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Field, Router, Schema, Status

from lode_site.api_bodies import NOT_BLANK_TEXT, BodySchema
from lode_site.errors import NO_ACCESS
from retrieval.answer.graph_words import WordsError, ask_graph
from retrieval.eligibility import NoAccess

router = Router(tags=["graph"])


class GraphAskIn(BodySchema):
    question: str = Field(
        max_length=settings.LODE_MAX_QUERY_CHARS,
        pattern=NOT_BLANK_TEXT,
        description='A graph question in words, e.g. "what links to Backup Policy?" or "how '
        'is \\"Restore runbook\\" connected to \\"Deploy\\"?"; at most LODE_MAX_QUERY_CHARS '
        "characters."
    )
    space: int | None = Field(
        None,
        description="Only this space's documents (an id from GET /api/spaces). Default: all "
        "of yours. A space you are not a member of is a 404.",
    )
    inputs: bool = Field(
        False,
        description="Also return the complete (redacted) messages sent to the model, per stage.",
    )


class GraphAskOut(Schema):
    """What the question became. `path`: "rules" (offline patterns) or "model" (the two
    model stages). `answered` false is a refusal (`message` says why; nothing ran). `query` is
    the query as executed — or, when refused, as proposed. `result` is the graph query's
    result (the same as `POST /api/graph/query` returns: generation, rows with kind, basis and
    trust tier, evidence with verified links). `trace` names the prompt version and, per model
    stage, the SHA-256 of the request (as on its egress-log row)."""

    question: str
    path: str
    answered: bool
    message: str
    rule: str = Field(description='The rule shape the question matched ("" if none).')
    lookups: list[str]
    candidates: list[dict[str, Any]]
    withheld: list[dict[str, Any]] = Field(
        description="Candidates present but withheld from the model (no-egress)."
    )
    query: dict[str, Any] | None
    result: dict[str, Any] | None
    trace: dict[str, Any]
    trace_id: int | None = Field(
        default=None, description="The stored trace of this question (the admin shows it)."
    )


class ErrorOut(Schema):
    detail: str


@router.post("", response={200: GraphAskOut, 400: ErrorOut, 404: ErrorOut})
def graph_ask_endpoint(request: HttpRequest, payload: GraphAskIn):
    """Ask the graph a question in words. With a language model configured it proposes
    lookups, the gateway discovers them, it writes a query over the real candidates, and the
    graph query's validator accepts or refuses it; offline, rules read "what links to X",
    "what does X link to", "how is X connected to Y" and the like. Either way only a
    validated query runs, on one graph generation, over documents you may see."""
    try:
        outcome = ask_graph(
            user=request.auth,
            question=payload.question,
            space_id=payload.space,
            inputs=payload.inputs,
        )
    except WordsError as exc:
        return Status(400, ErrorOut(detail=str(exc)))
    except NoAccess:
        return Status(404, ErrorOut(detail=NO_ACCESS))
    return Status(200, outcome.as_dict())
