"""What a claim shows (pure, lexical cues, not a parse): its answer types (a number, a time, a
person, a place, a reason), whether it reads as a step or records a decision, whether a number
sits near a word, and whether a question's named thing is in it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from retrieval.answer.time_expressions import TIME_RE
from retrieval.plan.question import (
    KIND_COUNT,
    KIND_PERSON,
    KIND_PLACE,
    KIND_REASON,
    KIND_TIME,
)
from retrieval.text.stemming import fold, surface_stems
from retrieval.text.tokens import NAMED_IDENTIFIER_RE, NUMBER_IN_TEXT_RE, TOKEN_RE
from retrieval.words.answer_types import (
    NUMBER_WORDS,
    PERSON_WORDS,
    PLACE_WORDS,
    REASON_WORDS,
    TIME_WORDS,
)
from retrieval.words.claim_cues import (
    DECISION_CONTEXT_WORDS,
    DECISION_CUE_WORDS,
    IMPERATIVE_VERBS,
)

# A *how many* question's counted thing must sit this close (in tokens) to a number.
NEAR_TOKENS = 4

# A clock time, a year, a date, a quarter, a duration with its unit, or cron.
# An @handle, or two capitalised words in a row (a name).
_PERSON_RE = re.compile(r"(?<![\w@])@[A-Za-z][\w.-]+|\b[A-Z][a-z]+ [A-Z][a-z]+\b")
_PLACE_RE = re.compile(
    r"(?:^|[\s(`'\"])~?/[\w.@-]+(?:/[\w.@-]*)*"  # a path
    r"|\bhttps?://\S+"  # a URL
    r"|\b[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|io|internal|local|lan|dev|cloud|corp|example)\b"
    r"|\b[a-z][\w]*-\d+\b"  # a host name like db-01
    r"|\b(?:in|at|from|to) (?:the )?[A-Z][a-z]+",  # "in Lagos", "at the Berlin office"
)


def stems(text: str) -> frozenset[str]:
    """The index stems of `text` (`retrieval.text.stemming.fold` of every token)."""
    return frozenset(stem for _, stem in surface_stems(text))


def answer_types(text: str) -> frozenset[str]:
    """The answer types present in `text`: "count" (a number), "time" (a time, date, day or
    duration), "person" (a person, @handle or role), "place" (a place, host, path or URL),
    "reason" (a cause). Pure, lexical: a cue, not a parse."""
    nfkc = unicodedata.normalize("NFKC", text)
    surfaces = {m.group(0).casefold() for m in TOKEN_RE.finditer(nfkc)}
    found: set[str] = set()
    if NUMBER_IN_TEXT_RE.search(nfkc) or surfaces & NUMBER_WORDS:
        found.add(KIND_COUNT)
    if TIME_RE.search(nfkc) or surfaces & TIME_WORDS:
        found.add(KIND_TIME)
    if _PERSON_RE.search(nfkc) or surfaces & PERSON_WORDS:
        found.add(KIND_PERSON)
    if _PLACE_RE.search(nfkc) or surfaces & PLACE_WORDS:
        found.add(KIND_PLACE)
    if surfaces & REASON_WORDS:
        found.add(KIND_REASON)
    return frozenset(found)


def is_step(text: str) -> bool:
    """Whether `text` reads as a step of a procedure: it starts with an imperative verb, or
    holds a code span (pure)."""
    if "`" in text:
        return True
    first = TOKEN_RE.search(unicodedata.normalize("NFKC", text))
    return bool(first) and first.group(0).casefold() in IMPERATIVE_VERBS


def is_decision(text: str, context: str) -> bool:
    """Whether `text` (under `context`: title and heading path) records a decision: its heading
    names one, or the sentence says what was decided or changed (pure)."""
    context_words = {m.group(0).casefold() for m in TOKEN_RE.finditer(context)}
    if context_words & DECISION_CONTEXT_WORDS:
        return True
    text_words = {m.group(0).casefold() for m in TOKEN_RE.finditer(text)}
    return bool(text_words & DECISION_CUE_WORDS)


def _is_number(surface: str) -> bool:
    return bool(NUMBER_IN_TEXT_RE.fullmatch(surface)) or surface in NUMBER_WORDS


def number_near(text: str, targets: Iterable[str], window: int = NEAR_TOKENS) -> bool:
    """Whether a number sits within `window` tokens of a token whose stem is in `targets`."""
    wanted = set(targets)
    if not wanted:
        return False
    words = surface_stems(text)
    at_numbers = [i for i, (surface, _) in enumerate(words) if _is_number(surface)]
    at_targets = [i for i, (_, stem) in enumerate(words) if stem in wanted]
    return any(abs(i - j) <= window for i in at_numbers for j in at_targets)


def named_present(item: str, casefolded: str, stems_: frozenset[str]) -> bool:
    if NAMED_IDENTIFIER_RE.fullmatch(item):
        return item in casefolded  # an identifier must occur whole
    return fold(item) in stems_
