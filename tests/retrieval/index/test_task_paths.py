"""Task rows survive the move of `retrieval/tasks.py` to `retrieval/index/sync.py`.

django-tasks-db stores each queued task by its dotted path. A row queued by an install from
before the reorganisation names `retrieval.tasks.…`, which no longer imports: the worker must
mark it failed (not crash), and the sweep it queues on start must still do the vector work
that row stood for, under the new path.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django_tasks_db.models import DBTaskResult

from retrieval.index.sync import embed_document, sync_pending_vectors
from retrieval.index.vectors import head_passages
from retrieval.models import PassageVector


@pytest.mark.slow  # a real worker run: model load and one embedding
@pytest.mark.django_db(transaction=True)
def test_a_row_queued_under_the_old_path_fails_cleanly_and_the_sweep_takes_over(
    private_vectors, alice_note
) -> None:
    DBTaskResult.objects.all().delete()  # saving the note queued its sync; start clean
    embed_document.enqueue(alice_note.pk)
    old = DBTaskResult.objects.get()
    assert old.task_path == "retrieval.index.sync.embed_document"
    DBTaskResult.objects.filter(pk=old.pk).update(task_path="retrieval.tasks.embed_document")

    call_command("db_worker", "--batch", "--no-startup-delay", verbosity=0)

    old.refresh_from_db()
    assert old.status == "FAILED"
    assert "retrieval.tasks" in old.traceback
    sweep = DBTaskResult.objects.get(task_path=sync_pending_vectors.module_path)
    assert sweep.task_path.startswith("retrieval.index.sync.")
    assert sweep.status == "SUCCESSFUL"
    expected = set(head_passages().filter(document=alice_note).values_list("pk", flat=True))
    assert expected
    assert expected <= set(PassageVector.objects.values_list("passage_id", flat=True))
