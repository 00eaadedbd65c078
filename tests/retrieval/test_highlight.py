"""Highlight segments (invariant 2): strict parsing, exact concatenation, safe markers."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.highlight import (
    HIGHLIGHT_MAX_CHARS,
    HIGHLIGHT_MAX_MARKS,
    Anchor,
    Highlight,
    MarkupError,
    Segment,
    cap_marks,
    collision_free_markers,
    evidence_anchor,
    fold,
    highlight_terms,
    highlights,
    parse_marked,
    segments_or_plain,
    spans,
    term_segments,
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


def test_fallback_is_logged(caplog):
    with caplog.at_level("WARNING", logger="lode.highlight"):
        assert segments_or_plain("abc", "a[[b", S, E) == [Segment("abc", False)]
    assert "highlight fallback: unclosed highlight" in caplog.text


def test_highlights_carry_both_units():
    text = "𝒳 a 👍 b"
    segments = [
        Segment("𝒳 ", False),
        Segment("a", True),
        Segment(" 👍 ", False),
        Segment("b", True),
    ]
    assert highlights(text, segments) == [Highlight(2, 3, 3, 4), Highlight(6, 7, 8, 9)]


# --- evidence anchor ----------------------------------------------------------------------


def test_anchor_is_first_to_last_highlight_with_lines():
    text = "one alpha\r\ntwo\rthree beta\nfour"
    segments = term_segments(text, [("alpha",), ("beta",)])
    anchor = evidence_anchor(segments, text=text, passage_start=100, passage_start_line=7)
    start, end = text.index("alpha"), text.index("beta") + 4
    assert anchor == Anchor(start, end, 100 + start, 100 + end, 7, 9)


def test_anchor_of_one_highlight_and_of_none():
    text = "x\n\nword y"
    one = evidence_anchor(
        term_segments(text, [("word",)]), text=text, passage_start=0, passage_start_line=1
    )
    assert (one.start, one.end, one.start_line, one.end_line) == (3, 7, 3, 3)
    none = evidence_anchor([Segment(text, False)], text=text, passage_start=0, passage_start_line=1)
    assert none is None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["ab", "cd", " ", "\n", "\r\n", "\r", "é", "👍"]), max_size=30),
    st.integers(min_value=1, max_value=50),
)
def test_anchor_lines_agree_with_chunking(pieces, first_line):
    from bisect import bisect_right

    from retrieval.index.chunking import _line_bounds

    text = "".join(pieces)
    segments = term_segments(text, [("ab",)])
    anchor = evidence_anchor(segments, text=text, passage_start=0, passage_start_line=first_line)
    if not spans(segments):
        assert anchor is None
        return
    starts, _ = _line_bounds(text)
    assert anchor.start_line == first_line - 1 + bisect_right(starts, anchor.start)
    assert anchor.end_line == first_line - 1 + bisect_right(starts, anchor.end - 1)


# --- term highlights computed in Python ---------------------------------------------------


def marked(segments: list[Segment]) -> list[str]:
    return [s.text for s in segments if s.highlighted]


def test_fold_is_the_index_form():
    assert fold("Café") == fold("cafe") == fold("CAFE\u0301")
    assert fold("Deploying") == fold("deployed") == fold("deploys")
    assert fold("İstanbul") == fold("istanbul")
    assert fold("ﬁne") == fold("fine")  # NFKC, like the query parser


def test_term_segments_find_terms_with_index_rules():
    text = "Deploying the CAFÉ's café; re-deploy at café-bar, not cafeteria."
    segments = term_segments(text, [("deploy",), ("cafe",)])
    assert "".join(s.text for s in segments) == text
    assert marked(segments) == ["Deploying", "CAFÉ", "café", "deploy", "café"]


def test_term_segments_phrases_are_adjacent_tokens_in_one_span():
    text = "retry the timeout; retry, timeout! timeout retry"
    segments = term_segments(text, [("retry", "timeout")])
    assert marked(segments) == ["retry, timeout"]
    # Unrelated words of the phrase alone are not marked, as FTS5 does.
    assert "".join(s.text for s in segments) == text


def test_term_segments_merge_overlaps_and_handle_combining_marks():
    text = "big red fox; e\u0301cole red"
    segments = term_segments(text, [("red", "fox"), ("big", "red"), ("ecole",)])
    assert marked(segments) == ["big red fox", "e\u0301cole"]


def test_term_segments_without_matches_or_terms():
    assert term_segments("nothing here", [("zebra",)]) == [Segment("nothing here", False)]
    assert term_segments("nothing here", []) == [Segment("nothing here", False)]
    assert term_segments("", [("zebra",)]) == []
    assert term_segments("a_b", [("a",)]) == [Segment("a", True), Segment("_b", False)]


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=80),
    st.lists(st.lists(st.text(alphabet="abcé👍 ", min_size=1, max_size=4), max_size=3), max_size=4),
)
def test_term_segments_always_add_up(text, groups):
    segments = term_segments(text, [tuple(g) for g in groups])
    assert "".join(s.text for s in segments) == text
    assert all(s.text for s in segments)
    # Never two highlighted pieces in a row without text between (spans are merged).
    for left, right in itertools.pairwise(segments):
        assert not (left.highlighted and right.highlighted)


# --- bounded highlighting -----------------------------------------------------


def marks(segments: list[Segment]) -> int:
    return sum(1 for s in segments if s.highlighted)


def test_cap_marks_turns_later_marks_into_plain_text():
    segments = [Segment(t, t == "x") for t in ["x", " a ", "x", " b ", "x", " c"]]
    capped, truncated = cap_marks(segments, 2)
    assert truncated
    assert capped == [
        Segment("x", True),
        Segment(" a ", False),
        Segment("x", True),
        Segment(" b x c", False),
    ]
    assert "".join(s.text for s in capped) == "".join(s.text for s in segments)
    assert cap_marks(segments, 3) == (segments, False)
    assert cap_marks([Segment("x", True), Segment("x", True)], 1) == (
        [Segment("x", True), Segment("x", False)],
        True,
    )


def test_highlight_terms_bounds_a_passage_with_tens_of_thousands_of_matches():
    text = "deploy " * 30_000  # 210,000 characters, 30,000 matches
    segments, truncated = highlight_terms(text, [("deploy",)])
    assert truncated
    assert "".join(s.text for s in segments) == text
    assert all(s.text for s in segments)
    assert marks(segments) == HIGHLIGHT_MAX_MARKS
    assert len(segments) == 2 * HIGHLIGHT_MAX_MARKS  # mark, gap, ..., mark, the plain rest


def test_highlight_terms_marks_only_the_window_of_a_long_passage():
    # One match near the start, one past the window: only the first is marked.
    text = "deploy " + "a " * HIGHLIGHT_MAX_CHARS + "deploy"
    segments, truncated = highlight_terms(text, [("deploy",)])
    assert truncated and marks(segments) == 1
    assert "".join(s.text for s in segments) == text
    short = "deploy and deploy"
    assert highlight_terms(short, [("deploy",)]) == (term_segments(short, [("deploy",)]), False)


def test_highlight_terms_never_matches_half_a_token_at_the_window_edge():
    # A plain cut at the window would leave "deploy" of "deploying" inside it.
    text = "a " * ((HIGHLIGHT_MAX_CHARS - 6) // 2) + "deploying"
    assert text[:HIGHLIGHT_MAX_CHARS].endswith("deploy")
    segments, truncated = highlight_terms(text, [("deploy",)])
    assert truncated and marks(segments) == 0
    assert "".join(s.text for s in segments) == text


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="ab é👍\u0301-", max_size=120),
    st.integers(1, 40),
    st.integers(0, 5),
)
def test_highlight_terms_always_add_up_within_both_bounds(text, max_chars, max_marks):
    segments, truncated = highlight_terms(
        text, [("a",), ("b", "a")], max_chars=max_chars, max_marks=max_marks
    )
    assert "".join(s.text for s in segments) == text
    assert all(s.text for s in segments)
    assert marks(segments) <= max_marks
    if len(text) > max_chars:
        assert truncated


@given(st.text(alphabet="a👍𝒳é\n", max_size=60), st.data())
def test_utf16_offsets_count_code_units(text, data):
    bounds = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    found = list(itertools.pairwise(bounds))
    expected = [
        (len(text[:a].encode("utf-16-le")) // 2, len(text[:b].encode("utf-16-le")) // 2)
        for a, b in found
    ]
    assert utf16_offsets(text, found) == expected
    assert utf16_offsets(text, found[::-1]) == expected[::-1]  # out of order too
