"""Benchmark: how often the planner's intent agrees with the intent written on each question.

    .venv/bin/python bench/plan_intents.py [--split tune|holdout]

For every answerable question set of `bench/data/questions/` whose rows carry an `intent`
(the school set is left out: nobody reads it before its report), the rules plan
(`retrieval.plan.plan.rules_plan`, pure: no database) is made for each row of the split and
its intent compared with the row's (`amount` is the planner's `number`, `yesno` its
`yes/no`). Prints agreement per set and the most common disagreements. The rules were
written looking at `tune` rows only; `holdout` is reported apart.

Some written intents cannot be read from words alone: a `latest` row is one whose answer
changed over time in that corpus ("what time is the morning handover"), which only the notes
say; the planner types it by its words (a time).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")

import django  # noqa: E402

django.setup()

from retrieval.plan.plan import rules_plan  # noqa: E402

SETS = ("notes", "notes_fresh", "notes_fresh2", "cafe", "lab", "ward", "lawfirm")
WRITTEN_AS = {"amount": "number", "yesno": "yes/no"}
TODAY = date(2026, 12, 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="tune", choices=("tune", "holdout", "fresh", "fresh2"))
    args = parser.parse_args()
    total = agreed = 0
    for name in SETS:
        path = ROOT / "bench" / "data" / "questions" / f"{name}_answerable.jsonl"
        rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]
        rows = [r for r in rows if r.get("split") == args.split and r.get("intent")]
        if not rows:
            continue
        misses: collections.Counter[tuple[str, str]] = collections.Counter()
        ok = 0
        for row in rows:
            plan = rules_plan(
                row["question"],
                today=TODAY,
                mode="hybrid",
                follow_links=None,
                max_items=12,
                max_chars=12_000,
                seconds=30,
            )
            written = WRITTEN_AS.get(row["intent"], row["intent"])
            if plan.intent == written:
                ok += 1
            else:
                misses[(written, plan.intent)] += 1
        total += len(rows)
        agreed += ok
        worst = ", ".join(f"{w}→{g} ×{n}" for (w, g), n in misses.most_common(3))
        print(f"{name:<13} {ok:>3} / {len(rows):<3} agree   most missed: {worst or '-'}")
    print(f"{'all':<13} {agreed:>3} / {total:<3} agree ({agreed / max(total, 1):.0%})")


if __name__ == "__main__":
    main()
