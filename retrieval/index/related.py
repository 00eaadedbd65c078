"""`related` edges: documents whose embeddings are close (an inferred edge kind).

A document's vector is the mean of its head passages' vectors, normalised, read back from
the active Chroma collection (never re-embedded: the worker already paid for them). Its
nearest passages in the *same space* (`space` metadata, the same filter the dense leg
uses) name candidate documents; each candidate's own document vector is compared with the
document's, and the best `LODE_RELATED_MAX` (≤ 5) at or above `LODE_RELATED_THRESHOLD`
(measured by `bench/related_threshold.py`) become `related` edges: origin and `from` = the
document and its head, `to` = the other document, `score` = the cosine similarity of the
two document vectors, basis = the model (manifest key and model id) and the threshold.

Derived data at the bottom of the trust gradient: the vector sync calls
`refresh_related_quietly` after it wrote a document's vectors, and nothing that fails here
may fail the sync — a dead Chroma means no related edges (logged), nothing else. The edges
are replaced in one transaction that first checks the document's head is still the one
the vectors were read for, so a save racing the computation never leaves edges pinned to
an old version (and `edges.refresh_edges(changed=True)` removes a changed document's
related edges both ways when it saves).

Eligibility: only documents of the document's own space are candidates, so a related edge
never joins two spaces (readers also apply `graph_read.visible_edges` to both ends).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db import transaction

from notes.models import Document
from retrieval.index.embeddings import EmbeddingUnavailable, current_manifest
from retrieval.index.vectors import (
    VectorStore,
    VectorStoreUnavailable,
    chunked,
    get_vector_store,
)
from retrieval.models import Edge, GraphGeneration, Passage

logger = logging.getLogger("lode.related")

RELATED_RULE = "embedding-similarity"
# Bump when the way the score or the candidates are computed changes: health then reports
# edges of the old rule as stale and `repair` recomputes them.
RELATED_RULE_VERSION = "1"
# Nearest passages read per document, and candidate documents scored among them. Passages
# of one long document crowd the list, hence more passages than documents.
CANDIDATE_PASSAGES = 64
CANDIDATE_DOCUMENTS = 20
# A document with more head passages than this is represented by its first ones (a very
# long document's mean vector drifts towards generic anyway; bounded work per save).
MAX_PASSAGES_PER_DOCUMENT = 200


def related_threshold() -> float:
    return float(settings.LODE_RELATED_THRESHOLD)


def related_limit() -> int:
    return max(0, min(5, int(settings.LODE_RELATED_MAX)))


@dataclass
class RelatedReport:
    """What one `refresh_related` run did."""

    documents: int = 0  # documents whose related edges were (re)written
    edges: int = 0  # related edges written
    skipped: int = 0  # documents without complete vectors, or whose head moved meanwhile
    error: str = ""  # why nothing was computed (Chroma or the model unavailable)
    examples: list[int] = field(default_factory=list)


# --- vectors -----------------------------------------------------------------------------


def _head_passages_by_document(document_ids: Iterable[int]) -> dict[int, tuple[int, list[int]]]:
    """For each live document: (its head version id, its head passage ids, by position)."""
    found: dict[int, tuple[int, list[int]]] = {}
    ids = sorted(set(document_ids))
    for part in chunked(ids, 500):
        rows = (
            Passage.objects.filter(
                document_id__in=list(part),
                is_head=True,
                document__deleted_at__isnull=True,
                version_id__isnull=False,
            )
            .order_by("document_id", "position", "pk")
            .values_list("document_id", "version_id", "pk")
        )
        passages: dict[int, list[int]] = defaultdict(list)
        versions: dict[int, int] = {}
        for document_id, version_id, pk in rows:
            versions[document_id] = version_id
            passages[document_id].append(pk)
        for document_id, pks in passages.items():
            found[document_id] = (versions[document_id], pks[:MAX_PASSAGES_PER_DOCUMENT])
    return found


def document_vectors(
    store: VectorStore, heads: dict[int, tuple[int, list[int]]]
) -> dict[int, np.ndarray]:
    """The normalised mean vector of each document whose head passages all have a vector
    (a document still being embedded has none yet: its own sync computes it later)."""
    wanted = [pk for _, pks in heads.values() for pk in pks]
    stored = store.get_embeddings(wanted)
    vectors: dict[int, np.ndarray] = {}
    for document_id, (_, pks) in heads.items():
        if not pks or any(pk not in stored for pk in pks):
            continue
        mean = np.mean(np.stack([stored[pk] for pk in pks]), axis=0)
        norm = float(np.linalg.norm(mean))
        if norm > 0:
            vectors[document_id] = (mean / norm).astype(np.float32)
    return vectors


# --- candidates --------------------------------------------------------------------------


def related_candidates(
    store: VectorStore,
    document_id: int,
    space_id: int,
    vector: np.ndarray,
    *,
    threshold: float,
    limit: int,
) -> list[tuple[int, float]]:
    """The `limit` documents of `space_id` most similar to `vector` at or above
    `threshold`, as (document id, cosine), best first, ties by id; never `document_id`."""
    if limit <= 0:
        return []
    hits = store.query(vector, space_ids=[space_id], limit=CANDIDATE_PASSAGES)
    by_passage = dict(
        Passage.objects.filter(pk__in=[hit.passage_id for hit in hits]).values_list(
            "pk", "document_id"
        )
    )
    order: list[int] = []
    for hit in hits:  # best first: keep the first CANDIDATE_DOCUMENTS distinct documents
        other = by_passage.get(hit.passage_id)
        if other is None or other == document_id or other in order:
            continue
        order.append(other)
        if len(order) == CANDIDATE_DOCUMENTS:
            break
    others = document_vectors(store, _head_passages_by_document(order))
    scored = [(other, float(np.dot(vector, others[other]))) for other in order if other in others]
    scored = [(other, score) for other, score in scored if score >= threshold]
    scored.sort(key=lambda pair: (-pair[1], pair[0]))
    return scored[:limit]


# --- writing -----------------------------------------------------------------------------


def _basis(manifest_key: str, model_id: str, threshold: float) -> dict[str, object]:
    return {"model": model_id, "manifest": manifest_key, "threshold": threshold}


def _write(
    document_id: int, version_id: int, found: list[tuple[int, float]], basis: dict[str, object]
) -> bool:
    """Replace the document's related edges, if its head is still `version_id`."""
    with transaction.atomic():
        document = (
            Document.objects.select_for_update()
            .filter(pk=document_id, deleted_at__isnull=True)
            .only("pk", "head_id", "space_id")
            .first()
        )
        if document is None or document.head_id != version_id:
            return False
        Edge.objects.filter(origin_id=document_id, kind=Edge.Kind.RELATED).delete()
        # A target moved out of the space or deleted since the query: not eligible.
        live = set(
            Document.objects.filter(
                pk__in=[other for other, _ in found],
                space_id=document.space_id,
                deleted_at__isnull=True,
                head__isnull=False,
            ).values_list("pk", flat=True)
        )
        Edge.objects.bulk_create(
            [
                Edge(
                    origin_id=document_id,
                    kind=Edge.Kind.RELATED,
                    from_document_id=document_id,
                    from_version_id=version_id,
                    to_document_id=other,
                    resolution=Edge.Resolution.RESOLVED,
                    rule=RELATED_RULE,
                    rule_version=RELATED_RULE_VERSION,
                    score=round(score, 6),
                    basis=basis,
                )
                for other, score in found
                if other in live
            ]
        )
        GraphGeneration.objects.create(documents=1)
    return True


def refresh_related(
    document_ids: Iterable[int],
    *,
    store: VectorStore | None = None,
    threshold: float | None = None,
) -> RelatedReport:
    """Recompute the related edges of these documents from the active vector index.

    Raises `VectorStoreUnavailable` / `EmbeddingUnavailable` (callers that must not fail
    use `refresh_related_quietly`). A document whose head passages do not all have a
    vector yet is skipped and keeps the edges it has (none, after a save)."""
    report = RelatedReport()
    ids = sorted(set(document_ids))
    if not ids:
        return report
    manifest = current_manifest()
    store = store if store is not None else get_vector_store()
    threshold = related_threshold() if threshold is None else threshold
    basis = _basis(store.manifest_key, manifest.model_id, threshold)
    limit = related_limit()
    spaces = dict(
        Document.objects.filter(pk__in=ids, deleted_at__isnull=True).values_list("pk", "space_id")
    )
    for part in chunked(ids, 100):
        heads = _head_passages_by_document(part)
        vectors = document_vectors(store, heads)
        for document_id in part:
            if document_id not in vectors or document_id not in spaces:
                report.skipped += 1
                continue
            found = related_candidates(
                store,
                document_id,
                spaces[document_id],
                vectors[document_id],
                threshold=threshold,
                limit=limit,
            )
            if _write(document_id, heads[document_id][0], found, basis):
                report.documents += 1
                report.edges += len(found)
                if len(report.examples) < 10:
                    report.examples.append(document_id)
            else:
                report.skipped += 1
    return report


def refresh_related_quietly(document_ids: Iterable[int], manifest_key: str = "") -> RelatedReport:
    """`refresh_related` for the vector sync: never raises. `manifest_key`: the manifest
    the sync wrote; a sync building another manifest's collection (a re-index) is not
    what queries read, so related edges wait for the switch (repair recomputes them)."""
    document_ids = sorted(set(document_ids))
    try:
        if manifest_key and manifest_key != current_manifest().key:
            return RelatedReport(error="the vectors written are not the active manifest's")
        return refresh_related(document_ids)
    except (VectorStoreUnavailable, EmbeddingUnavailable) as exc:
        logger.warning("no related edges for documents %s: %s", _few(document_ids), exc)
        return RelatedReport(error=str(exc))
    except Exception as exc:  # derived data: health reports it, repair recomputes it
        logger.exception("related edges of documents %s failed", _few(document_ids))
        return RelatedReport(error=f"{type(exc).__name__}: {exc}")


def _few(document_ids: Iterable[int]) -> str:
    ids = sorted(set(document_ids))
    return ", ".join(map(str, ids[:10])) + (" …" if len(ids) > 10 else "")
