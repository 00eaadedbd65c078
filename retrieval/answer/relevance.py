"""Relevance: does a claim *answer* the question, not merely quote its source? (issue 12 item 1)

The faithfulness gate (gate.py) proves a quote exists verbatim and that the claim follows from
it; a verified sentence about nine sub-Saharan countries "with at least one medical school"
still does not answer *"How many medical schools are there in Nigeria?"*. This module scores a
question × claim pair and is used twice:

* by the gate (`retrieval.answer.ask.gate_claims`, step "relevance"): a claim that passed the
  faithfulness checks is dropped when its score is below the fitted threshold;
* by the extractive answerer, to rank candidate sentences (`score_candidates`).

The scorer is an L2-regularised logistic regression over standardised features of the pair
(`FEATURE_NAMES`), fitted by `training/fit_relevance.py` (not shipped) on SciFact train
(rationale sentences positive, the other sentences of the retrieved abstracts negative) and on
the tune half of the question sets in `bench/data/questions/`; weights, means, scales, the
threshold and what it was fitted on are in `retrieval/data/relevance.json`. The threshold is
chosen on data, never by hand, in two stages: the fit picks one for the step alone (below),
then `bench/relevance_threshold.py` re-chooses it on whole asks — the claims the abstention
rule, the answerer and the faithfulness steps actually let through, scored on the tune halves
— by maximising right answers − 3 × false answers (0.30; the fallback model's threshold moves
by the same log-odds; since 2026-12-03 the rule only looks at thresholds where SciFact train
answers cite a relevant abstract ≥ 85% of the time, and still chooses 0.30).
`LODE_RELEVANCE_THRESHOLD` overrides it.

Features (all per pair, none relative to the other candidates, so a score means the same for
one claim at the gate as for one of fifty sentences in the answerer):

* `cosine`, `context_cosine` — all-MiniLM-L6-v2 cosine between the question (query vector)
  and the claim text (passage vector, without the title template), and the same with the
  claim's heading path before it (`embedding_text`: a step under "Promote the replica" is
  about the replica); one batched call per scoring (`cosine_pairs`);
* `coverage`, `idf_coverage` — the share of the question's content words (index stems, question
  glue and filler removed; a decision question's "decide" too) present in the claim, plain and
  weighted by rarity; rarity is the IDF over the *user's own* head passages, looked up through
  the lexical index (`passage_idf`, at most `MAX_IDF_WORDS` words, document frequency capped at
  `DF_CAP`, so the cost is bounded); the fit computes it the same way over its corpus;
* `context_idf_coverage`, `heading_coverage` — the same over claim + heading path + title, and
  over heading path + title alone (a runbook section named for the question);
* `missing_max_idf` — the rarity of the rarest question word found nowhere (claim, heading,
  title), relative to the question's rarest word: "Nigeria" missing weighs, "many" does not;
* question type against answer type: `typed` (the question asks for a number, a time, a
  person, a place or a reason), `type_match` (the claim has one), `count_near` (a *how many*
  question's counted thing sits within `NEAR_TOKENS` tokens of a number), `has_focus`,
  `focus_in_text`, `focus_in_context` (the X of *which/what X*, or the counted thing);
* `rank_rr` — 1 / the passage's 1-based search rank (pinned = 0 counts as rank 1);
* `log_words`, `log_question_words` — lengths, so short fragments and long questions are read
  on their own terms;
* `has_named`, `named_missing` — the question's named things (identifiers like `db-2` or
  `16.4`, capitalised words after the first, words with digits: "Redis", "Nigeria", "SEV1")
  and the share of them found nowhere in the claim, its heading path or title: a near-topic
  question usually swaps exactly one of them;
* `bigram_coverage` — the share of the question's adjacent content-word pairs that occur in
  the claim in that order (other words may sit between);
* `has_value` — the claim holds a digit or a code span (a value to answer with);
* `procedure`, `step_match` — the question asks how to do something ("how do I …", "how to
  …") and the claim reads as a step (starts with an imperative verb, or holds a code span);
* `decision`, `decision_match` — the question asks what was decided and the claim records a
  decision (under a heading like "Decisions", or saying what was decided or changed).

The fit's own figures (retrieval/data/relevance.json `report`, at its step-alone threshold
0.549; a question counts as answered when any sentence of its top 12 BM25 passages reaches the
threshold, so these are the step's own figures, before the answerer's and the decision's
filters): out of fold on the tune halves, 0 of 59 + 58 near-topic unanswerable questions are
answered and 30% of the answerable notes questions and 40% of the answerable SciFact questions
are; the kept-apart halves' figures are in the report's `holdout` entry (`fit_relevance evaluate
--split holdout --record`). Answerable questions whose answer lies only in code (a command in a
fence, which lode never quotes) are left out of the fit (`quotable`). The features cannot tell a
verified near-topic quote from an answer much better than that: holding false answers near 1%
costs most answers (the fit prints the whole trade-off table; lower thresholds answer more and
falsely answer more). Whole-ask figures at the chosen threshold are `bench/answer_quality.py`'s
(bench/README.md, "Answers that answer"); `ask_calibration` in relevance.json holds the
trade-off table.

One rule stands beside the score (`section_answers`): a procedure question ("how do I promote the
replica during a failover?") is answered by a step of the section named for it — every content
word of the question in the step's heading path — whatever the step's score, since the step's
own words need not repeat the section's ("Run `pg_ctl promote` on the standby host."). The gate
records such a pass as `section_match`; its version is in the relevance manifest.

When the embedding model cannot load, scoring degrades honestly: the *no-embedding* model,
fitted alongside on the same data without `cosine`, with its own data-chosen threshold,
decides, and `RelevanceScores.note` says so (the ask shows it). When the weights file itself
is unreadable, `RelevanceUnavailable` is raised and the gate fails closed.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from lode_site.budget import as_budget_exceeded
from retrieval.eligibility import Audience
from retrieval.text import (
    EXTRACTIVE_STOPWORDS,
    NAMED_IDENTIFIER_RE,
    NUMBER_IN_TEXT_RE,
    QUESTION_FILLER_WORDS,
    RELEVANCE_FILLER_WORDS,
    TOKEN_RE,
    WORD_RE,
    fold,
    split_sentences,
    surface_stems,
    word_set,
)

logger = logging.getLogger("lode.relevance")

RELEVANCE_FILE = Path(__file__).resolve().parent.parent / "data" / "relevance.json"

FEATURE_NAMES: tuple[str, ...] = (
    "cosine",
    "context_cosine",
    "coverage",
    "idf_coverage",
    "context_idf_coverage",
    "heading_coverage",
    "missing_max_idf",
    "typed",
    "type_match",
    "count_near",
    "has_focus",
    "focus_in_text",
    "focus_in_context",
    "rank_rr",
    "log_words",
    "log_question_words",
    "has_named",
    "named_missing",
    "bigram_coverage",
    "has_value",
    "procedure",
    "step_match",
    "decision",
    "decision_match",
)
EMBEDDING_FEATURES = frozenset({"cosine", "context_cosine"})
FALLBACK_FEATURE_NAMES: tuple[str, ...] = tuple(
    name for name in FEATURE_NAMES if name not in EMBEDDING_FEATURES
)

FULL_MODEL = "full"
FALLBACK_MODEL = "no-embedding"

# The user's-passages IDF: at most this many question words are looked up (the rarest-looking
# first are not known before the lookup, so simply the first ones in question order), and a
# word's document frequency is counted up to this cap (one lexical search with this limit).
# The fit applies the same cap, so a capped count means the same at fit and at run time.
MAX_IDF_WORDS = 10
DF_CAP = 500

# A *how many* question's counted thing must sit this close (in tokens) to a number.
NEAR_TOKENS = 4


class RelevanceUnavailable(Exception):
    """The relevance model cannot be used (its weights file is missing or damaged); str() is a
    short user-facing reason. The gate then drops claims at this step: fail closed."""


# --- the pair's parts ----------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One claim or candidate sentence to score against a question: its text, its document's
    title, its passage's heading path ("" when none; entries joined with " > " or any
    separator) and the pack item's 1-based search rank (0 = pinned, read as the best)."""

    text: str
    title: str = ""
    heading_path: str = ""
    rank: int = 0


def candidate_for(text: str, item: Any) -> Candidate:
    """`text` scored as coming from pack item `item`: its document title, heading path and
    search rank (the one way the answerer, the gate and egress describe a candidate)."""
    return Candidate(
        text=text,
        title=item.document_title,
        heading_path=" > ".join(item.heading_path),
        rank=item.rank,
    )


@lru_cache(maxsize=1)
def _stop_stems() -> frozenset[str]:
    words = EXTRACTIVE_STOPWORDS | QUESTION_FILLER_WORDS | RELEVANCE_FILLER_WORDS
    return frozenset(words | {fold(w) for w in words})


def stems(text: str) -> frozenset[str]:
    """The index stems of `text` (`retrieval.text.fold` of every token)."""
    return frozenset(stem for _, stem in surface_stems(text))


# --- the question's type --------------------------------------------------------------------

KIND_COUNT = "count"
KIND_TIME = "time"
KIND_PERSON = "person"
KIND_PLACE = "place"
KIND_REASON = "reason"
KIND_FOCUS = "focus"  # which/what X: the X must be there; no answer type beyond that
TYPED_KINDS = frozenset({KIND_COUNT, KIND_TIME, KIND_PERSON, KIND_PLACE, KIND_REASON})

WH_WORDS = word_set("what which who whom whose when where why how")
# Words between a wh-word and its noun phrase that are not the phrase ("what is the …").
_AUX = word_set(
    "is are was were be been am do does did done has have had can could will would shall "
    "should may might must the a an of our my your their its this that these those we i you "
    "they he she it there s"
)
# Words that end a noun phrase ("how many retries *does* …", "schools *in* Nigeria").
_PHRASE_END = _AUX | word_set(
    "in on at by for from with to into over under about per during after before since until "
    "than and or but if when where which who that get got use used run ran own owns runs "
    "handle handles uses need needs hold holds store stores contain contains cause causes "
    "listen listens serve serves live lives mean means go goes come comes take takes make makes "
    "happen happens work works say says show shows keep keeps cover covers support supports"
)
# "what *did* we decide": an auxiliary right after the wh-word means a verb follows, not the
# thing asked for.
_DO_AUX = word_set("do does did can could will would shall should may might must have has had")
_VERB_ENDING_RE = re.compile(r"..(?:ed|ing)$")
HOW_NUMBER = word_set("many much long old big large far fast tall heavy wide deep high")
HOW_TIME = word_set("often soon frequently")
# The X of "what/which X" that asks for a number, a time, a person or a place.
FOCUS_KIND = {
    **dict.fromkeys(
        word_set(
            "number percentage percent proportion fraction share amount ratio rate size count "
            "total port version timeout limit maximum minimum max min threshold capacity cost "
            "price duration length ttl retention frequency dose"
        ),
        KIND_COUNT,
    ),
    **dict.fromkeys(word_set("time date day year month hour week deadline schedule"), KIND_TIME),
    **dict.fromkeys(
        word_set("person people team owner engineer manager lead contact maintainer author"),
        KIND_PERSON,
    ),
    **dict.fromkeys(
        word_set(
            "host hostname server directory folder path file url region zone bucket machine "
            "node room office location place site repo repository channel cluster database"
        ),
        KIND_PLACE,
    ),
    **dict.fromkeys(word_set("reason cause"), KIND_REASON),
}


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
    while i < len(surfaces) and surfaces[i] in _AUX:
        i += 1
    phrase: list[int] = []
    while i < len(surfaces) and surfaces[i] not in _PHRASE_END and len(phrase) < 3:
        if phrase and _VERB_ENDING_RE.search(surfaces[i]):
            break  # "how many people *donated* …": the verb ends the phrase
        phrase.append(i)
        i += 1
    return phrase


def question_profile(question: str) -> QuestionProfile:
    """The question's content words, kind and focus (pure)."""
    words = surface_stems(question)
    stop = _stop_stems()
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


# What an open question wants when it has no answer type: the steps of a procedure ("how do I
# promote the replica", "how to roll back") or a decision taken ("what did we decide about
# backups"). Neither is an answer *type* a sentence can show by itself, so each has its own pair
# of features (the question's intent, and whether the candidate looks like what it wants).
INTENT_PROCEDURE = "procedure"
INTENT_DECISION = "decision"
DECISION_QUESTION_WORDS = word_set(
    "decide decided decides deciding decision decisions agree agreed agreement choose chose "
    "chosen choice conclude concluded conclusion settle settled resolve resolved resolution "
    "outcome outcomes verdict"
)
_PROCEDURE_AUX = word_set("do does can could should would shall must")
_ASKERS = word_set("i we you one someone anyone")


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
    if len(following) == 2 and following[0] in _PROCEDURE_AUX and following[1] in _ASKERS:
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
    if following in _DO_AUX:
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


# --- the claim's answer types ----------------------------------------------------------------

NUMBER_WORDS = word_set(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty "
    "ninety hundred hundreds thousand thousands million millions billion dozen dozens half "
    "twice once single double triple quarter"
)
TIME_WORDS = word_set(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday "
    "saturday sunday mon tue tues wed thu thurs fri sat sun daily nightly weekly monthly "
    "yearly annually hourly quarterly today tomorrow yesterday tonight midnight noon morning "
    "afternoon evening night weekend weekends weekday weekdays utc gmt cet cest pst pdt est edt "
    "ist am pm second seconds minute minutes hour hours day days week weeks month months year "
    "years ago every since until before after during sprint deadline schedule scheduled "
    "timestamp dawn"
)
_TIME_RE = re.compile(
    r"\b\d{1,2}:\d{2}\b|\b\d{1,2}\s?(?:am|pm)\b|\b(?:19|20)\d{2}\b|\b\d{4}-\d{2}-\d{2}\b"
    r"|\bq[1-4]\b|\b\d+\s?(?:ms|s|sec|secs|min|mins|h|hrs?|d|w)\b|\bcron\b",
    re.IGNORECASE,
)
PERSON_WORDS = word_set(
    "owner owners owns owned lead leads manager managers engineer engineers admin admins "
    "administrator team teams oncall on-call sre sres dba maintainer maintainers author authors "
    "responsible assigned assignee contact ceo cto cfo vp director architect developer "
    "developers operator operators colleague colleagues person people someone who he she him "
    "her they them whoever chair rotation secondary primary vendor support"
)
_PERSON_RE = re.compile(r"(?<![\w@])@[A-Za-z][\w.-]+|\b[A-Z][a-z]+ [A-Z][a-z]+\b")
PLACE_WORDS = word_set(
    "room office floor building region zone datacenter datacentre dc rack server servers "
    "host hosts cluster directory folder bucket repository repo channel wiki drive site city "
    "country located location address path file files disk volume mount node machine "
    "namespace database endpoint url"
)
_PLACE_RE = re.compile(
    r"(?:^|[\s(`'\"])~?/[\w.@-]+(?:/[\w.@-]*)*"  # a path
    r"|\bhttps?://\S+"  # a URL
    r"|\b[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|io|internal|local|lan|dev|cloud|corp|example)\b"
    r"|\b[a-z][\w]*-\d+\b"  # a host name like db-01
    r"|\b(?:in|at|from|to) (?:the )?[A-Z][a-z]+",  # "in Lagos", "at the Berlin office"
)
REASON_WORDS = word_set(
    "because due since cause caused causes causing reason reasons result resulted results "
    "therefore thus hence so led leads owing why order root triggered trigger"
)


@lru_cache(maxsize=1)
def _folded(words: frozenset[str]) -> frozenset[str]:
    return frozenset(words | {fold(w) for w in words})


def answer_types(text: str) -> frozenset[str]:
    """The answer types present in `text`: "count" (a number), "time" (a time, date, day or
    duration), "person" (a person, @handle or role), "place" (a place, host, path or URL),
    "reason" (a cause). Pure, lexical: a cue, not a parse."""
    nfkc = unicodedata.normalize("NFKC", text)
    surfaces = {m.group(0).casefold() for m in TOKEN_RE.finditer(nfkc)}
    found: set[str] = set()
    if NUMBER_IN_TEXT_RE.search(nfkc) or surfaces & NUMBER_WORDS:
        found.add(KIND_COUNT)
    if _TIME_RE.search(nfkc) or surfaces & TIME_WORDS:
        found.add(KIND_TIME)
    if _PERSON_RE.search(nfkc) or surfaces & PERSON_WORDS:
        found.add(KIND_PERSON)
    if _PLACE_RE.search(nfkc) or surfaces & PLACE_WORDS:
        found.add(KIND_PLACE)
    if surfaces & REASON_WORDS:
        found.add(KIND_REASON)
    return frozenset(found)


# A step of a procedure: an instruction that starts with a verb in the imperative ("Run …",
# "Stop writes …"), or a command (a code span). Lexical cues, like the answer types above.
IMPERATIVE_VERBS = word_set(
    "add apply ask back build call change check clear click close configure confirm connect "
    "copy create delete deploy disable drain edit enable ensure fence fill find follow go grant "
    "install kill log make mark merge move note open pause pick point post promote pull push put "
    "read rebuild reboot reload remove rename repeat replace request reset restart restore "
    "resume revert revoke roll rotate run save scale select send set ssh start stop switch "
    "tag tell trigger turn type uncordon update upgrade upload use verify wait watch write "
    "cordon bump drop flush mount unmount snapshot sync take tail test"
)
# Where a decision is recorded (a heading) or said (a cue in the sentence).
DECISION_CONTEXT_WORDS = word_set(
    "decision decisions decided agreed agreement outcome outcomes resolution resolutions "
    "conclusion conclusions action actions adr"
)
DECISION_CUE_WORDS = word_set(
    "decided decide decision agreed agree chose chosen choose going will moved moves move "
    "switched switch switching goes adopt adopted approved accepted rejected dropped keep kept "
    "stay stays instead"
)


def is_step(text: str) -> bool:
    """Whether `text` reads as a step of a procedure: it starts with an imperative verb, or
    holds a code span (pure)."""
    if "`" in text:
        return True
    first = TOKEN_RE.search(unicodedata.normalize("NFKC", text))
    return bool(first) and first.group(0).casefold() in IMPERATIVE_VERBS


# A procedure question answered by the section it names (issue 12 item 2): "How do I promote
# the replica during a failover?" over "Run `pg_ctl promote` on the standby host." under
# "Failover > Promote the replica". The step's own words never say "replica", so the fitted
# scorer, which has seen few procedure questions, scores it low (0.21 against 0.30); a runbook
# section whose headings hold every word of the question is the author saying what its steps
# are for. The rule is narrow on purpose, since a near-topic question that swaps one word
# ("... promote the replica in staging?") must not pass: every content word of the question in
# the heading path itself (the title is shared by every section of a document), at least
# `MIN_SECTION_WORDS` of them, and the claim a step.
SECTION_RULE_VERSION = 1
MIN_SECTION_WORDS = 2


def section_answers(profile: QuestionProfile, candidate: Candidate) -> bool:
    """Whether `candidate` answers a procedure question as a step of the section named for
    it: the question asks how to do something, every one of its content words (at least
    `MIN_SECTION_WORDS`) is in the candidate's heading path, and the candidate reads as a
    step (`is_step`). Pure."""
    if profile.intent != INTENT_PROCEDURE or not candidate.heading_path:
        return False
    wanted = set(profile.content_stems)
    if len(wanted) < MIN_SECTION_WORDS or not is_step(candidate.text):
        return False
    return wanted <= stems(candidate.heading_path)


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


# --- named things ---------------------------------------------------------------------------

_VALUE_RE = re.compile(r"\d|`")


def named_things(question: str) -> frozenset[str]:
    """The question's named things, case-folded: identifiers ("db-2", "16.4", "nginx.conf"),
    and words after the first that are capitalised or hold a digit ("Redis", "SEV1")."""
    nfkc = unicodedata.normalize("NFKC", question)
    found = {m.group(0).casefold() for m in NAMED_IDENTIFIER_RE.finditer(nfkc)}
    for i, m in enumerate(WORD_RE.finditer(nfkc)):
        word = m.group(0)
        folded = word.casefold()
        if i == 0 or folded in WH_WORDS or folded in _AUX:
            continue
        if (word[0].isupper() or any(c.isdigit() for c in word)) and not any(
            folded in item for item in found
        ):
            found.add(folded)
    return frozenset(found)


def _named_present(item: str, casefolded: str, stems_: frozenset[str]) -> bool:
    if NAMED_IDENTIFIER_RE.fullmatch(item):
        return item in casefolded  # an identifier must occur whole
    return fold(item) in stems_


# --- rarity ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class IdfTable:
    """Document frequencies of some stems over `passages` passages. A stem not in `df` counts
    as never seen (the rarest). `passages == 0` means no corpus: every word weighs 1."""

    passages: int = 0
    df: Mapping[str, int] = field(default_factory=dict)

    def idf(self, stem: str) -> float:
        if self.passages <= 0:
            return 1.0
        count = min(self.df.get(stem, 0), DF_CAP)
        return math.log((self.passages + 1) / (count + 0.5))


UNIFORM_IDF = IdfTable()


def passage_idf(audience: Audience, profile: QuestionProfile) -> IdfTable:
    """The question's content words' document frequencies over the live head passages of the
    audience's spaces (what the ask may quote),
    through the lexical index (so a word is counted the way search matches it). Bounded: at
    most `MAX_IDF_WORDS` lexical searches of at most `DF_CAP` rows each, plus one count. A
    database error other than the request's time budget gives the uniform table (logged)."""
    from django.db import DatabaseError, transaction

    from retrieval.index.lexical import backend
    from retrieval.models import Passage
    from retrieval.query import QueryError, parse

    words = profile.content[:MAX_IDF_WORDS]
    try:
        with transaction.atomic():  # a savepoint: a failed lookup must not poison the ask
            total = Passage.objects.filter(
                is_head=True,
                document__space_id__in=audience.sorted_space_ids,
                document__deleted_at__isnull=True,
            ).count()
            df: dict[str, int] = {}
            lexical = backend()
            for surface, stem in words:
                try:
                    parsed = parse(surface)
                except QueryError:
                    continue
                df[stem] = len(lexical.search(parsed, audience=audience, limit=DF_CAP))
    except DatabaseError as exc:
        budget = as_budget_exceeded(exc)
        if budget is not None:  # the ask's time is up: stop, do not carry on unweighted
            raise budget from exc
        logger.warning("relevance IDF lookup failed, weighing words equally: %s", exc)
        return UNIFORM_IDF
    return IdfTable(passages=total, df=df)


def corpus_idf(passage_stem_sets: Iterable[frozenset[str]]) -> IdfTable:
    """Document frequencies over a corpus given as each passage's stem set (the fit's way to
    compute what `passage_idf` reads from the lexical index)."""
    df: dict[str, int] = {}
    total = 0
    for passage_stems in passage_stem_sets:
        total += 1
        for stem in passage_stems:
            df[stem] = df.get(stem, 0) + 1
    return IdfTable(passages=total, df=df)


# --- features -------------------------------------------------------------------------------


def _weighted_share(stems_: Sequence[str], weights: Sequence[float], present: set[str]) -> float:
    total = sum(weights)
    if total <= 0:
        return 0.0
    return sum(w for s, w in zip(stems_, weights, strict=True) if s in present) / total


def features(
    profile: QuestionProfile,
    candidates: Sequence[Candidate],
    idf: IdfTable,
    cosines: Sequence[tuple[float, float]] | None,
) -> np.ndarray:
    """The feature matrix, len(candidates) × len(FEATURE_NAMES), in `FEATURE_NAMES` order.
    `cosines` None (no embedding model) fills the cosine column with 0; the no-embedding model
    never reads it. Pure and deterministic."""
    width = len(FEATURE_NAMES)
    if not candidates:
        return np.zeros((0, width), dtype=np.float64)
    question_stems = profile.content_stems
    weights = [idf.idf(s) for s in question_stems]
    max_weight = max(weights, default=0.0)
    focus = set(profile.focus)
    typed = profile.kind in TYPED_KINDS
    named = profile.named
    question_pairs = set(itertools.pairwise(question_stems))
    wanted = set(question_stems)
    procedure = profile.intent == INTENT_PROCEDURE
    decision = profile.intent == INTENT_DECISION
    rows = []
    for i, candidate in enumerate(candidates):
        text_stems = set(stems(candidate.text))
        context = f"{candidate.title}\n{candidate.heading_path}"
        context_stems = set(stems(context))
        everywhere = text_stems | context_stems
        whole = f"{context}\n{candidate.text}".casefold()
        named_missing = sum(
            not _named_present(item, whole, frozenset(everywhere)) for item in named
        )
        in_order = [stem for _, stem in surface_stems(candidate.text) if stem in wanted]
        pairs = set(itertools.pairwise(in_order))
        n = len(question_stems)
        coverage = sum(s in text_stems for s in question_stems) / n if n else 0.0
        heading_coverage = sum(s in context_stems for s in question_stems) / n if n else 0.0
        missing = [w for s, w in zip(question_stems, weights, strict=True) if s not in everywhere]
        missing_max = (max(missing) / max_weight) if missing and max_weight > 0 else 0.0
        kinds = answer_types(candidate.text) if typed else frozenset()
        count_near = (
            profile.kind == KIND_COUNT
            and KIND_COUNT in kinds
            and bool(focus)
            and number_near(candidate.text, focus)
        )
        rank = max(candidate.rank, 1)
        words = len(TOKEN_RE.findall(candidate.text))
        rows.append(
            [
                float(cosines[i][0]) if cosines is not None else 0.0,
                float(cosines[i][1]) if cosines is not None else 0.0,
                coverage,
                _weighted_share(question_stems, weights, text_stems),
                _weighted_share(question_stems, weights, everywhere),
                heading_coverage,
                missing_max,
                1.0 if typed else 0.0,
                1.0 if typed and profile.kind in kinds else 0.0,
                1.0 if count_near else 0.0,
                1.0 if focus else 0.0,
                1.0 if focus and focus <= text_stems else 0.0,
                1.0 if focus and not focus <= text_stems and focus <= context_stems else 0.0,
                1.0 / rank,
                math.log1p(words),
                math.log1p(len(question_stems)),
                1.0 if named else 0.0,
                named_missing / len(named) if named else 0.0,
                len(question_pairs & pairs) / len(question_pairs) if question_pairs else 0.0,
                1.0 if _VALUE_RE.search(candidate.text) else 0.0,
                1.0 if procedure else 0.0,
                1.0 if procedure and is_step(candidate.text) else 0.0,
                1.0 if decision else 0.0,
                1.0 if decision and is_decision(candidate.text, context) else 0.0,
            ]
        )
    return np.asarray(rows, dtype=np.float64)


def embedding_text(candidate: Candidate) -> str:
    """What the `context_cosine` feature embeds for a candidate: its heading path, then its
    text. A step under "Failover > Promote the replica" is about promoting the replica
    although its own words ("Run `pg_ctl promote` on the standby host") never say "replica";
    a sentence outside any section is embedded as it is (both cosines are then the same). The
    title stays out: every sentence of a document shares it, so it would blur which of them
    answers. The heading can also pull a sentence away from the question ("Redis" above "Set
    maxmemory-policy …"), which is why the text's own cosine is kept beside it."""
    if not candidate.heading_path:
        return candidate.text
    return f"{candidate.heading_path}\n{candidate.text}"


def cosine_pairs(
    candidates: Sequence[Candidate], cosines_of: Callable[[list[str]], list[float]]
) -> list[tuple[float, float]]:
    """(cosine of the text, cosine of `embedding_text`) per candidate, from one call of
    `cosines_of` over the distinct texts (a candidate outside any section is embedded once)."""
    texts = [c.text for c in candidates] + [embedding_text(c) for c in candidates]
    texts = list(dict.fromkeys(texts))
    by_text = dict(zip(texts, cosines_of(texts), strict=True))
    return [(by_text[c.text], by_text[embedding_text(c)]) for c in candidates]


def embedding_cosines(question: str, texts: Sequence[str]) -> list[float]:
    """Cosine of the question's query vector with each text's passage vector: one call for the
    question and one batched call for all texts. Nothing is cached (vectors of one user's
    text never outlive the call). Raises `EmbeddingUnavailable`."""
    from retrieval.index.embeddings import get_embedder

    if not texts:
        return []
    embedder = get_embedder()
    query = embedder.embed_query(question)
    vectors = embedder.embed_passages(list(texts))
    return [float(v) for v in vectors @ query]  # both L2-normalised


# --- the model ------------------------------------------------------------------------------


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function, overflow-free


@dataclass(frozen=True)
class LogisticModel:
    """Standardised features → logistic regression; `threshold` on its probability."""

    feature_names: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    intercept: float
    threshold: float

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """P(the pair answers) for each row of `x` (columns in `self.feature_names` order)."""
        return _sigmoid(((x - self.mean) / self.scale) @ self.weights + self.intercept)

    def as_dict(self) -> dict[str, Any]:
        return {
            "feature_names": list(self.feature_names),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "weights": self.weights.tolist(),
            "intercept": self.intercept,
            "threshold": self.threshold,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], expected: tuple[str, ...]) -> LogisticModel:
        names = tuple(data["feature_names"])
        if names != expected:
            raise RelevanceUnavailable(
                "the relevance weights were fitted on other features; re-run "
                "training/fit_relevance.py"
            )
        arrays = [np.asarray(data[k], dtype=np.float64) for k in ("mean", "scale", "weights")]
        intercept, threshold = float(data["intercept"]), float(data["threshold"])
        width = len(names)
        if (
            any(a.shape != (width,) or not np.all(np.isfinite(a)) for a in arrays)
            or np.any(arrays[1] <= 0)
            or not math.isfinite(intercept)
            or not 0.0 < threshold < 1.0
        ):
            raise RelevanceUnavailable("the relevance weights have the wrong shape or value")
        mean, scale, weights = arrays
        return cls(names, mean, scale, weights, intercept, threshold)


@dataclass(frozen=True)
class RelevanceModel:
    """The fitted pair of models (with and without the embedding feature) and the file's
    metadata (version, what it was fitted on, the fit's report)."""

    full: LogisticModel
    fallback: LogisticModel
    version: str
    meta: Mapping[str, Any] = field(default_factory=dict)

    def model(self, name: str) -> LogisticModel:
        return self.full if name == FULL_MODEL else self.fallback


def read_model(path: Path) -> RelevanceModel:
    """The model in `path`; any damage is `RelevanceUnavailable`."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        models = data["models"]
        full = LogisticModel.from_dict(models[FULL_MODEL], FEATURE_NAMES)
        fallback = LogisticModel.from_dict(models[FALLBACK_MODEL], FALLBACK_FEATURE_NAMES)
        version = str(data["version"])
    except RelevanceUnavailable:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RelevanceUnavailable(
            f"the relevance weights ({path.name}) are unreadable ({type(exc).__name__})"
        ) from exc
    meta = {k: v for k, v in data.items() if k != "models"}
    return RelevanceModel(full=full, fallback=fallback, version=version, meta=meta)


@cache
def _shipped_model() -> RelevanceModel:
    return read_model(RELEVANCE_FILE)


def load_model() -> RelevanceModel:
    """The shipped model (`retrieval/data/relevance.json`), read once per process."""
    return _shipped_model()


# --- scoring --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RelevanceScores:
    """One probability per candidate, the threshold of the model that produced them, which
    model that was (`FULL_MODEL` or `FALLBACK_MODEL`) and, when it was the fallback, a note
    in words saying why."""

    scores: list[float]
    threshold: float
    model: str
    note: str = ""


def score_pairs(
    question: str,
    candidates: Sequence[Candidate],
    *,
    idf: IdfTable = UNIFORM_IDF,
    model: RelevanceModel | None = None,
) -> RelevanceScores:
    """Score every candidate against `question` (one embedding call for all of them). Raises
    `RelevanceUnavailable` only when the weights cannot be read; a dead embedding model
    switches to the no-embedding model and says so in `note`."""
    from retrieval.index.embeddings import EmbeddingUnavailable

    fitted = model if model is not None else load_model()
    profile = question_profile(question)
    try:
        cosines: list[tuple[float, float]] | None = cosine_pairs(
            candidates, lambda texts: embedding_cosines(question, texts)
        )
        which, note = FULL_MODEL, ""
    except Exception as exc:  # a dead model, or one failing mid-inference: the same fallback
        if not isinstance(exc, EmbeddingUnavailable):
            logger.warning("embedding for the relevance check failed: %r", exc)
        cosines, which = None, FALLBACK_MODEL
        note = (
            f"The relevance check ran without the embedding model ({exc}): a model fitted "
            "without it decided."
        )
    chosen = fitted.model(which)
    x = features(profile, candidates, idf, cosines)
    if which == FALLBACK_MODEL:
        columns = [FEATURE_NAMES.index(name) for name in FALLBACK_FEATURE_NAMES]
        x = x[:, columns]
    scores = chosen.probabilities(x).tolist() if len(candidates) else []
    threshold = threshold_of(chosen, fitted.full)
    return RelevanceScores(scores=scores, threshold=threshold, model=which, note=note)


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def threshold_of(model: LogisticModel, full: LogisticModel | None = None) -> float:
    """The threshold in force for `model`: the fitted one, or with `LODE_RELEVANCE_THRESHOLD`
    set, that value for the full model (`full`, or `model` itself when not given) and, for the
    no-embedding model, its fitted threshold moved by the same log-odds — so an override never
    loosens the check more when the embedding model is down."""
    from django.conf import settings

    override = getattr(settings, "LODE_RELEVANCE_THRESHOLD", None)
    if override is None:
        return model.threshold
    reference = full if full is not None else model
    shift = _logit(float(override)) - _logit(reference.threshold)
    return 1.0 / (1.0 + math.exp(-(_logit(model.threshold) + shift)))


def score_candidates(
    question: str,
    candidates: Sequence[Candidate],
    *,
    audience: Audience | None = None,
    idf: IdfTable | None = None,
) -> list[float]:
    """One relevance probability per candidate sentence, for ranking them (higher answers
    better). Pass `audience` (the ask's) so words are weighed by their rarity in the
    passages it may quote, or an `idf` already looked up; with neither, every word weighs the
    same.
    Falls back to the no-embedding model when the embedding model cannot load."""
    if idf is None:
        idf = passage_idf(audience, question_profile(question)) if audience else UNIFORM_IDF
    return score_pairs(question, candidates, idf=idf).scores


# --- what may leave the machine (issue 12 item 4) -------------------------------------------

# Bounds on the egress scoring: sentences scored per pack item and in all (each is embedded).
EGRESS_SENTENCES_PER_ITEM = 12
EGRESS_SENTENCES = 120


def egress_floor(model: RelevanceModel | None = None) -> float:
    """The relevance an evidence item must reach to be sent to a remote model: the floor stored
    with the weights (chosen on data by bench/relevance_threshold.py), never above the
    threshold in force (evidence good enough to be shown is always good enough to send)."""
    fitted = model if model is not None else load_model()
    floor = float(fitted.meta.get("egress_floor", fitted.full.threshold))
    return min(floor, threshold_of(fitted.full))


def item_relevance(question: str, items: Sequence[Any], *, audience: Audience) -> dict[int, float]:
    """{passage_id: relevance} for pack items: the best score of the item's quotable units
    (`retrieval.text.split_sentences`, at most `EGRESS_SENTENCES_PER_ITEM` each and
    `EGRESS_SENTENCES` in all, one batched scoring). An item with no scored unit is absent,
    which the egress plan reads as below the floor. Raises `RelevanceUnavailable` when the
    weights cannot be read (the caller then sends nothing)."""
    owners: list[int] = []
    candidates: list[Candidate] = []
    # Every item gets its share of the scoring budget (pinned items come first and are not
    # capped: a long pinned note must not starve the rest of the pack).
    share = max(1, min(EGRESS_SENTENCES_PER_ITEM, EGRESS_SENTENCES // max(len(items), 1)))
    for item in items:
        if len(candidates) >= EGRESS_SENTENCES:
            break
        for sentence in split_sentences(item.text)[:share]:
            owners.append(item.passage_id)
            candidates.append(candidate_for(" ".join(sentence.text.split()), item))
    if not candidates:
        return {}
    idf = passage_idf(audience, question_profile(question))
    scores = score_pairs(question, candidates, idf=idf).scores
    best: dict[int, float] = {}
    for passage_id, score in zip(owners, scores, strict=True):
        if math.isfinite(score):  # a non-finite score never clears the floor
            best[passage_id] = max(score, best.get(passage_id, 0.0))
    return best
