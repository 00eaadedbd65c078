"""Settings → Export your notes: a POST with CSRF gives a zip of exactly what the user may
see (their own notes and their shared spaces', nobody else's), bounded in size with a clear
message; signing in is required."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.test import Client

from notes import services
from notes.export import MANIFEST_PATH
from spaces.models import Role
from spaces.services import member_add, space_create


@pytest.fixture
def shared_world(alice, bob, carol):
    team = space_create(by=alice, name="Team")
    member_add(by=alice, space=team, username="bob", role=Role.VIEWER)
    services.note_create(owner=alice, title="Alice own", body="alice-only words")
    services.note_create(owner=alice, title="Team plan", body="team words", space=team)
    services.note_create(owner=bob, title="Bob own", body="bob-only words")
    services.note_create(owner=carol, title="Carol own", body="carol-only words")
    return team


def download(client: Client, **data: str) -> dict[str, str]:
    response = client.post("/settings/export", data)
    assert response.status_code == 200, response.status_code
    assert response["Content-Type"] == "application/zip"
    assert "attachment" in response["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    return {name: archive.read(name).decode("utf-8") for name in archive.namelist()}


def test_each_user_gets_only_what_they_may_see(alice_client, bob_client, shared_world):
    alice_files = download(alice_client)
    text = "".join(alice_files.values())
    assert "alice-only words" in text and "team words" in text
    assert "bob-only words" not in text and "carol-only words" not in text
    assert "Team/Team plan.md" in alice_files and MANIFEST_PATH in alice_files
    bob_text = "".join(download(bob_client).values())
    assert "bob-only words" in bob_text and "team words" in bob_text
    assert "alice-only words" not in bob_text and "carol-only words" not in bob_text


def test_versions_when_asked(alice_client, alice, shared_world):
    files = download(alice_client, versions="on")
    assert any(name.startswith(".lode/versions/") for name in files)
    assert not any(name.startswith(".lode/versions/") for name in download(alice_client))


def test_too_large_is_refused_with_a_message(alice_client, shared_world, settings):
    settings.LODE_EXPORT_MAX_BYTES = 1024
    services.note_create(owner=shared_world.created_by, title="Big", body="x" * 4000)
    response = alice_client.post("/settings/export", follow=True)
    assert response.status_code == 200
    assert "the most one download may carry" in response.content.decode()


def test_login_post_and_csrf_required(alice, shared_world):
    anonymous = Client()
    response = anonymous.post("/settings/export")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post("/settings/export").status_code == 403
    assert strict.get("/settings/export").status_code == 405


def test_the_settings_page_shows_the_button(alice_client, shared_world):
    page = alice_client.get("/settings/tokens").content.decode()
    assert "Export your notes" in page and 'action="/settings/export"' in page
    assert "lode_backup" not in page  # the backup line is for admins only
