"""The planner's intent rules, as data: an ordered table, the first row that fires names the
question's intent, the answer shape expected, whether links are followed, the search budget
and what counts as enough (docs/planner.md renders the same table; a test keeps the two
equal).

A row fires on the question's words (`pattern`, case-insensitive unless written otherwise)
or on its typing (`kind` / `typed_intent` of `retrieval.plan.question.QuestionProfile`), or
on both when both are given. Adding a rule is adding a row; changing a row changes
`RULES_VERSION`, which every stored plan carries, so replay can say the rules moved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from retrieval.plan.graph_discipline import OWNERSHIP, RELATIONAL
from retrieval.plan.question import (
    INTENT_DECISION,
    INTENT_PROCEDURE,
    KIND_COUNT,
    KIND_PERSON,
    KIND_PLACE,
    KIND_REASON,
    KIND_TIME,
    QuestionProfile,
)
from retrieval.words.question_words import WH_WORDS, YES_NO_OPENERS

RULES_VERSION = "plan-rules-2"

INTENT_FACT = "fact"
INTENT_NUMBER = "number"
INTENT_DATE = "date"
INTENT_WHO = "who"
INTENT_PROCEDURE_STEPS = "procedure"
INTENT_DECISION_ITEM = "decision"
INTENT_LATEST = "latest"
INTENT_YES_NO = "yes/no"
INTENT_COMPARISON = "comparison"
INTENT_LIST = "list"
INTENT_RELATIONAL = "relational"
INTENTS = (
    INTENT_FACT,
    INTENT_NUMBER,
    INTENT_DATE,
    INTENT_WHO,
    INTENT_PROCEDURE_STEPS,
    INTENT_DECISION_ITEM,
    INTENT_LATEST,
    INTENT_YES_NO,
    INTENT_COMPARISON,
    INTENT_LIST,
    INTENT_RELATIONAL,
)

# Whether links are followed: "follow" always (the rule's words are the graph discipline's
# own reasons to follow), "rule" lets the graph discipline rule decide after search (it reads
# the hits: a "why" whose best hit links out, a named note that links out).
LINKS_FOLLOW = "follow"
LINKS_RULE = "rule"

COMPARISON_RE = re.compile(
    r"\b(?:compare[sd]?|comparison|versus|vs\.?|difference\s+between|differ(?:s|ent)?\s+from|"
    r"better\s+than|worse\s+than|(?:worth|costs?)\s+(?:more|less)\s+than|"
    r"which\s+(?:is|was|are|were)\s+(?:more|less|better|worse|\w+er)\b)(?!\w)",
    re.IGNORECASE,
)
LATEST_RE = re.compile(
    r"\b(?:current(?:ly)?|now|latest|still|at\s+the\s+moment|these\s+days|nowadays|"
    r"most\s+recent(?:ly)?|as\s+of\s+today|today'?s|up\s+to\s+date)\b",
    re.IGNORECASE,
)
DECIDED_RE = re.compile(
    r"\b(?:did|have|had)\s+(?:we|they|you|the\s+\w+)\s+(?:ever\s+)?(?:decide|agree|choose|pick|"
    r"settle|opt|go\s+with)\b|\bwhy\s+did\s+(?:we|they|you)\s+(?:pick|choose|go\s+with|opt)\b",
    re.IGNORECASE,
)
PROCEDURE_RE = re.compile(
    r"\bwhat\s+(?:do|should|must)\s+(?:i|we|you)\s+do\b|\bwhat\s+are\s+the\s+steps\b|"
    r"\bwhat\s+happens\s+(?:on|when|after|at|during)\b|\bhow\s+does\s+(?:a|an|the)\s+[\w\s-]+\s+go\b",
    re.IGNORECASE,
)
PRICE_RE = re.compile(
    r"\bwhat\s+(?:does|do|did|will|would)\b[^?]*\bcost\b|"
    r"\bwhat\s+(?:fee|price|rate|cost|charge)s?\b",
    re.IGNORECASE,
)
LIST_RE = re.compile(
    r"^\s*(?:please\s+)?(?:list|enumerate|name\s+(?:all|every|the))\b|"
    r"\b(?:what|which|who)\s+(?:are|were)\s+(?:all\s+)?the\b|\ball\s+of\s+the\b|"
    r"\beach\s+of\s+the\b|\bwhat\s+(?:kinds|types|sorts)\s+of\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class IntentRule:
    """One row of the table. `when` is the row's condition in words (what the docs show);
    `pattern`, `kind` and `typed_intent` are how it is checked. `budget` multiplies the
    search's hit count (several values need more candidates than one)."""

    name: str
    intent: str
    when: str
    shape: str
    links: str
    budget: int
    enough: str
    pattern: re.Pattern[str] | None = None
    kind: str | None = None
    typed_intent: str | None = None
    yes_no: bool = False

    def fires(self, question: str, profile: QuestionProfile) -> str:
        """The words that made this row fire on `question`, or "" when it does not fire."""
        if self.kind is not None and profile.kind != self.kind:
            return ""
        if self.typed_intent is not None and profile.intent != self.typed_intent:
            return ""
        if self.yes_no and not yes_no_question(question):
            return ""
        if self.pattern is not None:
            match = self.pattern.search(question)
            if match is None:
                return ""
            return match.group(0).strip()
        if self.kind is not None:
            return f"a {self.kind} question"
        if self.typed_intent is not None:
            return f"a {self.typed_intent} question"
        if self.yes_no:
            return question.split()[0].strip("¿¡\"'“")
        return "no other rule fired"

    def cells(self) -> tuple[str, ...]:
        """The row as docs/planner.md's table shows it (same order as `TABLE_HEADER`)."""
        return (
            self.name,
            self.intent,
            self.when,
            self.shape,
            "follow" if self.links == LINKS_FOLLOW else "the graph rule decides",
            f"×{self.budget}",
            self.enough,
        )


TABLE_HEADER = (
    "rule",
    "intent",
    "fires when",
    "answer shape",
    "links",
    "search budget",
    "enough when",
)


def yes_no_question(question: str) -> bool:
    """Whether `question` opens with an auxiliary ("is", "does", "can" …) and holds no wh-word:
    a question answered yes or no ("can you tell me *when* …" asks for the time)."""
    words = re.findall(r"[\w']+", question.casefold())
    return bool(words) and words[0] in YES_NO_OPENERS and not any(w in WH_WORDS for w in words)


INTENT_RULES: tuple[IntentRule, ...] = (
    IntentRule(
        name="comparison words",
        intent=INTENT_COMPARISON,
        when="“compare”, “versus”, “difference between”, “better than”, “which is faster” …",
        shape="the values side by side, each cited",
        links=LINKS_RULE,
        budget=2,
        enough="a verified claim for each side",
        pattern=COMPARISON_RE,
    ),
    IntentRule(
        name="relational words",
        intent=INTENT_RELATIONAL,
        when="“depends on”, “linked to”, “related to”, “upstream”, “between … and …” …",
        shape="the connection, with the notes at both ends",
        links=LINKS_FOLLOW,
        budget=1,
        enough="a verified claim from each end of the link",
        pattern=RELATIONAL,
    ),
    IntentRule(
        name="ownership words",
        intent=INTENT_WHO,
        when="“who owns”, “owner”, “on call for”, “responsible for”, “tech lead” …",
        shape="a person or team",
        links=LINKS_FOLLOW,
        budget=1,
        enough="one verified claim naming them",
        pattern=OWNERSHIP,
    ),
    IntentRule(
        name="decided words",
        intent=INTENT_DECISION_ITEM,
        when="“did we decide / agree / choose / pick …”, “why did we choose …”",
        shape="a decision item (what was decided, when, by whom)",
        links=LINKS_RULE,
        budget=1,
        enough="one verified claim stating the decision",
        pattern=DECIDED_RE,
    ),
    IntentRule(
        name="steps words",
        intent=INTENT_PROCEDURE_STEPS,
        when="“what do I do”, “what are the steps”, “what happens when …”, “how does a … go”",
        shape="an ordered step list",
        links=LINKS_RULE,
        budget=1,
        enough="the steps, verified, in their note's order",
        pattern=PROCEDURE_RE,
    ),
    IntentRule(
        name="price words",
        intent=INTENT_NUMBER,
        when="“what does … cost”, “what fee”, “what price”, “what rate” …",
        shape="a single value with its unit",
        links=LINKS_RULE,
        budget=1,
        enough="one verified claim holding a number",
        pattern=PRICE_RE,
    ),
    IntentRule(
        name="latest state",
        intent=INTENT_LATEST,
        when="“current”, “now”, “latest”, “still”, “these days”, “most recent” …",
        shape="the newest-dated value (older ones superseded)",
        links=LINKS_RULE,
        budget=2,
        enough="the newest-dated verified claim",
        pattern=LATEST_RE,
    ),
    IntentRule(
        name="list words",
        intent=INTENT_LIST,
        when="opens with “list” or “name all”; “what / who are the”, “all of the”, “each of the” …",
        shape="a list of items",
        links=LINKS_RULE,
        budget=2,
        enough="two or more verified claims",
        pattern=LIST_RE,
    ),
    IntentRule(
        name="yes or no",
        intent=INTENT_YES_NO,
        when="opens with “is”, “are”, “does”, “can”, “should”, “was” … (and no wh-word)",
        shape="yes or no, with the sentence that says so",
        links=LINKS_RULE,
        budget=1,
        enough="one verified claim",
        yes_no=True,
    ),
    IntentRule(
        name="how many / how much",
        intent=INTENT_NUMBER,
        when="asks for a number: “how many”, “how much”, “how long”, “what dose” …",
        shape="a single value with its unit",
        links=LINKS_RULE,
        budget=1,
        enough="one verified claim holding a number",
        kind=KIND_COUNT,
    ),
    IntentRule(
        name="when",
        intent=INTENT_DATE,
        when="asks for a time: “when”, “how often”, “what date”, “which year” …",
        shape="a date or time",
        links=LINKS_RULE,
        budget=1,
        enough="one verified claim holding a date or time",
        kind=KIND_TIME,
    ),
    IntentRule(
        name="who",
        intent=INTENT_WHO,
        when="asks for a person: “who”, “whose”, “which person”, “what team” …",
        shape="a person or team",
        links=LINKS_RULE,
        budget=1,
        enough="one verified claim naming them",
        kind=KIND_PERSON,
    ),
    IntentRule(
        name="how to",
        intent=INTENT_PROCEDURE_STEPS,
        when="“how do I …”, “how can we …”, “how to …”",
        shape="an ordered step list",
        links=LINKS_RULE,
        budget=1,
        enough="the steps, verified, in their note's order",
        typed_intent=INTENT_PROCEDURE,
    ),
    IntentRule(
        name="decided",
        intent=INTENT_DECISION_ITEM,
        when="names deciding: “what did we decide”, “agreed”, “chose”, “outcome” …",
        shape="a decision item (what was decided, when, by whom)",
        links=LINKS_RULE,
        budget=1,
        enough="one verified claim stating the decision",
        typed_intent=INTENT_DECISION,
    ),
    IntentRule(
        name="where",
        intent=INTENT_FACT,
        when="asks for a place: “where”, “which room”, “what folder” …",
        shape="a place",
        links=LINKS_RULE,
        budget=1,
        enough="one verified claim naming the place",
        kind=KIND_PLACE,
    ),
    IntentRule(
        name="why",
        intent=INTENT_FACT,
        when="asks for a reason: “why”, “what reason”, “what cause” …",
        shape="a reason",
        links=LINKS_RULE,
        budget=1,
        enough="one verified claim giving the reason",
        kind=KIND_REASON,
    ),
    IntentRule(
        name="any other question",
        intent=INTENT_FACT,
        when="no rule above fired",
        shape="a sentence that states it",
        links=LINKS_RULE,
        budget=1,
        enough="one verified claim",
    ),
)


def first_rule(question: str, profile: QuestionProfile) -> tuple[IntentRule, str]:
    """The first row of `INTENT_RULES` that fires on `question`, and the words that fired it.
    The last row fires on anything, so there is always one."""
    for rule in INTENT_RULES:
        fired = rule.fires(question, profile)
        if fired:
            return rule, fired
    raise AssertionError("the last intent rule fires on every question")


def rule_named(name: str) -> IntentRule | None:
    return next((rule for rule in INTENT_RULES if rule.name == name), None)
