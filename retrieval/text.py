"""The text primitives every stage shares: how words are cut, folded, counted as stop words or
negation, split into sentences and normalised for comparison.

One home, because the gate's correctness depends on every stage tokenising the same way
(issue 11 item 4): a span the answerer quotes must be read by the gate with the rules the
answerer used to pick it, and the query with the rules the index used to store it. Nothing
here touches the database, a model or the network (the Snowball stemmer behind `fold` is a
pure function); this module is the `vocabulary` layer and imports only the standard library
and, lazily, `py_rust_stemmers`.

Where two stages apply *different* rules today, both are kept here side by side under names
that say how they differ, with the reason: changing either would move the SciFact retrieval
or gate figures. They are:

* tokens: `tokens` (NFKC, the index's and the query parser's view) vs `nfc_tokens` (NFC, the
  gate's) — they disagree on compatibility characters: on the SciFact corpus 17 of 10,366
  titles and abstracts tokenise differently ("m²" → `m2` vs `m²`, "H₂O₂" → `h2o2` vs
  `h₂o₂`);
* the token pattern: `WORD_RE` (letter/digit runs) vs `TOKEN_RE` (the same runs plus
  private-use characters and the combining marks FTS5's unicode61 tokenizer drops);
* stop words: `QUERY_STOPWORDS`, `GLUE_WORDS`, `EXTRACTIVE_STOPWORDS`, `QUESTION_FILLER_WORDS`
  — four lists for four jobs (below);
* negation: `NEGATION_WORDS` and `NT_CONTRACTION_RE` (the gate's cues), `NEGATION_TOKENS`
  (evidence-pack dedup) and `CONFLICT_NEGATIONS` with `NT_SUFFIX_RE` (conflict detection);
* sentences: `split_sentences` (Markdown-aware, abbreviation-aware: the extractive answerer's
  quotes), `sentence_spans` (line-bound, for conflict detection) and `SENTENCE_END_WORD_RE`
  (where the chunker may cut);
* normalisers: `nfc_collapsed` (the gate's step 1, and `nfc_collapsed_with_offsets`, the same
  form mapped back to the original offsets), `nfkc_folded` (verbatim needle matching in fusion
  and the evidence pack's "same normalised text") and `fold` (one token's index form).

tests/test_text.py pins each primitive's behaviour and fails when a copy of one reappears
outside this module.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


def word_set(text: str) -> frozenset[str]:
    """A word list written as one string (easier to read and extend than a list literal)."""
    return frozenset(text.split())


# --- words and tokens -------------------------------------------------------------------------

# Letters and digits, as SQLite's unicode61 tokenizer sees them (underscore separates). The
# query parser and the gate cut words with this one pattern (seed: `_WORD`); the lexical
# backends rely on it too (a token can never hold a quote or an operator).
WORD_RE = re.compile(r"[^\W_]+")

# A token as FTS5's unicode61 tokenizer sees one: a run of letters and digits (not "_"),
# private-use characters (category Co) and the combining marks that remove_diacritics drops.
# Used wherever text is compared with the index's stems (`fold`): Python highlighting, the
# extractive answerer, evidence-pack dedup and the answerability decision. Wider than
# `WORD_RE` so a highlight never splits a decomposed "é" or a private-use glyph.
TOKEN_RE = re.compile(
    r"(?:[^\W_]|[\ue000-\uf8ff])"
    r"(?:[^\W_]|[\ue000-\uf8ff\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f])*"
)

# Whitespace runs. Python's regex \s and str.isspace()/str.split()/str.strip() agree on what
# whitespace is (tests/test_text.py checks every code point), so `" ".join(s.split())` and
# `WHITESPACE_RE.sub(" ", s).strip()` are the same function.
WHITESPACE_RE = re.compile(r"\s+")
# A whitespace-separated word, with its offsets (`len(SPACED_WORD_RE.findall(s))` is
# `len(s.split())`): the chunker's word windows and the reranker's length feature.
SPACED_WORD_RE = re.compile(r"\S+")
# A line break as markdown-it counts one: only "\r\n", "\r" and "\n" (str.splitlines() would
# also split on \x0b, \x1c, \u2028 …, putting line numbers out of step with the parser's).
LINE_BREAK_RE = re.compile(r"\r\n?|\n")

# Identifiers and numbers. Two identifier rules and two number rules on purpose; each
# caller's reading differs and is pinned by its tests:
# - a query term that is an identifier (word characters joined by runs of - _ . / :, e.g.
#   nginx.conf, allkeys-lru, ERR_SSL_PROTOCOL_ERROR) is also matched verbatim (query.py);
IDENTIFIER_RE = re.compile(r"^\w+(?:[-_./:]+\w+)+$")
# - a fact's value that is an identifier joins its parts by exactly one separator
#   (decision.py, conflicts: "allkeys-lru" is a value, "a--b" is not);
IDENTIFIER_VALUE_RE = re.compile(r"^[\w]+(?:[-_./:][\w]+)+$")
# - the gate reads every digit run whole with its separators ("1.8", "2,500", "10.0.1"),
#   wherever it stands, so a claim cannot drop or change part of a number;
NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")
# - conflict detection reads only free-standing numbers (not "ext4" or "100g").
NUMBER_IN_TEXT_RE = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)*(?![\w])")
# Hyphenated compounds (ASCII hyphen-minus, U+2010 hyphen, U+2011 non-breaking hyphen), and
# the two Unicode hyphens the gate writes as ASCII when comparing them.
COMPOUND_RE = re.compile(rf"{WORD_RE.pattern}(?:[-\u2010\u2011]{WORD_RE.pattern})+")
UNICODE_HYPHENS_RE = re.compile(r"[\u2010\u2011]")


def tokens(text: str) -> tuple[str, ...]:
    """Case-folded letter/digit runs after NFKC, the way the index tokenises text.

    Used by the query parser (so a query word meets the indexed word), the reranker's
    features and the answerability decision's content words."""
    return tuple(
        m.group(0).casefold() for m in WORD_RE.finditer(unicodedata.normalize("NFKC", text))
    )


def nfc_tokens(text: str) -> list[str]:
    """Case-folded letter/digit runs of the NFC text: the gate's tokens, for claim and span
    alike. NFC first, so a decomposed "é" is one letter, not a letter and a stray combining
    mark; NFC rather than NFKC because the gate's figures were measured so and NFKC would
    turn "m²" into "m2" (see the module docstring)."""
    return [m.group(0).casefold() for m in WORD_RE.finditer(unicodedata.normalize("NFC", text))]


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    # The Snowball English stemmer (PostgreSQL's english_stem; close to FTS5's porter),
    # shipped with fastembed. Without it terms still match word for word.
    try:
        from py_rust_stemmers import SnowballStemmer
    except ImportError:  # pragma: no cover - fastembed is a dependency
        return None
    return SnowballStemmer("english")


@lru_cache(maxsize=1 << 16)
def fold(token: str) -> str:
    """A token's index form: NFKC, diacritics removed (like remove_diacritics 2), case folded,
    stemmed. Applied alike to passage tokens and query tokens, so they compare equal
    exactly when the index would match them (up to the stemmer's small differences).
    Used by Python highlighting, the extractive answerer, evidence-pack dedup and the
    answerability decision."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", token))
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()
    stemmer = _stemmer()
    return stemmer.stem_word(plain) if stemmer is not None else plain


def folded_tokens(text: str) -> list[str]:
    """Every `TOKEN_RE` token of `text` in its index form (`fold`), in order: the stems the
    lexical index sees. Evidence-pack dedup, the extractive answerer and the answerability
    decision compare text through this."""
    return [fold(m.group(0)) for m in TOKEN_RE.finditer(text)]


# --- stop words ---------------------------------------------------------------------------------
# Four lists, because they do four different jobs and each was tuned where it is used; merging
# any two would change what a stage does (and the figures measured with it).

# Search (retrieval.query): dropped from the optional (OR-ed) terms when the query has other
# words — they match nearly every passage and only cost time; kept when they are all the query
# has. Also the reranker's non-content words and, with `QUESTION_FILLER_WORDS`, the
# answerability decision's.
QUERY_STOPWORDS = word_set(
    "a an and are as at be but by for from has have in into is it its of on or that the their "
    "then there these they this to was were will with"
)

# The gate (retrieval.answer.gate): the only words coupling may ignore, articles and forms of
# "to be". Deliberately minimal — every word left out makes coupling stricter (the fail-closed
# direction). Numbers, negations and quantifiers ("no", "all", "off", "most") are never here.
GLUE_WORDS = word_set("a an the be am is are was were been being")

# The extractive answerer (retrieval.answer.answerers): words that say nothing about the topic
# of a question, matched as typed and folded (`fold`) like every other token. Wider than
# `QUERY_STOPWORDS`: a sentence is picked by the question's *topic* words.
EXTRACTIVE_STOPWORDS = word_set(
    "a an the of to in on at by for from with about into over under as and or but if then "
    "than so not no nor is are was were be been being am do does did done doing has have "
    "had having can could should would will shall may might must what which who whom "
    "whose when where why how i me my we us our you your he him his she her it its they "
    "them their this that these those there here any some all each every tell me please "
    "explain describe list give show know say said according note notes"
)

# The answerability decision (retrieval.answer.decision): question words, pronouns and generic
# verbs ("fix", "work", "mean" …), on top of `QUERY_STOPWORDS`; what is left are the content
# words a question must have to be specific enough to retrieve on.
QUESTION_FILLER_WORDS = word_set(
    "what whats which who whom whose when where why how is are am do does did done can could "
    "would should shall may might must about any some anything something please tell me my "
    "mine i im ive you your yours we our us he him his she her hers they them their theirs "
    "it its this that these those there here one ones thing things stuff again also just "
    "so than too very more most much many not no yes if else like get got give know say "
    "said show explain describe mean means meant happen happened happens work works working "
    "worked fix fixed fixing do doing go going make use used using need needs want help "
    "problem issue way s t ll re ve d"
)


# --- negation -----------------------------------------------------------------------------------

# Negation cues matched as whole tokens (the gate's cues; seed decision lode-w2y7).
NEGATION_WORDS = word_set("not no never cannot nothing nobody none neither nor without")
# What the tokenizer leaves of the common "n't" contractions ("isn't" → "isn" + "t").
NT_STEMS = word_set("isn aren wasn weren don doesn didn won wouldn shouldn couldn hasn haven hadn")
# Rarer contraction stems ("mustn't", "needn't", "ain't").
RARE_NT_STEMS = word_set("mustn needn ain")

# Evidence-pack dedup (retrieval.answer.pack): two near-identical passages differing in one of
# these tokens are both kept. Over-protecting only keeps a passage that could have been
# dropped, so this list is the widest: every stem and the stray "t".
NEGATION_TOKENS = NEGATION_WORDS | NT_STEMS | RARE_NT_STEMS | {"t"}
# Conflict detection (retrieval.answer.decision): these words mark a statement as negated and
# are never content words. Without `RARE_NT_STEMS`: "ain" (also an abbreviation, e.g. AIN in
# medicine) would stop being a content word and change which statements conflict; decision.py
# treats the stray "t" itself and reads contractions with `NT_SUFFIX_RE`.
CONFLICT_NEGATIONS = NEGATION_WORDS | NT_STEMS

# "n't" contractions, matched whole on the raw (NFC) text: the tokenizer would leave only a
# stem ("isn" + "t"), and stems collide with real words ("Don", "won"). ASCII apostrophe,
# typographic ’ (U+2019) and the modifier-letter ʼ (U+02BC) — an extra cue only ever blocks.
NT_CONTRACTION_RE = re.compile(r"\w+n['\u2019\u02bc]t\b", re.IGNORECASE)
# The looser form conflict detection searches for: the "n't" ending alone, case-sensitive, no
# word before it required. Kept apart from `NT_CONTRACTION_RE` so neither stage's figures move
# ("DON'T" is a gate cue but not a decision negation; a bare "n't" is the reverse).
NT_SUFFIX_RE = re.compile(r"n['\u2019\u02bc]t\b")
_APOSTROPHES_RE = re.compile(r"['\u2019\u02bc]")


def negation_cue_counts(text: str) -> Counter[str]:
    """How often each negation cue occurs in `text`: `NEGATION_WORDS` as whole tokens, plus
    "n't" contractions (case-folded, apostrophe written as ASCII, e.g. "isn't"). The gate
    compares these counts between a claim and its span."""
    nfc = unicodedata.normalize("NFC", text)
    counts = Counter(t for t in nfc_tokens(nfc) if t in NEGATION_WORDS)
    counts.update(
        _APOSTROPHES_RE.sub("'", m.group(0)).casefold() for m in NT_CONTRACTION_RE.finditer(nfc)
    )
    return counts


def negation_cues(text: str) -> frozenset[str]:
    """The negation cues present in `text` (see `negation_cue_counts`)."""
    return frozenset(negation_cue_counts(text))


# --- sentences ----------------------------------------------------------------------------------

# Conflict detection: a sentence runs to . ! ? or ; followed by whitespace (so "1.29" and
# "e.g.x" do not end one), or to the end of the line. Cheap and line-bound: statements there are
# claims, spans and pack passages, already short.
SENTENCE_RE = re.compile(r"[^\n]+?(?:[.!?;]+(?=\s)|[.!?;]*$)", re.MULTILINE)

# The chunker: a whitespace-separated word that ends a sentence (terminal punctuation, then
# optional closers, including } and »), where a window may snap its cut.
SENTENCE_END_WORD_RE = re.compile(r"[.!?][\"'\u201d\u2019)\]}\u00bb]*$")

# The extractive answerer: a sentence ends at . ! ? (plus closing quotes/brackets) followed by
# whitespace…
_SENTENCE_END_RE = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(?=\s)")
# …unless the word before it is one of these abbreviations or a single capital (an initial).
_ABBREVIATIONS = word_set(
    "e.g i.e etc vs al fig figs no nos dr mr mrs ms prof approx cf eq ref refs st jr sr inc ltd"
)
_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
_FENCE_LINE_RE = re.compile(r"^\s{0,3}(?:```|~~~)")
_BLOCK_START_RE = re.compile(r"^\s{0,3}(?:[-*+]\s|\d{1,9}[.)]\s|>|\|)")
_LEADING_MARKUP_RE = re.compile(r"^(?:\s{0,3}(?:[-*+]|\d{1,9}[.)])\s+|\s{0,3}>\s?)+")


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


@dataclass(frozen=True)
class Sentence:
    """A sentence of a version body: [start, end) in code points, and its text (the exact
    slice, so quoting it is verbatim by construction)."""

    start: int
    end: int
    text: str


def _units(text: str) -> Iterable[tuple[int, int]]:
    """[start, end) ranges of `text`'s prose units: paragraphs, list items, quote lines and
    table rows; headings and code fence lines are left out (labels and markup, not claims)."""
    unit_start: int | None = None
    position = 0
    in_fence = False
    for line in text.splitlines(keepends=True):
        line_start, position = position, position + len(line)
        content = line.rstrip("\r\n")
        if _FENCE_LINE_RE.match(content):
            in_fence = not in_fence
        breaks = (
            not content.strip()
            or in_fence
            or _FENCE_LINE_RE.match(content)
            or _HEADING_RE.match(content)
        )
        if (breaks or _BLOCK_START_RE.match(content)) and unit_start is not None:
            yield unit_start, line_start
            unit_start = None
        if breaks:
            if in_fence and not _FENCE_LINE_RE.match(content) and content.strip():
                yield line_start, line_start + len(content)  # a code line is its own unit
            continue
        if unit_start is None:
            unit_start = line_start
    if unit_start is not None:
        yield unit_start, len(text)


def _sentence_ranges(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    """Sentence ranges inside text[start:end]."""
    chunk = text[start:end]
    cut = 0
    for match in _SENTENCE_END_RE.finditer(chunk):
        words = chunk[cut : match.start()].split()
        last = words[-1].lower().rstrip(".") if words else ""
        last = last.lstrip("(\"'[")
        if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
            continue
        yield start + cut, start + match.end()
        cut = match.end()
    yield start + cut, end


def split_sentences(body: str, start: int = 0, end: int | None = None) -> list[Sentence]:
    """The sentences of body[start:end], with offsets into `body`, leading list/quote markers
    and edge whitespace trimmed (a trimmed slice is still a verbatim quote). Markdown-aware
    (headings and code fences are not prose) and abbreviation-aware ("e.g.", initials): the
    extractive answerer quotes these, so a sentence must not end inside "Fig. 2"."""
    end = len(body) if end is None else end
    region = body[start:end]
    sentences: list[Sentence] = []
    for unit_start, unit_end in _units(region):
        for a, b in _sentence_ranges(region, unit_start, unit_end):
            piece = region[a:b]
            lead = _LEADING_MARKUP_RE.match(piece)
            if lead:
                a += lead.end()
                piece = region[a:b]
            stripped = piece.strip()
            if not stripped:
                continue
            a += len(piece) - len(piece.lstrip())
            b = a + len(stripped)
            sentences.append(Sentence(start + a, start + b, region[a:b]))
    return sentences


# --- normalisers --------------------------------------------------------------------------------


def nfc_collapsed(text: str) -> str:
    """NFC, whitespace runs collapsed to one space, ends trimmed: the form the gate's step 1
    compares a quoted span and a body in, and the form its entailment step is given. Case is
    kept (a quote is verbatim up to Unicode composition and spacing, nothing more)."""
    return WHITESPACE_RE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def nfc_collapsed_with_offsets(body: str) -> tuple[str, list[int], list[int]]:
    """`body` NFC-normalised with whitespace runs collapsed to one space (ends not trimmed),
    and for each output character the (start, end) offsets in `body` it came from: how the
    answer page finds where a span the gate verified after normalisation sits in the stored
    body. NFC is applied per base character and its combining marks, so every output
    character maps to a whole cluster."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i, n = 0, len(body)
    while i < n:
        if body[i].isspace():
            j = i
            while j < n and body[j].isspace():
                j += 1
            out.append(" ")
            starts.append(i)
            ends.append(j)
            i = j
            continue
        j = i + 1
        while j < n and unicodedata.combining(body[j]):
            j += 1
        for ch in unicodedata.normalize("NFC", body[i:j]):
            out.append(ch)
            starts.append(i)
            ends.append(j)
        i = j
    return "".join(out), starts, ends


def nfkc_folded(text: str) -> str:
    """NFKC, case-folded, whitespace runs collapsed to one space, ends trimmed: the form in
    which fusion checks a query needle occurs verbatim in a passage, and in which the evidence
    pack calls two passages the "same normalised text"."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())
