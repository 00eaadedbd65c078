"""Trust rank, the last stage of search: how trust and relevance combine.

The rule (also in docs/trust-rank.md): each hit arrives with its relevance position r
(1 = most relevant, after fusion and rerank). Its trust-adjusted key is

    key = r × (1 + PENALTY[tier])

with PENALTY: note 0, annotation 0.1, current external snapshot 0.25, stale external
snapshot 0.5, inferred edge 1.0. Hits are ordered by key, then by r, then by passage id.

So trust reorders only near-ties in relevance: a note at position 5 moves ahead of an
external (stale) at position 4 (key 5 < 6), but not ahead of an external at position 2 (key 2.5).
Externals corroborate; they never override — yet a far more relevant external is not
buried under a barely relevant note.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from notes.models import TrustTier
from retrieval.eligibility import visible_documents

PENALTY: dict[str, float] = {
    TrustTier.NOTE: 0.0,
    TrustTier.ANNOTATION: 0.1,
    TrustTier.EXTERNAL_CURRENT: 0.25,
    TrustTier.EXTERNAL_STALE: 0.5,
    TrustTier.INFERRED: 1.0,
}


# The trust gradient, most trusted first: the tiers in order of their penalty. The same order
# as `TrustTier`'s declaration (tests/retrieval/test_trust.py holds the two together).
TIER_ORDER: tuple[str, ...] = tuple(sorted(PENALTY, key=PENALTY.__getitem__))


def tier_order(tier: str) -> int:
    """A tier's position in the trust gradient: 0 for your note, higher for less trusted
    tiers. An unknown tier sorts after every known one (where `trust_key` penalises it like
    an inferred edge: ranking needs a number, ordering only needs it last)."""
    return TIER_ORDER.index(tier) if tier in TIER_ORDER else len(TIER_ORDER)


def trust_key(relevance_position: int, tier: str) -> float:
    return relevance_position * (1.0 + PENALTY.get(tier, PENALTY[TrustTier.INFERRED]))


def trust_rank[T](items: Sequence[T], *, tier_of, passage_id_of) -> list[T]:
    """Reorder `items` (given in relevance order) by the trust rule above. Pure."""
    keyed = [
        (trust_key(position, tier_of(item)), position, passage_id_of(item), item)
        for position, item in enumerate(items, start=1)
    ]
    keyed.sort(key=lambda row: row[:3])
    return [row[3] for row in keyed]


# --- the tier as a reader sees it -------------------------------------------------------------
#
# A tier is a property of the document, the same for every reader, so ranking (and a shared
# link) means the same to everyone. Its *name* depends on who reads: a note is "Your note" only
# to the person who wrote it. A teammate's note keeps the note tier (people write notes;
# externals only corroborate them) and is named by its author, so a reader can tell their own
# word from a colleague's.


def tier_label(tier: str, *, mine: bool, author: str = "") -> str:
    """The words for `tier` as one reader sees a document of it: "Your note" / "Your
    annotation" when the reader wrote it, "Note by carol" / "Annotation by carol" when
    `author` (someone else) did, "Note" / "Annotation" when the author is not to be named.
    Other tiers are nobody's own: their `TrustTier` label; an unknown tier, its value."""
    if tier in (TrustTier.NOTE, TrustTier.ANNOTATION):
        noun = "note" if tier == TrustTier.NOTE else "annotation"
        if mine:
            return f"Your {noun}"
        return f"{noun.capitalize()} by {author}" if author else noun.capitalize()
    try:
        return str(TrustTier(tier).label)
    except ValueError:
        return str(tier)


def document_tier_labels(user_id: int | None, document_ids: Iterable[int]) -> dict[int, str]:
    """`tier_label` of each of `document_ids` that the user may see (through
    `eligibility.visible_documents`), keyed by document id; one query. A document the user
    may not see is left out, so its author is never named (callers fall back to
    `tier_label(tier, mine=False)`)."""
    wanted = {int(pk) for pk in document_ids}
    if not wanted or user_id is None:
        return {}
    rows = (
        visible_documents(user_id)
        .filter(pk__in=wanted)
        .values_list("pk", "trust_tier", "owner_id", "owner__username")
    )
    return {
        pk: tier_label(tier, mine=owner_id == user_id, author=username or "")
        for pk, tier, owner_id, username in rows
    }
