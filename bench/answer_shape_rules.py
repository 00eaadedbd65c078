"""What each answer-shape rule (retrieval/answer/answer_shape.py) removes, per split.

    LODE_RELEVANCE_THRESHOLD=0.000001 .venv/bin/python bench/answer_quality.py --part notes
    .venv/bin/python bench/answer_shape_rules.py [--threshold 0.30]

Reads `bench/out/answer_quality_notes.json` (and the lab, cafe and scifact parts' when present),
whose gate rows record each claim's relevance score and, when a shape rule dropped it, why
(`shape_problem`). At `--threshold` (default: the shipped full model's) it replays the
relevance step twice — with the shape rules and as if they did not exist — and counts, per
rule and split, the asks each rule turned from an answer into an abstention: *false* answers
removed (near-topic unanswerable sets), *right* answers lost (a claim quoting the answering
text) and *wrong* answers removed (answerable questions answered with another text). A rule
earns its place when it removes false answers on `tune` at little cost in right ones; the
other splits are reported, never used to choose.

The replay without the rules is an approximation: with the rules, the extractive answerer
offers units the rules accept before those they reject, so the claims it offered differ a
little from what it offered before them. `bench/answer_quality.py` run at the commit before
and after gives the exact before and after.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from relevance_threshold import notes_right, scifact_right

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
RELEVANCE_FILE = ROOT / "retrieval" / "data" / "relevance.json"


def rule_of(problem: str) -> str:
    """The rule's short name from the reason it gave."""
    if problem.startswith("the question names"):
        return "named thing missing"
    if problem.startswith("the question asks about"):
        return "contrast swapped"
    return problem.split(",")[0].removeprefix("the question ").replace("it ", "")


def kept(row: dict[str, Any], threshold: float, *, rules: bool) -> list[dict[str, Any]]:
    return [
        g
        for g in row["gate"]
        if g["faithful"]
        and g["score"] is not None
        and (g["score"] >= threshold or g.get("section_match", False))
        and not (rules and g.get("shape_problem"))
    ]


def tally(
    rows: list[dict[str, Any]], threshold: float, right_of: Any | None
) -> tuple[Counter[tuple[str, str, str]], Counter[str]]:
    """(removed by (split, rule) and kind, totals by split): an ask counts under the rule
    that dropped its best claim when the rules leave it unanswered."""
    removed: Counter[tuple[str, str, str]] = Counter()
    totals: Counter[str] = Counter()
    for row in rows:
        split = row["split"]
        totals[split] += 1
        before = kept(row, threshold, rules=False)
        after = kept(row, threshold, rules=True)
        if before:
            totals[f"{split} answered"] += 1
        if after:
            totals[f"{split} answered with rules"] += 1
        if before and not after:
            best = max(before, key=lambda g: g["score"])
            rule = rule_of(best.get("shape_problem", ""))
            if right_of is None:
                kind = "false"
            else:
                kind = "right" if any(right_of(row, g) for g in before) else "wrong"
            removed[(split, rule, kind)] += 1
    return removed, totals


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    shipped = json.loads(RELEVANCE_FILE.read_text(encoding="utf-8"))
    default = float(shipped["models"]["full"]["threshold"])
    parser.add_argument("--threshold", type=float, default=default)
    args = parser.parse_args()
    parts = []
    for part in ("notes", "lab", "cafe", "scifact"):
        path = OUT / f"answer_quality_{part}.json"
        if path.is_file():
            parts.append((part, json.loads(path.read_text(encoding="utf-8"))))
    if not parts:
        raise SystemExit("run bench/answer_quality.py first (see above)")
    print(f"relevance threshold {args.threshold:g}")
    for part, report in parts:
        right_of = scifact_right if part == "scifact" else notes_right
        answerable = report["rows"]["answerable"]
        unanswerable = report["rows"]["unanswerable"]
        removed, totals = tally(answerable, args.threshold, right_of)
        removed_false, totals_false = tally(unanswerable, args.threshold, None)
        removed.update(removed_false)
        print(f"\n== {part}")
        # counts only, never rows: a kept-apart split's questions stay unread
        for split in ("tune", "holdout", "fresh", "fresh2"):
            if not totals[split]:
                continue
            print(
                f"{split:<8} answerable answered {totals[f'{split} answered']}/{totals[split]}"
                f" → {totals[f'{split} answered with rules']};  near-topic false "
                f"{totals_false[f'{split} answered']}/{totals_false[split]} → "
                f"{totals_false[f'{split} answered with rules']}"
            )
            rules = sorted({rule for (s, rule, _) in removed if s == split})
            for rule in rules:
                counts = {k: removed[(split, rule, k)] for k in ("false", "right", "wrong")}
                print(
                    f"   {rule:<40} false −{counts['false']}  right −{counts['right']}  "
                    f"wrong −{counts['wrong']}"
                )


if __name__ == "__main__":
    main()
