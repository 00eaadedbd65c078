"""Rendering bounded by structure (notes/rendering.py): lists and quotes nested past
`MAX_NESTING_DEPTH`, and parts with more links, footnotes, headings or tokens than a part
may have, are shown as their escaped text under a notice, never lost and never a 503.

Nothing here measures time: the bounds are counts (bench/render_pathological.py prints what
the densest inputs cost)."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import random
import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from notes import rendering
from notes.rendering import (
    MAX_NESTING_DEPTH,
    RenderBounds,
    rendered_part,
    rendering_of,
    split_parts,
    structure_of,
)
from tests import factories
from tests.factories import nested_list

NESTED_NOTICE = "This note is nested too deeply to display formatted"


def nested_quotes(depth: int) -> str:
    return ">" * depth + " deepest words\n"


def lists_in_quotes(depth: int) -> str:
    """Lists and quotes alternating, `depth` containers in all (`> - > - …`)."""
    markers = "".join("> " if level % 2 == 0 else "- " for level in range(depth))
    return markers + "deepest words\n"


def sha(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


class _Visible(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)

    def handle_data(self, data):
        self.text.append(data)


def visible(html: str) -> tuple[str, set[str]]:
    """The text a browser shows for `html` and the tags it holds."""
    parser = _Visible()
    parser.feed(html)
    parser.close()
    return "".join(parser.text), parser.tags


def parsed_structure(body: str):
    return structure_of(rendering._markdown.parse(body, {}))


# --- nesting --------------------------------------------------------------------------------


def test_a_list_900_levels_deep_shows_its_text_under_the_notice():
    body = nested_list(900)  # 815 KB
    part = rendered_part(sha256=sha(body), body=body)
    assert NESTED_NOTICE in part.html
    text, tags = visible(part.html)
    assert tags == {"p", "em", "pre"}
    # The whole first part is there, as written (indentation and all).
    assert text.endswith(body[part.start : part.end])
    assert part.count == len(split_parts(body))


def test_the_page_of_a_note_900_levels_deep_answers_with_the_notice(alice, alice_client):
    note = factories.note(alice, "Deep outline", nested_list(900))
    response = alice_client.get(reverse("notes:detail", args=[note.pk]))
    assert response.status_code == 200
    page = response.content.decode()
    assert NESTED_NOTICE in page
    assert "- level 0\n  - level 1\n" in page
    again = alice_client.get(reverse("notes:detail", args=[note.pk]), {"part": 2})
    assert again.status_code == 200


@pytest.mark.parametrize("shape", [nested_list, nested_quotes, lists_in_quotes])
def test_nesting_at_the_cap_renders_formatted(shape):
    body = shape(MAX_NESTING_DEPTH)
    result = rendering_of(body)
    assert result.shown_as_text is None
    assert parsed_structure(body).depth == MAX_NESTING_DEPTH
    html = str(result.html)
    assert html.count("<ul>") + html.count("<blockquote>") == MAX_NESTING_DEPTH


@pytest.mark.parametrize("shape", [nested_list, nested_quotes, lists_in_quotes])
def test_one_level_past_the_cap_shows_the_text(shape):
    body = shape(MAX_NESTING_DEPTH + 1)
    result = rendering_of(body)
    assert result.shown_as_text is not None and NESTED_NOTICE in result.shown_as_text
    assert "<ul>" not in result.html and "<blockquote>" not in result.html
    text, _ = visible(result.html)
    assert body in text


@pytest.mark.parametrize("shape", [nested_list, nested_quotes, lists_in_quotes])
def test_no_depth_loses_text(shape):
    """markdown-it drops what lies past its own nesting limit without a word; here every
    depth shows every item, formatted or as text."""
    for depth in range(1, 3 * MAX_NESTING_DEPTH):
        body = shape(depth)
        text, _ = visible(rendering_of(body).html)
        words = re.findall(r"level \d+|deepest words", body)
        assert all(word in text for word in words), depth


def test_the_parsers_own_limit_lies_past_the_cap():
    """A list at the cap is parsed whole (nothing cut short) and one past it is caught by
    the depth count, before the parser's limit."""
    at_cap = parsed_structure(nested_list(MAX_NESTING_DEPTH))
    assert not at_cap.cut_short
    deep = parsed_structure(nested_list(900))
    assert deep.depth > MAX_NESTING_DEPTH


def test_text_shown_for_nesting_stays_escaped():
    body = nested_quotes(40).replace("deepest words", "<script>alert(1)</script> <img src=x>")
    html = str(rendering_of(body).html)
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    _, tags = visible(html)
    assert tags == {"p", "em", "pre"}


def test_emphasis_and_brackets_nested_deep_render_without_loss():
    """Inline nesting past the parser's limit stays text: nothing is dropped."""
    for body in ("*" * 400 + "word" + "*" * 400, "[" * 400 + "word" + "](u)" * 400):
        result = rendering_of(body)
        text, _ = visible(result.html)
        assert "word" in text


# --- counts ---------------------------------------------------------------------------------

LINKS = "".join(f"[link {i}](https://example.org/{i}) " for i in range(30))
FOOTNOTES = "".join(f"Claim {i}.[^{i}]\n\n" for i in range(20)) + "".join(
    f"[^{i}]: Source {i}.\n" for i in range(20)
)
HEADINGS = "".join(f"## Heading {i}\n\nText.\n\n" for i in range(25))
TOKENS = "- a\n" * 100


@pytest.mark.parametrize(
    ("bound", "body", "word"),
    [
        ("links", LINKS, "links"),
        ("footnotes", FOOTNOTES, "footnotes"),
        ("headings", HEADINGS, "headings"),
        ("tokens", TOKENS, "pieces of formatting"),
    ],
)
def test_each_count_over_its_bound_shows_the_text(bound, body, word):
    count = getattr(parsed_structure(body), bound)
    assert count > 10
    at_bound = dataclasses.replace(RenderBounds(), **{bound: count})
    assert rendering_of(body, bounds=at_bound).shown_as_text is None
    under = dataclasses.replace(RenderBounds(), **{bound: count - 1})
    result = rendering_of(body, bounds=under)
    assert result.shown_as_text == (
        f"This part has too many {word} to display formatted ({count:,}; at most "
        f"{count - 1:,}); showing its text."
    )
    text, tags = visible(result.html)
    assert tags == {"p", "em", "pre"}
    assert body in text


@pytest.mark.parametrize(
    ("body", "what"),
    [
        ("#\n" * (rendering.PART_MAX_HEADINGS + 1), "headings"),
        ("[a](b) " * (rendering.PART_MAX_LINKS + 1), "links"),
        ("x[^1]" * rendering.PART_MAX_FOOTNOTES + "\n\n[^1]: n\n", "footnotes"),
        ("- a\n" * (rendering.PART_MAX_TOKENS // 6 + 1), "pieces of formatting"),
    ],
)
def test_the_default_bounds_catch_dense_markup(body, what):
    result = rendering_of(body)
    assert result.shown_as_text is not None and f"too many {what}" in result.shown_as_text


def test_counts_cover_inline_links_and_footnote_definitions():
    structure = parsed_structure(
        "See https://example.org and [x](/y) ![i](/i.png) <https://a.example>.[^n]\n\n"
        "[^n]: A note.\n\n# One\n\nTwo\n===\n"
    )
    assert (structure.links, structure.footnotes, structure.headings) == (4, 2, 2)


@pytest.mark.parametrize(
    "bound",
    ["MAX_NESTING_DEPTH", "PART_MAX_LINKS", "PART_MAX_FOOTNOTES", "PART_MAX_HEADINGS",
     "PART_MAX_TOKENS"],
)  # fmt: skip
def test_a_changed_bound_changes_the_cache_key(bound, monkeypatch):
    """HTML cached under one bound is never served under another."""
    before = rendering._cache_key("0" * 64, "part1")
    monkeypatch.setattr(rendering, bound, getattr(rendering, bound) + 1)
    assert rendering._cache_key("0" * 64, "part1") != before


# --- cutting deeply indented notes ----------------------------------------------------------

# The delimiter-row patterns in their plain form: the same lines, but the engine retries
# every split of a line's indentation between their neighbouring blank runs.
PLAIN_ROW = re.compile(r"^[ \t>]*\|?[ \t]*:?-+:?[ \t]*\|[ \t]*:?-[|:\- \t\r]*$", re.MULTILINE)
PLAIN_TABLE_DELIMITER = re.compile(r"^ {0,3}\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


def plain_wider_row(columns: int) -> re.Pattern[str]:
    cell = r"[ \t]*:?-+:?[ \t]*"
    return re.compile(rf"^[ \t>]*\|?{cell}(?:\|{cell}){{{columns},}}\|?[ \t\r]*$", re.MULTILINE)


def test_delimiter_rows_match_exactly_what_the_plain_patterns_match():
    chance = random.Random(20)
    pairs = [(PLAIN_ROW, rendering._DELIMITER_ROW)] + [
        (plain_wider_row(columns), rendering._wider_delimiter_row(columns)) for columns in (1, 2)
    ]
    for _ in range(30_000):
        line = "".join(chance.choice(" \t>|:-x\r\n") for _ in range(chance.randint(0, 14)))
        for plain, ours in pairs:
            assert [m.span() for m in plain.finditer(line)] == [
                m.span() for m in ours.finditer(line)
            ], line
        assert bool(PLAIN_TABLE_DELIMITER.match(line)) == bool(
            rendering._TABLE_DELIMITER.match(line)
        ), line


def test_a_deeply_indented_note_is_cut_into_parts_without_tables():
    body = nested_list(900)
    assert rendering._table_spans(body) == []
    parts = split_parts(body)
    assert parts[0].start == 0 and parts[-1].end == len(body)
    assert all(a.end == b.start for a, b in itertools.pairwise(parts))
    assert all(part.end - part.start <= rendering.PART_MAX_CHARS for part in parts)
