"""Highlight segments: a passage as an ordered list of (text, highlighted) pieces.

Invariant 2 (DESIGN.md): the segments concatenate to exactly the passage text, markers
never collide with passage text, and passage text is always escaped (templates render
each segment's text with auto-escaping, highlighted ones inside <mark>).

Engines (FTS5 `highlight()`, PostgreSQL `ts_headline`) wrap matches in caller-chosen
markers. `collision_free_markers` picks markers absent from the passage, `parse_marked`
reads the engine's output strictly (nested start, unmatched end, unclosed span, empty span
→ rejected) and `segments_or_plain` falls back to one plain segment, logging why, whenever
a check fails — including when the pieces do not add up to the stored text.

Offsets are Unicode code points; `utf16_offsets` gives the same spans in UTF-16 code units
for browsers. (Issue 4: not yet wired into the search page and API.)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

logger = logging.getLogger("lode.highlight")


class MarkupError(ValueError):
    """The engine's marked-up text is not a well-formed highlighting of the passage."""


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    highlighted: bool


def collision_free_markers(passage: str) -> tuple[str, str]:
    """Start and end markers that occur nowhere in `passage` (private-use characters around
    a counter; the absence check is what makes them safe, since private-use characters are
    valid text too)."""
    suffix = 0
    while True:
        start = f"\ue000LODE-{suffix:x}-START\ue001"
        end = f"\ue000LODE-{suffix:x}-END\ue001"
        if start not in passage and end not in passage:
            return start, end
        suffix += 1


def parse_marked(marked: str, start: str, end: str) -> list[Segment]:
    """Split engine output into segments; raises MarkupError on any malformation."""
    segments: list[Segment] = []
    position = 0
    inside = False
    while position < len(marked):
        next_start = marked.find(start, position)
        next_end = marked.find(end, position)
        if not inside:
            if next_end != -1 and (next_start == -1 or next_end < next_start):
                raise MarkupError("end marker without a start")
            if next_start == -1:
                segments.append(Segment(marked[position:], False))
                break
            if next_start > position:
                segments.append(Segment(marked[position:next_start], False))
            position = next_start + len(start)
            inside = True
        else:
            if next_start != -1 and (next_end == -1 or next_start < next_end):
                raise MarkupError("nested start marker")
            if next_end == -1:
                raise MarkupError("unclosed highlight")
            if next_end == position:
                raise MarkupError("empty highlight")
            segments.append(Segment(marked[position:next_end], True))
            position = next_end + len(end)
            inside = False
    if inside:
        raise MarkupError("unclosed highlight")
    return segments


def segments_or_plain(passage: str, marked: str, start: str, end: str) -> list[Segment]:
    """Parsed segments when they are well formed and add up to `passage` exactly; otherwise
    one unhighlighted segment (the reason is logged)."""
    try:
        segments = parse_marked(marked, start, end)
        if "".join(s.text for s in segments) != passage:
            raise MarkupError("segments do not concatenate to the passage text")
    except MarkupError as exc:
        logger.warning("highlight fallback: %s", exc)
        return [Segment(passage, False)] if passage else []
    return segments


def spans(segments: list[Segment]) -> list[tuple[int, int]]:
    """(start, end) of each highlighted segment, in Unicode code points."""
    found = []
    position = 0
    for segment in segments:
        if segment.highlighted:
            found.append((position, position + len(segment.text)))
        position += len(segment.text)
    return found


def utf16_offsets(text: str, code_point_spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The same spans in UTF-16 code units (what JavaScript string indexes count)."""

    def units(prefix: str) -> int:
        return len(prefix.encode("utf-16-le")) // 2

    return [(units(text[:a]), units(text[:b])) for a, b in code_point_spans]
