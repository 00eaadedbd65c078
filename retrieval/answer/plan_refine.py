"""The chat model's refinement of the rules plan (`retrieval.plan.refine`), asked only when the
ask's answerer is a remote chat model: the question (redacted by the client, with an egress
row committed first) and the rules' plan go out, a JSON object in `REFINE_SCHEMA` comes back.
A failed request or a reply that cannot refine keeps the rules plan and says so in the plan's
notes; nothing else of the ask changes."""

from __future__ import annotations

import logging

from django.contrib.auth.models import AbstractBaseUser

from retrieval.answer.llm import ChatClient, LLMError
from retrieval.eligibility import Audience
from retrieval.plan.plan import RetrievalPlan, resolved
from retrieval.plan.refine import (
    REFINE_SCHEMA,
    REFINE_SYSTEM_PROMPT,
    RefinementInvalid,
    apply_refinement,
    refine_message,
)

logger = logging.getLogger("lode.ask")

KEPT_RULES_PLAN = "The model's plan refinement was not used ({why}): the rules' plan was kept."


def refined_plan(
    plan: RetrievalPlan,
    question: str,
    *,
    client: ChatClient,
    user: AbstractBaseUser,
    audience: Audience,
) -> RetrievalPlan:
    """`plan` refined by the model behind `client`, its narrowing resolved again for
    `audience`; `plan` itself (with a note saying why) when the model fails or its reply
    cannot refine it."""
    messages = [
        {"role": "system", "content": REFINE_SYSTEM_PROMPT},
        {"role": "user", "content": refine_message(question, plan)},
    ]
    try:
        reply, _, _ = client.complete_json(
            messages=messages,
            schema=REFINE_SCHEMA,
            schema_name="retrieval_plan",
            user=user,
            purpose="qa",
            items=[],
            redaction_count=0,
            withheld_count=0,
        )
    except LLMError as exc:
        logger.warning("plan refinement failed: %s", exc)
        plan.notes.append(KEPT_RULES_PLAN.format(why=str(exc)))
        return plan
    return with_refinement(
        plan, reply, question, model=client.model or client.host, audience=audience
    )


def with_refinement(
    plan: RetrievalPlan, reply: object, question: str, *, model: str, audience: Audience
) -> RetrievalPlan:
    """`plan` with a model's `reply` applied (replay applies a stored reply the same way)."""
    try:
        refined, _ = apply_refinement(plan, reply, question)  # type: ignore[arg-type]
    except RefinementInvalid as exc:
        plan.notes.append(KEPT_RULES_PLAN.format(why=str(exc)))
        return plan
    refined.refined_by = model
    refined.refinement = dict(reply)  # type: ignore[call-overload]
    return resolved(refined, audience)
