"""The pending table (issue 14): search's "not yet embedded" note counts `PendingVector` rows
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
from django.apps import apps

from notes import services
from retrieval.index import sync as tasks
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
from retrieval.models import Passage, PassageVector, PendingVector
from spaces.models import personal_space_id
from tests.test_worker import CountingEmbedder, edit, head_ids, sections

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
    building = CountingEmbedder(model, manifest=new, fail_after=1)
    with pytest.raises(Exception, match="failed to load"):
        reindex_vectors(embedder=building, batch_size=2, window=2)
    # Vectors under the manifest being built do not serve queries: nothing changed yet.
    assert note_count() == 0
    services.note_create(owner=alice, title="Late", body="Gamma.")
    assert note_count() == 1  # pending against the collection queries read
    report = reindex_vectors(embedder=CountingEmbedder(model, manifest=new))
    assert report.switched
    assert note_count() == 0
    assert pending_drift(new.key) == NO_DRIFT


def test_health_finds_a_drift_both_ways_and_repair_rebuilds_the_table(alice) -> None:
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

    # The table needs only the database: repaired even with the vector check skipped.
    repaired = repair_indexes(vectors=False, edges=False)
    assert repaired.pending == 1
    assert_matches_truth()
    assert set(PendingVector.objects.values_list("passage_id", flat=True)) == {late}


def test_the_migration_fills_the_table_from_the_records(alice) -> None:
    services.note_create(owner=alice, title="Ops", body=sections("One.", "Two."))
    sync_vectors()
    services.note_create(owner=alice, title="Late", body="Not embedded yet.")
    expected = set(PendingVector.objects.values_list("passage_id", flat=True))
    PendingVector.objects.all().delete()
    migration = importlib.import_module("retrieval.migrations.0013_pending_vector")
    migration.fill_pending(apps, None)
    assert set(PendingVector.objects.values_list("passage_id", flat=True)) == expected
    assert len(expected) == 1
    assert_matches_truth()


def test_the_count_reads_only_the_backlog(alice) -> None:
    """With nothing pending, the note's statement touches no passage of the corpus: it
    starts from the (empty) pending table."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    services.note_create(owner=alice, title="Ops", body=sections("One.", "Two."))
    sync_vectors()
    spaces = [personal_space_id(alice.pk)]
    with CaptureQueriesContext(connection) as queries:
        assert note_count(spaces) == 0
    (statement,) = [q["sql"] for q in queries.captured_queries]
    assert f'FROM "{PendingVector._meta.db_table}"' in statement, statement
    assert "retrieval_passagevector" not in statement
