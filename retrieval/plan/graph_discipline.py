"""Graph discipline (seeds/lighthouse-spec.md "Graph Discipline Policy"):
the one rule deciding whether a search or an ask follows links at all.

"Graph retrieval is invoked only when the planner flags multi-hop / entity-relational /
cross-doc dependency. Otherwise graph is skipped to avoid noise." Expansion adds passages
the query did not find on its own, so it is noise for a single-hop question; it runs only
when one of these rules fires, in this order (the first that fires names the decision):

1. `asked` / `not asked` — the user ticked or unticked *Follow links* (`follow_links` True or
   False): the rule below is not consulted.
2. `relational words` — the question says how things are connected: "depends on",
   "dependency", "linked to", "links to", "related to", "connected", "relationship",
   "upstream", "downstream", "between … and …".
3. `two named things` — the question names two visible documents by their title, or holds
   two capitalised names (runs of Capitalised words not at the start of the sentence).
4. `ownership` — it asks who stands behind a thing: "who owns", "owner", "owning team", "who
   is on call for", "who gets paged", "who do I page", "escalate", "tech lead", "lead of",
   "responsible for", "maintained by". These facts live on the team's or person's note, one
   link away from the thing's own note.
5. `why over a link` — a "why" question whose best hit links out (the reason is often in the
   linked decision record).
6. `named note links out` — the question names one visible document by title, that
   document links out, and its best passage does not hold every content word of the question:
   what is asked about the thing is not in the thing's own note, so it is probably one link
   away (a service's backup schedule lives on its datastore's note).

Otherwise `single hop`: expansion is skipped. Pure: the caller (graph_expand.py) looks up
the titles and links; this module only decides, so it is measured on question sets without a
database (bench/graph_quality.py reports its precision and recall on the linked questions).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.words.question_words import SENTENCE_OPENERS

RULE_ASKED = "asked"
RULE_NOT_ASKED = "not asked"
RULE_RELATIONAL = "relational words"
RULE_TWO_NAMED = "two named things"
RULE_OWNERSHIP = "ownership"
RULE_WHY = "why over a link"
RULE_NAMED_LINKS_OUT = "named note links out"
RULE_SINGLE_HOP = "single hop"
RULES = (
    RULE_ASKED,
    RULE_NOT_ASKED,
    RULE_RELATIONAL,
    RULE_TWO_NAMED,
    RULE_OWNERSHIP,
    RULE_WHY,
    RULE_NAMED_LINKS_OUT,
    RULE_SINGLE_HOP,
)

RELATIONAL = re.compile(
    r"\b(depends?\s+on|depend(?:s|ing)?\s+upon|dependenc(?:y|ies)|linked\s+(?:to|from|with)|"
    r"links?\s+(?:to|from)|related\s+to|relat(?:ion|ionship)s?\b|connected|connection|"
    r"upstream|downstream|between\b.+\band\b)",
    re.IGNORECASE,
)
# Case-sensitive on purpose for the nouns: "team" as a common noun asks about a relation,
# "Team Falcon" is a name.
OWNERSHIP = re.compile(
    r"(?i:\bwho\s+owns\b|\bowner\b|\bowners\b|\bowned\s+by\b|\bmaintained\s+by\b|"
    r"\bwho\b[^?]*\bon[\s-]call\s+for\b|\bon[\s-]call\s+for\b|\bwho\b[^?]*\bpaged\b|"
    r"\bwho\s+(?:do|should|can)\s+(?:i|we)\s+page\b|\bescalat\w*|\bresponsible\s+for\b|"
    r"\btech\s+lead\b|\blead\s+of\b)|\bowning\s+team\b|\bteam\s+lead\b"
)
WHY = re.compile(r"\bwhy\b", re.IGNORECASE)
# A name: two or more Capitalised words in a row (letters, digits, hyphens), or one
# Capitalised word with an inner capital or digit ("PagerDuty", "ADR-021").
NAME = re.compile(r"\b[A-Z][\w-]*(?:\s+(?:[A-Z0-9][\w-]*))+|\b[A-Z][a-z]+[A-Z0-9][\w-]*")


@dataclass(frozen=True)
class Facts:
    """What the rule reads besides the question, looked up by the caller.

    `named_titles`: titles of documents the user may see that the question names (their
    title, by `notes.models.title_key`, is a run of the question's words). `named_links_out`
    : one of those documents has a declared, resolved link out or in. `named_missing_words`
    : content words of the question absent from that document's best passage (and title).
    `top_hit_links_out`: the best hit's document has a declared, resolved link. The two link
    facts are looked up only when `reads_links` says the rule may read them (else False).
    """

    named_titles: tuple[str, ...] = ()
    named_links_out: bool = False
    named_missing_words: tuple[str, ...] = ()
    top_hit_links_out: bool = False


@dataclass(frozen=True)
class Discipline:
    """The decision: whether expansion runs, the rule that decided and why, in words."""

    run: bool
    rule: str
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {"run": self.run, "rule": self.rule, "reason": self.reason}


def capitalised_names(question: str) -> list[str]:
    """Runs of capitalised words in `question`, without a leading question word ("Who",
    "What") that only the start of the sentence capitalised."""
    names: list[str] = []
    for match in NAME.finditer(question):
        words = match.group(0).split()
        while words and words[0].casefold() in SENTENCE_OPENERS:
            words = words[1:]
        if len(words) >= 2 or (words and any(ch.isupper() or ch.isdigit() for ch in words[0][1:])):
            names.append(" ".join(words))
    return names


def reads_links(
    question: str, *, named_titles: Sequence[str], named_missing_words: Sequence[str]
) -> bool:
    """Whether `decide` may read the link facts (`named_links_out`, `top_hit_links_out`) for
    `question`: only for a "why" question, or when a named document's best passage lacks
    some of the question's words. The caller looks links up only then (a database query on
    every search otherwise; bench/request_cpu.py)."""
    return bool(WHY.search(question)) or bool(named_titles and named_missing_words)


def decide(question: str, *, follow_links: bool | None, facts: Facts = Facts()) -> Discipline:
    """Whether to follow links for `question` (see the module docstring for the rules)."""
    if follow_links is True:
        return Discipline(True, RULE_ASKED, "you asked to follow links")
    if follow_links is False:
        return Discipline(False, RULE_NOT_ASKED, "you asked not to follow links")
    relational = RELATIONAL.search(question)
    if relational:
        return Discipline(
            True, RULE_RELATIONAL, f"the question asks how things connect (“{relational[0]}”)"
        )
    named = _two_named(question, facts.named_titles)
    if named:
        return Discipline(True, RULE_TWO_NAMED, f"the question names {named}")
    owner = OWNERSHIP.search(question)
    if owner:
        return Discipline(
            True,
            RULE_OWNERSHIP,
            f"the question asks who stands behind something (“{owner[0]}”), usually one link away",
        )
    if WHY.search(question) and facts.top_hit_links_out:
        return Discipline(True, RULE_WHY, "a “why” question whose best hit links out")
    if facts.named_titles and facts.named_links_out and facts.named_missing_words:
        missing = ", ".join(facts.named_missing_words[:4])
        return Discipline(
            True,
            RULE_NAMED_LINKS_OUT,
            f"“{facts.named_titles[0]}” links out and its best passage lacks: {missing}",
        )
    return Discipline(False, RULE_SINGLE_HOP, "a single-hop question: links not followed")


def _two_named(question: str, titles: Sequence[str]) -> str:
    """Words for the two named things the question holds, or "" when it holds fewer."""
    distinct = list(dict.fromkeys(t.casefold() for t in titles))
    if len(distinct) >= 2:
        return f"two notes: “{titles[0]}” and “{titles[1]}”"
    # A name inside a title found is part of that one thing ("ADR-021 Secrets Storage for
    # Promotions Service" is one note, not two names).
    things = list(titles[:1]) + [
        name
        for name in dict.fromkeys(capitalised_names(question))
        if not any(name.casefold() in title for title in distinct)
    ]
    if len(things) >= 2:
        return f"two names: “{things[0]}” and “{things[1]}”"
    return ""
