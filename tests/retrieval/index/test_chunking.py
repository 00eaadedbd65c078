"""Tests for retrieval.index.chunking: hypothesis properties plus worked examples.

Pure-Python tests: no Django settings, no database.
"""

from __future__ import annotations

import itertools
import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.index.chunking import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_WORDS,
    DEFAULT_OVERLAP_WORDS,
    MAX_HEADING_CHARS,
    Chunk,
    chunk_markdown,
    word_count,
)

# The only line separators the chunker (and markdown-it) recognise.
LINE_BREAK_RE = re.compile(r"\r\n?|\n")


# --------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------

# Words mixing ASCII, sentence ends, markup characters and awkward Unicode
# (astral emoji with skin-tone modifier, combining marks, NUL, \u2028).
_WORD_PIECES = st.sampled_from(
    [*"abcxyz*_`#|>-+.!?\"')[]&<", "é", "e\u0301", "👍🏽", "中", "\x00", "\u2028", "\t"]
)
words = st.lists(_WORD_PIECES, min_size=1, max_size=6).map("".join).filter(lambda w: w.strip() == w)
sentences = st.lists(words, min_size=1, max_size=12).map(" ".join)
eols = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def _lines_block(draw: st.DrawFn) -> list[str]:
    """One markdown construct as a list of lines (joined later with mixed EOLs)."""
    kind = draw(
        st.sampled_from(
            [
                "atx",
                "setext",
                "paragraph",
                "list",
                "fence",
                "table",
                "quote",
                "blank",
                "html",
                "indented",
                "refdef",
                "hr",
            ]
        )
    )
    text = draw(sentences)
    if kind == "atx":
        level = draw(st.integers(1, 7))  # 7 '#'s is *not* a heading
        trailer = draw(st.sampled_from(["", "  ", " ##", "\t"]))
        return ["#" * level + " " + text + trailer]
    if kind == "setext":
        return [text, draw(st.sampled_from(["===", "---", "-"]))]
    if kind == "paragraph":
        return draw(st.lists(sentences, min_size=1, max_size=4))
    if kind == "list":
        marker = draw(st.sampled_from(["-", "*", "1.", "2)"]))
        lines = []
        for item in draw(st.lists(sentences, min_size=1, max_size=4)):
            lines.append(f"{marker} {item}")
            if draw(st.booleans()):
                lines.append(f"  - {draw(sentences)}")  # nested list
            if draw(st.booleans()):
                lines.append("")  # loose list
        return lines
    if kind == "fence":
        fence = draw(st.sampled_from(["```", "~~~", "````"]))
        body = draw(st.lists(st.one_of(sentences, st.just("# not a heading")), max_size=4))
        closed = draw(st.booleans())  # unclosed fences run to the end
        return [fence + draw(st.sampled_from(["", "python"])), *body] + ([fence] if closed else [])
    if kind == "table":
        cols = draw(st.integers(1, 3))
        rows = draw(st.lists(st.lists(words, min_size=cols, max_size=cols), max_size=3))
        header = "| " + " | ".join(f"h{i}" for i in range(cols)) + " |"
        rule = "|" + "---|" * cols
        return [header, rule, *("| " + " | ".join(r) + " |" for r in rows)]
    if kind == "quote":
        return [f"> {s}" for s in draw(st.lists(sentences, min_size=1, max_size=3))]
    if kind == "blank":
        return [draw(st.sampled_from(["", " ", "\t", "   "]))]
    if kind == "html":
        return ["<div>", text, "</div>"]
    if kind == "indented":
        return ["", f"    {text}", f"    {draw(sentences)}"]
    if kind == "refdef":
        return [f"[{draw(st.sampled_from(['a', 'ref', 'x y']))}]: /url/{len(text)}"]
    return [draw(st.sampled_from(["---", "***", "___", "- - -"]))]


@st.composite
def markdown_bodies(draw: st.DrawFn) -> str:
    """Bodies composed of markdown constructs with mixed LF / CRLF / CR endings."""
    lines = [line for block in draw(st.lists(_lines_block(), max_size=12)) for line in block]
    if not lines:
        return ""
    parts = []
    for line in lines:
        parts.append(line)
        parts.append(draw(eols))
    if not draw(st.booleans()):
        parts.pop()  # sometimes no final line break
    return "".join(parts)


any_body = st.one_of(st.text(), markdown_bodies())


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def line_of(body: str, index: int) -> int:
    """1-based line number of body[index], counting \\r\\n, \\r and \\n breaks."""
    return 1 + len(LINE_BREAK_RE.findall(body, 0, index))


def check_invariants(
    body: str,
    chunks: list[Chunk],
    max_words: int,
    overlap: int,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> None:
    """Every structural property the chunker promises, for one body."""
    # 1. text is the exact slice, non-empty, edge-trimmed.
    for chunk in chunks:
        assert chunk.start < chunk.end
        assert chunk.text == body[chunk.start : chunk.end]
        assert chunk.text.strip() == chunk.text

    # 2. every non-whitespace character is covered.
    covered = bytearray(len(body))
    for chunk in chunks:
        covered[chunk.start : chunk.end] = b"\x01" * (chunk.end - chunk.start)
    uncovered = [i for i, ch in enumerate(body) if not ch.isspace() and not covered[i]]
    assert not uncovered, (uncovered[:5], body)

    # 3. positions 0..n-1, starts non-decreasing.
    assert [c.position for c in chunks] == list(range(len(chunks)))
    assert all(a.start <= b.start for a, b in itertools.pairwise(chunks))

    # 4. parent contains the chunk and is trimmed; parents are whole sections,
    # so two chunks' parents are either identical or disjoint.
    for chunk in chunks:
        assert chunk.parent_start <= chunk.start < chunk.end <= chunk.parent_end
        parent = body[chunk.parent_start : chunk.parent_end]
        assert parent.strip() == parent
    parents = sorted({(c.parent_start, c.parent_end) for c in chunks})
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(parents))

    # 5. line numbers.
    for chunk in chunks:
        assert chunk.start_line == line_of(body, chunk.start)
        assert chunk.end_line == line_of(body, chunk.end - 1)

    # 6. word bound: max_words fresh words plus at most the (capped) overlap.
    bound = max_words + min(overlap, max_words // 2)
    for chunk in chunks:
        assert word_count(chunk.text) <= bound, (chunk, max_words, overlap)

    # 7. character bound: no passage longer than max_chars code points.
    for chunk in chunks:
        assert len(chunk.text) <= max_chars, (len(chunk.text), max_chars)

    # A heading-only passage appears only when its section has nothing else
    # (several of them only if that lone heading is itself over the limit).
    for chunk in chunks:
        if chunk.block_kind == "heading":
            siblings = [c for c in chunks if c.parent_start == chunk.parent_start]
            assert all(c.block_kind == "heading" for c in siblings)
            assert siblings[0].start == chunk.parent_start
            assert siblings[-1].end == chunk.parent_end

    assert all(
        c.block_kind
        in {"paragraph", "list_item", "code", "table", "heading", "quote", "html", "other", "mixed"}
        for c in chunks
    )


# --------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(body=any_body)
def test_properties_default_limits(body: str) -> None:
    chunks = chunk_markdown(body)
    check_invariants(body, chunks, DEFAULT_MAX_WORDS, DEFAULT_OVERLAP_WORDS)
    # Determinism: same call twice, and a slice-copied (fresh) string.
    assert chunk_markdown(body) == chunks
    assert chunk_markdown("".join(list(body))) == chunks
    if not body.strip():
        assert chunks == []


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(body=any_body, max_words=st.integers(1, 25), overlap=st.integers(0, 12))
def test_properties_small_limits(body: str, max_words: int, overlap: int) -> None:
    # Small limits force packing decisions and window splits on every body.
    chunks = chunk_markdown(body, max_words=max_words, overlap_words=overlap)
    check_invariants(body, chunks, max_words, overlap)
    assert chunk_markdown(body, max_words=max_words, overlap_words=overlap) == chunks


# Bodies that defeat a words-only bound: long runs without whitespace (table rows,
# paths, one giant "word"), with astral characters and combining marks in them.
_DENSE_PIECES = st.sampled_from(
    ["|x", "|", "x", "ab", "/", "é", "e\u0301", "👍🏽", "中", "\u200d", "-"]
)
dense_runs = st.lists(_DENSE_PIECES, min_size=1, max_size=80).map("".join)
dense_bodies = st.lists(
    st.one_of(dense_runs, sentences, st.sampled_from(["\n", "\r\n", "\n\n", " ", "# h\n"])),
    min_size=1,
    max_size=10,
).map("".join)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    body=st.one_of(any_body, dense_bodies),
    max_words=st.integers(1, 40),
    overlap=st.integers(0, 12),
    max_chars=st.integers(1, 60),
)
def test_properties_character_bound(
    body: str, max_words: int, overlap: int, max_chars: int
) -> None:
    # Small character bounds force character cuts inside blocks, words and emoji.
    chunks = chunk_markdown(body, max_words=max_words, overlap_words=overlap, max_chars=max_chars)
    check_invariants(body, chunks, max_words, overlap, max_chars)
    assert (
        chunk_markdown(body, max_words=max_words, overlap_words=overlap, max_chars=max_chars)
        == chunks
    )


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(body=markdown_bodies())
def test_properties_markdown_heading_paths(body: str) -> None:
    # Passages of one section share a heading path and the section's parent.
    chunks = chunk_markdown(body, max_words=8, overlap_words=2)
    by_parent: dict[tuple[int, int], set[tuple[str, ...]]] = {}
    for chunk in chunks:
        by_parent.setdefault((chunk.parent_start, chunk.parent_end), set()).add(chunk.heading_path)
    assert all(len(paths) == 1 for paths in by_parent.values())


@settings(max_examples=300, deadline=None)
@given(
    sentence_lengths=st.lists(st.integers(1, 30), min_size=1, max_size=40),
    max_words=st.integers(5, 60),
    overlap=st.integers(0, 10),
)
def test_properties_window_split(sentence_lengths: list[int], max_words: int, overlap: int) -> None:
    # One big paragraph: windows are balanced, word-aligned, and overlap exactly.
    body = " ".join(
        " ".join(f"w{i}_{j}" for j in range(n - 1)) + (" " if n > 1 else "") + f"end{i}."
        for i, n in enumerate(sentence_lengths)
    )
    total = word_count(body)
    chunks = chunk_markdown(body, max_words=max_words, overlap_words=overlap)
    check_invariants(body, chunks, max_words, overlap)
    expected_n = -(-total // max_words)
    assert len(chunks) == expected_n
    effective = min(overlap, max_words // 2)
    all_words = body.split()
    pos = 0
    for k, chunk in enumerate(chunks):
        chunk_words = chunk.text.split()
        if k:
            start = max(0, pos - effective)
            assert chunk_words[: pos - start] == all_words[start:pos]
            chunk_words = chunk_words[pos - start :]
        assert chunk_words == all_words[pos : pos + len(chunk_words)]
        pos += len(chunk_words)
    assert pos == total


def test_word_count() -> None:
    assert word_count("") == 0
    assert word_count("  one\ttwo\nthree\u2028four\u00a0five  ") == 5


# --------------------------------------------------------------------------
# Examples
# --------------------------------------------------------------------------


def test_empty_and_whitespace_bodies() -> None:
    assert chunk_markdown("") == []
    assert chunk_markdown(" \n\t\r\n \u2028\u3000 ") == []


def test_nested_heading_paths() -> None:
    body = (
        "# Guide\n\nIntro text.\n\n## Setup  \n\nInstall it.\n\n"
        "### Linux ###\n\nUse apt.\n\n## Usage\n\nRun it."
    )
    # Even with room to spare, passages never span two sections.
    chunks = chunk_markdown(body)
    paths = [(c.heading_path, c.text) for c in chunks]
    assert paths == [
        (("Guide",), "# Guide\n\nIntro text."),
        (("Guide", "Setup"), "## Setup  \n\nInstall it."),
        (("Guide", "Setup", "Linux"), "### Linux ###\n\nUse apt."),
        (("Guide", "Usage"), "## Usage\n\nRun it."),
    ]
    # The heading joins its section's first passage; the kind is its content's.
    assert [c.block_kind for c in chunks] == ["paragraph"] * 4
    setup = chunks[1]
    assert body[setup.parent_start : setup.parent_end] == "## Setup  \n\nInstall it."


def test_heading_markup_is_stripped() -> None:
    (chunk,) = chunk_markdown("## *Fancy* `code` [link](http://x)  ##\n\ntext")
    assert chunk.heading_path == ("Fancy code link",)


def test_heading_paths_are_bounded() -> None:
    """A heading path travels with every hit of its section, so a 1 MB heading
    line is cut in the path (its text stays, whole, in the passages)."""
    body = "# " + "head " * 200_000 + "\n\n## *Short* one\n\nA paragraph about otters.\n"
    chunks = chunk_markdown(body)
    last = chunks[-1]
    assert last.text.endswith("otters.")
    first, second = last.heading_path
    assert len(first) == MAX_HEADING_CHARS and first.endswith("…")
    assert first.startswith("head head") and second == "Short one"
    assert all(len(h) <= MAX_HEADING_CHARS for c in chunks for h in c.heading_path)
    assert chunks[0].start == 0 and chunks[0].text.startswith("# head head")


def test_preamble_before_first_heading_has_empty_path() -> None:
    chunks = chunk_markdown("Preamble.\n\n# Title\n\nBody.")
    assert [(c.heading_path, c.text) for c in chunks] == [
        ((), "Preamble."),
        (("Title",), "# Title\n\nBody."),
    ]


def test_empty_section_heading_stands_alone() -> None:
    chunks = chunk_markdown("# A\n\n# B\n\ntext")
    assert [(c.block_kind, c.text) for c in chunks] == [
        ("heading", "# A"),
        ("paragraph", "# B\n\ntext"),
    ]


def test_list_items_are_blocks_with_nested_lists_inside() -> None:
    body = "- alpha one\n  - nested two\n- beta three\n- gamma four\n"
    # Markers count as words: the items have 6, 3 and 3 words.
    chunks = chunk_markdown(body, max_words=6, overlap_words=0)
    assert [(c.block_kind, c.text) for c in chunks] == [
        ("list_item", "- alpha one\n  - nested two"),
        ("list_item", "- beta three\n- gamma four"),
    ]
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 2), (3, 4)]


def test_fenced_code_with_hash_line_is_not_a_heading() -> None:
    code = "```python\n# not a heading\nprint('hi')\n```"
    body = f"# Real\n\nBefore.\n\n{code}\n\nAfter."
    chunks = chunk_markdown(body, max_words=7, overlap_words=0)  # the fence has 7 words
    assert all(c.heading_path == ("Real",) for c in chunks)
    code_chunks = [c for c in chunks if c.block_kind == "code"]
    assert [c.text for c in code_chunks] == [code]
    assert len({(c.parent_start, c.parent_end) for c in chunks}) == 1


def test_unclosed_fence_runs_to_end() -> None:
    body = "Text.\n\n```\n# still code\n\nmore"
    chunks = chunk_markdown(body, max_words=5, overlap_words=0)
    assert [(c.block_kind, c.text) for c in chunks] == [
        ("paragraph", "Text."),
        ("code", "```\n# still code\n\nmore"),
    ]
    assert all(c.heading_path == () for c in chunks)


def test_table_is_one_block() -> None:
    table = "| name | value |\n|------|-------|\n| a | 1 |\n| b | 2 |"
    body = f"Some intro words here.\n\n{table}\n"
    chunks = chunk_markdown(body, max_words=16, overlap_words=0)  # the table has 16 words
    assert [(c.block_kind, c.text) for c in chunks] == [
        ("paragraph", "Some intro words here."),
        ("table", table),
    ]
    assert (chunks[1].start_line, chunks[1].end_line) == (3, 6)


def test_mixed_kinds_pack_together() -> None:
    body = "Para.\n\n- item\n\n> quote"
    (chunk,) = chunk_markdown(body)
    assert chunk.block_kind == "mixed"
    assert chunk.text == body


def test_link_reference_definitions_are_covered_as_other() -> None:
    body = "[ref]: http://example.com\n\nParagraph text."
    chunks = chunk_markdown(body, max_words=2, overlap_words=0)
    assert [(c.block_kind, c.text) for c in chunks] == [
        ("other", "[ref]: http://example.com"),
        ("paragraph", "Paragraph text."),
    ]


def test_700_word_paragraph_splits_into_four_balanced_windows() -> None:
    words = [f"w{i}" for i in range(700)]
    body = " ".join(words)
    chunks = chunk_markdown(body)  # defaults: 200 words, 20 overlap
    assert len(chunks) == 4
    counts = [word_count(c.text) for c in chunks]
    # 700 / 4 = 175 fresh words per window, later windows carry 20 overlap words.
    assert counts == [175, 195, 195, 195]
    for prev, nxt in itertools.pairwise(chunks):
        assert prev.text.split()[-20:] == nxt.text.split()[:20]
        assert nxt.start < prev.end  # the windows overlap in the body too
    assert chunks[-1].text.split()[-1] == "w699"
    assert {c.block_kind for c in chunks} == {"paragraph"}
    assert all((c.parent_start, c.parent_end) == (0, len(body)) for c in chunks)


def test_window_cuts_snap_to_sentence_ends() -> None:
    # 30 sentences of 20 words (600 words): 3 windows, cuts at 200 and 400 would
    # land on sentence ends anyway; shift by one word so snapping must move them.
    sentences = [" ".join(["x"] * 19 + [f"s{i}."]) for i in range(30)]
    body = "lead " + " ".join(sentences)  # 601 words -> 4 windows of ~150
    chunks = chunk_markdown(body, overlap_words=0)
    assert len(chunks) == 4
    for chunk in chunks[:-1]:
        assert chunk.text.endswith(".")
    counts = [word_count(c.text) for c in chunks]
    assert sum(counts) == 601
    assert max(counts) - min(counts) <= 50  # balanced, no tiny tail


def test_heading_with_oversized_block_goes_into_first_window() -> None:
    body = "# Title words\n\n" + " ".join(f"w{i}" for i in range(300))
    chunks = chunk_markdown(body)
    assert len(chunks) == 2
    assert chunks[0].text.startswith("# Title words\n\nw0")
    assert all(c.block_kind == "paragraph" for c in chunks)


def test_crlf_document() -> None:
    body = "# Title\r\n\r\nFirst para\r\nstill first.\r\n\r\n## Sub\r\n\r\nSecond.\r\n"
    chunks = chunk_markdown(body)
    assert [(c.heading_path, c.text, c.start_line, c.end_line) for c in chunks] == [
        (("Title",), "# Title\r\n\r\nFirst para\r\nstill first.", 1, 4),
        (("Title", "Sub"), "## Sub\r\n\r\nSecond.", 6, 8),
    ]


def test_lone_cr_and_unicode_line_separators() -> None:
    # \r alone is a break; \u2028 and \x0c are not (markdown-it agrees).
    body = "a\rb\u2028c\x0cd\r\re"
    chunks = chunk_markdown(body, max_words=1, overlap_words=0)
    # One paragraph over lines 1-2 (split into 1-word windows), then "e" on line 4.
    assert [(c.text, c.start_line, c.end_line) for c in chunks] == [
        ("a", 1, 1),
        ("b", 2, 2),
        ("c", 2, 2),
        ("d", 2, 2),
        ("e", 4, 4),
    ]


def test_offsets_are_code_points_with_emoji_and_combining_marks() -> None:
    body = "# Cafe\u0301 👍🏽\n\nThumbs 👍🏽 up.\n\nNai\u0308ve second paragraph."
    chunks = chunk_markdown(body, max_words=6, overlap_words=0)
    assert [c.text for c in chunks] == [
        "# Cafe\u0301 👍🏽\n\nThumbs 👍🏽 up.",
        "Nai\u0308ve second paragraph.",
    ]
    assert chunks[1].start == body.index("Nai\u0308ve")
    assert chunks[0].heading_path == ("Cafe\u0301 👍🏽",)
    for chunk in chunks:
        assert body[chunk.start : chunk.end] == chunk.text


def test_nul_character_keeps_offsets() -> None:
    body = "# T\x00x\n\nbody\x00text"
    (chunk,) = chunk_markdown(body)
    assert chunk.text == body
    assert chunk.heading_path == ("T\ufffdx",)  # markdown-it's NUL replacement


def test_setext_headings() -> None:
    body = "Main Title\n==========\n\nIntro.\n\nSub Title\n---------\n\nDetail."
    chunks = chunk_markdown(body)
    assert [(c.heading_path, c.text) for c in chunks] == [
        (("Main Title",), "Main Title\n==========\n\nIntro."),
        (("Main Title", "Sub Title"), "Sub Title\n---------\n\nDetail."),
    ]


def test_invalid_limits() -> None:
    with pytest.raises(ValueError):
        chunk_markdown("x", max_chars=0)
    with pytest.raises(ValueError):
        chunk_markdown("x", max_words=0)
    with pytest.raises(ValueError):
        chunk_markdown("x", overlap_words=-1)


# --------------------------------------------------------------------------
# The character bound
# --------------------------------------------------------------------------


def test_one_long_table_line_is_cut_before_its_pipes() -> None:
    # Once one passage of 1,800,000 characters: now pieces within the bound,
    # cut before a "|" so every "x" cell stays whole.
    body = "|x" * 900_000
    chunks = chunk_markdown(body)
    assert all(body[c.start : c.end] == c.text for c in chunks)
    assert len(chunks) == 900
    assert all(c.text.startswith("|x") and c.text.endswith("x") for c in chunks)
    assert max(len(c.text) for c in chunks) == DEFAULT_MAX_CHARS
    assert "".join(c.text for c in chunks) == body  # no overlap, nothing dropped


def test_a_giant_word_is_cut_hard_at_the_bound() -> None:
    body = "a" * 2_000_000
    chunks = chunk_markdown(body)
    assert [len(c.text) for c in chunks] == [DEFAULT_MAX_CHARS] * 1000
    assert "".join(c.text for c in chunks) == body


def test_character_cuts_prefer_whitespace_near_the_bound() -> None:
    # 30 words of 9 characters and a space: a 300-character paragraph, 30 words.
    body = " ".join(f"word{i:05d}" for i in range(30))
    chunks = chunk_markdown(body, max_chars=100)
    check_invariants(body, chunks, DEFAULT_MAX_WORDS, DEFAULT_OVERLAP_WORDS, 100)
    assert [c.text.split()[0] for c in chunks] == ["word00000", "word00010", "word00020"]
    assert all(len(c.text) == 99 for c in chunks)  # ten whole words each
    assert all(w.startswith("word") and len(w) == 9 for c in chunks for w in c.text.split())


def test_hard_cuts_keep_code_points_and_combining_marks() -> None:
    # Astral emoji (two UTF-16 units each) and "e" + combining acute, no break.
    body = "👍" * 7 + "e\u0301" * 10
    chunks = chunk_markdown(body, max_chars=8)
    check_invariants(body, chunks, DEFAULT_MAX_WORDS, DEFAULT_OVERLAP_WORDS, 8)
    assert "".join(c.text for c in chunks) == body
    assert not any(unicodedata.combining(c.text[0]) for c in chunks)
    for chunk in chunks:
        chunk.text.encode("utf-16-le")  # whole code points: always encodable


def test_blocks_start_new_passages_at_the_character_bound() -> None:
    # Three 60-character paragraphs with a bound of 130: two fit, the third starts a
    # new passage whole instead of being cut mid-paragraph.
    paragraph = "x" * 59 + "."
    body = "\n\n".join([paragraph] * 3)
    chunks = chunk_markdown(body, max_chars=130)
    assert [c.text for c in chunks] == [f"{paragraph}\n\n{paragraph}", paragraph]


def test_ordinary_prose_is_not_split_by_the_default_character_bound() -> None:
    # 200 words of scientific prose (SciFact passages: longest 1,708 characters).
    words = ["mitochondrial", "dysfunction", "in", "patients", "with", "chronic", "disease."]
    body = " ".join(itertools.islice(itertools.cycle(words), DEFAULT_MAX_WORDS))
    assert len(body) < DEFAULT_MAX_CHARS
    (chunk,) = chunk_markdown(body)
    assert chunk.text == body
