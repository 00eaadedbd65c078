"""Progress people trust, in a real browser: Debian's chromium watches a
scan of a folder of five files. The scan runs in a thread of this test and waits before each
file until the test lets it go, so what the page must show at each step is known: the bar's
totals ("Reading file 3 of 5"), the externals that have arrived so far, no "No scans yet",
and at the end a finished bar, all five externals and no more polling. The page fits 1280
and 360 px without sideways scrolling.

Screenshots of each step at both widths go to `LODE_PROGRESS_SHOTS` (default
/tmp/shots/progress13), for a person to look at.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from django.core.handlers.base import BaseHandler
from django.db import connection
from playwright.sync_api import expect

from externals import extract as extractors
from externals import pipeline, services
from externals.models import ScanRecord

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FILES = 5
PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}
SHOTS = Path(os.environ.get("LODE_PROGRESS_SHOTS", "/tmp/shots/progress13"))
WAIT_SECONDS = 30  # for the scan thread to reach its next file (never reached when it works)


def shoot_both(page, name: str) -> None:
    """A full-page shot at 1280 and 360 px; at each width the page must not scroll sideways."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        assert page.evaluate("document.documentElement.scrollWidth") <= size["width"], label
        page.screenshot(path=str(SHOTS / f"{label}-{name}.png"), full_page=True)
    page.set_viewport_size(DESKTOP)


class GatedScan:
    """Runs `scan_source` in a thread that stops before extracting each file until
    `let_through(n)` lets n more go; `wait_blocked(seen)` waits until the scan is stopped
    before its `seen`-th file (or has finished).

    The test database is SQLite in shared-cache memory, where a write meeting a read of
    the same table fails at once ("table is locked") instead of waiting as the real file
    database (busy timeout) and PostgreSQL do. So the scan's database work and the live
    server's requests take turns on one lock: the scan holds it except while it waits at
    the gate, and every request holds it while it is handled."""

    def __init__(self, source, monkeypatch) -> None:
        self.gate = threading.Semaphore(0)
        self.arrived = threading.Condition()
        self.waiting = 0  # files the scan has reached so far
        self.error: BaseException | None = None
        self.turns = threading.Lock()
        real = extractors.extract

        def gated(data, *, filename, content_type=""):
            with self.arrived:
                self.waiting += 1
                self.arrived.notify_all()
            self.turns.release()
            self.gate.acquire()
            self.turns.acquire()
            return real(data, filename=filename, content_type=content_type)

        monkeypatch.setattr(extractors, "extract", gated)
        serve = BaseHandler.get_response

        def one_at_a_time(handler, request):
            with self.turns:
                return serve(handler, request)

        monkeypatch.setattr(BaseHandler, "get_response", one_at_a_time)
        self.thread = threading.Thread(target=self._run, args=(source,), daemon=True)

    def _run(self, source) -> None:
        self.turns.acquire()
        try:
            pipeline.scan_source(source)
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc
        finally:
            connection.close()
            self.turns.release()

    def start(self) -> None:
        self.thread.start()

    def wait_blocked(self, seen: int) -> None:
        with self.arrived:
            assert self.arrived.wait_for(lambda: self.waiting >= seen, WAIT_SECONDS)

    def let_through(self, count: int) -> None:
        for _ in range(count):
            self.gate.release()

    def finish(self) -> None:
        self.let_through(FILES)
        self.thread.join(WAIT_SECONDS)
        assert not self.thread.is_alive() and self.error is None, self.error


def test_a_scan_fills_the_list_and_finishes_the_bar(
    open_session, alice, tmp_path, settings, monkeypatch
):
    root = tmp_path / "runbooks"
    root.mkdir()
    for number in range(1, FILES + 1):
        (root / f"runbook-{number}.md").write_text(
            f"# Runbook {number}\n\nStep {number} of the failover procedure.\n"
        )
    settings.LODE_SOURCE_FOLDER_ROOTS = [str(tmp_path)]
    monkeypatch.setattr(pipeline, "PROGRESS_EVERY", 1)  # every file saved, for a known count
    source = services.source_create(owner=alice, name="Runbooks", kind="folder", location=str(root))
    scan = GatedScan(source, monkeypatch)
    scan.start()
    try:
        scan.wait_blocked(1)
        session = open_session(alice)
        page = session.page
        page.goto(f"/sources/{source.pk}/")
        live = page.locator("#scan-live")
        expect(live).to_have_attribute("hx-trigger", "every 2s")
        expect(page.locator("#scan-status")).to_have_attribute("data-state", "running")
        expect(page.locator("#scan-progress-text")).to_have_text("Reading file 1 of 5")
        expect(page.locator("body")).not_to_contain_text("No scans yet")
        expect(page.locator("body")).to_contain_text("they appear here as the scan reads them")
        shoot_both(page, "1-started")

        scan.let_through(2)
        scan.wait_blocked(3)
        rows = page.locator("table.externals tbody tr")
        expect(rows).to_have_count(2)  # arrived by polling, no reload
        expect(page.locator("#scan-progress-text")).to_have_text("Reading file 3 of 5")
        expect(page.locator("#scan-progress-bar")).to_have_attribute("value", "3")
        expect(page.locator("table.externals")).to_contain_text("Runbook 2")
        shoot_both(page, "2-running")

        scan.finish()
        expect(page.locator("#scan-status")).to_have_attribute("data-state", "ok")
        expect(page.locator("#scan-progress-text")).to_have_text("5 of 5 files read · done")
        expect(page.locator("#scan-progress-bar")).to_have_attribute("value", "5")
        expect(rows).to_have_count(FILES)
        expect(page.locator("#scan-live")).not_to_have_attribute("hx-trigger", "every 2s")
        expect(page.get_by_role("button", name="Scan now")).to_be_enabled()
        shoot_both(page, "3-finished")
        assert session.errors == []
    finally:
        scan.let_through(FILES)
        scan.thread.join(WAIT_SECONDS)
    record = ScanRecord.objects.get(source=source)
    assert (record.items_found, record.items_seen, record.items_new) == (FILES, FILES, FILES)
