"""Chunking time and passage sizes for hostile note bodies.

    .venv/bin/python bench/chunk_hostile.py [--repeat 3]

Runs `retrieval.index.chunking.chunk_markdown` with its module defaults (the same bounds as the
settings' defaults) on bodies lode accepts (`LODE_MAX_NOTE_BYTES` is 2,000,000) but that a
words-only bound cannot cut:

* `table line`: `"|x" * 900000`, one 1.8 MB Markdown table-ish line without whitespace;
* `single word`: one 2,000,000-character "word";
* `table 320 KB`: a real Markdown table (header, delimiter row, ~10,000 rows);
* `code block`: a 2 MB fenced code block of short lines;
* `prose 2 MB`: ordinary sentences, the control (split by words, not by characters).

For each: the body's size, the number of passages, the longest passage in characters and
the best of `--repeat` wall-clock times (no database; one process). Also checks
`body[start:end] == text` for every passage. Writes bench/out/chunk_hostile.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from retrieval.index.chunking import chunk_markdown  # noqa: E402

OUT = ROOT / "bench" / "out"


def bodies() -> dict[str, str]:
    """The hostile inputs, by name."""
    row = "| cell 12 | some text here | 12345 | https://example.org/x |\n"
    table = "| a | b | c | d |\n|---|---|---|---|\n" + row * (320_000 // len(row))
    code = "```python\n" + "value = compute(1, 2)\n" * (2_000_000 // 22) + "```\n"
    sentence = "The quick brown fox jumps over the lazy dog near the river bank. "
    prose = sentence * (2_000_000 // len(sentence))
    return {
        "table line": "|x" * 900_000,
        "single word": "a" * 2_000_000,
        "table 320 KB": table,
        "code block": code,
        "prose 2 MB": prose,
    }


def measure(body: str, repeat: int) -> dict[str, object]:
    best = float("inf")
    chunks = []
    for _ in range(repeat):
        started = time.perf_counter()
        chunks = chunk_markdown(body)
        best = min(best, time.perf_counter() - started)
    exact = all(body[c.start : c.end] == c.text for c in chunks)
    return {
        "chars": len(body),
        "passages": len(chunks),
        "longest_passage_chars": max((len(c.text) for c in chunks), default=0),
        "seconds": round(best, 3),
        "exact": exact,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = {name: measure(body, args.repeat) for name, body in bodies().items()}
    print(f"chunk_markdown with default bounds (best of {args.repeat}; wall clock)")
    print(f"{'body':<13} {'chars':>9} {'passages':>8} {'longest':>9} {'seconds':>8} exact")
    for name, r in results.items():
        print(
            f"{name:<13} {r['chars']:>9} {r['passages']:>8} {r['longest_passage_chars']:>9} "
            f"{r['seconds']:>8.3f} {r['exact']}"
        )
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "chunk_hostile.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
