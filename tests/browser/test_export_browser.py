"""Settings → Export your notes in a real browser: alice presses the button and the
download is a zip holding her note and her team's, not bob's; an admin sees the backup
line. At 1280 and 360 px wide.

Screenshots go to LODE_SHOTS_DIR (default /tmp/shots/export) for a person to look at.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from notes import services
from spaces.models import Role
from spaces.services import member_add, space_create

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
SHOTS = Path(os.environ.get("LODE_SHOTS_DIR", "/tmp/shots/export"))


def shoot(page, name: str) -> None:
    try:
        SHOTS.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.mark.parametrize("viewport", [None, PHONE], ids=["desktop", "phone"])
def test_download_holds_only_what_alice_may_see(open_session, tmp_path, viewport):
    alice = User.objects.create_user("alice", "alice@example.com", "pw", is_superuser=True)
    bob = User.objects.create_user("bob", "bob@example.com", "pw")
    team = space_create(by=alice, name="Team docs")
    member_add(by=alice, space=team, username="bob", role=Role.EDITOR)
    services.note_create(owner=alice, title="Deploy runbook", body="See [[Team plan]].")
    services.note_create(owner=bob, title="Team plan", body="team words", space=team)
    services.note_create(owner=bob, title="Bob diary", body="bob-only words")
    session = open_session(alice, accept_downloads=True)
    page = session.page
    if viewport:
        page.set_viewport_size(viewport)
    page.goto("/settings/tokens")
    expect(page.get_by_role("heading", name="Export your notes")).to_be_visible()
    expect(page.get_by_text("Backups (admins):")).to_be_visible()
    name = "phone" if viewport else "desktop"
    shoot(page, f"export-{name}")
    page.get_by_label("Include every earlier version").check()
    with page.expect_download() as info:
        page.get_by_role("button", name="Download zip").click()
    target = tmp_path / "notes.zip"
    info.value.save_as(target)
    with zipfile.ZipFile(target) as archive:
        names = archive.namelist()
        text = "".join(archive.read(n).decode() for n in names)
    assert "Personal/Deploy runbook.md" in names and "Team docs/Team plan.md" in names
    assert any(n.startswith(".lode/versions/") for n in names)
    assert "[[Team plan]]" in text and "bob-only words" not in text
    assert session.errors == []
