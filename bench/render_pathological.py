"""CPU time of the first view of pathological notes: cutting into parts + rendering one part.

    .venv/bin/python bench/render_pathological.py [--runs 5] [--bodies A,B] [--before REV]

Each body below (at most 2 MB, the largest note lode accepts) is what a note's first page
view costs when nothing is cached: `split_parts` over the whole body, then `rendering_of`
part 1 (the parse, the structure bounds, the HTML and the sanitiser). Printed per body: its
size and number of parts; the CPU time (`time.process_time`) of that first view over
`--runs` runs, min / median / max; the slowest single part of the note rendered once each
(the first view of a later part, "Show more"); and whether part 1 fell back to its escaped
text, and why, and how many parts did. No database, no cache: the renderer alone.

`--before REV` also times `notes/rendering.py` as it is at git revision REV (split and part
1, once), for comparison. Writes bench/out/render_pathological.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

from _common import ROOT, renderer_at

OUT = ROOT / "bench" / "out"
MAX_BYTES = 2_000_000


def _fill(unit: Callable[[int], str], limit: int = MAX_BYTES) -> str:
    """`unit(0) + unit(1) + …` up to `limit` characters."""
    pieces, size, index = [], 0, 0
    while True:
        piece = unit(index)
        if size + len(piece) > limit:
            return "".join(pieces)
        pieces.append(piece)
        size += len(piece)
        index += 1


def _table_row(index: int) -> str:
    return f"| cell {index} | [link](https://example.com/{index}) | more text |\n"


def bodies() -> dict[str, str]:
    """The pathological bodies, by name."""
    return {
        "list nested 900 (815 KB)": "".join("  " * i + "- item\n" for i in range(900)),
        "list nested to 2 MB": _fill(lambda i: "  " * i + "- item\n"),
        "quotes nested 2M deep": ">" * (MAX_BYTES - 3) + " x\n",
        "quotes one deeper a line": _fill(lambda i: ">" * i + " x\n"),
        "lists in quotes nested": "> - " * (MAX_BYTES // 4 - 1) + "x\n",
        "emphasis nested 1M": "*" * (MAX_BYTES // 2 - 1) + "x" + "*" * (MAX_BYTES // 2 - 1),
        "brackets nested": "[" * (MAX_BYTES // 2) + "x" + "](u)" * (MAX_BYTES // 8 - 1),
        "links": _fill(lambda i: f"[link {i}](https://example.org/{i}) "),
        "bare URLs": _fill(lambda i: f"https://example.org/{i} "),
        "bare domains": "a.co " * (MAX_BYTES // 5),
        "remote images": _fill(lambda i: f"![pixel {i}](https://tracker.example/{i}.png) "),
        "footnotes": _fill(lambda i: f"Claim {i}.[^{i}]\n\n[^{i}]: Source {i}.\n\n"),
        "inline footnotes": _fill(lambda i: f"x^[note {i}] "),
        "table 2 MB": "| a | b | c |\n|---|---|---|\n" + _fill(_table_row, MAX_BYTES - 40),
        "table one line 2 MB": "|x" * (MAX_BYTES // 2),
        "table bomb": "\n".join(["|a" * 181 + "|\n" + "|-" * 181 + "|\n" + "a\n" * 362] * 13),
        "headings": "#\n" * (MAX_BYTES // 2),
        "headings with text": _fill(lambda i: f"## Heading {i}\n"),
        "list items": "- a\n" * (MAX_BYTES // 4),
        "task items": "- [ ] a\n" * (MAX_BYTES // 8),
        "long line of words": "word " * (MAX_BYTES // 5),
        "one 2 MB word": "x" * MAX_BYTES,
        "long indented lines": _fill(lambda i: " " * 4000 + "- |-|\n"),
    }


def _setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    os.environ.setdefault("LODE_DATA_DIR", tempfile.mkdtemp(prefix="lode-render-bench-"))
    import django

    django.setup()


def _cpu(work: Callable[[], object]) -> tuple[float, object]:
    started = time.process_time()
    result = work()
    return time.process_time() - started, result


def measure(name: str, body: str, runs: int, before) -> dict:
    from notes.rendering import rendering_of, split_parts

    def first_view():
        parts = split_parts(body)
        return parts, rendering_of(parts[0].source(body))

    times, parts, first = [], None, None
    for _ in range(runs):
        seconds, (parts, first) = _cpu(first_view)
        times.append(seconds)
    worst, worst_number, as_text = 0.0, 1, 0
    for number, part in enumerate(parts, start=1):
        seconds, rendered = _cpu(lambda part=part: rendering_of(part.source(body)))
        as_text += rendered.shown_as_text is not None
        if seconds > worst:
            worst, worst_number = seconds, number
    row = {
        "body": name,
        "kb": round(len(body.encode()) / 1000),
        "parts": len(parts),
        "first_min_ms": round(min(times) * 1000, 1),
        "first_median_ms": round(statistics.median(times) * 1000, 1),
        "first_max_ms": round(max(times) * 1000, 1),
        "worst_part_ms": round(worst * 1000, 1),
        "worst_part": worst_number,
        "part1_as_text": first.shown_as_text,
        "parts_as_text": as_text,
    }
    if before is not None:
        seconds, _ = _cpu(lambda: before.render_markdown(before.split_parts(body)[0].source(body)))
        row["before_ms"] = round(seconds * 1000, 1)
    return row


def _reason(text: str | None) -> str:
    if text is None:
        return "no"
    for word in ("nested", "links", "footnotes", "headings", "pieces", "HTML"):
        if word in text:
            return f"yes ({word})"
    return "yes"


def format_row(row: dict) -> str:
    line = (
        f"{row['body']:<30} {row['kb']:>5} KB {row['parts']:>4} parts | first view CPU "
        f"{row['first_min_ms']:>6.1f} / {row['first_median_ms']:>6.1f} / "
        f"{row['first_max_ms']:>6.1f} ms | slowest part {row['worst_part_ms']:>6.1f} ms "
        f"(#{row['worst_part']}) | part 1 as text: {_reason(row['part1_as_text'])}, "
        f"parts as text {row['parts_as_text']}"
    )
    if "before_ms" in row:
        line += f" | before {row['before_ms']:>8.1f} ms"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="first views timed per body")
    parser.add_argument("--bodies", default="", help="comma-separated names (default all)")
    parser.add_argument("--before", default="", help="also time notes/rendering.py at REV")
    args = parser.parse_args()
    _setup()
    everything = bodies()
    names = [name.strip() for name in args.bodies.split(",") if name.strip()] or list(everything)
    unknown = set(names) - set(everything)
    if unknown:
        raise SystemExit(f"unknown bodies {sorted(unknown)}; choose from {list(everything)}")
    before = renderer_at(args.before) if args.before else None
    # Warm up: the first parse pays for lazily built regexes and linkify's tables.
    from notes.rendering import rendering_of

    rendering_of("*warm* https://example.org [^1]\n\n[^1]: x\n\n| a | b |\n|-|-|\n| 1 | 2 |\n")
    print("first view = split_parts(whole body) + rendering_of(part 1); min / median / max")
    rows = []
    for name in names:
        row = measure(name, everything[name], args.runs, before)
        rows.append(row)
        print(format_row(row), flush=True)
    worst = max(rows, key=lambda row: max(row["first_max_ms"], row["worst_part_ms"]))
    print(
        f"slowest: {worst['body']}, first view {worst['first_max_ms']:.1f} ms, "
        f"slowest part {worst['worst_part_ms']:.1f} ms CPU"
    )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "render_pathological.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
