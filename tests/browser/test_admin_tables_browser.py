"""In chromium: the admin's sources list fits a 1280 px screen with no sideways scrolling, and
the index health page counts a running SQLite-style worker (one that beats from its own loop)
as alive.

`LODE_ADMIN_SHOTS=/some/folder` writes screenshots of both pages at 1280 and 360 px.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from playwright.sync_api import expect

from externals.models import Source
from externals.pipeline import scan_source
from retrieval.management.commands import db_worker

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}


def shot(page, name: str) -> None:
    folder = os.environ.get("LODE_ADMIN_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def test_the_sources_list_fits_a_desktop_screen(open_session, alice, tmp_path) -> None:
    root = User.objects.create_superuser("root", "root@example.com", "x" * 20)
    folder = tmp_path / "handbook"
    folder.mkdir()
    (folder / "guide.md").write_text("# Guide\n\nTurn the key twice.\n", encoding="utf-8")
    for name in ("Team handbook and onboarding runbooks", "Vendor contracts"):
        source = Source.objects.create(
            owner=alice, name=name, kind=Source.Kind.FOLDER, location=str(folder)
        )
        scan_source(source)

    page = open_session(root).page
    page.set_viewport_size(DESKTOP)
    page.goto(reverse("admin:externals_source_changelist"))
    expect(page.locator("#result_list")).to_contain_text("Team handbook")
    # The table is not cut off: no wider than the box that would scroll it, nor the page.
    table, box = page.evaluate(
        "[document.querySelector('#result_list').scrollWidth,"
        " document.querySelector('#changelist .results').clientWidth]"
    )
    assert table <= box, (table, box)
    assert page.evaluate("document.documentElement.scrollWidth") <= DESKTOP["width"]
    expect(page.locator("#result_list")).to_contain_text("snapshots")
    shot(page, "sources-desktop")
    page.set_viewport_size(PHONE)
    shot(page, "sources-phone")


def test_index_health_counts_the_worker_beating_from_its_loop(open_session) -> None:
    root = User.objects.create_superuser("root", "root@example.com", "x" * 20)
    worker = db_worker.ResilientWorker(
        queue_names=["default"],
        interval=0.0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="loop-beats",
        excluded_queue_names=[],
    )
    worker.beats_in_loop = True
    worker.run()  # one poll, nothing queued: the row is written from the loop

    page = open_session(root).page
    page.set_viewport_size(DESKTOP)
    page.goto(reverse("admin:retrieval_index_health"))
    workers = page.locator("#index-health-workers")
    expect(workers).to_contain_text("Workers alive / stale")
    expect(workers.locator("td").first).to_have_text("1 / 0")
    shot(page, "index-health-desktop")
    page.set_viewport_size(PHONE)
    shot(page, "index-health-phone")
