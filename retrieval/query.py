"""Parse a user's search text into terms, phrases and exclusions.

The parsed form is the only thing the lexical backends see: they build their own engine
syntax (FTS5 MATCH, PostgreSQL tsquery) from these plain tokens, so user text never reaches
an engine's query language unescaped.

Syntax: free words (any one may match), `"exact phrases"` (required), `-word` or
`-"phrase"` (excluded). Punctuation inside a word splits it into a phrase of its parts, so
`nginx.conf` searches for "nginx conf" as adjacent words — the way the index tokenised it.
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
    for match in PIECE_RE.finditer(text):
        negated, quoted, bare = match.group(1), match.group(2), match.group(3)
        if bare is not None:
            negated = "-" if bare.startswith("-") and len(bare) > 1 else ""
            group = tokens(bare)
            target = excluded if negated else terms
            word = bare.strip(".,;:!?()[]{}'")
            if not negated and IDENTIFIER_RE.match(word) and word not in needles:
                needles.append(word)
        else:
            group = tokens(quoted)
            target = excluded if negated else phrases
            phrase = " ".join(quoted.split())
            if not negated and group and phrase not in needles:
                needles.append(phrase)
        if group and group not in target:
            target.append(group)
    notes: list[str] = []
    content = [t for t in terms if not (len(t) == 1 and t[0] in STOPWORDS)]
    if content and len(content) < len(terms):
        notes.append("Common words were ignored.")
        terms = content
    if excluded and not terms and not phrases:
        raise QueryError("Add at least one word to search for; exclusions alone match nothing.")
    if not terms and not phrases:
        raise QueryError("The query has no letters or digits to search for.")
    return ParsedQuery(
        raw=raw,
        text=text,
        terms=tuple(terms),
        phrases=tuple(phrases),
        excluded=tuple(excluded),
        needles=tuple(needles),
        notes=tuple(notes),
    )
