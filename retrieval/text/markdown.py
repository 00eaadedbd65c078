"""The Markdown blocks of a text that hold quotable prose or table rows (`quotable_blocks`), read
with markdown-it's block rules (the chunker's parser), with their offsets in the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from retrieval.text.tokens import LINE_BREAK_RE


@dataclass(frozen=True)
class TextBlock:
    """A Markdown block that holds quotable text: a paragraph (`kind` "paragraph"), a list
    item's paragraph ("list_item"), a block quote's paragraph ("quote") or a table body row
    ("table_row"). [start, end) in code points, from its first content character (markers
    left out) to its last non-blank one."""

    start: int
    end: int
    kind: str


# A list item's, block quote's or table's markup before a block's first character: indentation,
# ">" markers, list markers (bullet, or a number with "." or ")") followed by a blank or the line
# end, an optional task box, and a table row's leading "|". Matched from the start of the block's
# first line, at most `PREFIX_LIMIT` characters of it (markdown-it nests at most 20 deep).
_CONTAINER_PREFIX_RE = re.compile(
    r"(?:[ \t]*(?:>|(?:[-*+]|\d{1,9}[.)])(?=[ \t]|$)))*[ \t]*(?:\[[ xX]\][ \t]+)?\|?[ \t]*"
)
# A continuation line's markup: indentation and block-quote markers only (a continuation line
# never starts a list item, by markdown-it's reading of it).
CONTINUATION_PREFIX_RE = re.compile(r"(?:[ \t]*>)*[ \t]*")
PREFIX_LIMIT = 256


@lru_cache(maxsize=1)
def _block_parser() -> Any:
    # markdown-it's block rules only, as the chunker runs it (retrieval/index/chunking.py):
    # the inline pass is not needed to find blocks and would double the time.
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").disable("inline")


def _line_offsets(text: str) -> tuple[list[int], list[int]]:
    """The start offset of every line and the end offset before its break, counting lines the
    way markdown-it does (`LINE_BREAK_RE`), so its token maps index these lists."""
    starts, ends = [0], []
    for match in LINE_BREAK_RE.finditer(text):
        ends.append(match.start())
        starts.append(match.end())
    ends.append(len(text))
    return starts, ends


def right_trimmed(text: str, start: int, end: int) -> int:
    """`end` moved back over whitespace, not past `start`."""
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def quotable_blocks(text: str) -> list[TextBlock]:
    """The blocks of `text` that hold quotable prose or table rows, in order (see `TextBlock`).
    Headings, code, HTML, thematic breaks, link definitions and table header rows are left
    out. Linear in the length of `text` (markdown-it's block pass and one walk of its tokens)."""
    starts, ends = _line_offsets(text)
    blocks: list[TextBlock] = []
    containers: list[str] = []
    in_header = False
    for token in _block_parser().parse(text):
        kind = token.type
        if kind in ("blockquote_open", "list_item_open"):
            containers.append(kind)
        elif kind in ("blockquote_close", "list_item_close"):
            if containers:
                containers.pop()
        elif kind in ("thead_open", "thead_close"):
            in_header = kind == "thead_open"
        elif kind in ("paragraph_open", "tr_open") and token.map and not in_header:
            first, last = token.map[0], min(token.map[1], len(starts))
            if first >= last:
                continue
            line = starts[first]
            prefix = _CONTAINER_PREFIX_RE.match(text, line, min(ends[first], line + PREFIX_LIMIT))
            start = prefix.end() if prefix else line
            end = right_trimmed(text, start, ends[last - 1])
            if kind == "tr_open":
                block_kind = "table_row"
                if end > start and text[end - 1] == "|" and text[end - 2 : end] != "\\|":
                    end = right_trimmed(text, start, end - 1)
            elif not containers:
                block_kind = "paragraph"
            else:
                block_kind = "list_item" if containers[-1] == "list_item_open" else "quote"
            if end > start:
                blocks.append(TextBlock(start, end, block_kind))
    return blocks
