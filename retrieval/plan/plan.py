"""The retrieval plan (seeds/lighthouse-spec.md "Planner", "RetrievalPlan"): made before
retrieval from the question and what the asker may see, stored in the ask's trace, replayed,
and shown in words under *Advanced* on the answer page.

    rules_plan()   pure: the question's typing (`question.question_profile`), the first row of
                   the intent table that fires (`rules.INTENT_RULES`: intent, answer shape,
                   links, budget, what counts as enough), the legs of the search mode asked,
                   the narrowing cues (`narrowing.cues_in`, relative to the `today` given)
    plan_for()     `rules_plan` + the cues resolved against the asker's documents
                   (`catalog.resolve`)

Links: the user's *Follow links* choice wins; a row whose words are the graph discipline's own
reasons to follow ("depends on", "who owns") follows; any other row leaves the decision to the
graph discipline rule after search (`graph_discipline.decide`, which reads the hits).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any, Self

from retrieval.eligibility import Audience
from retrieval.plan.catalog import resolve
from retrieval.plan.narrowing import Narrowing, cues_in
from retrieval.plan.question import question_profile
from retrieval.plan.rules import LINKS_FOLLOW, RULES_VERSION, first_rule

LEGS = {"hybrid": ("lexical", "semantic"), "lexical": ("lexical",), "semantic": ("semantic",)}
LEG_WORDS = {"lexical": "words (full text)", "semantic": "meaning (vectors)"}

LINKS_ASKED = "asked"
LINKS_NOT_ASKED = "not asked"


@dataclass(frozen=True)
class Budget:
    """How much the ask may gather: search hits, the evidence pack's items and characters,
    and the ask's time budget in seconds (0: none)."""

    search_hits: int
    max_items: int
    max_chars: int
    seconds: int

    def as_dict(self) -> dict[str, int]:
        return {
            "search_hits": self.search_hits,
            "max_items": self.max_items,
            "max_chars": self.max_chars,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        data = data if isinstance(data, dict) else {}
        return cls(
            search_hits=int(data.get("search_hits") or 0),
            max_items=int(data.get("max_items") or 0),
            max_chars=int(data.get("max_chars") or 0),
            seconds=int(data.get("seconds") or 0),
        )


@dataclass
class RetrievalPlan:
    """One question's plan. `follow_links` is what search is told (None: the graph rule
    decides after search); `links` says why in one word (`LINKS_*` or the rule's links)."""

    rules_version: str
    today: date
    intent: str
    rule: str
    fired: str
    kind: str
    shape: str
    enough: str
    legs: tuple[str, ...]
    links: str
    follow_links: bool | None
    budget: Budget
    narrowing: Narrowing = field(default_factory=Narrowing)
    refined: list[str] = field(default_factory=list)
    refined_by: str = ""
    refinement: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    # Whether the claims shown were enough for `enough` (`enough.enough_for`), and why; None
    # until claims are shown.
    enough_met: bool | None = None
    enough_why: str = ""

    @property
    def search_follow_links(self) -> bool | None:
        """What search is told about links: the user's or the model's choice as made; for a
        rule that follows, None, since the graph discipline rule reads the same words after
        search and records its own reason (the two agree by construction)."""
        if self.links in (LINKS_ASKED, LINKS_NOT_ASKED) or "links" in self.refined:
            return self.follow_links
        return None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "rules_version": self.rules_version,
            "today": self.today.isoformat(),
            "intent": self.intent,
            "rule": self.rule,
            "fired": self.fired,
            "kind": self.kind,
            "shape": self.shape,
            "enough": self.enough,
            "legs": list(self.legs),
            "links": self.links,
            "follow_links": self.follow_links,
            "budget": self.budget.as_dict(),
            "narrowing": self.narrowing.as_dict(),
            "notes": list(self.notes),
        }
        if self.enough_met is not None:
            data["enough_met"] = self.enough_met
            data["enough_why"] = self.enough_why
        if self.refined_by:
            data["refined_by"] = self.refined_by
            data["refined"] = list(self.refined)
            data["refinement"] = self.refinement
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        data = data if isinstance(data, dict) else {}
        try:
            today = date.fromisoformat(str(data.get("today")))
        except ValueError:
            today = date.min
        follow = data.get("follow_links")
        refinement = data.get("refinement")
        return cls(
            rules_version=str(data.get("rules_version") or ""),
            today=today,
            intent=str(data.get("intent") or ""),
            rule=str(data.get("rule") or ""),
            fired=str(data.get("fired") or ""),
            kind=str(data.get("kind") or ""),
            shape=str(data.get("shape") or ""),
            enough=str(data.get("enough") or ""),
            legs=tuple(str(leg) for leg in data.get("legs") or ()),
            links=str(data.get("links") or ""),
            follow_links=follow if isinstance(follow, bool) else None,
            budget=Budget.from_dict(data.get("budget")),
            narrowing=Narrowing.from_dict(data.get("narrowing")),
            refined=[str(v) for v in data.get("refined") or []],
            refined_by=str(data.get("refined_by") or ""),
            refinement=refinement if isinstance(refinement, dict) else None,
            notes=[str(v) for v in data.get("notes") or []],
            enough_met=met if isinstance(met := data.get("enough_met"), bool) else None,
            enough_why=str(data.get("enough_why") or ""),
        )


def search_hits(max_items: int) -> int:
    """How many hits to ask search for by default: twice the pack's item budget (room for
    dedup), at least 20."""
    return max(2 * max_items, 20)


def rules_plan(
    question: str,
    *,
    today: date,
    mode: str,
    follow_links: bool | None,
    max_items: int,
    max_chars: int,
    seconds: int,
) -> RetrievalPlan:
    """The plan the rules make for `question` (pure; `today` anchors relative periods).
    Narrowing holds the cues only: `plan_for` resolves them."""
    profile = question_profile(question)
    rule, fired = first_rule(question, profile)
    if follow_links is True:
        links, follow = LINKS_ASKED, True
    elif follow_links is False:
        links, follow = LINKS_NOT_ASKED, False
    else:
        links = rule.links
        follow = True if rule.links == LINKS_FOLLOW else None
    return RetrievalPlan(
        rules_version=RULES_VERSION,
        today=today,
        intent=rule.intent,
        rule=rule.name,
        fired=fired,
        kind=profile.kind or profile.intent,
        shape=rule.shape,
        enough=rule.enough,
        legs=LEGS.get(mode, ()),
        links=links,
        follow_links=follow,
        budget=Budget(
            search_hits=search_hits(max_items) * rule.budget,
            max_items=max_items,
            max_chars=max_chars,
            seconds=seconds,
        ),
        narrowing=Narrowing(cues=cues_in(question, today)),
    )


def resolved(plan: RetrievalPlan, audience: Audience) -> RetrievalPlan:
    """`plan` with its narrowing cues resolved against `audience`'s documents."""
    plan.narrowing = resolve(plan.narrowing.cues, audience)
    return plan


def plan_for(
    question: str,
    audience: Audience,
    *,
    today: date,
    mode: str,
    follow_links: bool | None,
    max_items: int,
    max_chars: int,
    seconds: int,
) -> RetrievalPlan:
    """The rules' plan for `question`, its narrowing resolved for `audience`."""
    plan = rules_plan(
        question,
        today=today,
        mode=mode,
        follow_links=follow_links,
        max_items=max_items,
        max_chars=max_chars,
        seconds=seconds,
    )
    return resolved(plan, audience)
