"""Choose the relevance floor of the *Best match — check it* tier on whole asks.

    .venv/bin/python bench/answer_quality.py --part corpora     # writes bench/out/*.json
    .venv/bin/python bench/best_match_floor.py [--dir bench/out] [--near-cost 0.5] [--wrong-cost 0]

With no claim passing the gate, lode shows as a *Best match* the verified claim the relevance
step dropped with the highest relevance score, when that score reaches a floor
(`retrieval.answer.decision.best_match_candidates`, `BEST_MATCH_FLOOR`). This script replays
that rule over the gate rows `bench/answer_quality.py` stores for each ask (every faithful
claim's relevance score, its answer-shape problem and its quotes) at every floor, on the `tune`
halves of the notes, lab and café question sets only:

* answerable questions: answered right at the shipped threshold (the *Answer* tier), and, of
  the ones not answered, those whose best match quotes the answering text (*right*) or not;
  *first thing shown carries the answer* = answered right + best match right;
* near-topic unanswerable questions: those shown a best match (a best match there is less
  harmful than a false answer, since the page says to check it, but it still counts).

**The rule**: the floor with the most right best matches − `--near-cost` × best matches on
near-topic questions − `--wrong-cost` × wrong best matches on answerable ones; ties to the
higher floor. A best match on a near-topic question costs half a recovered answer by default:
it is labelled as a sentence to check and shown in its passage (the *Not in your notes* page
shows the same closest passages, labelled as not answering), where a false *Answer* costs
three (`bench/relevance_threshold.py`). A wrong best match on an answerable question is
reported but not charged by default: without it that question would read *Not in your
notes*, which is as wrong. Columns with shape-dropped claims allowed are printed beside it
(the rule never shows them: a claim an answer-shape rule dropped cannot answer by its own
words).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("notes", "lab", "cafe")
FLOORS = [round(0.01 * i, 2) for i in range(1, 31)]


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def quotes_answer(row: dict[str, Any], claim: dict[str, Any]) -> bool:
    """Whether `claim` quotes the answering text of `row` (its file, overlapping the answer)."""
    if row.get("range") is None:
        return False
    return any(
        q["document_id"] == row["doc"] and overlaps((q["start"], q["end"]), tuple(row["range"]))
        for q in claim["quotes"]
    )


def best_match(
    row: dict[str, Any], floor: float, *, with_shape: bool = False
) -> dict[str, Any] | None:
    """The claim the Best match rule shows for an ask that was not answered, or None."""
    if row["answered"] or row.get("error") or row["decision"] != "ABSTAIN_NO_EVIDENCE":
        return None
    candidates = [
        claim
        for claim in row["gate"]
        if claim["faithful"]
        and claim["score"] is not None
        and (with_shape or not claim.get("shape_problem"))
        and claim["score"] >= floor
    ]
    return max(candidates, key=lambda c: c["score"], default=None)


def tally(
    answerable: list[dict[str, Any]],
    unanswerable: list[dict[str, Any]],
    floor: float,
    *,
    with_shape: bool = False,
) -> dict[str, int]:
    answered_right = sum(1 for r in answerable if r["right"])
    bm_right = bm_wrong = 0
    for row in answerable:
        claim = best_match(row, floor, with_shape=with_shape)
        if claim is not None:
            if quotes_answer(row, claim):
                bm_right += 1
            else:
                bm_wrong += 1
    near = sum(1 for r in unanswerable if best_match(r, floor, with_shape=with_shape))
    return {
        "answerable": len(answerable),
        "answered_right": answered_right,
        "best_right": bm_right,
        "best_wrong": bm_wrong,
        "first_right": answered_right + bm_right,
        "unanswerable": len(unanswerable),
        "near_topic_best": near,
        "near_topic_false_answers": sum(1 for r in unanswerable if r["answered"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--near-cost", type=float, default=0.5)
    parser.add_argument("--wrong-cost", type=float, default=0.0)
    parser.add_argument("--split", default="tune", help="the split that chooses (default tune)")
    args = parser.parse_args()
    sets: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for part in PARTS:
        path = args.dir / f"answer_quality_{part}.json"
        if not path.is_file():
            continue
        rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
        sets[part] = (
            [r for r in rows["answerable"] if r["split"] == args.split],
            [r for r in rows["unanswerable"] if r["split"] == args.split],
        )
    if not sets:
        raise SystemExit(f"no answer_quality_<part>.json in {args.dir}: run answer_quality first")
    print(f"sets ({args.split} split): {', '.join(sets)}")
    print(
        "floor  answered-right  best right/wrong  first-right  near-topic best  "
        "net  | with shape-dropped: best right/wrong, near-topic"
    )
    lines = []
    for floor in FLOORS:
        total: dict[str, int] = {}
        shape: dict[str, int] = {}
        for answerable, unanswerable in sets.values():
            for key, value in tally(answerable, unanswerable, floor).items():
                total[key] = total.get(key, 0) + value
            for key, value in tally(answerable, unanswerable, floor, with_shape=True).items():
                shape[key] = shape.get(key, 0) + value
        net = (
            total["best_right"]
            - args.near_cost * total["near_topic_best"]
            - args.wrong_cost * total["best_wrong"]
        )
        lines.append((floor, total, net))
        print(
            f"{floor:5.2f}  {total['answered_right']:>4}/{total['answerable']:<9} "
            f"{total['best_right']:>5}/{total['best_wrong']:<10} {total['first_right']:>5}"
            f"        {total['near_topic_best']:>4}/{total['unanswerable']:<9} {net:6.1f}  |"
            f" {shape['best_right']:>4}/{shape['best_wrong']:<4} {shape['near_topic_best']:>4}"
        )
    floor, total, net = max(lines, key=lambda line: (line[2], line[0]))
    print(
        f"\nchosen floor {floor} (most right − {args.near_cost:g} × near-topic − "
        f"{args.wrong_cost:g} × wrong best matches, ties to the higher floor): of "
        f"{total['answerable']} answerable questions {total['first_right']} "
        f"show the answer first ({total['answered_right']} as an Answer, {total['best_right']} "
        f"as a Best match; {total['best_wrong']} show a wrong Best match); "
        f"{total['near_topic_best']} of {total['unanswerable']} near-topic questions show a Best "
        f"match ({total['near_topic_false_answers']} false Answers, unchanged)"
    )
    for part, (answerable, unanswerable) in sets.items():
        t = tally(answerable, unanswerable, floor)
        print(
            f"  {part:<6} first right {t['first_right']}/{t['answerable']} (answer "
            f"{t['answered_right']}, best match {t['best_right']}, wrong best match "
            f"{t['best_wrong']}); near-topic best matches {t['near_topic_best']}/"
            f"{t['unanswerable']}"
        )


if __name__ == "__main__":
    main()
