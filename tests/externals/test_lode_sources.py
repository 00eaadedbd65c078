"""`manage.py lode_sources list|reconcile|secret`: reconcile rescans every enabled source with
trigger "reconcile" and exits non-zero when a scan fails; --enqueue only queues; secret
rotates and prints the new secret once."""

from __future__ import annotations

import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django_tasks_db.models import DBTaskResult

from externals.models import ScanRecord, Source
from externals.tasks import refresh_source
from externals.webhooks import sign

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("lode_sources", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def folder(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def sources(alice, bob, tmp_path) -> dict[str, Source]:
    a = folder(tmp_path / "a", {"one.md": "# One\n\nAlpha text.\n", "two.txt": "Beta text.\n"})
    b = folder(tmp_path / "b", {"three.md": "# Three\n\nGamma text.\n"})
    return {
        "alice": Source.objects.create(
            owner=alice, name="Alice folder", kind=Source.Kind.FOLDER, location=str(a)
        ),
        "bob": Source.objects.create(
            owner=bob,
            name="Bob folder",
            kind=Source.Kind.FOLDER,
            location=str(b),
            webhook_secret="bob-old-secret",
        ),
        "disabled": Source.objects.create(
            owner=alice,
            name="Switched off",
            kind=Source.Kind.FOLDER,
            location=str(a),
            enabled=False,
        ),
    }


def test_reconcile_scans_every_enabled_source(sources):
    out, _ = run("reconcile")
    assert f"{sources['alice'].pk} Alice folder: ok (seen 2, new 2," in out
    assert f"{sources['bob'].pk} Bob folder: ok (seen 1, new 1," in out
    assert "Switched off" not in out
    assert "2 source(s) scanned, 0 failed" in out
    scans = ScanRecord.objects.order_by("id")
    assert [(s.source_id, s.trigger, s.status) for s in scans] == [
        (sources["alice"].pk, "reconcile", "ok"),
        (sources["bob"].pk, "reconcile", "ok"),
    ]
    assert not ScanRecord.objects.filter(source=sources["disabled"]).exists()
    # A second run finds nothing new.
    out, _ = run("reconcile")
    assert "seen 2, new 0, changed 0, unchanged 2" in out


def test_reconcile_exits_1_when_a_scan_fails_and_still_scans_the_rest(sources, tmp_path):
    Source.objects.filter(pk=sources["alice"].pk).update(location=str(tmp_path / "gone"))
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as failure:
        call_command("lode_sources", "reconcile", stdout=out, stderr=err)
    assert failure.value.returncode == 1
    assert f"{sources['alice'].pk} Alice folder: failed" in out.getvalue()
    assert f"{sources['bob'].pk} Bob folder: ok" in out.getvalue()
    assert "2 source(s) scanned, 1 failed" in out.getvalue()


def test_reconcile_only_named_sources(sources):
    out, _ = run("reconcile", "--source", str(sources["bob"].pk))
    assert "1 source(s) scanned" in out
    assert list(ScanRecord.objects.values_list("source_id", flat=True)) == [sources["bob"].pk]


def test_reconcile_enqueue_only_queues(sources):
    before = DBTaskResult.objects.filter(task_path=refresh_source.module_path).count()
    out, _ = run("reconcile", "--enqueue")
    assert "2 source(s) queued" in out
    queued = DBTaskResult.objects.filter(task_path=refresh_source.module_path)
    assert queued.count() == before + 2
    assert not ScanRecord.objects.exists()


def test_list_shows_every_source_and_no_secret(sources):
    out, _ = run("list")
    lines = out.strip().splitlines()
    assert len(lines) == 3
    assert any(line.startswith(f"{sources['bob'].pk}\tbob\tfolder\tenabled") for line in lines)
    assert "disabled\tSwitched off" in out
    assert "never scanned" in out
    assert "bob-old-secret" not in out


def test_secret_rotates_and_prints_once(sources):
    bob_source = sources["bob"]
    out, err = run("secret", str(bob_source.pk))
    secret = out.strip()
    bob_source.refresh_from_db()
    assert secret and secret == bob_source.webhook_secret != "bob-old-secret"
    assert "not shown again" in err
    assert "X-Lode-Timestamp" in err and '"<timestamp>.<raw body>"' in err  # how to sign
    # The printed secret is the one the webhook checks; the old one no longer works.
    url = f"/api/sources/{bob_source.pk}/webhook"
    now = int(time.time())

    def headers(key: str) -> dict[str, str]:
        return {"X-Lode-Timestamp": str(now), "X-Lode-Signature": sign(key, b"{}", now)}

    old = Client().post(url, b"{}", "application/json", headers=headers("bob-old-secret"))
    assert old.status_code == 401
    new = Client().post(url, b"{}", "application/json", headers=headers(secret))
    assert new.status_code == 202


def test_secret_of_unknown_source_exits_2(sources):
    with pytest.raises(CommandError) as failure:
        run("secret", "999999")
    assert failure.value.returncode == 2
