"""Answerability decisions, rules first (seeds/lighthouse-spec.md "Answerability
+ contradiction decision"). Pure functions over the question, the evidence pack and the
gate's survivors: no database, no model.

**Before answering** (`decide_before_answer`): ASK_CLARIFYING when the question has too few
content words to retrieve on, with clarifying questions built from the top of the pack;
ABSTAIN_NO_EVIDENCE when the pack is empty or does not hold the question's words.

**After the gate** (`decide_after_gate`): no surviving claim → ABSTAIN_NO_EVIDENCE with
`ABSTAIN_MESSAGE`; surviving claims that conflict (`find_conflicts`) → ANSWER_WITH_CONFLICTS;
otherwise ANSWER. With no surviving claim, `best_match_candidates` says whether a verified
claim the relevance step dropped is shown as *Best match — check it* (`types.Tier`).

**Conflicts** (`find_conflicts`): two statements from *different documents* about the same
subject with different values, found by three lexical heuristics, every value shown with its
trust tier.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.answer.gate import JUDGE_SAYS_NOT_AN_ANSWER, NOT_AN_ANSWER, STEP_RELEVANCE
from retrieval.answer.types import (
    ABSTAIN_MESSAGE,
    ClaimVerdict,
    ClarifyingChoice,
    Decision,
    EvidencePack,
    PackItem,
    ShownClaim,
)
from retrieval.query import PIECE_RE, ParsedQuery
from retrieval.text.negation import NT_SUFFIX_RE
from retrieval.text.sentences import sentence_spans
from retrieval.text.stemming import fold, folded_tokens
from retrieval.text.tokens import IDENTIFIER_VALUE_RE, NUMBER_IN_TEXT_RE, WORD_RE, tokens
from retrieval.trust import tier_order
from retrieval.words.negation import CONFLICT_NEGATIONS
from retrieval.words.question_words import (
    DEICTIC_WORDS,
    HOW_DEGREE,
    QUESTION_FRAME_WORDS,
    QUESTION_FRAMING_VERBS,
)
from retrieval.words.state_values import STATE_WORDS
from retrieval.words.stopwords import QUERY_STOPWORDS, QUESTION_FILLER_WORDS, SUGGESTION_STOPWORDS

MIN_CONTENT_WORDS = 2
# Share of the question's content words the best pack item must contain (0.5 lets a two-word
# question through on one shared word), and the share the whole pack must contain (with fewer
# than five content words: all of them). See the module docstring for the measurements.
# Measured (lexical search, extractive answerer, the first 100 SciFact train queries, the 50
# off-topic questions of bench/data/offtopic_questions.txt and the 50 held-out ones of
# offtopic_questions_holdout.txt; a one-off probe, the end-to-end figures are
# bench/ask_latency.py's): with the best-item test alone, 91/100 train and 13/50 off-topic
# questions let through (79 and 6 answered); with the pack test as well, 81/100 and 3/50 (73 and
# 0 answered) — six fewer answers to SciFact claims for six fewer false answers, the trade the
# design asks for ("a confident answer with a wrong citation is the worst outcome"). Ignoring
# filler words and counting headings and named words moves nothing on SciFact (its claims have
# no filler) and helps everyday questions over notes: on the `tune` half of
# bench/data/questions/notes_answerable.jsonl, 47 rather than 44 of 88 answered, 34 rather than
# 30 quoting the answering text.
MIN_COVERAGE = 0.5
MIN_PACK_COVERAGE = 0.8
MAX_CLARIFYING = 3
# At most this many clarifying choices: up to `MAX_SCOPE_CHOICES` top documents to ask about,
# the rest words to add.
MAX_CHOICES = 4
MAX_SCOPE_CHOICES = 2
# How many top pack items the clarifying suggestions are drawn from.
SUGGEST_FROM = 5
# How many passages an abstention shows as the closest (they do not answer the question).
CLOSEST_COUNT = 3

# What is left of a question without these is its content words (retrieval.text lists).
NON_CONTENT = QUERY_STOPWORDS | QUESTION_FILLER_WORDS | QUESTION_FRAME_WORDS

CLARIFY_MESSAGE = "The question is too short or vague to search on. Could you say more?"
ANSWERER_FAILED = "The answerer failed ({error}); nothing is shown as verified."


def content_words(question: str) -> list[str]:
    """The question's content words, case-folded, in order, without repeats."""
    words = list(tokens(question))
    kept = [
        w
        for i, w in enumerate(words)
        if w not in NON_CONTENT and not (i and words[i - 1] == "how" and w in HOW_DEGREE)
    ]
    return list(dict.fromkeys(kept))


def named_words(question: str) -> set[str]:
    """The question's words typed as names (case-folded): an acronym or inner capital
    ("RPO", "ShipBridge"), a capital after the first word ("Keycloak"), or letters with
    digits ("Auth0"). One of them is specific enough to search on alone, like an identifier:
    "What is our RPO?" is not vague, "How much is our rent?" is."""
    named: set[str] = set()
    for index, match in enumerate(WORD_RE.finditer(unicodedata.normalize("NFKC", question))):
        word = match.group(0)
        has_letter = any(ch.isalpha() for ch in word)
        capital = any(ch.isupper() for ch in (word if index else word[1:]))
        if has_letter and (capital or any(ch.isdigit() for ch in word)):
            named.add(word.casefold())
    return named


def _stems(words: Iterable[str]) -> set[str]:
    return {fold(w) for w in words}


def _item_stems(text: str) -> set[str]:
    return set(folded_tokens(text))


def item_coverage_text(item: PackItem) -> str:
    """What counts as a pack item's words for coverage: its document title, its heading
    path (a step under "Failover > Promote the replica" is about promoting the replica
    even when the step never says so) and its text."""
    return "\n".join((item.document_title, *item.heading_path, item.text))


def closest_items(
    pack: EvidencePack, words: Sequence[str], *, limit: int = CLOSEST_COUNT
) -> list[PackItem]:
    """The pack items an abstention shows: most of the question's content words (stemmed,
    title and headings counting) first, ties in pack order (pinned, then search rank)."""
    wanted = _stems(words)
    ranked = sorted(
        enumerate(pack.items),
        key=lambda pair: (-len(wanted & _item_stems(item_coverage_text(pair[1]))), pair[0]),
    )
    return [item for _, item in ranked[:limit]]


def coverage(question_words: Sequence[str], text: str) -> float:
    """The share of the question's content words (stemmed) that occur in `text`."""
    wanted = _stems(question_words)
    if not wanted:
        return 0.0
    return len(wanted & _item_stems(text)) / len(wanted)


@dataclass
class PreDecision:
    """The decision before any answerer runs. `decision` None means: go on and answer."""

    decision: Decision | None
    reason: str = ""
    message: str = ""
    clarifying_questions: list[str] = field(default_factory=list)
    content_words: list[str] = field(default_factory=list)
    best_coverage: float = 0.0
    pack_coverage: float = 0.0
    # ASK_CLARIFYING: the suggestions as choices the page offers (`clarifying_choices`).
    choices: list[ClarifyingChoice] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The stored decision; `choices` only when there are some, so a trace stored before
        choices existed writes back key for key."""
        data: dict[str, Any] = {
            "decision": str(self.decision) if self.decision else None,
            "reason": self.reason,
            "message": self.message,
            "clarifying_questions": list(self.clarifying_questions),
            "content_words": list(self.content_words),
            "best_coverage": round(self.best_coverage, 6),
            "pack_coverage": round(self.pack_coverage, 6),
        }
        if self.choices:
            data["choices"] = [choice.as_dict() for choice in self.choices]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PreDecision:
        """The decision `as_dict` wrote (coverages as stored, already rounded)."""
        decision = data.get("decision")
        return cls(
            decision=Decision(decision) if decision else None,
            reason=data.get("reason", ""),
            message=data.get("message", ""),
            clarifying_questions=list(data.get("clarifying_questions", [])),
            content_words=list(data.get("content_words", [])),
            best_coverage=data.get("best_coverage", 0.0),
            pack_coverage=data.get("pack_coverage", 0.0),
            choices=[ClarifyingChoice.from_dict(c) for c in data.get("choices", [])],
        )


def _top_items(pack: EvidencePack) -> list[PackItem]:
    """The items suggestions are drawn from: the top search hits (the pinned note's own
    passages only when there are no hits)."""
    hits = [item for item in pack.items if not item.pinned]
    return (hits or pack.items)[:SUGGEST_FROM]


def _top_titles(top: Sequence[PackItem]) -> list[tuple[str, int]]:
    """(title, document id) of the top items' documents, first appearance first."""
    titles: list[tuple[str, int]] = []
    for item in top:
        if item.document_title and all(d != item.document_id for _, d in titles):
            titles.append((item.document_title, item.document_id))
    return titles


def _frequent_words(question: str, top: Sequence[PackItem]) -> list[str]:
    """Words of the top items the question lacks (not even inflected: "backup" is not
    suggested for "backups"), in most items first (then alphabetical)."""
    asked = _stems(tokens(question))
    counts: Counter[str] = Counter()
    for item in top:
        item_words = {
            w
            for w in tokens(item.text)
            if w not in SUGGESTION_STOPWORDS
            and len(w) >= 3
            and not w.isdigit()
            and fold(w) not in asked
        }
        counts.update(item_words)
    frequent: list[str] = []
    for word, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if fold(word) not in asked:
            asked.add(fold(word))  # one spelling per stem
            frequent.append(word)
    return frequent


def clarifying_questions(question: str, pack: EvidencePack, words: Sequence[str]) -> list[str]:
    """1–3 targeted questions: what a pronoun refers to, the top documents' titles, and the
    words most of the top items share that the question lacks. Deterministic."""
    questions: list[str] = []
    deictic = next((w for w in tokens(question) if w in DEICTIC_WORDS), None)
    if deictic:
        questions.append(
            f"What does “{deictic}” refer to? Name the note, system or error you mean."
        )
    top = _top_items(pack)
    titles = [title for title, _ in _top_titles(top)]
    if titles:
        shown = " or ".join(f"“{t}”" for t in titles[:2])
        questions.append(f"Do you mean {shown}?")
    frequent = _frequent_words(question, top)
    if frequent:
        questions.append(f"Are you asking about {', '.join(frequent[:3])}?")
    if not questions:
        questions.append("Which note, system or term is this about?")
    return questions[:MAX_CLARIFYING]


def clarifying_choices(question: str, pack: EvidencePack) -> list[ClarifyingChoice]:
    """The suggestions as choices that rewrite the question (deterministic):

    * **ask one top document** — the same question pinned to that document ("ask about this
      note"), so it is answered from that document's passages first: up to
      `MAX_SCOPE_CHOICES` of the top documents;
    * **add a word** — the question with one word the top items share and it lacks appended
      ("backups?" → "backups alerts?"), which also makes it specific enough to answer.

    Nothing is offered for an empty pack (there is nothing to scope to or borrow from)."""
    top = _top_items(pack)
    base = question.strip().rstrip("?!.").strip()
    if not top or not base:
        return []
    mark = "?" if question.strip().endswith("?") else ""
    choices = [
        ClarifyingChoice(label=f"Ask “{title}”", question=question.strip(), pinned_document_id=d)
        for title, d in _top_titles(top)[:MAX_SCOPE_CHOICES]
        if not any(item.pinned and item.document_id == d for item in pack.items)
    ]
    for word in _frequent_words(question, top)[: MAX_CHOICES - len(choices)]:
        choices.append(ClarifyingChoice(label=f"Add “{word}”", question=f"{base} {word}{mark}"))
    return choices


def query_error_choices(question: str) -> list[ClarifyingChoice]:
    """For a question search could not run because of a filter: the question without its
    `key:value` filters (found by the parser's own pattern), if words are left to ask."""
    pieces = [m.group(0) for m in PIECE_RE.finditer(question) if m.group("key") is None]
    rest = " ".join(pieces).strip()
    if not tokens(rest) or rest == question.strip():
        return []
    return [ClarifyingChoice(label="Ask without the filters", question=rest)]


def decide_before_answer(
    question: str, pack: EvidencePack, *, parsed: ParsedQuery | None = None
) -> PreDecision:
    """ASK_CLARIFYING, ABSTAIN_NO_EVIDENCE, or None (answer), in this order.
    `parsed` (the search's parsed query) lets quoted phrases and identifiers count as
    specific.

    1. ASK_CLARIFYING when the question is too short or too vague to retrieve on: fewer than
       `MIN_CONTENT_WORDS` (2) content words. Content words are the question's words minus stop
       words, question words, pronouns and generic verbs ("fix", "work", "mean" …; the
       `retrieval.text` lists) and minus `QUESTION_FRAME_WORDS`: time and aspect words ("now",
       "currently", "still", "today", "ever"), hedges ("actually", "really"), speech and
       decision verbs ("decide", "decision", "agreed", "said", "mention", "plan"), what is left
       of a negated auxiliary ("didn"), generic verbs of taking place ("run", "occur") and the
       prepositions the shared lists lack ("during", "after" …) — the list says why each class
       frames a question rather than naming its topic. They are matched as typed, never by stem
       ("currently" is filler, "current" is not). A speech or decision verb still counts towards
       the two words (it says which kind of passage is wanted: "What did we decide about
       backups?" is a question, "backups?" is not), and so does nothing else of that list. A
       quoted phrase, an identifier (`allkeys-lru`, `nginx.conf`) or a word typed as a name
       (`named_words`: "RPO", "ShipBridge", "Keycloak" after the first word, "Auth0") counts as
       specific enough on its own. A bare deictic question ("what about it?", "how do I fix
       this") falls under the same rule, and its first clarifying question asks what the pronoun
       refers to. With a pinned note ("ask about this note") the note *is* the referent, so only
       a question with no words at all is sent back. The 1–3 clarifying questions are built from
       what is there: the titles of the top documents in the pack ("Do you mean …?") and the
       words that occur in most of the top pack items but not in the question, in no inflection
       ("Are you asking about …?"). The page offers them as choices (`clarifying_choices`), each
       a question to ask at once: the same question pinned to one of the top two documents, or
       the question with one of those words added ("backups?" → "backups alerts?").
    2. ABSTAIN_NO_EVIDENCE when the pack is empty, or the words are not there: no single pack
       item covers at least `MIN_COVERAGE` (half) of the question's content words, or the pack
       as a whole holds fewer than `MIN_PACK_COVERAGE` (80%) of them (stemmed, as the index
       folds them; an item's text, its document title and its heading path count —
       `item_coverage_text`: a step under "Failover › Promote the replica" covers "promote" and
       "replica"). The second test catches the topic word the library has never heard of
       ("rugby", "Paraguay", "sourdough"): lexical search ORs the words, so a word that exists
       in the library almost always shows up in some top item. This is also the rule for
       meaning-only hits: the dense leg always returns *something* (every cosine is above zero),
       so a semantic-only hit counts only through the words it shares, like any other item. A
       paraphrase with no word in common is left to a model answerer only when the user pins the
       note: a pinned note is never abstained on before answering (the gate still guards the
       result).
    """
    words = content_words(question)
    pinned = any(item.pinned for item in pack.items)
    specific = bool(parsed and (parsed.phrases or parsed.needles)) or bool(
        set(words) & named_words(question)
    )
    all_words = tokens(question)
    # A framing verb ("decide", "said") is not searched for, but it narrows what is asked.
    framing = 1 if words and any(w in QUESTION_FRAMING_VERBS for w in all_words) else 0
    too_vague = (
        (not all_words) if pinned else (len(words) + framing < MIN_CONTENT_WORDS and not specific)
    )
    if too_vague:
        return PreDecision(
            Decision.ASK_CLARIFYING,
            reason=f"{len(words)} content word(s): {', '.join(words) or 'none'}",
            message=CLARIFY_MESSAGE,
            clarifying_questions=clarifying_questions(question, pack, words),
            content_words=words,
            choices=clarifying_choices(question, pack),
        )
    if not pack.items:
        return PreDecision(
            Decision.ABSTAIN_NO_EVIDENCE,
            reason="the evidence pack is empty",
            message=ABSTAIN_MESSAGE,
            content_words=words,
        )
    if pinned:
        return PreDecision(None, reason="pinned note", content_words=words)
    # Identifiers and phrases count by their words too (`allkeys-lru` → allkeys, lru).
    wanted = _stems(words or [w for w in all_words if w not in NON_CONTENT])
    seen: set[str] = set()
    best = 0.0
    for item in pack.items:
        stems = _item_stems(item_coverage_text(item))
        seen |= stems & wanted
        if wanted:
            best = max(best, len(wanted & stems) / len(wanted))
    whole = len(seen) / len(wanted) if wanted else 0.0
    if best < MIN_COVERAGE or whole < MIN_PACK_COVERAGE:
        missing = sorted(wanted - seen)
        return PreDecision(
            Decision.ABSTAIN_NO_EVIDENCE,
            reason=f"best item covers {best:.0%} of the question's content words (needs "
            f"{MIN_COVERAGE:.0%}), the pack {whole:.0%} (needs {MIN_PACK_COVERAGE:.0%}); "
            f"not found: {', '.join(missing) or 'none'}",
            message=ABSTAIN_MESSAGE,
            content_words=words,
            best_coverage=best,
            pack_coverage=whole,
        )
    return PreDecision(
        None,
        reason="evidence shares the question's words",
        content_words=words,
        best_coverage=best,
        pack_coverage=whole,
    )


# --- conflicts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """A sentence some source states, with where it comes from. `start`/`end` are code-point
    offsets in the version body when known (pack items), else None."""

    text: str
    document_id: int
    document_title: str
    version_id: int
    trust_tier: str
    origin: str  # "claim" (a surviving claim's text or span) or "evidence" (a pack item)
    claim: str = ""
    start: int | None = None
    end: int | None = None


@dataclass(frozen=True)
class Fact:
    subject_key: str  # what facts are grouped by
    subject: str  # shown to the user
    value_key: str  # what values are compared by
    value: str  # shown to the user


NUMBER_MARK = "lodenumber"  # what a number becomes in a numeric template, before tokenising
MAX_TEMPLATE_NUMBERS = 3
MIN_TEMPLATE_WORDS = 3
CONNECTOR_RE = re.compile(
    r"\s*(?:\b(?:is|are|was|were)\s+(?:now\s+|currently\s+)?(?:set\s+to\s+)?|"
    r"\bequals\s+|\bset\s+to\s+|\bdefaults\s+to\s+|\bshould\s+be\s+|\bmust\s+be\s+|"
    r"\s=\s*|=\s*|:\s+)",
    re.IGNORECASE,
)
MAX_VALUE_WORDS = 3
MAX_SUBJECT_WORDS = 3


def _content(words: Iterable[str]) -> list[str]:
    non_content = QUERY_STOPWORDS | CONFLICT_NEGATIONS
    return [w for w in words if w not in non_content and w != "t"]


def _value_ok(value_words: list[str], raw: str) -> bool:
    if not value_words or len(value_words) > MAX_VALUE_WORDS:
        return False
    core = [w for w in value_words if w not in CONFLICT_NEGATIONS and w != "t"]
    if not core:
        return False
    if any(ch.isdigit() for ch in raw):
        return True
    if IDENTIFIER_VALUE_RE.match(raw.split()[-1]):
        return True
    return len(core) == 1 and core[0] in STATE_WORDS


def facts(sentence: str) -> list[Fact]:
    """The (subject, value) facts one sentence states, by the three heuristics."""
    found: list[Fact] = []
    words = list(tokens(sentence))
    # key/value
    for m in CONNECTOR_RE.finditer(sentence):
        left, right = sentence[: m.start()], sentence[m.end() :]
        raw_value = right.strip().rstrip(".!?;,").strip()
        value_words = list(tokens(raw_value))
        if not _value_ok(value_words, raw_value):
            continue
        subject_words = _content(tokens(left))[-MAX_SUBJECT_WORDS:]
        if not subject_words:
            continue
        found.append(
            Fact(
                subject_key="kv:" + " ".join(fold(w) for w in subject_words),
                subject=" ".join(subject_words),
                value_key=" ".join(fold(w) for w in value_words),
                value=raw_value,
            )
        )
        break
    # numeric template: a few numbers in a sentence of at least three other content words
    # (a sentence of statistics — "1.29, 95% CI 1.02-1.63" — is not one value of one thing)
    numbers = NUMBER_IN_TEXT_RE.findall(sentence)
    template_words = _content(tokens(NUMBER_IN_TEXT_RE.sub(f" {NUMBER_MARK} ", sentence)))
    template = ["#" if w == NUMBER_MARK else fold(w) for w in template_words]
    if (
        1 <= len(numbers) <= MAX_TEMPLATE_NUMBERS
        and len([t for t in template if t != "#"]) >= MIN_TEMPLATE_WORDS
    ):
        found.append(
            Fact(
                subject_key="num:" + " ".join(template),
                subject=" ".join("#" if w == NUMBER_MARK else w for w in template_words),
                value_key=" ".join(n.replace(",", "") for n in numbers),
                value=" ".join(numbers),
            )
        )
    # polarity
    content = _content(words)
    negated = any(w in CONFLICT_NEGATIONS for w in words) or bool(NT_SUFFIX_RE.search(sentence))
    plain = [fold(w) for w in content]
    if len(plain) >= 2:
        found.append(
            Fact(
                subject_key="pol:" + " ".join(plain),
                subject=" ".join(content),
                value_key="negated" if negated else "affirmed",
                value=sentence.strip(),
            )
        )
    return found


def _statement_facts(statement: Statement) -> list[tuple[Fact, Statement]]:
    out = []
    for start, end in sentence_spans(statement.text):
        piece = statement.text[start:end]
        sub = Statement(
            text=piece,
            document_id=statement.document_id,
            document_title=statement.document_title,
            version_id=statement.version_id,
            trust_tier=statement.trust_tier,
            origin=statement.origin,
            claim=statement.claim,
            start=None if statement.start is None else statement.start + start,
            end=None if statement.start is None else statement.start + end,
        )
        out.extend((fact, sub) for fact in facts(piece))
    return out


def find_conflicts(
    claim_statements: Sequence[Statement], evidence_statements: Sequence[Statement] = ()
) -> list[dict[str, Any]]:
    """Subjects on which two documents state different values.

    Statements are the sentences of the surviving claims (claim text and verified quoted spans)
    and, for subjects a claim raised, the sentences of the pack's evidence items. Three lexical
    heuristics give a statement its (subject, value) facts:

    * **key/value**: "<subject> is|are|was|=|:|equals|set to|defaults to <value>" where the
      value is short (≤ 3 words) and carries a number, an identifier (`allkeys-lru`) or a state
      word (enabled, disabled, true, off …), optionally negated. The subject is the last three
      content words before the connector. "The staging timeout is 30 seconds" → (staging
      timeout, 30 seconds).
    * **numeric template**: the sentence's content words with every free-standing number
      replaced by `#`; two sentences with the same template (≥ 3 words besides numbers, at most
      3 numbers — a sentence of statistics is not one value of one thing) and different numbers
      conflict ("run the backup every 6 hours" / "… every 12 hours").
    * **polarity**: the same content words, one negated and the other not ("backups are
      encrypted" / "backups are not encrypted").

    A conflict needs a *claimed* value and a different value from another document; evidence
    only speaks for documents no claim on that subject came from (another value inside a claimed
    document is its history or detail, not a second source). Each conflict lists every
    (document, value), the higher trust tier first (`retrieval.trust.tier_order`: note >
    annotation > current external > stale external > inferred); the page shows them all, the
    leading one first. Limits, stated plainly: subjects must use the same words (no synonyms:
    "timeout" vs "time limit" is missed); units are not converted ("30 s" vs "0.5 min" is
    reported as a conflict); long free-text values and scope ("in staging" vs "in production" in
    another clause) are not understood, so a false conflict is possible — it costs little, since
    both sides are verified evidence shown with their tiers, never a hidden choice. Two values
    inside one document are not a conflict (a note may record history).

    Evidence statements only join a subject some claim statement raised. Returns
    [{"subject", "kind", "values": [{"value", "trust_tier", "document_id", "document_title",
    "version_id", "statement", "claim", "origin", "start", "end"}], "leading_tier"}], each
    conflict's values ordered by trust tier (highest first), claims before evidence, then
    order of appearance; conflicts in the order their subject first appeared.
    """
    grouped: dict[str, list[tuple[Fact, Statement]]] = {}
    for statement in claim_statements:
        for fact, sub in _statement_facts(statement):
            grouped.setdefault(fact.subject_key, []).append((fact, sub))
    for statement in evidence_statements:
        for fact, sub in _statement_facts(statement):
            if fact.subject_key in grouped:
                grouped[fact.subject_key].append((fact, sub))
    conflicts: list[dict[str, Any]] = []
    for key, all_rows in grouped.items():
        claimed = {(s.document_id, f.value_key) for f, s in all_rows if s.origin == "claim"}
        claim_documents = {d for d, _ in claimed}
        # Evidence speaks only for documents no claim on this subject came from: another value
        # inside a claimed document is that document's history or detail, not a second source.
        rows = [
            (f, s)
            for f, s in all_rows
            if s.origin == "claim" or s.document_id not in claim_documents
        ]
        pairs = {(s.document_id, f.value_key) for f, s in rows}
        # A conflict needs a claimed value and a different value from another document.
        if not any(d1 != d2 and v1 != v2 for d1, v1 in claimed for d2, v2 in pairs):
            continue
        values: list[dict[str, Any]] = []
        seen: set[tuple[int, str]] = set()
        ordered = sorted(
            enumerate(rows),
            key=lambda ir: (tier_order(ir[1][1].trust_tier), ir[1][1].origin != "claim", ir[0]),
        )
        for _, (fact, sub) in ordered:
            if (sub.document_id, fact.value_key) in seen:
                continue
            seen.add((sub.document_id, fact.value_key))
            values.append(
                {
                    "value": fact.value,
                    "trust_tier": sub.trust_tier,
                    "document_id": sub.document_id,
                    "document_title": sub.document_title,
                    "version_id": sub.version_id,
                    "statement": sub.text,
                    "claim": sub.claim,
                    "origin": sub.origin,
                    "start": sub.start,
                    "end": sub.end,
                }
            )
        conflicts.append(
            {
                "subject": rows[0][0].subject,
                "kind": key.split(":", 1)[0],
                "values": values,
                "leading_tier": values[0]["trust_tier"],
            }
        )
    return _drop_shadowed(conflicts)


def _drop_shadowed(conflicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One sentence pair can trip several heuristics (a key/value and its numeric template):
    keep the first conflict per set of (document, statement) pairs."""
    kept: list[dict[str, Any]] = []
    seen: set[frozenset[tuple[int, str]]] = set()
    for conflict in conflicts:
        key = frozenset((v["document_id"], v["statement"]) for v in conflict["values"])
        if key in seen:
            continue
        seen.add(key)
        kept.append(conflict)
    return kept


def claim_statements(claims: Sequence[ShownClaim]) -> list[Statement]:
    """The statements of surviving claims: each verified span, and the claim text attributed
    to the document of its first span."""
    out: list[Statement] = []
    for claim in claims:
        for i, support in enumerate(claim.support):
            common = {
                "document_id": support.document_id,
                "document_title": support.document_title,
                "version_id": support.version_id,
                "trust_tier": support.trust_tier,
                "origin": "claim",
                "claim": claim.text,
            }
            out.append(
                Statement(text=support.quoted_span, start=support.start, end=support.end, **common)
            )
            if i == 0 and claim.text.strip() != support.quoted_span.strip():
                out.append(Statement(text=claim.text, **common))
    return out


def evidence_statements(pack: EvidencePack) -> list[Statement]:
    """Each pack item as a statement, with its body offsets (so a conflicting sentence found
    there can be shown in context without searching for it)."""
    return [
        Statement(
            text=item.text,
            document_id=item.document_id,
            document_title=item.document_title,
            version_id=item.version_id,
            trust_tier=item.trust_tier,
            origin="evidence",
            start=item.start,
            end=item.end,
        )
        for item in pack.items
    ]


def decide_after_gate(
    claims: Sequence[ShownClaim], conflicts: Sequence[dict[str, Any]]
) -> tuple[Decision, str]:
    """The final decision and the message shown with it, from the claims that survived the
    gate *and* could be shown (each with a located span)."""
    if not claims:
        return Decision.ABSTAIN_NO_EVIDENCE, ABSTAIN_MESSAGE
    if conflicts:
        return (
            Decision.ANSWER_WITH_CONFLICTS,
            "Your sources disagree; both are shown, the more trusted first.",
        )
    return Decision.ANSWER, ""


# --- the best match ------------------------------------------------------------------------------

# The lowest relevance score (the fitted scorer's probability, 0–1) a claim dropped at the
# relevance step may have to be shown as *Best match — check it* when no claim passed.
# `LODE_BEST_MATCH_FLOOR` overrides it. Chosen by bench/best_match_floor.py on the tune halves
# of the notes, lab and café question sets (hybrid, extractive answerer, relevance threshold
# 0.30): the floor with the most right best matches − ½ × near-topic best matches. At 0.11,
# 103 of 215 answerable questions show the answer first (73 as an Answer, 30 as a Best match;
# 14 others a wrong Best match) and 44 of 194 near-topic questions show a Best match; a floor
# of 0.29 shows almost none (75 of 215), 0.05 twice as many near-topic ones (81) for 10 more.
BEST_MATCH_FLOOR = 0.11


def best_match_candidates(verdicts: Sequence[ClaimVerdict], floor: float) -> list[ClaimVerdict]:
    """The verdicts that may be shown as the best match, best first (the highest relevance
    score; ties in the answerer's order): claims that passed every faithfulness step
    (verbatim, coupling with its negation cues, entailment) and were dropped only because
    the fitted relevance scorer put them below the threshold, at a score of at least
    `floor`. Never a claim an answer-shape rule dropped (it cannot answer by its own words),
    one an LLM judge said does not answer, one whose relevance could not be checked, or one
    hidden from its reader."""
    eligible = [
        (index, verdict)
        for index, verdict in enumerate(verdicts)
        if not verdict.passed
        and not verdict.hidden
        and verdict.step == STEP_RELEVANCE
        and not verdict.shape_problem
        and verdict.reason.startswith(NOT_AN_ANSWER)
        and not verdict.reason.startswith(JUDGE_SAYS_NOT_AN_ANSWER)
        and verdict.relevance_score is not None
        and math.isfinite(verdict.relevance_score)
        and verdict.relevance_score >= floor
    ]
    eligible.sort(key=lambda pair: (-(pair[1].relevance_score or 0.0), pair[0]))
    return [verdict for _, verdict in eligible]
