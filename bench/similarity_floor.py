"""Choose the similarity floor for meaning-only search hits.

    .venv/bin/python bench/similarity_floor.py [--notes-data DIR] [--coverage 0.95]

A *meaning-only* hit is a passage the dense leg found that contains none of the query's
words (the lexical leg did not match it at all). After an import every query has 256 of
them, however unrelated ("kubernetes helm chart" over notes that never mention it), so
search hides those whose cosine with the query is below `retrieval.search.pipeline.
MEANING_ONLY_FLOOR` unless the user asks for weaker matches. This script measures where
that floor should be.

The notes corpus (`bench/data/notes_corpus/`, 49 files) is loaded as notes of user `notes`
into a fresh temporary data folder and embedded with the bundled model (or `--notes-data
DIR`, reused: loaded once; the same folder `bench/answer_quality.py --notes-data` uses).
For every question it runs `search()` in semantic mode (rerank off, every candidate: the
cosine of each passage with the question) and in lexical mode (which passages contain a
query word). Distributions of the query–passage cosine, per split:

* **answering**: the passage that answers each `notes_answerable` question (the best-scoring
  passage overlapping its `answer` text), and whether it is meaning-only;
* **near-topic unanswerable**: the best passage, and the best meaning-only passage, of
  each `notes_unanswerable` question (same vocabulary, not answered by the notes);
* **off-topic**: the best meaning-only passage of each question of
  `bench/data/offtopic_questions.txt` (cooking, sports, travel, ... — a few land on the
  notes' runbooks and recipes) and, held out, `offtopic_questions_holdout.txt`.

**The rule** (tune rows only): the floor that best separates the passages that answer from
the best meaning-only passage found for a question about something the notes never
mention — the cosine f (0.01 steps) maximising Youden's J = (answering passages with cosine
≥ f) / (answering passages) − (off-topic questions whose best meaning-only passage has
cosine ≥ f) / (off-topic questions); ties go to the lower floor (show more). Positives: the
answering passage of every tune `notes_answerable` question, *as if it were meaning-only* (a
conservative proxy: in this set none is — the questions share words with their answers —
and only meaning-only passages are ever hidden). Negatives: the in-sample off-topic file.
The near-topic unanswerable questions are not negatives: their best meaning-only passages
are about the question's subject (the backups runbook for "When do the Redis backups
run?"), which a search should still show even though an answer must not quote it; the floor
J would choose with them as negatives too is printed beside (`--negatives all`), and so is
the floor keeping `--coverage` (95%) of the answering passages. The holdout rows and the
held-out off-topic file are printed at the chosen floor for the report; they choose nothing.

Prints the figures and writes `bench/out/similarity_floor.json`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT
from answer_quality import (
    NOTES_CORPUS,
    OFFTOPIC,
    OFFTOPIC_HOLDOUT,
    QUESTIONS,
    answer_range,
    load_notes_corpus,
    overlaps,
    read_jsonl,
    read_lines,
    setup_django,
)

OUT = ROOT / "bench" / "out"
SPLITS = ("tune", "holdout")
FLOORS = [round(0.01 * i, 2) for i in range(0, 81)]


def quantile_below(values: list[float], share: float) -> float:
    """The largest x with at least `share` of `values` at or above it."""
    ordered = sorted(values)
    index = math.floor((1.0 - share) * len(ordered))
    return ordered[min(index, len(ordered) - 1)]


def summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)

    def at(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 3)

    return {
        "n": len(ordered),
        "min": round(ordered[0], 3),
        "p05": at(0.05),
        "p10": at(0.10),
        "p25": at(0.25),
        "median": at(0.50),
        "p75": at(0.75),
        "p90": at(0.90),
        "max": round(ordered[-1], 3),
    }


def probe(user: Any, question: str) -> dict[str, Any]:
    """Cosine of every dense candidate with `question`, and which contain a query word."""
    from retrieval.search.pipeline import MAX_LIMIT, search

    semantic = search(
        user=user, query=question, mode="semantic", rerank="off", limit=MAX_LIMIT, highlight=False
    )
    lexical = search(
        user=user, query=question, mode="lexical", rerank="off", limit=MAX_LIMIT, highlight=False
    )
    assert not semantic.degraded, semantic.degraded
    worded = {h.passage.pk for h in lexical.hits}
    passages = [
        {
            "id": h.passage.pk,
            "document_id": h.passage.document_id,
            "start": h.passage.start,
            "end": h.passage.end,
            "cosine": h.fused.dense.score,
            "meaning_only": h.passage.pk not in worded,
        }
        for h in semantic.hits
        if h.fused.dense is not None
    ]
    meaning_only = [p["cosine"] for p in passages if p["meaning_only"]]
    return {
        "question": question,
        "passages": passages,
        "best": max((p["cosine"] for p in passages), default=None),
        "best_meaning_only": max(meaning_only, default=None),
        "meaning_only_cosines": meaning_only,
        "lexical_hits": len(worded),
    }


def shown_meaning_only(rows: list[dict[str, Any]], floor: float) -> float:
    """Mean number of meaning-only passages per question at or above `floor`."""
    if not rows:
        return 0.0
    return sum(sum(c >= floor for c in r["meaning_only_cosines"]) for r in rows) / len(rows)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    data_dir = args.notes_data or tempfile.mkdtemp(prefix="lode-floor-bench-")
    setup_django(data_dir)
    from django.core.management import call_command

    from notes.management.commands.lode_import_markdown import ensure_user
    from retrieval.eligibility import member_space_ids
    from retrieval.index.vectors import pending_count
    from retrieval.search import pipeline

    # Absent from older code, which the script also measures.
    code_floor = getattr(pipeline, "MEANING_ONLY_FLOOR", 0.0)
    call_command("migrate", verbosity=0)
    user = ensure_user("notes")
    docs = load_notes_corpus(user)
    if pending_count(member_space_ids(user.pk)):
        call_command("lode_embed_pending", verbosity=0)
    print(f"notes corpus: {len(docs)} files from {NOTES_CORPUS}", flush=True)

    answering: list[dict[str, Any]] = []
    for row in read_jsonl(QUESTIONS / "notes_answerable.jsonl"):
        doc = docs[row["file"]]
        where = answer_range(doc, row["answer"])
        found = probe(user, row["question"])
        mine = [
            p
            for p in found["passages"]
            if where is not None
            and p["document_id"] == doc
            and overlaps((p["start"], p["end"]), where)
        ]
        best = max(mine, key=lambda p: p["cosine"], default=None)
        answering.append(
            {
                "split": row["split"],
                "question": row["question"],
                "cosine": best["cosine"] if best else None,
                "meaning_only": best["meaning_only"] if best else None,
                "meaning_only_cosines": found["meaning_only_cosines"],
            }
        )
    near = []
    for row in read_jsonl(QUESTIONS / "notes_unanswerable.jsonl"):
        near.append({"split": row["split"], **probe(user, row["question"])})
    offtopic = {
        "in_sample": [probe(user, q) for q in read_lines(OFFTOPIC)],
        "holdout": [probe(user, q) for q in read_lines(OFFTOPIC_HOLDOUT)],
    }

    tune_cosines = [
        r["cosine"] for r in answering if r["split"] == "tune" and r["cosine"] is not None
    ]

    def best_meaning_only(rows: list[dict[str, Any]]) -> list[float]:
        return [
            r["best_meaning_only"] if r["best_meaning_only"] is not None else -1.0 for r in rows
        ]

    def youden_floor(negatives: list[float]) -> tuple[float, float, list[tuple[float, float]]]:
        curve = [
            (
                round(
                    sum(c >= f for c in tune_cosines) / len(tune_cosines)
                    - sum(c >= f for c in negatives) / len(negatives),
                    4,
                ),
                f,
            )
            for f in FLOORS
        ]
        best = max(j for j, _ in curve)
        return min(f for j, f in curve if j == best), best, curve

    offtopic_negatives = best_meaning_only(offtopic["in_sample"])
    all_negatives = offtopic_negatives + best_meaning_only(
        [r for r in near if r["split"] == "tune"]
    )
    chosen, best_j, youden = youden_floor(
        offtopic_negatives if args.negatives == "offtopic" else all_negatives
    )
    other, other_j, _ = youden_floor(
        all_negatives if args.negatives == "offtopic" else offtopic_negatives
    )
    coverage_floor = math.floor(quantile_below(tune_cosines, args.coverage) * 100) / 100

    def at_floor(floor: float) -> dict[str, Any]:
        report: dict[str, Any] = {"floor": floor}
        for split in SPLITS:
            rows = [r for r in answering if r["split"] == split and r["cosine"] is not None]
            mo = [r for r in rows if r["meaning_only"]]
            report[f"answering_{split}"] = {
                "n": len(rows),
                "below_floor": sum(r["cosine"] < floor for r in rows),
                "meaning_only": len(mo),
                "meaning_only_hidden": sum(r["cosine"] < floor for r in mo),
                "meaning_only_hits_shown_per_question": round(shown_meaning_only(rows, floor), 1),
            }
            nrows = [r for r in near if r["split"] == split]
            report[f"near_topic_{split}"] = {
                "n": len(nrows),
                "all_meaning_only_hidden": sum(
                    (r["best_meaning_only"] or -1.0) < floor for r in nrows
                ),
                "meaning_only_hits_shown_per_question": round(shown_meaning_only(nrows, floor), 1),
            }
        for name, rows in offtopic.items():
            report[f"offtopic_{name}"] = {
                "n": len(rows),
                "nothing_matches": sum(
                    (r["best_meaning_only"] or -1.0) < floor and not r["lexical_hits"] for r in rows
                ),
                "all_meaning_only_hidden": sum(
                    (r["best_meaning_only"] or -1.0) < floor for r in rows
                ),
                "meaning_only_hits_shown_per_question": round(shown_meaning_only(rows, floor), 1),
            }
        return report

    return {
        "documents": len(docs),
        "coverage": args.coverage,
        "chosen_floor": chosen,
        "youden_j": best_j,
        "youden_by_floor": {f"{f:.2f}": j for j, f in youden},
        "negatives": args.negatives,
        "other_negatives_floor": other,
        "other_negatives_j": other_j,
        "coverage_floor": coverage_floor,
        "floor_in_code": code_floor,
        "distributions": {
            **{
                f"answering_{split}": summary(
                    [r["cosine"] for r in answering if r["split"] == split and r["cosine"]]
                )
                for split in SPLITS
            },
            **{
                f"answering_meaning_only_{split}": summary(
                    [
                        r["cosine"]
                        for r in answering
                        if r["split"] == split and r["cosine"] and r["meaning_only"]
                    ]
                )
                for split in SPLITS
            },
            **{
                f"near_topic_best_{split}": summary(
                    [r["best"] for r in near if r["split"] == split and r["best"] is not None]
                )
                for split in SPLITS
            },
            **{
                f"near_topic_best_meaning_only_{split}": summary(
                    [
                        r["best_meaning_only"]
                        for r in near
                        if r["split"] == split and r["best_meaning_only"] is not None
                    ]
                )
                for split in SPLITS
            },
            **{
                f"offtopic_best_meaning_only_{name}": summary(
                    [r["best_meaning_only"] for r in rows if r["best_meaning_only"] is not None]
                )
                for name, rows in offtopic.items()
            },
        },
        "at_chosen": at_floor(chosen),
        "at_code": at_floor(code_floor),
        "sweep": [at_floor(f) for f in FLOORS if f % 0.05 < 1e-9 or abs(f % 0.05 - 0.05) < 1e-9],
        "missing_answer_passages": [r["question"] for r in answering if r["cosine"] is None],
        "offtopic_meaning_only_above_chosen": [
            {"question": r["question"], "best_meaning_only": round(r["best_meaning_only"], 3)}
            for rows in offtopic.values()
            for r in rows
            if (r["best_meaning_only"] or -1.0) >= chosen
        ],
    }


def show(report: dict[str, Any]) -> None:
    print(f"\ncosine of query and passage (all-MiniLM-L6-v2), {report['documents']} notes")
    for name, block in report["distributions"].items():
        if block["n"]:
            cells = "  ".join(f"{k} {v}" for k, v in block.items() if k != "n")
            print(f"  {name:<40} n={block['n']:<4} {cells}")
        else:
            print(f"  {name:<40} n=0")
    print(
        f"\nchosen floor (tune, negatives {report['negatives']}, max Youden's J "
        f"{report['youden_j']}): {report['chosen_floor']:.2f}; in code: "
        f"{report['floor_in_code']}; with the other negatives: "
        f"{report['other_negatives_floor']:.2f} (J {report['other_negatives_j']}); "
        f"{report['coverage']:.0%} of tune answering passages at or above: "
        f"{report['coverage_floor']:.2f}"
    )
    print(
        "J by floor: "
        + " ".join(
            f"{f}:{j:.3f}" for f, j in report["youden_by_floor"].items() if 0.15 <= float(f) <= 0.45
        )
    )
    for key in ("at_chosen", "at_code"):
        print(f"\n{key}: {json.dumps(report[key], indent=1)}")
    print("\nsweep (floor: tune answering below / tune meaning-only hidden / off-topic nothing):")
    for row in report["sweep"]:
        print(
            f"  {row['floor']:.2f}: answering tune below {row['answering_tune']['below_floor']}"
            f"/{row['answering_tune']['n']}, meaning-only answers hidden tune "
            f"{row['answering_tune']['meaning_only_hidden']}/"
            f"{row['answering_tune']['meaning_only']} holdout "
            f"{row['answering_holdout']['meaning_only_hidden']}/"
            f"{row['answering_holdout']['meaning_only']}; off-topic all meaning-only hidden "
            f"{row['offtopic_in_sample']['all_meaning_only_hidden']}/"
            f"{row['offtopic_in_sample']['n']} (holdout "
            f"{row['offtopic_holdout']['all_meaning_only_hidden']}/"
            f"{row['offtopic_holdout']['n']}); meaning-only shown per answerable question "
            f"{row['answering_tune']['meaning_only_hits_shown_per_question']}"
        )
    if report["missing_answer_passages"]:
        missing = report["missing_answer_passages"]
        print(f"\nanswering passage not among the dense candidates: {missing}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--notes-data", default=None, help="reuse this notes data folder")
    parser.add_argument("--coverage", type=float, default=0.95)
    parser.add_argument(
        "--negatives",
        choices=("offtopic", "all"),
        default="offtopic",
        help="off-topic questions only (the rule), or near-topic unanswerable ones too",
    )
    args = parser.parse_args()
    report = measure(args)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "similarity_floor.json").write_text(
        json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    show(report)


if __name__ == "__main__":
    main()
