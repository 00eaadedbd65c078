"""A bulk import leaves the graph healthy: `notes_import` writes its notes' edges without
scanning other notes' text for the new titles and queues that scan for the worker
(`retrieval.index.sync.scan_title_mentions`). Until the worker has run it, health says
*pending*, not *unhealthy*; once it has, *healthy*, with every `mentions` edge stored.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from notes import services
from notes.models import Document
from retrieval.index.health import index_health
from retrieval.index.sync import scan_title_mentions, sync_pending_vectors
from retrieval.models import Edge
from tests import factories

TOPICS = 12  # notes per batch; three batches


def batch(number: int) -> list[services.NoteImport]:
    """`TOPICS` notes titled "Topic Runbook <n>", each naming the titles of the same topics in
    the next batch (mentions, not links) and linking the previous note of its own batch."""
    notes = []
    for i in range(TOPICS):
        later = f"Topic Runbook {number + 1}-{i}"
        links = f" See [[Topic Runbook {number}-{i - 1}]]." if i else ""
        body = f"Steps for area {i} of batch {number}. Then follow {later}.{links}"
        notes.append(services.NoteImport(f"b{number}/{i}.md", f"Topic Runbook {number}-{i}", body))
    return notes


def mention_edges(owner) -> int:
    return Edge.objects.filter(kind=Edge.Kind.MENTIONS, from_document__owner=owner).count()


def scans() -> list[DBTaskResult]:
    return list(DBTaskResult.objects.filter(task_path=scan_title_mentions.module_path))


def import_three_batches(alice, capture) -> None:
    """An older note that mentions an imported title, then three import batches, each
    mentioning the next batch's titles: every one of these mentions is made by a note saved
    before the note it names."""
    factories.note(alice, "Area Index", "Start with Topic Runbook 0-3 when in doubt.")
    for number in range(3):
        with capture(execute=True):
            results = services.notes_import(owner=alice, notes=batch(number), source_name="wiki")
        assert {r.outcome for r in results} == {"created"}


def health_text() -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("lode_index", "health", "--skip-vectors", stdout=out, stderr=StringIO())
    except SystemExit as exc:  # pragma: no cover - the command raises CommandError instead
        return int(exc.code), out.getvalue()
    except Exception as exc:
        return getattr(exc, "returncode", 1), out.getvalue()
    return 0, out.getvalue()


@pytest.mark.django_db(transaction=True)  # the worker closes its connection when done
def test_health_is_pending_until_the_worker_scans_the_imported_titles(
    alice, settings, private_vectors, django_capture_on_commit_callbacks
):
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    import_three_batches(alice, django_capture_on_commit_callbacks)
    queued = scans()
    assert len(queued) == 3 and {task.status for task in queued} == {"READY"}
    # Mentions of each batch's titles by the older note and by the batch before it.
    expected_mentions = 1 + 2 * TOPICS

    report = index_health(vectors=False)
    assert report.problems == []
    assert report.verdict == "pending"
    assert report.edges.missing == report.edges.missing_mentions == expected_mentions
    assert report.edges.mention_scans == 3
    assert report.pending == [
        f"3 title-mention scans are queued or running; {expected_mentions} mention edges "
        "wait for them"
    ]
    status, out = health_text()
    assert status == 0
    assert out.startswith("index health: pending")
    assert "pending (the worker brings these in step)" in out and "UNHEALTHY" not in out

    before = mention_edges(alice)
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)

    assert {task.status for task in scans()} == {"SUCCESSFUL"}
    assert mention_edges(alice) == before + expected_mentions
    report = index_health(vectors=False)
    assert report.verdict == "healthy" and report.healthy
    assert report.edges.missing == 0 and report.pending == []
    status, out = health_text()
    assert status == 0 and out.startswith("index health: healthy")
    older = Document.objects.get(owner=alice, title="Area Index")
    named = Edge.objects.get(kind=Edge.Kind.MENTIONS, from_document=older).to_document
    assert named.title == "Topic Runbook 0-3"


@pytest.mark.django_db
def test_missing_mentions_without_a_queued_scan_are_a_problem(
    alice, django_capture_on_commit_callbacks
):
    """Pending covers only what a queued or running scan will add: once no scan is queued
    (it failed for good, or its row was removed) the same missing edges are unhealthy, and
    `lode_index repair` adds them."""
    import_three_batches(alice, django_capture_on_commit_callbacks)
    assert index_health(vectors=False).verdict == "pending"
    DBTaskResult.objects.filter(task_path=scan_title_mentions.module_path).update(status="FAILED")

    report = index_health(vectors=False)
    assert report.verdict == "UNHEALTHY" and report.pending == []
    assert report.edges.missing_mentions == 1 + 2 * TOPICS
    assert any("missing from the graph" in problem for problem in report.problems)
    status, out = health_text()
    assert status == 1 and out.startswith("index health: UNHEALTHY")

    call_command("lode_index", "repair", "--skip-vectors", stdout=StringIO())
    assert index_health(vectors=False).verdict == "healthy"


@pytest.mark.django_db
def test_only_mention_edges_are_excused_while_a_scan_is_queued(
    alice, django_capture_on_commit_callbacks
):
    """A queued scan does not hide other drift: a deleted link edge is still a problem."""
    import_three_batches(alice, django_capture_on_commit_callbacks)
    link = Edge.objects.filter(kind=Edge.Kind.LINKS_TO, from_document__owner=alice).first()
    link.delete()

    report = index_health(vectors=False)
    assert report.verdict == "UNHEALTHY"
    assert report.edges.missing == report.edges.missing_mentions + 1
    assert report.problems[0] == "1 edges the head versions give are missing from the graph"
    assert report.pending  # the scan is still queued, and said so


@pytest.mark.django_db
@pytest.mark.slow
def test_the_admin_report_says_pending_while_the_scan_is_queued(
    alice, staff_client, private_vectors, django_capture_on_commit_callbacks
):
    import_three_batches(alice, django_capture_on_commit_callbacks)
    sync_pending_vectors.call()  # the vectors in step (the admin checks them too); not the scan
    url = reverse("admin:retrieval_index_health") + "?edges=1"
    page = staff_client.get(url).content.decode()
    verdict = page.split('id="index-health-verdict">', 1)[1].split("</p>", 1)[0]
    problems = page.split('id="index-health-problems">', 1)[-1][:600]
    assert "Pending: nothing is wrong" in verdict and "Unhealthy" not in verdict, problems
    assert 'id="index-health-pending"' in page
    assert "3 title-mention scans are queued or running" in page

    DBTaskResult.objects.filter(task_path=scan_title_mentions.module_path).update(status="FAILED")
    page = staff_client.get(url).content.decode()
    assert "Unhealthy." in page and 'id="index-health-pending"' not in page
