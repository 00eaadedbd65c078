"""An LLM's refinement of a rules plan (pure): the JSON schema it answers in, and applying a
reply to a plan. Any field the reply leaves null keeps the rules' value; a reply that breaks
the schema's meaning (an unknown intent, a period that ends before it starts) raises
`RefinementInvalid` and the caller keeps the rules plan, saying so. The request itself is made
by `retrieval.answer.plan_refine` (the answer layer owns the model client and egress).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from typing import Any

from retrieval.plan.narrowing import Cues, Narrowing, Period
from retrieval.plan.plan import RetrievalPlan
from retrieval.plan.rules import INTENT_RULES, INTENTS, LINKS_FOLLOW, LINKS_RULE

MAX_NAMES = 5
MAX_TEXT = 200

_NULLABLE_TEXT = {"type": ["string", "null"], "maxLength": MAX_TEXT}
_NAMES = {
    "type": ["array", "null"],
    "items": {"type": "string", "maxLength": MAX_TEXT},
    "maxItems": MAX_NAMES,
}
REFINE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["intent", "answer_shape", "links", "period_start", "period_end", "tags", "notes"],
    "properties": {
        "intent": {"type": ["string", "null"], "enum": [*INTENTS, None]},
        "answer_shape": _NULLABLE_TEXT,
        "links": {"type": ["string", "null"], "enum": [LINKS_FOLLOW, LINKS_RULE, None]},
        "period_start": {"type": ["string", "null"], "maxLength": 10},
        "period_end": {"type": ["string", "null"], "maxLength": 10},
        "tags": _NAMES,
        "notes": _NAMES,
    },
}

REFINE_SYSTEM_PROMPT = (
    "You refine a search plan for a question over a person's notes. Reply with one JSON "
    "object. intent: one of " + ", ".join(INTENTS) + ", or null to keep the plan's. "
    "answer_shape: the kind of answer expected in a few words, or null. links: 'follow' when "
    "the answer needs notes linked from the first ones found, 'rule' to leave it to the "
    "default, or null. period_start / period_end: ISO dates (end exclusive) when the question "
    "is about a date or period, else null. tags and notes: tag names and note titles the "
    "question names, else null. Never invent names the question does not contain."
)


class RefinementInvalid(ValueError):
    """A model reply that cannot refine a plan; the message says why."""


def _date(value: Any, name: str) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise RefinementInvalid(f"{name} {value!r} is not an ISO date") from None


def _in_question(names: Any, asked: str, strip: str = "") -> tuple[str, ...]:
    """The names of `names` (a list or None) that the folded question `asked` holds."""
    kept: list[str] = []
    for name in names or ():
        folded = " ".join(str(name).lstrip(strip).casefold().split())
        if folded and folded in asked:
            kept.append(folded)
    return tuple(dict.fromkeys(kept))


def refine_message(question: str, plan: RetrievalPlan) -> str:
    """The user message: the question and the rules' plan, in the fields the reply uses."""
    return (
        f"Question: {question}\n"
        f"Today: {plan.today.isoformat()}\n"
        f"Rules plan: intent={plan.intent}; answer_shape={plan.shape}; links={plan.links}; "
        f"period={plan.narrowing.cues.period.as_dict() if plan.narrowing.cues.period else None}; "
        f"tags={list(plan.narrowing.cues.tags)}; notes={list(plan.narrowing.cues.notes)}"
    )


def apply_refinement(
    plan: RetrievalPlan, reply: dict[str, Any], question: str
) -> tuple[RetrievalPlan, list[str]]:
    """(the refined plan, the names of the fields the reply changed). The narrowing's cues
    change, not what they resolved to: the caller resolves them again for the asker. A tag
    or note title the question's words do not hold is left out (the model may not invent
    what to narrow to)."""
    if not isinstance(reply, dict):
        raise RefinementInvalid("the reply is not an object")
    changed: list[str] = []
    refined = replace(plan, refined=[], notes=list(plan.notes))
    intent = reply.get("intent")
    if intent is not None:
        if intent not in INTENTS:
            raise RefinementInvalid(f"unknown intent {intent!r}")
        if intent != plan.intent:
            refined.intent = intent
            row = next((r for r in INTENT_RULES if r.intent == intent), None)
            if row is not None and reply.get("answer_shape") is None:
                refined.shape, refined.enough = row.shape, row.enough
            changed.append("intent")
    shape = reply.get("answer_shape")
    if isinstance(shape, str) and shape.strip() and shape.strip() != plan.shape:
        refined.shape = " ".join(shape.split())[:MAX_TEXT]
        changed.append("answer shape")
    links = reply.get("links")
    if links is not None:
        if links not in (LINKS_FOLLOW, LINKS_RULE):
            raise RefinementInvalid(f"unknown links value {links!r}")
        # The user's Follow links choice wins over the model's.
        users_choice = plan.follow_links is not None and plan.links != LINKS_FOLLOW
        if not users_choice and links != plan.links:
            refined.links = links
            refined.follow_links = True if links == LINKS_FOLLOW else None
            changed.append("links")
    cues = plan.narrowing.cues
    start = _date(reply.get("period_start"), "period_start")
    end = _date(reply.get("period_end"), "period_end")
    period = cues.period
    if start is not None or end is not None:
        if start is None or end is None or end <= start:
            raise RefinementInvalid("a period needs a start before its end")
        period = Period(start, end, cues.period.words if cues.period else "the model's period")
        if period != cues.period:
            changed.append("period")
    asked = " ".join(question.casefold().split())
    tags = cues.tags
    named_tags = _in_question(reply.get("tags"), asked, strip="#")
    if named_tags and named_tags != cues.tags:
        tags = named_tags
        changed.append("tags")
    notes = cues.notes
    named_notes = _in_question(reply.get("notes"), asked)
    if named_notes and named_notes != cues.notes:
        notes = named_notes
        changed.append("notes")
    refined.narrowing = Narrowing(
        cues=Cues(notes=notes, tags=tags, spaces=cues.spaces, sources=cues.sources, period=period)
    )
    refined.refined = changed
    return refined, changed
