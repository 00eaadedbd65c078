"""Benchmark: what `redact()` costs on a large note (retrieval/answer/redaction.py).

    .venv/bin/python bench/redaction_speed.py [--chars 2000000] [--runs 3]

Two texts of `--chars` characters, built from the secret corpus (tests/secret_corpus.py):
the look-alike paragraphs repeated (nothing to redact: the common case, every pass scans it
all) and the secret paragraphs repeated (a redaction every few hundred characters). For
each, the fastest of `--runs` calls of `redact`, and of the one alternation of the rules
ported from gitleaks alone. Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")

import django

django.setup()

from retrieval.answer import redaction  # noqa: E402
from tests.secret_corpus import LOOK_ALIKES, SECRETS  # noqa: E402


def fastest(call, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


def repeated(paragraphs: list[str], chars: int) -> str:
    block = "\n\n".join(paragraphs) + "\n\n"
    return (block * (chars // len(block) + 1))[:chars]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    redaction.redact("warm up: detect-secrets loads its plugins once")
    texts = {
        "look-alikes": repeated([text for _, text in LOOK_ALIKES], args.chars),
        "secrets": repeated(
            [case.text for case in SECRETS if case.id != "pem-cut-open"], args.chars
        ),
    }
    print(f"redact() on {args.chars:,} characters, fastest of {args.runs}")
    for name, text in texts.items():
        whole = fastest(lambda text=text: redaction.redact(text), args.runs)
        ported = fastest(lambda text=text: redaction._GITLEAKS.sub("", text), args.runs)
        count = redaction.redact(text)[1]
        print(
            f"  {name:12} redact {whole:6.2f} s ({count:,} redactions); "
            f"gitleaks rules' one pass {ported:5.2f} s"
        )


if __name__ == "__main__":
    main()
