"""In chromium: after a bulk import, the admin's index health page says *Pending* (not
*Unhealthy*) while the title-mention scan waits for the worker, lists what is pending, and
fits a phone (360 px, no sideways scrolling); once the worker has run it, *Healthy*.

`LODE_INDEX_HEALTH_SHOTS=/some/folder` writes screenshots of the pending page at both widths.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse
from playwright.sync_api import expect

from notes import services
from retrieval.index.sync import sync_pending_vectors

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}


def shot(page, name: str) -> None:
    folder = os.environ.get("LODE_INDEX_HEALTH_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def test_the_admin_says_pending_until_the_worker_has_scanned(
    open_session, alice, settings, private_vectors
) -> None:
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    root = User.objects.create_superuser("root", "root@example.com", "x" * 20)
    services.note_create(owner=alice, title="Area Index", body="Start with Gateway Runbook.")
    notes = [services.NoteImport("g.md", "Gateway Runbook", "Restart the gateway pods.")]
    services.notes_import(owner=alice, notes=notes, source_name="wiki")  # commits: queued
    sync_pending_vectors.call()  # the vectors in step; the mention scan still queued

    page = open_session(root).page
    page.goto(reverse("admin:retrieval_index_health") + "?edges=1")
    verdict = page.locator("#index-health-verdict")
    expect(verdict).to_contain_text("Pending: nothing is wrong")
    expect(page.locator("#index-health-pending")).to_contain_text(
        "1 title-mention scan is queued or running; 1 mention edge waits for it"
    )
    for name, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        # The verdict and the pending list wrap inside the page (the report's tables of
        # digests are wider than a phone and scroll, as before).
        for element in (verdict, page.locator("#index-health-pending")):
            box = element.bounding_box()
            assert box is not None and box["x"] + box["width"] <= size["width"]
        shot(page, f"index-health-pending-{name}")

    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    page.set_viewport_size(DESKTOP)
    page.reload()
    expect(verdict).to_contain_text("Healthy: every derived index agrees")
    expect(page.locator("#index-health-pending")).to_have_count(0)
