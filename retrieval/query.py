"""Parse a user's search text into terms, phrases and exclusions.

The parsed form is the only thing the lexical backends see: they build their own engine
syntax (FTS5 MATCH, PostgreSQL tsquery) from these plain tokens, so user text never reaches
an engine's query language unescaped.

Syntax: free words (any one may match), `"exact phrases"` (required), `-word` or
`-"phrase"` (excluded). Punctuation inside a word splits it into its parts, each an
optional term the way the index tokenised it (`IL-6` → `il`, `6`; measured on SciFact train:
+0.011 nDCG@10 over requiring the parts to be adjacent). An excluded word with punctuation
excludes its parts as a phrase.

Identifiers (`nginx.conf`, `ERR_SSL_PROTOCOL_ERROR`, `allkeys-lru`) and quoted phrases are
also kept as typed, as `needles` for the exact-match boost in fusion. A hyphen alone is
ordinary English morphology far more often than an identifier (`long-term`, `IL-10`), so a
hyphenated word is a needle only in a short query (at most SHORT_QUERY_TERMS words), where a
user naming `allkeys-lru` means exactly that; boosting every hyphenated word of a long
question cost 0.027 nDCG@10 on SciFact train.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from django.conf import settings

# Letters and digits, as SQLite's unicode61 tokenizer sees them (underscore separates).
WORD_RE = re.compile(r"[^\W_]+")
# An identifier: word characters joined by - _ . / : (nginx.conf, allkeys-lru,
# ERR_SSL_PROTOCOL_ERROR). Such a term is also matched verbatim for the exact-match boost.
IDENTIFIER_RE = re.compile(r"^\w+(?:[-_./:]+\w+)+$")
# Identifiers with one of these characters are code-like in any query.
CODE_CHAR_RE = re.compile(r"[_./:]")
SHORT_QUERY_TERMS = 4
# A quoted phrase, a -quoted phrase, or a run of non-space characters.
PIECE_RE = re.compile(r'(-?)"([^"]*)"?|(\S+)')

# Dropped from the optional (OR-ed) terms when the query has other words: they match
# nearly every passage and only cost time. Kept when they are all the query has.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "were",
        "will",
        "with",
    ]
)


class QueryError(ValueError):
    """A query lode cannot run; the message is shown to the user as is."""


@dataclass(frozen=True)
class ParsedQuery:
    raw: str
    # The query with control characters and lone surrogates removed: what models may see.
    text: str = ""
    # Each optional term is a tuple of tokens: one token, or several that must be adjacent.
    terms: tuple[tuple[str, ...], ...] = ()
    phrases: tuple[tuple[str, ...], ...] = ()
    excluded: tuple[tuple[str, ...], ...] = ()
    # Quoted phrases and identifiers as typed, for verbatim (exact-match) checks.
    needles: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def is_empty(self) -> bool:
        return not self.terms and not self.phrases

    def all_tokens(self) -> list[str]:
        return [token for group in (*self.terms, *self.phrases) for token in group]


def tokens(text: str) -> tuple[str, ...]:
    """Case-folded letter/digit runs after NFKC, the way the index tokenises text."""
    return tuple(
        m.group(0).casefold() for m in WORD_RE.finditer(unicodedata.normalize("NFKC", text))
    )


def clean(raw: str) -> str:
    """Replace control characters (NUL and friends), lone surrogates and other unprintable
    code points with spaces: no passage can match them and models choke on some."""
    return "".join(ch if ch.isprintable() or ch in " \t" else " " for ch in raw)


def parse(raw: str) -> ParsedQuery:
    """Parse search text; raises `QueryError` with a user-facing message when it cannot."""
    limit = settings.LODE_MAX_QUERY_CHARS
    if len(raw) > limit:
        raise QueryError(f"The query is {len(raw):,} characters long; the limit is {limit:,}.")
    text = clean(raw).strip()
    if not text:
        return ParsedQuery(raw=raw, text=text)
    terms: list[tuple[str, ...]] = []
    phrases: list[tuple[str, ...]] = []
    excluded: list[tuple[str, ...]] = []
    needles: list[str] = []
    hyphen_needles: list[str] = []
    pieces = 0  # words and phrases typed, not counting exclusions
    for match in PIECE_RE.finditer(text):
        negated, quoted, bare = match.group(1), match.group(2), match.group(3)
        if bare is not None:
            negated = "-" if bare.startswith("-") and len(bare) > 1 else ""
        group = tokens(quoted if bare is None else bare)
        if not group:
            continue
        if negated:
            if group not in excluded:
                excluded.append(group)
            continue
        pieces += 1
        if bare is None:
            phrase = " ".join(quoted.split())
            if group not in phrases:
                phrases.append(group)
            if phrase not in needles:
                needles.append(phrase)
            continue
        word = bare.strip(".,;:!?()[]{}'")
        if IDENTIFIER_RE.match(word) and any(ch.isalpha() for ch in word):
            kind = needles if CODE_CHAR_RE.search(word) else hyphen_needles
            if word not in kind:
                kind.append(word)
        for token in group:
            if (token,) not in terms:
                terms.append((token,))
    notes: list[str] = []
    content = [t for t in terms if not (len(t) == 1 and t[0] in STOPWORDS)]
    if content and len(content) < len(terms):
        notes.append("Common words were ignored.")
        terms = content
    if excluded and not terms and not phrases:
        raise QueryError("Add at least one word to search for; exclusions alone match nothing.")
    if not terms and not phrases:
        raise QueryError("The query has no letters or digits to search for.")
    if pieces <= SHORT_QUERY_TERMS:
        needles.extend(n for n in hyphen_needles if n not in needles)
    return ParsedQuery(
        raw=raw,
        text=text,
        terms=tuple(terms),
        phrases=tuple(phrases),
        excluded=tuple(excluded),
        needles=tuple(needles),
        notes=tuple(notes),
    )
