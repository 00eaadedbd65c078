"""Cited answers over the API: the same `ask()` and `read_stored_answer()` the answer page
calls (retrieval/web/ask_views.py explains the permalink), with the same input checks
(`AskForm`) and the same authentication as every endpoint (session with CSRF, or a bearer
token; see lode_site/api.py).

    POST /api/ask             {question, pinned_document_id?, mode?, space?, follow_links?}
                              → the answer + permalink
    GET  /api/ask/{trace_id}  a stored answer; someone else's is a 404, like a missing one

A stored answer shows a claim only while the caller may see every document it cites
(`stored_view.read_stored_answer`): otherwise the claim (or closest passage, conflicting
value) is `hidden`, its text the one sentence saying so, and nothing of the document is in
the response.
"""

from __future__ import annotations

from typing import Any, Literal

from django.conf import settings
from django.http import HttpRequest
from ninja import Field, Router, Schema, Status
from pydantic import StrictBool

from lode_site.api_bodies import NOT_BLANK_TEXT, BodySchema
from lode_site.errors import NO_ACCESS
from lode_site.ids import DbId
from retrieval.answer.ask import ask
from retrieval.answer.stored_view import read_stored_answer
from retrieval.answer.trace import Trace
from retrieval.eligibility import visible_answers
from retrieval.links import permalink_path
from retrieval.models import AskTrace
from retrieval.web.forms import AskForm
from retrieval.web.search_api import ExpansionOut, expansion_out

router = Router(tags=["ask"])


class AskIn(BodySchema):
    question: str = Field(
        max_length=settings.LODE_MAX_QUERY_CHARS,
        pattern=NOT_BLANK_TEXT,
        description="The question: not blank, at most LODE_MAX_QUERY_CHARS characters.",
    )
    pinned_document_id: DbId | None = Field(
        None,
        description='"Ask about this note": every head passage of this document of yours is '
        "given to the answerer first, uncapped, then normal retrieval.",
    )
    mode: Literal["hybrid", "lexical", "semantic"] | None = Field(
        None, description="Search mode: hybrid (default) | lexical | semantic."
    )
    space: int | None = Field(
        None,
        description="Ask in this space (an id from GET /api/spaces): only its documents are "
        "evidence and its members may open the stored answer. Default: across all your "
        "spaces, the answer private to you. A space you are not a member of is a 404.",
    )
    follow_links: StrictBool | None = Field(
        None,
        description="Graph expansion: true follows links from the top hits' documents one "
        "hop and adds the linked passages that best match the question to the evidence; "
        "false never does; absent or null, the graph discipline rule decides. A value that "
        "is not a JSON boolean is a 422.",
    )


class SegmentOut(Schema):
    text: str
    highlighted: bool = Field(description="True for the verified quoted span.")


class SupportOut(Schema):
    """A verified span, pinned to a stored version."""

    version_id: int
    version_number: int
    document_id: int
    document_title: str
    kind: str
    trust_tier: str
    quoted_span: str
    offset_unit: str = "unicode_code_point"
    start: int = Field(description="Start of the span in the version body (code points).")
    end: int = Field(description="End (exclusive) in the version body (code points).")
    segments: list[SegmentOut] = Field(
        description="The span in its context as ordered text pieces (the span highlighted). "
        "Render each piece as text, never as markup."
    )
    evidence_url: str = Field(
        description='Opens the passage holding the span, re-verified; "" when no single '
        "passage holds it."
    )
    version_created_at: str


class ClaimOut(Schema):
    text: str
    support: list[SupportOut]
    hidden: bool = Field(
        False,
        description="True when the caller may no longer see a document the claim cites: "
        "`text` then says so and `support` is empty.",
    )


class WithheldOut(Schema):
    document_id: int
    version_id: int
    document_title: str


class ChoiceOut(Schema):
    """An ASK_CLARIFYING suggestion: ask `question` (with `pinned_document_id`, if set)."""

    label: str
    question: str = Field(description="The rewritten question to ask if this is chosen.")
    pinned_document_id: int | None = Field(
        None, description='Ask it about this document first ("ask about this note").'
    )


class ClosestOut(Schema):
    """A passage that came closest to an abstained question. It does not answer it."""

    passage_id: int
    document_id: int
    version_id: int
    version_number: int
    document_title: str
    kind: str
    trust_tier: str
    heading_path: list[str]
    snippet: str = Field(description="A short plain-text excerpt; render as text.")
    evidence_url: str = Field(description='Opens the passage re-verified; "" if it is gone.')
    hidden: bool = Field(
        False,
        description="True when the caller may no longer see the passage's document: every id "
        "is then 0 and `snippet` says so.",
    )


class AskOut(Schema):
    """One answer. `decision`: ANSWER | ABSTAIN_NO_EVIDENCE | ASK_CLARIFYING |
    ANSWER_WITH_CONFLICTS. `tier`: what the answer page leads with. `claims` are only those
    the faithfulness gate verified; `dropped` lists the others with the step that failed them
    (the best match among them). A non-empty `error` means the answerer failed and nothing is
    verified."""

    question: str
    decision: str
    tier: Literal["answer", "best_match", "not_in_notes"] | None = Field(
        None,
        description="answer: verified claims answer the question; best_match: none did, and "
        "`best_match` is the verified sentence that came closest — to be checked, not an "
        "answer; not_in_notes: nothing to show but the `closest` passages. null when the "
        "question was sent back for clarification or the answerer failed.",
    )
    answerer: str
    claims: list[ClaimOut]
    best_match: ClaimOut | None = Field(
        None,
        description="tier best_match: a claim that passed the faithfulness checks (verbatim, "
        "coupling, entailment) but not the relevance check, with its verified spans. Not a "
        "confirmed answer.",
    )
    dropped: list[dict[str, Any]]
    withheld: list[WithheldOut] = Field(
        description="Documents present in the evidence but withheld from cloud synthesis."
    )
    clarifying_questions: list[str]
    clarifying_choices: list[ChoiceOut] = Field(
        [], description="ASK_CLARIFYING: the suggestions as rewritten questions to ask."
    )
    closest: list[ClosestOut] = Field(
        [],
        description="ABSTAIN_NO_EVIDENCE: the passages that came closest (they do not "
        "answer the question).",
    )
    conflicts: list[dict[str, Any]]
    message: str
    error: str
    notes: list[str]
    trace_id: int | None
    permalink: str = Field(
        description="The stored answer's page: members of the space it was asked in may open "
        "it (only the asker, when asked across all their spaces)."
    )
    space: int | None = Field(None, description="The space asked in (null: all of yours).")
    stale: bool = Field(
        False,
        description="A stored answer: true when a note version it quotes is no longer its "
        "note's current version (the notes changed since; ask again for a fresh answer).",
    )
    expansion: ExpansionOut | None = Field(
        None,
        description="Graph expansion: whether links were followed, the rule that decided and "
        "the linked passages added to the evidence (null for answers stored before it).",
    )


class ErrorOut(Schema):
    detail: str


def _out(
    request: HttpRequest, data: dict[str, Any], expansion: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The response: `data` with its permalink and graph expansion (`expansion` as the caller
    may see it, else the stored trace's, for an answer just asked)."""
    data["permalink"] = (
        request.build_absolute_uri(permalink_path(data["trace_id"])) if data["trace_id"] else ""
    )
    data["expansion"] = (
        expansion_out(expansion) if expansion is not None else _expansion(data["trace_id"])
    )
    return data


def _expansion(trace_id: int | None) -> ExpansionOut | None:
    """The stored trace's graph expansion (the caller already may see the trace)."""
    if not trace_id:
        return None
    row = AskTrace.objects.filter(pk=trace_id).first()
    return expansion_out(Trace.from_row(row).expansion) if row is not None else None


@router.post("", response={200: AskOut, 400: ErrorOut, 404: ErrorOut, 503: ErrorOut})
def ask_endpoint(request: HttpRequest, payload: AskIn):
    """Ask a question over your notes. Every ask stores its answer and trace; `permalink`
    and `GET /api/ask/{trace_id}` return it later, unchanged. A blank or too long question
    or an unknown mode is a 422; a `pinned_document_id` that is not one of your documents
    is a 404. An ask that runs past its time budget (LODE_ASK_BUDGET_SECONDS; the answer
    model's network wait does not count) is stopped: 503 with `detail` and no answer stored.
    The answer is bounded: the verified claims (each quoted span with a short context) and
    the dropped ones, never the evidence pack."""
    fields = payload.dict()
    fields["space"] = "" if fields.get("space") is None else str(fields["space"])
    form = AskForm(fields, user=request.auth)
    if not form.is_valid():
        missing = form.has_error("pinned_document_id", "no_such_document") or form.has_error(
            "space", "no_such_space"
        )
        status = 404 if missing else 400
        return Status(status, ErrorOut(detail=form.first_error()))
    data = form.cleaned_data
    outcome = ask(
        user=request.auth,
        question=data["question"],
        pinned_document_id=data["pinned_document_id"],
        mode=data["mode"],
        space_id=data["space"],
        follow_links=payload.follow_links,
    )
    return Status(200, _out(request, {**outcome.as_dict(), "space": data["space"]}))


@router.get("/{id:trace_id}", response={200: AskOut, 404: ErrorOut})
def stored_answer_endpoint(request: HttpRequest, trace_id: DbId):
    """A stored answer, exactly as it was given (nothing is re-run): for members of the space
    it was asked in, or its asker when asked across all their spaces; 404 otherwise. A claim
    citing a document the caller may no longer see is `hidden` (the module docstring)."""
    trace = visible_answers(request.auth.pk).filter(pk=trace_id).first()
    if trace is None:
        return Status(404, ErrorOut(detail=NO_ACCESS))
    stored = read_stored_answer(trace, user_id=request.auth.pk)
    data = {**stored.outcome.as_dict(), "space": trace.space_id, "stale": stored.stale}
    return Status(200, _out(request, data, stored.expansion))
