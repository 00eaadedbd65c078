"""The pending table: search's "not yet embedded" note counts `PendingVector` rows
instead of anti-joining every head passage with its vector records. It must say exactly
what that anti-join says after every write that changes the head set or the records — a new
note, an edit, a bulk import, a delete and an undelete, a re-chunk, the worker's sync and
prune, a lost vector folder, a manifest switch — and `lode_index health` / `repair` must
find and mend a drift made behind its back.
"""

from __future__ import annotations

import importlib
from dataclasses import replace

import pytest

from notes import services
from notes.models import Document
from retrieval.index import sync as tasks
from retrieval.index import vectors
from retrieval.index.embeddings import get_embedder
from retrieval.index.health import index_health, repair_indexes
from retrieval.index.passages import rechunk_head
from retrieval.index.sync import reindex_vectors, sync_vectors
from retrieval.index.vectors import (
    PendingDrift,
    open_vector_store,
    pending_count,
    pending_drift,
    pending_note_count,
)
from retrieval.models import Passage, PassageVector, PendingVector, VectorIndexState
from spaces.models import personal_space_id
from tests.factories import CountingEmbedder, edit, head_ids, sections

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_vectors")]

NO_DRIFT = PendingDrift(missing=0, extra=0)


def note_count(space_ids=None) -> int:
    return pending_note_count(space_ids, at_most=10_000)


def assert_matches_truth() -> None:
    """The table says what the anti-join says, overall and per space."""
    assert pending_drift() == NO_DRIFT
    assert note_count() == pending_count()


def test_new_notes_are_counted_at_once_per_space_and_the_sync_clears_them(alice, bob) -> None:
    services.note_create(owner=alice, title="Ops", body=sections("Rotate certs.", "Tune Redis."))
    services.note_create(owner=bob, title="Food", body="Bake bread at 220 degrees.")
    assert note_count() == 3
    assert note_count([personal_space_id(alice.pk)]) == 2
    assert note_count([personal_space_id(bob.pk)]) == 1
    assert_matches_truth()
    sync_vectors()
    assert note_count() == 0 and not PendingVector.objects.exists()
    assert_matches_truth()


def test_a_bulk_import_is_counted_like_single_saves(alice) -> None:
    batch = [
        services.NoteImport(f"beir:{i}", f"Note {i}", sections(f"Alpha {i}.", f"Beta {i}."))
        for i in range(5)
    ]
    services.notes_import(owner=alice, notes=batch)
    assert note_count() == pending_count() == Passage.objects.filter(is_head=True).count() > 5
    assert_matches_truth()
    sync_vectors()
    assert note_count() == 0


def test_an_edit_counts_only_the_new_passages_and_the_prune_forgets_the_old_rows(alice) -> None:
    note = services.note_create(owner=alice, title="Ops", body=sections("One.", "Two."))
    edit(note, alice, sections("One, changed.", "Two."))  # before the worker ran
    assert note_count() == 2  # the new head's two passages; the old ones left the head set
    assert PendingVector.objects.count() == 4  # their rows wait for the prune
    assert_matches_truth()
    sync_vectors()
    assert note_count() == 0 and not PendingVector.objects.exists()
    edit(note, alice, sections("One, changed again.", "Two."))
    assert note_count() == 2  # an unchanged paragraph is pending until the worker reuses it
    assert_matches_truth()
    sync_vectors()
    assert note_count() == 0
    assert_matches_truth()


def test_delete_and_undelete_before_and_after_the_worker_pruned(alice) -> None:
    note = services.note_create(owner=alice, title="Ops", body=sections("One.", "Two."))
    services.note_create(owner=alice, title="Food", body="Bake bread.")
    assert note_count() == 3
    services.note_delete(document=note, user=alice)
    assert note_count() == 1  # a deleted note's passages are not waiting for anything
    assert_matches_truth()
    services.note_undelete(document=note, user=alice)
    assert note_count() == 3
    assert_matches_truth()

    sync_vectors()
    services.note_delete(document=note, user=alice)
    services.note_undelete(document=note, user=alice)  # the worker had not pruned: kept
    assert note_count() == 0
    assert_matches_truth()

    services.note_delete(document=note, user=alice)
    sync_vectors()  # prunes the deleted note's vectors and their records
    assert PassageVector.objects.filter(passage__document=note).count() == 0
    services.note_undelete(document=note, user=alice)
    assert note_count() == 2  # back at head, without vectors: pending again
    assert_matches_truth()
    sync_vectors()
    assert note_count() == 0
    assert_matches_truth()


def test_a_rechunked_head_is_pending_and_a_lost_vector_folder_too(alice, settings) -> None:
    settings.LODE_CHUNK_MAX_CHARS = 1_000_000
    note = services.note_create(owner=alice, title="Wide", body="Intro.\n\n" + "|x" * 3000)
    sync_vectors()
    assert note_count() == 0
    settings.LODE_CHUNK_MAX_CHARS = 2000
    old, new = rechunk_head(note.pk)
    assert new > old
    assert note_count() == new
    assert_matches_truth()
    sync_vectors()
    assert note_count() == 0

    key = get_embedder().manifest.key
    open_vector_store(key).delete(head_ids()[:2])  # two vectors lost behind the records' back
    assert tasks.reconcile_vectors(key) == (2, 0)
    assert note_count() == 2
    assert_matches_truth()


def test_a_manifest_switch_recounts_against_the_new_collection(alice) -> None:
    for i in range(2):
        services.note_create(owner=alice, title=f"Note {i}", body=sections("Alpha.", "Beta."))
    sync_vectors()
    model = get_embedder()
    new = replace(model.manifest, passage_template="{title}\n\n{text}")
    services.note_create(owner=alice, title="Late", body="Gamma.")
    assert note_count() == 1
    # A vector under the manifest being built does not serve queries: still pending.
    sync_vectors(embedder=CountingEmbedder(model, manifest=new))
    assert PassageVector.objects.filter(manifest_key=new.key).count() == 5
    assert note_count() == 1
    assert_matches_truth()
    report = reindex_vectors(embedder=CountingEmbedder(model, manifest=new))
    assert report.switched
    assert note_count() == 0
    assert pending_drift(new.key) == NO_DRIFT


def test_health_finds_a_drift_both_ways_and_repair_rebuilds_the_table(alice, monkeypatch) -> None:
    services.note_create(owner=alice, title="Ops", body=sections("One.", "Two.", "Three."))
    sync_vectors()
    services.note_create(owner=alice, title="Late", body="Not embedded yet.")
    assert index_health(edges=False).vectors.pending_unlisted == 0
    late = PendingVector.objects.get().passage_id
    # Behind the table's back: the note would undercount...
    PendingVector.objects.filter(passage_id=late).delete()
    embedded = Passage.objects.filter(document__title="Ops", is_head=True).first()
    PendingVector.objects.create(passage=embedded)  # ...and overcount
    assert pending_drift() == PendingDrift(missing=1, extra=1)

    report = index_health(edges=False)
    assert (report.vectors.pending_unlisted, report.vectors.pending_listed_done) == (1, 1)
    assert any("missing from the pending table" in p for p in report.problems), report.problems
    assert any("still in the pending table" in p for p in report.problems)

    # Compared with the records even while Chroma is down: that needs only the database.
    from retrieval.index import health
    from retrieval.index.vectors import VectorStoreUnavailable

    def chroma_down(key: str) -> None:
        raise VectorStoreUnavailable("Chroma is not reachable")

    monkeypatch.setattr(health, "_vector_findings", chroma_down)
    down = index_health(edges=False)
    assert not down.vectors.available
    assert (down.vectors.pending_unlisted, down.vectors.pending_listed_done) == (1, 1)
    assert any("missing from the pending table" in p for p in down.problems), down.problems
    monkeypatch.undo()

    # The table needs only the database: repaired even with the vector check skipped.
    repaired = repair_indexes(vectors=False, edges=False)
    assert repaired.pending == 1
    assert_matches_truth()
    assert set(PendingVector.objects.values_list("passage_id", flat=True)) == {late}


def migration_apps():
    """The app registry as of the migration that made the table (its historical models)."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    state = MigrationExecutor(connection).loader.project_state(("retrieval", "0013_pending_vector"))
    return state.apps


def test_the_migration_fills_the_table_from_the_records(alice) -> None:
    fill = importlib.import_module("retrieval.migrations.0013_pending_vector").fill_pending
    services.note_create(owner=alice, title="Ops", body=sections("One.", "Two."))
    sync_vectors()
    services.note_create(owner=alice, title="Late", body="Not embedded yet.")
    expected = set(PendingVector.objects.values_list("passage_id", flat=True))
    assert len(expected) == 1
    PendingVector.objects.all().delete()
    fill(migration_apps(), None)
    assert set(PendingVector.objects.values_list("passage_id", flat=True)) == expected
    assert_matches_truth()


def test_the_migration_counts_every_head_passage_before_any_index_state(alice) -> None:
    fill = importlib.import_module("retrieval.migrations.0013_pending_vector").fill_pending
    services.note_create(owner=alice, title="Ops", body=sections("One.", "Two."))
    services.note_create(owner=alice, title="Gone", body="Deleted.")
    services.note_delete(document=Document.objects.get(title="Gone"), user=alice)
    VectorIndexState.objects.all().delete()
    PendingVector.objects.all().delete()
    fill(migration_apps(), None)
    assert set(PendingVector.objects.values_list("passage_id", flat=True)) == set(head_ids())
    assert len(head_ids()) == 2


def _statements(call) -> tuple[object, list[str]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        result = call()
    return result, [q["sql"] for q in queries.captured_queries]


def test_the_count_reads_the_backlog_by_primary_key_and_never_scans_the_corpus(
    alice, bob, monkeypatch
) -> None:
    """With nothing pending the count is one statement on the pending table alone; a small
    backlog adds lookups by primary key; a bulk import's backlog is counted by the join."""
    table = PendingVector._meta.db_table
    services.note_create(owner=alice, title="Ops", body=sections("One.", "Two."))
    sync_vectors()
    alices, bobs = [personal_space_id(alice.pk)], [personal_space_id(bob.pk)]

    count, statements = _statements(lambda: note_count(alices))
    assert count == 0
    (statement,) = statements
    assert f'FROM "{table}"' in statement and "JOIN" not in statement.upper()

    services.note_create(owner=bob, title="Food", body=sections("Bake.", "Boil.", "Fry."))
    services.note_create(owner=alice, title="Late", body="Gamma.")
    count, statements = _statements(lambda: note_count(alices))
    assert count == 1
    # Then the passages and their documents, each by primary key alone: no join, and no
    # space filter in SQL that a planner could start from.
    assert len(statements) == 3
    for statement in statements[1:]:
        assert table not in statement and "JOIN" not in statement.upper()
        assert '"id" IN (' in statement and "space_id" not in statement.split("WHERE")[1]
    assert note_count(bobs) == 3 and note_count() == 4

    monkeypatch.setattr(vectors, "PENDING_BATCH", 3)  # a backlog as large as a batch
    count, statements = _statements(lambda: note_count(alices))
    assert (count, len(statements)) == (1, 2) and "JOIN" in statements[1].upper()
    assert note_count(bobs) == 3 and note_count() == 4
    assert pending_note_count(None, at_most=2) == 3  # "more than 2"
