"""Compare the scikit-learn fits (`training.logistic`) with the hand-written Newton fits they
replaced, on the same data: weights, chosen L2, and the figures each command reports.

    .venv/bin/python -m training.solver_parity relevance --questions bench/data/questions \\
        --notes-corpus bench/data/notes_corpus --lab-corpus bench/data/lab_corpus \\
        --cafe-corpus bench/data/cafe_corpus --cache var/relevance_embeddings.npz \\
        --out /dev/null
    LODE_DATA_DIR=DIR .venv/bin/python -m training.solver_parity rerank --dump DUMP.npz

The hand-written code is read from git at `--before` (the last commit that had it) into a
temporary folder; nothing of it is kept. The relevance arguments are `fit_relevance`'s (its
tune groups are built once and fitted by both); the rerank dump is one written by
`fit_rerank --dump`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import numpy as np

BEFORE = "69bb799"
OLD_PATHS = {
    "relevance": "retrieval/answer/training/fit_relevance.py",
    "rerank": "retrieval/search/training/fit_rerank.py",
}
REPOSITORY = Path(__file__).resolve().parent.parent


def old_module(which: str, revision: str, folder: Path) -> ModuleType:
    """The hand-written fitting module as it was at `revision`, imported from `folder`."""
    source = subprocess.run(
        ["git", "-C", str(REPOSITORY), "show", f"{revision}:{OLD_PATHS[which]}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    # Its default paths were computed from its own location; point them at the repository.
    source = source.replace("Path(__file__).resolve().parents[3]", f"Path({str(REPOSITORY)!r})")
    # The product modules it imported from have since been split; take the same names from
    # where the current command imports them (the weights file's path only fed its defaults).
    source = source.replace("    RELEVANCE_FILE,\n", "").replace(
        "from retrieval.answer.relevance import (", "from training.fit_relevance import ("
    )
    source = source.replace(
        "from retrieval.text import TOKEN_RE, split_sentences",
        "from training.fit_relevance import TOKEN_RE, split_sentences",
    )
    path = folder / f"handwritten_{which}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def relevance(args: argparse.Namespace, old: ModuleType) -> None:
    from sklearn.metrics import roc_auc_score

    from training import fit_relevance as new
    from training.fit_relevance import (
        FALLBACK_FEATURE_NAMES,
        FALLBACK_MODEL,
        FEATURE_NAMES,
        FULL_MODEL,
    )

    data = new.load_corpora(args)
    questions, _ = new.question_sets(Path(args.questions), data, "tune", None)
    if data.scifact is not None and args.claims:
        questions += new.scifact_claims(Path(args.scifact), data.scifact)
    groups = new.collect_groups(questions, data, args)
    cache = new.EmbeddingCache(Path(args.cache) if args.cache else None)
    new.featurise(groups, data.corpora, cache)
    y = np.concatenate([g.labels for g in groups])
    print(f"{len(groups)} tune questions, {len(y)} candidates, {int(y.sum())} positive")
    for which, names in ((FULL_MODEL, FEATURE_NAMES), (FALLBACK_MODEL, FALLBACK_FEATURE_NAMES)):
        a, b = old.fit_model(groups, names), new.fit_model(groups, names)
        ta, _ = new.choose_threshold(groups, a.oof, args.max_false)
        tb, _ = new.choose_threshold(groups, b.oof, args.max_false)
        oa, ob = np.concatenate(a.oof), np.concatenate(b.oof)
        print(f"model {which} (hand-written / scikit-learn):")
        print(f"  L2 chosen {a.l2} / {b.l2}")
        print(
            f"  max |weight diff| {np.abs(a.model.weights - b.model.weights).max():.1e}, "
            f"|intercept diff| {abs(a.model.intercept - b.model.intercept):.1e}, "
            f"max |out-of-fold probability diff| {np.abs(oa - ob).max():.1e}"
        )
        print(f"  out-of-fold AUC {roc_auc_score(y, oa):.6f} / {roc_auc_score(y, ob):.6f}")
        print(f"  threshold {ta:.6f} / {tb:.6f}")
        table_a, table_b = new.set_table(groups, a.oof, ta), new.set_table(groups, b.oof, tb)
        for name in sorted(table_a):
            ra, rb = table_a[name], table_b[name]
            print(
                f"    {name:<22} answered {ra['answer_rate']:.4f} / {rb['answer_rate']:.4f}  "
                f"right {ra['right_rate']:.4f} / {rb['right_rate']:.4f}"
            )


def rerank(args: argparse.Namespace, old: ModuleType) -> None:
    from retrieval.search.rerank import FEATURE_NAMES
    from training import fit_rerank as new

    corpora = [new.read_dump(path, FEATURE_NAMES) for path in args.dump]
    data = [q for c in corpora for q in c.queries]
    print(f"{len(data)} queries, {sum(len(q.labels) for q in data)} candidates")
    mean, scale = new.feature_standardiser(data)
    for balance in args.balance:
        for l2 in args.l2:
            diffs, weights = new.weighted_pairs(data, mean, scale, args.max_pairs, balance)
            a, b = old.fit_pairwise(diffs, l2, weights), new.fit_pairwise(diffs, l2, weights)
            ca = old.cross_validate(data, l2, balance, max_pairs=args.max_pairs)
            cb = new.cross_validate(data, l2, balance, max_pairs=args.max_pairs)
            print(
                f"l2={l2} balance={balance}: max |weight diff| {np.abs(a - b).max():.1e} "
                f"(largest weight {np.abs(a).max():.3f})"
            )
            for name in ca.metrics:
                ma, mb = ca.metrics[name], cb.metrics[name]
                print(
                    f"  {name:<10} CV nDCG@10 {ma['ndcg_at_10']:.6f} / {mb['ndcg_at_10']:.6f}  "
                    f"found@5 {ma['found_at_5']:.4f} / {mb['found_at_5']:.4f}  "
                    f"MRR@10 {ma['mrr_at_10']:.6f} / {mb['mrr_at_10']:.6f}"
                )


def rerank_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="solver_parity rerank")
    p.add_argument("--dump", nargs="+", required=True, help="fit_rerank dumps")
    p.add_argument("--l2", type=float, nargs="*", default=[0.001, 0.01, 0.1, 1.0])
    p.add_argument("--balance", type=float, nargs="*", default=[0.0])
    p.add_argument("--max-pairs", type=int, default=200)
    return p


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()  # before fit_relevance: the scorer's module imports the models
    from training import fit_relevance

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("which", choices=("relevance", "rerank"))
    parser.add_argument("--before", default=BEFORE, help="the commit with the hand-written fits")
    known, rest = parser.parse_known_args(argv)
    if known.which == "relevance":
        args = fit_relevance.parser().parse_args(["fit", *rest])
    else:
        args = rerank_parser().parse_args(rest)
    with tempfile.TemporaryDirectory() as folder:
        old = old_module(known.which, known.before, Path(folder))
        (relevance if known.which == "relevance" else rerank)(args, old)
    return 0


if __name__ == "__main__":
    sys.exit(main())
