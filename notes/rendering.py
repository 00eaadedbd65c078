"""The one sanitiser: note markdown → safe HTML, rendered once per version, in parts.

markdown-it-py runs with raw HTML disabled (so `<script>` in a note comes out as text), its
link validation on (no `javascript:`/`vbscript:`/`data:` links) and linkify-it turning bare
URLs in text into links (never inside code or an existing link). nh3 (the ammonia
sanitiser) then allows only a fixed set of tags, attributes and URL schemes as a second,
independent layer, and puts `rel="noopener noreferrer nofollow"` on every link.

Why not bleach (issue 10): profiled with cProfile, a 320 KB table spent its seconds in
html5lib, twice (bleach's clean, then its linkify): the etree tree walker's
`getParentNode`/`getNextSibling` call `list.index`/`list.count` on the parent's children,
so the cost is quadratic in the children of one element (rows of one table, cells of one
row), and a one-line table of hundreds of thousands of cells ran for minutes. nh3 and
markdown-it's linkify are linear. bleach's linkify pass also escaped the already-escaped
text inside code a second time (`&quot;` shown in code, issue 13).

Large notes are shown in parts of at most `PART_MAX_CHARS` characters of source, cut at
block boundaries where there are any (`split_parts`), and each part's HTML is cached by
the version's SHA-256 (versions are immutable) and `RENDERER_VERSION`, so a page request
renders at most one bounded part, and only once.
"""

from __future__ import annotations

import bisect
import logging
import re
from dataclasses import dataclass

import nh3
from django.core.cache import cache
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

logger = logging.getLogger("lode.rendering")

# Bump whenever the HTML for the same markdown changes (pipeline, options, allow-lists or
# the part bound): cached renderings of older versions are then never served again.
RENDERER_VERSION = 2

# A part is at most PART_MAX_CHARS characters of markdown source and holds at most
# PART_MAX_MARKS of the characters that start costly inline markup. Rendering is linear, but
# markdown-it-py costs ~1 µs per plain character but 20–250 µs per table cell, link or
# emphasis (token objects; URL parsing and normalising, in Python): 50,000 characters of
# bare domains took 1.2 s, of a table with a link per row 0.6 s, of prose 0.1 s. The
# bounds keep the densest part near 0.3 s on a loaded machine (bench/note_render.py) and
# its HTML (≤ 12× the source, for bare domains turned into links) far under 1 MB.
PART_MAX_CHARS = 20_000
PART_MAX_MARKS = 1_000
# Emphasis, code, links and images, entities, strikethrough, autolinks, and the `:`/`.` of
# URLs and bare domains. Table pipes are left out: a cell costs ~6 µs.
_MARK_CHARS = "*_`[]!&\\~<:."
_MARK_STEP = 1_024

ALLOWED_TAGS = frozenset(
    [
        "a",
        "abbr",
        "b",
        "blockquote",
        "br",
        "code",
        "del",
        "em",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "i",
        "img",
        "li",
        "ol",
        "p",
        "pre",
        "s",
        "strong",
        "table",
        "tbody",
        "td",
        "th",
        "thead",
        "tr",
        "ul",
    ]
)
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "ol": {"start"},
}
ALLOWED_PROTOCOLS = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"

_markdown = (
    MarkdownIt("commonmark", {"html": False, "linkify": True})
    .enable("table")
    .enable("strikethrough")
    .enable("linkify")
)
# Bare e-mail addresses stay text, as they did before (bleach ran with parse_email=False).
_markdown.linkify.set({"fuzzy_email": False})

_cleaner = nh3.Cleaner(
    tags=set(ALLOWED_TAGS),
    attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
    url_schemes=set(ALLOWED_PROTOCOLS),
    link_rel=LINK_REL,
    strip_comments=True,
)


def render_markdown(body: str) -> SafeString:
    """Render note markdown to HTML that is safe to insert into a page.

    Linear in the length of `body`; callers showing a whole note use `rendered_part`, which
    bounds the input and caches the result.
    """
    # Safe: every byte passed through nh3's allow-list above.
    return mark_safe(_cleaner.clean(_markdown.render(body)))


@dataclass(frozen=True)
class Part:
    """A slice `[start, end)` of a note body (code points), rendered after `prefix`.

    `prefix` repeats what the slice needs to render as it would in the whole note: the
    opening fence of a code block cut in two, or the header of a table cut between rows.
    """

    start: int
    end: int
    prefix: str = ""

    def source(self, body: str) -> str:
        return self.prefix + body[self.start : self.end]


# A fence opener or closer: up to three spaces, then ``` or ~~~ (CommonMark 4.5).
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})([^\n]*)$", re.MULTILINE)
# A table's delimiter row: cells of dashes with optional colons, separated by pipes.
_TABLE_DELIMITER = re.compile(r"^ {0,3}\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
# Longest prefix repeated into a continuation part; a longer one would not bound the part.
_MAX_PREFIX_CHARS = 2_000


def _fence_spans(body: str) -> list[tuple[int, int, str]]:
    """(start, end, opener line) of each fenced code block; an unclosed one runs to the end."""
    spans: list[tuple[int, int, str]] = []
    opener: re.Match[str] | None = None
    for match in _FENCE.finditer(body):
        if opener is None:
            # A backtick fence's info string may not contain a backtick.
            if match.group(1)[0] == "`" and "`" in match.group(2):
                continue
            opener = match
        elif (
            match.group(1)[0] == opener.group(1)[0]
            and len(match.group(1)) >= len(opener.group(1))
            and not match.group(2).strip()
        ):
            spans.append((opener.start(), match.end(), opener.group(0)))
            opener = None
    if opener is not None:
        spans.append((opener.start(), len(body), opener.group(0)))
    return spans


def _fence_at(spans: list[tuple[int, int, str]], position: int) -> tuple[int, int, str] | None:
    """The fenced block strictly containing `position`, if any (spans are sorted and do
    not overlap, so only the last one starting before `position` can contain it)."""
    index = bisect.bisect_left(spans, (position,)) - 1
    if index >= 0 and spans[index][0] < position < spans[index][1]:
        return spans[index]
    return None


def _table_prefix(body: str, cut: int) -> str:
    """The header and delimiter rows of the table the line break at `cut` falls inside."""
    block_start = body.rfind("\n\n", 0, cut)
    block_start = 0 if block_start < 0 else block_start + 2
    header_end = body.find("\n", block_start, cut)
    if header_end < 0 or header_end - block_start > _MAX_PREFIX_CHARS:
        return ""
    delimiter_end = body.find("\n", header_end + 1, cut)
    if delimiter_end < 0 or delimiter_end - block_start > _MAX_PREFIX_CHARS:
        return ""
    if not _TABLE_DELIMITER.match(body[header_end + 1 : delimiter_end]):
        return ""
    return body[block_start : delimiter_end + 1]


def _line_has_pipe(body: str, start: int) -> bool:
    """Whether the line beginning at `start` could be a table row (it has a cell divider)."""
    line_end = body.find("\n", start)
    return body.find("|", start, len(body) if line_end < 0 else line_end) >= 0


def _cut(body: str, start: int, limit: int, fences: list[tuple[int, int, str]]) -> int:
    """Where the part beginning at `start` ends: the last block boundary before `limit`,
    else the last line break, else the last space, else `limit` itself. A cut never
    falls in the first half of the window, so every part but the last is at least half
    full and a note has at most about 2 × len / PART_MAX_CHARS parts."""
    floor = start + (limit - start) // 2
    blank = body.rfind("\n\n", floor, limit)
    if blank >= 0:
        fence = _fence_at(fences, blank + 1)
        if fence is None:
            return blank + 2
        if fence[0] > floor:
            return fence[0]  # cut before the code block rather than inside it
        # Else the code block covers the whole second half: cut it at a line break.
    newline = body.rfind("\n", floor, limit)
    if newline >= 0:
        return newline + 1
    space = body.rfind(" ", floor, limit)
    if space >= 0:
        return space + 1
    return limit


def _limit(body: str, start: int, max_chars: int, max_marks: int) -> int:
    """The furthest end of a part beginning at `start`: `max_chars` on, or sooner, at the
    step of `_MARK_STEP` characters where its count of markup characters reaches
    `max_marks`. Counting is `str.count` (C) over bounded steps."""
    end = min(len(body), start + max_chars)
    marks = 0
    position = start
    while position < end:
        step_end = min(position + _MARK_STEP, end)
        marks += sum(body.count(char, position, step_end) for char in _MARK_CHARS)
        if marks >= max_marks:
            return step_end
        position = step_end
    return end


def split_parts(
    body: str, max_chars: int = PART_MAX_CHARS, max_marks: int = PART_MAX_MARKS
) -> list[Part]:
    """Cut `body` into parts of at most `max_chars` characters (plus a short prefix) and
    about `max_marks` markup characters.

    Linear: the searches are `str.count`/`str.rfind` over bounded windows and one regex
    pass for code fences. A note within both bounds is one part, rendered exactly as a
    whole.
    """
    if _limit(body, 0, max_chars, max_marks) >= len(body):
        return [Part(0, len(body))]
    fences = _fence_spans(body)
    parts: list[Part] = []
    start, prefix = 0, ""
    while start < len(body):
        limit = _limit(body, start, max_chars, max_marks)
        end = len(body) if limit >= len(body) else _cut(body, start, limit, fences)
        parts.append(Part(start, end, prefix))
        # What the next part needs repeated, when this cut fell inside a block.
        prefix = ""
        if end < len(body) and not body.startswith("\n", end) and body[end - 2 : end] != "\n\n":
            fence = _fence_at(fences, end)
            if fence is not None:
                if len(fence[2]) <= _MAX_PREFIX_CHARS:
                    prefix = fence[2] + "\n"
            elif body[end - 1] == "\n" and _line_has_pipe(body, end):
                prefix = _table_prefix(body, end - 1)
        start = end
    return parts


@dataclass(frozen=True)
class RenderedPart:
    """One part of a version's rendering: its HTML and where it lies in the body."""

    html: SafeString
    number: int  # 1-based
    count: int
    start: int  # code points of the body this part shows
    end: int
    body_chars: int

    @property
    def has_next(self) -> bool:
        return self.number < self.count

    @property
    def next_number(self) -> int:
        return self.number + 1


class NoSuchPart(LookupError):
    """A part number outside 1..count."""

    def __init__(self, number: int, count: int) -> None:
        self.number = number
        self.count = count
        super().__init__(f"There is no part {number}: this text has {count} part(s).")


def _remember(key: str, value: object) -> None:
    """Cache `value`; a cache that cannot be written (full or read-only disk) costs a
    re-render next time, never the page."""
    try:
        cache.set(key, value)
    except OSError:
        logger.warning("could not cache %s", key, exc_info=True)


def _cache_key(sha256: str, what: str) -> str:
    return f"lode:render:{RENDERER_VERSION}:{PART_MAX_CHARS}:{PART_MAX_MARKS}:{sha256}:{what}"


def rendered_part(*, sha256: str, body: str, number: int = 1) -> RenderedPart:
    """Part `number` of the rendering of an immutable version (`body` with digest `sha256`).

    Both the cut points and each part's HTML are cached under the SHA-256, so a second
    request for the same version (any note, any user: same text, same HTML) renders
    nothing. Raises `NoSuchPart` for a number outside the parts.
    """
    parts_key = _cache_key(sha256, "parts")
    spans = cache.get(parts_key)
    if spans is None:
        spans = [(p.start, p.end, p.prefix) for p in split_parts(body)]
        _remember(parts_key, spans)
    if not 1 <= number <= len(spans):
        raise NoSuchPart(number, len(spans))
    start, end, prefix = spans[number - 1]
    html_key = _cache_key(sha256, f"part{number}")
    html = cache.get(html_key)
    if html is None:
        html = str(render_markdown(Part(start, end, prefix).source(body)))
        _remember(html_key, html)
    return RenderedPart(
        # Safe: produced by render_markdown (the sanitiser) above or on an earlier request.
        html=mark_safe(html),
        number=number,
        count=len(spans),
        start=start,
        end=end,
        body_chars=len(body),
    )
