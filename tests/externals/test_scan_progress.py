"""Progress people trust: a scan counts the files it found before it reads
any and saves "done of found" as it goes (every `PROGRESS_EVERY` files or every
`PROGRESS_SECONDS`, not on every file); the source page polls a small owner-only fragment
that shows a bar with those totals and the externals so far, stops polling when the scan
ends, shows a failed scan's error, and never says "No scans yet" while one is on its way.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from externals import extract as extractors
from externals import pipeline, services
from externals.models import ScanRecord, Source
from tests.factories import make_source, make_source_external

FILES = 5


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for number in range(1, FILES + 1):
        (root / f"note-{number}.md").write_text(f"# Note {number}\n\nWombat fact {number}.\n")
    (root / ".env").write_text("SECRET=1\n")  # rejected while listing: never counted
    return root


def folder_source(owner, root: Path) -> Source:
    return services.source_create(owner=owner, name="docs", kind="folder", location=str(root))


def watch_scan(monkeypatch) -> list[tuple[int, int]]:
    """(found, seen) of the running scan as the database holds it, read by another query
    each time the scan extracts a file."""
    seen: list[tuple[int, int]] = []
    real = extractors.extract

    def watching(data, *, filename, content_type=""):
        running = ScanRecord.objects.get(status=ScanRecord.Status.RUNNING)
        seen.append((running.items_found, running.items_seen))
        return real(data, filename=filename, content_type=content_type)

    monkeypatch.setattr(extractors, "extract", watching)
    return seen


# --- the pipeline records found and done -------------------------------------------------


def test_a_scan_saves_found_before_reading_and_done_as_it_goes(alice, folder, monkeypatch):
    monkeypatch.setattr(pipeline, "PROGRESS_EVERY", 1)
    seen = watch_scan(monkeypatch)
    record = pipeline.scan_source(folder_source(alice, folder))
    assert seen == [(FILES, done) for done in range(1, FILES + 1)]
    assert record.status == ScanRecord.Status.OK
    stored = ScanRecord.objects.get(pk=record.pk)
    assert (stored.items_found, stored.items_seen, stored.items_new) == (FILES, FILES, FILES)
    assert stored.items_rejected == 1  # the secret is rejected, not counted as found


def test_progress_is_saved_when_its_interval_is_due_not_on_every_file(alice, folder, monkeypatch):
    """Between the every-N saves, a save is due once `PROGRESS_SECONDS` have passed: with
    the interval at 0 every file is due; with a long one only the found count is saved
    while the scan runs (no write per file), and everything at the end."""
    monkeypatch.setattr(pipeline, "PROGRESS_EVERY", 1000)
    monkeypatch.setattr(pipeline, "PROGRESS_SECONDS", 0.0)
    seen = watch_scan(monkeypatch)
    pipeline.scan_source(folder_source(alice, folder))
    assert seen == [(FILES, done) for done in range(1, FILES + 1)]

    monkeypatch.setattr(pipeline, "PROGRESS_SECONDS", 10**9)
    seen.clear()
    for path in folder.glob("*.md"):
        path.write_text(path.read_text() + "Changed.\n")
    record = pipeline.scan_source(Source.objects.get(name="docs"))
    assert seen == [(FILES, 0)] * FILES
    assert (record.items_found, record.items_seen, record.items_changed) == (FILES, FILES, FILES)


def test_a_url_scan_finds_one_item(alice, monkeypatch, settings):
    """A page is one item: found is 1 even when fetching it fails (the bar then stops)."""
    settings.LODE_FETCH_ALLOW_PRIVATE = True
    source = services.source_create(
        owner=alice, name="page", kind="url", location="http://127.0.0.1:9/nothing-here"
    )
    record = pipeline.scan_source(source)
    assert record.status == ScanRecord.Status.FAILED and record.error
    assert (record.items_found, record.items_seen) == (1, 1)


# --- the polled fragment -----------------------------------------------------------------


def status_url(source: Source) -> str:
    return reverse("externals:scan-status", args=[source.pk])


def test_the_fragment_shows_totals_and_the_externals_so_far_while_running(alice_client, alice):
    source = make_source(alice)
    ScanRecord.objects.create(source=source, items_found=5, items_seen=3, items_new=2)
    make_source_external(source, path="first.md", title="First arrival")
    body = alice_client.get(status_url(source) + "?n=1", HTTP_HX_REQUEST="true").content.decode()
    assert 'max="5" value="3"' in body and "Reading file 3 of 5" in body
    assert 'hx-trigger="every 2s"' in body and f"{status_url(source)}?n=2" in body
    assert "First arrival" in body  # the externals list is part of what is polled
    assert "No scans yet" not in body and "No externals yet" not in body
    assert "Polled by htmx" not in body  # the template's comment stays a comment


def test_the_fragment_stops_polling_when_the_scan_finishes(alice_client, alice):
    source = make_source(alice)
    scan = ScanRecord.objects.create(source=source, items_found=5, items_seen=5)
    scan.status, scan.finished_at = ScanRecord.Status.OK, timezone.now()
    scan.save()
    response = alice_client.get(status_url(source) + "?n=4", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert "hx-get" not in body and "hx-trigger" not in body
    assert 'max="5" value="5"' in body and "5 of 5 files read · done" in body


def test_a_failed_scan_shows_its_error_and_stops_the_bar(alice_client, alice):
    source = make_source(alice)
    ScanRecord.objects.create(
        source=source,
        status=ScanRecord.Status.FAILED,
        finished_at=timezone.now(),
        items_found=5,
        items_seen=2,
        error="another scan took this source over; stopped",
    )
    body = alice_client.get(status_url(source) + "?n=3", HTTP_HX_REQUEST="true").content.decode()
    assert "hx-get" not in body
    assert "Stopped at file 2 of 5" in body
    assert "another scan took this source over; stopped" in body
    assert "scan-progress-failed" in body


def test_the_fragment_is_the_owners_only(client, bob_client, alice):
    source = make_source(alice)
    ScanRecord.objects.create(source=source, items_found=5, items_seen=3)
    assert bob_client.get(status_url(source) + "?n=1").status_code == 404
    anonymous = client.get(status_url(source) + "?n=1")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))


def test_no_contradictory_empty_messages_while_a_scan_is_queued(alice_client, alice):
    """Just after "Add source" or "Scan now" the first scan is queued: the page said "Scan
    queued" above "No scans yet" and "press Scan now"."""
    source = make_source(alice)
    page = alice_client.get(
        reverse("externals:source", args=[source.pk]) + "?after=0"
    ).content.decode()
    assert 'data-state="queued"' in page
    assert "No scans yet" not in page and "press “Scan now”" not in page
    assert "The first scan is queued" in page


def test_the_sources_list_shows_a_running_scans_totals(alice_client, alice):
    source = make_source(alice)
    ScanRecord.objects.create(source=source, items_found=5, items_seen=3)
    page = alice_client.get(reverse("externals:sources")).content.decode()
    assert "reading file 3 of 5" in page
