"""Response size and time of search over a 1 MB note, unbounded (as lode once served it) and
bounded; and what the per-request time budget costs.

    .venv/bin/python bench/hostile_requests.py [--db sqlite|postgres|both] [--repeat 5]

For each backend, a child process with a fresh database (SQLite in a temporary data folder,
PostgreSQL in the scratch database `lode_bench_hostile`, dropped afterwards) migrates, creates
one user with one note of ~1 MB that is a single heading section (so every passage's parent
section is the whole note, the case the issue measured), and sends, through Django's test
client (the whole middleware stack, the time budget included):

* `GET /api/search/?q=otter trout&mode=lexical&limit=20` and `limit=100` **unbounded**
  (LODE_SEARCH_CONTEXT_CHARS and LODE_SEARCH_RESPONSE_MAX_CHARS set beyond the note: the
  whole parent section per hit, what lode returned before) and **bounded** (the defaults: a
  ±1,000-character window, a 200,000-character cap), and the bounded search page. Printed:
  response bytes, hits, trimmed hits, median wall time of `--repeat` requests.
* the time budget's own cost: the same bounded `limit=20` request with the budget on (the
  default 10 s) and off (0), median of `--repeat` each, interleaved; on SQLite also a
  statement that is all virtual-machine work with and without the progress handler.

Timings are wall clock on a shared machine (the load average is printed); sizes are exact.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BACKENDS, ROOT, fresh_environment

PG_NAME = "lode_bench_hostile"
QUERY = "otter trout"
SENTENCE = "The otter {i} swam past the mill and ate a trout near stone {i}. "


def big_body(target_chars: int = 1_000_000) -> str:
    """One heading section of ~1 MB of short paragraphs that all match QUERY."""
    parts, size, i = ["# River log\n\n"], 0, 0
    while size < target_chars:
        paragraph = "".join(SENTENCE.format(i=i + k) for k in range(8)) + "\n\n"
        parts.append(paragraph)
        size += len(paragraph)
        i += 8
    return "".join(parts)


def child(repeat: int) -> dict:
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import override_settings

    from notes import services

    call_command("migrate", verbosity=0)
    user = User.objects.create_user("bench", "bench@example.com", "bench-password")
    body = big_body()
    started = time.perf_counter()
    services.note_create(owner=user, title="River log", body=body)
    create_s = time.perf_counter() - started
    client = Client()
    client.force_login(user)

    def timed(path: str, params: dict) -> tuple[float, int, dict]:
        started = time.perf_counter()
        response = client.get(path, params)
        elapsed = time.perf_counter() - started
        assert response.status_code == 200, (response.status_code, response.content[:300])
        data = response.json() if path.startswith("/api/") else {}
        return elapsed, len(response.content), data

    def measure(path: str, params: dict) -> dict:
        runs = [timed(path, params) for _ in range(repeat)]
        _, size, data = runs[-1]
        return {
            "bytes": size,
            "hits": len(data.get("hits", [])),
            "trimmed_hits": data.get("trimmed_hits", 0),
            "median_s": statistics.median(r[0] for r in runs),
        }

    requests = {
        "api limit=20": ("/api/search/", {"q": QUERY, "mode": "lexical", "limit": 20}),
        "api limit=100": ("/api/search/", {"q": QUERY, "mode": "lexical", "limit": 100}),
        "search page": ("/search", {"q": QUERY, "mode": "lexical"}),
    }
    unbounded = {"LODE_SEARCH_CONTEXT_CHARS": 10**9, "LODE_SEARCH_RESPONSE_MAX_CHARS": 10**12}
    report: dict = {"note_chars": len(body), "note_create_s": create_s, "sizes": {}}
    for label, overrides in (("unbounded", unbounded), ("bounded", {})):
        with override_settings(**overrides):
            for name, (path, params) in requests.items():
                if label == "unbounded" and not path.startswith("/api/"):
                    continue  # the old page cut the section to its first 3,000 characters
                report["sizes"][f"{label} {name}"] = measure(path, params)

    # The budget's own cost: interleaved so machine load hits both alike.
    on, off = [], []
    path, params = requests["api limit=20"]
    for _ in range(repeat):
        with override_settings(LODE_REQUEST_BUDGET_SECONDS=10):
            on.append(timed(path, params)[0])
        with override_settings(LODE_REQUEST_BUDGET_SECONDS=0):
            off.append(timed(path, params)[0])
    report["budget_on_median_s"] = statistics.median(on)
    report["budget_off_median_s"] = statistics.median(off)
    report["vm_bound"] = vm_bound_statement_cost(repeat)
    report["defaults"] = {
        "LODE_SEARCH_CONTEXT_CHARS": settings.LODE_SEARCH_CONTEXT_CHARS,
        "LODE_SEARCH_RESPONSE_MAX_CHARS": settings.LODE_SEARCH_RESPONSE_MAX_CHARS,
    }
    return report


def vm_bound_statement_cost(repeat: int) -> dict | None:
    """SQLite only: a statement that is all virtual-machine work (a recursive count to one
    million), with and without the budget's progress handler, interleaved; medians in s.
    The handler's worst case: FTS5 queries spend most of their time inside C functions,
    between its calls."""
    from django.db import connection

    from lode_site.budget import time_budget

    if connection.vendor != "sqlite":
        return None
    sql = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000) "
        "SELECT count(*) FROM c"
    )
    on, off = [], []

    def run() -> float:
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(sql)
            cursor.fetchone()
        return time.perf_counter() - started

    for i in range(max(repeat, 15)):
        for with_handler in (i % 2 == 0, i % 2 == 1):  # alternate which goes first
            if with_handler:
                with time_budget(600):
                    on.append(run())
            else:
                off.append(run())
    return {
        "handler_s": statistics.median(on),
        "none_s": statistics.median(off),
        "handler_min_s": min(on),
        "none_min_s": min(off),
    }


def run_backend(db: str, repeat: int) -> dict:
    with fresh_environment(db, PG_NAME) as env:
        env.update(
            DJANGO_SETTINGS_MODULE="lode_site.settings",
            ALLOWED_HOSTS="testserver",
            LODE_TASKS_BACKEND="django.tasks.backends.dummy.DummyBackend",
        )
        done = subprocess.run(
            [sys.executable, __file__, "--child", "--repeat", str(repeat)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"{db} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=(*BACKENDS, "both"), default="both")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(ROOT))
        print(json.dumps(child(args.repeat)))
        return
    print(f"load average: {os.getloadavg()[0]:.2f}")
    for db in BACKENDS if args.db == "both" else (args.db,):
        report = run_backend(db, args.repeat)
        print(
            f"\n{db}: note {report['note_chars']:,} characters, one section "
            f"(created in {report['note_create_s']:.1f} s)"
        )
        print(f"  {'request':<26} {'bytes':>12} {'hits':>5} {'trimmed':>8} {'median s':>9}")
        for name, row in report["sizes"].items():
            hits = row["hits"] if "api" in name else "-"
            print(
                f"  {name:<26} {row['bytes']:>12,} {hits:>5} "
                f"{row['trimmed_hits']:>8} {row['median_s']:>9.3f}"
            )
        print(
            f"  time budget on / off (api limit=20, median): "
            f"{report['budget_on_median_s']:.3f} s / {report['budget_off_median_s']:.3f} s"
        )
        vm = report.get("vm_bound")
        if vm:
            print(
                f"  progress handler on a VM-bound statement (count to 1M), median (min): "
                f"{vm['handler_s']:.3f} ({vm['handler_min_s']:.3f}) s with / "
                f"{vm['none_s']:.3f} ({vm['none_min_s']:.3f}) s without"
            )


if __name__ == "__main__":
    main()
