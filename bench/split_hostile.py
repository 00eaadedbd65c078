"""Benchmark: `retrieval.text.split_sentences` on hostile ~1 MB bodies.

    .venv/bin/python bench/split_hostile.py

The extractive answerer cuts evidence into quotable units with this splitter; a regex that
backtracks or a loop that rescans would make one saved note cost minutes. Prints the seconds
per body shape (each ~1 MB, `HOSTILE_BODIES` of tests/factories.py) and a scaling check: 4x
the lines should cost about 4x the time (a quadratic splitter would be 16x).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")

import django  # noqa: E402

django.setup()  # the test factories import the models

from tests.factories import HOSTILE_BODIES  # noqa: E402


def seconds(body: str) -> float:
    from retrieval.text.sentences import split_sentences

    started = time.perf_counter()
    split_sentences(body)
    return time.perf_counter() - started


def main() -> None:
    import django

    django.setup()
    for name, body in sorted(HOSTILE_BODIES.items()):
        print(f"{name:<15} {len(body):>9,} chars  {seconds(body):7.3f} s")
    for lines in (5_000, 20_000):
        body = "Phone: 1\n" * lines + "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * lines
        best = min(seconds(body) for _ in range(2))
        print(f"{lines:>6,} lines + {lines:,} table rows  {best:7.3f} s")


if __name__ == "__main__":
    main()
