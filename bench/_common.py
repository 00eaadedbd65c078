"""Shared set-up for the benchmarks: a fresh database per backend, and the paths they use.

Benchmarks are scripts, not tests: they load the full SciFact corpus and print figures.
Every run starts from an empty database so the numbers do not depend on leftovers.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

# Before anything can import numpy/onnxruntime: one BLAS thread keeps timings comparable.
os.environ["OPENBLAS_NUM_THREADS"] = "1"

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = Path(os.environ.get("LODE_BENCH_SCIFACT", ROOT.parent / "shared" / "data" / "scifact"))
PG_SERVER = os.environ.get("LODE_BENCH_PG", "postgres://postgres@127.0.0.1:5432")
BACKENDS = ("sqlite", "postgres")


def percentile(values: list[float], q: float) -> float:
    """The `q`-th percentile of `values`, linearly interpolated between the closest ranks."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def recreate_pg_database(name: str) -> str:
    """Drop and create the scratch database `name`; returns its DATABASE_URL."""
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{PG_SERVER}/{name}"


def drop_pg_database(name: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_environment(db: str, pg_name: str, keep: bool = False) -> Iterator[dict[str, str]]:
    """Environment variables for a brand-new lode database on `db` ("sqlite" or "postgres").

    SQLite: a temporary LODE_DATA_DIR (the database file lives there). PostgreSQL: the scratch
    database `pg_name`, dropped and recreated, with a temporary data folder for the secret key.
    Both are removed afterwards unless `keep`.
    """
    if db not in BACKENDS:
        raise ValueError(f"unknown backend {db!r}; choose from {BACKENDS}")
    data_dir = tempfile.mkdtemp(prefix=f"lode-bench-{db}-")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "LODE_DATA_DIR")
    }
    env.update(LODE_DATA_DIR=data_dir, OPENBLAS_NUM_THREADS="1")
    if db == "postgres":
        env["DATABASE_URL"] = recreate_pg_database(pg_name)
    try:
        yield env
    finally:
        if not keep:
            if db == "postgres":
                drop_pg_database(pg_name)
            shutil.rmtree(data_dir, ignore_errors=True)


def renderer_at(revision: str) -> ModuleType:
    """notes/rendering.py as it is at git `revision`, imported as a module of its own (for
    timing an older renderer beside today's); a module whose packages are gone says so."""
    source = subprocess.run(
        ["git", "show", f"{revision}:notes/rendering.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "rendering_before.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("rendering_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        raise SystemExit(
            f"the renderer at {revision} needs packages lode no longer has: {exc}"
        ) from exc
    return module
