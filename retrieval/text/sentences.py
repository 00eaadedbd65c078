"""Sentences: the quotable units the extractive answerer may quote (`split_sentences`), the
line-bound statements conflict detection compares (`sentence_spans`) and the sentence end the
chunker may cut at (`SENTENCE_END_WORD_RE`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

from retrieval.text.markdown import (
    CONTINUATION_PREFIX_RE,
    PREFIX_LIMIT,
    quotable_blocks,
    right_trimmed,
)
from retrieval.text.tokens import LINE_BREAK_RE
from retrieval.words.abbreviations import ABBREVIATIONS

# Conflict detection: a sentence runs to . ! ? or ; followed by whitespace (so "1.29" and
# "e.g.x" do not end one), or to the end of the line. Cheap and line-bound: statements there are
# claims, spans and pack passages, already short.
SENTENCE_RE = re.compile(r"[^\n]+?(?:[.!?;]+(?=\s)|[.!?;]*$)", re.MULTILINE)

# The chunker: a whitespace-separated word that ends a sentence (terminal punctuation, then
# optional closers, including } and »), where a window may snap its cut.
SENTENCE_END_WORD_RE = re.compile(r"[.!?][\"'\u201d\u2019)\]}\u00bb]*$")

# The extractive answerer: a sentence ends at . ! ? (plus closing quotes/brackets) followed by
# whitespace, unless the word before it is an abbreviation (`ABBREVIATIONS`) or a single
# capital (an initial).
_SENTENCE_END_RE = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(?=\s)")
# How far back from a sentence end the abbreviation check reads: longer than any abbreviation
# with its opening bracket, and a bound, so a body of a million "e.g." stays linear.
_ABBREVIATION_LOOKBACK = 16


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of `text` by `SENTENCE_RE`, trimmed of surrounding
    whitespace: the statements conflict detection compares."""
    found = []
    for m in SENTENCE_RE.finditer(text):
        start, end = m.start(), m.end()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            found.append((start, end))
    return found


# --- quotable units: what the extractive answerer may quote --------------------------------------
#
# A claim is one sentence, one list item, one table row or one line of a line-structured text,
# never a block or a file. The Markdown structure is read with markdown-it (the chunker's parser,
# block rules only), so a unit never starts or ends inside another list item, however deeply
# nested, and headings, code, HTML and table header rows are never units:
#
# * a heading is a label, not a claim (the answer page shows it above the quote instead);
# * code (fenced or indented) is never quoted, not even a one-line command: a command is not a
#   statement the gate's coupling or entailment steps can judge, the words a question shares
#   with it are identifiers at best, and a command shown as a bare "claim" loses the step that
#   says when (or whether) to run it. The list item introducing it ("Promote the replica with
#   `pg_ctl promote`") is quotable, inline code included;
# * a unit starts at its first content character: list markers ("- ", "1. ", "2) ", a task
#   box "[ ] "), block-quote ">" and a table row's outer "|" are markup, not content, and stay
#   out of the quoted span (which is still an exact slice of the stored body);
# * inside a paragraph, a line break ends a unit when the text is line-structured rather than
#   wrapped prose (`_ends_unit`): a contact note's name, phone and e-mail lines are three units;
# * a unit longer than `MAX_SENTENCE_CHARS` is cut at clause punctuation (`_capped`).


@dataclass(frozen=True)
class Sentence:
    """A sentence of a version body: [start, end) in code points, and its text (the exact
    slice, so quoting it is verbatim by construction)."""

    start: int
    end: int
    text: str


# A quotable unit longer than this many code points is cut at clause punctuation (; : , | or a
# spaced dash); a stretch this long with none of them is dropped, not quoted. 600 is longer than
# 99.9% of SciFact's abstract sentences (38 of 47,034 are longer); a run-on line of that length
# (a pasted log, a minified list) is not one fact a person reads.
MAX_SENTENCE_CHARS = 600
# Where a too-long unit may be cut: just after clause punctuation, or a spaced dash, followed by
# whitespace (so "03:30", "1,000" and "well-known" are never cut).
_CLAUSE_CUT_RE = re.compile(r"[;:,|\u2013\u2014](?=\s)|\s-{1,3}(?=\s)")
# What a cut piece may not end with: the clause punctuation it was cut after.
_CLAUSE_TAIL = " \t\r\n;:,|-\u2013\u2014"

# An inline enumeration opening a sentence or a line ("… results. 2) Uptake was …"): markup of
# the list the text spells out, not content, like a Markdown list marker.
_ENUMERATION_RE = re.compile(r"(?:[-*+]|\d{1,9}[.)])(?:[ \t]+(?:\[[ xX]\][ \t]+)?|$)")
# A line that starts with a short label and a colon ("Phone:", "Step 2:", "Dana's e-mail:"):
# a field of a line-structured text, never the wrapped tail of a sentence.
_LABEL_LINE_RE = re.compile(
    r"[^\W_][\w'\u2019.\-]{0,30}(?:[ \t]+[\w'\u2019.\-]{1,30}){0,2}:(?:\s|$)"
)
# A line's first word, as a wrapping editor keeps it whole: an inline code span counts as one.
_FIRST_WORD_RE = re.compile(r"`[^`\n]{0,62}`|\S{0,64}")
# A line ending in one of these continues on the next (a list of clauses, a hyphenated word).
_CONTINUES_LINE = frozenset(",([{/&+-\u2010\u2013\u2014")
# Paragraphs whose longest line is shorter than this are not hard-wrapped prose: every line break
# in them that the rules below do not join is the author's (a contact card, a short list).
_WRAP_MIN_WIDTH = 40
# How much shorter than the longest line a wrapped line may be and still count as full, as a
# share of that length (1/8): editors wrap at a width the longest line may overshoot (a long
# word or code span), and notes are re-wrapped by hand. Measured on bench/data/notes_corpus:
# without it 7 sentences of wrapped prose were cut where a line began with a digit, a code span
# or a capital; with it none are, and every line of its contact, log and recipe files stays
# its own unit.
_WRAP_SLACK = 8


def _ends_unit(last: str, explicit: bool, following: str, wrapped: bool) -> bool:
    """Whether a line break inside a paragraph ends a quotable unit. `last` is the line's last
    character, `following` the next line (markup and edge blanks removed), `wrapped` whether
    the paragraph is hard-wrapped prose (`_is_wrapped`). Markdown joins a paragraph's lines,
    but a plain-text note (a contact card, a log, "Step 1: …" lines) means each line on its
    own. The break is the author's, so it ends the unit, when it is an explicit Markdown hard
    break (`explicit`); the sentence goes on when the next line starts in lower case or this
    one ends in a comma, bracket, slash or hyphen; a next line starting with a label
    ("Phone: …") is a new field; any other break ends the unit unless the paragraph is
    wrapped prose."""
    if explicit:
        return True
    if following[:1].islower() or last in _CONTINUES_LINE:
        return False
    if _LABEL_LINE_RE.match(following):
        return True
    return not wrapped


def _is_wrapped(text: str, lines: list[tuple[int, int, int]]) -> bool:
    """Whether a paragraph's `lines` ((content start, content end, raw end) each) are prose
    hard-wrapped at a fixed width: its longest line is at least `_WRAP_MIN_WIDTH` and every
    line but the last is full — the next line's first word would not have fitted on it
    within that width (less `_WRAP_SLACK`), so the break was the editor's, not the author's.
    One short line (a name above a phone number, a log entry shorter than the one before)
    means the lines were broken by hand."""
    width = max(end - start for start, end, _ in lines)
    if width < _WRAP_MIN_WIDTH:
        return False
    full = width - width // _WRAP_SLACK
    for (start, end, _), (next_start, _, _) in pairwise(lines):
        word = _FIRST_WORD_RE.match(text, next_start)
        if end - start + 1 + (word.end() - word.start() if word else 0) <= full:
            return False
    return True


def _units(text: str) -> Iterable[tuple[int, int, str]]:
    """(start, end, kind) of `text`'s quotable units: each block of `quotable_blocks`, cut at
    the line breaks `_ends_unit` says end a unit. Units are not yet cut into sentences."""
    for block in quotable_blocks(text):
        one_line = LINE_BREAK_RE.search(text, block.start, block.end) is None
        if block.kind == "table_row" or one_line:
            yield block.start, block.end, block.kind
            continue
        # (content start, content end, raw line end) of each line of the block.
        lines: list[tuple[int, int, int]] = []
        position = block.start
        for match in LINE_BREAK_RE.finditer(text, block.start, block.end):
            lines.append((position, right_trimmed(text, position, match.start()), match.start()))
            position = match.end()
            prefix = CONTINUATION_PREFIX_RE.match(
                text, position, min(block.end, position + PREFIX_LIMIT)
            )
            if prefix:
                position = prefix.end()
        lines.append((position, block.end, block.end))
        lines = [line for line in lines if line[1] > line[0]]  # a bare ">" is no line
        wrapped = _is_wrapped(text, lines)
        unit_start = lines[0][0]
        for (_, end, raw_end), (next_start, next_end, _) in pairwise(lines):
            explicit = text.startswith("  ", end, raw_end) or text[end - 1] == "\\"
            following = text[next_start : min(next_end, next_start + PREFIX_LIMIT)]
            if _ends_unit(text[end - 1], explicit, following, wrapped):
                unit_end = end - 1 if text[end - 1] == "\\" else end
                yield unit_start, right_trimmed(text, unit_start, unit_end), block.kind
                unit_start = next_start
        yield unit_start, block.end, block.kind


def _sentence_ranges(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    """Sentence ranges inside text[start:end]: cut after . ! ? (and closers) followed by
    whitespace, unless the word before is an abbreviation or an initial."""
    cut = start
    for match in _SENTENCE_END_RE.finditer(text, start, end):
        words = text[max(cut, match.start() - _ABBREVIATION_LOOKBACK) : match.start()].split()
        last = words[-1].lower().rstrip(".") if words else ""
        last = last.lstrip("(\"'[")
        if last in ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
            continue
        yield cut, match.end()
        cut = match.end()
    yield cut, end


def _capped(text: str, start: int, end: int, limit: int) -> Iterable[tuple[int, int]]:
    """text[start:end] in pieces of at most `limit` code points, each ending just after clause
    punctuation (the last such cut that fits), the punctuation trimmed off. A stretch longer
    than `limit` with no clause punctuation is dropped: it is not a sentence anyone reads as
    one claim. Linear: the cuts are found once and walked once."""
    if end - start <= limit:
        yield start, end
        return
    cuts = [m.end() for m in _CLAUSE_CUT_RE.finditer(text, start, end)]
    position, index = start, 0
    while end - position > limit:
        best = None
        while index < len(cuts) and cuts[index] <= position + limit:
            if cuts[index] > position:
                best = cuts[index]
            index += 1
        if best is None:
            if index >= len(cuts):
                return  # the rest has no clause punctuation within reach
            position = cuts[index]  # drop the unpunctuated stretch before this cut
            index += 1
            continue
        piece_end = best
        while piece_end > position and text[piece_end - 1] in _CLAUSE_TAIL:
            piece_end -= 1
        yield position, piece_end
        position = best
    yield position, end


def split_sentences(
    body: str, start: int = 0, end: int | None = None, *, max_chars: int = MAX_SENTENCE_CHARS
) -> list[Sentence]:
    """The quotable sentences of body[start:end], with offsets into `body`: each sentence of a
    paragraph, list item or block quote, each table row, each line of line-structured text
    (see the comment above `TextBlock`), cut at `max_chars` (`_capped`), trimmed of edge
    whitespace. Each is an exact slice of `body` that starts at a content character (never a
    list marker, ">" or "#") and never spans two list items. Abbreviation-aware ("e.g.",
    initials), so a sentence does not end inside "Fig. 2". The region is parsed on its own:
    pass a region that starts outside any code block (a passage's heading section does)."""
    end = len(body) if end is None else end
    region = body[start:end]
    sentences: list[Sentence] = []
    for unit_start, unit_end, kind in _units(region):
        enumeration = _ENUMERATION_RE.match(region, unit_start, unit_end)
        if enumeration and kind != "table_row":
            unit_start = enumeration.end()  # "1. Step" on a line of its own, not a list item
        ranges = (
            [(unit_start, unit_end)]
            if kind == "table_row"
            else _sentence_ranges(region, unit_start, unit_end)
        )
        for a, b in ranges:
            for c, d in _capped(region, a, b, max_chars):
                d = right_trimmed(region, c, d)
                while c < d and region[c].isspace():
                    c += 1
                enumeration = _ENUMERATION_RE.match(region, c, d)
                if enumeration:
                    c = enumeration.end()
                if c < d:
                    sentences.append(Sentence(start + c, start + d, region[c:d]))
    return sentences
