"""The first account's password is printed once by `lode_first_user` (which `bootstrap run`
calls on every start) and is never left on disk; later starts say how to set a new one.
A password file left by an earlier install is removed at the next start."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1:8000/"


@pytest.fixture
def data_dir(settings, tmp_path) -> Path:
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()
    return settings.DATA_DIR


def first_user() -> str:
    out = StringIO()
    call_command("lode_first_user", url=URL, stdout=out)
    return out.getvalue()


def everything_under(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file())


def test_the_password_is_printed_once_and_stored_nowhere(data_dir):
    out = first_user()
    password = re.search(r"password: (\S+)", out).group(1)
    assert "username: lode" in out and "changepassword lode" in out
    assert list(data_dir.iterdir()) == []
    client = Client()
    response = client.post("/accounts/login/", {"username": "lode", "password": password})
    assert response.status_code == 302
    assert client.get("/").wsgi_request.user.username == "lode"

    again = first_user()
    assert password not in again
    assert "Log in at" in again and "python manage.py changepassword lode" in again
    assert User.objects.count() == 1
    assert password.encode() not in everything_under(data_dir)


def test_a_password_file_from_an_earlier_install_is_shown_once_then_removed(data_dir):
    User.objects.create_superuser("lode", "", "Old-pass-123")
    legacy = data_dir / "first-login.txt"
    legacy.write_text("username: lode\npassword: Old-pass-123\n")
    out = first_user()
    assert not legacy.exists()
    assert "password: Old-pass-123" in out and "shown this last time" in out
    assert "Old-pass-123" not in first_user()


def test_a_password_file_of_an_account_that_has_logged_in_is_removed_unshown(data_dir):
    User.objects.create_superuser("lode", "", "Old-pass-123", last_login=timezone.now())
    legacy = data_dir / "first-login.txt"
    legacy.write_text("username: lode\npassword: Old-pass-123\n")
    out = first_user()
    assert not legacy.exists()
    assert "Old-pass-123" not in out and "Removed" in out
