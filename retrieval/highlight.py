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
for browsers, and `highlights` carries both for each highlighted span.

Hits the lexical engine did not match (semantic-only hits, or the lexical leg did not run)
get `term_segments`: the query's terms found in Python with the index's tokenizer rules.
`evidence_anchor` is the first-to-last highlighted range and its line range
(seeds/loom-chain-of-custody.md, "Name the coordinate system before calculating offsets").

Bounded cost: FTS5 `highlight()` rebuilds its output string on every append, so
its time grows with the square of the matches in one passage (40,000 matches: ~1.6 s), and
`ts_headline` is no better. So the engines only ever see passages of at most
`HIGHLIGHT_MAX_CHARS` characters (the chunker's `LODE_CHUNK_MAX_CHARS` keeps new passages
well under it; longer ones predate it): a longer passage gets `highlight_terms`, the
Python highlighter over its first `HIGHLIGHT_MAX_CHARS` characters, the rest plain. And
no passage shows more than `HIGHLIGHT_MAX_MARKS` highlighted segments (`cap_marks`: later
matches are merged back into plain text). Either cut is reported (`truncated`), and the
segments still concatenate to exactly the passage text.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from retrieval.text.stemming import fold
from retrieval.text.tokens import LINE_BREAK_RE, TOKEN_RE

logger = logging.getLogger("lode.highlight")

# The longest passage text a highlighter reads (engine or Python), in code points. Twice the
# default character bound of a passage, so every passage chunked under the defaults goes to
# the engine; FTS5 highlight() on 4,000 characters of one-letter matches takes ~5 ms.
HIGHLIGHT_MAX_CHARS = 4000
# The most highlighted segments one passage shows; later matches stay plain text.
HIGHLIGHT_MAX_MARKS = 100


class MarkupError(ValueError):
    """The engine's marked-up text is not a well-formed highlighting of the passage."""


@dataclass(frozen=True, slots=True)
class Segment:
    """One piece of highlighted text: the shape every page renders highlights from
    (templates/partials.html#segments)."""

    text: str
    highlighted: bool


def as_segments(
    pieces: Iterable[Segment | tuple[str, bool] | Mapping[str, object]],
) -> list[Segment]:
    """Segments from the shapes stored answers keep them in — `(text, highlighted)` pairs
    (ShownSupport) and `{"text", "highlighted"}` dicts (JSON) — so a page converts once, at
    its boundary, and its template renders one shape."""
    out: list[Segment] = []
    for piece in pieces:
        if isinstance(piece, Segment):
            out.append(piece)
        elif isinstance(piece, Mapping):
            out.append(Segment(str(piece["text"]), bool(piece["highlighted"])))
        else:
            text, highlighted = piece
            out.append(Segment(text, bool(highlighted)))
    return out


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
    """The same spans in UTF-16 code units (what JavaScript string indexes count).

    Counted incrementally from the previous offset, so spans in order cost one pass over
    the text rather than one pass per span."""
    position = units = 0

    def units_at(offset: int) -> int:
        nonlocal position, units
        if offset < position:  # out of order: count again from the start
            position = units = 0
        units += len(text[position:offset].encode("utf-16-le")) // 2
        position = offset
        return units

    return [(units_at(a), units_at(b)) for a, b in code_point_spans]


def cap_marks(
    segments: list[Segment], max_marks: int = HIGHLIGHT_MAX_MARKS
) -> tuple[list[Segment], bool]:
    """At most `max_marks` highlighted segments: every later one becomes plain text, merged
    with its plain neighbours. Returns the segments and whether any mark was dropped; the
    concatenated text is unchanged."""
    marks = 0
    for index, segment in enumerate(segments):
        if segment.highlighted:
            marks += 1
            if marks > max_marks:
                rest = "".join(s.text for s in segments[index:])
                kept = segments[:index]
                if kept and not kept[-1].highlighted:
                    kept[-1:] = [Segment(kept[-1].text + rest, False)]
                else:
                    kept.append(Segment(rest, False))
                return kept, True
    return segments, False


@dataclass(frozen=True, slots=True)
class Highlight:
    """One highlighted span of the passage text: `start`/`end` in Unicode code points,
    `start_utf16`/`end_utf16` in UTF-16 code units (JavaScript string indexes)."""

    start: int
    end: int
    start_utf16: int
    end_utf16: int


def highlights(text: str, segments: list[Segment]) -> list[Highlight]:
    """Every highlighted span of `segments` (which must concatenate to `text`) in both units."""
    code_points = spans(segments)
    return [
        Highlight(a, b, a16, b16)
        for (a, b), (a16, b16) in zip(code_points, utf16_offsets(text, code_points), strict=True)
    ]


ANCHOR_NOTE = "may contain unmatched text between hits"


@dataclass(frozen=True, slots=True)
class Anchor:
    """The evidence anchor: from the first highlighted character to the end of the last.

    The range is a bounding span, not a claim that every character in it matched: text
    between two hits lies inside it too (ANCHOR_NOTE). Offsets are Unicode code points;
    `start`/`end` are relative to the passage text, `body_start`/`body_end` to the version
    body. Lines are 1-based and inclusive, counted as chunking counts them.
    """

    start: int
    end: int
    body_start: int
    body_end: int
    start_line: int
    end_line: int


def evidence_anchor(
    segments: list[Segment], *, text: str, passage_start: int, passage_start_line: int
) -> Anchor | None:
    """The first-to-last highlight range of a passage, or None when nothing is highlighted.

    `text` is the passage text (`version.body[passage_start:...]`) and `passage_start_line`
    the body line it starts on; line numbers come from the line breaks before each end.
    """
    found = spans(segments)
    if not found:
        return None
    start, end = found[0][0], found[-1][1]

    def line_of(offset: int) -> int:
        # A break counts once it ends at or before `offset` (so "\r\n" is one break).
        breaks = sum(1 for m in LINE_BREAK_RE.finditer(text, 0, offset + 1) if m.end() <= offset)
        return passage_start_line + breaks

    return Anchor(
        start=start,
        end=end,
        body_start=passage_start + start,
        body_end=passage_start + end,
        start_line=line_of(start),
        end_line=line_of(end - 1),
    )


# ---------------------------------------------------------------------------------------
# Term highlights computed in Python, for hits the lexical engine did not match.
# ---------------------------------------------------------------------------------------


def contains_group(text: str, group: Sequence[str]) -> bool:
    """Whether `text` holds the query token group `group` (one token, or a phrase as adjacent
    tokens) under the same folding rules as `term_segments` — how the dense leg's candidates
    are held to a query's required phrases and exclusions."""
    return any(segment.highlighted for segment in term_segments(text, [group]))


def highlight_terms(
    text: str,
    groups: Iterable[Sequence[str]],
    *,
    max_chars: int = HIGHLIGHT_MAX_CHARS,
    max_marks: int = HIGHLIGHT_MAX_MARKS,
) -> tuple[list[Segment], bool]:
    """`term_segments` with bounded cost: only the first `max_chars` characters are searched
    (cut back to a token boundary when one is near), the rest of `text` follows as one plain
    segment, and at most `max_marks` segments are highlighted. Returns the segments (which
    concatenate to `text`) and whether either bound cut something off."""
    truncated = False
    window = len(text)
    if window > max_chars:
        truncated = True
        window = max_chars
        # Do not cut a token in two: "deploying" cut to "deploy" would match "deploy".
        floor = max(0, window - 64)
        while window > floor and _is_token_char(text[window - 1]) and _is_token_char(text[window]):
            window -= 1
        if window == floor:
            window = max_chars
    segments = term_segments(text[:window], groups)
    segments, capped = cap_marks(segments, max_marks)
    if window < len(text):
        tail = text[window:]
        if segments and not segments[-1].highlighted:
            segments[-1] = Segment(segments[-1].text + tail, False)
        else:
            segments.append(Segment(tail, False))
    return segments, truncated or capped


def _is_token_char(char: str) -> bool:
    """Whether `char` can be part of a token as TOKEN_RE reads them."""
    return TOKEN_RE.fullmatch(char) is not None or unicodedata.combining(char) != 0


def term_segments(text: str, groups: Iterable[Sequence[str]]) -> list[Segment]:
    """Highlight every occurrence of the query's term groups in `text`, in Python.

    `groups` are the parsed query's terms and phrases (`ParsedQuery.terms + phrases`, never
    the exclusions): one token matches that token anywhere; several must appear as adjacent
    tokens and are highlighted as one span from the first to the last, as FTS5 highlights a
    phrase. Overlapping spans merge. The result concatenates to `text` by construction.
    """
    wanted = [tuple(fold(t) for t in group) for group in groups if group]
    wanted = [g for g in wanted if all(g)]
    if not text or not wanted:
        return [Segment(text, False)] if text else []
    return _split_at(text, _merge_spans(_group_spans(text, wanted)))


def _group_spans(text: str, wanted: list[tuple[str, ...]]) -> list[tuple[int, int]]:
    """(start, end) of every occurrence in `text` of each folded token group, in order."""
    words = [(m.start(), m.end()) for m in TOKEN_RE.finditer(text)]
    stems = [fold(text[a:b]) for a, b in words]
    where: dict[str, list[int]] = {}
    for i, stem in enumerate(stems):
        where.setdefault(stem, []).append(i)
    found: list[tuple[int, int]] = []
    for group in wanted:
        size = len(group)
        for i in where.get(group[0], ()):
            if size == 1 or tuple(stems[i : i + size]) == group:
                found.append((words[i][0], words[i + size - 1][1]))
    found.sort()
    return found


def _merge_spans(ordered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans with every overlapping or touching pair merged into one."""
    merged: list[list[int]] = []
    for start, end in ordered:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def _split_at(text: str, highlighted: list[tuple[int, int]]) -> list[Segment]:
    """`text` as segments: the disjoint, ordered `highlighted` spans and the plain text
    around them."""
    segments: list[Segment] = []
    position = 0
    for start, end in highlighted:
        if start > position:
            segments.append(Segment(text[position:start], False))
        segments.append(Segment(text[start:end], True))
        position = end
    if position < len(text):
        segments.append(Segment(text[position:], False))
    return segments
