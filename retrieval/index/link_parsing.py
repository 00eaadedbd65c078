"""Finding the links and title mentions in a version's text. Pure: text in,
spans out; resolving them to documents is `retrieval/index/edges.py`'s job.

Every span is in Unicode code points of the body, like passage offsets, so an edge's basis
can be highlighted with the same machinery as evidence. Code (fenced blocks and inline code
spans) is blanked out first with characters of the same length: a `[[link]]` written as an
example inside code is not a link, and blanking keeps every offset unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterator
from dataclasses import dataclass

from notes.models import TITLE_WORD

# Rule names and versions, stored on every edge as its basis. Bump a version when the rule's
# output for the same text changes, so health can tell old edges from drift.
WIKI_RULE = "wiki-link"
MARKDOWN_RULE = "markdown-link"
MENTION_RULE = "title-mention"
RULE_VERSION = "1"

# Bounds: a note is at most a few MB; links and mentions are looked for in its first
# `MAX_SCAN_CHARS` code points only, and at most `MAX_LINKS` links are kept, so a pasted
# 2 MB table cannot make a save crawl. Titles of up to `MAX_TITLE_WORDS` words are mentions.
MAX_SCAN_CHARS = 200_000
MAX_LINKS = 500
MAX_TITLE_WORDS = 8
MAX_MENTION_KEYS = 60_000
MIN_ONE_WORD_TITLE = 8  # letters a one-word title needs before its appearance is a mention

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})[^\n]*\n.*?(?:^\1\2[`~]*[ \t]*$|\Z)", re.M | re.S)
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
# [[Title]] or [[Title|alias]]; no brackets or newlines inside.
_WIKI = re.compile(r"\[\[([^\[\]\n|]{1,500})(?:\|([^\[\]\n]{0,500}))?\]\]")
# [text](target "optional title") — the target without spaces, or in <angle brackets>.
_MARKDOWN = re.compile(
    r"(?<!!)\[((?:[^\[\]\n]|\[[^\[\]\n]*\]){0,500})\]\(\s*(<[^<>\n]{1,1000}>|[^\s()<>]{1,1000}"
    r"(?:\([^\s()]*\)[^\s()<>]*)*)(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)"
)


@dataclass(frozen=True)
class Link:
    """One link as written: `rule` (wiki or Markdown), what it points at (`target`: a title
    for wiki links, a URL or path for Markdown ones), its text (`label`, the alias or the
    link text) and its span in the body."""

    rule: str
    target: str
    label: str
    start: int
    end: int


@dataclass(frozen=True)
class Mention:
    """A run of words equal (by `title_key`) to `key`, at `start:end` of the body."""

    key: str
    start: int
    end: int


def blank_code(text: str) -> str:
    """`text` with fenced code blocks and inline code spans replaced by spaces (newlines
    kept), so nothing inside code is taken for a link or a mention; same length."""

    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    return _INLINE_CODE.sub(blank, _FENCE.sub(blank, text))


def find_links(body: str) -> list[Link]:
    """The wiki and Markdown links of `body` outside code, in order, at most `MAX_LINKS`.
    Images (`![alt](src)`) are not links."""
    text = blank_code(body[:MAX_SCAN_CHARS])
    found: list[Link] = []
    for match in _WIKI.finditer(text):
        target = " ".join(match.group(1).split())
        if target:
            label = " ".join((match.group(2) or "").split()) or target
            found.append(Link(WIKI_RULE, target, label, match.start(), match.end()))
    for match in _MARKDOWN.finditer(text):
        target = match.group(2).strip()
        if target.startswith("<") and target.endswith(">"):
            target = target[1:-1].strip()
        if target and not target.startswith("#"):
            label = " ".join(match.group(1).split())
            found.append(Link(MARKDOWN_RULE, target, label, match.start(), match.end()))
    found.sort(key=lambda link: (link.start, link.end))
    return found[:MAX_LINKS]


def _title_word_runs(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group(0).casefold()) for m in TITLE_WORD.finditer(text)]


def mention_candidates(
    body: str, *, skip: list[tuple[int, int]], known: Container[str] | None = None
) -> dict[str, tuple[int, int]]:
    """Every run of 1..`MAX_TITLE_WORDS` words of `body` outside code and outside the `skip`
    spans (the links) that could be a mention (`mentionable`), as a `title_key` (its words,
    case-folded), with the span of its first occurrence. With `known` (the title keys the
    caller has loaded) only runs among them. The caller looks the keys up among document
    titles; a match is an unlinked mention."""
    text = blank_code(body[:MAX_SCAN_CHARS])
    for start, end in skip:
        text = text[:start] + " " * (end - start) + text[end:]
    words = _title_word_runs(text)
    found: dict[str, tuple[int, int]] = {}
    for i, (start, _, first) in enumerate(words):
        key = first
        for n in range(1, MAX_TITLE_WORDS + 1):
            if n > 1:
                if i + n > len(words):
                    break
                key = f"{key} {words[i + n - 1][2]}"
            if n == 1 and (len(key) < MIN_ONE_WORD_TITLE or key.isdigit()):
                continue
            if key in found or (known is not None and key not in known):
                continue
            if n > 1 and key.replace(" ", "").isdigit():
                continue
            found[key] = (start, words[i + n - 1][1])
            if len(found) >= MAX_MENTION_KEYS:
                return found
    return found


def mentionable(key: str) -> bool:
    """Whether a title is specific enough that its appearance in text is a mention: two or
    more words, or one word of at least eight letters ("Billing" in a sentence is a word,
    "Backup Policy" or "Kubernetes" is likely the note). Numbers alone never are."""
    words = key.split()
    if not words or all(w.isdigit() for w in words):
        return False
    return len(words) >= 2 or len(words[0]) >= MIN_ONE_WORD_TITLE


def iter_spans(text: str, key: str) -> Iterator[tuple[int, int]]:
    """Every place the words of `key` occur in `text` as whole words (any case, any runs of
    white space between them) — for highlighting a mention."""
    words = [re.escape(w) for w in key.split()]
    if not words:
        return
    pattern = re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)
    for match in pattern.finditer(text):
        yield match.start(), match.end()


def wiki_links_as_text(text: str) -> str:
    """`text` with each `[[Title]]` shown as its title and `[[Title|alias]]` as its alias,
    the way a rendered page reads them (search snippets are text, not rendered Markdown)."""
    if "[[" not in text:
        return text
    return _WIKI.sub(lambda m: m.group(2) if (m.group(2) or "").strip() else m.group(1), text)
