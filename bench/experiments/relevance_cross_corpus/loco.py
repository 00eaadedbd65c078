"""Does the relevance scorer carry from one notes corpus to another? (issue 12, an analysis)

    LODE_DATA_DIR=/work/scifact-data .venv/bin/python \
        bench/experiments/relevance_cross_corpus/loco.py [--cache /work/var/rel_cache.npz]

Builds the tune groups exactly as `fit_relevance fit` does (BM25 candidates, features, the
same embedding cache), then, question by question (an answerable question scores its best
candidate when that candidate is a right one; an unanswerable one scores its best candidate):

* **leave one corpus out** — for each notes corpus (notes, lab, cafe) and the SciFact question
  sets: fit on every other tune group, score the held corpus; the AUC of right answers against
  near-topic unanswerable questions, and right / false at the thresholds where the training
  corpora's own near-topic sets answer at most 5% and 2%;
* **more corpora** — the held corpus's AUC when the fit sees SciFact alone, SciFact and one
  other notes corpus, or both others: whether another corpus's data helps.

Tune rows only; nothing here is shipped or chooses anything that is.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")

import django  # noqa: E402

django.setup()

from retrieval.answer.training import fit_relevance as fr  # noqa: E402

NOTES_LIKE = ("cafe", "lab", "notes")
L2 = 0.003  # within the fit's chosen range (0.001-0.003); the comparisons are relative
Scorer = Callable[[fr.Group], np.ndarray]


def tune_groups(cache: str) -> list[fr.Group]:
    args = fr.parser().parse_args(["fit", "--cache", cache])
    data = fr.load_corpora(args)
    questions = fr.scifact_claims(Path(args.scifact), data.scifact)
    sets, missing = fr.question_sets(Path(args.questions), data, "tune", Path(args.offtopic))
    if missing:
        raise SystemExit(f"question sets missing: {missing}")
    groups = fr.collect_groups(questions + sets, data, args)
    fr.featurise(groups, data.corpora, fr.EmbeddingCache(Path(cache)))
    return groups


def fit(groups: list[fr.Group]) -> Scorer:
    usable = [g for g in groups if len(g.candidates)]
    x = np.vstack([g.x for g in usable])
    y = np.concatenate([g.labels for g in usable])
    mean, scale = fr.standardiser(x)
    coef, intercept = fr.fit_logistic((x - mean) / scale, y, fr.set_weights(usable), L2)
    return lambda g: fr._sigmoid(((g.x - mean) / scale) @ coef + intercept)


def auc(positives: list[float], negatives: list[float]) -> float:
    pos, neg = np.asarray(positives), np.asarray(negatives)
    if not len(pos) or not len(neg):
        return float("nan")
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


def question_scores(
    groups: list[fr.Group], score: Scorer
) -> tuple[list[tuple[float, bool]], list[float]]:
    """(best score, best is right) per answerable question; best score per unanswerable."""
    answerable, unanswerable = [], []
    for g in groups:
        s = score(g) if len(g.candidates) else np.zeros(1)
        best = int(np.argmax(s))
        if g.question.answerable:
            answerable.append((float(s[best]), bool(len(g.labels) and g.labels[best] == 1)))
        else:
            unanswerable.append(float(s[best]))
    return answerable, unanswerable


def leave_one_out(groups: list[fr.Group]) -> None:
    print("leave one corpus out (tune rows):")
    held_sets = {"scifact_answerable", "scifact_unanswerable"}
    for held in (*NOTES_LIKE, "scifact"):
        if held == "scifact":
            train = [g for g in groups if g.question.set_name not in held_sets]
            test = [g for g in groups if g.question.set_name in held_sets]
        else:
            train = [g for g in groups if g.question.corpus != held]
            test = [g for g in groups if g.question.corpus == held]
        score = fit(train)
        near_topic = [g for g in train if g.question.set_name.endswith("_unanswerable")]
        train_false = sorted(question_scores(near_topic, score)[1])
        answerable, unanswerable = question_scores(test, score)
        right = [s for s, ok in answerable if ok]
        line = f"  {held:<8} AUC {auc(right, unanswerable):.3f}"
        for cap in (0.05, 0.02):
            k = int(cap * len(train_false))
            t = train_false[-k - 1] + 1e-9
            n_right = sum(1 for s, ok in answerable if ok and s >= t)
            n_false = sum(1 for s in unanswerable if s >= t)
            line += (
                f" | training false <= {cap:.0%}: threshold {t:.3f}, right {n_right}/"
                f"{len(answerable)}, false {n_false}/{len(unanswerable)}"
            )
        print(line)


def more_corpora(groups: list[fr.Group]) -> None:
    print("does another corpus help? (AUC on the held corpus's tune rows)")
    for held in NOTES_LIKE:
        others = [c for c in NOTES_LIKE if c != held]
        test = [g for g in groups if g.question.corpus == held]
        for seen in ([], [others[0]], [others[1]], others):
            train = [g for g in groups if g.question.corpus in ("scifact", *seen)]
            answerable, unanswerable = question_scores(test, fit(train))
            right = [s for s, ok in answerable if ok]
            label = "+".join(["scifact", *seen])
            print(f"  {held:<6} fitted on {label:<22} AUC {auc(right, unanswerable):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache", default="/work/var/rel_cache.npz")
    groups = tune_groups(parser.parse_args().cache)
    leave_one_out(groups)
    more_corpora(groups)


if __name__ == "__main__":
    main()
