"""Progress of long commands on an admin page: `lode_import_markdown` and
`lode_reindex_vectors` keep a `JobProgress` row — running while they work, finished with
done == total, or failed with the error — and the admin lists it with a percentage."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from lode_site.models import JobProgress, job_progress
from notes import services
from notes.models import Document
from retrieval.index.vectors import pending_count

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:lode_site_jobprogress_changelist"


def import_markdown(folder: Path, **options: object) -> None:
    call_command(
        "lode_import_markdown",
        str(folder),
        "--no-progress",
        stdout=StringIO(),
        stderr=StringIO(),
        **options,
    )


@pytest.fixture
def notes_dir(tmp_path: Path) -> Path:
    """Three markdown files, one of which lode skips (not UTF-8)."""
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "a.md").write_text("# Certs\n\nRotate the staging certs.\n", encoding="utf-8")
    (folder / "b.md").write_text("# Redis\n\nSet maxmemory-policy.\n", encoding="utf-8")
    (folder / "c.md").write_bytes(b"# Latin-1 \xe9t\xe9\n")
    return folder


# --- lode_import_markdown ---------------------------------------------------------------


def test_an_import_leaves_a_finished_row_with_done_equal_to_total(notes_dir, alice) -> None:
    import_markdown(notes_dir, user="alice", source="ops")
    (job,) = JobProgress.objects.all()
    assert job.kind == JobProgress.Kind.IMPORT_MARKDOWN
    assert job.status == JobProgress.Status.DONE
    assert (job.done, job.total) == (3, 3)  # the skipped file counts as done: it was looked at
    assert job.finished_at is not None and job.finished_at >= job.started_at
    assert job.error == ""
    assert job.percent == 100
    assert str(notes_dir) in job.summary and "alice" in job.summary and "ops" in job.summary
    assert Document.objects.count() == 2


def test_an_import_shows_its_progress_while_it_runs(notes_dir, alice, monkeypatch) -> None:
    """What another process (the admin page) reads from the database before each file."""
    monkeypatch.setattr(JobProgress, "WRITE_INTERVAL_SECONDS", 0.0)
    seen: list[tuple[str, int, int]] = []
    real_note_import = services.note_import

    def spying_note_import(**kwargs: object) -> services.Imported:
        job = JobProgress.objects.get()
        seen.append((job.status, job.done, job.total))
        return real_note_import(**kwargs)

    monkeypatch.setattr(services, "note_import", spying_note_import)
    import_markdown(notes_dir, user="alice")
    # c.md is skipped before it reaches note_import.
    assert seen == [("running", 0, 3), ("running", 1, 3)]
    assert JobProgress.objects.get().status == JobProgress.Status.DONE


def test_a_failing_import_leaves_a_failed_row_with_the_error(notes_dir, alice, monkeypatch) -> None:
    real_note_import = services.note_import
    calls = 0

    def failing_note_import(**kwargs: object) -> services.Imported:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("disk full")
        return real_note_import(**kwargs)

    monkeypatch.setattr(services, "note_import", failing_note_import)
    with pytest.raises(RuntimeError, match="disk full"):
        import_markdown(notes_dir, user="alice")
    (job,) = JobProgress.objects.all()
    assert job.status == JobProgress.Status.FAILED
    assert job.error == "RuntimeError: disk full"
    assert (job.done, job.total) == (1, 3)  # how far it got before the failure
    assert job.finished_at is not None


def test_a_refused_folder_starts_no_job(tmp_path, alice) -> None:
    with pytest.raises(CommandError):
        import_markdown(tmp_path / "missing")
    assert not JobProgress.objects.exists()


# --- lode_reindex_vectors ---------------------------------------------------------------


def test_a_reindex_leaves_a_finished_row_with_done_equal_to_total(private_vectors, alice) -> None:
    body = "\n\n".join(f"## Part {i}\n\nStep {i} of the failover." for i in range(3))
    services.note_create(owner=alice, title="Failover", body=body)
    pending = pending_count()
    assert pending == 3
    call_command("lode_reindex_vectors", "--no-progress", "--batch-size", "2", stdout=StringIO())
    (job,) = JobProgress.objects.all()
    assert job.kind == JobProgress.Kind.REINDEX_VECTORS
    assert job.status == JobProgress.Status.DONE
    assert (job.done, job.total) == (pending, pending)
    assert job.summary == "batch size 2"
    assert pending_count() == 0


def test_a_failing_reindex_leaves_a_failed_row_with_the_error(
    private_vectors, settings, tmp_path, alice
) -> None:
    services.note_create(owner=alice, title="Ops", body="Rotate the certs.")
    settings.LODE_MODEL_DIR = str(tmp_path / "no-model")
    with pytest.raises(CommandError, match="vectors unavailable"):
        call_command("lode_reindex_vectors", "--no-progress", stdout=StringIO())
    (job,) = JobProgress.objects.all()
    assert job.status == JobProgress.Status.FAILED
    assert job.error.startswith("CommandError: vectors unavailable")
    assert job.finished_at is not None


# --- the row itself ---------------------------------------------------------------------


def test_progress_is_written_at_most_once_per_interval(monkeypatch) -> None:
    monkeypatch.setattr(JobProgress, "WRITE_INTERVAL_SECONDS", 3600.0)
    job = JobProgress.start(kind=JobProgress.Kind.IMPORT_MARKDOWN)
    job.report(0, 10)  # a new total is written at once
    for _ in range(5):
        job.advance()
    stored = JobProgress.objects.get()
    assert (stored.done, stored.total) == (0, 10)  # the five steps wait for the next write
    job.finish()
    stored.refresh_from_db()
    assert (stored.done, stored.total, stored.status) == (5, 10, "done")


def test_an_interrupted_job_is_marked_failed_and_the_interrupt_goes_on() -> None:
    with (
        pytest.raises(KeyboardInterrupt),
        job_progress(kind=JobProgress.Kind.REINDEX_VECTORS) as job,
    ):
        job.report(2, 8)
        raise KeyboardInterrupt
    stored = JobProgress.objects.get()
    assert (stored.status, stored.error, stored.done, stored.total) == (
        "failed",
        "KeyboardInterrupt",
        2,
        8,
    )


def test_work_that_grew_while_running_finishes_with_done_equal_to_total() -> None:
    with job_progress(kind=JobProgress.Kind.REINDEX_VECTORS) as job:
        job.report(0, 3)
        job.advance(4)  # a note saved during the re-index added a passage
    stored = JobProgress.objects.get()
    assert (stored.done, stored.total, stored.percent) == (4, 4, 100)


# --- the admin page ---------------------------------------------------------------------


def test_the_admin_lists_jobs_with_their_percentage(staff_client: Client) -> None:
    running = JobProgress.start(kind=JobProgress.Kind.IMPORT_MARKDOWN, summary="/srv/notes")
    running.report(1, 4)
    with (
        pytest.raises(RuntimeError),
        job_progress(kind=JobProgress.Kind.REINDEX_VECTORS, summary="batch size 32") as job,
    ):
        raise RuntimeError("Chroma <went> away")
    response = staff_client.get(reverse(CHANGELIST))
    assert response.status_code == 200
    page = response.content.decode()
    assert "/srv/notes" in page and "1 / 4" in page
    assert '<progress max="100" value="25"></progress> 25%' in page
    assert "Running" in page and "Failed" in page
    assert "Chroma &lt;went&gt; away" in page  # the error is text, never markup
    assert "Chroma <went>" not in page
    detail = staff_client.get(reverse("admin:lode_site_jobprogress_change", args=[job.pk]))
    assert detail.status_code == 200
    assert staff_client.get(reverse("admin:lode_site_jobprogress_add")).status_code == 403


def test_the_admin_page_is_for_staff_only(alice: User, alice_client: Client) -> None:
    JobProgress.start(kind=JobProgress.Kind.IMPORT_MARKDOWN, summary="/srv/notes")
    response = alice_client.get(reverse(CHANGELIST))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
