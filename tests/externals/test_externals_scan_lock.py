"""One scan per source at a time: four concurrent scans of a 40-file folder write 40
versions, not 160 with each scan reporting 40 new. A scan claims its source
with a conditional UPDATE; the others report "already scanning" (pipeline, task, page, API,
command) or wait for it. The races run real threads with their own connections."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from externals import pipeline, services
from externals.models import ScanRecord, Source
from externals.pipeline import ScanAlreadyRunning, claim_scan, scan_source
from notes.models import Version
from tests.concurrency import postgresql_only, race

FILES = 40


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    # Whether vectors can be made is not under test (and loading the model is slow).
    monkeypatch.setattr(pipeline, "embedding_problem", lambda: "")


@pytest.fixture
def folder(tmp_path) -> Path:
    root = tmp_path / "race"
    root.mkdir()
    for n in range(FILES):
        (root / f"file{n:02d}.md").write_text(f"# File {n}\n\nToken racetok{n} lives here.\n")
    return root


@pytest.fixture
def source(alice, folder) -> Source:
    return services.source_create(owner=alice, name="race", kind="folder", location=str(folder))


def versions_of(source: Source) -> int:
    return Version.objects.filter(document__source_items__source=source).count()


def scan_fresh(source_id: int, **kwargs):
    return lambda: scan_source(Source.objects.get(pk=source_id), **kwargs)


# SQLite's test database is in memory, shared between threads through one shared cache,
# where a second writer fails at once ("table is locked") instead of waiting: the threaded
# races need PostgreSQL (or a file database, which the bench uses). The claim itself is one
# UPDATE on both, tested deterministically below.


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_four_concurrent_scans_write_one_set_of_versions(source):
    results = race([scan_fresh(source.pk)] * 4)
    records = [r for r in results if isinstance(r, ScanRecord)]
    busy = [r for r in results if isinstance(r, ScanAlreadyRunning)]
    assert len(records) == 1, results
    assert len(busy) == 3, results
    assert records[0].status == ScanRecord.Status.OK
    assert records[0].items_new == FILES
    assert versions_of(source) == FILES  # before: 160
    assert ScanRecord.objects.filter(source=source).count() == 1
    assert "already running" in str(busy[0])
    source.refresh_from_db()
    assert source.scanning_since is None  # released


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_concurrent_scans_that_wait_run_one_after_another(source):
    results = race([scan_fresh(source.pk, wait_seconds=120)] * 3)
    assert all(isinstance(r, ScanRecord) for r in results), results
    assert sorted(r.items_new for r in results) == [0, 0, FILES]
    assert sorted(r.items_unchanged for r in results) == [0, FILES, FILES]
    assert versions_of(source) == FILES


# --- the claim, deterministically (SQLite and PostgreSQL) ---------------------------------


@pytest.mark.django_db
@pytest.mark.slow
def test_a_claimed_source_refuses_a_second_scan_and_records_nothing(source):
    claim = claim_scan(source)
    assert claim is not None
    assert claim_scan(source) is None  # one holder
    with pytest.raises(ScanAlreadyRunning, match="already running"):
        scan_source(source)
    assert not ScanRecord.objects.filter(source=source).exists()
    assert versions_of(source) == 0
    claim.release()
    record = scan_source(source)
    assert record.items_new == FILES
    source.refresh_from_db()
    assert source.scanning_since is None


@pytest.mark.django_db
@pytest.mark.slow
def test_a_stale_claim_is_taken_over(source):
    long_ago = timezone.now() - pipeline.SCAN_CLAIM_STALE_AFTER - timedelta(seconds=1)
    Source.objects.filter(pk=source.pk).update(scanning_since=long_ago)
    assert pipeline.scan_running_since(source) is None
    assert scan_source(source).status == ScanRecord.Status.OK


@pytest.mark.django_db
def test_a_scan_that_lost_its_claim_stops_and_releases_nothing(source, monkeypatch):
    """If a scan stalls past the stale age and another takes the source over, the first
    must stop rather than write beside the second."""
    monkeypatch.setattr(pipeline, "SCAN_HEARTBEAT", timedelta(0))
    real_ingest = pipeline._Scan.ingest
    stolen = timezone.now() + timedelta(seconds=5)

    def ingest(self, raw, *, recheck):
        if self.record.items_seen == 5:  # someone else's claim replaces ours
            Source.objects.filter(pk=source.pk).update(scanning_since=stolen)
        return real_ingest(self, raw, recheck=recheck)

    monkeypatch.setattr(pipeline._Scan, "ingest", ingest)
    record = scan_source(source)
    assert record.status == ScanRecord.Status.FAILED
    assert "took this source over" in record.error
    assert record.items_new <= 6
    source.refresh_from_db()
    assert source.scanning_since == stolen  # the other scan's claim is left alone


@pytest.mark.django_db
def test_a_claim_taken_over_during_extraction_stops_the_next_write(source, monkeypatch):
    """The claim is refreshed right before each write, not only before each item (and at
    most every minute): an extraction that outlives the claim writes nothing once another
    scan holds the source, even when the heartbeat is not due."""
    real_extract = pipeline.extractors.extract
    stolen = timezone.now() + timedelta(seconds=5)
    calls = []

    def extract(data, **kwargs):
        calls.append(kwargs["filename"])
        if len(calls) == 3:  # a long extraction; another scan took the source meanwhile
            Source.objects.filter(pk=source.pk).update(scanning_since=stolen)
        return real_extract(data, **kwargs)

    monkeypatch.setattr(pipeline.extractors, "extract", extract)
    record = scan_source(source)
    assert record.status == ScanRecord.Status.FAILED
    assert "took this source over" in record.error
    assert record.items_new == 2
    assert versions_of(source) == 2  # the third extraction's snapshot was not written
    assert len(calls) == 3
    source.refresh_from_db()
    assert source.scanning_since == stolen


@pytest.mark.django_db
@pytest.mark.slow
def test_a_claim_taken_over_before_pruning_prunes_nothing(source, folder, monkeypatch):
    assert scan_source(source).items_new == FILES
    for n in range(5):
        (folder / f"file{n:02d}.md").unlink()
    real_walk = pipeline._walk_folder
    stolen = timezone.now() + timedelta(seconds=5)

    def walk_then_lose_the_claim(scan, root):
        real_walk(scan, root)
        Source.objects.filter(pk=source.pk).update(scanning_since=stolen)

    monkeypatch.setattr(pipeline, "_walk_folder", walk_then_lose_the_claim)
    record = scan_source(source)
    assert record.status == ScanRecord.Status.FAILED
    assert "took this source over" in record.error
    assert record.items_pruned == 0
    assert record.finished_at is not None
    assert source.items.count() == FILES  # none pruned by a scan that no longer holds it


@pytest.mark.django_db
def test_a_scan_waits_for_the_claim_when_asked(source, monkeypatch):
    claim = claim_scan(source)
    monkeypatch.setattr(pipeline, "SCAN_WAIT_POLL_SECONDS", 0.01)
    polls = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 3:
            claim.release()  # the other scan finishes while this one waits

    monkeypatch.setattr(pipeline.time, "sleep", sleep)
    record = scan_source(source, wait_seconds=60)
    assert record.items_new == FILES
    assert len(polls) == 3


# --- the task, the page, the API, the command ---------------------------------------------


@pytest.mark.django_db
def test_a_busy_refresh_task_queues_itself_again_later(source, settings):
    from django_tasks_db.models import DBTaskResult

    from externals.tasks import refresh_source

    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    claim_scan(source)
    outcome = refresh_source.call(source.pk, "webhook")
    assert outcome["status"] == "deferred"
    assert "already running" in outcome["reason"]
    queued = DBTaskResult.objects.filter(task_path=refresh_source.module_path).get()
    assert queued.args_kwargs["args"] == [source.pk, "webhook", 1]
    assert queued.run_after > timezone.now()
    assert not ScanRecord.objects.filter(source=source).exists()


@pytest.mark.django_db
def test_a_busy_refresh_gives_up_after_its_retries(source, settings):
    from externals import tasks

    claim_scan(source)
    outcome = tasks.refresh_source.call(source.pk, "webhook", tasks.MAX_BUSY_RETRIES)
    assert outcome["status"] == "skipped"


@pytest.mark.django_db
def test_scan_now_says_already_scanning(alice_client, source, monkeypatch):
    from externals import tasks

    queued = []
    monkeypatch.setattr(tasks, "enqueue_refresh", lambda s, trigger: queued.append(s.pk))
    claim_scan(source)
    response = alice_client.post(reverse("externals:scan-now", args=[source.pk]), follow=True)
    assert "Already scanning" in response.content.decode()
    assert queued == []


@pytest.mark.django_db
def test_api_refresh_is_409_already_scanning(alice_client, source, monkeypatch):
    from externals import tasks

    queued = []
    monkeypatch.setattr(tasks, "enqueue_refresh", lambda s, trigger: queued.append(s.pk))
    claim_scan(source)
    response = alice_client.post(f"/api/sources/{source.pk}/refresh")
    assert response.status_code == 409
    assert response.json()["detail"].startswith("Already scanning")
    assert queued == []


@pytest.mark.django_db
def test_reconcile_reports_already_scanning_and_goes_on(source, alice, tmp_path):
    other_root = tmp_path / "other"
    other_root.mkdir()
    (other_root / "a.md").write_text("Other words.\n")
    other = services.source_create(
        owner=alice, name="other", kind="folder", location=str(other_root)
    )
    claim_scan(source)
    out = StringIO()
    call_command("lode_sources", "reconcile", stdout=out, stderr=StringIO())
    text = out.getvalue()
    assert f"{source.pk} race: already scanning" in text
    assert f"{other.pk} other: ok" in text
    assert "0 failed" in text
