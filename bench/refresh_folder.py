"""Benchmark: refresh of a 2,000-file folder with 1% changed vs full ingest.

    .venv/bin/python bench/refresh_folder.py [--db sqlite|postgres] [--files 2000]
                                             [--changed-percent 1]

In a fresh database (`_common.fresh_environment`; PostgreSQL uses the scratch database
`jp`), generates `--files` small Markdown files (a heading, two paragraphs) in a temporary
folder and times, through `externals.pipeline.scan_source`:

* first ingest: every file is new (read, hash, extract, version + passages + FTS, item);
* full re-ingest: a second source over the same folder, so every file is new again (the
  cost lode would pay without fingerprints);
* unchanged refresh: nothing changed (read + hash every file, compare, write nothing);
* refresh with `--changed-percent` of the files rewritten.

Prints seconds and the ratio full re-ingest / 1%-refresh (the issue aims at ≥ 20×), and
writes bench/out/refresh_folder.json. Embedding is not part of a scan (the worker does it
after commit), so no model is loaded; the queued vector tasks are written, as in production.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, fresh_environment

OUT = ROOT / "bench" / "out"
WORDS = (
    "deploy", "cache", "redis", "certbot", "quorum", "kafka", "retention", "index", "shard",
    "replica", "backup", "restore", "latency", "budget", "rollout", "canary", "feature",
    "flag", "schema", "migration", "token", "rotation", "audit",
)  # fmt: skip


def paragraph(rng: random.Random, words: int = 40) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def write_folder(folder: Path, count: int) -> None:
    rng = random.Random(7)
    for n in range(count):
        sub = folder / f"section-{n % 20:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"note-{n:05d}.md").write_text(
            f"# Note {n}\n\n{paragraph(rng)}\n\n## Details\n\n{paragraph(rng)} marker{n}\n",
            encoding="utf-8",
        )


def child(files: int, changed_percent: float) -> dict:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from externals import pipeline, services

    call_command("migrate", verbosity=0)
    owner = User.objects.create_user("bench")
    with tempfile.TemporaryDirectory(prefix="lode-refresh-") as tmp:
        folder = Path(tmp) / "docs"
        write_folder(folder, files)

        def timed(source, label: str) -> tuple[float, object]:
            started = time.perf_counter()
            record = pipeline.scan_source(source)
            seconds = time.perf_counter() - started
            print(
                f"  {label:<22} {seconds:8.3f} s  status={record.status} new={record.items_new} "
                f"changed={record.items_changed} unchanged={record.items_unchanged}",
                flush=True,
            )
            return seconds, record

        first = services.source_create(
            owner=owner, name="docs", kind="folder", location=str(folder)
        )
        ingest_s, _ = timed(first, "first ingest")
        second = services.source_create(
            owner=owner, name="docs-again", kind="folder", location=str(folder)
        )
        reingest_s, _ = timed(second, "full re-ingest")
        unchanged_s, _ = timed(first, "refresh, 0 changed")
        paths = sorted(folder.rglob("*.md"))
        changed = max(1, round(files * changed_percent / 100))
        for path in random.Random(11).sample(paths, changed):
            path.write_text(path.read_text(encoding="utf-8") + "\nEdited line.\n", encoding="utf-8")
        refresh_s, record = timed(first, f"refresh, {changed} changed")
        assert record.items_changed == changed, record.items_changed
    return {
        "files": files,
        "changed": changed,
        "first_ingest_s": round(ingest_s, 3),
        "full_reingest_s": round(reingest_s, 3),
        "refresh_unchanged_s": round(unchanged_s, 3),
        "refresh_changed_s": round(refresh_s, 3),
        "ratio_reingest_over_refresh": round(reingest_s / refresh_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--changed-percent", type=float, default=1.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.files, args.changed_percent)), flush=True)
        return
    with fresh_environment(args.db, "jp") as env:
        command = [sys.executable, __file__, "--child", "--files", str(args.files)]
        command += ["--changed-percent", str(args.changed_percent)]
        print(f"{args.db}: {args.files} files", flush=True)
        proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    lines = proc.stdout.splitlines()
    sys.stdout.write("".join(line + "\n" for line in lines if not line.startswith("RESULT")))
    if proc.returncode != 0:
        sys.exit(proc.stderr)
    result = json.loads(next(line for line in lines if line.startswith("RESULT"))[7:])
    result["db"] = args.db
    print(
        f"full re-ingest {result['full_reingest_s']} s vs refresh with {result['changed']} "
        f"changed {result['refresh_changed_s']} s: {result['ratio_reingest_over_refresh']}x "
        f"faster (aim >= 20x)"
    )
    OUT.mkdir(exist_ok=True)
    (OUT / "refresh_folder.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
