"""The EvidencePack: the ordered, deduplicated, budgeted evidence an answerer may use
(seeds/lighthouse-spec.md "EvidencePack"; seeds/lode-retrieval.md
"Pinned-note context is deliberately unbounded").

Order (stable, so the same hits always make the same pack and a trace can be replayed):
first every head passage of a **pinned** note ("ask about this note"), by position, never
deduplicated or counted against the budget — capping them would drop parts of the very note
the user asked about (seed decision lode-ol2v); then the **search hits** in rank order, which
already folds in the trust gradient and places passages graph expansion added right after the
hit they were reached from (the trace, not the item, records which came by a link).

A hit is dropped as a near-duplicate of an earlier item when it is the same passage, the same
text (SHA-256, or after `retrieval.text.nfkc_folded`), or token-set Jaccard ≥
`JACCARD_THRESHOLD` over the index's folded tokens — **unless** the tokens that differ include
a number or a negation word: "30" vs "60", or a "not", is what conflict detection needs to see.

Budget (hits only): at most `max_items` hit items and `max_chars` characters of their text
(`LODE_ASK_MAX_ITEMS`, `LODE_ASK_MAX_CHARS`); an item that would overflow the characters is
dropped and the next still tried, so a long passage does not starve shorter ones. Every
dropped hit is recorded in `pack.dropped` ({"passage_id", "reason", "rank"}).

At egress a parent block shared by several items is sent once (`egress_blocks`), while each
item keeps its own citation range. Each item carries its section headings beyond the document
title (`PackItem.heading_path`), which the decision and the extractive answerer count as its
words.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from django.conf import settings

from retrieval.answer.types import EvidencePack, PackItem
from retrieval.text.normalise import nfkc_folded
from retrieval.text.stemming import fold, folded_tokens
from retrieval.words.negation import NEGATION_TOKENS

if TYPE_CHECKING:
    from retrieval.models import Passage
    from retrieval.search.pipeline import Hit

JACCARD_THRESHOLD = 0.9
# What `retrieval.index.chunking` ends a heading with when it cuts it to its length bound.
HEADING_CUT_MARK = "…"


def pack_item(
    passage: Passage,
    *,
    pinned: bool = False,
    rank: int = 0,
    score: float = 0.0,
    score_name: str = "",
) -> PackItem:
    """A PackItem from a passage row (its `version` and `document` loaded)."""
    version = passage.version
    document = passage.document
    return PackItem(
        passage_id=passage.pk,
        document_id=document.pk,
        version_id=version.pk,
        version_number=version.number,
        document_title=document.title,
        kind=document.kind,
        trust_tier=document.trust_tier,
        text=passage.text,
        start=passage.start,
        end=passage.end,
        start_line=passage.start_line,
        end_line=passage.end_line,
        parent_start=passage.parent_start,
        parent_end=passage.parent_end,
        version_created_at=version.created_at.isoformat() if version.created_at else "",
        no_egress=bool(document.no_egress),
        pinned=pinned,
        rank=rank,
        score=float(score),
        score_name=score_name,
        heading_path=headings_beyond_title(document.title, passage.heading_path or ()),
    )


def headings_beyond_title(title: str, heading_path: Iterable[str]) -> tuple[str, ...]:
    """The entries of a passage's heading path that add a word to the document title.

    A note's first heading usually repeats its title ("# Deploy runbook" in "Deploy
    runbook", every SciFact abstract's title); the title is already on the item, so only the
    section headings below it are kept (`PackItem.heading_path`)."""
    title_words = set(folded_tokens(title))
    return tuple(
        heading for heading in heading_path if set(folded_tokens(_uncut(heading))) - title_words
    )


def _uncut(heading: str) -> str:
    """A heading the chunker cut to its length bound ends in "…" mid-word: without that
    partial word ("…Global Burden of Disea…" is not a new word "disea")."""
    if not heading.endswith(HEADING_CUT_MARK):
        return heading
    kept = heading.removesuffix(HEADING_CUT_MARK).rsplit(maxsplit=1)
    return kept[0] if len(kept) > 1 else ""


def token_set(text: str) -> frozenset[str]:
    """The stemmed, case-folded tokens of `text`, as the lexical index sees them."""
    return frozenset(folded_tokens(text))


def _protects(token: str) -> bool:
    """A token whose difference means the passages may disagree, not merely repeat."""
    return any(ch.isdigit() for ch in token) or token in _negation_tokens()


@lru_cache(maxsize=1)
def _negation_tokens() -> frozenset[str]:
    # Folded lazily: `fold` stems, and the stemmer is loaded on first use. The widest negation
    # list (every "n't" stem and the stray "t"): over-protecting only keeps a passage that
    # could have been dropped.
    return frozenset(fold(word) for word in NEGATION_TOKENS)


@dataclass
class _Seen:
    """What dedup compares a candidate against, computed once per kept item."""

    passage_id: int
    sha: str
    normal: str
    tokens: frozenset[str]


def _seen(item: PackItem) -> _Seen:
    return _Seen(
        passage_id=item.passage_id,
        sha=hashlib.sha256(item.text.encode("utf-8")).hexdigest(),
        normal=nfkc_folded(item.text),
        tokens=token_set(item.text),
    )


def duplicate_of(candidate: _Seen, kept: Iterable[_Seen]) -> tuple[int, str] | None:
    """(passage id, rule) of the first kept item `candidate` duplicates, or None."""
    for other in kept:
        if candidate.passage_id == other.passage_id:
            return other.passage_id, "same passage"
        if candidate.sha == other.sha:
            return other.passage_id, "same text"
        if candidate.normal == other.normal:
            return other.passage_id, "same normalised text"
        union = candidate.tokens | other.tokens
        if not union:
            continue
        jaccard = len(candidate.tokens & other.tokens) / len(union)
        if jaccard >= JACCARD_THRESHOLD:
            differing = candidate.tokens ^ other.tokens
            if any(_protects(token) for token in differing):
                continue
            return other.passage_id, f"token Jaccard {jaccard:.2f}"
    return None


def assemble(
    pinned: Sequence[PackItem],
    ranked: Sequence[PackItem],
    *,
    max_items: int,
    max_chars: int,
) -> EvidencePack:
    """The pack from PackItems already made: pure (no database), the rules of the module
    docstring. `pinned` items are sorted by (start, passage id) — their order in the note —
    and `ranked` by (rank, passage id)."""
    pack = EvidencePack(max_items=max_items, max_chars=max_chars)
    kept: list[_Seen] = []
    pinned_ids: set[int] = set()
    for item in sorted(pinned, key=lambda i: (i.start, i.passage_id)):
        if item.passage_id in pinned_ids:
            continue
        pinned_ids.add(item.passage_id)
        pack.items.append(item)
        kept.append(_seen(item))
    hit_items = 0
    hit_chars = 0
    for item in sorted(ranked, key=lambda i: (i.rank, i.passage_id)):
        if item.passage_id in pinned_ids:
            pack.dropped.append(
                {"passage_id": item.passage_id, "reason": "already pinned", "rank": item.rank}
            )
            continue
        seen = _seen(item)
        duplicate = duplicate_of(seen, kept)
        if duplicate is not None:
            other, rule = duplicate
            pack.dropped.append(
                {
                    "passage_id": item.passage_id,
                    "reason": f"near-duplicate of {other}",
                    "rule": rule,
                    "rank": item.rank,
                }
            )
            continue
        if hit_items >= max_items or hit_chars + len(item.text) > max_chars:
            pack.dropped.append(
                {"passage_id": item.passage_id, "reason": "over budget", "rank": item.rank}
            )
            continue
        pack.items.append(item)
        kept.append(seen)
        hit_items += 1
        hit_chars += len(item.text)
    return pack


def build_pack(
    hits: list[Hit],
    *,
    pinned: Sequence[Passage] = (),
    max_items: int | None = None,
    max_chars: int | None = None,
) -> EvidencePack:
    """The evidence pack for `hits` (search order) and the `pinned` note's head passages.

    The caller has already checked that the user may see every passage (search only returns
    the user's own; `ask` checks the pinned note's owner).
    """
    max_items = settings.LODE_ASK_MAX_ITEMS if max_items is None else max_items
    max_chars = settings.LODE_ASK_MAX_CHARS if max_chars is None else max_chars
    pinned_items = [pack_item(p, pinned=True) for p in pinned]
    ranked = [
        pack_item(h.passage, rank=h.rank, score=h.score, score_name=h.score_name) for h in hits
    ]
    return assemble(pinned_items, ranked, max_items=max_items, max_chars=max_chars)


def version_bodies(version_ids: Iterable[int]) -> dict[int, str]:
    """{version_id: body} for the given versions (immutable rows, so always the cited bytes)."""
    from notes.models import Version

    ids = set(version_ids)
    if not ids:
        return {}
    return dict(Version.objects.filter(pk__in=ids).values_list("pk", "body"))


# --- egress: one copy of each parent block ------------------------------------------------------


@dataclass
class EgressBlock:
    """A parent block (small-to-big context) as sent to an answerer: its text once, and the
    pack items (each with its own range, which the citation pins) that lie in it."""

    version_id: int
    document_id: int
    start: int
    end: int
    text: str
    passage_ids: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "version_id": self.version_id,
            "document_id": self.document_id,
            "start": self.start,
            "end": self.end,
            "chars": len(self.text),
            "passage_ids": list(self.passage_ids),
        }


def egress_blocks(
    items: Sequence[PackItem], bodies: Mapping[int, str] | None = None
) -> list[EgressBlock]:
    """The distinct parent blocks of `items`, in the order their first item appears.

    Several passages chunked from one block would otherwise send that block once per passage
    — pure waste (seed, lode-ol2v). Dedup happens here, at egress, not in the pack: every item
    keeps its own range. `bodies` is {version_id: body}; missing bodies are read from the
    database. A block whose range does not fit its body falls back to the item's own text.
    """
    bodies = dict(bodies or {})
    missing = {item.version_id for item in items} - set(bodies)
    if missing:
        from notes.models import Version

        bodies.update(Version.objects.filter(pk__in=missing).values_list("pk", "body"))
    blocks: dict[tuple[int, int, int], EgressBlock] = {}
    for item in items:
        body = bodies.get(item.version_id, "")
        fits = 0 <= item.parent_start < item.parent_end <= len(body)
        start, end = (item.parent_start, item.parent_end) if fits else (item.start, item.end)
        key = (item.version_id, start, end)
        block = blocks.get(key)
        if block is None:
            block = blocks[key] = EgressBlock(
                version_id=item.version_id,
                document_id=item.document_id,
                start=start,
                end=end,
                text=body[start:end] if fits else item.text,
            )
        block.passage_ids.append(item.passage_id)
    return list(blocks.values())
