"""lode_backup / lode_restore on the default install, run as separate processes on real data
folders: a backup taken while another process writes notes is one consistent point in time
and restores into a fresh install whose indexes are healthy; a restore refuses an install
that holds data and a backup made by a newer lode; on PostgreSQL both commands refuse and
name pg_dump."""

from __future__ import annotations

import io
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import textwrap
import time
from contextlib import closing
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from tests.factories import REPO_ROOT, child_env

WRITER = textwrap.dedent(
    """
    import os, pathlib
    from django.contrib.auth.models import User
    from notes.services import note_create, note_update
    stop = pathlib.Path(os.environ["STOP_FILE"])
    owner, _ = User.objects.get_or_create(username="writer")
    n = 0
    while not stop.exists():
        note = note_create(owner=owner, title=f"Note {n}", body=f"First text of note {n}.")
        note_update(document=note, user=owner, base_version_id=note.head_id,
                    title=f"Note {n}", body=f"Second text of note {n}, edited.")
        n += 1
        print(n, flush=True)
    """
)


def manage(data_dir: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=child_env(data_dir),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def query(database: Path, sql: str) -> list[tuple]:
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        return db.execute(sql).fetchall()


def documents(database: Path) -> int:
    return query(database, "SELECT COUNT(*) FROM notes_document")[0][0]


def assert_consistent(database: Path) -> None:
    """One point in time: every version's document exists, every document's head is its
    newest version, version numbers run 1..n, every head has its passages."""
    assert query(database, "PRAGMA integrity_check") == [("ok",)]
    assert query(
        database,
        "SELECT COUNT(*) FROM notes_version v LEFT JOIN notes_document d "
        "ON d.id = v.document_id WHERE d.id IS NULL",
    ) == [(0,)]
    bad_heads = query(
        database,
        "SELECT d.id FROM notes_document d LEFT JOIN notes_version h ON h.id = d.head_id "
        "WHERE h.id IS NULL OR h.document_id != d.id OR h.number != "
        "(SELECT MAX(number) FROM notes_version v WHERE v.document_id = d.id)",
    )
    assert bad_heads == []
    gaps = query(
        database,
        "SELECT document_id FROM notes_version GROUP BY document_id "
        "HAVING MAX(number) != COUNT(*) OR MIN(number) != 1",
    )
    assert gaps == []
    unindexed = query(
        database,
        "SELECT d.id FROM notes_document d WHERE NOT EXISTS (SELECT 1 FROM retrieval_passage "
        "p WHERE p.version_id = d.head_id AND p.is_head)",
    )
    assert unindexed == []


@pytest.fixture(scope="module")
def install(tmp_path_factory) -> Path:
    if connection.vendor != "sqlite":
        pytest.skip("lode_backup and lode_restore are for SQLite installs (PostgreSQL: pg_dump)")
    data = tmp_path_factory.mktemp("install")
    done = manage(data, "migrate", "-v0")
    assert done.returncode == 0, done.stderr
    return data


@pytest.mark.slow
def test_backup_during_writes_restores_consistently(install, tmp_path) -> None:
    database = install / "lode.sqlite3"
    (install / "uploads" / "7").mkdir(parents=True)
    (install / "uploads" / "7" / "page.html").write_text("<p>uploaded</p>")
    stop = tmp_path / "stop"
    writer = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", WRITER],
        cwd=REPO_ROOT,
        env={**child_env(install), "STOP_FILE": str(stop)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while documents(database) < 20:
            assert writer.poll() is None, writer.stderr.read()
            assert time.monotonic() < deadline, "the writer wrote too little"
            time.sleep(0.2)
        before = documents(database)
        backup = manage(install, "lode_backup", str(tmp_path / "backup.tar.gz"))
        after = documents(database)
        assert writer.poll() is None, "the writer stopped while the backup was taken"
    finally:
        stop.touch()
        writer.wait(timeout=60)
    assert backup.returncode == 0, backup.stderr
    assert after > before, "nothing was written while the backup ran"

    with tarfile.open(tmp_path / "backup.tar.gz") as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    copy = tmp_path / "unpacked" / "db.sqlite3"
    assert_consistent(copy)
    assert before <= documents(copy) <= after
    assert (tmp_path / "unpacked" / "uploads" / "7" / "page.html").read_text() == "<p>uploaded</p>"
    assert not (tmp_path / "unpacked" / "chroma").exists()

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    restored = manage(fresh, "lode_restore", str(tmp_path / "backup.tar.gz"))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "index health: healthy" in restored.stdout
    assert_consistent(fresh / "lode.sqlite3")
    assert documents(fresh / "lode.sqlite3") == documents(copy)
    assert (fresh / "uploads" / "7" / "page.html").read_text() == "<p>uploaded</p>"

    again = manage(fresh, "lode_restore", str(tmp_path / "backup.tar.gz"))
    assert again.returncode == 1 and "already holds accounts or notes" in again.stderr
    exists = manage(install, "lode_backup", str(tmp_path / "backup.tar.gz"))
    assert exists.returncode == 1 and "exists" in exists.stderr


@pytest.mark.slow
def test_restore_refuses_a_backup_from_a_newer_lode(install, tmp_path) -> None:
    made = manage(install, "lode_backup", str(tmp_path / "backup"))
    assert made.returncode == 0, made.stderr
    shutil.copytree(tmp_path / "backup", tmp_path / "untouched")
    with closing(sqlite3.connect(tmp_path / "backup" / "db.sqlite3")) as db:
        db.execute(
            "INSERT INTO django_migrations (app, name, applied) "
            "VALUES ('notes', '9999_from_a_newer_lode', '2030-01-01')"
        )
        db.commit()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    refused = manage(fresh, "lode_restore", str(tmp_path / "backup"))
    assert refused.returncode == 1
    assert "newer lode" in refused.stderr and "9999_from_a_newer_lode" in refused.stderr
    if (fresh / "lode.sqlite3").exists():  # opened by the command's start, never written
        assert query(fresh / "lode.sqlite3", "SELECT name FROM sqlite_master") == []
    # The same backup as made restores, leaving the embedding to the worker.
    restored = manage(fresh, "lode_restore", str(tmp_path / "untouched"), "--skip-vectors")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "the worker embeds the passages" in restored.stdout
    assert "index health: healthy" in restored.stdout
    pending = query(fresh / "lode.sqlite3", "SELECT COUNT(*) FROM retrieval_pendingvector")
    heads = query(fresh / "lode.sqlite3", "SELECT COUNT(*) FROM retrieval_passage WHERE is_head")
    assert pending == heads


def test_commands_refuse_on_postgresql_naming_pg_dump(db, tmp_path) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL refusal; on SQLite the tests above run the commands")
    for command, target in (("lode_backup", tmp_path / "b"), ("lode_restore", tmp_path)):
        with pytest.raises(CommandError, match="pg_dump"):
            call_command(command, str(target), stdout=io.StringIO())
    assert not (tmp_path / "b").exists()
