"""Fit the default (learned) reranker on the SciFact *train* split and write its weights.

    LODE_DATA_DIR=var/fit .venv/bin/python -m retrieval.search.training.fit_rerank \
        --queries ../shared/data/scifact/queries.jsonl \
        --qrels ../shared/data/scifact/qrels/train.tsv [--user eval] [--out FILE]

Needs the corpus loaded and embedded for `--user` (`manage.py lode_load_beir`, then
`manage.py lode_embed_pending`). For every query it takes the candidates exactly as search
feeds the reranker (`retrieval.search.pipeline.fused_candidates`, hybrid mode, top N), computes
the pair features (`retrieval.search.rerank.features`) and labels a passage positive when its
document is judged relevant. A linear model is fitted with pairwise logistic loss (positive vs
negative
passage of the same query) and L2 regularisation chosen by 5-fold cross-validation over
queries; the reported figure is the cross-validated document-level nDCG@10, i.e. on queries
the model did not see. Labels are used only as training targets: no feature names a
document or its label.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np


@dataclass
class QueryData:
    query_id: str
    x: np.ndarray  # candidates × features, in fused order
    labels: np.ndarray  # 1 if the passage's document is relevant
    doc_ids: list[str]  # BEIR id of each candidate's document
    fused_tail: list[str]  # documents of the candidates below the rerank cut, in fused order
    relevant: dict[str, int]


def collect(
    queries: dict[str, str], qrels: dict[str, dict[str, int]], username: str, top_n: int
) -> list[QueryData]:
    from django.contrib.auth import get_user_model

    from retrieval.query import QueryError, parse
    from retrieval.search.pipeline import SearchResult, fused_candidates
    from retrieval.search.rerank import Candidate, features

    user = get_user_model().objects.get(username=username)
    data: list[QueryData] = []
    for n, (query_id, text) in enumerate(queries.items(), start=1):
        if query_id not in qrels:
            continue
        try:
            parsed = parse(text)
        except QueryError:
            continue
        result = SearchResult(query=text, mode="hybrid")
        fused, rows = fused_candidates(parsed, owner_id=user.pk, mode="hybrid", result=result)
        if result.degraded:
            sys.exit(f"search is degraded, fit refused: {result.degraded}")
        head = fused[:top_n]
        candidates = [
            Candidate(
                passage_id=f.passage_id,
                document_id=rows[f.passage_id].document_id,
                title_text=rows[f.passage_id].title_text,
                text=rows[f.passage_id].text,
                position=rows[f.passage_id].position,
                fused=f,
            )
            for f in head
        ]
        doc_ids = [rows[f.passage_id].external_key.removeprefix("beir:") for f in head]
        tail = [rows[f.passage_id].external_key.removeprefix("beir:") for f in fused[top_n:]]
        relevant = qrels[query_id]
        data.append(
            QueryData(
                query_id=query_id,
                x=features(parsed, candidates),
                labels=np.asarray([1.0 if d in relevant else 0.0 for d in doc_ids]),
                doc_ids=doc_ids,
                fused_tail=tail,
                relevant=relevant,
            )
        )
        if n % 100 == 0:
            print(f"  collected {n}/{len(queries)} queries", file=sys.stderr)
    return data


def pair_differences(
    data: list[QueryData], mean: np.ndarray, scale: np.ndarray, max_pairs: int = 200
) -> np.ndarray:
    """Standardised x_pos − x_neg for each (positive, negative) pair of a query; the
    negatives are capped at the top `max_pairs` by fused order, where mistakes cost most."""
    rows = []
    for q in data:
        z = (q.x - mean) / scale
        positives = np.flatnonzero(q.labels == 1)
        negatives = np.flatnonzero(q.labels == 0)[:max_pairs]
        for p in positives:
            rows.append(z[p] - z[negatives])
    return np.vstack(rows) if rows else np.zeros((0, len(mean)))


def fit_pairwise(diffs: np.ndarray, l2: float, iterations: int = 200) -> np.ndarray:
    """Logistic loss on pair differences (label always 1, no bias) by Newton's method."""
    w = np.zeros(diffs.shape[1])
    for _ in range(iterations):
        margin = diffs @ w
        p = 1.0 / (1.0 + np.exp(-margin))
        gradient = -(diffs * (1.0 - p)[:, None]).mean(axis=0) + l2 * w
        hessian = (diffs * (p * (1.0 - p))[:, None]).T @ diffs / len(diffs) + l2 * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-7:
            break
    return w


def ranked_docs(q: QueryData, scores: np.ndarray | None) -> list[str]:
    order = range(len(q.doc_ids)) if scores is None else np.argsort(-scores, kind="stable")
    seen: list[str] = []
    for i in order:
        if q.doc_ids[i] not in seen:
            seen.append(q.doc_ids[i])
    for d in q.fused_tail:
        if d not in seen:
            seen.append(d)
    return seen


def mean_ndcg(
    data: list[QueryData], w: np.ndarray | None, mean: np.ndarray, scale: np.ndarray
) -> float:
    from retrieval.search.evaluation import ndcg_at_k

    values = []
    for q in data:
        scores = None if w is None else ((q.x - mean) / scale) @ w
        values.append(ndcg_at_k(ranked_docs(q, scores), q.relevant, 10))
    return float(np.mean(values)) if values else 0.0


def standardiser(data: list[QueryData]) -> tuple[np.ndarray, np.ndarray]:
    stacked = np.vstack([q.x for q in data])
    mean = stacked.mean(axis=0)
    scale = stacked.std(axis=0)
    scale[scale == 0] = 1.0
    return mean, scale


def cross_validate(
    data: list[QueryData], l2: float, folds: int = 5, seed: int = 13, max_pairs: int = 200
) -> list[float]:
    order = np.random.default_rng(seed).permutation(len(data))
    scores = []
    for f in range(folds):
        test_idx = set(order[f::folds].tolist())
        train = [q for i, q in enumerate(data) if i not in test_idx]
        test = [q for i, q in enumerate(data) if i in test_idx]
        mean, scale = standardiser(train)
        w = fit_pairwise(pair_differences(train, mean, scale, max_pairs), l2)
        scores.append(mean_ndcg(test, w, mean, scale))
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", required=True)
    parser.add_argument("--qrels", required=True)
    parser.add_argument("--user", default="eval")
    parser.add_argument("--out", default=None)
    parser.add_argument("--l2", type=float, nargs="*", default=[0.001, 0.01, 0.1, 1.0])
    parser.add_argument("--max-pairs", type=int, default=200, help="negatives per positive")
    parser.add_argument("--cache", help="pickle of the collected features, reused if present")
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()
    from retrieval.search.evaluation import load_qrels, load_queries
    from retrieval.search.rerank import FEATURE_NAMES, LEARNED_MODEL_FILE, RERANK_TOP_N, LinearModel

    queries, qrels = load_queries(args.queries), load_qrels(args.qrels)
    if args.cache and os.path.exists(args.cache):
        with open(args.cache, "rb") as handle:
            data = pickle.load(handle)
    else:
        data = collect(queries, qrels, args.user, RERANK_TOP_N)
        if args.cache:
            with open(args.cache, "wb") as handle:
                pickle.dump(data, handle)
    mean, scale = standardiser(data)
    print(
        f"queries: {len(data)}; fused (no rerank) nDCG@10: {mean_ndcg(data, None, mean, scale):.4f}"
    )
    best = None
    for l2 in args.l2:
        folds = cross_validate(data, l2, max_pairs=args.max_pairs)
        print(
            f"l2={l2:<6} 5-fold CV nDCG@10: {np.mean(folds):.4f} "
            f"(folds {', '.join(f'{s:.3f}' for s in folds)})"
        )
        if best is None or np.mean(folds) > best[1]:
            best = (l2, float(np.mean(folds)), folds)
    l2, cv_ndcg, folds = best
    w = fit_pairwise(pair_differences(data, mean, scale, args.max_pairs), l2)
    print(
        f"chosen l2={l2}; fit on all train queries: "
        f"in-sample nDCG@10 {mean_ndcg(data, w, mean, scale):.4f}"
    )
    for name, weight in sorted(zip(FEATURE_NAMES, w, strict=True), key=lambda t: -abs(t[1])):
        print(f"  {name:<16} {weight:+.3f}")
    model = LinearModel(feature_names=FEATURE_NAMES, mean=mean, scale=scale, weights=w)
    out = args.out or str(LEARNED_MODEL_FILE)
    # Written beside the target and renamed over it, so a running lode never reads half a file.
    partial = out + ".partial"
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(
            model.to_json(
                fitted_at=datetime.now(UTC).isoformat(timespec="seconds"),
                fitted_on="SciFact train queries (BEIR), cross-validated by query",
                loss="pairwise logistic, L2",
                max_pairs=args.max_pairs,
                l2=l2,
                cv_folds=5,
                cv_ndcg_at_10=round(cv_ndcg, 4),
                cv_fold_ndcg_at_10=[round(s, 4) for s in folds],
                queries=len(data),
                script="retrieval/search/training/fit_rerank.py",
            )
            + "\n"
        )
    os.replace(partial, out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
