"""A retrieval plan in plain words: the lines the answer page shows under *Advanced*, and the
differences replay reports between a stored plan and the plan made again."""

from __future__ import annotations

from retrieval.plan.narrowing import kind_words
from retrieval.plan.plan import LEG_WORDS, LINKS_ASKED, LINKS_NOT_ASKED, RetrievalPlan
from retrieval.plan.rules import LINKS_FOLLOW, rule_named

INTENT_WORDS = {
    "fact": "a fact",
    "number": "a number or amount",
    "date": "a date or time",
    "who": "a person or team",
    "procedure": "how to do something",
    "decision": "a decision taken",
    "latest": "the latest state",
    "yes/no": "yes or no",
    "comparison": "a comparison",
    "list": "a list",
    "relational": "how things are connected",
}


def links_words(plan: RetrievalPlan) -> str:
    if plan.links == LINKS_ASKED:
        return "Links are followed: you asked to."
    if plan.links == LINKS_NOT_ASKED:
        return "Links are not followed: you asked not to."
    if plan.links == LINKS_FOLLOW:
        return "Links from the best notes are followed: the question asks how things connect."
    return "Links are followed only if the graph rule finds a reason after searching."


def narrowing_words(plan: RetrievalPlan) -> list[str]:
    narrowing = plan.narrowing
    named: list[str] = []
    if narrowing.notes:
        named.append("the note " + ", ".join(f"“{t}”" for t in narrowing.notes))
    if narrowing.kinds:
        named.append(", ".join(kind_words(k) for k in narrowing.kinds))
    if narrowing.tags:
        named.append("tag " + ", ".join(f"#{t}" for t in narrowing.tags))
    if narrowing.spaces:
        named.append("space " + ", ".join(f"“{s}”" for s in narrowing.spaces))
    if narrowing.sources:
        named.append("source " + ", ".join(f"“{s}”" for s in narrowing.sources))
    if narrowing.period is not None and narrowing.period_documents:
        named.append(f"notes dated {narrowing.period.label} (“{narrowing.period.words}”)")
    lines: list[str] = []
    if named:
        verb = "Narrowed to" if narrowing.applied else "Narrowing read"
        lines.append(f"{verb}: {'; '.join(named)}.")
    if narrowing.fallback:
        lines.append(narrowing.fallback)
    if not lines:
        lines.append("No narrowing: the question names no note, tag, space, source or date.")
    return lines


def plan_lines(plan: RetrievalPlan) -> list[str]:
    """The plan, one sentence a line, in the order it acts."""
    intent = INTENT_WORDS.get(plan.intent, plan.intent)
    # The words that fired a row on the question's words; a row on its typing names none.
    row = rule_named(plan.rule)
    quoted = row is not None and (row.pattern is not None or row.yes_no)
    fired = f" (“{plan.fired}”)" if plan.fired and quoted else ""
    lines = [
        f"Asks for {intent}: rule “{plan.rule}”{fired}.",
        f"Expected answer: {plan.shape}; enough when: {plan.enough}.",
        *narrowing_words(plan),
        "Searched by "
        + " and ".join(LEG_WORDS.get(leg, leg) for leg in plan.legs)
        + f", up to {plan.budget.search_hits} passages; the evidence holds at most "
        f"{plan.budget.max_items} passages ({plan.budget.max_chars:,} characters).",
        links_words(plan),
    ]
    if plan.enough_met is not None:
        verdict = "Enough" if plan.enough_met else "Less than expected"
        lines.append(f"{verdict} for this question: {plan.enough_why}.")
    if plan.refined_by:
        changed = ", ".join(plan.refined) if plan.refined else "nothing"
        lines.append(f"Refined by the model {plan.refined_by}: {changed}.")
    lines += plan.notes
    lines.append(f"Rules {plan.rules_version}.")
    return lines


def plan_differences(before: RetrievalPlan, now: RetrievalPlan) -> list[str]:
    """What changed between a stored plan and the plan made again, in words (empty: same)."""
    out: list[str] = []
    if before.rules_version != now.rules_version:
        out.append(f"plan rules differ: {before.rules_version} → {now.rules_version}")
    pairs = (
        ("intent", before.intent, now.intent),
        ("rule", before.rule, now.rule),
        ("answer shape", before.shape, now.shape),
        ("links", before.links, now.links),
        ("search budget", before.budget.search_hits, now.budget.search_hits),
        ("legs", list(before.legs), list(now.legs)),
    )
    for name, old, new in pairs:
        if old != new:
            out.append(f"plan {name} differs: {old} → {new}")
    old_narrowing, new_narrowing = before.narrowing.as_dict(), now.narrowing.as_dict()
    keys = ("notes", "kinds", "tags", "spaces", "sources", "period", "documents", "applied")
    for key in (*keys, "fallback"):
        if old_narrowing.get(key) != new_narrowing.get(key):
            out.append(
                f"plan narrowing {key} differs: {old_narrowing.get(key)!r} → "
                f"{new_narrowing.get(key)!r}"
            )
    return out
