"""Whether the claims an ask showed are enough for what its plan expected (pure): the plan's
"enough when", checked once the gate has decided. A list wants two or more claims, a
comparison or a connection claims from two notes or more, a number or a date a claim that
holds one; anything else one claim. Said on the answer page under *Advanced*, never used to
hide a claim."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from retrieval.plan.narrowing import MONTH_NAMES
from retrieval.plan.rules import (
    INTENT_COMPARISON,
    INTENT_DATE,
    INTENT_LIST,
    INTENT_NUMBER,
    INTENT_RELATIONAL,
)
from retrieval.text.tokens import NUMBER_IN_TEXT_RE

_DAY_WORDS = (
    "monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday "
    "daily weekly monthly yearly annually noon midnight morning evening"
)
DATE_WORD_RE = re.compile(
    r"\b(?:" + "|".join([*MONTH_NAMES, *_DAY_WORDS.split()]) + r")\b", re.IGNORECASE
)


def enough_for(intent: str, shown: Sequence[tuple[str, Collection[int]]]) -> tuple[bool, str]:
    """(enough, why) for `shown`: each shown claim's text and the documents it cites."""
    documents = {document for _, cited in shown for document in cited}
    if intent == INTENT_LIST:
        return len(shown) >= 2, f"{len(shown)} verified claim(s) for a list"
    if intent in (INTENT_COMPARISON, INTENT_RELATIONAL):
        return len(documents) >= 2, f"claims from {len(documents)} note(s); two sides need two"
    if intent == INTENT_NUMBER:
        held = any(NUMBER_IN_TEXT_RE.search(text) for text, _ in shown)
        return held, "a claim holds a number" if held else "no shown claim holds a number"
    if intent == INTENT_DATE:
        held = any(NUMBER_IN_TEXT_RE.search(text) or DATE_WORD_RE.search(text) for text, _ in shown)
        return held, "a claim holds a date or time" if held else "no claim holds a date or time"
    return bool(shown), f"{len(shown)} verified claim(s)"
