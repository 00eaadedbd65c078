"""Retrieval evaluation on BEIR-format data: metrics, loaders and a runner.

The metrics follow the BEIR/pytrec_eval definitions with binary relevance (a qrels score > 0
means relevant):

* nDCG@k  = DCG@k / IDCG@k, DCG@k = sum over ranks i <= k of rel_i / log2(i + 1); IDCG@k is the
  DCG of the ideal ranking of the relevant set. 0 when nothing is relevant.
* Recall@k = |relevant in top k| / |relevant|.
* MRR@k   = 1 / rank of the first relevant document in the top k, else 0.

The runner calls `retrieval.search.pipeline.search`, the same service the search page and the API
use, so the figures describe what a user gets. lode ranks passages; a document is ranked
at its best (first) passage, the usual max-passage aggregation.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from notes.models import Document
from retrieval.search import pipeline as search_service
from retrieval.search.pipeline import Hit

BEIR_KEY_PREFIX = "beir:"
NDCG_K = 10
MRR_K = 10
RECALL_K = 100

Qrels = dict[str, dict[str, int]]


def eval_modes() -> dict[str, tuple[str, str | None]]:
    """Modes the harness can measure: {name: (search mode, reranker or None for the default)}.

    Every search mode in `retrieval.search.pipeline.MODES` (with the configured reranker),
    overridden and extended by `retrieval.search.pipeline.EVAL_MODES` (e.g. "lexical" with
    reranking off,
    "hybrid+rerank"), so a mode added to search is measurable without touching this file.
    """
    modes: dict[str, tuple[str, str | None]] = {m: (m, None) for m in search_service.MODES}
    modes.update(search_service.EVAL_MODES)
    return modes


def _dedup(ranked: Iterable[str]) -> list[str]:
    """`ranked` without repeats, each id at its first position (a run cannot rank a doc twice)."""
    return list(dict.fromkeys(ranked))


def _relevant(relevant: Mapping[str, int]) -> set[str]:
    return {doc_id for doc_id, score in relevant.items() if score > 0}


def ndcg_at_k(ranked_doc_ids: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Binary-relevance nDCG@k with the log2 discount (see the module docstring)."""
    positives = _relevant(relevant)
    if not positives or k <= 0:
        return 0.0
    dcg = sum(
        1.0 / math.log2(rank + 1)
        for rank, doc_id in enumerate(_dedup(ranked_doc_ids)[:k], start=1)
        if doc_id in positives
    )
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(k, len(positives)) + 1))
    return dcg / ideal


def recall_at_k(ranked_doc_ids: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Share of the relevant documents found in the top k."""
    positives = _relevant(relevant)
    if not positives:
        return 0.0
    found = positives.intersection(_dedup(ranked_doc_ids)[:k])
    return len(found) / len(positives)


def mrr_at_k(ranked_doc_ids: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Reciprocal rank of the first relevant document within the top k, else 0."""
    positives = _relevant(relevant)
    for rank, doc_id in enumerate(_dedup(ranked_doc_ids)[:k], start=1):
        if doc_id in positives:
            return 1.0 / rank
    return 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation (numpy's default method)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def load_queries(path: Path | str) -> dict[str, str]:
    """BEIR `queries.jsonl` as {query id: text}, in file order."""
    queries: dict[str, str] = {}
    with Path(path).open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                queries[str(row["_id"])] = str(row["text"])
    return queries


def load_qrels(path: Path | str) -> Qrels:
    """BEIR qrels TSV (`query-id  corpus-id  score`) as {query id: {doc id: score}}.

    Lines may end in CRLF (the published files do); the header line is skipped.
    """
    qrels: Qrels = {}
    with Path(path).open(encoding="utf-8", newline="") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) < 3 or not fields[0].strip():
                continue
            query_id, doc_id, score = (f.strip() for f in fields[:3])
            try:
                value = int(score)
            except ValueError:
                if number == 1:
                    continue  # the header: query-id, corpus-id, score
                raise ValueError(
                    f"{path}:{number}: score {score!r} is not a whole number"
                ) from None
            qrels.setdefault(query_id, {})[doc_id] = value
    return qrels


def docs_from_hits(hits: Iterable[Hit]) -> list[Document]:
    """Documents in the order of their best passage: each at its first hit, no repeats."""
    documents: dict[int, Document] = {}
    for hit in hits:
        document = hit.passage.document
        documents.setdefault(document.pk, document)
    return list(documents.values())


def beir_ids(documents: Iterable[Document]) -> list[str]:
    """BEIR document ids of `documents` (external_key `beir:<id>`); other documents dropped."""
    return [
        doc.external_key.removeprefix(BEIR_KEY_PREFIX)
        for doc in documents
        if doc.external_key.startswith(BEIR_KEY_PREFIX)
    ]


@dataclass(frozen=True)
class EvalResult:
    """Mean metrics over the evaluated queries, and per-query search latency in ms."""

    mode: str
    queries: int
    ndcg_at_10: float
    recall_at_100: float
    mrr_at_10: float
    latency_p50_ms: float
    latency_p95_ms: float
    errors: int = 0  # queries the search service refused (QueryError); scored 0
    degraded: int = 0  # queries answered in a degraded state (e.g. no dense leg)
    # Ranked BEIR doc ids per query id, for error analysis; not part of the JSON report.
    runs: dict[str, list[str]] = field(default_factory=dict, repr=False, compare=False)

    def as_json(self) -> dict[str, Any]:
        """The report with exactly the keys the benchmark files and gates read."""
        return {
            "ndcg@10": self.ndcg_at_10,
            "recall@100": self.recall_at_100,
            "mrr@10": self.mrr_at_10,
            "latency_ms": {"p50": self.latency_p50_ms, "p95": self.latency_p95_ms},
            "queries": self.queries,
            "mode": self.mode,
        }


def evaluate(
    user: AbstractBaseUser,
    queries: Mapping[str, str],
    qrels: Qrels,
    mode: str,
    k_retrieve: int = RECALL_K,
) -> EvalResult:
    """Run every query that has judgements through `search()` as `user` and score the runs.

    `mode` is a key of `eval_modes()`. Each query asks for `search.MAX_LIMIT` passages (the
    most `search()` returns; the lexical leg alone gives at most 256), which become at most
    `k_retrieve` documents. Recall@100 is over those documents, so it is Recall@k_retrieve
    when `k_retrieve` < 100. Latency is the wall time of the `search()` call (parse, SQL,
    hydration, fusion, rerank), measured with `perf_counter`.
    """
    modes = eval_modes()
    if mode not in modes:
        raise ValueError(f"Unknown evaluation mode {mode!r}; choose one of: {', '.join(modes)}")
    search_mode, rerank = modes[mode]
    ndcgs: list[float] = []
    recalls: list[float] = []
    mrrs: list[float] = []
    latencies: list[float] = []
    runs: dict[str, list[str]] = {}
    errors = degraded = 0
    for query_id, text in queries.items():
        relevant = qrels.get(query_id)
        if relevant is None:
            continue
        started = time.perf_counter()
        result = search_service.search(
            user=user,
            query=text,
            mode=search_mode,
            rerank=rerank,
            limit=search_service.MAX_LIMIT,
            highlight=False,
        )
        latencies.append((time.perf_counter() - started) * 1000)
        errors += bool(result.error)
        degraded += bool(result.degraded)
        ranked = beir_ids(docs_from_hits(result.hits))[:k_retrieve]
        runs[query_id] = ranked
        ndcgs.append(ndcg_at_k(ranked, relevant, NDCG_K))
        recalls.append(recall_at_k(ranked, relevant, RECALL_K))
        mrrs.append(mrr_at_k(ranked, relevant, MRR_K))
    count = len(ndcgs)

    def mean(values: list[float]) -> float:
        return sum(values) / count if count else 0.0

    return EvalResult(
        mode=mode,
        queries=count,
        ndcg_at_10=mean(ndcgs),
        recall_at_100=mean(recalls),
        mrr_at_10=mean(mrrs),
        latency_p50_ms=percentile(latencies, 50),
        latency_p95_ms=percentile(latencies, 95),
        errors=errors,
        degraded=degraded,
        runs=runs,
    )


def has_beir_corpus(user: AbstractBaseUser) -> bool:
    """Whether `user` owns any live BEIR-loaded document."""
    return Document.objects.filter(
        owner=user, deleted_at__isnull=True, external_key__startswith=BEIR_KEY_PREFIX
    ).exists()
