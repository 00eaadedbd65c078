"""Highlight segments (invariant 2): strict parsing, exact concatenation, safe markers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.highlight import (
    MarkupError,
    Segment,
    collision_free_markers,
    parse_marked,
    segments_or_plain,
    spans,
    utf16_offsets,
)

S, E = "[[", "]]"


def test_parse_marked_splits_into_segments():
    assert parse_marked("a [[b]] c", S, E) == [
        Segment("a ", False),
        Segment("b", True),
        Segment(" c", False),
    ]


@pytest.mark.parametrize(
    ("marked", "reason"),
    [
        ("a [[b [[c]] d]]", "nested"),
        ("a b]] c", "without a start"),
        ("a [[b c", "unclosed"),
        ("a [[]] c", "empty"),
    ],
)
def test_malformed_markup_is_rejected(marked, reason):
    with pytest.raises(MarkupError, match=reason):
        parse_marked(marked, S, E)


def test_fallback_when_segments_do_not_add_up():
    # An engine that altered the text (e.g. dropped a character) must not be trusted.
    assert segments_or_plain("abc", "a[[b]]", S, E) == [Segment("abc", False)]
    assert segments_or_plain("abc", "a[[b]]c", S, E)[1] == Segment("b", True)


def test_markers_avoid_text_that_contains_them():
    first = collision_free_markers("plain")
    tricky = f"text with {first[0]} inside"
    second = collision_free_markers(tricky)
    assert second != first
    assert second[0] not in tricky and second[1] not in tricky


def test_utf16_offsets_count_surrogate_pairs():
    text = "👍🏽 deploy"
    segments = [Segment("👍🏽 ", False), Segment("deploy", True)]
    assert spans(segments) == [(3, 9)]
    assert utf16_offsets(text, spans(segments)) == [(5, 11)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=20), st.booleans()), max_size=8))
def test_marking_then_parsing_round_trips(pieces):
    passage = "".join(text for text, _ in pieces)
    start, end = collision_free_markers(passage)
    marked = "".join(f"{start}{t}{end}" if h else t for t, h in pieces)
    segments = segments_or_plain(passage, marked, start, end)
    assert "".join(s.text for s in segments) == passage
    assert [s.text for s in segments if s.highlighted] == [t for t, h in pieces if h]
