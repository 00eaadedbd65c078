"""Refit the relevance scorer on the claims `ask()` actually produces.

`fit_relevance.py` fits on *sentences* of BM25 top passages; at run time the scorer judges
the claims the answerer drafted and the faithfulness steps let through, which look different
(one claim per ask may be the only candidate; headings carry the topic). This command fits
the same features and the same model (`fit_relevance.fit_model`) on those claims instead.

    # 1. collect, one process per data folder (a Django process has one): every faithful
    #    claim of an ask over the *tune* rows, its Candidate, features and right/wrong label
    LODE_RELEVANCE_THRESHOLD=0.000001 .venv/bin/python -m training.fit_relevance_asks collect \\
        --part notes --data /tmp/notes-data --questions bench/data/questions \\
        --notes-corpus bench/data/notes_corpus --dump /tmp/claims-notes.jsonl
    LODE_RELEVANCE_THRESHOLD=0.000001 .venv/bin/python -m training.fit_relevance_asks collect \\
        --part scifact --data /tmp/scifact-copy --questions bench/data/questions \\
        --scifact ../shared/data/scifact --dump /tmp/claims-scifact.jsonl
    # 2. fit, choose thresholds out of fold, compare with the current weights on the same claims
    .venv/bin/python -m training.fit_relevance_asks fit \\
        --dump /tmp/claims-notes.jsonl /tmp/claims-scifact.jsonl \\
        --current retrieval/data/relevance.json --out /tmp/relevance.json
    # 3. once, at the end: whole asks over the holdout halves with a given weights file
    .venv/bin/python -m training.fit_relevance_asks holdout --part notes --data /tmp/notes-data \\
        --questions bench/data/questions --notes-corpus bench/data/notes_corpus \\
        --model /tmp/relevance.json

Sets (tune rows only; holdout rows are never read by `collect`): notes answerable and
near-topic unanswerable (`bench/data/questions/`), SciFact answerable and near-topic
unanswerable, and the SciFact train queries with qrels at even positions (the odd ones are
left for evaluation). Labels are `bench/relevance_threshold.py`'s: a notes claim is right
when a quote overlaps the row's `answer` in its file; a SciFact-set claim when it cites the
answering abstract; a train-query claim when it cites an abstract the qrels mark relevant;
every claim of a near-topic unanswerable question is wrong.

The threshold is chosen by `bench/relevance_threshold.py`'s cost rule (most right answers −
3 × false answers over the tune halves of the four sets; an ask answers when any of its
claims reaches the threshold) on out-of-fold scores (each question scored by a model fitted
without its fold). The shipped model is scored on the same claims as they are (it never saw
them) and its own threshold chosen by the same rule, so the two compare like for like. The
weights are written only when the refit is better by that rule.

Note: the claims are those the extractive answerer chose while ranking its candidates with
the shipped scorer; with a new scorer it chooses somewhat differently, which is why the
holdout check runs whole asks with the weights swapped in (`holdout`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from training.files import read_jsonl, write_atomically

NOTES_ANSWERABLE, NOTES_UNANSWERABLE = "notes_answerable", "notes_unanswerable"
SCIFACT_ANSWERABLE, SCIFACT_UNANSWERABLE = "scifact_answerable", "scifact_unanswerable"
SCIFACT_TRAIN = "scifact_train"
ANSWERABLE_SETS = (NOTES_ANSWERABLE, SCIFACT_ANSWERABLE)
UNANSWERABLE_SETS = (NOTES_UNANSWERABLE, SCIFACT_UNANSWERABLE)
# bench/relevance_threshold.py's grid and cost.
THRESHOLDS = [round(0.02 * i, 2) for i in range(1, 50)]
FALSE_COST = 3.0
ANSWERED = ("ANSWER", "ANSWER_WITH_CONFLICTS")


def setup_django(data_dir: str) -> None:
    os.environ.pop("DATABASE_URL", None)
    os.environ["LODE_DATA_DIR"] = str(Path(data_dir).resolve())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()


def use_weights(path: Path) -> None:
    """Make this process's scorer read `path` instead of the shipped weights file."""
    from retrieval.answer.relevance import model

    model.RELEVANCE_FILE = path
    model._shipped_model.cache_clear()


# --- the questions of one part --------------------------------------------------------------


@dataclass
class Row:
    """One question to ask, and what makes one of its claims right."""

    qid: str
    set_name: str
    split: str
    question: str
    right: Callable[[list[tuple[int | None, int, int]]], bool] = field(repr=False)


def notes_rows(user: Any, split: str, questions: Path, corpus: Path) -> list[Row]:
    """The notes sets' rows of `split` (from the `questions` folder), the `corpus` folder's
    files loaded as notes of `user` (once)."""
    from notes import services
    from notes.models import Document

    docs: dict[str, Document] = {}
    for path in sorted(corpus.rglob("*")):
        if not path.is_file() or path.suffix not in (".md", ".txt"):
            continue
        rel = path.relative_to(corpus).as_posix()
        doc = Document.objects.filter(owner=user, external_key=f"notes:{rel}").first()
        if doc is None:  # as bench/answer_quality.py loads it (title: first "# " heading)
            text = path.read_text(encoding="utf-8")
            title = next(
                (line[2:].strip() for line in text.splitlines() if line.startswith("# ")),
                path.stem.replace("-", " ").replace("_", " "),
            )
            doc = services.note_create(
                owner=user,
                title=title,
                body=text,
                external_key=f"notes:{rel}",
                source_name="notes_corpus",
            )
        docs[rel] = doc
    rows = []
    for row in read_jsonl(questions / f"{NOTES_ANSWERABLE}.jsonl"):
        if row["split"] != split:
            continue
        doc = Document.objects.select_related("head").get(pk=docs[row["file"]].pk)
        at = doc.head.body.find(row["answer"])
        # An answer found only modulo whitespace is not pinned (bench/answer_quality.py).
        answer = (at, at + len(row["answer"])) if at >= 0 else None

        def right(quotes, doc_id=doc.pk, answer=answer) -> bool:
            return answer is not None and any(
                d == doc_id and s < answer[1] and answer[0] < e for d, s, e in quotes
            )

        rows.append(Row(row["id"], NOTES_ANSWERABLE, split, row["question"], right))
    for row in read_jsonl(questions / f"{NOTES_UNANSWERABLE}.jsonl"):
        if row["split"] == split:
            rows.append(Row(row["id"], NOTES_UNANSWERABLE, split, row["question"], _never))
    return rows


def _never(quotes: list[tuple[int | None, int, int]]) -> bool:
    return False


def scifact_rows(
    user: Any, split: str, train: bool, questions: Path, scifact: Path | None
) -> list[Row]:
    """The SciFact sets' rows of `split` (from the `questions` folder), and (with `train`) the
    train queries of the BEIR folder `scifact` with qrels at even positions when `split` is
    tune, odd ones when it is holdout."""
    from notes.models import Document
    from retrieval.search import evaluation

    doc_of = {
        key.removeprefix("beir:"): pk
        for pk, key in Document.objects.filter(owner=user).values_list("pk", "external_key")
    }
    if not doc_of:
        raise SystemExit("no SciFact documents for user eval in this data folder")

    def cites(relevant: set[str]) -> Callable[[list[tuple[int | None, int, int]]], bool]:
        wanted = {doc_of[k] for k in relevant if k in doc_of}
        return lambda quotes: any(d in wanted for d, _, _ in quotes)

    rows = []
    for row in read_jsonl(questions / f"{SCIFACT_ANSWERABLE}.jsonl"):
        if row["split"] == split:
            rows.append(
                Row(
                    row["id"],
                    SCIFACT_ANSWERABLE,
                    split,
                    row["question"],
                    cites({str(row["doc_id"])}),
                )
            )
    for row in read_jsonl(questions / f"{SCIFACT_UNANSWERABLE}.jsonl"):
        if row["split"] == split:
            rows.append(Row(row["id"], SCIFACT_UNANSWERABLE, split, row["question"], _never))
    if train:
        if scifact is None:
            raise SystemExit("give --scifact (the BEIR folder) for the SciFact train queries")
        qrels = evaluation.load_qrels(scifact / "qrels" / "train.tsv")
        queries = [
            (qid, text)
            for qid, text in evaluation.load_queries(scifact / "queries.jsonl").items()
            if qid in qrels
        ]
        parity = 0 if split == "tune" else 1
        for n, (qid, text) in enumerate(queries):
            if n % 2 == parity:
                rows.append(Row(f"train-{qid}", SCIFACT_TRAIN, split, text, cites(set(qrels[qid]))))
    return rows


def ensure_user(username: str) -> Any:
    """The data's owner, created with an unusable password if absent (as the
    `lode_import_markdown` command does; a management command is above this layer)."""
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(**{user_model.USERNAME_FIELD: username})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def part_rows(
    part: str, split: str, train: bool, args: argparse.Namespace
) -> tuple[Any, list[Row]]:
    """The user whose data is asked and the rows of `split`; the user's pending passages are
    embedded first."""
    from django.core.management import call_command

    from retrieval.eligibility import member_space_ids
    from retrieval.index.vectors import pending_count

    questions = Path(args.questions)
    if part == "notes":
        if not args.notes_corpus:
            raise SystemExit("give --notes-corpus (the notes corpus folder) for --part notes")
        call_command("migrate", verbosity=0)
        user = ensure_user("notes")
        rows = notes_rows(user, split, questions, Path(args.notes_corpus))
    else:
        user = ensure_user("eval")
        scifact = Path(args.scifact) if args.scifact else None
        rows = scifact_rows(user, split, train, questions, scifact)
    if pending_count(member_space_ids(user.pk)):
        call_command("lode_embed_pending", verbosity=0)
    return user, rows


# --- collect ----------------------------------------------------------------------------------


def collect(args: argparse.Namespace) -> int:
    """Ask every tune row; dump each faithful claim's Candidate, features and label."""
    setup_django(args.data)
    from django.conf import settings

    from notes.models import Version
    from retrieval.answer import ask as ask_module
    from retrieval.answer.answerers import ExtractiveAnswerer
    from retrieval.answer.relevance.features import embedding_cosines, features
    from retrieval.answer.relevance.question import question_profile
    from retrieval.answer.relevance.rarity import passage_idf

    if not (settings.LODE_RELEVANCE_THRESHOLD or 1.0) < 1e-3:
        raise SystemExit("set LODE_RELEVANCE_THRESHOLD=0.000001: every claim must reach the step")
    user, rows = part_rows(args.part, "tune", True, args)
    original = ask_module.relevance_step
    captured: list[dict[str, Any]] = []

    def capturing(verdicts, *, question, pack, sent_versions, audience, **kwargs):
        # The claims that passed faithfulness, seen exactly as relevance_step sees them.
        passing = [v for v in verdicts if v.passed]
        if passing:
            candidates = [ask_module.claim_candidate(v.claim, pack, sent_versions) for v in passing]
            idf = passage_idf(audience, question_profile(question))
            cosines = embedding_cosines(question, [c.text for c in candidates])
            x = features(question_profile(question), candidates, idf, cosines)
            doc_of = dict(
                Version.objects.filter(
                    pk__in={s.version_id for v in passing for s in v.claim.support}
                ).values_list("pk", "document_id")
            )
            for verdict, candidate, row in zip(passing, candidates, x, strict=True):
                quotes = []
                for support in verdict.claim.support:
                    at = sent_versions.get(support.version_id, "").find(support.quoted_span)
                    quotes.append(
                        (doc_of.get(support.version_id), at, at + len(support.quoted_span))
                    )
                captured.append(
                    {"candidate": candidate.__dict__, "x": row.tolist(), "quotes": quotes}
                )
        return original(
            verdicts,
            question=question,
            pack=pack,
            sent_versions=sent_versions,
            audience=audience,
            **kwargs,
        )

    ask_module.relevance_step = capturing
    out = Path(args.dump)
    with out.open("w", encoding="utf-8") as handle:
        for n, row in enumerate(rows, start=1):
            captured.clear()
            ask_module.ask(user=user, question=row.question, answerer=ExtractiveAnswerer())
            claims = [
                {
                    **c,
                    "label": int(row.right([tuple(q) for q in c["quotes"]])),
                }
                for c in captured
            ]
            record = {
                "qid": row.qid,
                "set": row.set_name,
                "split": row.split,
                "question": row.question,
                "claims": claims,
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            if n % 50 == 0:
                print(f"  {n}/{len(rows)} asked", file=sys.stderr)
    print(f"wrote {out}: {len(rows)} asks")
    return 0


# --- fit --------------------------------------------------------------------------------------


def load_groups(paths: Sequence[str], without: Sequence[str] = ()) -> list[Any]:
    from retrieval.answer.relevance.candidate import Candidate
    from retrieval.answer.relevance.features import FEATURE_NAMES
    from training.fit_relevance import Group, Question

    groups = []
    for path in paths:
        for record in read_jsonl(Path(path)):
            if record["split"] != "tune":
                raise SystemExit(f"{path}: a {record['split']} row; only tune rows may be fitted")
            if record["set"] in without:
                continue
            claims = record["claims"]
            question = Question(
                qid=record["qid"],
                set_name=record["set"],
                text=record["question"],
                corpus="notes" if record["set"].startswith("notes") else "scifact",
                split="tune",
                answerable=record["set"] not in UNANSWERABLE_SETS,
            )
            x = np.asarray([c["x"] for c in claims], dtype=np.float64).reshape(
                len(claims), len(FEATURE_NAMES)
            )
            groups.append(
                Group(
                    question=question,
                    candidates=[Candidate(**c["candidate"]) for c in claims],
                    labels=np.asarray([c["label"] for c in claims], dtype=np.float64),
                    docs=["" for _ in claims],
                    x=x,
                )
            )
    return groups


def ask_table(groups: list[Any], scores: list[np.ndarray]) -> list[dict[str, Any]]:
    """bench/relevance_threshold.py's tally at every threshold of its grid: right answers of
    the answerable sets, false answers of the near-topic unanswerable ones, net = right −
    3 × false, and the train queries' answer rate and share of answers citing a relevant
    abstract."""
    lines = []
    for t in THRESHOLDS:
        counts: dict[str, list[int]] = {}
        for group, s in zip(groups, scores, strict=True):
            kept = s >= t
            c = counts.setdefault(group.question.set_name, [0, 0, 0])  # asks, answered, right
            c[0] += 1
            c[1] += int(kept.any())
            c[2] += int(bool((group.labels[kept] == 1).any()))
        right = sum(counts.get(n, [0, 0, 0])[2] for n in ANSWERABLE_SETS)
        false = sum(counts.get(n, [0, 0, 0])[1] for n in UNANSWERABLE_SETS)
        lines.append(
            {
                "threshold": t,
                "right": right,
                "false": false,
                "net": right - FALSE_COST * false,
                "sets": {
                    k: dict(zip(("n", "answered", "right"), v, strict=True))
                    for k, v in counts.items()
                },
            }
        )
    return lines


def best_line(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return max(lines, key=lambda r: (r["net"], -r["threshold"]))


def show_line(label: str, line: dict[str, Any]) -> None:
    sets = "  ".join(
        f"{k} {v['answered']}/{v['n']} ans, {v['right']} right"
        for k, v in sorted(line["sets"].items())
    )
    print(
        f"  {label}: threshold {line['threshold']:.2f}  right {line['right']}  false "
        f"{line['false']}  net {line['net']:g}\n    {sets}"
    )


def egress_floor(groups: list[Any], scores: list[np.ndarray], threshold: float) -> float:
    """bench/relevance_threshold.py's floor: the 5th percentile of the right claims' scores on
    the tune answerable sets, never above the threshold."""
    right = sorted(
        float(v)
        for g, s in zip(groups, scores, strict=True)
        if g.question.set_name in ANSWERABLE_SETS
        for v, label in zip(s, g.labels, strict=True)
        if label == 1
    )
    return round(min(right[len(right) // 20], threshold), 6) if right else threshold


def fit(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()
    from retrieval.answer.relevance.features import FALLBACK_FEATURE_NAMES, FEATURE_NAMES
    from retrieval.answer.relevance.model import (
        FALLBACK_MODEL,
        FULL_MODEL,
        LogisticModel,
        read_model,
    )
    from training.fit_relevance import fit_model

    groups = load_groups(args.dump, args.without)
    sets: dict[str, list[int]] = {}
    for g in groups:
        c = sets.setdefault(g.question.set_name, [0, 0, 0])
        c[0] += 1
        c[1] += len(g.candidates)
        c[2] += int(g.labels.sum())
    for name, (asks, claims, positives) in sorted(sets.items()):
        print(f"{name}: {asks} tune asks, {claims} faithful claims, {positives} right")

    current = read_model(Path(args.current))
    payload_models: dict[str, Any] = {}
    report: dict[str, Any] = {}
    better = True
    oof_full: list[np.ndarray] = []
    for which, names in ((FULL_MODEL, FEATURE_NAMES), (FALLBACK_MODEL, FALLBACK_FEATURE_NAMES)):
        columns = [FEATURE_NAMES.index(n) for n in names]
        print(f"model {which}:")
        fitted = fit_model(groups, names)
        oof = [s if len(s) else np.zeros(0) for s in fitted.oof]
        mine = ask_table(groups, oof)
        mine_best = best_line(mine)
        theirs = ask_table(
            groups,
            [
                current.model(which).probabilities(g.x[:, columns])
                if len(g.candidates)
                else np.zeros(0)
                for g in groups
            ],
        )
        theirs_best = best_line(theirs)
        at_shipped = next(
            (r for r in theirs if abs(r["threshold"] - current.model(which).threshold) < 1e-9),
            None,
        )
        show_line("refit (out of fold), its best threshold", mine_best)
        show_line("shipped (as is), its best threshold", theirs_best)
        if at_shipped is not None:
            show_line("shipped at its shipped threshold", at_shipped)
        for name, weight in sorted(
            zip(names, fitted.model.weights, strict=True), key=lambda item: -abs(item[1])
        ):
            print(f"    {name:<22} {weight:+.3f}")
        print(f"    {'(intercept)':<22} {fitted.model.intercept:+.3f}")
        if which == FULL_MODEL:
            better = mine_best["net"] > theirs_best["net"]
            oof_full = oof
        m = fitted.model
        payload_models[which] = LogisticModel(
            m.feature_names, m.mean, m.scale, m.weights, m.intercept, mine_best["threshold"]
        ).as_dict()
        report[which] = {
            "l2": fitted.l2,
            "cv_log_loss": fitted.cv_log_loss,
            "tune_out_of_fold_at_chosen": mine_best,
            "shipped_model_tune_at_its_best": theirs_best,
            "tune_out_of_fold": mine,
        }
    if not better:
        print("the refit is not better on tune by the cost rule: nothing written")
        return 1
    fitted_at = datetime.now(UTC).isoformat(timespec="seconds")
    threshold = payload_models[FULL_MODEL]["threshold"]
    payload = {
        "version": f"relevance-asks-{fitted_at[:10]}",
        "fitted_at": fitted_at,
        "script": "training/fit_relevance_asks.py",
        "command": " ".join(["python -m training.fit_relevance_asks", *(argv or sys.argv[1:])]),
        "model": "logistic regression, L2 on the weights, standardised features, "
        "sets weighted equally, L2 strength by 5-fold CV grouped by question "
        "(fit_relevance.fit_model), fitted on the faithful claims of whole asks",
        "threshold_rule": f"the most right − {FALSE_COST:g} × false answers on the tune halves, "
        "out of fold (each model's own); an ask answers when any faithful claim reaches it",
        "fitted_on": {
            "sets": {k: {"asks": v[0], "claims": v[1], "right": v[2]} for k, v in sets.items()},
            "split": "tune (SciFact train queries: even positions)",
            "claims": "every claim that passed the faithfulness steps of ask() (extractive "
            "answerer, hybrid search, the configured reranker), relevance step switched off",
        },
        "idf": json.loads(Path(args.current).read_text(encoding="utf-8")).get("idf", {}),
        "egress_floor": egress_floor(groups, oof_full, threshold),
        "models": payload_models,
        "report": report,
    }
    out = Path(args.out)
    write_atomically(out, json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
    read_model(out)  # it must load as the shipped file does
    print(f"wrote {out}")
    return 0


# --- holdout ----------------------------------------------------------------------------------


def holdout(args: argparse.Namespace) -> int:
    """Whole asks over the holdout rows with the weights in `--model`: answered, right and
    false, decided as bench/answer_quality.py decides (the decision answers and a claim is
    shown; right: a shown claim's quote is right)."""
    setup_django(args.data)
    from retrieval.answer.answerers import ExtractiveAnswerer
    from retrieval.answer.ask import ask
    from retrieval.answer.relevance.model import load_model

    use_weights(Path(args.model))
    print(f"weights {args.model} (version {load_model().version})")
    user, rows = part_rows(args.part, "holdout", args.train, args)
    tally: dict[str, list[int]] = {}
    for row in rows:
        outcome = ask(user=user, question=row.question, answerer=ExtractiveAnswerer())
        answered = str(outcome.decision) in ANSWERED and bool(outcome.claims)
        quotes = [(s.document_id, s.start, s.end) for c in outcome.claims for s in c.support]
        c = tally.setdefault(row.set_name, [0, 0, 0])
        c[0] += 1
        c[1] += int(answered)
        c[2] += int(answered and row.right(quotes))
    for name, (n, answered, right) in sorted(tally.items()):
        print(
            f"  {name:<22} holdout {n:>4}  answered {answered:>4} ({answered / n:.1%})  "
            f"right {right:>4} ({right / n:.1%})"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(tally) + "\n", encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("command", choices=("collect", "fit", "holdout"))
    p.add_argument("--part", choices=("notes", "scifact"))
    p.add_argument("--data", help="the part's data folder (notes: created if empty)")
    p.add_argument("--questions", help="collect, holdout: folder of the question sets")
    p.add_argument("--notes-corpus", help="collect, holdout --part notes: the corpus folder")
    p.add_argument("--scifact", help="collect, holdout --part scifact: the BEIR SciFact folder")
    p.add_argument("--dump", nargs="+", help="collect: the file to write; fit: files to read")
    p.add_argument("--current", help="fit: the weights to compare with (and take the IDF from)")
    p.add_argument("--out", help="fit: the weights file to write")
    p.add_argument("--without", nargs="*", default=[], help="fit: leave these sets out")
    p.add_argument("--model", help="holdout: the weights file to use")
    p.add_argument("--train", action="store_true", help="holdout: the odd train queries too")
    p.add_argument("--json", help="holdout: write the tally here")
    args = p.parse_args(argv)
    needed = {
        "collect": ("part", "data", "questions", "dump"),
        "fit": ("dump", "current", "out"),
        "holdout": ("part", "data", "questions", "model"),
    }[args.command]
    if missing := [name for name in needed if not getattr(args, name)]:
        p.error(f"{args.command} needs " + ", ".join(f"--{m}" for m in missing))
    if args.command == "collect":
        args.dump = args.dump[0]
        return collect(args)
    return fit(args, argv) if args.command == "fit" else holdout(args)


if __name__ == "__main__":
    sys.exit(main())
