"""Shared set-up for the page benchmarks: a lode on a temporary data
folder, realistic content owned by one user, and a live server thread serving it.

Django is configured here (before anything imports a model), on `lode_site.test_settings`
with `LODE_DATA_DIR` pointing at a fresh folder, so the developer's `var/` is never touched.
Content is created through the project's own services; a step the checked-out code does not
support (an older commit, see `bench/axe_pages.py --help`) is skipped and its pages with it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path

os.environ["OPENBLAS_NUM_THREADS"] = "1"
DATA_DIR = tempfile.mkdtemp(prefix="lode-bench-pages-")
os.environ["LODE_DATA_DIR"] = DATA_DIR
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.test_settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

# The live server answers on localhost and the test Client says "testserver".
settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "localhost", "127.0.0.1", "testserver"]

USERNAME = "bench"
PASSWORD = "bench-pages-password-13"

NOTE_BODY = """# Failover runbook

Promote the replica when the primary stops answering for more than thirty seconds.

## Check the lag

Run this on the replica first:

```
psql -c "SELECT now() - pg_last_xact_replay_timestamp() AS lag;"
```

| Host | Role | Port |
| --- | --- | --- |
| db-primary-01 | primary | 5432 |
| db-replica-01 | replica | 5432 |

## Promote

Then run `pg_ctl promote` on the replica and point the failover DNS record at it.

- [ ] fence the old primary
- [x] page the on-call

See [[Backup policy]] and https://wiki.example.com/runbooks/failover #ops #postgres
"""
SECOND_NOTE = """# Backup policy

Nightly base backups with `pg_basebackup`; WAL archived every five minutes to object
storage. Restores are tested monthly on a scratch replica. #ops
"""
FOLDER_FILES = {
    "failover-procedure.md": (
        "# Failover procedure\n\nBefore promoting a replica, confirm the replication lag is "
        "under one second. Keep the old primary fenced until the new one answers.\n"
    ),
    "maintenance-window.md": (
        "# Maintenance window\n\nThe weekly maintenance window is Sunday 02:00 to 04:00 UTC. "
        "Replica upgrades happen first, then a controlled failover to upgrade the primary.\n"
    ),
}


@dataclass
class Content:
    """Primary keys of what was created; None where the code under test lacked the step."""

    user: object = None
    note_id: int | None = None
    first_version: int | None = None
    head_version: int | None = None
    trashed_note_id: int | None = None
    source_id: int | None = None
    external_id: int | None = None
    skipped: list[str] = field(default_factory=list)


def _step(content: Content, name: str, action) -> None:
    try:
        action()
    except Exception:  # an older commit may lack a service; report and go on
        content.skipped.append(f"{name}: {traceback.format_exc(limit=1).strip().splitlines()[-1]}")


def build_content() -> Content:
    """Migrate the fresh database and create the user's notes, source and externals."""
    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import User

    from notes import services

    content = Content()
    content.user = User.objects.create_user(USERNAME, password=PASSWORD)
    user = content.user

    def notes() -> None:
        note = services.note_create(
            owner=user, title="Failover runbook", body=NOTE_BODY, tags="infra postgres"
        )
        content.note_id = note.pk
        content.first_version = note.head_id
        services.note_update(
            document=note,
            user=user,
            base_version_id=note.head_id,
            title=note.title,
            body=NOTE_BODY + "\nFence the old primary first.\n",
        )
        note.refresh_from_db()
        content.head_version = note.head_id
        services.note_create(owner=user, title="Backup policy", body=SECOND_NOTE, tags="ops")

    def trash() -> None:
        gone = services.note_create(
            owner=user, title="Old pager rota", body="Superseded by the new rota. #ops"
        )
        services.note_delete(document=gone, user=user)
        content.trashed_note_id = gone.pk

    def source() -> None:
        from externals import services as ext_services
        from externals.models import SourceItem
        from externals.pipeline import scan_source

        folder = Path(DATA_DIR) / "bench-folder-source"  # removed with the data folder
        folder.mkdir()
        for name, text in FOLDER_FILES.items():
            (folder / name).write_text(text, encoding="utf-8")
        made = ext_services.source_create(
            owner=user, name="Platform runbooks", kind="folder", location=str(folder)
        )
        content.source_id = made.pk
        scan_source(made)
        first = (
            SourceItem.objects.filter(source=made, document__isnull=False).order_by("pk").first()
        )
        if first is not None:
            content.external_id = first.document_id

    _step(content, "notes", notes)
    _step(content, "trash", trash)
    _step(content, "folder source", source)
    return content


class LiveServer:
    """Django's live server thread (the one LiveServerTestCase uses) with static files
    served as StaticLiveServerTestCase serves them; `DEBUG` stays off as in production."""

    def __init__(self) -> None:
        from django.contrib.staticfiles.handlers import StaticFilesHandler
        from django.test.testcases import LiveServerThread

        self.thread = LiveServerThread("localhost", StaticFilesHandler, port=0)
        self.thread.daemon = True
        self.thread.start()
        self.thread.is_ready.wait()
        if self.thread.error:
            raise self.thread.error
        self.url = f"http://localhost:{self.thread.port}"

    def stop(self) -> None:
        self.thread.terminate()


def cleanup() -> None:
    shutil.rmtree(DATA_DIR, ignore_errors=True)
