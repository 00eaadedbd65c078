"""Fit the default (learned) reranker and write its weights.

One corpus (SciFact *train* split):

    LODE_DATA_DIR=var/fit .venv/bin/python -m training.fit_rerank \\
        --queries ../shared/data/scifact/queries.jsonl \\
        --qrels ../shared/data/scifact/qrels/train.tsv [--user eval] --out FILE

Several corpora (a Django process has one data folder, so one process per corpus collects,
and a last one fits on the union):

    LODE_DATA_DIR=var/fit .venv/bin/python -m training.fit_rerank \\
        --queries ../shared/data/scifact/queries.jsonl \\
        --qrels ../shared/data/scifact/qrels/train.tsv --dump var/rerank-scifact.npz
    LODE_DATA_DIR=var/notes .venv/bin/python -m training.fit_rerank \\
        --answers bench/data/questions/notes_answerable.jsonl --split tune --user notes \\
        --dump var/rerank-notes.npz
    .venv/bin/python -m training.fit_rerank \\
        --fit-from var/rerank-scifact.npz var/rerank-notes.npz --out var/rerank_learned.json

The product reads the weights from `retrieval/data/rerank_learned.json`
(`retrieval.search.rerank.LinearModel.from_file`); `--out` there replaces them.

The SciFact folder needs the corpus loaded and embedded for `--user` (`manage.py
lode_load_beir`, then `manage.py lode_embed_pending`); the notes folder the notes corpus as
notes of `--user` with external keys `notes:<path>` (`bench/answer_quality.py --part notes
--notes-data DIR` loads and embeds it).

For every query the candidates are taken exactly as search feeds the reranker
(`retrieval.search.pipeline.fused_candidates`, hybrid mode, top N) and the pair features
computed (`retrieval.search.rerank.features`). Labels:

* qrels (SciFact): a passage is positive when its document is judged relevant; scored by
  document-level nDCG@10;
* answers (notes): a passage is positive when it overlaps the question's `answer` text in
  the head version of its file (`file`); scored as search is on the notes sets: whether the
  answering passage is in the top 5 (found@5), and nDCG@10 with the answer as the one
  relevant item. Only the `--split` half is read (never the kept-apart one).

A linear model is fitted with pairwise logistic loss (positive vs negative passage of the same
query) and L2 regularisation (`training.logistic.fit_pairwise`, scikit-learn). With several
corpora every corpus gets a share of the loss: `--balance B` makes a corpus's share
proportional to (its queries)^(1−B) — 0 weighs every query alike (the large corpus dominates),
1 weighs every corpus alike. L2 and B are chosen by 5-fold cross-validation over queries (folds
stratified by corpus) maximising the mean over corpora of the cross-validated nDCG@10, i.e.
measured on queries the model did not see; each corpus's figures are printed and recorded.
Labels are used only as training targets: no feature names a document or its label.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from training.files import write_atomically
from training.logistic import fit_pairwise, standardiser

if TYPE_CHECKING:
    from retrieval.query import ParsedQuery
    from retrieval.search.pipeline import CandidateRow
    from retrieval.search.rerank import Candidate

SCRIPT = "training/fit_rerank.py"
# How a notes question's answering passages are named in `QueryData.units`: every positive
# passage is the same one relevant item, so a ranking is judged by its first answering passage.
ANSWER_UNIT = "answer"
FOLDS = 5
FOUND_K = 5
NDCG_K = 10
DEFAULT_L2 = (0.001, 0.01, 0.1, 1.0)
DEFAULT_BALANCE = (0.0, 0.5, 1.0, 1.5)


@dataclass
class QueryData:
    query_id: str
    x: np.ndarray  # candidates × features, in fused order
    labels: np.ndarray  # 1 for a positive candidate, else 0
    exact: np.ndarray  # 1 when the candidate holds an exact match (search keeps those first)
    units: list[str]  # what each candidate counts as when ranked: its document, or the answer
    tail: list[str]  # units of the candidates below the rerank cut, in fused order
    relevant: dict[str, int]
    corpus: str = "scifact"


@dataclass
class Corpus:
    """One collected corpus: what it is, and its queries."""

    name: str
    description: str
    queries: list[QueryData]


# --- labels -----------------------------------------------------------------------------------


def answer_range(body: str, answer: str) -> tuple[int, int] | None:
    """Where `answer` sits in `body` (code points), or None when it is not there verbatim."""
    at = body.find(answer) if answer else -1
    return None if at < 0 else (at, at + len(answer))


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def answer_units(
    spans: Sequence[tuple[int, int] | None], passage_ids: Sequence[int], answer: tuple[int, int]
) -> tuple[list[str], np.ndarray]:
    """Units and labels of candidate passages (their [start, end) in the same version as
    `answer`, or None for another document): the ones overlapping the answer are the answer."""
    units, labels = [], []
    for span, pid in zip(spans, passage_ids, strict=True):
        hit = span is not None and overlaps(span, answer)
        units.append(ANSWER_UNIT if hit else f"p{pid}")
        labels.append(1.0 if hit else 0.0)
    return units, np.asarray(labels)


# --- collecting (needs Django and a data folder) ----------------------------------------------


def _candidates(
    text: str, owner_id: int, top_n: int
) -> tuple[ParsedQuery, list[Candidate], list[CandidateRow], list[CandidateRow]] | None:
    """(parsed query, rerank candidates, their rows, rows below the cut) or None for a query
    that does not parse. Exits when search is degraded: a fit on a lexical-only ranking
    would describe a search nobody runs."""
    from retrieval.eligibility import audience_for
    from retrieval.query import QueryError, parse
    from retrieval.search.pipeline import SearchResult, fused_candidates
    from retrieval.search.rerank import Candidate

    try:
        parsed = parse(text)
    except QueryError:
        return None
    result = SearchResult(query=text, mode="hybrid")
    audience = audience_for(owner_id)
    fused, rows = fused_candidates(parsed, audience=audience, mode="hybrid", result=result)
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
    tail_rows = [rows[f.passage_id] for f in fused[top_n:]]
    return parsed, candidates, [rows[f.passage_id] for f in head], tail_rows


def _user_id(username: str) -> int:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=username).pk


def collect(
    queries: dict[str, str], qrels: dict[str, dict[str, int]], username: str, top_n: int
) -> list[QueryData]:
    """SciFact-style queries with document-level qrels (BEIR ids, external key `beir:<id>`)."""
    from retrieval.search.rerank import features

    owner_id = _user_id(username)
    data: list[QueryData] = []
    for n, (query_id, text) in enumerate(queries.items(), start=1):
        if query_id not in qrels:
            continue
        found = _candidates(text, owner_id, top_n)
        if found is None:
            continue
        parsed, candidates, head_rows, tail_rows = found
        doc_ids = [row.external_key.removeprefix("beir:") for row in head_rows]
        relevant = qrels[query_id]
        data.append(
            QueryData(
                query_id=query_id,
                x=features(parsed, candidates),
                labels=np.asarray([1.0 if d in relevant else 0.0 for d in doc_ids]),
                exact=np.asarray([1.0 if c.fused.exact_matches else 0.0 for c in candidates]),
                units=doc_ids,
                tail=[row.external_key.removeprefix("beir:") for row in tail_rows],
                relevant=relevant,
                corpus="scifact",
            )
        )
        if n % 100 == 0:
            print(f"  collected {n}/{len(queries)} queries", file=sys.stderr)
    return data


def _spans_in_version(
    passage_ids: list[int], document_id: int, version_id: int
) -> dict[int, tuple[int, int]]:
    """[start, end) of those of `passage_ids` that belong to that version of that document."""
    from retrieval.models import Passage

    rows = Passage.objects.filter(
        pk__in=passage_ids, document_id=document_id, version_id=version_id
    ).values_list("pk", "start", "end")
    return {pk: (start, end) for pk, start, end in rows}


def collect_answers(
    questions: list[dict[str, Any]], username: str, top_n: int, key_prefix: str
) -> tuple[list[QueryData], int]:
    """Questions with an `answer` text in their `file` (a document with external key
    `key_prefix + file`); returns the data and how many questions were skipped because the
    answer is not verbatim in the file's head version."""
    from notes.models import Document
    from retrieval.search.rerank import features

    owner_id = _user_id(username)
    data: list[QueryData] = []
    skipped = 0
    for row in questions:
        document = Document.objects.select_related("head").get(
            owner_id=owner_id, external_key=key_prefix + row["file"], deleted_at__isnull=True
        )
        answer = answer_range(document.head.body, row["answer"])
        found = _candidates(row["question"], owner_id, top_n) if answer else None
        if found is None:
            skipped += 1
            continue
        parsed, candidates, head_rows, tail_rows = found
        spans = _spans_in_version(
            [r.passage_id for r in [*head_rows, *tail_rows]], document.pk, document.head_id
        )
        units, labels = answer_units(
            [spans.get(r.passage_id) for r in head_rows], [r.passage_id for r in head_rows], answer
        )
        tail, _ = answer_units(
            [spans.get(r.passage_id) for r in tail_rows], [r.passage_id for r in tail_rows], answer
        )
        data.append(
            QueryData(
                query_id=str(row["id"]),
                x=features(parsed, candidates),
                labels=labels,
                exact=np.asarray([1.0 if c.fused.exact_matches else 0.0 for c in candidates]),
                units=units,
                tail=tail,
                relevant={ANSWER_UNIT: 1},
                corpus="notes",
            )
        )
    return data, skipped


# --- dumps: one corpus's (features, labels, groups) in a file ---------------------------------


def write_dump(corpus: Corpus, path: str | Path, feature_names: Sequence[str]) -> None:
    """An .npz of the stacked arrays plus a JSON header (no pickle: a dump is data, loading
    one runs no code). Written beside the target and renamed over it."""
    queries = corpus.queries
    width = len(feature_names)
    meta = {
        "format": 1,
        "name": corpus.name,
        "description": corpus.description,
        "feature_names": list(feature_names),
        "queries": [
            {
                "query_id": q.query_id,
                "candidates": len(q.labels),
                "units": q.units,
                "tail": q.tail,
                "relevant": q.relevant,
            }
            for q in queries
        ],
    }
    partial = f"{path}.partial"
    with open(partial, "wb") as handle:
        np.savez_compressed(
            handle,
            x=np.vstack([q.x for q in queries]) if queries else np.zeros((0, width)),
            labels=np.concatenate([q.labels for q in queries]) if queries else np.zeros(0),
            exact=np.concatenate([q.exact for q in queries]) if queries else np.zeros(0),
            meta=np.asarray(json.dumps(meta)),
        )
    os.replace(partial, path)


class DumpError(Exception):
    """A dump that cannot be used for this fit; str() says why."""


def read_dump(path: str | Path, feature_names: Sequence[str]) -> Corpus:
    with np.load(path, allow_pickle=False) as arrays:
        meta = json.loads(str(arrays["meta"]))
        x, labels, exact = arrays["x"], arrays["labels"], arrays["exact"]
    if meta.get("format") != 1 or meta.get("feature_names") != list(feature_names):
        raise DumpError(f"{path} was collected with other features; collect it again")
    queries, at = [], 0
    for q in meta["queries"]:
        n = q["candidates"]
        queries.append(
            QueryData(
                query_id=q["query_id"],
                x=x[at : at + n],
                labels=labels[at : at + n],
                exact=exact[at : at + n],
                units=q["units"],
                tail=q["tail"],
                relevant=q["relevant"],
                corpus=meta["name"],
            )
        )
        at += n
    if at != len(labels):
        raise DumpError(
            f"{path} is damaged: its header counts {at} candidates, it holds {len(labels)}"
        )
    return Corpus(name=meta["name"], description=meta["description"], queries=queries)


# --- fitting ----------------------------------------------------------------------------------


def feature_standardiser(data: Sequence[QueryData]) -> tuple[np.ndarray, np.ndarray]:
    """Means and scales of the features over every candidate of `data`."""
    return standardiser(np.vstack([q.x for q in data]))


def pair_differences(
    data: Sequence[QueryData], mean: np.ndarray, scale: np.ndarray, max_pairs: int = 200
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


def corpus_shares(sizes: dict[str, int], balance: float) -> dict[str, float]:
    """Each corpus's share of the loss, ∝ queries^(1 − balance), summing to 1: balance 0
    weighs every query alike, 1 every corpus alike, above 1 favours the smaller corpora."""
    raw = {name: float(n) ** (1.0 - balance) for name, n in sizes.items() if n > 0}
    total = sum(raw.values())
    return {name: value / total for name, value in raw.items()}


def weighted_pairs(
    data: Sequence[QueryData],
    mean: np.ndarray,
    scale: np.ndarray,
    max_pairs: int,
    balance: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Pair differences of every corpus in `data` and a weight per pair: within a corpus every
    pair counts alike; each corpus's pairs together weigh its `corpus_shares`."""
    by_corpus: dict[str, list[QueryData]] = {}
    for q in data:
        by_corpus.setdefault(q.corpus, []).append(q)
    shares = corpus_shares({name: len(qs) for name, qs in by_corpus.items()}, balance)
    diffs, weights = [], []
    for name, qs in by_corpus.items():
        d = pair_differences(qs, mean, scale, max_pairs)
        if len(d):
            diffs.append(d)
            weights.append(np.full(len(d), shares[name] / len(d)))
    if not diffs:
        return np.zeros((0, len(mean))), np.zeros(0)
    weights_all = np.concatenate(weights)
    return np.vstack(diffs), weights_all / weights_all.sum()


# --- measuring --------------------------------------------------------------------------------


def ranked_units(q: QueryData, scores: np.ndarray | None) -> list[str]:
    """The query's units in the order search would return them: with scores, exact matches
    first and then by score, ties in fused order (as `pipeline._rerank` sorts); without,
    fused order. The candidates below the cut follow; each unit once, at its first place."""
    n = len(q.units)
    if scores is None:
        order: Sequence[int] = range(n)
    else:
        order = sorted(range(n), key=lambda i: (not q.exact[i], -scores[i]))
    return list(dict.fromkeys([*(q.units[i] for i in order), *q.tail]))


def query_metrics(q: QueryData, scores: np.ndarray | None) -> dict[str, float]:
    from retrieval.search.evaluation import mrr_at_k, ndcg_at_k

    ranking = ranked_units(q, scores)
    relevant = {u for u, grade in q.relevant.items() if grade > 0}
    return {
        "ndcg_at_10": ndcg_at_k(ranking, q.relevant, NDCG_K),
        "found_at_5": 1.0 if relevant.intersection(ranking[:FOUND_K]) else 0.0,
        "mrr_at_10": mrr_at_k(ranking, q.relevant, NDCG_K),
    }


def mean_metrics(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    keys = ("ndcg_at_10", "found_at_5", "mrr_at_10")
    return {k: float(np.mean([r[k] for r in rows])) if rows else 0.0 for k in keys}


def scores_of(q: QueryData, w: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return ((q.x - mean) / scale) @ w


def corpus_metrics(
    data: Sequence[QueryData], w: np.ndarray | None, mean: np.ndarray, scale: np.ndarray
) -> dict[str, dict[str, float]]:
    """Mean metrics per corpus of the ranking by `w` (None: fused order)."""
    by_corpus: dict[str, list[dict[str, float]]] = {}
    for q in data:
        scores = None if w is None else scores_of(q, w, mean, scale)
        by_corpus.setdefault(q.corpus, []).append(query_metrics(q, scores))
    return {name: mean_metrics(rows) for name, rows in by_corpus.items()}


def stratified_folds(data: Sequence[QueryData], folds: int, seed: int) -> list[int]:
    """A fold number per query: each corpus shuffled and dealt out on its own, so every fold
    holds a fifth of every corpus."""
    fold_of = [0] * len(data)
    rng = np.random.default_rng(seed)
    corpora = list(dict.fromkeys(q.corpus for q in data))
    for name in corpora:
        members = [i for i, q in enumerate(data) if q.corpus == name]
        for position, k in enumerate(rng.permutation(len(members))):
            fold_of[members[k]] = position % folds
    return fold_of


@dataclass
class CVResult:
    l2: float
    balance: float
    # corpus → metric → the figure over all its queries, each scored by the model of the
    # fold that did not see it; and the per-fold means of nDCG@10.
    metrics: dict[str, dict[str, float]]
    fold_ndcg: dict[str, list[float]]

    @property
    def objective(self) -> float:
        """The mean over corpora of cross-validated nDCG@10: every corpus counts alike."""
        return float(np.mean([m["ndcg_at_10"] for m in self.metrics.values()]))


def cross_validate(
    data: Sequence[QueryData],
    l2: float,
    balance: float = 0.0,
    folds: int = FOLDS,
    seed: int = 13,
    max_pairs: int = 200,
) -> CVResult:
    fold_of = stratified_folds(data, folds, seed)
    per_query: list[tuple[str, int, dict[str, float]]] = []
    for f in range(folds):
        train = [q for i, q in enumerate(data) if fold_of[i] != f]
        test = [q for i, q in enumerate(data) if fold_of[i] == f]
        mean, scale = feature_standardiser(train)
        diffs, weights = weighted_pairs(train, mean, scale, max_pairs, balance)
        w = fit_pairwise(diffs, l2, weights)
        per_query += [(q.corpus, f, query_metrics(q, scores_of(q, w, mean, scale))) for q in test]
    corpora = list(dict.fromkeys(q.corpus for q in data))
    metrics = {c: mean_metrics([m for name, _, m in per_query if name == c]) for c in corpora}
    fold_ndcg = {
        c: [
            mean_metrics([m for name, k, m in per_query if name == c and k == f])["ndcg_at_10"]
            for f in range(folds)
        ]
        for c in corpora
    }
    return CVResult(l2=l2, balance=balance, metrics=metrics, fold_ndcg=fold_ndcg)


def choose(
    data: Sequence[QueryData],
    l2_grid: Sequence[float],
    balance_grid: Sequence[float],
    max_pairs: int,
    report: Callable[[CVResult], None] = lambda r: None,
) -> CVResult:
    """The (L2, balance) with the best cross-validated objective; the first wins ties."""
    best: CVResult | None = None
    for balance in balance_grid:
        for l2 in l2_grid:
            result = cross_validate(data, l2, balance, max_pairs=max_pairs)
            report(result)
            if best is None or result.objective > best.objective:
                best = result
    assert best is not None
    return best


# --- the command --------------------------------------------------------------------------------


def _format(metrics: dict[str, float]) -> str:
    return (
        f"nDCG@10 {metrics['ndcg_at_10']:.4f}  found@5 {metrics['found_at_5']:.3f}  "
        f"MRR@10 {metrics['mrr_at_10']:.4f}"
    )


def _collect_corpus(args: argparse.Namespace, top_n: int) -> Corpus:
    from retrieval.search.evaluation import load_qrels, load_queries

    if args.answers:
        rows = [
            json.loads(line)
            for line in Path(args.answers).read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        chosen = [r for r in rows if r.get("split") == args.split]
        data, skipped = collect_answers(chosen, args.user or "notes", top_n, args.key_prefix)
        if skipped:
            print(f"  {skipped} questions skipped: answer not verbatim in the file's head version")
        description = (
            f"{args.answers}, split {args.split} ({len(data)} questions): a passage is "
            "positive when it overlaps the question's answer text in its file"
        )
        return Corpus(name=args.name or "notes", description=description, queries=data)
    if not (args.queries and args.qrels):
        sys.exit("give --queries and --qrels, or --answers, or --fit-from DUMP...")
    data = collect(load_queries(args.queries), load_qrels(args.qrels), args.user or "eval", top_n)
    description = (
        f"{args.queries} with qrels {args.qrels} ({len(data)} queries): a passage is positive "
        "when its document is judged relevant"
    )
    return Corpus(name=args.name or "scifact", description=description, queries=data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", help="BEIR queries.jsonl (with --qrels)")
    parser.add_argument("--qrels", help="BEIR qrels .tsv: document-level labels")
    parser.add_argument("--answers", help="JSONL of question/file/answer/split rows")
    parser.add_argument("--split", default="tune", help="the --answers rows to read")
    parser.add_argument("--key-prefix", default="notes:", help="external key = prefix + file")
    parser.add_argument("--name", help="the corpus's name (default scifact, or notes)")
    parser.add_argument("--user", default=None, help="owner of the corpus (eval, or notes)")
    parser.add_argument("--dump", help="collect one corpus to this file and stop")
    parser.add_argument("--fit-from", nargs="+", metavar="DUMP", help="fit on these dumps")
    parser.add_argument("--cache", help="a dump of the corpus, reused if present")
    parser.add_argument("--out", help="the weights file to write (required to fit)")
    parser.add_argument("--l2", type=float, nargs="*", default=list(DEFAULT_L2))
    parser.add_argument("--balance", type=float, nargs="*", default=list(DEFAULT_BALANCE))
    parser.add_argument("--max-pairs", type=int, default=200, help="negatives per positive")
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()
    from retrieval.search.rerank import FEATURE_NAMES, RERANK_TOP_N, LinearModel

    try:
        if args.fit_from:
            corpora = [read_dump(path, FEATURE_NAMES) for path in args.fit_from]
        elif args.cache and os.path.exists(args.cache):
            corpora = [read_dump(args.cache, FEATURE_NAMES)]
        else:
            corpora = [_collect_corpus(args, RERANK_TOP_N)]
            for target in (args.dump, args.cache):
                if target:
                    write_dump(corpora[0], target, FEATURE_NAMES)
                    print(f"wrote {target} ({len(corpora[0].queries)} queries)")
            if args.dump:
                return 0
    except DumpError as exc:
        sys.exit(str(exc))
    if not args.out:
        sys.exit("give --out: the weights file to write")
    names = [c.name for c in corpora]
    if len(set(names)) != len(names):
        sys.exit(f"two dumps carry the same corpus name: {names}")
    data = [q for c in corpora for q in c.queries]
    if not data:
        sys.exit("no queries to fit on")
    mean, scale = feature_standardiser(data)
    fused = corpus_metrics(data, None, mean, scale)
    for c in corpora:
        print(f"{c.name}: {len(c.queries)} queries; fused (no rerank) {_format(fused[c.name])}")
    balance_grid = args.balance if len(corpora) > 1 else [0.0]

    def report(r: CVResult) -> None:
        print(f"l2={r.l2:<6} balance={r.balance:<4} CV objective {r.objective:.4f}")
        for name, m in r.metrics.items():
            folds = ", ".join(f"{s:.3f}" for s in r.fold_ndcg[name])
            print(f"    {name:<10} {_format(m)}  (nDCG@10 folds {folds})")

    best = choose(data, args.l2, balance_grid, args.max_pairs, report)
    sizes = {c.name: len(c.queries) for c in corpora}
    shares = corpus_shares(sizes, best.balance)
    diffs, weights = weighted_pairs(data, mean, scale, args.max_pairs, best.balance)
    w = fit_pairwise(diffs, best.l2, weights)
    in_sample = corpus_metrics(data, w, mean, scale)
    print(f"chosen l2={best.l2}, balance={best.balance} (loss shares {shares}); in-sample:")
    for name, m in in_sample.items():
        print(f"    {name:<10} {_format(m)}")
    for name, weight in sorted(zip(FEATURE_NAMES, w, strict=True), key=lambda t: -abs(t[1])):
        print(f"  {name:<16} {weight:+.3f}")
    model = LinearModel(feature_names=FEATURE_NAMES, mean=mean, scale=scale, weights=w)
    out = args.out

    def rounded(metrics: dict[str, float]) -> dict[str, float]:
        return {k: round(v, 4) for k, v in metrics.items()}

    write_atomically(
        Path(out),
        model.to_json(
            fitted_at=datetime.now(UTC).isoformat(timespec="seconds"),
            fitted_on=[
                {
                    "corpus": c.name,
                    "queries": len(c.queries),
                    "loss_share": round(shares[c.name], 4),
                    "labels": c.description,
                }
                for c in corpora
            ],
            loss="pairwise logistic, L2, each corpus weighted by its loss share",
            max_pairs=args.max_pairs,
            l2=best.l2,
            balance=best.balance,
            cv_folds=FOLDS,
            cv="by query, folds stratified by corpus; chosen by the mean over corpora of nDCG@10",
            cv_objective=round(best.objective, 4),
            cv_by_corpus={
                name: {
                    "fused": rounded(fused[name]),
                    "learned": rounded(best.metrics[name]),
                    "fold_ndcg_at_10": [round(s, 4) for s in best.fold_ndcg[name]],
                }
                for name in best.metrics
            },
            script=SCRIPT,
        )
        + "\n",
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
