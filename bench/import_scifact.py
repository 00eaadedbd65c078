"""Benchmark: load the full SciFact corpus with `lode_load_beir` into a fresh database.

    .venv/bin/python bench/import_scifact.py [--db sqlite|postgres|both]

For each backend: a fresh database (temporary LODE_DATA_DIR for SQLite; the scratch database
`lode_bench`, dropped and recreated, for PostgreSQL), `manage.py migrate`, then the loader in
a subprocess, timed, then the same load again (every document unchanged) to time a re-run.
Prints notes/s and passages/s as the loader measured them (Django start-up excluded) and
the wall time of the subprocess (start-up included).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BACKENDS, ROOT, SCIFACT, fresh_environment

SUMMARY_RE = re.compile(
    r"created (?P<created>\d+), updated (?P<updated>\d+), unchanged (?P<unchanged>\d+), "
    r"skipped (?P<skipped>\d+) in (?P<seconds>[\d.]+) s \((?P<notes_s>[\d.]+) notes/s\); "
    r"(?P<passages>\d+) passages written \((?P<passages_s>[\d.]+) passages/s\)"
)


def manage(env: dict[str, str], *args: str) -> tuple[str, float]:
    """Run `manage.py args` with `env`; returns stdout and wall seconds."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"manage.py {' '.join(args)} failed ({done.returncode})")
    return done.stdout, wall


def bench(db: str, corpus_dir: Path) -> dict[str, float | str]:
    with fresh_environment(db, pg_name="lode_bench") as env:
        manage(env, "migrate", "-v0")
        load = ("lode_load_beir", str(corpus_dir), "--no-progress")
        out, wall = manage(env, *load)
        first = SUMMARY_RE.search(out)
        again_out, _ = manage(env, *load)
        again = SUMMARY_RE.search(again_out)
    if first is None or again is None:
        raise SystemExit(f"could not read the loader's summary line:\n{out}{again_out}")
    return {
        "db": db,
        "notes": int(first["created"]),
        "passages": int(first["passages"]),
        "seconds": float(first["seconds"]),
        "wall": wall,
        "notes_s": float(first["notes_s"]),
        "passages_s": float(first["passages_s"]),
        "rerun_seconds": float(again["seconds"]),
        "rerun_unchanged": int(again["unchanged"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=(*BACKENDS, "both"), default="both")
    parser.add_argument("--corpus-dir", type=Path, default=SCIFACT)
    args = parser.parse_args()
    backends = BACKENDS if args.db == "both" else (args.db,)
    rows = [bench(db, args.corpus_dir) for db in backends]
    print(f"lode_load_beir {args.corpus_dir} into a fresh database")
    print(
        f"{'db':<9} {'notes':>6} {'passages':>8} {'load s':>7} {'wall s':>7} "
        f"{'notes/s':>8} {'passages/s':>10} {'re-run s':>8}"
    )
    for r in rows:
        print(
            f"{r['db']:<9} {r['notes']:>6} {r['passages']:>8} {r['seconds']:>7.1f} "
            f"{r['wall']:>7.1f} {r['notes_s']:>8.0f} {r['passages_s']:>10.0f} "
            f"{r['rerun_seconds']:>8.1f}"
        )


if __name__ == "__main__":
    main()
