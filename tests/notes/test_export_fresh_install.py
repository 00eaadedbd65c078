"""Export → a fresh install → import, as separate lode installs (child processes with their
own data folders): the second install exports the same notes — titles, tags, spaces, dates,
every version — equal by content hash."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from notes.front_matter import split_front_matter
from tests.factories import REPO_ROOT, child_env

pytestmark = pytest.mark.slow

WRITE_NOTES = textwrap.dedent(
    """
    from django.contrib.auth.models import User
    from notes.services import note_create, note_update
    from spaces.services import space_create
    alice = User.objects.create_user("alice")
    team = space_create(by=alice, name="Team: ops")
    for n, title in enumerate(["Plans: Q3/Q4?", "Same", "same", "Ünïcode ✓", "Runbook"]):
        note = note_create(owner=alice, title=title, tags="ops, infra",
                           body=f"# {title}\\r\\n\\nSee [[Runbook]] #tagged {n}\\n",
                           space=team if n % 2 else None)
        for edit in range(n):
            note = note.__class__.objects.get(pk=note.pk)
            note_update(document=note, user=alice, base_version_id=note.head_id,
                        title=title, body=note.head.body + f"edit {edit}\\n")
    """
)


def manage(data: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=child_env(data),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def content(export: Path) -> list[tuple]:
    """Each note and version file as content: what it says, not which id it had."""
    rows = []
    for path in sorted(export.rglob("*.md")):
        fields, body = split_front_matter(path.read_text(encoding="utf-8", newline=""))
        kept = {k: v for k, v in fields.items() if k not in ("lode_id", "lode_key", "aliases")}
        digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
        folder = "versions" if ".lode" in path.parts else path.parent.name
        rows.append((folder, repr(sorted(kept.items())), digest))
    return sorted(rows)


def test_a_fresh_install_gets_the_same_notes(tmp_path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for data in (first, second):
        data.mkdir()
        manage(data, "migrate", "-v0")
    manage(first, "shell", "-c", WRITE_NOTES)
    manage(first, "lode_export", str(tmp_path / "a"), "--user", "alice", "--versions")
    out = manage(second, "lode_import_markdown", str(tmp_path / "a"), "--user", "alice")
    assert "created 5, updated 0, unchanged 0, skipped 0" in out
    manage(second, "lode_export", str(tmp_path / "b"), "--user", "alice", "--versions")
    before, after = content(tmp_path / "a"), content(tmp_path / "b")
    assert len(before) == 5 + (1 + 2 + 3 + 4 + 5)
    assert after == before
    again = manage(second, "lode_import_markdown", str(tmp_path / "a"), "--user", "alice")
    assert "created 0, updated 0, unchanged 5, skipped 0" in again
