"""What search's "not yet embedded" note costs, before and after the pending table.

    .venv/bin/python bench/pending_note.py --data-dir /work/scifact-data [--replicas 6]
        [--scaled-dir DIR] [--repeat 200]

`--data-dir` holds SciFact loaded and embedded for user `eval` (bench/README.md). The run
works on a copy: `--scaled-dir DIR` keeps the scaled copy (made once with
`search_latency.replicate`: perturbed replicas whose vectors are their source's plus noise,
recorded as the worker records them) for later runs; without it a temporary copy is used.

On that copy, for a backlog of 0, 10, 300 and 3,000 passages of user `eval` (their vector
records dropped and the passages marked pending again, as a lost vector folder leaves them),
it times, `--repeat` times each, in alternation:
* **anti-join** — the statement the note ran before the table: head passages of live
  documents in the user's spaces anti-joined with their vector records, stopped at 1,001
  rows (`pending_passages(...)[:1001].count()`);
* **table** — `vectors.pending_note_count(spaces, at_most=1000)`, what search runs now.
Both must give the same count, or the run fails. Prints p50/p95 in ms and writes
bench/out/pending_note.json. SQLite, as a new install runs it: no ANALYZE statistics.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import percentile

os.environ["OPENBLAS_NUM_THREADS"] = "1"
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
BACKLOGS = (0, 10, 300, 3000)
NOTE_MAX = 1000


def measure(repeat: int) -> dict[str, object]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from retrieval.eligibility import member_space_ids
    from retrieval.index.vectors import (
        active_manifest_key,
        head_passages,
        mark_pending_again,
        pending_count,
        pending_note_count,
        pending_passages,
    )
    from retrieval.models import PassageVector

    user = get_user_model().objects.get(username="eval")
    spaces = sorted(member_space_ids(user.pk))
    key = active_manifest_key()

    def anti_join() -> int:
        queryset = pending_passages(key).filter(document__space_id__in=spaces)
        return queryset.order_by().values("pk")[: NOTE_MAX + 1].count()

    def table() -> int:
        return pending_note_count(spaces, at_most=NOTE_MAX)

    # The newest passages first: a backlog is what was saved last.
    newest = list(
        head_passages()
        .filter(document__space_id__in=spaces)
        .order_by("-pk")
        .values_list("pk", flat=True)[: max(BACKLOGS)]
    )
    rows: list[dict[str, object]] = []
    for backlog in BACKLOGS:
        dropped = newest[:backlog]
        PassageVector.objects.filter(manifest_key=key, passage_id__in=dropped).delete()
        mark_pending_again(dropped)
        truth = min(pending_count(spaces), NOTE_MAX + 1)
        if not anti_join() == table() == truth:
            raise SystemExit(f"backlog {backlog}: anti-join {anti_join()}, table {table()}")
        timings: dict[str, list[float]] = {"anti_join": [], "table": []}
        for _ in range(repeat):
            for name, call in (("anti_join", anti_join), ("table", table)):
                started = time.perf_counter()
                call()
                timings[name].append((time.perf_counter() - started) * 1000)
        row: dict[str, object] = {"backlog": backlog, "count": truth}
        for name, values in timings.items():
            row[f"{name}_p50_ms"] = round(percentile(values, 50), 2)
            row[f"{name}_p95_ms"] = round(percentile(values, 95), 2)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    return {
        "vendor": connection.vendor,
        "head_passages": head_passages().count(),
        "repeat": repeat,
        "load_average": os.getloadavg()[0],
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--replicas", type=int, default=6)
    parser.add_argument("--scaled-dir", default=None)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--phase", choices=["scale", "measure"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:  # a child process with LODE_DATA_DIR already set
        sys.path.insert(0, str(ROOT))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
        import django

        django.setup()
        if args.phase == "scale":
            from search_latency import replicate

            replicate(args.replicas)
        else:
            print(json.dumps(measure(args.repeat)))
        return 0

    def child(data_dir: Path, phase: str) -> str:
        env = dict(os.environ, LODE_DATA_DIR=str(data_dir.resolve()))
        env.pop("DATABASE_URL", None)
        command = [sys.executable, __file__, "--data-dir", str(data_dir), "--phase", phase]
        command += ["--replicas", str(args.replicas), "--repeat", str(args.repeat)]
        done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
        sys.stderr.write(done.stderr[-3000:])
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""

    keep = Path(args.scaled_dir) if args.scaled_dir else None
    scaled = keep or Path(tempfile.mkdtemp(prefix="lode-pending-scaled-"))
    work = Path(tempfile.mkdtemp(prefix="lode-pending-work-"))
    try:
        if not (scaled / ".scaled").exists():
            shutil.copytree(args.data_dir, scaled, dirs_exist_ok=True)
            subprocess.run(
                [sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"],
                env=dict(os.environ, LODE_DATA_DIR=str(scaled.resolve())),
                check=True,
            )
            if args.replicas:
                child(scaled, "scale")
            (scaled / ".scaled").write_text(f"{args.replicas} replicas\n")
        shutil.copytree(scaled, work, dirs_exist_ok=True)  # the backlogs dirty the copy
        result = json.loads(child(work, "measure"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if keep is None:
            shutil.rmtree(scaled, ignore_errors=True)
    print(
        f"{result['vendor']}, {result['head_passages']:,} head passages, "
        f"{result['repeat']} repeats, load {result['load_average']:.1f}"
    )
    print("backlog  count  anti-join p50/p95 ms  table p50/p95 ms")
    for row in result["rows"]:
        print(
            f"{row['backlog']:>7}  {row['count']:>5}  "
            f"{row['anti_join_p50_ms']:>8} / {row['anti_join_p95_ms']:<8}  "
            f"{row['table_p50_ms']:>6} / {row['table_p95_ms']}"
        )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "pending_note.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
