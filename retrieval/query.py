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
value raises `QueryError` naming the filter and its allowed values. A query of filters and
nothing else (`tag:ops`) has nothing to rank: `parse()` rejects it, and
`parse(raw, filters_alone=True)` returns it (`ParsedQuery.filters_only`) for a caller that
lists the documents the filters keep instead. The parser only validates and normalises filters;
`retrieval.eligibility` turns them into the eligible-document condition both legs apply
before their limit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date

from django.conf import settings

from retrieval.text.tokens import IDENTIFIER_RE, tokens
from retrieval.words.stopwords import QUERY_STOPWORDS

# Identifiers with one of these characters are code-like in any query.
CODE_CHAR_RE = re.compile(r"[_./:]")
SHORT_QUERY_TERMS = 4

FILTER_KEYS = ("type", "source", "path", "tag", "before", "after", "trust", "space")
DATE_KEYS = frozenset({"before", "after"})
KIND_VALUES = ("note", "external")  # notes.models.Document.Kind
FILTER_EXAMPLES = {
    "type": "type:note",
    "source": "source:Runbooks",
    "path": 'path:"my dir/x"',
    "tag": "tag:ops",
    "before": "before:2024-03-01",
    "after": "after:2024-03",
    "trust": "trust:note",
    "space": 'space:"Team docs"',
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

    @property
    def filters_only(self) -> bool:
        """Filters and nothing else: nothing to rank, only documents to list."""
        return bool(self.filters) and self.is_empty and not self.excluded

    def all_tokens(self) -> list[str]:
        return [token for group in (*self.terms, *self.phrases) for token in group]


def clean(raw: str) -> str:
    """Replace control characters (NUL and friends), lone surrogates and other unprintable
    code points with spaces: no passage can match them and models choke on some."""
    return "".join(ch if ch.isprintable() or ch in " \t" else " " for ch in raw)


def _allowed(values: tuple[str, ...]) -> str:
    return ", ".join(values)


def _kind_value(key: str, value: str, typed: str) -> str:
    value = value.lower()
    if value not in KIND_VALUES:
        raise QueryError(f"Unknown type in {typed!r}; type: takes one of: {_allowed(KIND_VALUES)}.")
    return value


def _trust_value(key: str, value: str, typed: str) -> str:
    value = value.lower()
    allowed = trust_values()
    if value not in allowed:
        raise QueryError(
            f"Unknown trust tier in {typed!r}; trust: takes one of: {_allowed(allowed)}."
        )
    return value


def _tag_value(key: str, value: str, typed: str) -> str:
    value = value.lstrip("#").casefold()
    if not value:
        raise QueryError(f"The filter tag: needs a tag name, e.g. {FILTER_EXAMPLES['tag']}.")
    return value


def _date_value(key: str, value: str, typed: str) -> str:
    """The ISO date of the first day `value` (YYYY-MM-DD, YYYY-MM or YYYY) stands for."""
    match = DATE_RE.match(value)
    try:
        if match is None:
            raise ValueError(value)
        year, month, day = match.groups()
        return date(int(year), int(month or 1), int(day or 1)).isoformat()
    except ValueError:
        raise QueryError(
            f"Not a date in {typed!r}; {key}: takes YYYY-MM-DD, YYYY-MM or YYYY, "
            f"e.g. {FILTER_EXAMPLES[key]}."
        ) from None


# How each filter key validates and normalises its (stripped, non-empty) value; `source` and
# `path` are kept as typed. Each takes (key, value, the filter as typed for messages).
_VALUE_RULES: dict[str, Callable[[str, str, str], str]] = {
    "type": _kind_value,
    "trust": _trust_value,
    "tag": _tag_value,
    **dict.fromkeys(DATE_KEYS, _date_value),
}


def make_filter(key: str, raw_value: str, *, negated: bool = False) -> Filter:
    """Validate and normalise one filter; raises `QueryError` naming it and what it takes."""
    key = key.lower()
    value = raw_value.strip()
    if not value:
        raise QueryError(f"The filter {key}: needs a value, e.g. {FILTER_EXAMPLES[key]}.")
    rule = _VALUE_RULES.get(key)
    if rule is not None:
        value = rule(key, value, f"{key}:{raw_value}")
    return Filter(key=key, value=value, negated=negated)


def _add_new[T](items: list[T], item: T) -> None:
    """Append `item` unless it is already there: parsed parts keep their first position."""
    if item not in items:
        items.append(item)


@dataclass
class _Pieces:
    """What the pieces of one query add up to, collected in the order typed."""

    terms: list[tuple[str, ...]] = field(default_factory=list)
    phrases: list[tuple[str, ...]] = field(default_factory=list)
    excluded: list[tuple[str, ...]] = field(default_factory=list)
    needles: list[str] = field(default_factory=list)
    # Hyphenated identifiers: needles only in a short query (see the module docstring).
    hyphen_needles: list[str] = field(default_factory=list)
    filters: list[Filter] = field(default_factory=list)
    filter_spans: list[tuple[int, int]] = field(default_factory=list)
    count: int = 0  # words and phrases typed, not counting exclusions

    def add(self, match: re.Match[str]) -> None:
        """Add one PIECE_RE match: a filter, an exclusion, a phrase or a word."""
        if match.group("key") is not None:
            self._add_filter(match)
            return
        negated, quoted, bare = match.group("neg"), match.group("quoted"), match.group("bare")
        if bare is not None:
            negated = "-" if bare.startswith("-") and len(bare) > 1 else ""
        group = tokens(quoted if bare is None else bare)
        if not group:
            return
        if negated:
            _add_new(self.excluded, group)
            return
        self.count += 1
        if bare is None:
            self._add_phrase(quoted, group)
        else:
            self._add_word(bare, group)

    def _add_filter(self, match: re.Match[str]) -> None:
        quoted_value = match.group("fquoted")
        item = make_filter(
            match.group("key"),
            quoted_value if quoted_value is not None else match.group("fbare"),
            negated=bool(match.group("fneg")),
        )
        _add_new(self.filters, item)
        self.filter_spans.append(match.span())

    def _add_phrase(self, quoted: str, group: tuple[str, ...]) -> None:
        _add_new(self.phrases, group)
        _add_new(self.needles, " ".join(quoted.split()))

    def _add_word(self, bare: str, group: tuple[str, ...]) -> None:
        word = bare.strip(".,;:!?()[]{}'")
        if IDENTIFIER_RE.match(word) and any(ch.isalpha() for ch in word):
            _add_new(self.needles if CODE_CHAR_RE.search(word) else self.hyphen_needles, word)
        for token in group:
            _add_new(self.terms, (token,))


def _content_terms(terms: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """`terms` without stop words, unless that would leave none."""
    content = [t for t in terms if not (len(t) == 1 and t[0] in QUERY_STOPWORDS)]
    return content or terms


def _check_searchable(found: _Pieces, terms: list[tuple[str, ...]], filters_alone: bool) -> None:
    """Raise `QueryError` when the query has nothing to search for, saying why; with
    `filters_alone`, filters without words or exclusions are a listing, not an error."""
    if terms or found.phrases:
        return
    if filters_alone and found.filters and not found.excluded:
        return
    if found.filters:
        raise QueryError(
            "Add at least one search word: filters only narrow a search "
            f"(e.g. certbot {found.filters[0]})."
        )
    if found.excluded:
        raise QueryError("Add at least one word to search for; exclusions alone match nothing.")
    raise QueryError("The query has no letters or digits to search for.")


def _without_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each span replaced by a space, whitespace then collapsed."""
    for start, end in reversed(spans):
        text = text[:start] + " " + text[end:]
    return " ".join(text.split())


def parse(raw: str, *, filters_alone: bool = False) -> ParsedQuery:
    """Parse search text; raises `QueryError` with a user-facing message when it cannot.
    `filters_alone`: a query of filters only parses (`filters_only`) instead of raising."""
    limit = settings.LODE_MAX_QUERY_CHARS
    if len(raw) > limit:
        raise QueryError(f"The query is {len(raw):,} characters long; the limit is {limit:,}.")
    text = clean(raw).strip()
    if not text:
        return ParsedQuery(raw=raw, text=text)
    found = _Pieces()
    for match in PIECE_RE.finditer(text):
        found.add(match)
    notes: list[str] = []
    terms = _content_terms(found.terms)
    if len(terms) < len(found.terms):
        notes.append("Common words were ignored.")
    _check_searchable(found, terms, filters_alone)
    needles = found.needles
    if found.count <= SHORT_QUERY_TERMS:
        needles.extend(n for n in found.hyphen_needles if n not in needles)
    if found.filters:
        # Models see the words only, not `tag:ops`; a query without filters keeps its text
        # exactly as before.
        text = _without_spans(text, found.filter_spans)
        notes.append(
            "Filtered before ranking: " + " ".join(str(item) for item in found.filters) + "."
        )
    return ParsedQuery(
        raw=raw,
        text=text,
        terms=tuple(terms),
        phrases=tuple(found.phrases),
        excluded=tuple(found.excluded),
        needles=tuple(needles),
        notes=tuple(notes),
        filters=tuple(found.filters),
    )
