"""Parse a user's search text into terms, phrases, exclusions and filters.

The parsed form is the only thing the lexical backends see: they build their own engine
syntax (FTS5 MATCH, PostgreSQL tsquery) from these plain tokens, so user text never reaches
an engine's query language unescaped.

Syntax: free words (any one may match), `"exact phrases"` (required), `-word` or
`-"phrase"` (excluded), and `key:value` filters (below; templates/search/help.html is the
users' version). Punctuation inside a word splits it into its parts, each an optional term
the way the index tokenised it (`IL-6` → `il`, `6`; measured on SciFact train: +0.011
nDCG@10 over requiring the parts to be adjacent). An excluded word with punctuation
excludes its parts as a phrase.

Identifiers (`nginx.conf`, `ERR_SSL_PROTOCOL_ERROR`, `allkeys-lru`) and quoted phrases are
also kept as typed, as `needles` for the exact-match boost in fusion. A hyphen alone is
ordinary English morphology far more often than an identifier (`long-term`, `IL-10`), so a
hyphenated word is a needle only in a short query (at most SHORT_QUERY_TERMS words), where a
user naming `allkeys-lru` means exactly that; boosting every hyphenated word of a long
question cost 0.027 nDCG@10 on SciFact train.

Filters (seeds/loom-chain-of-custody.md, "Apply eligibility before ranking and truncation"):
`type:note|external`, `source:NAME`, `path:TEXT`, `tag:NAME`, `before:DATE`, `after:DATE`,
`trust:TIER`. Keys are case-insensitive; a value may be quoted (`path:"my dir/x"`); `-key:value`
excludes what `key:value` would keep. The same key repeated is OR (`tag:a tag:b`: either tag),
different keys are AND, and every exclusion applies (`-tag:a -tag:b`: neither tag). Dates are
`YYYY-MM-DD`, `YYYY-MM` or `YYYY` and stand for the first instant of that day, month or year in
the site's time zone (`TIME_ZONE`); they compare with the head version's `created_at` (when the
current text was saved): `after:D` keeps documents saved at or after that instant, `before:D`
those saved strictly before it, so `after:2024-03 before:2024-04` is exactly March. A word
whose prefix is not a filter key (`http://x`, `foo:bar`, `col:foo`) stays plain text. A bad
value raises `QueryError` naming the filter and its allowed values; a query with filters but
no words is rejected too. The parser only validates and normalises filters;
`retrieval.eligibility` turns them into the eligible-document condition both legs apply
before their limit.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date

from django.conf import settings

# Letters and digits, as SQLite's unicode61 tokenizer sees them (underscore separates).
WORD_RE = re.compile(r"[^\W_]+")
# An identifier: word characters joined by - _ . / : (nginx.conf, allkeys-lru,
# ERR_SSL_PROTOCOL_ERROR). Such a term is also matched verbatim for the exact-match boost.
IDENTIFIER_RE = re.compile(r"^\w+(?:[-_./:]+\w+)+$")
# Identifiers with one of these characters are code-like in any query.
CODE_CHAR_RE = re.compile(r"[_./:]")
SHORT_QUERY_TERMS = 4

FILTER_KEYS = ("type", "source", "path", "tag", "before", "after", "trust")
DATE_KEYS = frozenset({"before", "after"})
KIND_VALUES = ("note", "external")  # notes.models.Document.Kind
FILTER_EXAMPLES = {
    "type": "type:note",
    "source": "source:scifact",
    "path": 'path:"my dir/x"',
    "tag": "tag:ops",
    "before": "before:2024-03-01",
    "after": "after:2024-03",
    "trust": "trust:note",
}
# ASCII letters only, spelled out per letter: re's Unicode case folding would also read
# `ſource:` (long s) as a key.
_KEY_PATTERN = "|".join("".join(f"[{c.upper()}{c}]" for c in key) for key in FILTER_KEYS)
# A filter (optional -, a known key, :, a "quoted" or bare value), a quoted phrase, a -quoted
# phrase, or a run of non-space characters. Filters are tried first, so `tag:x` is a filter
# but `foo:bar` and `http://x` fall through to plain words.
PIECE_RE = re.compile(
    rf'(?P<fneg>-?)(?P<key>{_KEY_PATTERN}):(?:"(?P<fquoted>[^"]*)"?|(?P<fbare>\S*))'
    r'|(?P<neg>-?)"(?P<quoted>[^"]*)"?|(?P<bare>\S+)'
)
DATE_RE = re.compile(r"^([0-9]{4})(?:-([0-9]{1,2})(?:-([0-9]{1,2}))?)?$")

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


def trust_values() -> tuple[str, ...]:
    """The `trust:` values: `notes.models.TrustTier`, highest first."""
    from notes.models import TrustTier

    return tuple(TrustTier.values)


@dataclass(frozen=True)
class Filter:
    """One `key:value` filter, validated and normalised.

    `value`: `type`/`trust` lower-cased; `tag` case-folded without a leading `#`; `source`
    and `path` as typed (matched case-insensitively); `before`/`after` the ISO date of the
    first day the typed date stands for (`2024-03` → `2024-03-01`).
    """

    key: str
    value: str
    negated: bool = False

    def __str__(self) -> str:
        value = self.value
        if not value or any(ch.isspace() or ch == '"' for ch in value):
            value = '"' + value.replace('"', "") + '"'
        return f"{'-' if self.negated else ''}{self.key}:{value}"


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
    # Document filters, in the order typed, without duplicates (see the module docstring).
    filters: tuple[Filter, ...] = ()

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


def _allowed(values: tuple[str, ...]) -> str:
    return ", ".join(values)


def make_filter(key: str, raw_value: str, *, negated: bool = False) -> Filter:
    """Validate and normalise one filter; raises `QueryError` naming it and what it takes."""
    key = key.lower()
    value = raw_value.strip()
    typed = f"{key}:{raw_value}"
    if not value:
        raise QueryError(f"The filter {key}: needs a value, e.g. {FILTER_EXAMPLES[key]}.")
    if key == "type":
        value = value.lower()
        if value not in KIND_VALUES:
            raise QueryError(
                f"Unknown type in {typed!r}; type: takes one of: {_allowed(KIND_VALUES)}."
            )
    elif key == "trust":
        value = value.lower()
        allowed = trust_values()
        if value not in allowed:
            raise QueryError(
                f"Unknown trust tier in {typed!r}; trust: takes one of: {_allowed(allowed)}."
            )
    elif key == "tag":
        value = value.lstrip("#").casefold()
        if not value:
            raise QueryError(f"The filter tag: needs a tag name, e.g. {FILTER_EXAMPLES['tag']}.")
    elif key in DATE_KEYS:
        match = DATE_RE.match(value)
        try:
            if match is None:
                raise ValueError(value)
            year, month, day = match.groups()
            value = date(int(year), int(month or 1), int(day or 1)).isoformat()
        except ValueError:
            raise QueryError(
                f"Not a date in {typed!r}; {key}: takes YYYY-MM-DD, YYYY-MM or YYYY, "
                f"e.g. {FILTER_EXAMPLES[key]}."
            ) from None
    return Filter(key=key, value=value, negated=negated)


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
    filters: list[Filter] = []
    filter_spans: list[tuple[int, int]] = []
    pieces = 0  # words and phrases typed, not counting exclusions
    for match in PIECE_RE.finditer(text):
        if match.group("key") is not None:
            quoted_value = match.group("fquoted")
            item = make_filter(
                match.group("key"),
                quoted_value if quoted_value is not None else match.group("fbare"),
                negated=bool(match.group("fneg")),
            )
            if item not in filters:
                filters.append(item)
            filter_spans.append(match.span())
            continue
        negated, quoted, bare = match.group("neg"), match.group("quoted"), match.group("bare")
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
    if filters and not terms and not phrases:
        raise QueryError(
            "Add at least one search word: filters only narrow a search "
            f"(e.g. certbot {filters[0]})."
        )
    if excluded and not terms and not phrases:
        raise QueryError("Add at least one word to search for; exclusions alone match nothing.")
    if not terms and not phrases:
        raise QueryError("The query has no letters or digits to search for.")
    if pieces <= SHORT_QUERY_TERMS:
        needles.extend(n for n in hyphen_needles if n not in needles)
    if filters:
        # Models see the words only, not `tag:ops`; a query without filters keeps its text
        # exactly as before.
        for start, end in reversed(filter_spans):
            text = text[:start] + " " + text[end:]
        text = " ".join(text.split())
        notes.append("Filtered before ranking: " + " ".join(str(item) for item in filters) + ".")
    return ParsedQuery(
        raw=raw,
        text=text,
        terms=tuple(terms),
        phrases=tuple(phrases),
        excluded=tuple(excluded),
        needles=tuple(needles),
        notes=tuple(notes),
        filters=tuple(filters),
    )
