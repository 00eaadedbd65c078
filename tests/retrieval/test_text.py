"""The text primitives of retrieval/text/ and the word lists of retrieval/words/: what each one
does with unicode, punctuation, digits, apostrophes, hyphens and empty text — and a check of the
source tree that no module grows its own copy of one again (every stage must tokenise the same
way).

Pure: no database, no network. The SciFact test reads ../shared/data when it is there and is
skipped otherwise.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import json
import re
import sys
import unicodedata
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.text.markdown import quotable_blocks
from retrieval.text.negation import (
    NT_CONTRACTION_RE,
    NT_SUFFIX_RE,
    negation_cue_counts,
    negation_cues,
)
from retrieval.text.normalise import nfc_collapsed, nfc_collapsed_with_offsets, nfkc_folded
from retrieval.text.sentences import (
    MAX_SENTENCE_CHARS,
    SENTENCE_END_WORD_RE,
    sentence_spans,
    split_sentences,
)
from retrieval.text.stemming import fold, folded_tokens
from retrieval.text.tokens import (
    LINE_BREAK_RE,
    SPACED_WORD_RE,
    TOKEN_RE,
    WHITESPACE_RE,
    WORD_RE,
    nfc_tokens,
    token_strings,
    tokens,
)
from retrieval.words.negation import CONFLICT_NEGATIONS, NEGATION_TOKENS, NEGATION_WORDS
from retrieval.words.stopwords import (
    EXTRACTIVE_STOPWORDS,
    GLUE_WORDS,
    QUERY_STOPWORDS,
    QUESTION_FILLER_WORDS,
)
from tests.factories import HOSTILE_BODIES, REPO_ROOT, project_modules

SCIFACT_CORPUS = REPO_ROOT.parent / "shared" / "data" / "scifact" / "corpus.jsonl"


# --- words and tokens -------------------------------------------------------------------------


def test_tokens_are_nfkc_casefolded_letter_digit_runs() -> None:
    assert tokens("Café IL-6 ERR_SSL v2.0") == ("café", "il", "6", "err", "ssl", "v2", "0")
    assert tokens("don't won’t") == ("don", "t", "won", "t")  # apostrophes split
    assert tokens("anti\u2010inflammatory long-term") == ("anti", "inflammatory", "long", "term")
    assert tokens("ﬁne m² Ｆｕｌｌ") == ("fine", "m2", "full")  # compatibility forms unfolded
    assert tokens("Cafe\u0301") == ("café",)  # a decomposed é is one letter after NFKC
    assert tokens("Straße İ") == ("strasse", "i\u0307")
    assert tokens("") == ()
    assert tokens(" -- !? ") == ()


def test_ascii_text_takes_a_shortcut_to_the_same_tokens() -> None:
    """ASCII text is folded in one pass; it must give what the general path gives, on every
    ASCII character (boundaries, digits, "_", case) and on text mixing them."""

    def general(value: str) -> tuple[str, ...]:
        return tuple(m.group(0).casefold() for m in WORD_RE.finditer(value))

    every_ascii = "".join(map(chr, range(128)))
    samples = [every_ascii, every_ascii[::-1], "ERR_SSL v2.0 IL-6 x_y_Z9 don't", "A" * 50]
    samples += [every_ascii[i::7] for i in range(7)]
    for sample in samples:
        assert sample.isascii()
        assert tokens(sample) == general(sample), sample
    assert tokens("Straße rotate") == ("strasse", "rotate")  # not ASCII: the general path

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
    def any_ascii(sample: str) -> None:
        assert tokens(sample) == general(sample)

    any_ascii()


def test_token_strings_are_token_re_matches_on_every_text() -> None:
    every_ascii = "".join(map(chr, range(128)))
    for sample in (
        every_ascii,
        every_ascii[::-1],
        "ERR_SSL v2.0 IL-6 x_y_Z9",
        "Café e\u0301 \ue000x",
    ):
        assert token_strings(sample) == TOKEN_RE.findall(sample), sample

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
    def any_ascii(sample: str) -> None:
        assert token_strings(sample) == TOKEN_RE.findall(sample)

    any_ascii()


def test_nfc_tokens_keep_compatibility_characters() -> None:
    """The gate's tokens: NFC, so "m²" stays "m²" — the one difference from `tokens`."""
    assert nfc_tokens("Cafe\u0301 au lait") == ["café", "au", "lait"]
    assert nfc_tokens("m² H₂O₂ l'été") == ["m²", "h₂o₂", "l", "été"]
    assert tokens("m² H₂O₂") == ("m2", "h2o2")
    assert nfc_tokens("maxmemory-policy allkeys_lru, DNS-01!") == [
        "maxmemory",
        "policy",
        "allkeys",
        "lru",
        "dns",
        "01",
    ]
    assert nfc_tokens("") == []


def test_token_re_keeps_combining_marks_and_private_use_characters() -> None:
    # WORD_RE on raw text drops a combining mark (it is not alphanumeric); TOKEN_RE keeps it
    # inside the token, as FTS5's unicode61 does before removing diacritics.
    assert WORD_RE.findall("cafe\u0301") == ["cafe"]
    assert TOKEN_RE.findall("cafe\u0301 \ue000ab x_y 3.5") == [
        "cafe\u0301",
        "\ue000ab",
        "x",
        "y",
        "3",
        "5",
    ]
    assert TOKEN_RE.findall("") == []


def test_fold_is_the_index_form_of_a_token() -> None:
    assert fold("Café") == fold("cafe") == fold("CAFE\u0301") == "cafe"
    assert fold("Deploying") == fold("deployed") == fold("deploys") == "deploy"
    assert fold("ﬁne") == fold("fine")
    assert fold("İstanbul") == fold("istanbul")
    assert fold("30") == "30"
    assert fold("") == ""


def test_folded_tokens_are_the_stems_of_every_token() -> None:
    assert folded_tokens("The deployed caches, e.g. Café's") == [
        "the",
        "deploy",
        "cach",
        "e",
        "g",
        "cafe",
        "s",
    ]
    assert folded_tokens("") == []


def test_whitespace_patterns_agree_with_str_split_on_every_code_point() -> None:
    """Why `nfc_collapsed` (regex) and `" ".join(s.split())` are one normaliser: Python's \\s
    and str.isspace() name the same characters. Checked over all of Unicode."""
    disagree = [
        hex(cp)
        for cp in range(sys.maxunicode + 1)
        if not 0xD800 <= cp <= 0xDFFF
        and bool(WHITESPACE_RE.fullmatch(chr(cp))) != chr(cp).isspace()
    ]
    assert disagree == []
    sample = "\u2028 a\u00a0\u00a0b\x1c c\t\n"
    assert WHITESPACE_RE.sub(" ", sample).strip() == " ".join(sample.split()) == "a b c"
    assert len(SPACED_WORD_RE.findall(sample)) == len(sample.split()) == 3


def test_line_breaks_are_the_three_markdown_it_counts() -> None:
    found = [m.group() for m in LINE_BREAK_RE.finditer("a\r\nb\rc\nd\u2028e\x0bf\x1cg")]
    assert found == ["\r\n", "\r", "\n"]


# --- stop words -----------------------------------------------------------------------------------


def _digest(words: frozenset[str]) -> str:
    return hashlib.sha256(" ".join(sorted(words)).encode()).hexdigest()[:16]


def test_word_lists_are_pinned() -> None:
    """The SciFact retrieval and gate figures were measured with exactly these lists (each
    equal to the copy it replaced); a change to any of them is a change of behaviour, to be
    measured and then re-pinned here."""
    lists = {
        "QUERY_STOPWORDS": QUERY_STOPWORDS,
        "GLUE_WORDS": GLUE_WORDS,
        "EXTRACTIVE_STOPWORDS": EXTRACTIVE_STOPWORDS,
        "QUESTION_FILLER_WORDS": QUESTION_FILLER_WORDS,
        "NEGATION_WORDS": NEGATION_WORDS,
        "CONFLICT_NEGATIONS": CONFLICT_NEGATIONS,
        "NEGATION_TOKENS": NEGATION_TOKENS,
    }
    assert {name: (len(words), _digest(words)) for name, words in lists.items()} == {
        "QUERY_STOPWORDS": (34, "e3784970518a48be"),
        "GLUE_WORDS": (11, "1bb01d7866c5b6f8"),
        "EXTRACTIVE_STOPWORDS": (104, "ffa3213da2738efd"),
        "QUESTION_FILLER_WORDS": (126, "4705b80d3ce6de17"),
        "NEGATION_WORDS": (10, "c319eafc3046b874"),
        "CONFLICT_NEGATIONS": (24, "dbd5b3f739a15307"),
        "NEGATION_TOKENS": (28, "592539a9e7e96889"),
    }


def test_stop_words_never_swallow_negations_or_numbers_where_they_matter() -> None:
    # Search keeps "not" and "no" as terms; the gate never ignores a negation.
    assert not (NEGATION_WORDS & QUERY_STOPWORDS)
    assert not (NEGATION_WORDS & GLUE_WORDS)
    assert {"a", "an", "the", "be", "am", "is", "are", "was", "were", "been", "being"} == GLUE_WORDS
    for words in (QUERY_STOPWORDS, GLUE_WORDS, EXTRACTIVE_STOPWORDS, QUESTION_FILLER_WORDS):
        assert all(w == w.casefold() and w.isalpha() for w in words)
    # The four lists differ on purpose (retrieval/words/stopwords.py says why): these are the
    # words that tell them apart, so a merge would show here.
    assert "not" in EXTRACTIVE_STOPWORDS and "not" in QUESTION_FILLER_WORDS
    assert "will" in QUERY_STOPWORDS and "will" not in QUESTION_FILLER_WORDS
    assert "fix" in QUESTION_FILLER_WORDS and "fix" not in EXTRACTIVE_STOPWORDS
    assert "notes" in EXTRACTIVE_STOPWORDS and "notes" not in QUERY_STOPWORDS


# --- negation -------------------------------------------------------------------------------------


def test_negation_cue_counts_words_and_every_apostrophe() -> None:
    assert negation_cue_counts("It isn't not NOT; DON’T, donʼt won't") == Counter(
        {"not": 2, "don't": 2, "isn't": 1, "won't": 1}
    )
    assert negation_cues("Don won the race; the nothing-burger") == {"nothing"}
    assert negation_cues("knot notes nonetheless 0 no.") == {"no"}
    assert negation_cue_counts("") == Counter()


def test_contraction_patterns_differ_as_documented() -> None:
    # The gate's cue needs a word before "n't" and ignores case; conflict detection's does not.
    assert NT_CONTRACTION_RE.search("DON'T") and not NT_SUFFIX_RE.search("DON'T")
    assert NT_SUFFIX_RE.search("n't") and not NT_CONTRACTION_RE.search(" n't")
    assert NT_CONTRACTION_RE.search("wasnʼt") and NT_SUFFIX_RE.search("wasnʼt")
    assert not NT_CONTRACTION_RE.search("want") and not NT_SUFFIX_RE.search("want")


def test_negation_lists_nest() -> None:
    assert NEGATION_WORDS < CONFLICT_NEGATIONS < NEGATION_TOKENS
    assert {"mustn", "needn", "ain", "t"} == NEGATION_TOKENS - CONFLICT_NEGATIONS
    # Every "n't" stem is what the tokenizer leaves of a contraction.
    for stem in CONFLICT_NEGATIONS - NEGATION_WORDS:
        assert tokens(f"{stem}'t") == (stem, "t")


# --- sentences ------------------------------------------------------------------------------------


def test_sentence_spans_cut_at_terminal_punctuation_and_line_ends() -> None:
    body = "  The ratio was 1.29, CI 1.02 to 1.63. Next one; and\nthird line  "
    assert [body[a:b] for a, b in sentence_spans(body)] == [
        "The ratio was 1.29, CI 1.02 to 1.63.",
        "Next one;",
        "and",
        "third line",
    ]
    assert sentence_spans("") == []
    assert sentence_spans(" \n\t ") == []


def test_split_sentences_knows_markdown_and_abbreviations() -> None:
    body = (
        "# Title\n\nSee Fig. 2 and e.g. the J. Smith study. It “works.” Then this!\n\n"
        "- item one. item two\n\n```\ncode. here\n```\n"
    )
    sentences = split_sentences(body)
    assert [s.text for s in sentences] == [
        "See Fig. 2 and e.g. the J. Smith study.",
        "It “works.”",
        "Then this!",
        "item one.",
        "item two",
    ]  # code is never quoted (see retrieval/text/sentences.py, quotable units)
    assert all(body[s.start : s.end] == s.text for s in sentences)
    assert split_sentences("") == []
    assert split_sentences("# only a heading\n") == []


def test_sentence_end_word_is_the_chunkers_snap_point() -> None:
    for word in ("end.", "end!", "end?", "end.”", "end.»", "(end.)", "end.'"):
        assert SENTENCE_END_WORD_RE.search(word), word
    for word in ("e.g", "1.29", "end", "end:"):
        assert not SENTENCE_END_WORD_RE.search(word), word


# --- normalisers ----------------------------------------------------------------------------------


def test_nfc_collapsed_composes_collapses_and_keeps_case() -> None:
    decomposed = " Cafe\u0301\u00a0au\u2028LAIT\t "
    assert nfc_collapsed(decomposed) == "Café au LAIT"
    assert nfc_collapsed(decomposed) == unicodedata.normalize("NFC", "Café au LAIT")
    assert nfc_collapsed("ﬁne ²") == "ﬁne ²"  # NFC, not NFKC
    assert nfc_collapsed(" \n ") == ""


def test_nfc_collapsed_with_offsets_maps_back_to_the_body() -> None:
    body = " a\u0301  b\n"
    out, starts, ends = nfc_collapsed_with_offsets(body)
    assert out == " á b "  # ends are not trimmed: offsets stay aligned with the body
    assert out.strip() == nfc_collapsed(body)
    assert [body[s:e] for s, e in zip(starts, ends, strict=True)] == [
        " ",
        "a\u0301",
        "  ",
        "b",
        "\n",
    ]
    assert nfc_collapsed_with_offsets("") == ("", [], [])


def test_nfkc_folded_folds_width_case_and_whitespace() -> None:
    assert nfkc_folded("  Ａｂｃ \u00a0 DEF\n\tghi ") == "abc def ghi"
    assert nfkc_folded("Straße") == "strasse"
    assert nfkc_folded("ﬁne ²") == "fine 2"
    assert nfkc_folded("") == ""


@pytest.mark.slow
@pytest.mark.skipif(not SCIFACT_CORPUS.is_file(), reason="SciFact data is not checked out")
def test_scifact_corpus_why_two_token_forms_and_one_whitespace_rule() -> None:
    """On the SciFact corpus: the gate's normaliser equals the split/join form the answer page
    used (so merging them moved nothing), while NFC and NFKC tokens really differ (so `tokens`
    and `nfc_tokens` stay two primitives: merging them would move the figures)."""
    differing = 0
    with SCIFACT_CORPUS.open(encoding="utf-8") as corpus:
        for line in corpus:
            document = json.loads(line)
            for field in (document["title"], document["text"]):
                nfc = unicodedata.normalize("NFC", field)
                assert nfc_collapsed(field) == " ".join(nfc.split())
                if list(tokens(field)) != nfc_tokens(field):
                    differing += 1
    assert differing == 17


# --- no copies outside retrieval/text/ and retrieval/words/ -------------------------------------

# The primitives' home: the text package and the word lists.
HOME_PACKAGES = (REPO_ROOT / "retrieval" / "text", REPO_ROOT / "retrieval" / "words")
HOME_MODULES = tuple(
    importlib.import_module(name)
    for name, path in project_modules().items()
    if any(path.is_relative_to(package) for package in HOME_PACKAGES)
)
# Names the primitives had before they moved here; a new definition under one is a copy.
FORMER_NAMES = frozenset(
    {"normalise", "normalised_text", "sentences", "_normalised_with_map", "_stemmer", "_words"}
)
WORD_LIST_NAME_RE = re.compile(r"STOP_?WORDS|NEGATION|GLUE_WORDS|FILLER_WORDS|ABBREVIATION", re.I)
RE_FUNCTIONS = frozenset({"compile", "search", "match", "fullmatch", "finditer", "findall", "sub"})
# The letter/digit run every word pattern is built from.
WORD_RUN = r"[^\W_]+"


def _unescaped(pattern: str) -> str:
    """A pattern with \\uXXXX escapes written as the characters (so r"\\u2019" equals "’")."""
    return re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), pattern)


@cache
def _primitive_patterns() -> frozenset[str]:
    return frozenset(
        _unescaped(value.pattern)
        for module in HOME_MODULES
        for value in vars(module).values()
        if isinstance(value, re.Pattern)
    )


@cache
def _primitive_functions() -> frozenset[str]:
    defined = {
        name
        for module in HOME_MODULES
        for name, value in vars(module).items()
        if callable(value) and getattr(value, "__module__", "") == module.__name__
    }
    return frozenset(defined) | FORMER_NAMES


def _calls_normalize(node: ast.AST) -> bool:
    return any(
        isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Attribute)
        and inner.func.attr == "normalize"
        for inner in ast.walk(node)
    )


def text_copies(path: Path) -> list[str]:
    """Every place in `path` that re-defines a text primitive: a word list named like one, a
    function named like one, a regex equal to one (or built on the letter/digit run), or a
    Unicode-normalise-then-collapse expression."""
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    patterns, functions = _primitive_patterns(), _primitive_functions()
    name = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    found: list[str] = []
    for node in ast.walk(tree):
        where = f"{name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and WORD_LIST_NAME_RE.search(target.id):
                    found.append(f"{where} word list {target.id}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in functions:
            found.append(f"{where} function {node.name}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            is_re = isinstance(func.value, ast.Name) and func.value.id == "re"
            if is_re and func.attr in RE_FUNCTIONS and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    pattern = _unescaped(first.value)
                    if pattern in patterns or WORD_RUN in pattern:
                        found.append(f"{where} pattern {first.value!r}")
            joins_spaces = (
                func.attr == "join"
                and isinstance(func.value, ast.Constant)
                and func.value.value == " "
            )
            if (joins_spaces or func.attr == "sub") and any(map(_calls_normalize, node.args)):
                found.append(f"{where} normaliser {ast.unparse(node)[:60]}")
    return found


def source_files() -> list[Path]:
    files = [
        path
        for path in project_modules().values()
        if not any(path.is_relative_to(package) for package in HOME_PACKAGES)
    ]
    files += sorted((REPO_ROOT / "bench").rglob("*.py"))
    return files


def test_no_module_redefines_a_text_primitive() -> None:
    copies = [copy for path in source_files() for copy in text_copies(path)]
    assert copies == [], "\n".join(copies)


def word_lists_outside_their_home(path: Path) -> list[str]:
    """Every word list `path` builds with `word_set`: lists live in retrieval/words/ only."""
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    return [
        f"{path.name}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "word_set"
    ]


def test_word_lists_are_built_only_in_retrieval_words(tmp_path: Path) -> None:
    found = [where for path in source_files() for where in word_lists_outside_their_home(path)]
    assert found == [], "\n".join(found)
    planted = tmp_path / "planted.py"
    planted.write_text("from retrieval.words.word_set import word_set\nX = word_set('a b')\n")
    assert word_lists_outside_their_home(planted) == ["planted.py:2"]


def test_the_copy_check_finds_planted_copies(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import re, unicodedata\n"
        "STOPWORDS = frozenset({'a'})\n"
        "NEGATIONS = ('not',)\n"
        "WORD = re.compile(r'[^\\W_]+')\n"
        "COMPOUND = re.compile(r'[^\\W_]+(?:-[^\\W_]+)+')\n"
        "SPACE = re.compile(r'\\s+')\n"
        'SUFFIX = re.compile(r"n[\'\u2019\u02bc]t\\b")\n'
        "def normalise(s):\n"
        "    return ' '.join(unicodedata.normalize('NFC', s).split())\n"
        "def fold(t):\n"
        "    return t\n"
    )
    found = text_copies(planted)
    kinds = Counter(entry.split(" ")[1] for entry in found)
    assert kinds == Counter({"word": 2, "pattern": 4, "function": 2, "normaliser": 1}), found
    # Rules that only look like a primitive are left alone.
    allowed = tmp_path / "allowed.py"
    allowed.write_text(
        "import re\n"
        "TAG_RE = re.compile(r'^[^\\W_][\\w-]*$')\n"
        "STATE_WORDS = frozenset({'on'})\n"
        "def token_set(t):\n"
        "    return t\n"
    )
    assert text_copies(allowed) == []


# --- quotable units -------------------------------------------------------------


def _texts(body: str) -> list[str]:
    sentences = split_sentences(body)
    assert all(body[s.start : s.end] == s.text for s in sentences)  # exact stored characters
    return [s.text for s in sentences]


def test_a_line_structured_note_is_one_unit_per_line() -> None:
    # A contact card: Markdown would join these lines into one paragraph, but each is a fact.
    card = "Dana Whitfield\nPhone: +1 555 0134\nEmail: dana.whitfield@example.com\n"
    assert _texts(card) == [
        "Dana Whitfield",
        "Phone: +1 555 0134",
        "Email: dana.whitfield@example.com",
    ]
    # Labelled lines are fields even after a long (full-looking) line; CRLF counts as a break.
    steps = (
        "Dana Whitfield, head of facilities for buildings B and C at the north site\r\n"
        "Step 1: stop the pumps\r\nStep 2: drain the tank\r\n"
    )
    assert _texts(steps) == [
        "Dana Whitfield, head of facilities for buildings B and C at the north site",
        "Step 1: stop the pumps",
        "Step 2: drain the tank",
    ]
    # The longest line first: still one unit per line (the next one is too short to be wrapped).
    contacts = (
        "Dr. Anna Weiss, dentist, Praxis am Mehringdamm: +49 30 5550 1782 (check-up in March)\n"
        "Herr Yilmaz, caretaker, for the heating: +49 151 5550 3344\n"
        "2026-10-04  8.2 km  48:10  easy run\n"
    )
    assert len(_texts(contacts)) == 3 and all("\n" not in t for t in _texts(contacts))
    # An explicit Markdown hard break (two spaces, or a backslash) ends the unit too.
    assert _texts("first line of it  \nsecond line\\\nthird line") == [
        "first line of it",
        "second line",
        "third line",
    ]


def test_wrapped_prose_stays_one_sentence() -> None:
    wrapped = (
        "The nightly backups moved from 02:00 to 03:30 UTC after the storage migration in\n"
        "October, and Dana Whitfield from the platform team now owns the restore drill with\n"
        "Priya.\n"
    )
    assert _texts(wrapped) == [wrapped.strip()]  # a full line, then a capital: wrapped
    # Wrapped near 100 columns, a line that starts with a number or a code span included.
    ops = (
        "Mei showed the graphs from the last two weeks. The nightly differential backup starts at\n"
        "02:00 UTC and reads heavily from `db-1`; the export starts at 02:15 UTC on the replica,\n"
        "Jobs live in a table, and on four nights out of fourteen the workers claimed them with\n"
        "`SELECT id FOR UPDATE SKIP LOCKED LIMIT 10` after the backup finished a first pass.\n"
    )
    assert _texts(ops) == [
        ops[: ops.index(" The nightly")],
        ops[ops.index("The nightly") :].strip(),
    ]
    assert _texts("A sentence wrapped\nover two lines. Next one!") == [
        "A sentence wrapped\nover two lines.",
        "Next one!",
    ]
    assert _texts("Ports 80,\n443 and 8443 are open.") == ["Ports 80,\n443 and 8443 are open."]


MARKDOWN_NOTE = """# Failover runbook

## Promote the replica

1. Stop writes to the primary
2. Promote the replica with `pg_ctl promote`
    1. Check the replica lag first
    2. Keep the old primary fenced
3) Repoint the application
   at the new primary

- [ ] Tell the on-call channel
* **Bold** bullet item
+ plus item
  - nested two spaces
      - nested deeper

> Quoted advice here
> - quoted list item

| Host | Role |
|------|------|
| db1 | primary |
| db2 | replica |

Setext heading
--------------

```sh
pg_ctl promote -D /var/lib/postgresql/data
```

    indented code line

<div>html block text</div>
"""

MARKDOWN_UNITS = [
    "Stop writes to the primary",
    "Promote the replica with `pg_ctl promote`",
    "Check the replica lag first",
    "Keep the old primary fenced",
    "Repoint the application\n   at the new primary",
    "Tell the on-call channel",
    "**Bold** bullet item",
    "plus item",
    "nested two spaces",
    "nested deeper",
    "Quoted advice here",
    "quoted list item",
    "db1 | primary",
    "db2 | replica",
]


def test_markdown_units_start_at_content_and_stay_in_one_item() -> None:
    # Headings, code (fenced or indented), HTML and a table's header row are never units; list
    # markers, task boxes, ">" and a row's outer pipes stay out of the span.
    assert _texts(MARKDOWN_NOTE) == MARKDOWN_UNITS
    assert [b.kind for b in quotable_blocks(MARKDOWN_NOTE)] == [
        *["list_item"] * 10,
        "quote",
        "list_item",
        "table_row",
        "table_row",
    ]


LIST_MARKERS = ["- ", "* ", "+ ", "1. ", "2) ", "10. ", "- [ ] ", "- [x] ", "> - ", "> 1. "]


def test_a_quote_never_starts_with_markup_or_spans_two_items() -> None:
    # Every marker at every nesting depth, with and without terminal punctuation: each item's
    # content is exactly one unit (or its sentences), never joined to the next item.
    for marker in LIST_MARKERS:
        for indent in ("", "  ", "    ", "        "):
            items = [f"item {n} says the pump {'stops.' if n % 2 else 'runs'}" for n in range(4)]
            lines = [f"{indent if n % 2 else ''}{marker}{item}" for n, item in enumerate(items)]
            body = "\n".join(lines) + "\n"
            texts = _texts(body)
            assert all(t in items for t in texts), (marker, indent, texts)
            for t in texts:
                assert not re.match(r"(?:[-*+>#|]|\d+[.)])\s", t), (marker, indent, t)


def test_a_long_unit_is_cut_at_clause_punctuation_or_dropped() -> None:
    clauses = ", ".join(f"the pump in hall {n} was serviced in week {n}" for n in range(80))
    assert len(clauses) > 3000 and "\n" not in clauses
    pieces = split_sentences(clauses)
    assert len(pieces) > 1
    assert all(len(p.text) <= MAX_SENTENCE_CHARS for p in pieces)
    assert all(clauses[p.start : p.end] == p.text and not p.text.endswith(",") for p in pieces)
    # Together the pieces keep every clause.
    assert sum(p.text.count("serviced") for p in pieces) == 80
    # 3,000 characters with no punctuation at all are not a sentence anyone quotes.
    assert split_sentences("word " * 600) == []
    # A long sentence is cut, a shorter one is left alone.
    assert _texts("Short one. " + clauses)[0] == "Short one."
    assert split_sentences(clauses, max_chars=len(clauses))[0].text == clauses


@pytest.mark.parametrize("name", sorted(HOSTILE_BODIES))
def test_split_sentences_survives_hostile_bodies(name: str) -> None:
    # Shapes that made a backtracking pattern or a quadratic loop blow up. Speed is measured
    # in bench/split_hostile.py, not asserted here (timings are flaky on shared machines);
    # here every unit must be exact stored characters and within the length cap.
    body = HOSTILE_BODIES[name]
    sentences = split_sentences(body)
    assert all(body[s.start : s.end] == s.text for s in sentences)
    assert all(len(s.text) <= MAX_SENTENCE_CHARS for s in sentences)


def test_line_heavy_bodies_give_one_unit_per_line_and_row() -> None:
    lines = 5_000
    body = "Phone: 1\n" * lines + "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * lines
    assert len(split_sentences(body)) == 2 * lines
