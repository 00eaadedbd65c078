"""The text primitives every stage shares: how words are cut, folded, counted as stop words or
negation, split into sentences and normalised for comparison.

One home, because the gate's correctness depends on every stage tokenising the same way
(issue 11 item 4): a span the answerer quotes must be read by the gate with the rules the
answerer used to pick it, and the query with the rules the index used to store it. Nothing
here touches the database, a model or the network (the Snowball stemmer behind `fold` is a
pure function); this module is the `vocabulary` layer and imports only the standard library
and, lazily, `py_rust_stemmers` and `markdown_it` (the block parser the chunker uses, to read
the Markdown structure of what may be quoted).

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
  — four lists for four jobs (below) — and `QUESTION_FRAME_WORDS` (with its
  `QUESTION_FRAMING_VERBS`), the words a question's evidence need not contain;
* negation: `NEGATION_WORDS` and `NT_CONTRACTION_RE` (the gate's cues), `NEGATION_TOKENS`
  (evidence-pack dedup) and `CONFLICT_NEGATIONS` with `NT_SUFFIX_RE` (conflict detection);
* sentences: `split_sentences` (the extractive answerer's quotes: one sentence, list item,
  table row or line of line-structured text each, read with the Markdown structure from
  `quotable_blocks`, abbreviation-aware, capped at `MAX_SENTENCE_CHARS`), `sentence_spans`
  (line-bound, for conflict detection) and `SENTENCE_END_WORD_RE` (where the chunker may cut);
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
from itertools import pairwise
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


# Byte translation table: ASCII letters and digits kept, every other byte a space.
_ASCII_WORD_BYTES = bytes(c if chr(c).isascii() and chr(c).isalnum() else 32 for c in range(256))


def tokens(text: str) -> tuple[str, ...]:
    """Case-folded letter/digit runs after NFKC, the way the index tokenises text.

    Used by the query parser (so a query word meets the indexed word), the reranker's
    features and the answerability decision's content words."""
    if text.isascii():
        # The same tokens, folded in one pass: ASCII is its own NFKC form, casefolds to
        # lowercase and keeps its word boundaries (the reranker tokenises ~100 candidates a
        # search; bench/README.md, issue 14). Every byte that is not a letter or digit becomes
        # a space and the rest splits on spaces (`token_strings`): in ASCII, `[^\W_]` is
        # exactly [0-9A-Za-z], and this is half the cost of the regular expression.
        return tuple(token_strings(text.lower()))
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


def token_strings(text: str) -> list[str]:
    """`TOKEN_RE.findall(text)`: the tokens as written (not folded). ASCII text takes the
    byte-translation shortcut `tokens` takes: in ASCII a token is exactly a run of
    [0-9A-Za-z]."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_WORD_BYTES).decode().split()
    return TOKEN_RE.findall(text)


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

# The answerability decision's coverage rule and the extractive answerer (issue 12): words
# that frame a question without naming its topic, so the evidence need not contain them. A
# note that answers "When do the nightly backups run now?" says "the nightly backups moved to
# 03:30 UTC": it never says "now". Matched as typed (case-folded), never by stem: "currently"
# is here, "current" (a current smoker) is a topic. By class:
QUESTION_FRAMING_VERBS = word_set(
    # Speech and decision verbs: how the asker met a fact (a meeting decided it, a colleague
    # said it), not the fact; a decision note lists "Decisions" or just the outcome. They
    # still say which kind of passage is wanted, so the decision counts them towards a
    # question being specific enough ("What did we decide about backups?" vs "backups?").
    "decide decides decided deciding decision decisions agree agrees agreed say says said "
    "mention mentions mentioned discuss discusses discussed plan plans planned planning "
    "conclude concluded"
)
QUESTION_FRAME_WORDS = QUESTION_FRAMING_VERBS | word_set(
    # Time and aspect: when the asker stands, not what they ask about. Notes are dated by
    # their versions; they rarely say "now" or "these days" about their own facts.
    "now currently nowadays presently still today tonight yesterday tomorrow ever anymore "
    "already yet recently lately usually normally typically generally "
    # Hedges and intensifiers: the asker's tone.
    "actually really exactly basically precisely even quite "
    # The asker's pronouns `QUESTION_FILLER_WORDS` lacks.
    "ours myself ourselves "
    # What is left of a negated auxiliary ("didn't" → didn, t): the negation matters to the
    # answer, but no note says "didn" ("Why didn't we go with Auth0?"). Not "won" or "can":
    # "won" is also a topic (who won the final?).
    "didn doesn don isn aren wasn weren haven hasn hadn wouldn shouldn couldn mustn needn "
    # Generic verbs of taking place or running, like "work" and "happen" there: "when does the
    # backup run?" asks about the backup.
    "run runs running ran occur occurs occurred "
    # Prepositions and conjunctions the other lists lack: they join a question's topics.
    "during after before while until since within without between through via across per "
    "upon onto among whether"
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


# --- quotable units: what the extractive answerer may quote (issue 12 item 3) -------------------
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
class TextBlock:
    """A Markdown block that holds quotable text: a paragraph (`kind` "paragraph"), a list
    item's paragraph ("list_item"), a block quote's paragraph ("quote") or a table body row
    ("table_row"). [start, end) in code points, from its first content character (markers
    left out) to its last non-blank one."""

    start: int
    end: int
    kind: str


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

# A list item's, block quote's or table's markup before a block's first character: indentation,
# ">" markers, list markers (bullet, or a number with "." or ")") followed by a blank or the line
# end, an optional task box, and a table row's leading "|". Matched from the start of the block's
# first line, at most `_PREFIX_LIMIT` characters of it (markdown-it nests at most 20 deep).
_CONTAINER_PREFIX_RE = re.compile(
    r"(?:[ \t]*(?:>|(?:[-*+]|\d{1,9}[.)])(?=[ \t]|$)))*[ \t]*(?:\[[ xX]\][ \t]+)?\|?[ \t]*"
)
# A continuation line's markup: indentation and block-quote markers only (a continuation line
# never starts a list item, by markdown-it's reading of it).
_CONTINUATION_PREFIX_RE = re.compile(r"(?:[ \t]*>)*[ \t]*")
_PREFIX_LIMIT = 256
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


def _right_trimmed(text: str, start: int, end: int) -> int:
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
            prefix = _CONTAINER_PREFIX_RE.match(text, line, min(ends[first], line + _PREFIX_LIMIT))
            start = prefix.end() if prefix else line
            end = _right_trimmed(text, start, ends[last - 1])
            if kind == "tr_open":
                block_kind = "table_row"
                if end > start and text[end - 1] == "|" and text[end - 2 : end] != "\\|":
                    end = _right_trimmed(text, start, end - 1)
            elif not containers:
                block_kind = "paragraph"
            else:
                block_kind = "list_item" if containers[-1] == "list_item_open" else "quote"
            if end > start:
                blocks.append(TextBlock(start, end, block_kind))
    return blocks


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
            lines.append((position, _right_trimmed(text, position, match.start()), match.start()))
            position = match.end()
            prefix = _CONTINUATION_PREFIX_RE.match(
                text, position, min(block.end, position + _PREFIX_LIMIT)
            )
            if prefix:
                position = prefix.end()
        lines.append((position, block.end, block.end))
        lines = [line for line in lines if line[1] > line[0]]  # a bare ">" is no line
        wrapped = _is_wrapped(text, lines)
        unit_start = lines[0][0]
        for (_, end, raw_end), (next_start, next_end, _) in pairwise(lines):
            explicit = text.startswith("  ", end, raw_end) or text[end - 1] == "\\"
            following = text[next_start : min(next_end, next_start + _PREFIX_LIMIT)]
            if _ends_unit(text[end - 1], explicit, following, wrapped):
                unit_end = end - 1 if text[end - 1] == "\\" else end
                yield unit_start, _right_trimmed(text, unit_start, unit_end), block.kind
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
        if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
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
                d = _right_trimmed(region, c, d)
                while c < d and region[c].isspace():
                    c += 1
                enumeration = _ENUMERATION_RE.match(region, c, d)
                if enumeration:
                    c = enumeration.end()
                if c < d:
                    sentences.append(Sentence(start + c, start + d, region[c:d]))
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


# A word a clarifying choice may suggest must carry a topic: not a question's glue, filler or
# framing, nor a function word the extractive answerer ignores ("every", "after" and "then"
# were offered as choices).
SUGGESTION_STOPWORDS = (
    QUERY_STOPWORDS | QUESTION_FILLER_WORDS | EXTRACTIVE_STOPWORDS | QUESTION_FRAME_WORDS
)


# --- the relevance scorer's words (retrieval/answer/relevance.py) ---------------------------
# Words that carry no topic in a question, beyond the answerer's and the decision's lists:
# time-of-asking fillers ("now", "currently", "still") that a note never repeats, and the
# prepositions those lists lack ("during a failover": the topic is the failover).
RELEVANCE_FILLER_WORDS = word_set(
    "now currently current still yet already nowadays today's actually really exactly "
    "ok okay hey hi guys again anymore lately recently "
    "during between within via per across through among since until while"
)

# A named identifier in a question or answer ("db-2", "16.4", "nginx.conf"): word runs joined
# by one separator each.
NAMED_IDENTIFIER_RE = re.compile(r"[^\W_]+(?:[-_./:][^\W_]+)+")


def surface_stems(text: str) -> list[tuple[str, str]]:
    """(surface, index stem) for every token of `text`, in order; the surface case-folded after
    NFKC (how a question's words are compared with an answer's, and with the index's `fold`)."""
    nfkc = unicodedata.normalize("NFKC", text)
    return [(m.group(0).casefold(), fold(m.group(0))) for m in TOKEN_RE.finditer(nfkc)]
