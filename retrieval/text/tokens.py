"""How text is cut into words and tokens: the patterns every stage shares (words, tokens,
whitespace, line breaks, identifiers, numbers, hyphenated compounds) and the unfolded token
functions. Two readings are kept side by side where stages differ on purpose: `tokens` (NFKC, the
index's and the query parser's) vs `nfc_tokens` (NFC, the gate's), and `WORD_RE` vs the wider
`TOKEN_RE` (private-use characters and combining marks, as FTS5's unicode61 sees them). The two
token readings disagree only on compatibility characters ("m²" → `m2` vs `m²`).
"""

from __future__ import annotations

import re
import unicodedata

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
# whitespace is (tests/retrieval/test_text.py checks every code point), so `" ".join(s.split())` and
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
        # search; bench/README.md). Every byte that is not a letter or digit becomes
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


def token_strings(text: str) -> list[str]:
    """`TOKEN_RE.findall(text)`: the tokens as written (not folded). ASCII text takes the
    byte-translation shortcut `tokens` takes: in ASCII a token is exactly a run of
    [0-9A-Za-z]."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_WORD_BYTES).decode().split()
    return TOKEN_RE.findall(text)


# A named identifier in a question or answer ("db-2", "16.4", "nginx.conf"): word runs joined
# by one separator each.
NAMED_IDENTIFIER_RE = re.compile(r"[^\W_]+(?:[-_./:][^\W_]+)+")
