"""Answer shape: does a claim hold the *kind of thing* the question asks for?

The relevance scorer (relevance/scoring.py) weighs many cues into one probability, and a near-topic
quote can clear its threshold on shared words alone: *"Which two customers reported missing
notes?"* → "Two customers reported missing notes." (every word is the question's own), *"Who
gets paged when JobQueueBacklog fires?"* → "The alert `JobQueueBacklog` fires when more than
5,000 jobs are ready …" (no one is named). Each of these is a checkable fact about the claim's
own words, so it is checked as a rule with a reason a reader understands, after the score:

* **restates** — a wh-question (or a keyword fragment) whose claim adds no content word to the
  question's: it only says the question back;
* **no answer of the asked type** — *when* / *how often* wants a time, a date, a day or a
  duration, and *when … last / next* one occasion, not a schedule alone; *who* someone beyond
  the question (not a day's name, not "owned"); *how many / how much* a number, and *how
  much* with a money word an amount of money; *how long* an amount with its unit — each
  *beyond* what the question itself says. *Where* has no rule: a place is as often a common
  noun ("near the mill") as a name. Nor must the number of a *how many X* sit next to the X:
  in scientific prose it rarely does;
* **counts instead of naming** — *which X* wants the X named, not counted ("four carriers …");
* **a named thing swapped** — the question names something (`db-2`, a capitalised name, a
  version) that neither the claim nor its heading path nor its document's title mentions;
* **a contrast swapped** — the question says one of a pair (`CONTRAST_PAIRS`: old/new,
  inserts/updates, staging/production, …), the claim the other, and neither it nor its section
  the question's; pairs of directions (`DIRECTION_PAIRS`) count only against a wh-question.

Yes/no questions are exempt from every rule but the named thing ("A slow primary is not a
reason to fail over." answers by restating), and so are statements to check (SciFact's claims:
no question mark, no wh-word or auxiliary first, more than four content words). The rules are
pure and lexical: one that fires wrongly costs an answer (the ask abstains and offers the
closest passages), never lets a false one through. Each is kept only while it removes false
answers at little cost in right ones on the question sets (`bench/answer_shape_rules.py`;
figures in bench/README.md, "Answer shape"); `SHAPE_RULES_VERSION` names the rule set in traces.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence

from retrieval.answer.relevance.candidate import Candidate
from retrieval.answer.relevance.claim_types import is_decision, named_present
from retrieval.answer.relevance.question import (
    INTENT_DECISION,
    KIND_COUNT,
    KIND_FOCUS,
    KIND_PERSON,
    KIND_TIME,
    QuestionProfile,
    question_profile,
    stop_stems,
)
from retrieval.answer.time_expressions import OCCASION_RE, TIME_RE
from retrieval.text.stemming import fold, surface_stems
from retrieval.text.tokens import NAMED_IDENTIFIER_RE, NUMBER_IN_TEXT_RE, TOKEN_RE
from retrieval.words.answer_types import (
    CALENDAR_NAMES,
    COUNTING_WORDS,
    MONEY_NOUNS,
    MONEY_VERBS,
    NUMBER_WORDS,
    OCCASION_WORDS,
    PERSON_WORDS,
    RESPONSIBILITY_WORDS,
    SCHEDULE_WORDS,
    STRONG_TIME_WORDS,
)
from retrieval.words.opposites import CONTRAST_PAIRS, DIRECTION_PAIRS
from retrieval.words.question_words import AUXILIARIES, WH_WORDS, YES_NO_OPENERS

# Recorded with the relevance scorer's version in every ask's trace (`ask.relevance_manifest`),
# so a replay that drops a claim differently says the rules changed.
SHAPE_RULES_VERSION = "4"

# How a drop by these rules begins after "does not answer the question: ".
RESTATES = "it only repeats the question's own words"
NO_TIME = "the question asks when, and it gives no time or date"
NO_PERSON = "the question asks who, and it names no one"
NO_NUMBER = "the question asks how many or how much, and it gives no number"
NO_DURATION = "the question asks how long, and it gives no amount of time or length"
COUNTS_NOT_NAMES = "the question asks which, and it counts them without naming them"
NO_DECISION = "the question asks what was decided, and it records no decision"
CONTRAST = "the question asks about {asked}, and it is about {said}"
NO_MONEY = "the question asks what something costs, and it gives no amount of money"
ONLY_SCHEDULE = "the question asks when it last or next happens, and it gives only how often"

# A query with no wh-word and at most this many content words is a keyword fragment ("Pena
# Palace ticket price"), asked like a question; a longer one is a statement to check (SciFact's
# claims), which a quote confirms by saying it again.
FRAGMENT_WORDS = 4
COUNT_WINDOW = 2  # "four carriers", "three pilot customers": the counting word's reach
_CODE_RE = re.compile(r"`[^`]+`")


def question_words(question: str) -> list[str]:
    """The question's tokens, case-folded, in order (pure)."""
    return [m.group(0).casefold() for m in TOKEN_RE.finditer(question)]


def is_yes_no(question: str, words: Sequence[str] | None = None) -> bool:
    """Whether `question` opens with an auxiliary ("Is …", "Can I …", "Does …") and holds no
    wh-word before it (pure)."""
    words = question_words(question) if words is None else words
    return bool(words) and words[0] in YES_NO_OPENERS


def is_statement(question: str, profile: QuestionProfile, words: Sequence[str]) -> bool:
    """Whether `question` is a statement to check rather than a question: no question mark,
    no wh-word or auxiliary first, and more content words than a keyword fragment (pure).

    SciFact's claims are statements ("Patients who receive X recover faster …"): a "who" or
    "when" inside one is a relative word, not a question asking for a person or a time, and a
    quote confirms a statement by saying it again.
    """
    if question.rstrip().endswith("?") or not words:
        return False
    if words[0] in WH_WORDS or words[0] in YES_NO_OPENERS:
        return False
    return len(profile.content) > FRAGMENT_WORDS


def _wh_word(words: Sequence[str]) -> str:
    return next((w for w in words if w in WH_WORDS), "")


def novel_words(question: str, text: str) -> list[tuple[str, str, str]]:
    """(original surface, case-folded surface, stem) of every token of `text` that is neither a
    stop or filler word nor a word of the question (by stem), in order (pure)."""
    asked = {stem for _, stem in surface_stems(question)}
    stop = stop_stems()
    nfkc = unicodedata.normalize("NFKC", text)
    out = []
    for match, (surface, stem) in zip(TOKEN_RE.finditer(nfkc), surface_stems(text), strict=True):
        if stem in asked or stem in stop or surface in stop:
            continue
        out.append((match.group(0), surface, stem))
    return out


def _capitalised(novel: Sequence[tuple[str, str, str]]) -> bool:
    return any(original[:1].isupper() for original, _, _ in novel)


def _has_time(question: str, text: str, novel: Sequence[tuple[str, str, str]]) -> bool:
    asked = question.casefold()
    if any(m.group(0).casefold() not in asked for m in TIME_RE.finditer(text)):
        return True
    return any(surface in STRONG_TIME_WORDS for _, surface, _ in novel)


def _has_number(novel: Sequence[tuple[str, str, str]]) -> bool:
    return any(
        NUMBER_IN_TEXT_RE.fullmatch(surface) or surface in NUMBER_WORDS for _, surface, _ in novel
    )


# An amount of time or length: a number (in digits or words) and its unit, or a clock-style
# duration ("1:36:20"). A date is not one: "Last reviewed: 2026-10-22" says when, not how long.
_UNITS = (
    r"ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|d|days?|w|weeks?|months?|years?|yrs?|"
    r"nights?|sessions?|km|m|cm|mm|mi|miles?|chars?|characters?|words?|lines?|bytes?|kb|mb|gb|tb"
)
_AMOUNT_RE = re.compile(
    rf"\b(?:\d+(?:[.,]\d+)*|{'|'.join(sorted(NUMBER_WORDS, key=len, reverse=True))}|an?)"
    rf"(?:\s|-)?(?:{_UNITS})\b|\b\d{{1,2}}:\d{{2}}:\d{{2}}\b",
    re.IGNORECASE,
)


# A question about what something costs: "How much do we sell the 250 g bags for?",
# "price of Castell's bread flour". "How many … do we sell" counts things and "What do we sell?"
# asks for things, so a verb cue counts only after *how much*; a *what* question or a keyword
# fragment needs a money noun (`asks_money`).
_MONEY_RE = re.compile(
    r"[£$€¥]\s?\d|\b\d+(?:[.,]\d+)*\s?(?:p|pence|pounds?|euros?|eur|gbp|usd|dollars?|cents?)\b",
    re.IGNORECASE,
)


def asks_money(words: Sequence[str], kind: str, fragment: bool) -> bool:
    """Whether the question asks what something costs (pure): *how much* with a money word,
    or a money noun in a *what* question or a keyword fragment."""
    if any(a == "how" and b == "much" for a, b in itertools.pairwise(words)):
        return any(word in MONEY_NOUNS or word in MONEY_VERBS for word in words)
    if kind == KIND_COUNT or not ("what" in words or fragment):
        return False
    return any(word in MONEY_NOUNS for word in words)


def _has_money(question: str, text: str) -> bool:
    asked = question.casefold()
    return any(m.group(0).casefold() not in asked for m in _MONEY_RE.finditer(text))


def only_schedule(words: Sequence[str], text: str) -> bool:
    """Whether a *when … last/next* question's claim says how often and names no occasion:
    "yearly, in January" or "quarterly visits" says how often, not when the last or the next
    one is; a date, a day, a clock time or a day-relative word (`OCCASION_RE`) answers it."""
    if not any(word in OCCASION_WORDS for word in words):
        return False
    said = question_words(text)
    return any(word in SCHEDULE_WORDS for word in said) and not OCCASION_RE.search(text)


def _asks_how_long(words: Sequence[str]) -> bool:
    return any(a == "how" and b == "long" for a, b in itertools.pairwise(words))


def _has_amount(question: str, text: str) -> bool:
    asked = question.casefold()
    return any(m.group(0).casefold() not in asked for m in _AMOUNT_RE.finditer(text))


def _has_person(text: str, novel: Sequence[tuple[str, str, str]]) -> bool:
    # A name is capitalised and is someone the question does not already name (`novel`); an
    # all-capitals word ("UTC", "TLS") is an acronym, and the acronyms of roles ("SRE", "DBA")
    # are among PERSON_WORDS; a capitalised day or month ("Tuesday") is a time, not a name.
    names = [
        w for w in novel if not (w[0].isupper() and len(w[0]) > 1) and w[1] not in CALENDAR_NAMES
    ]
    if "@" in text or _capitalised(names):
        return True
    return any(
        surface in PERSON_WORDS and surface not in RESPONSIBILITY_WORDS for _, surface, _ in novel
    )


def _other_sides(pairs: Sequence[tuple[str, str]]) -> dict[str, frozenset[str]]:
    """Each pair word's stem → the stems of its other sides."""
    out: dict[str, frozenset[str]] = {}
    for a, b in pairs:
        sa, sb = fold(a), fold(b)
        out[sa] = out.get(sa, frozenset()) | {sb}
        out[sb] = out.get(sb, frozenset()) | {sa}
    return out


_KINDS = _other_sides(CONTRAST_PAIRS)
_KINDS_AND_DIRECTIONS = _other_sides(CONTRAST_PAIRS + DIRECTION_PAIRS)


def _prose_stems(text: str) -> set[str]:
    """The index stems of `text` outside code spans and identifiers (`max_pool_size` is a
    setting's name, not the word "max")."""
    prose = NAMED_IDENTIFIER_RE.sub(" ", _CODE_RE.sub(" ", text))
    return {stem for _, stem in surface_stems(prose)}


def contrast_swapped(
    question: str, candidate: Candidate, *, directions: bool = True
) -> tuple[str, str] | None:
    """(the question's word, the claim's word) when the question names one side of a
    `CONTRAST_PAIRS` pair (and of a `DIRECTION_PAIRS` one when `directions`) that neither the
    claim nor its heading path nor its title holds, and the claim holds the other side; None
    otherwise (pure). A pair word right after "how" asks the question's kind ("how old"), not
    for one side of the pair."""
    contrasts = _KINDS_AND_DIRECTIONS if directions else _KINDS
    words = surface_stems(question)
    asked = {
        (surface, stem)
        for i, (surface, stem) in enumerate(words)
        if stem in contrasts and not (i and words[i - 1][0] == "how")
    }
    if not asked:
        return None
    question_stems = {stem for _, stem in words}
    text_stems = _prose_stems(candidate.text)
    everywhere = text_stems | {
        stem for _, stem in surface_stems(f"{candidate.title}\n{candidate.heading_path}")
    }
    for surface, stem in sorted(asked):
        if stem in everywhere:
            continue
        other = sorted((contrasts[stem] & text_stems) - question_stems)
        if other:
            said = next(s for s, st in surface_stems(candidate.text) if st == other[0])
            return surface, said
    return None


def _which_phrase(question: str) -> set[str]:
    """The stems of the (at most two) words after *which*, skipping auxiliaries: "Which
    carriers push events …" asks for carriers, whatever the focus parser took as the head."""
    words = surface_stems(question)
    at = next((i for i, (surface, _) in enumerate(words) if surface == "which"), None)
    if at is None:
        return set()
    after = [
        (s, stem)
        for s, stem in words[at + 1 :]
        if s not in AUXILIARIES and s not in COUNTING_WORDS and not NUMBER_IN_TEXT_RE.fullmatch(s)
    ]
    return {stem for _, stem in after[:2]}


def _counts_without_naming(question: str, profile: QuestionProfile, text: str) -> bool:
    """A *which X* claim whose every mention of X is counted or indefinite ("four carriers",
    "an external service") and that names nothing new: no code span, identifier or
    capitalised word outside the question."""
    focus = _which_phrase(question) or set(profile.focus)
    words = surface_stems(text)
    at = [i for i, (_, stem) in enumerate(words) if stem in focus]
    if not at:
        return False
    for i in at:
        before = [surface for surface, _ in words[max(0, i - COUNT_WINDOW) : i]]
        if not any(w in COUNTING_WORDS or NUMBER_IN_TEXT_RE.fullmatch(w) for w in before):
            return False
    return True


def _names_something(question: str, text: str) -> bool:
    asked = question.casefold()
    if any(m.group(0).strip("`").casefold() not in asked for m in _CODE_RE.finditer(text)):
        return True
    if any(m.group(0).casefold() not in asked for m in NAMED_IDENTIFIER_RE.finditer(text)):
        return True
    nfkc = unicodedata.normalize("NFKC", text)
    stop = stop_stems()
    for i, m in enumerate(TOKEN_RE.finditer(nfkc)):
        word = m.group(0)
        folded = word.casefold()
        if i and word[:1].isupper() and folded not in asked and folded not in stop:
            return True
    return False


def _named_here(item: str, casefolded: str, stems_: frozenset[str]) -> bool:
    """`relevance.claim_types.named_present`, except that an identifier made of words alone
    ("finished-jobs") is also found as those words ("Finished jobs are deleted …"): only an
    identifier holding a digit ("db-2", "16.4") must occur whole."""
    if named_present(item, casefolded, stems_):
        return True
    if any(c.isdigit() for c in item) or not NAMED_IDENTIFIER_RE.fullmatch(item):
        return False
    return all(stem in stems_ for _, stem in surface_stems(re.sub(r"[-_./:]", " ", item)))


def shape_problem(
    question: str, candidate: Candidate, profile: QuestionProfile | None = None
) -> str:
    """Why `candidate` cannot be an answer to `question` by its shape (one of the reason
    constants, or a named-thing reason), or "" when it may be (pure)."""
    profile = profile or question_profile(question)
    text = candidate.text
    if profile.named:
        context = f"{candidate.title}\n{candidate.heading_path}"
        whole = f"{context}\n{text}".casefold()
        everywhere = frozenset(stem for _, stem in surface_stems(f"{context}\n{text}"))
        missing = sorted(item for item in profile.named if not _named_here(item, whole, everywhere))
        if missing:
            return f"the question names {missing[0]!r}, and neither it nor its section does"
    words = question_words(question)
    # A statement asks for no kind of thing; only a named thing it lacks (above) tells.
    if is_yes_no(question, words) or is_statement(question, profile, words):
        return ""
    wh_word = _wh_word(words)
    # After the yes/no exemption: "Does it increase the risk?" is answered by "it decreases".
    swapped = contrast_swapped(question, candidate, directions=bool(wh_word))
    if swapped is not None:
        return CONTRAST.format(asked=repr(swapped[0]), said=repr(swapped[1]))
    novel = novel_words(question, text)
    if not novel and (wh_word or len(profile.content) <= FRAGMENT_WORDS):
        return RESTATES
    kind = profile.kind
    # The heading path, not the title: every sentence of an ADR shares its title, and its
    # "Context" section says why a decision was needed, not what was decided.
    if profile.intent == INTENT_DECISION and not is_decision(text, candidate.heading_path):
        return NO_DECISION
    if kind == KIND_TIME and not _has_time(question, text, novel):
        return NO_TIME
    if kind == KIND_TIME and wh_word == "when" and only_schedule(words, text):
        return ONLY_SCHEDULE
    if kind == KIND_PERSON and not _has_person(text, novel):
        return NO_PERSON
    if kind == KIND_COUNT and not _has_number(novel):
        return NO_NUMBER
    if kind == KIND_COUNT and _asks_how_long(words) and not _has_amount(question, text):
        return NO_DURATION
    fragment = not wh_word and len(profile.content) <= FRAGMENT_WORDS
    if (
        profile.intent != INTENT_DECISION
        and asks_money(words, kind, fragment)
        and not _has_money(question, text)
    ):
        return NO_MONEY
    if (
        kind == KIND_FOCUS
        and wh_word == "which"
        and _counts_without_naming(question, profile, text)
        and not _names_something(question, text)
    ):
        return COUNTS_NOT_NAMES
    return ""
