"""Graph expansion (seeds/lode-retrieval.md `ctx = graph_expand(big)`):
from the documents of the top hits, follow links one hop and add the linked passages that
best match the query, as context marked "via link from X" with the edge that led there.

    decide (graph_discipline.py: the rule, or the user's *Follow links*)
    → seeds: the documents of the top `SEED_HITS` hits, in rank order
    → edges: `graph_read.resolved_edges(audience)` touching a seed, either direction —
      declared kinds only, inferred ones (`mentions`, `related`) only when asked
    → linked documents: the other end of each edge (not a seed; the first edge found for a
      document names it), at most `MAX_LINKED_DOCUMENTS`, narrowed by the query's filters
    → their head passages scored by the same legs and fusion as search, restricted to those
      documents (`pipeline.fused_candidates(restrict=…)`); per document the best
      `PER_DOCUMENT` passages (a document none of whose passages scored: its first
      passage, after the scored ones), at most `MAX_ADDED` in all, none already a hit
    → merged into the hits (`merge`), ordered by the trust gradient

Eligibility: every edge comes from `resolved_edges`, which checks both ends against the
audience's spaces and liveness; the scored passages are then checked again by search's
canonical row check (head passages of live documents in the audience's spaces). So an
expansion can never add a passage the user could not have found by searching.

Order (`merge`): an added passage inherits the relevance position of the hit it was
reached from (its seed), and the trust rule of retrieval/trust.py applies to it with the
less trusted of the edge's tier (`graph_read.edge_tier`: an inferred edge is the bottom
tier) and its own document's tier; at equal keys a direct hit comes first. So a passage
reached by a declared link from the best hit sits right after that hit, one reached by an
inferred edge about as far down as a hit of twice that rank, and never above a direct hit
of the same relevance.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db.models import Q

from notes.models import Document, title_key
from retrieval.eligibility import Audience, eligible_documents, narrow_audience
from retrieval.plan.graph_discipline import Discipline, Facts, decide, reads_links
from retrieval.query import ParsedQuery
from retrieval.search.fusion import FusedHit
from retrieval.search.graph_read import (
    DECLARED_KINDS,
    INFERRED_KINDS,
    basis_of,
    edge_tier,
    resolved_edges,
)
from retrieval.text.stemming import fold, folded_tokens
from retrieval.trust import PENALTY, trust_key
from retrieval.words.question_words import QUESTION_FRAME_WORDS
from retrieval.words.stopwords import QUERY_STOPWORDS, QUESTION_FILLER_WORDS

if TYPE_CHECKING:
    from retrieval.models import Edge
    from retrieval.search.pipeline import Hit

SEED_HITS = 5  # the documents of the top hits whose links are followed
MAX_LINKED_DOCUMENTS = 24  # linked documents scored (nearest seed, its own links first)
PER_DOCUMENT = 1  # passages taken from each linked document
MAX_ADDED = 4  # passages added in all (the evidence pack holds 12 items by default)
MAX_TITLE_WORDS = 12  # the longest run of question words looked up as a title
MAX_QUESTION_WORDS = 64  # words of a long query looked at for titles (bounded lookup)
NON_CONTENT = QUERY_STOPWORDS | QUESTION_FILLER_WORDS | QUESTION_FRAME_WORDS
WORD = re.compile(r"\w+(?:[-'’.]\w+)*")


@dataclass(frozen=True)
class Via:
    """How an added passage was reached: the edge from (or to) a seed document."""

    seed_document_id: int
    seed_title: str
    seed_rank: int  # the rank of the hit the seed document was found by
    edge_id: int
    kind: str
    # "out": the seed links to the added document; "in": the added document links to the seed.
    direction: str
    inferred: bool
    tier: str  # the edge's trust tier (`graph_read.edge_tier`)
    basis: dict[str, Any] = field(default_factory=dict)

    @property
    def kind_label(self) -> str:
        from retrieval.models import Edge

        return str(Edge.Kind(self.kind).label)

    @property
    def phrase(self) -> str:
        """In words: "via link from X" (or "links to X" for an incoming edge)."""
        if self.direction == "out":
            return f"via link from “{self.seed_title}”"
        return f"links to “{self.seed_title}”"

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed_document_id": self.seed_document_id,
            "seed_title": self.seed_title,
            "seed_rank": self.seed_rank,
            "edge_id": self.edge_id,
            "kind": self.kind,
            "direction": self.direction,
            "inferred": self.inferred,
            "tier": self.tier,
            "basis": dict(self.basis),
        }


@dataclass(frozen=True)
class Added:
    """A passage expansion adds, before it becomes a search Hit (pipeline.py builds those)."""

    passage_id: int
    document_id: int
    fused: FusedHit
    via: Via
    reasons: list[str]


# Search's scoring restricted to documents: (parsed, audience, mode=, restrict=) → [(fused
# hit, document id)], best first (`pipeline.scored_in_documents`); and Hits from `Added`.
Score = Callable[..., list[tuple[FusedHit, int]]]
Build = Callable[[list[Added]], list["Hit"]]


@dataclass
class Expansion:
    """What graph expansion decided and added, for the page, the API and the trace."""

    discipline: Discipline
    follow_links: bool | None = None
    follow_inferred: bool = False
    seed_document_ids: list[int] = field(default_factory=list)
    linked_document_ids: list[int] = field(default_factory=list)
    edges_followed: int = 0
    added: list[Hit] = field(default_factory=list)
    elapsed_ms: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ran(self) -> bool:
        return self.discipline.run

    def as_dict(self) -> dict[str, Any]:
        """The trace's and the API's view: the decision, and each added passage with its edge."""
        return {
            "ran": self.discipline.run,
            "rule": self.discipline.rule,
            "reason": self.discipline.reason,
            "follow_links": self.follow_links,
            "follow_inferred": self.follow_inferred,
            "seed_document_ids": list(self.seed_document_ids),
            "linked_document_ids": list(self.linked_document_ids),
            "edges_followed": self.edges_followed,
            "added": [
                {
                    "passage_id": hit.passage.pk,
                    "document_id": hit.passage.document_id,
                    "document_title": hit.passage.document.title,
                    "via": hit.via.as_dict() if hit.via else None,
                }
                for hit in self.added
            ],
            "elapsed_ms": round(self.elapsed_ms, 3),
            "notes": list(self.notes),
        }


# --- the facts the discipline rule reads ---------------------------------------------------------


def content_words(question: str) -> list[str]:
    """The question's words that carry its topic, folded (the index's form), in order."""
    words = [w.casefold() for w in WORD.findall(question)]
    return list(dict.fromkeys(fold(w) for w in words if w not in NON_CONTENT))


# How many same-titled documents of every space `named_documents` reads before it lets the
# database filter by space instead.
TITLE_SCAN = 200


def named_documents(question: str, audience: Audience) -> list[Document]:
    """The live documents of the audience whose title is a run of the question's words
    (`title_key`), longest first; a title inside a longer one found is left out."""
    words = WORD.findall(question)[:MAX_QUESTION_WORDS]
    keys: set[str] = set()
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + MAX_TITLE_WORDS) + 1):
            keys.add(title_key(" ".join(words[i:j])))
    keys.discard("")
    if not keys:
        return []
    live = Document.objects.filter(deleted_at__isnull=True, title_key__in=keys).exclude(head=None)
    # By title key first, the space checked here: with the spaces in the same statement,
    # SQLite walks every document of the audience's spaces instead of the title index (at
    # 56k passages ~40 ms a search against ~3 ms; bench/README.md). Bounded: when
    # more documents of all spaces bear these titles than `TITLE_SCAN`, the filtered
    # statement answers instead.
    matches = list(live.order_by("pk").values_list("pk", "space_id")[: TITLE_SCAN + 1])
    if len(matches) > TITLE_SCAN:
        found = list(live.filter(space_id__in=audience.sorted_space_ids).order_by("pk")[:20])
    else:
        ids = [pk for pk, space in matches if space in audience.space_ids][:20]
        found = list(Document.objects.filter(pk__in=ids).order_by("pk"))
    found.sort(key=lambda d: (-len(d.title_key), d.pk))
    kept: list[Document] = []
    for document in found:
        if not any(document.title_key in longer.title_key for longer in kept):
            kept.append(document)
    return kept


def _linked(audience: Audience, document_ids: Sequence[int]) -> set[int]:
    """Which of `document_ids` have a declared, resolved edge (either direction) the
    audience may see."""
    if not document_ids:
        return set()
    rows = (
        resolved_edges(audience)
        .filter(kind__in=DECLARED_KINDS)
        .filter(Q(from_document_id__in=document_ids) | Q(to_document_id__in=document_ids))
        .values_list("from_document_id", "to_document_id")
    )
    ids = set(document_ids)
    return {end for pair in rows for end in pair if end in ids}


def facts_for(question: str, hits: Sequence[Hit], audience: Audience) -> Facts:
    """What `graph_discipline.decide` reads, looked up for `question` and its hits."""
    named = named_documents(question, audience)
    top = hits[0].passage.document_id if hits else None
    missing: tuple[str, ...] = ()
    if named:
        first = named[0]
        held = set(folded_tokens(first.title))
        passage = next((h.passage for h in hits if h.passage.document_id == first.pk), None)
        if passage is not None:
            held |= set(folded_tokens(passage.title_text + "\n" + passage.text))
        missing = tuple(w for w in content_words(question) if w not in held)
    # Links are looked up only when the rule can read them; otherwise they stay False.
    titles = tuple(d.title for d in named)
    linked = (
        _linked(audience, [d.pk for d in named] + ([top] if top else []))
        if reads_links(question, named_titles=titles, named_missing_words=missing)
        else set()
    )
    return Facts(
        named_titles=titles,
        named_links_out=any(d.pk in linked for d in named),
        named_missing_words=missing,
        top_hit_links_out=top in linked,
    )


# --- expansion --------------------------------------------------------------------------------


def plan(
    question: str, hits: Sequence[Hit], audience: Audience, *, follow_links: bool | None
) -> Discipline:
    """The discipline decision for `question` over its hits (facts looked up only when the
    rule needs them: not when the user decided)."""
    if follow_links is not None:
        return decide(question, follow_links=follow_links)
    return decide(question, follow_links=None, facts=facts_for(question, hits, audience))


def _edges(audience: Audience, seeds: Sequence[int], kinds: Sequence[str]) -> list[Edge]:
    """The resolved, visible edges of `kinds` touching a seed, in a deterministic order."""
    return list(
        resolved_edges(audience)
        .filter(kind__in=kinds)
        .filter(Q(from_document_id__in=seeds) | Q(to_document_id__in=seeds))
        .select_related("from_document", "to_document")
        .order_by("id")
    )


def graph_expand(
    parsed: ParsedQuery,
    hits: Sequence[Hit],
    audience: Audience,
    *,
    follow_inferred: bool,
    score: Score,
    mode: str = "hybrid",
) -> tuple[list[Added], list[int], list[int], int]:
    """The passages one link away from the top hits' documents that best match `parsed`
    (scored by `score`: search's legs and fusion restricted to the linked documents), each
    with the edge that led there. Also returns the seed and linked document ids and the
    number of edges followed."""
    seed_rank: dict[int, int] = {}
    seed_title: dict[int, str] = {}
    for hit in hits[:SEED_HITS]:
        if hit.orphaned:
            continue
        document = hit.passage.document
        if document.pk not in seed_rank:
            seed_rank[document.pk] = hit.rank
            seed_title[document.pk] = document.title
    seeds = list(seed_rank)
    if not seeds:
        return [], [], [], 0
    kinds = list(DECLARED_KINDS) + (list(INFERRED_KINDS) if follow_inferred else [])
    edges = _edges(audience, seeds, kinds)
    # The first edge reaching each document, seeds in rank order, declared edges first.
    reached: dict[int, tuple[int, Edge, str]] = {}

    def edge_order(e: Edge) -> tuple[int, bool, bool, int]:
        # The nearest seed first; its own links (out) before links to it (in): what the
        # note the query found points at is more specific than what points at it.
        far = 10**6
        out = seed_rank.get(e.from_document_id or 0, far)
        near = min(out, seed_rank.get(e.to_document_id, far))
        return near, out != near, e.kind in INFERRED_KINDS, e.pk

    for edge in sorted(edges, key=edge_order):
        if edge.from_document_id in seed_rank:
            seed, other, direction = edge.from_document_id, edge.to_document_id, "out"
        else:
            seed, other, direction = edge.to_document_id, edge.from_document_id, "in"
        if other is None or other in seed_rank or other in reached:
            continue
        reached[other] = (seed, edge, direction)
    linked = list(reached)[:MAX_LINKED_DOCUMENTS]
    if not linked:
        return [], seeds, [], len(edges)
    narrowed, _ = narrow_audience(parsed, audience)
    restrict = Document.objects.filter(pk__in=linked)
    filtered = eligible_documents(parsed, narrowed)
    if filtered is not None:
        restrict = restrict.filter(pk__in=filtered.values("pk"))
    already = {hit.passage.pk for hit in hits}
    ranked = score(parsed, narrowed, mode=mode, restrict=restrict)
    taken: dict[int, int] = {}
    # (seed rank, incoming edge, relevance order, fused hit, document id)
    chosen: list[tuple[int, bool, int, FusedHit, int]] = []
    for order, (fused, document_id) in enumerate(ranked):
        if fused.passage_id in already or document_id not in reached:
            continue
        if taken.get(document_id, 0) >= PER_DOCUMENT:
            continue
        taken[document_id] = taken.get(document_id, 0) + 1
        seed = reached[document_id][0]
        incoming = reached[document_id][2] == "in"
        chosen.append((seed_rank[seed], incoming, order, fused, document_id))
    # A linked document none of whose passages the legs scored (no query word, and no
    # dense leg in lexical mode or when it is down): its first head passage, after every
    # scored one — the link itself is why it is context. Not with phrases or exclusions,
    # which a passage must honour to be shown at all.
    allowed = set(restrict.values_list("pk", flat=True))
    scored = {document_id for _, document_id in ranked}
    unscored = [d for d in linked if d in allowed and d not in scored]
    if unscored and not (parsed.phrases or parsed.excluded):
        firsts = first_passages(unscored, audience)
        for i, document_id in enumerate(unscored):
            pid = firsts.get(document_id)
            if pid is None or pid in already:
                continue
            fused = FusedHit(
                passage_id=pid,
                rrf=0.0,
                reasons=["holds no query word: the linked document's first passage"],
            )
            seed, _, direction = reached[document_id]
            chosen.append((seed_rank[seed], direction == "in", len(ranked) + i, fused, document_id))
    chosen.sort(key=lambda row: row[:3])
    chosen = chosen[:MAX_ADDED]
    added: list[Added] = []
    for _, _, _, fused, document_id in chosen:
        seed, edge, direction = reached[document_id]
        from_tier = edge.from_document.trust_tier if edge.from_document else None
        via = Via(
            seed_document_id=seed,
            seed_title=seed_title[seed],
            seed_rank=seed_rank[seed],
            edge_id=edge.pk,
            kind=edge.kind,
            direction=direction,
            inferred=edge.inferred,
            tier=edge_tier(edge.kind, from_tier),
            basis=basis_of(edge),
        )
        words = "inferred edge" if edge.inferred else "declared link"
        reasons = [
            *fused.reasons,
            f"{via.phrase} ({edge.kind}, {words}, rule {edge.rule} v{edge.rule_version})",
        ]
        added.append(Added(fused.passage_id, document_id, fused, via, reasons))
    return added, seeds, linked, len(edges)


def first_passages(document_ids: Sequence[int], audience: Audience) -> dict[int, int]:
    """{document id: its first head passage's id} for live documents of the audience."""
    from retrieval.models import Passage

    rows = (
        Passage.objects.filter(
            document_id__in=document_ids,
            is_head=True,
            document__space_id__in=audience.sorted_space_ids,
            document__deleted_at__isnull=True,
        )
        .order_by("document_id", "position", "pk")
        .values_list("document_id", "pk")
    )
    first: dict[int, int] = {}
    for document_id, pid in rows:
        first.setdefault(document_id, pid)
    return first


def expansion_tier(hit: Hit) -> str:
    """The tier an added passage is ranked with: the less trusted of its edge's and its
    document's (an inferred edge is the bottom tier whatever it reaches)."""
    assert hit.via is not None
    own = hit.passage.document.trust_tier
    return max((hit.via.tier, own), key=lambda tier: PENALTY.get(tier, 1.0))


def merge(hits: Sequence[Hit], added: Sequence[Hit]) -> list[Hit]:
    """`hits` (final order) with `added` placed by the trust rule (module docstring), ranks
    renumbered from 1. Direct hits keep their order."""
    keyed: list[tuple[float, int, int, int, Hit]] = [
        (float(hit.rank), 0, hit.rank, hit.passage.pk, hit) for hit in hits
    ]
    for order, hit in enumerate(added):
        assert hit.via is not None
        key = trust_key(hit.via.seed_rank, expansion_tier(hit))
        keyed.append((key, 1, order, hit.passage.pk, hit))
    keyed.sort(key=lambda row: row[:4])
    out = [row[4] for row in keyed]
    for rank, hit in enumerate(out, start=1):
        hit.rank = rank
    return out


def expand(
    parsed: ParsedQuery,
    hits: Sequence[Hit],
    audience: Audience,
    *,
    follow_links: bool | None,
    score: Score,
    build: Build,
    follow_inferred: bool = False,
    mode: str = "hybrid",
) -> Expansion:
    """Decide, and when the decision is to run, expand: the one entry point of search.
    `score` and `build` are search's (pipeline.py passes them, so this module never imports
    the pipeline): scoring restricted to documents, and Hits made from what was added."""
    started = time.perf_counter()
    discipline = plan(parsed.text, hits, audience, follow_links=follow_links)
    expansion = Expansion(
        discipline=discipline, follow_links=follow_links, follow_inferred=follow_inferred
    )
    if discipline.run and hits:
        added, seeds, linked, edges = graph_expand(
            parsed, hits, audience, follow_inferred=follow_inferred, score=score, mode=mode
        )
        expansion.added = build(added)
        expansion.seed_document_ids, expansion.linked_document_ids = seeds, linked
        expansion.edges_followed = edges
        if not added:
            expansion.notes.append(
                "Links were followed, but no linked passage was added"
                + (" (the top results link nowhere)." if not linked else ".")
            )
    expansion.elapsed_ms = (time.perf_counter() - started) * 1000
    return expansion
