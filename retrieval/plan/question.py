"""What a question asks for (pure): its content words, its kind (count, time, person, place,
reason, or the X of *which/what X*), its intent (a procedure or a decision) and its named things.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from retrieval.text.stemming import fold, surface_stems
from retrieval.text.tokens import NAMED_IDENTIFIER_RE, WORD_RE
from retrieval.words.answer_types import (
    COUNT_FOCUS_WORDS,
    PERSON_FOCUS_WORDS,
    PLACE_FOCUS_WORDS,
    REASON_FOCUS_WORDS,
    TIME_FOCUS_WORDS,
)
from retrieval.words.question_words import (
    ASKERS,
    AUXILIARIES,
    DECISION_QUESTION_WORDS,
    DO_AUXILIARIES,
    HOW_NUMBER,
    HOW_TIME,
    PHRASE_END_WORDS,
    PROCEDURE_AUXILIARIES,
    WH_WORDS,
)
from retrieval.words.stopwords import (
    EXTRACTIVE_STOPWORDS,
    QUESTION_FILLER_WORDS,
    RELEVANCE_FILLER_WORDS,
)

KIND_COUNT = "count"
KIND_TIME = "time"
KIND_PERSON = "person"
KIND_PLACE = "place"
KIND_REASON = "reason"
KIND_FOCUS = "focus"  # which/what X: the X must be there; no answer type beyond that
TYPED_KINDS = frozenset({KIND_COUNT, KIND_TIME, KIND_PERSON, KIND_PLACE, KIND_REASON})

_VERB_ENDING_RE = re.compile(r"..(?:ed|ing)$")
# The X of "what/which X" that asks for a number, a time, a person, a place or a reason.
FOCUS_KIND = {
    **dict.fromkeys(COUNT_FOCUS_WORDS, KIND_COUNT),
    **dict.fromkeys(TIME_FOCUS_WORDS, KIND_TIME),
    **dict.fromkeys(PERSON_FOCUS_WORDS, KIND_PERSON),
    **dict.fromkeys(PLACE_FOCUS_WORDS, KIND_PLACE),
    **dict.fromkeys(REASON_FOCUS_WORDS, KIND_REASON),
}

# What an open question wants when it has no answer type: the steps of a procedure ("how do I
# promote the replica", "how to roll back") or a decision taken ("what did we decide about
# backups"). Neither is an answer *type* a sentence can show by itself, so each has its own pair
# of features (the question's intent, and whether the candidate looks like what it wants).
INTENT_PROCEDURE = "procedure"
INTENT_DECISION = "decision"


@lru_cache(maxsize=1)
def stop_stems() -> frozenset[str]:
    """The words (as typed and as index stems) that are never a question's content words."""
    words = EXTRACTIVE_STOPWORDS | QUESTION_FILLER_WORDS | RELEVANCE_FILLER_WORDS
    return frozenset(words | {fold(w) for w in words})


@dataclass(frozen=True)
class QuestionProfile:
    """What a question asks for: its content words ((surface, stem) pairs, unique by stem, in
    order), its kind (one of the KIND_* names, or "" for an open or yes/no question), its
    focus stems (the X of *which/what X*, or the counted thing of *how many X*; empty when
    none) and its named things (`named_things`)."""

    content: tuple[tuple[str, str], ...]
    kind: str = ""
    focus: tuple[str, ...] = ()
    named: frozenset[str] = frozenset()
    intent: str = ""  # INTENT_PROCEDURE, INTENT_DECISION or "" (see `question_intent`)

    @property
    def content_stems(self) -> tuple[str, ...]:
        return tuple(stem for _, stem in self.content)


def _noun_phrase(surfaces: list[str], start: int) -> list[int]:
    """Indexes of the noun phrase starting at `start` (skipping auxiliaries and articles),
    up to the first word that ends a phrase; at most three words."""
    i = start
    while i < len(surfaces) and surfaces[i] in AUXILIARIES:
        i += 1
    phrase: list[int] = []
    while i < len(surfaces) and surfaces[i] not in PHRASE_END_WORDS and len(phrase) < 3:
        if phrase and _VERB_ENDING_RE.search(surfaces[i]):
            break  # "how many people *donated* …": the verb ends the phrase
        phrase.append(i)
        i += 1
    return phrase


def question_profile(question: str) -> QuestionProfile:
    """The question's content words, kind and focus (pure)."""
    words = surface_stems(question)
    stop = stop_stems()
    surfaces = [surface for surface, _ in words]
    kind, focus_at = _kind(surfaces)
    intent = question_intent(surfaces, kind)
    seen: set[str] = set()
    content: list[tuple[str, str]] = []
    for i, (surface, stem) in enumerate(words):
        if i and words[i - 1][0] == "how" and surface in HOW_NUMBER | HOW_TIME:
            continue  # "how *long*", "how *often*": the question's type, not its topic
        if intent == INTENT_DECISION and surface in DECISION_QUESTION_WORDS:
            continue  # "what did we *decide* about backups": the intent, not the topic
        if stem and stem not in stop and surface not in stop and stem not in seen:
            seen.add(stem)
            content.append((surface, stem))
    focus = tuple(words[i][1] for i in focus_at if words[i][1] not in stop)
    if kind == KIND_FOCUS and not focus:
        kind = ""
    return QuestionProfile(
        content=tuple(content),
        kind=kind,
        focus=focus,
        named=named_things(question),
        intent=intent,
    )


def question_intent(surfaces: Sequence[str], kind: str) -> str:
    """INTENT_DECISION when an open or which/what question names deciding ("what did we decide
    about X", "what was the outcome on X"); INTENT_PROCEDURE for "how do/can/should I|we|you
    X" and "how to X"; "" otherwise (pure)."""
    if kind in ("", KIND_FOCUS) and any(word in DECISION_QUESTION_WORDS for word in surfaces):
        return INTENT_DECISION
    at = next((i for i, word in enumerate(surfaces) if word in WH_WORDS), None)
    if kind or at is None or surfaces[at] != "how":
        return ""
    following = surfaces[at + 1 : at + 3]
    if following[:1] == ["to"]:
        return INTENT_PROCEDURE
    if len(following) == 2 and following[0] in PROCEDURE_AUXILIARIES and following[1] in ASKERS:
        return INTENT_PROCEDURE
    return ""


def _kind(surfaces: list[str]) -> tuple[str, list[int]]:
    """(kind, indexes of the focus words) from the first wh-word of the question."""
    at = next((i for i, word in enumerate(surfaces) if word in WH_WORDS), None)
    if at is None:
        return "", []
    wh = surfaces[at]
    following = surfaces[at + 1] if at + 1 < len(surfaces) else ""
    if wh == "how":
        if following in ("many", "much"):
            phrase = _noun_phrase(surfaces, at + 2)
            return KIND_COUNT, phrase[-1:] if phrase else []
        if following in HOW_NUMBER:
            return KIND_COUNT, []
        if following in HOW_TIME:
            return KIND_TIME, []
        return "", []  # "how do I …": a method; no answer type to check
    if wh == "when":
        return KIND_TIME, []
    if wh in ("who", "whom", "whose"):
        return KIND_PERSON, []
    if wh == "where":
        return KIND_PLACE, []
    if wh == "why":
        return KIND_REASON, []
    # what / which: the noun phrase after it names what is asked for.
    if following in DO_AUXILIARIES:
        return "", []
    phrase = _noun_phrase(surfaces, at + 1)
    if not phrase:
        return "", []
    head = phrase[-1]
    for i in [head, *phrase[:-1]]:  # the head noun's kind first ("database engineers": person)
        kind = FOCUS_KIND.get(surfaces[i]) or FOCUS_KIND.get(surfaces[i].removesuffix("s"))
        if kind is not None:
            return kind, [head]
    return KIND_FOCUS, [head]


def named_things(question: str) -> frozenset[str]:
    """The question's named things, case-folded: identifiers ("db-2", "16.4", "nginx.conf"),
    and words after the first that are capitalised or hold a digit ("Redis", "SEV1")."""
    nfkc = unicodedata.normalize("NFKC", question)
    found = {m.group(0).casefold() for m in NAMED_IDENTIFIER_RE.finditer(nfkc)}
    for i, m in enumerate(WORD_RE.finditer(nfkc)):
        word = m.group(0)
        folded = word.casefold()
        if i == 0 or folded in WH_WORDS or folded in AUXILIARIES:
            continue
        if (word[0].isupper() or any(c.isdigit() for c in word)) and not any(
            folded in item for item in found
        ):
            found.add(folded)
    return frozenset(found)
