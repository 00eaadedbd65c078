"""Query expansion by the alias dictionary mined from the notes.

A query naming one side of an alias a note states ("SLO" where a note says "Service Level
Objective (SLO)") also searches for the other side. Only aliases stated in documents the
reader may see count (the audience's spaces, not in the trash), so an alias in a space the
asker cannot see never shapes their search. Bounded: at most `MAX_EXPANSIONS` phrases of at
most `MAX_EXPANSION_TOKENS` words in all, the best supported first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Q

from retrieval.eligibility import Audience
from retrieval.meta.extract import ALIAS_MAX_WORDS
from retrieval.models import DocumentAlias

MAX_EXPANSIONS = 3
MAX_EXPANSION_TOKENS = 8
# Keys tried per query (its word n-grams) and alias rows read per query.
MAX_KEYS = 60
MAX_ROWS = 200


@dataclass(frozen=True)
class AliasExpansion:
    """One phrase added to a query: its words, the query's words it stands for, and how
    many visible documents state the pair."""

    words: tuple[str, ...]
    for_words: tuple[str, ...]
    documents: int

    @property
    def phrase(self) -> str:
        return " ".join(self.words)

    @property
    def note(self) -> str:
        return f"“{' '.join(self.for_words)}” also searched as “{self.phrase}”"


def query_keys(words: Sequence[str]) -> list[str]:
    """The n-grams of the query's folded words (longest first) an alias key may equal."""
    keys: list[str] = []
    for size in range(min(ALIAS_MAX_WORDS, len(words)), 0, -1):
        for start in range(len(words) - size + 1):
            key = " ".join(words[start : start + size])
            if key not in keys:
                keys.append(key)
    return keys[:MAX_KEYS]


def alias_expansions(audience: Audience, words: Sequence[str]) -> list[AliasExpansion]:
    """The phrases to add to a query of `words` (folded tokens, as the query parser makes
    them), best supported first, within the bounds."""
    words = [word for word in words if word]
    keys = query_keys(words)
    if not keys or not audience.space_ids:
        return []
    rows = (
        DocumentAlias.objects.filter(Q(short_key__in=keys) | Q(long_key__in=keys))
        .filter(document__space_id__in=audience.sorted_space_ids, document__deleted_at=None)
        .order_by("pk")
        .values_list("short_key", "long_key")[:MAX_ROWS]
    )
    # Documents stating each (matched, other) pair; a document states a pair once
    # (`aliases_in` drops repeats).
    support: Counter[tuple[str, str]] = Counter()
    present = set(words)
    for short_key, long_key in rows:
        for matched, other in ((short_key, long_key), (long_key, short_key)):
            if matched in keys and not set(other.split()) <= present:
                support[(matched, other)] += 1
    ranked = sorted(support.items(), key=lambda item: (-item[1], item[0][1], item[0][0]))
    chosen: list[AliasExpansion] = []
    tokens_used = 0
    for (matched, other), documents in ranked:
        other_words = tuple(other.split())
        if len(chosen) >= MAX_EXPANSIONS:
            break
        if (
            any(item.words == other_words for item in chosen)
            or tokens_used + len(other_words) > MAX_EXPANSION_TOKENS
        ):
            continue
        chosen.append(AliasExpansion(other_words, tuple(matched.split()), documents))
        tokens_used += len(other_words)
    return chosen


def expand_query_terms(audience: Audience, words: Sequence[str]) -> list[str]:
    """The extra words to search for a query of `words`: each added phrase as one string."""
    return [item.phrase for item in alias_expansions(audience, words)]
