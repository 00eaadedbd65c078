"""How long a URL fetch takes to give up on a trickling server.

    .venv/bin/python bench/fetch_deadline.py [--deadline 20] [--interval 0.5] [--baseline 30]

A local server on 127.0.0.1 answers 200 at once, then sends one byte every `--interval`
seconds (always inside any per-read timeout). Measured, wall-clock:

* `deadline only`: `externals.fetch.fetch_url` with LODE_FETCH_TIMEOUT_SECONDS=`--deadline`
  and the minimum rate off — it must give up at about the deadline;
* `deadline + minimum rate`: the same with LODE_FETCH_MIN_BYTES_PER_SECOND=1000 (default) —
  it gives up at the end of the 5 s grace period;
* `per-read timeout (before)`: a plain httpx stream with the same timeout per read, the way
  lode once fetched, stopped by this script after `--baseline` seconds (it would
  have read on until the size cap: 5,000,000 bytes at this rate is days).

Prints one line per case and writes bench/out/fetch_deadline.json. No database is used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT

sys.path.insert(0, str(ROOT))
OUT = ROOT / "bench" / "out"


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    os.environ.setdefault("LODE_DATA_DIR", tempfile.mkdtemp(prefix="lode-bench-fetch-"))
    import django

    django.setup()


def _lode_fetch(url: str, *, deadline: int, min_rate: int) -> tuple[float, str]:
    from django.test import override_settings

    from externals.fetch import FetchError, fetch_url

    with override_settings(
        LODE_FETCH_ALLOW_PRIVATE=True,
        LODE_FETCH_TIMEOUT_SECONDS=deadline,
        LODE_FETCH_MIN_BYTES_PER_SECOND=min_rate,
    ):
        started = time.perf_counter()
        try:
            fetched = fetch_url(url)
            outcome = f"finished ({len(fetched.data)} bytes)"
        except FetchError as exc:
            outcome = f"gave up: {exc}"
        return time.perf_counter() - started, outcome


def _per_read_baseline(url: str, *, timeout: int, cap: float) -> tuple[float, str]:
    import httpx

    started = time.perf_counter()
    received = 0
    with httpx.Client(timeout=httpx.Timeout(timeout)) as client, client.stream("GET", url) as r:
        for chunk in r.iter_bytes():
            received += len(chunk)
            if time.perf_counter() - started > cap:
                return time.perf_counter() - started, (
                    f"still reading after {cap:g} s ({received} bytes); stopped by the bench"
                )
    return time.perf_counter() - started, f"finished ({received} bytes)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=int, default=20, help="LODE_FETCH_TIMEOUT_SECONDS")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between bytes")
    parser.add_argument("--baseline", type=float, default=30.0, help="cap on the old way, s")
    args = parser.parse_args()
    _setup_django()
    from tests.local_http import local_server, trickle

    results: dict[str, dict[str, object]] = {}
    with local_server() as server:
        server.routes["/drip"] = trickle(interval=args.interval)
        url = server.url("/drip")
        cases = {
            "deadline only": lambda: _lode_fetch(url, deadline=args.deadline, min_rate=0),
            "deadline + minimum rate": lambda: _lode_fetch(
                url, deadline=args.deadline, min_rate=1000
            ),
            "per-read timeout (before)": lambda: _per_read_baseline(
                url, timeout=args.deadline, cap=args.baseline
            ),
        }
        for name, run in cases.items():
            seconds, outcome = run()
            results[name] = {"seconds": round(seconds, 2), "outcome": outcome}
            print(f"{name:28} {seconds:7.2f} s  {outcome}")
    OUT.mkdir(parents=True, exist_ok=True)
    report = {"deadline_s": args.deadline, "byte_interval_s": args.interval, "cases": results}
    (OUT / "fetch_deadline.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
