"""Embedding work is shared fairly between spaces (`retrieval/index/embed_order.py`): a
large backlog in one space never keeps another space's new passage out of the next window.

The picker alone (pure, then its one query on both databases), then through the worker's
task with the real model: the first batch the model sees holds the other space's passage.
"""

from __future__ import annotations

import pytest

from notes import services
from retrieval.index import sync as tasks
from retrieval.index.embed_order import next_window, round_robin
from retrieval.index.embeddings import current_manifest, get_embedder
from retrieval.index.vectors import get_vector_store, pending_count, pending_passages
from retrieval.models import Passage
from tests.factories import CountingEmbedder, sections

# --- the pure rule -----------------------------------------------------------------------


def test_round_robin_takes_one_passage_of_each_space_in_turn() -> None:
    rows = [(1, 10), (2, 10), (3, 10), (4, 10), (9, 20), (7, 30), (8, 30)]
    # Spaces in the order of their oldest passage: 10 (1), 30 (7), 20 (9).
    assert round_robin(rows, 5) == [1, 7, 9, 2, 8]
    assert round_robin(rows, 100) == [1, 7, 9, 2, 8, 3, 4]
    assert round_robin(reversed(rows), 5) == [1, 7, 9, 2, 8]  # any input order
    assert round_robin(rows, 0) == [] and round_robin([], 5) == []


def test_one_passage_in_a_quiet_space_is_in_the_first_window_of_a_large_backlog() -> None:
    backlog = [(pk, 1) for pk in range(1, 10_001)]
    window = round_robin([*backlog, (10_001, 2)], 256)
    assert len(window) == 256 and 10_001 in window
    assert window == [1, 10_001, *range(2, 256)]  # the backlog keeps its own order


# --- the query, on both databases --------------------------------------------------------


def big_note(owner, passages: int):
    return services.note_create(
        owner=owner,
        title="Import",
        body=sections(
            *(f"Imported paragraph number {i} about topic {i}." for i in range(passages))
        ),
    )


@pytest.mark.django_db
def test_next_window_puts_the_other_spaces_passage_in_the_next_batch(alice, bob) -> None:
    big = big_note(alice, 60)
    small = services.note_create(owner=bob, title="Bread", body="Bake bread at 220 degrees.")
    (small_passage,) = Passage.objects.filter(document=small, is_head=True).values_list(
        "pk", flat=True
    )
    big_passages = sorted(
        Passage.objects.filter(document=big, is_head=True).values_list("pk", flat=True)
    )
    assert len(big_passages) == 60 and small_passage > big_passages[-1]  # saved last

    window = next_window(pending_passages(current_manifest().key), 8)
    assert window == [big_passages[0], small_passage, *big_passages[1:7]]
    # In id order (the old way) the note would have waited for all 60 of the import.
    oldest = list(pending_passages(current_manifest().key).order_by("pk")[:8])
    assert small_passage not in [p.pk for p in oldest]


@pytest.mark.django_db
@pytest.mark.usefixtures("private_vectors")
def test_a_large_imports_task_embeds_another_spaces_note_in_its_first_batch(
    alice, bob, monkeypatch
) -> None:
    big = big_note(alice, 40)
    small = services.note_create(owner=bob, title="Bread", body="Bake bread at 220 degrees.")
    embedder = CountingEmbedder(get_embedder())
    monkeypatch.setattr(tasks, "get_embedder", lambda: embedder)
    monkeypatch.setattr(tasks, "WINDOW_BATCHES", 1)

    report = tasks.sync_vectors(
        tasks.document_passage_ids(big.pk), batch_size=8, wait_for_others=False, fair=True
    )
    assert any("Bake bread" in text for text in embedder.calls[0])  # the first window
    assert len(embedder.calls[0]) == 8
    # Every passage embedded exactly once: the import's and the note's.
    assert report.embedded == 41 and len(embedder.texts) == len(set(embedder.texts)) == 41
    assert pending_count() == 0
    assert len(get_vector_store().ids()) == 41
    assert tasks.embed_document.call(small.pk)["embedded"] == 0


@pytest.mark.django_db
@pytest.mark.usefixtures("private_vectors")
def test_a_sync_limited_to_some_passages_embeds_only_those(alice, bob, monkeypatch) -> None:
    ops = services.note_create(owner=alice, title="Ops", body=sections("One.", "Two."))
    services.note_create(owner=bob, title="Bread", body="Bake bread at 220 degrees.")
    ids = sorted(Passage.objects.filter(document=ops, is_head=True).values_list("pk", flat=True))
    report = tasks.sync_vectors(ids)
    assert report.written == 2 and sorted(get_vector_store().ids()) == ids
    assert pending_count() == 1  # bob's, left to its own task
