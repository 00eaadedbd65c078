"""CPU time of the API's nesting-depth scan (`lode_site.api_bodies.json_depth`) on 5 MB
bodies, the largest request Django reads by default (LODE_MAX_REQUEST_BYTES):

    .venv/bin/python bench/json_depth.py [--runs 5]

Printed per body: the depth found and the CPU time (`time.process_time`) over `--runs`
runs, min / median / max, beside `json.loads` of the same body where it parses. The scan
runs only for bodies with more than 64 brackets (`parse_json_body`), after authentication.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")

import django

django.setup()

from lode_site.api_bodies import json_depth  # noqa: E402

SIZE = 5_000_000
BODIES = {
    "all openers [[[…": b"[" * SIZE,
    "[] pairs, depth 1": b"[]" * (SIZE // 2),
    "one string of [": b'"' + b"[" * (SIZE - 2) + b'"',
    "one string of escaped quotes": b'"' + b'\\"' * ((SIZE - 2) // 2) + b'"',
    "a flat array of numbers": b"[" + b",".join([b"12345"] * (SIZE // 6)) + b"]",
}


def cpu_ms(function, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.process_time()
        function()
        times.append(1000 * (time.process_time() - start))
    return times


def summary(times: list[float]) -> str:
    return f"{min(times):.0f} / {statistics.median(times):.0f} / {max(times):.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for name, body in BODIES.items():
        depth = json_depth(body)
        scan = summary(cpu_ms(lambda body=body: json_depth(body), args.runs))
        try:
            json.loads(body)
        except (ValueError, RecursionError) as exc:
            loads = f"does not parse ({type(exc).__name__})"
        else:
            loads = summary(cpu_ms(lambda body=body: json.loads(body), args.runs))
        print(f"{name}: depth {depth}; scan {scan}; json.loads {loads}")


if __name__ == "__main__":
    main()
