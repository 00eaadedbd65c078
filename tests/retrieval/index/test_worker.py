"""The vector sync and the background worker: what gets embedded, reused, pruned, switched.

Most tests call `sync_vectors` directly with the real model (loaded once per session)
wrapped in a counter; the last one runs the real `manage.py db_worker` in a subprocess,
SIGKILLs it mid-way and checks that a restart finishes the job with nothing lost and
nothing duplicated.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django_tasks_db.models import DBTaskResult

from notes import services
from retrieval.index import embeddings, vectors
from retrieval.index import sync as tasks
from retrieval.index.embeddings import EmbeddingUnavailable, get_embedder
from retrieval.index.sync import reindex_vectors, sync_vectors
from retrieval.index.vectors import get_vector_store, open_vector_store, pending_count
from retrieval.models import Passage, PassageVector, VectorIndexState
from spaces.models import personal_space_id
from tests.factories import CountingEmbedder, edit, head_ids, sections

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def real_embedder():
    return get_embedder()


@pytest.fixture
def counting(real_embedder) -> CountingEmbedder:
    return CountingEmbedder(real_embedder)


def recorded_ids(manifest_key: str) -> list[int]:
    return sorted(
        PassageVector.objects.filter(manifest_key=manifest_key).values_list("passage_id", flat=True)
    )


# --- sync_vectors -------------------------------------------------------------------------


@pytest.mark.django_db
def test_sync_embeds_every_head_passage_once(private_vectors, counting, alice, bob) -> None:
    services.note_create(owner=alice, title="Ops", body=sections("Rotate certs.", "Tune Redis."))
    services.note_create(owner=bob, title="Food", body="Bake bread at 220 degrees.")
    assert pending_count() == 3
    assert pending_count([personal_space_id(bob.pk)]) == 1
    assert pending_count([personal_space_id(alice.pk)]) == 2

    report = sync_vectors(embedder=counting)
    assert (report.pending, report.embedded, report.reused, report.deleted) == (3, 3, 0, 0)
    key = counting.manifest.key
    store = get_vector_store()
    assert store.count() == 3
    assert sorted(store.ids()) == head_ids() == recorded_ids(key)
    assert pending_count() == 0
    record = PassageVector.objects.select_related("passage").first()
    assert record.text_sha256 == record.passage.text_sha256

    again = sync_vectors(embedder=counting)
    assert (again.pending, again.embedded) == (0, 0)
    assert len(counting.calls) == 1  # nothing pending: the model was not called again


@pytest.mark.django_db
def test_a_window_is_embedded_together_and_written_batch_by_batch(
    private_vectors, counting, alice
) -> None:
    services.note_create(
        owner=alice, title="Many", body=sections(*(f"Fact {i}." for i in range(5)))
    )
    steps: list[int] = []
    report = sync_vectors(embedder=counting, batch_size=2, window=8, progress=steps.append)
    assert [len(call) for call in counting.calls] == [5]  # one model call: sorted across batches
    assert steps == [2, 2, 1]  # upserted and recorded two at a time
    assert report.written == 5 == get_vector_store().count()


@pytest.mark.django_db
def test_vectors_match_the_model_and_answer_queries(private_vectors, counting, alice) -> None:
    note = services.note_create(
        owner=alice,
        title="Runbook",
        body=sections("Rotate the staging certs with certbot.", "Bake sourdough at 220 degrees."),
    )
    sync_vectors(embedder=counting)
    store = get_vector_store()
    passages = {p.pk: p for p in Passage.objects.filter(document=note)}
    stored = store.get_embeddings(passages)
    for pk, passage in passages.items():
        expected = counting.inner.embed_passages([embeddings.passage_input(passage)])[0]
        assert float(np.dot(stored[pk], expected)) > 0.999
    query = counting.embed_query("renew TLS certificates")
    best = store.query(query, space_ids=[personal_space_id(alice.pk)], limit=2)[0]
    assert "certbot" in passages[best.passage_id].text


@pytest.mark.django_db
def test_an_edit_reembeds_only_changed_text(private_vectors, counting, alice) -> None:
    note = services.note_create(
        owner=alice,
        title="Runbook",
        body=sections("Rotate the certs.", "Tune Redis memory.", "Back up Postgres nightly."),
    )
    sync_vectors(embedder=counting)
    key = counting.manifest.key
    old_ids = head_ids(note)
    before = get_vector_store().get_embeddings(old_ids)
    counting.calls.clear()

    edit(
        note,
        alice,
        sections("Rotate the certs.", "Tune Redis eviction.", "Back up Postgres nightly."),
    )
    report = sync_vectors(tasks.document_passage_ids(note.pk), embedder=counting)

    changed = Passage.objects.get(document=note, is_head=True, position=1)
    assert counting.texts == [embeddings.passage_input(changed)]
    assert counting.texts[0].endswith("Tune Redis eviction.")
    assert (report.embedded, report.reused, report.deleted) == (1, 2, 3)
    new_ids = head_ids(note)
    store = get_vector_store()
    assert sorted(store.ids()) == new_ids == recorded_ids(key)
    after = store.get_embeddings(new_ids)
    assert np.allclose(after[new_ids[0]], before[old_ids[0]])  # copied, not recomputed
    assert np.allclose(after[new_ids[2]], before[old_ids[2]])


@pytest.mark.django_db
def test_a_changed_title_reembeds_because_the_title_is_part_of_the_input(
    private_vectors, counting, alice
) -> None:
    note = services.note_create(owner=alice, title="Runbook", body="Rotate the certs.")
    sync_vectors(embedder=counting)
    edit(note, alice, "Rotate the certs.", title="Deploy runbook")
    report = sync_vectors(embedder=counting)
    assert (report.embedded, report.reused) == (1, 0)
    assert counting.texts[-1] == "Deploy runbook\nRotate the certs."


@pytest.mark.django_db
def test_identical_passages_in_one_batch_are_embedded_once(
    private_vectors, counting, alice
) -> None:
    for _ in range(3):
        services.note_create(owner=alice, title="Same", body="Same text everywhere.")
    report = sync_vectors(embedder=counting)
    assert (report.embedded, report.reused) == (1, 2)
    assert get_vector_store().count() == 3


@pytest.mark.django_db
def test_sync_deletes_vectors_of_non_head_and_deleted_passages(
    private_vectors, counting, alice
) -> None:
    keep = services.note_create(owner=alice, title="Keep", body="This note stays.")
    gone = services.note_create(owner=alice, title="Gone", body=sections("One.", "Two."))
    sync_vectors(embedder=counting)
    assert get_vector_store().count() == 3

    services.note_delete(document=gone, user=alice)
    report = sync_vectors(tasks.document_passage_ids(gone.pk), embedder=counting)
    assert report.deleted == 2
    store = get_vector_store()
    assert sorted(store.ids()) == head_ids(keep) == recorded_ids(counting.manifest.key)

    # A passage row that vanished outright (admin delete) still has its vector removed.
    (passage_id,) = head_ids(keep)
    Passage.objects.filter(pk=passage_id).delete()
    assert sync_vectors(embedder=counting).deleted == 1
    assert store.count() == 0
    assert not PassageVector.objects.exists()


@pytest.mark.django_db
def test_a_crash_between_upsert_and_record_duplicates_nothing(
    private_vectors, counting, alice, monkeypatch
) -> None:
    services.note_create(
        owner=alice, title="Many", body=sections(*(f"Fact {i}." for i in range(5)))
    )

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("killed after the upsert")

    monkeypatch.setattr(tasks, "record_vectors", crash)
    with pytest.raises(RuntimeError):
        sync_vectors(embedder=counting, batch_size=2)
    store = get_vector_store()
    assert store.count() == 2  # the first batch reached Chroma...
    assert not PassageVector.objects.exists()  # ...but was never recorded

    monkeypatch.undo()
    report = sync_vectors(embedder=counting, batch_size=2)
    assert report.written == 5
    ids = store.ids()
    assert len(ids) == len(set(ids)) == store.count() == 5
    assert sorted(ids) == head_ids() == recorded_ids(counting.manifest.key)


@pytest.mark.django_db
def test_unavailable_model_leaves_work_pending_and_old_vectors_searchable(
    private_vectors, counting, alice
) -> None:
    note = services.note_create(owner=alice, title="Runbook", body="Rotate the certs.")
    sync_vectors(embedder=counting)
    edit(note, alice, "Rotate the certs on Friday.")
    broken = CountingEmbedder(counting.inner, fail_after=0)
    with pytest.raises(EmbeddingUnavailable):
        sync_vectors(tasks.document_passage_ids(note.pk), embedder=broken)
    assert pending_count() == 1
    assert get_vector_store().count() == 1  # the old version's vector was not pruned
    sync_vectors(embedder=counting)
    assert pending_count() == 0
    assert sorted(get_vector_store().ids()) == head_ids()


@pytest.mark.django_db
def test_reconcile_refills_a_lost_vector_folder(private_vectors, counting, alice) -> None:
    services.note_create(owner=alice, title="Ops", body=sections("One.", "Two.", "Three."))
    sync_vectors(embedder=counting)
    key = counting.manifest.key
    store = open_vector_store(key)
    store.delete(head_ids()[:2])  # two vectors lost behind the records' back
    assert pending_count() == 0  # the records alone cannot tell

    assert tasks.reconcile_vectors(key) == (2, 0)
    assert pending_count() == 2
    sync_vectors(embedder=counting)
    assert sorted(store.ids()) == head_ids() == recorded_ids(key)


# --- manifest change ----------------------------------------------------------------------


@pytest.mark.django_db
def test_reindex_switches_collections_only_when_complete(private_vectors, counting, alice) -> None:
    for i in range(3):
        services.note_create(owner=alice, title=f"Note {i}", body=sections("Alpha.", "Beta."))
    sync_vectors(embedder=counting)
    old = counting.manifest
    assert VectorIndexState.objects.get().active_key == old.key
    new = replace(old, passage_template="{title}\n\n{text}")

    interrupted = CountingEmbedder(counting.inner, manifest=new, fail_after=1)
    with pytest.raises(EmbeddingUnavailable):
        reindex_vectors(embedder=interrupted, batch_size=2, window=2)
    state = VectorIndexState.objects.get()
    assert (state.active_key, state.building_key) == (old.key, new.key)
    assert open_vector_store(new.key).count() == 2  # half built...
    assert get_vector_store().count() == 6  # ...while queries still read the complete old one
    assert get_vector_store().name.endswith(old.key)

    resumed = CountingEmbedder(counting.inner, manifest=new)
    report = reindex_vectors(embedder=resumed, batch_size=2, window=2)
    assert report.switched
    assert len(resumed.texts) == 4  # the two done before the interruption were kept
    state = VectorIndexState.objects.get()
    assert (state.active_key, state.building_key) == (new.key, "")
    assert state.active_manifest["manifest_passage_template"] == "{title}\n\n{text}"
    assert sorted(open_vector_store(new.key).ids()) == head_ids() == recorded_ids(new.key)
    assert open_vector_store(old.key).count() == 0  # the old collection was dropped
    assert recorded_ids(old.key) == []
    # This code still embeds queries with the old manifest: it must not read the new index.
    with pytest.raises(vectors.VectorStoreUnavailable, match="rebuilt"):
        get_vector_store()


@pytest.mark.django_db
def test_reindex_without_a_manifest_change_just_syncs(private_vectors, counting, alice) -> None:
    services.note_create(owner=alice, title="Ops", body="Rotate the certs.")
    report = reindex_vectors(embedder=counting)
    assert not report.switched and report.remaining == 0
    assert get_vector_store().count() == 1


# --- tasks and commands -------------------------------------------------------------------


@pytest.mark.django_db
def test_saving_a_version_queues_its_sync_after_commit(
    alice, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        note = services.note_create(owner=alice, title="Ops", body="Rotate the certs.")
    assert not DBTaskResult.objects.exists()  # nothing is queued before the commit
    for callback in callbacks:
        callback()
    (row,) = DBTaskResult.objects.all()
    assert row.task_path == "retrieval.index.sync.embed_document"
    assert row.args_kwargs == {"args": [note.pk], "kwargs": {}}

    with django_capture_on_commit_callbacks(execute=True):
        services.note_delete(document=note, user=alice)
    assert DBTaskResult.objects.count() == 2  # deleting queues the prune


@pytest.mark.django_db
def test_embed_document_task_shares_its_window_with_other_pending_passages(
    private_vectors, real_embedder, alice, bob
) -> None:
    note = services.note_create(owner=alice, title="Ops", body=sections("One.", "Two."))
    other = services.note_create(owner=bob, title="Other", body="Three.")
    # The task's window is taken from every pending passage (round-robin across spaces):
    # bob's note, saved meanwhile, does not wait for a task of its own.
    result = tasks.embed_document.call(note.pk)
    assert result["embedded"] == 3
    assert sorted(get_vector_store().ids()) == sorted(head_ids(note) + head_ids(other))
    assert pending_count() == 0
    assert tasks.embed_document.call(other.pk)["embedded"] == 0
    assert tasks.sync_pending_vectors.call()["embedded"] == 0


@pytest.mark.django_db
def test_a_failed_task_schedules_a_retry(private_vectors, settings, alice, tmp_path) -> None:
    note = services.note_create(owner=alice, title="Ops", body="One.")
    settings.LODE_MODEL_DIR = str(tmp_path / "no-model")
    with pytest.raises(EmbeddingUnavailable):
        tasks.embed_document.call(note.pk)
    (retry,) = DBTaskResult.objects.all()
    assert retry.args_kwargs == {"args": [note.pk, 1], "kwargs": {}}
    assert retry.run_after > retry.enqueued_at


@pytest.mark.django_db
def test_startup_sweep_is_queued_only_when_needed(private_vectors, real_embedder, alice) -> None:
    assert tasks.enqueue_pending_sweep() is False  # nothing to do
    services.note_create(owner=alice, title="Ops", body="One.")
    assert tasks.enqueue_pending_sweep() is True
    assert tasks.enqueue_pending_sweep() is False  # one sweep queued is enough
    assert DBTaskResult.objects.filter(task_path__endswith="sync_pending_vectors").count() == 1


@pytest.mark.django_db
def test_lode_embed_pending_reports_throughput(private_vectors, real_embedder, alice) -> None:
    services.note_create(owner=alice, title="Ops", body=sections("One.", "Two.", "Three."))
    out = StringIO()
    call_command("lode_embed_pending", "--no-progress", stdout=out)
    assert "embedded 3 passages" in out.getvalue()
    assert "passages/s" in out.getvalue()
    assert pending_count() == 0


@pytest.mark.django_db
def test_lode_reindex_vectors_command_reports(private_vectors, real_embedder, alice) -> None:
    services.note_create(owner=alice, title="Ops", body="One.")
    out = StringIO()
    call_command("lode_reindex_vectors", "--no-progress", stdout=out)
    assert "already uses manifest" in out.getvalue()


# --- the real worker, killed --------------------------------------------------------------

CREATE = textwrap.dedent(
    """
    from django.contrib.auth.models import User
    from notes.services import note_create

    owner = User.objects.create_user("alice")
    big = "\\n\\n".join(f"## Part {i}\\n\\nFinding {i}: compound {i} lowers marker {i * 7}."
                        for i in range(120))
    note_create(owner=owner, title="Big study", body=big)
    for n in range(20):
        body = "\\n\\n".join(f"## Step {i}\\n\\nNote {n} says step {i} needs care."
                             for i in range(4))
        note_create(owner=owner, title=f"Note {n}", body=body)
    """
)

CHECK = textwrap.dedent(
    """
    import json
    import numpy as np
    from retrieval.models import PassageVector
    from retrieval.index.vectors import get_vector_store, head_passages
    from spaces.models import personal_space_id

    store = get_vector_store()
    ids = store.ids()
    query = np.ones(384, dtype=np.float32) / np.sqrt(384)
    hits = store.query(query, space_ids=[personal_space_id(1)], limit=1000)
    print(json.dumps({
        "head": sorted(head_passages().values_list("pk", flat=True)),
        "recorded": sorted(PassageVector.objects.values_list("passage_id", flat=True)),
        "chroma_ids": ids,
        "chroma_count": store.count(),
        "query_hits": len(hits),
    }))
    """
)


@pytest.mark.slow
def test_a_killed_worker_loses_nothing_and_duplicates_nothing(real_embedder, tmp_path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "CHROMA_URL", "LODE_MODEL_DIR", "LODE_TASKS_BACKEND"}
    }
    env.update(
        LODE_DATA_DIR=str(tmp_path),
        LODE_MODEL_DIR=str(real_embedder.folder),  # the already assembled folder
        PYTHONUNBUFFERED="1",
    )

    def manage(*args: str, timeout: float = 180) -> str:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=timeout,
        ).stdout

    def recorded() -> int:
        with sqlite3.connect(f"file:{tmp_path / 'lode.sqlite3'}?mode=ro", uri=True) as db:
            return db.execute("select count(*) from retrieval_passagevector").fetchone()[0]

    manage("migrate", "-v", "0")
    manage("shell", "-v", "0", "-c", CREATE)
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "db_worker",
            "--no-reload",
            "--no-startup-delay",
            "--interval",
            "0.1",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while recorded() < 40:  # the big note's first batch is in, its next one under way
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, "the worker made no progress"
            time.sleep(0.02)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        log.close()
    assert recorded() < 200, "the worker finished before it could be killed"
    with sqlite3.connect(f"file:{tmp_path / 'lode.sqlite3'}?mode=ro", uri=True) as db:
        (running,) = db.execute(
            "select count(*) from django_tasks_database_dbtaskresult where status = 'RUNNING'"
        ).fetchone()
    assert running == 1  # the killed task's row: django-tasks-db never runs it again

    # Restart: it queues a sweep for what the killed task left, runs everything, exits.
    manage("db_worker", "--no-reload", "--no-startup-delay", "--batch", timeout=300)
    state = json.loads(manage("shell", "-v", "0", "-c", CHECK))
    assert len(state["head"]) == 200
    assert state["chroma_count"] == 200
    assert len(state["chroma_ids"]) == len(set(state["chroma_ids"])) == 200  # no duplicates
    assert sorted(state["chroma_ids"]) == state["head"] == state["recorded"]
    assert state["query_hits"] == 200  # every vector is reachable by search too
