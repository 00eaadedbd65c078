"""`related` edges (`retrieval/index/related.py`): embedding similarity of
documents above the measured threshold, written after the vector sync, inferred-labelled,
within one space, and never a reason for the sync to fail.

The real embedder and a private Chroma folder, as in `test_index_health.py`. The expected
edges are rebuilt independently: each document's passages embedded again with the model
(not read back from Chroma), averaged, normalised and compared pairwise.
"""

from __future__ import annotations

import numpy as np
import pytest
from django.conf import settings as django_settings

from notes import services
from notes.models import Document, TrustTier
from retrieval.eligibility import audience_for
from retrieval.index import related, vectors
from retrieval.index.embeddings import passage_input
from retrieval.index.health import index_health, repair_indexes
from retrieval.index.sync import embed_document, sync_vectors
from retrieval.index.vectors import VectorStoreUnavailable
from retrieval.models import Edge, Passage, PassageVector
from retrieval.search.graph_read import basis_of, edge_tier, visible_edges
from spaces import services as space_services
from spaces.models import Role
from tests import factories
from tests.factories import free_port

pytestmark = pytest.mark.django_db

TEXTS = {
    "Redis cache eviction": (
        "Set maxmemory-policy allkeys-lru on the Redis cache so that eviction removes the "
        "least recently used keys when memory is full."
    ),
    "Redis memory tuning": (
        "The Redis cache needs maxmemory set; the allkeys-lru eviction policy keeps hot keys "
        "in memory and drops cold ones."
    ),
    "Postgres backups": (
        "Nightly pg_dump backups of the Postgres database go to the NAS; restore one every "
        "month to prove the backups work."
    ),
    "Croissant recipe": (
        "Fold cold butter into the dough three times, rest it overnight and bake the "
        "croissants at 200 degrees until golden."
    ),
}


@pytest.fixture
def notes(alice, bob, private_vectors) -> dict[str, Document]:
    """Alice's personal notes, a near-duplicate in a shared space she belongs to, and one in
    Bob's personal space."""
    found = {title: factories.note(alice, title, body) for title, body in TEXTS.items()}
    ops = space_services.space_create(by=alice, name="Ops")
    space_services.member_add(by=alice, space=ops, username="bob", role=Role.EDITOR)
    found["ops"] = services.note_create(
        owner=alice, title="Redis eviction settings", body=TEXTS["Redis cache eviction"], space=ops
    )
    found["bob"] = factories.note(bob, "Redis eviction (bob)", TEXTS["Redis cache eviction"])
    return found


def expected_edges(embedder, threshold: float, limit: int) -> dict[tuple[int, int], float]:
    """Every document's related edges rebuilt without Chroma: same space, cosine of the mean
    vectors at or above `threshold`, best `limit` per document."""
    means: dict[int, np.ndarray] = {}
    spaces: dict[int, int] = {}
    for document in Document.objects.filter(deleted_at__isnull=True, head__isnull=False):
        passages = list(
            Passage.objects.filter(version_id=document.head_id, is_head=True)
            .select_related("document")
            .order_by("position", "pk")
        )
        matrix = embedder.embed_passages([passage_input(p) for p in passages])
        mean = np.mean(matrix, axis=0)
        means[document.pk] = mean / np.linalg.norm(mean)
        spaces[document.pk] = document.space_id
    edges: dict[tuple[int, int], float] = {}
    for a, va in means.items():
        scored = sorted(
            (
                (-(float(np.dot(va, vb))), b)
                for b, vb in means.items()
                if b != a and spaces[b] == spaces[a]
            )
        )
        for negative, b in scored[:limit]:
            if -negative >= threshold:
                edges[(a, b)] = -negative
    return edges


def stored_edges() -> dict[tuple[int, int], float]:
    return {
        (e.from_document_id, e.to_document_id): e.score
        for e in Edge.objects.filter(kind=Edge.Kind.RELATED)
    }


def test_related_edges_are_the_documents_above_the_threshold(embedder, notes) -> None:
    report = sync_vectors(None, embedder=embedder)
    assert report.related_error == "" and report.related_edges > 0
    assert sorted(report.documents) == sorted(d.pk for d in notes.values())
    stored = stored_edges()
    threshold = django_settings.LODE_RELATED_THRESHOLD
    expected = expected_edges(embedder, threshold, 5)
    assert set(stored) == set(expected)
    for pair, score in stored.items():
        assert score == pytest.approx(expected[pair], abs=2e-3)
        assert score >= threshold
    redis, tuning = notes["Redis cache eviction"], notes["Redis memory tuning"]
    assert (redis.pk, tuning.pk) in stored and (tuning.pk, redis.pk) in stored
    # The threshold matters: the croissants are in the same space and below it.
    croissant = notes["Croissant recipe"]
    assert not any(croissant.pk in pair for pair in stored)
    assert Edge.objects.filter(kind=Edge.Kind.RELATED).count() == report.related_edges


def test_related_edges_never_cross_spaces(embedder, notes) -> None:
    sync_vectors(None, embedder=embedder)
    for edge in Edge.objects.filter(kind=Edge.Kind.RELATED).select_related(
        "from_document", "to_document"
    ):
        assert edge.from_document.space_id == edge.to_document.space_id
    # The same text in the shared space and in Bob's space: closest of all, yet no edge.
    redis = notes["Redis cache eviction"]
    for other in (notes["ops"], notes["bob"]):
        assert not Edge.objects.filter(
            kind=Edge.Kind.RELATED, from_document=redis, to_document=other
        ).exists()
        assert not Edge.objects.filter(
            kind=Edge.Kind.RELATED, from_document=other, to_document=redis
        ).exists()
    # Bob sees none of Alice's personal related edges.
    bob_edges = visible_edges(audience_for(notes["bob"].owner_id)).filter(kind=Edge.Kind.RELATED)
    assert not bob_edges.filter(from_document__space_id=redis.space_id).exists()


def test_related_edges_are_labelled_inferred_with_their_basis(embedder, notes) -> None:
    sync_vectors(None, embedder=embedder)
    edge = Edge.objects.filter(kind=Edge.Kind.RELATED).first()
    assert edge is not None and edge.inferred
    assert edge.get_kind_display() == "related (inferred)"
    assert edge_tier(edge.kind, TrustTier.NOTE) == TrustTier.INFERRED
    basis = basis_of(edge)
    assert basis["inferred"] is True
    assert basis["rule"] == "embedding-similarity" and basis["rule_version"] == "1"
    assert basis["model"] == embedder.manifest.model_id
    assert basis["manifest"] == embedder.manifest.key
    assert basis["threshold"] == django_settings.LODE_RELATED_THRESHOLD
    assert basis["score"] == round(edge.score, 4)
    assert edge.origin_id == edge.from_document_id
    assert edge.from_version_id == edge.from_document.head_id


def test_at_most_the_configured_number_per_document(embedder, notes, settings) -> None:
    settings.LODE_RELATED_MAX = 1
    settings.LODE_RELATED_THRESHOLD = 0.05
    sync_vectors(None, embedder=embedder)
    stored = stored_edges()
    assert set(stored) == set(expected_edges(embedder, 0.05, 1))
    origins = [a for a, _ in stored]
    assert len(origins) == len(set(origins))


def test_a_new_version_replaces_the_related_edges_after_its_sync(embedder, notes, alice) -> None:
    sync_vectors(None, embedder=embedder)
    redis = notes["Redis cache eviction"]
    assert Edge.objects.filter(kind=Edge.Kind.RELATED, from_document=redis).exists()
    services.note_update(
        document=redis,
        user=alice,
        base_version_id=redis.head_id,
        title="Redis cache eviction",
        body="Bake the croissants with cold butter folded into the dough, rested overnight.",
    )
    redis.refresh_from_db()
    # Its related edges went with its old version, both ways, in the save transaction.
    assert not Edge.objects.filter(kind=Edge.Kind.RELATED, from_document=redis).exists()
    assert not Edge.objects.filter(kind=Edge.Kind.RELATED, to_document=redis).exists()
    result = embed_document.call(redis.pk)
    assert result["related_error"] == "" and result["documents"] == 1
    mine = Edge.objects.filter(kind=Edge.Kind.RELATED, from_document=redis)
    assert {e.to_document_id for e in mine} == {notes["Croissant recipe"].pk}
    assert {e.from_version_id for e in mine} == {redis.head_id}
    report = index_health()
    assert report.edges.related_invalid == report.edges.related_stale == 0
    assert report.healthy, report.problems


def test_a_head_that_moved_meanwhile_gets_no_edges(embedder, notes, alice) -> None:
    sync_vectors(None, embedder=embedder, related=False)
    redis = notes["Redis cache eviction"]
    old_head = redis.head_id
    services.note_update(
        document=redis,
        user=alice,
        base_version_id=old_head,
        title="Redis cache eviction",
        body="Changed.",
    )
    found = [(notes["Redis memory tuning"].pk, 0.9)]
    assert not related._write(redis.pk, old_head, found, {"threshold": 0.4})
    assert not Edge.objects.filter(kind=Edge.Kind.RELATED).exists()


# --- a dead Chroma: no related edges, nothing else fails ---------------------------------


def test_a_dead_chroma_gives_no_related_edges_and_no_error(embedder, notes, settings) -> None:
    sync_vectors(None, embedder=embedder, related=False)
    settings.CHROMA_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    vectors.reset_vector_stores()
    try:
        ids = [d.pk for d in notes.values()]
        report = related.refresh_related_quietly(ids)
        assert report.error == "vector server unreachable"
        assert report.edges == 0
        with pytest.raises(VectorStoreUnavailable):
            related.refresh_related(ids)
        assert not Edge.objects.filter(kind=Edge.Kind.RELATED).exists()
    finally:
        vectors.reset_vector_stores()


@pytest.mark.parametrize(
    "failure", [VectorStoreUnavailable("vector server unreachable"), RuntimeError("boom")]
)
def test_the_vector_sync_succeeds_when_related_edges_fail(
    embedder, notes, monkeypatch, failure
) -> None:
    def broken(*args, **kwargs):
        raise failure

    monkeypatch.setattr(related, "refresh_related", broken)
    report = sync_vectors(None, embedder=embedder)
    assert report.written == Passage.objects.filter(is_head=True).count() > 0
    assert PassageVector.objects.count() == report.written
    assert report.related_edges == 0
    assert report.related_error in ("vector server unreachable", "RuntimeError: boom")
    assert not Edge.objects.filter(kind=Edge.Kind.RELATED).exists()
    assert report.as_dict()["related_error"] == report.related_error


def test_related_edges_wait_for_the_active_manifest(embedder, notes) -> None:
    """A sync that wrote another manifest's collection (a re-index being built) computes
    nothing: queries read the active one."""
    report = related.refresh_related_quietly([notes["Croissant recipe"].pk], "not-active")
    assert report.error and report.edges == 0


# --- health and repair -------------------------------------------------------------------


def test_stale_related_edges_are_recomputed_by_repair(embedder, notes, settings) -> None:
    sync_vectors(None, embedder=embedder)
    assert index_health().healthy
    before = stored_edges()
    settings.LODE_RELATED_THRESHOLD = 0.3
    report = index_health()
    assert report.edges.related_stale == len(before) > 0
    repaired = repair_indexes(embedder=embedder)
    assert repaired.edges.related_recomputed > 0 and repaired.edges.related_error == ""
    assert repaired.after.healthy, repaired.after.problems
    assert repaired.canonical_unchanged
    assert set(stored_edges()) == set(expected_edges(embedder, 0.3, 5))
    assert {e.basis["threshold"] for e in Edge.objects.filter(kind=Edge.Kind.RELATED)} == {0.3}


def test_an_invalid_related_edge_is_removed_and_its_document_recomputed(
    embedder, notes, alice
) -> None:
    sync_vectors(None, embedder=embedder)
    redis = notes["Redis cache eviction"]
    wanted = stored_edges()
    # A related edge to the shared space's note: a cross-space edge nobody should see.
    Edge.objects.create(
        origin=redis,
        kind=Edge.Kind.RELATED,
        from_document=redis,
        from_version_id=redis.head_id,
        to_document=notes["ops"],
        rule=related.RELATED_RULE,
        rule_version=related.RELATED_RULE_VERSION,
        score=0.99,
        basis={"threshold": django_settings.LODE_RELATED_THRESHOLD},
    )
    report = index_health()
    assert report.edges.related_invalid == 1
    repaired = repair_indexes(embedder=embedder)
    assert repaired.edges.related_removed == 1
    assert repaired.after.healthy, repaired.after.problems
    assert stored_edges().keys() == wanted.keys()
