"""Deterministic, model-free markdown chunking.

A note body is cut into *passages*, the unit that gets indexed for search. The chunker works in
three stages:

1. **Blocks.** markdown-it-py finds the top-level block structure (headings, paragraphs, list
   items, code, tables, quotes, HTML, thematic breaks). Each block's ``.map`` line range is
   translated into a code-point range of the original body and trimmed of edge whitespace. Lines
   markdown-it maps to no block (link reference definitions, for instance) become ``"other"``
   blocks, so every non-whitespace character of the body belongs to some block.
2. **Sections.** Every top-level heading opens a new section, which runs up to the next heading.
   The section is the "parent" used for small-to-big retrieval, and passages never span two
   sections.
3. **Passages.** Consecutive blocks of a section are packed greedily while the total stays
   within ``max_words`` words and ``max_chars`` characters. A heading always travels with the
   first passage of its section. A group with too many words is cut into balanced, overlapping
   word windows whose cuts snap to sentence ends; any passage still longer than ``max_chars`` (a
   long table line, code block or a single giant "word") is then cut by characters
   (``_char_windows``).

Offsets are Python ``str`` indices (Unicode code points) into the *original* body, so
``body[chunk.start:chunk.end] == chunk.text`` always holds, even for CRLF line endings, NUL
characters or astral-plane emoji (a code point is never split, so neither is what UTF-16 would
store as a surrogate pair).

Guarantees, for every passage:

* words: at most ``max_words + overlap``, where
  ``overlap = min(overlap_words, max_words // 2)``;
* characters: at most ``max_chars`` code points. Only a passage that must be cut by characters
  can split a word, and only when its span holds neither whitespace nor punctuation (a hard
  cut);
* the text neither starts nor ends with whitespace, and together the passages cover every
  non-whitespace character of the body.

The work is linear in the body's length (a 2 MB body of any shape chunks in well under a second;
``bench/chunk_hostile.py``).
"""

from __future__ import annotations

import math
import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from retrieval.text.sentences import SENTENCE_END_WORD_RE
from retrieval.text.tokens import LINE_BREAK_RE, SPACED_WORD_RE, WHITESPACE_RE

DEFAULT_MAX_WORDS = 200
DEFAULT_OVERLAP_WORDS = 20
# The character bound. 200 (+20 overlap) words of prose are ~1,100-1,700 characters
# (SciFact abstracts chunked at 200 words: median 989, longest 1,708), so 2,000 never
# splits ordinary prose, while one line of a table, a minified file or a giant "word"
# cannot become a megabyte-long passage.
DEFAULT_MAX_CHARS = 2000

# Only the block structure is needed, so the (comparatively slow) inline pass
# is switched off: it roughly halves parse time on abstract-sized bodies.
# Built once at import time because constructing a MarkdownIt is not free.
_BLOCK_MD = MarkdownIt("commonmark").enable("table").disable("inline")
# A full parser, used only to strip inline markup from heading texts.
_INLINE_MD = MarkdownIt("commonmark")

# Line breaks (retrieval.text.LINE_BREAK_RE) are exactly the three sequences markdown-it
# normalises to "\n" before counting lines, so our line numbers match its token maps. Word
# spans (retrieval.text.SPACED_WORD_RE) match word_count() exactly, and a window snaps to
# a word ending a sentence (retrieval.text.SENTENCE_END_WORD_RE).

# Characters that can start inline markup; headings without them skip the
# inline parse entirely.
_INLINE_MARKUP_RE = re.compile(r"[*_`\[\]<>&\\!]")
# Where a passage too long in characters may be cut: in a whitespace run
# (retrieval.text.WHITESPACE_RE), else before a punctuation/symbol character
# (anything neither a word character nor whitespace), so words stay whole
# whenever the span allows it.
_PUNCTUATION_RE = re.compile(r"[^\w\s]")
# How far a hard cut may step back to avoid separating a character from a
# following combining mark or zero-width joiner.
_HARD_CUT_SLACK = 16
_ZWJ = "\u200d"

# Block token type -> block_kind. Anything unlisted (e.g. "hr") is "other".
_KIND_BY_TOKEN = {
    "paragraph_open": "paragraph",
    "heading_open": "heading",
    "list_item_open": "list_item",
    "fence": "code",
    "code_block": "code",
    "table_open": "table",
    "blockquote_open": "quote",
    "html_block": "html",
}
_LIST_OPENERS = frozenset({"bullet_list_open", "ordered_list_open"})


@dataclass(frozen=True, slots=True)
class Chunk:
    """One passage of a note body.

    ``text == body[start:end]``; offsets are code points, lines are 1-based
    and counted on ``\\r\\n``, ``\\r`` and ``\\n``. ``[parent_start,
    parent_end)`` is the whitespace-trimmed heading section containing the
    passage, for small-to-big context expansion.
    """

    position: int
    block_kind: str
    heading_path: tuple[str, ...]
    start: int
    end: int
    start_line: int
    end_line: int
    parent_start: int
    parent_end: int
    text: str


@dataclass(slots=True)
class _Block:
    kind: str
    start: int
    end: int
    words: int
    heading_level: int = 0
    heading_text: str = ""


def word_count(text: str) -> int:
    """Return the number of whitespace-separated tokens in ``text``."""
    return len(text.split())


def chunk_markdown(
    body: str,
    *,
    max_words: int = DEFAULT_MAX_WORDS,
    overlap_words: int = DEFAULT_OVERLAP_WORDS,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> list[Chunk]:
    """Split a markdown ``body`` into passages of at most about ``max_words`` words
    and at most ``max_chars`` characters (code points).

    Blocks of one heading section are packed greedily; groups with too many words
    are split into ``ceil(words / max_words)`` balanced windows that overlap by
    ``overlap_words`` words (capped at ``max_words // 2`` so that consecutive
    windows are never mostly duplicates), and anything still longer than
    ``max_chars`` is cut into consecutive pieces at whitespace, punctuation, or
    hard. Returns ``[]`` for blank bodies. The result is a pure function of the
    arguments.
    """
    if max_words < 1:
        raise ValueError("max_words must be at least 1")
    if overlap_words < 0:
        raise ValueError("overlap_words must not be negative")
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    if not body or body.isspace():
        return []
    overlap = min(overlap_words, max_words // 2)

    line_starts, line_ends = _line_bounds(body)
    blocks = _blocks(body, line_starts, line_ends)

    chunks: list[Chunk] = []
    heading_stack: list[tuple[int, str]] = []
    for section in _sections(blocks):
        first = section[0]
        if first.kind == "heading":
            # Close every heading at the same or a deeper level, then open this one.
            while heading_stack and heading_stack[-1][0] >= first.heading_level:
                heading_stack.pop()
            heading_stack.append((first.heading_level, first.heading_text))
        path = tuple(text for _, text in heading_stack)
        parent_start, parent_end = first.start, section[-1].end
        for kind, start, end in _pack(body, section, max_words, overlap, max_chars):
            chunks.append(
                Chunk(
                    position=len(chunks),
                    block_kind=kind,
                    heading_path=path,
                    start=start,
                    end=end,
                    # line_starts[0] == 0, so bisect_right yields a 1-based line.
                    start_line=bisect_right(line_starts, start),
                    end_line=bisect_right(line_starts, end - 1),
                    parent_start=parent_start,
                    parent_end=parent_end,
                    text=body[start:end],
                )
            )
    return chunks


def _line_bounds(body: str) -> tuple[list[int], list[int]]:
    """Return the start offset and end offset (before the break) of every line."""
    starts = [0]
    ends: list[int] = []
    for match in LINE_BREAK_RE.finditer(body):
        ends.append(match.start())
        starts.append(match.end())
    ends.append(len(body))
    return starts, ends


def _trim(body: str, start: int, end: int) -> tuple[int, int]:
    """Shrink ``[start, end)`` so it neither starts nor ends with whitespace."""
    segment = body[start:end]
    stripped = segment.strip()
    if not stripped:
        return start, start
    lead = len(segment) - len(segment.lstrip())
    return start + lead, start + lead + len(stripped)


def _block_span(index: int, token: Token) -> tuple[int, int, str, int] | None:
    """``(first_line, end_line, kind, index)`` when ``token`` opens a block kept whole, else
    None. Top-level blocks are kept, except that a top-level list is replaced by its items."""
    if token.map is None or token.nesting == -1:
        return None
    if token.level == 0 and token.type not in _LIST_OPENERS:
        kind = _KIND_BY_TOKEN.get(token.type, "other")
    elif token.level == 1 and token.type == "list_item_open":
        # Items of a top-level list; nested lists stay inside their item.
        kind = "list_item"
    else:
        return None
    return token.map[0], token.map[1], kind, index


def _blocks(body: str, line_starts: list[int], line_ends: list[int]) -> list[_Block]:
    """Find the body's blocks in order, each trimmed, covering all non-blank text."""
    n_lines = len(line_starts)
    tokens = _BLOCK_MD.parse(body)
    blocks: list[_Block] = []

    def add(first: int, last: int, kind: str, token_index: int = -1) -> None:
        start, end = _trim(body, line_starts[first], line_ends[last - 1])
        if start == end:
            return
        block = _Block(kind, start, end, word_count(body[start:end]))
        if kind == "heading":
            block.heading_level = int(tokens[token_index].tag[1:])
            block.heading_text = _heading_text(tokens[token_index + 1])
        blocks.append(block)

    # Walk the spans line by line: anything between them is an "other" block,
    # and overlapping maps (not expected, but cheap to guard) are clipped so
    # that blocks stay disjoint and in order.
    covered = 0
    spans = [span for index, token in enumerate(tokens) if (span := _block_span(index, token))]
    spans.sort(key=lambda span: span[0])  # already in order; cheap insurance
    for first, end_line, kind, index in spans:
        end_line = min(end_line, n_lines)
        if first > covered:
            add(covered, first, "other")
        first = max(first, covered)
        if first >= end_line:
            continue
        add(first, end_line, kind, index)
        covered = end_line
    if covered < n_lines:
        add(covered, n_lines, "other")
    return blocks


# A heading path travels with every passage of its section (and every search hit), so each
# heading in it is cut to this many characters: a 1 MB heading line must not make every hit
# of its section carry a megabyte. The heading's text itself stays in its passage.
MAX_HEADING_CHARS = 200


def _heading_text(inline: Token) -> str:
    """Return a heading's text with markdown markup removed and spaces collapsed, cut to
    `MAX_HEADING_CHARS` (with "…")."""
    # Only the start can survive the cut; parsing a megabyte of inline markup to keep 200
    # characters would be wasted work (4× leaves room for the markup that is removed).
    content = inline.content[: MAX_HEADING_CHARS * 4]
    if _INLINE_MARKUP_RE.search(content):
        parts: list[str] = []
        for token in _INLINE_MD.parseInline(content)[0].children or ():
            if token.type in ("text", "code_inline", "image"):
                parts.append(token.content)
            elif token.type in ("softbreak", "hardbreak"):
                parts.append(" ")
        content = "".join(parts)
    text = " ".join(content.split())
    if len(text) > MAX_HEADING_CHARS:
        text = text[: MAX_HEADING_CHARS - 1].rstrip() + "…"
    return text


def _sections(blocks: list[_Block]) -> list[list[_Block]]:
    """Group blocks into sections: each top-level heading starts a new one."""
    sections: list[list[_Block]] = []
    for block in blocks:
        if block.kind == "heading" or not sections:
            sections.append([block])
        else:
            sections[-1].append(block)
    return sections


def _group_kind(group: list[_Block]) -> str:
    """Kind of a packed group; a leading heading does not make it "mixed"."""
    kinds = {block.kind for block in group if block.kind != "heading"}
    if not kinds:
        return "heading"
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _pack(
    body: str, section: list[_Block], max_words: int, overlap: int, max_chars: int
) -> list[tuple[str, int, int]]:
    """Pack one section's blocks into ``(kind, start, end)`` passages."""
    passages: list[tuple[str, int, int]] = []
    group: list[_Block] = []
    group_words = 0

    def too_big(words: int, end: int) -> bool:
        return words > max_words or end - group[0].start > max_chars

    def flush() -> None:
        nonlocal group, group_words
        if group:
            passages.extend(
                _group_passages(body, group, group_words, max_words, overlap, max_chars)
            )
        group, group_words = [], 0

    for block in section:
        # Blocks are whole units of meaning: start a new passage rather than let
        # one block be cut only because the group before it was nearly full.
        if group and too_big(group_words + block.words, block.end) and group[-1].kind != "heading":
            flush()
        group.append(block)
        group_words += block.words
        # A heading is never flushed on its own (only the section's first block
        # can be one): it waits for the next block, even if that pushes the group
        # over the limit and forces a window split.
        if too_big(group_words, block.end) and block.kind != "heading":
            flush()
    flush()
    return passages


def _group_passages(
    body: str, group: list[_Block], group_words: int, max_words: int, overlap: int, max_chars: int
) -> list[tuple[str, int, int]]:
    """The ``(kind, start, end)`` passages of one packed, non-empty group of blocks: the
    group whole, or its word windows, each cut by characters when still too long."""
    kind = _group_kind(group)
    start, end = group[0].start, group[-1].end
    if group_words <= max_words:
        windows = [(start, start, end)]
    else:
        windows = _windows(body, start, end, max_words, overlap)
    passages: list[tuple[str, int, int]] = []
    previous_cut = False
    for w_start, w_fresh, w_end in windows:
        if previous_cut:
            # The previous window was cut by characters, so its last piece may
            # start inside this window's overlap: drop the overlap to keep
            # passages in order (each piece already has its neighbours' text).
            w_start = w_fresh
        previous_cut = w_end - w_start > max_chars
        if not previous_cut:
            passages.append((kind, w_start, w_end))
        else:
            passages.extend(
                (kind, c_start, c_end)
                for c_start, c_end in _char_windows(body, w_start, w_end, max_chars)
            )
    return passages


def _char_windows(body: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Cut ``body[start:end]`` (trimmed) into consecutive trimmed pieces of at most
    ``max_chars`` code points, with no overlap.

    Each cut is looked for in the second half of the span the next piece may
    take, so pieces stay near the bound: in the last whitespace run (dropped
    from both pieces), else just before the last punctuation or symbol
    character (a table's next ``|``, a path's next ``/``), else at the bound
    itself. Every search covers characters after the previous cut only, so the
    whole is linear in ``end - start``.
    """
    pieces: list[tuple[int, int]] = []
    position = start
    while end - position > max_chars:
        limit = position + max_chars  # the piece is body[position:cut] with cut <= limit
        low = position + max(1, max_chars // 2)
        space = None
        for run in WHITESPACE_RE.finditer(body, low, limit + 1):
            space = run  # the last run in range
        if space is not None:
            cut = space.start()
            while body[cut - 1].isspace():  # the run may begin before `low`
                cut -= 1
            following = space.end()
            while following < end and body[following].isspace():  # or go on past `limit`
                following += 1
            pieces.append((position, cut))
            position = following
            continue
        # No whitespace in body[low:limit + 1], so cutting anywhere in
        # (low, limit] leaves no whitespace at either side of the cut.
        # Combining marks, modifiers and joiners match too, but belong with their
        # neighbours.
        marks = [m.start() for m in _PUNCTUATION_RE.finditer(body, low + 1, limit + 1)]
        cut = next((k for k in reversed(marks) if not _splits_cluster(body, k)), None)
        if cut is None:
            cut = limit
            # A hard cut: do not leave a combining mark or a joiner at the start of
            # the next piece when a cut a few characters earlier avoids it.
            while cut > low + 1 and cut > limit - _HARD_CUT_SLACK and _splits_cluster(body, cut):
                cut -= 1
            if _splits_cluster(body, cut):
                cut = limit
        pieces.append((position, cut))
        position = cut
    pieces.append((position, end))
    return pieces


def _splits_cluster(body: str, cut: int) -> bool:
    """Whether cutting before ``body[cut]`` would separate characters shown as one:
    a combining mark or variation selector (category M*), an emoji skin-tone
    modifier, or either side of a zero-width joiner. Only a nicety; correctness
    needs nothing finer than code points."""
    char = body[cut]
    return (
        char == _ZWJ
        or body[cut - 1] == _ZWJ
        or "\U0001f3fb" <= char <= "\U0001f3ff"
        or unicodedata.category(char).startswith("M")
    )


def _windows(
    body: str, start: int, end: int, max_words: int, overlap: int
) -> list[tuple[int, int, int]]:
    """Cut ``body[start:end]`` into balanced, overlapping, word-aligned windows:
    ``(start, fresh_start, end)`` each, where ``fresh_start`` is where the words
    not shared with the previous window begin.

    With ``W`` words, ``n = ceil(W / max_words)`` windows are made. Cut ``k``
    aims at word ``k * W / n`` and moves to the nearest sentence end within
    a quarter window, but only where every window still has at most
    ``max_words`` fresh words, so the word bound holds whatever the snapping.
    """
    words = [(m.start(), m.end()) for m in SPACED_WORD_RE.finditer(body, start, end)]
    total = len(words)
    n = math.ceil(total / max_words)
    if n <= 1:
        return [(words[0][0], words[0][0], words[-1][1])]
    size = total / n
    tolerance = size / 4
    sentence_end = [bool(SENTENCE_END_WORD_RE.search(body, s, e)) for s, e in words]

    # cuts[k] is the index of the first fresh word of window k.
    cuts = [0]
    for k in range(1, n):
        prev = cuts[-1]
        # Feasible cuts: each window gets >= 1 fresh word and <= max_words of
        # them, and the remaining windows can still absorb the rest. The
        # invariant prev >= total - (n - k + 1) * max_words keeps this non-empty.
        low = max(prev + 1, total - (n - k) * max_words)
        high = min(prev + max_words, total - (n - k))
        target = k * size
        best = min(high, max(low, math.floor(target + 0.5)))
        best_distance = math.inf  # no sentence end found yet: fall back to the target
        # A cut at c means word c - 1 closes the previous window.
        for cut in range(
            max(low, math.ceil(target - tolerance)), 1 + min(high, int(target + tolerance))
        ):
            if sentence_end[cut - 1] and abs(cut - target) < best_distance:
                best, best_distance = cut, abs(cut - target)
        cuts.append(best)
    cuts.append(total)

    windows: list[tuple[int, int, int]] = []
    for k in range(n):
        first = max(0, cuts[k] - overlap) if k else 0
        windows.append((words[first][0], words[cuts[k]][0], words[cuts[k + 1] - 1][1]))
    return windows
