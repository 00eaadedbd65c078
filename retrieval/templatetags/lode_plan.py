"""The retrieval plan of a stored answer in words (templates/ask/_plan.html, under
*Advanced*). Plain strings, auto-escaped by the template: nothing is marked safe."""

from __future__ import annotations

from django import template

from retrieval.answer.trace import Trace
from retrieval.models import AskTrace
from retrieval.plan.words import plan_lines

register = template.Library()


@register.filter
def retrieval_plan_lines(row: AskTrace | None) -> list[str]:
    """The plan `row`'s trace recorded, one sentence a line; empty when it recorded none (an
    answer stored before plans, or one that stopped before planning)."""
    if not isinstance(row, AskTrace):
        return []
    plan = Trace.from_row(row).plan
    return plan_lines(plan) if plan is not None else []
