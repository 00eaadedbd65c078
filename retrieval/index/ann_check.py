"""How well Chroma's approximate search finds the true nearest neighbours.

For each query, the top-k of the dense leg's own call (`VectorStore.query`: HNSW with the
eligibility filter in Chroma's `where`, or, for an audience that sees every document or a
large share of them, without it and checked on the database) is compared with an exact
brute-force cosine top-k over the same stored vectors of the same eligible set. Reported
with the audience's spaces only ("space_filter_only": whichever way the leg serves them),
and with an extra metadata filter that keeps about half the corpus (`version >= median`),
since filtered HNSW walks are where approximate search loses neighbours.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from django.contrib.auth.models import AbstractBaseUser

from retrieval.eligibility import member_space_ids
from retrieval.models import Passage


@dataclass(frozen=True)
class AnnRecall:
    k: int
    queries: int
    vectors: int
    unfiltered: float  # space filter only
    filtered: float  # spaces + version >= median
    filtered_vectors: int

    def as_json(self) -> dict[str, object]:
        return {
            "k": self.k,
            "queries": self.queries,
            "vectors": self.vectors,
            f"recall@{self.k}": {
                "space_filter_only": self.unfiltered,
                "extra_filter": self.filtered,
            },
            "extra_filter_vectors": self.filtered_vectors,
            "extra_filter": "version >= median version id",
        }


def _exact_top(matrix: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int) -> set[int]:
    cosines = matrix @ query
    order = np.lexsort((ids, -cosines))[:k]  # best first, ties by passage id like the leg
    return {int(ids[i]) for i in order}


def ann_recall(user: AbstractBaseUser, texts: Iterable[str], *, k: int = 10) -> AnnRecall:
    """Recall@k of the dense leg against exact search, with and without an extra filter."""
    from retrieval.index.embeddings import get_embedder
    from retrieval.index.vectors import get_vector_store

    store, embedder = get_vector_store(), get_embedder()
    spaces = sorted(member_space_ids(user.pk))
    eligible = dict(
        Passage.objects.filter(
            is_head=True,
            document__space_id__in=spaces,
            document__deleted_at__isnull=True,
        ).values_list("id", "version_id")
    )
    stored = store.get_embeddings(eligible)
    ids = np.asarray(sorted(stored), dtype=np.int64)
    matrix = np.stack([stored[int(i)] for i in ids]).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    versions = np.asarray([eligible[int(i)] for i in ids])
    median = int(np.median(versions))
    half = versions >= median
    totals = {"unfiltered": 0.0, "filtered": 0.0}
    count = 0
    for text in texts:
        query = embedder.embed_query(text).astype(np.float32)
        query /= np.linalg.norm(query)
        for name, mask, where in (
            ("unfiltered", slice(None), None),
            ("filtered", half, {"version": {"$gte": median}}),
        ):
            truth = _exact_top(matrix[mask], ids[mask], query, k)
            found = {
                h.passage_id for h in store.query(query, space_ids=spaces, limit=k, where=where)
            }
            totals[name] += len(truth & found) / max(1, len(truth))
        count += 1
    return AnnRecall(
        k=k,
        queries=count,
        vectors=len(ids),
        unfiltered=totals["unfiltered"] / max(1, count),
        filtered=totals["filtered"] / max(1, count),
        filtered_vectors=int(half.sum()),
    )
