"""Scans of one source started 4 at a time: versions written.

    .venv/bin/python bench/scan_race.py [--db sqlite|postgres|both] [--files 40] [--scans 4]

In a fresh database (`_common.fresh_environment`: a SQLite file, or a scratch PostgreSQL
database), a folder of `--files` Markdown files becomes a folder source; `--scans` threads,
each with its own database connection, start `scan_source` on it at the same moment.
Printed per backend:

* `with the claim`: what lode does now — versions written (should equal `--files`), scan
  records, scans refused as "already scanning";
* `without the claim (before)`: the same race with the per-source claim bypassed —
  versions written (expected: `--files` × `--scans`).

Writes bench/out/scan_race.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BACKENDS, ROOT, fresh_environment

OUT = ROOT / "bench" / "out"


def _child(files: int, scans: int) -> None:
    """Runs inside the fresh environment: migrate, race, print one JSON line."""
    import os

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from externals import pipeline, services
    from externals.models import ScanRecord, Source
    from notes.models import Version

    call_command("migrate", verbosity=0)
    pipeline.embedding_problem = lambda: ""  # vectors are not what is measured
    owner = User.objects.create_user("bench", password="bench-password-123")
    staff_folder = Path(tempfile.mkdtemp(prefix="lode-bench-race-"))
    owner.is_staff = True  # may mirror any folder
    owner.save()

    def run_race(name: str) -> dict[str, object]:
        root = staff_folder / name
        root.mkdir()
        for n in range(files):
            (root / f"f{n:03d}.md").write_text(f"# File {n}\n\nToken {name}tok{n} here.\n")
        source = services.source_create(owner=owner, name=name, kind="folder", location=str(root))
        barrier = threading.Barrier(scans)
        outcomes: list[str] = []

        def scan() -> None:
            try:
                barrier.wait(timeout=30)
                record = pipeline.scan_source(Source.objects.get(pk=source.pk))
                outcomes.append(f"{record.status}, {record.items_new} new")
            except pipeline.ScanAlreadyRunning:
                outcomes.append("already scanning")
            except Exception as exc:  # reported, not hidden
                outcomes.append(f"error {type(exc).__name__}: {exc}")
            finally:
                connection.close()

        threads = [threading.Thread(target=scan) for _ in range(scans)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return {
            "versions": Version.objects.filter(document__source_items__source=source).count(),
            "scan_records": ScanRecord.objects.filter(source=source).count(),
            "outcomes": sorted(outcomes),
        }

    result = {"with the claim": run_race("claimed")}
    # The pipeline without the claim: every scan "gets" the source.
    pipeline._claim_or_wait = lambda source, wait_seconds: pipeline.ScanClaim(
        source.pk, timezone.now()
    )
    result["without the claim (before)"] = run_race("unclaimed")
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=(*BACKENDS, "both"), default="both")
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--scans", type=int, default=4)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.files, args.scans)
        return
    report: dict[str, object] = {"files": args.files, "scans": args.scans}
    for db in BACKENDS if args.db == "both" else (args.db,):
        with fresh_environment(db, "lode_bench_scan_race") as env:
            command = [sys.executable, __file__, "--child", f"--files={args.files}"]
            command.append(f"--scans={args.scans}")
            done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            raise SystemExit(f"{db}: the race failed")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        report[db] = result
        for case, figures in result.items():
            print(
                f"{db:8} {case:27} versions {figures['versions']:4}  "
                f"scan records {figures['scan_records']}  {figures['outcomes']}"
            )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "scan_race.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
