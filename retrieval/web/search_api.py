"""Search over the API: the same `search()` the page calls."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, Literal

from django.conf import settings
from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status
from ninja.errors import HttpError
from pydantic import BaseModel

from lode_site.api_bodies import STORABLE_TEXT
from lode_site.errors import NO_ACCESS
from lode_site.ids import MAX_ID, DbId
from retrieval.eligibility import NoAccess, audience_for
from retrieval.highlight import ANCHOR_NOTE, HIGHLIGHT_MAX_CHARS, HIGHLIGHT_MAX_MARKS
from retrieval.links import document_url
from retrieval.search import listing
from retrieval.search.evidence import EvidenceOutcome, open_evidence
from retrieval.search.grouping import PASSAGES_PER_GROUP, group_by_document
from retrieval.search.pipeline import (
    DEFAULT_MODE,
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    MEANING_ONLY_FLOOR,
    MODES,
    Hit,
    search,
)
from retrieval.search.rerank import RERANK_CHOICES

router = Router(tags=["search"])
# The choices `search` accepts, stated in the schema as enums (`Literal[("a", "b")]` is
# `Literal["a", "b"]`).
SearchMode = Literal[MODES]
Reranker = Literal[RERANK_CHOICES]
GroupBy = Literal["passage", "note"]


class Out(BaseModel):
    """A search response's parts are plain pydantic models, built from keywords: ninja's
    `Schema` reads every field of every object through its attribute getter (a search response
    is ~700 objects), which cost more CPU than the rest of the response together
    (`bench/request_cpu.py`). The fields, their descriptions and the JSON are the same."""


class LegOut(Out):
    rank: int
    score: float
    score_name: str  # "bm25" (higher is better, on both databases) or "cosine"


class ParentOut(Out):
    """Small-to-big context: a window of the passage's heading section around the passage
    (at most LODE_SEARCH_CONTEXT_CHARS characters either side of it, 1,000 by default), not
    the whole section. Citations use the passage range. The whole section is
    `[section_start, section_end)` of the version body: `GET /api/notes/{document_id}/
    versions/{version_id}` returns that body for a note."""

    start: int = Field(description="Start of `text` in the version body (Unicode code points).")
    end: int = Field(description="End (exclusive) of `text` in the version body.")
    text: str = Field(
        description='The context window; "" when the response size cap left it out (`trimmed`).'
    )
    section_start: int = Field(description="Start of the whole parent section in the body.")
    section_end: int = Field(description="End (exclusive) of the whole parent section.")
    truncated: bool = Field(
        description="True when `text` is less than the whole section (a window, or trimmed)."
    )
    trimmed: bool = Field(
        False, description="True when the response size cap left this hit's context out."
    )


class SegmentOut(Out):
    """A piece of the passage text; the pieces concatenate to exactly `text`."""

    text: str
    highlighted: bool = Field(description="True when this piece matched the query.")


class HighlightOut(Out):
    """A highlighted span of the passage text, in two units."""

    start: int = Field(description="Start of the span in the passage text, in Unicode code points.")
    end: int = Field(description="End (exclusive) in the passage text, in Unicode code points.")
    start_utf16: int = Field(
        description="The same start in UTF-16 code units (a JavaScript string index)."
    )
    end_utf16: int = Field(
        description="The same end (exclusive) in UTF-16 code units (a JavaScript string index)."
    )


class AnchorOut(Out):
    """Evidence anchor: from the first highlighted span to the end of the last. A bounding
    span: it may contain unmatched text between hits."""

    start: int = Field(description="Start in the version body, in Unicode code points.")
    end: int = Field(description="End (exclusive) in the version body, in Unicode code points.")
    passage_start: int = Field(description="Start in the passage text, in Unicode code points.")
    passage_end: int = Field(
        description="End (exclusive) in the passage text, in Unicode code points."
    )
    start_line: int = Field(description="First line of the span in the version body (1-based).")
    end_line: int = Field(description="Last line of the span in the version body (inclusive).")
    note: str = Field(ANCHOR_NOTE, description="What the span does not promise.")


class ViaOut(Out):
    """Graph expansion: how a passage the query did not find was reached — by an
    edge from (or to) the document of a top hit."""

    seed_document_id: int = Field(description="The top hit's document the edge touches.")
    seed_title: str
    seed_rank: int = Field(description="Rank of the hit that document was found by.")
    edge_id: int
    kind: str = Field(description="links_to | contains | annotates | mentions | related.")
    direction: str = Field(
        description='"out": the seed links to this passage\'s document; "in": this '
        "passage's document links to the seed."
    )
    inferred: bool = Field(description="An inferred edge (mentions, related): the bottom tier.")
    tier: str = Field(description="The edge's trust tier.")
    basis: dict[str, Any] = Field(
        description="How the edge was established: rule, rule_version, inferred, the "
        "version, passage and code-point span it was read from, a similarity score."
    )


class ExpansionOut(Out):
    """Whether links were followed, the rule that decided (graph discipline), and what was
    added."""

    ran: bool
    rule: str = Field(
        description="asked | not asked | relational words | two named things | ownership | "
        "why over a link | named note links out | single hop."
    )
    reason: str
    follow_links: bool | None
    follow_inferred: bool
    seed_document_ids: list[int]
    linked_document_ids: list[int]
    edges_followed: int
    added: list[dict[str, Any]] = Field(
        description="Each added passage: passage_id, document_id and its `via`."
    )
    elapsed_ms: float
    notes: list[str]


class HitOut(Out):
    rank: int
    score: float
    score_name: str
    passage_id: int
    document_id: int
    document_title: str
    document_kind: str
    trust_tier: str
    version_id: int
    version_number: int
    version_created_at: datetime
    heading_path: list[str]
    text: str = Field(
        description='The passage text; "" when the response size cap left it out (`text_trimmed`).'
    )
    text_trimmed: bool = Field(
        False,
        description="True when the response size cap (LODE_SEARCH_RESPONSE_MAX_CHARS) left "
        "this hit's text, segments and highlights out; `evidence_url` (or "
        "GET /api/evidence/…) gives the passage, `start`/`end` locate it in the version.",
    )
    offset_unit: str = "unicode_code_point"
    start: int
    end: int
    start_line: int
    end_line: int
    parent: ParentOut
    lexical: LegOut | None
    dense: LegOut | None
    rrf: float
    exact_matches: list[str]
    rerank_score: float | None
    rerank_score_name: str
    reasons: list[str]
    segments: list[SegmentOut] = Field(
        description="The passage text as ordered pieces; highlighted ones matched the query. "
        "They concatenate to exactly `text`. Render each piece as text, never as markup."
    )
    highlights: list[HighlightOut] = Field(
        description="Each highlighted piece's span in `text`: start/end in Unicode code "
        "points, start_utf16/end_utf16 in UTF-16 code units."
    )
    highlighted_by: str = Field(
        description='"index" (the lexical engine marked the matches), "query terms" (found in '
        'Python with the index\'s tokenizer rules, for hits the engine did not match) or "".'
    )
    highlights_truncated: bool = Field(
        False,
        description="True when some matches are not marked: a passage shows at most "
        f"{HIGHLIGHT_MAX_MARKS} highlighted segments, and one longer than "
        f"{HIGHLIGHT_MAX_CHARS:,} characters (chunked before the character bound) is "
        f"highlighted in its first {HIGHLIGHT_MAX_CHARS:,} only. The segments still "
        "concatenate to exactly `text`.",
    )
    anchor: AnchorOut | None = Field(
        description="First-to-last highlight range; may contain unmatched text between "
        "hits. Null when nothing is highlighted."
    )
    evidence_url: str = Field(
        description="Opens the passage re-verified against its pinned version and content hash."
    )
    weaker: bool = Field(
        False,
        description="A weaker match: holds none of the query's words and its cosine is below "
        "`similarity_floor`. Present only when the request asked for `weaker=true`.",
    )
    orphaned: bool = Field(
        False,
        description="An annotation whose quoted text is no longer in its external's current "
        "snapshot. Orphaned annotations rank after every live hit.",
    )
    via: ViaOut | None = Field(
        None,
        description="Set on a passage graph expansion added: not found by the query, reached "
        "by a link from a top hit's document (`follow_links`).",
    )
    more_in_note: int = Field(
        0,
        description="How many further passages of this hit's document ranked below it among "
        "the passages this search ranked: with `group_by=passage`, later hits of this "
        "response; with `group_by=note`, passages left out of the response in favour of this "
        "one (their ids in `more_in_note_passage_ids`).",
    )
    more_in_note_passage_ids: list[int] = Field(
        default_factory=list,
        description="With `group_by=note`: the ids of those further passages, best first "
        "(each opens with GET /api/evidence/…). Empty with `group_by=passage`.",
    )


class ListedDocumentOut(Out):
    """A document a filter-only query keeps."""

    document_id: int
    document_title: str
    document_kind: str
    trust_tier: str
    space_id: int
    source_name: str
    tags: list[str]
    version_id: int = Field(description="The current version.")
    version_number: int
    version_created_at: datetime = Field(
        description="When the current text was saved (the list's order, newest first)."
    )
    excerpt: str = Field(
        description=f"The first {listing.EXCERPT_CHARS} characters (at most) of the current "
        "text, as stored."
    )
    url: str = Field(description="The document's page.")


class ListingOut(Out):
    """A query of filters only (`tag:ops`) lists the documents they keep, newest first,
    instead of searching: one page of them."""

    page: int
    page_size: int
    total: int = Field(description="Documents the filters keep, over every page.")
    has_more: bool = Field(description="True when `page + 1` holds more documents.")
    documents: list[ListedDocumentOut]


class SearchOut(Out):
    query: str
    mode: str
    rerank: str
    error: str
    notes: list[str]
    degraded: list[str]
    lexical_candidates: int
    dense_candidates: int
    elapsed_ms: float
    truncated: bool = Field(
        False,
        description="True when the response size cap trimmed at least one hit (its context, "
        "or its text too); see each hit's `parent.trimmed` and `text_trimmed`.",
    )
    trimmed_hits: int = Field(0, description="How many hits were trimmed by the size cap.")
    weaker: bool = Field(
        False, description="Whether weaker matches were included (the `weaker` parameter)."
    )
    weaker_hidden: int = Field(
        0,
        description="Candidates left out as weaker matches: found by meaning alone, holding "
        "none of the query's words, with a cosine below `similarity_floor`. Repeat the "
        "request with `weaker=true` to get them. 0 with `hits` empty means nothing matched.",
    )
    similarity_floor: float = Field(
        MEANING_ONLY_FLOOR,
        description="The cosine a hit holding none of the query's words must reach to be "
        "returned without `weaker=true`.",
    )
    max_chars: int = Field(
        0,
        description="The size cap (LODE_SEARCH_RESPONSE_MAX_CHARS): characters of passage "
        "text (counted twice, as `text` and as `segments`), highlight markup (32 per segment, "
        "64 per highlight) and context this response may carry. Hits are charged in rank "
        "order; ids, scores and offsets are not counted.",
    )
    expansion: ExpansionOut | None = Field(
        None,
        description="Graph expansion: whether links were followed from the top hits, the "
        "rule that decided and the passages added (null when nothing was searched).",
    )
    group_by: GroupBy = Field(
        "passage",
        description='"passage": every hit is a passage (a document may appear several '
        'times); "note": one hit per document, its best passage, with `more_in_note`.',
    )
    listing: ListingOut | None = Field(
        None,
        description="Set when `q` is filters only (`tag:ops`): the documents they keep, "
        "newest first; `hits` is then empty. Null for every other query.",
    )
    hits: list[HitOut]


def expansion_out(data: dict[str, Any] | None) -> ExpansionOut | None:
    """The API's view of `Expansion.as_dict()` (also a stored trace's `expansion`)."""
    if not data:
        return None
    return ExpansionOut(
        ran=bool(data.get("ran")),
        rule=str(data.get("rule", "")),
        reason=str(data.get("reason", "")),
        follow_links=data.get("follow_links"),
        follow_inferred=bool(data.get("follow_inferred")),
        seed_document_ids=list(data.get("seed_document_ids", [])),
        linked_document_ids=list(data.get("linked_document_ids", [])),
        edges_followed=int(data.get("edges_followed", 0)),
        added=list(data.get("added", [])),
        elapsed_ms=float(data.get("elapsed_ms", 0.0)),
        notes=list(data.get("notes", [])),
    )


def _leg(leg) -> LegOut | None:
    return LegOut(rank=leg.rank, score=leg.score, score_name=leg.score_name) if leg else None


def hit_out(hit: Hit, *, more_in_note: int = 0, more_ids: list[int] | None = None) -> HitOut:
    """The API's view of one hit; `more_in_note` and `more_ids` name further passages of
    its document (see `HitOut.more_in_note`)."""
    p = hit.passage
    return HitOut(
        rank=hit.rank,
        score=hit.score,
        score_name=hit.score_name,
        passage_id=p.pk,
        document_id=p.document_id,
        document_title=p.document.title,
        document_kind=p.document.kind,
        trust_tier=p.document.trust_tier,
        version_id=p.version_id,
        version_number=p.version.number,
        version_created_at=p.version.created_at,
        heading_path=p.heading_path,
        text="" if hit.text_trimmed else p.text,
        text_trimmed=hit.text_trimmed,
        start=p.start,
        end=p.end,
        start_line=p.start_line,
        end_line=p.end_line,
        parent=ParentOut(
            start=hit.context_start,
            end=hit.context_end,
            text=hit.context_text,
            section_start=p.parent_start,
            section_end=p.parent_end,
            truncated=hit.context_truncated,
            trimmed=hit.context_trimmed,
        ),
        lexical=_leg(hit.fused.lexical),
        dense=_leg(hit.fused.dense),
        rrf=hit.fused.rrf,
        exact_matches=list(hit.fused.exact_matches),
        rerank_score=hit.rerank_score,
        rerank_score_name=hit.rerank_score_name,
        reasons=hit.reasons,
        segments=[SegmentOut(text=s.text, highlighted=s.highlighted) for s in hit.segments],
        highlights=[
            HighlightOut(start=h.start, end=h.end, start_utf16=h.start_utf16, end_utf16=h.end_utf16)
            for h in hit.highlights
        ],
        highlighted_by=hit.highlighted_by,
        highlights_truncated=hit.highlights_truncated,
        anchor=_anchor(hit),
        evidence_url=hit.evidence_url,
        weaker=hit.weak,
        orphaned=hit.orphaned,
        via=ViaOut(**hit.via.as_dict()) if hit.via is not None else None,
        more_in_note=more_in_note,
        more_in_note_passage_ids=more_ids or [],
    )


def _anchor(hit: Hit) -> AnchorOut | None:
    a = hit.anchor
    if a is None:
        return None
    return AnchorOut(
        start=a.body_start,
        end=a.body_end,
        passage_start=a.start,
        passage_end=a.end,
        start_line=a.start_line,
        end_line=a.end_line,
    )


class BudgetExceededOut(Schema):
    detail: str = Field(description="What was stopped and what to try instead.")


class NoAccessOut(Schema):
    detail: str = Field(description="The space is not one the caller is a member of.")


@router.get("/", response={200: SearchOut, 404: NoAccessOut, 503: BudgetExceededOut})
def search_endpoint(
    request: HttpRequest,
    q: str = Query(
        ...,
        max_length=settings.LODE_MAX_QUERY_CHARS,
        pattern=STORABLE_TEXT,
        description="The search page's query language; at most LODE_MAX_QUERY_CHARS "
        "characters, no NUL characters.",
    ),
    mode: SearchMode = DEFAULT_MODE,
    rerank: Reranker | None = None,
    limit: int = Query(
        DEFAULT_PAGE_SIZE,
        description=f"Hits to return: 1 to {MAX_PAGE_SIZE} (values outside are clamped).",
    ),
    weaker: bool = Query(
        False,
        description="Also return weaker matches: passages found by meaning alone that hold "
        "none of the query's words and whose cosine is below `similarity_floor`.",
    ),
    space: int | None = Query(
        None,
        ge=1,
        le=MAX_ID,
        description="Search only this space (an id from GET /api/spaces); default: every "
        "space the caller is a member of. A space the caller is not in is a 404. The query "
        'language\'s `space:` filter (`space:"Team docs"`) narrows the same way.',
    ),
    follow_links: bool | None = Query(
        None,
        description="Graph expansion: true follows links from the top hits' documents one "
        "hop and adds the linked passages that best match the query (marked `via`); false "
        "never does; absent, the graph discipline rule decides (relational or multi-hop "
        "questions). At most 4 passages are added beyond `limit`, each placed after the "
        "hit it was reached from. `expansion` says what ran and why.",
    ),
    follow_inferred: bool = Query(
        False,
        description="With expansion, also follow inferred edges (mentions, related), "
        "ranked at the bottom of the trust gradient.",
    ),
    group_by: Literal["passage", "note"] = Query(
        "passage",
        description='"passage" (default): `limit` passages, a document possibly several '
        'times. "note": up to `limit` documents, each as its best passage in rank order, '
        "with `more_in_note` and `more_in_note_passage_ids` naming its further passages "
        f"(up to {PASSAGES_PER_GROUP} passages per document are ranked to fill the page).",
    ),
    page: int = Query(
        1,
        ge=1,
        le=listing.MAX_PAGE,
        description="For a filter-only query's `listing`: the page (of `limit` documents).",
    ),
):
    """Hybrid search over the documents of the caller's spaces. `q` is the search page's
    query language (words, "phrases", -exclusions, filters such as `tag:ops` or `after:2024-03`; see
    /search/help); a query the language cannot run (a bad filter value, exclusions
    without a word, no letters or digits) finds nothing: no hits, and the reason
    in `error` (empty otherwise), as the search page shows it. `mode`: hybrid | lexical |
    semantic; `rerank`: learned | cross-encoder | off (default from settings). Offsets are Unicode
    code points; each hit's `highlights` also give UTF-16 code units (`*_utf16`). A hit's
    `anchor` spans its first to last highlight and may contain unmatched text between hits.
    `degraded` lists anything that limited this search (e.g. semantic search unavailable).

    Filters alone (`tag:ops`, `source:Runbooks`, `space:"Team docs"`) search nothing: they
    list the documents they keep, newest first, `limit` a page (`page`), in `listing`.
    Grouping: `group_by=note` returns one hit per document (its best passage) with the
    number and ids of its further passages; the ranking is the same.

    Weaker matches: the dense leg always finds nearest passages, however unrelated, so a
    passage holding none of the query's words is returned only when its cosine reaches
    `similarity_floor`; the others are counted in `weaker_hidden` and returned, marked
    `weaker`, with `weaker=true`. No hits and `weaker_hidden` 0: nothing matches.

    Bounded: each hit's `parent` is a window of its section around the passage, not the
    whole section, and the response carries at most `max_chars` characters of passage and
    context text; hits past that (in rank order) lose their context, then their text
    (`truncated`, `parent.trimmed`, `text_trimmed`), keeping ids, offsets and `evidence_url`.
    The rest: `GET /api/evidence/…` (the hit's `evidence_url` under /api) for the passage,
    `GET /api/notes/{document_id}/versions/{version_id}` for a note version's whole body.
    A search that runs past its time budget (LODE_REQUEST_BUDGET_SECONDS) is stopped: 503
    with `detail`."""
    try:
        audience = audience_for(request.auth.pk, space_id=space)
    except NoAccess:
        raise HttpError(404, NO_ACCESS) from None
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    filters_only = listing.filters_only_query(q)
    if filters_only is not None:
        started = time.perf_counter()
        kept = listing.list_documents(filters_only, audience=audience, page=page, page_size=limit)
        return listing_body(q, kept, mode=mode, elapsed_ms=(time.perf_counter() - started) * 1000)
    grouped = group_by == "note"
    result = search(
        user=request.auth,
        audience=audience,
        query=q,
        mode=mode,
        rerank=rerank or settings.LODE_RERANK,
        limit=min(limit * PASSAGES_PER_GROUP, 2 * MAX_PAGE_SIZE) if grouped else limit,
        show_weaker=weaker,
        follow_links=follow_links,
        follow_inferred=follow_inferred,
    )
    hits = grouped_hits(result.hits, limit) if grouped else ranked_hits(result.hits)
    trimmed = sum(1 for hit in hits if hit.text_trimmed or hit.parent.trimmed)
    body = SearchOut(
        query=result.query,
        mode=result.mode,
        rerank=result.rerank,
        error=result.error,
        notes=result.notes,
        degraded=result.degraded,
        lexical_candidates=result.lexical_candidates,
        dense_candidates=result.dense_candidates,
        elapsed_ms=result.elapsed_ms,
        truncated=bool(trimmed),
        trimmed_hits=trimmed,
        weaker=result.show_weaker,
        weaker_hidden=result.weaker_hidden,
        similarity_floor=MEANING_ONLY_FLOOR,
        max_chars=settings.LODE_SEARCH_RESPONSE_MAX_CHARS,
        expansion=expansion_out(result.expansion.as_dict() if result.expansion else None),
        group_by=group_by,
        hits=hits,
    )
    return body


def ranked_hits(hits: list[Hit]) -> list[HitOut]:
    """Every hit, each with how many later hits of the response share its document."""
    later: dict[int, int] = {}
    counts = []
    for hit in reversed(hits):
        document_id = hit.passage.document_id
        counts.append(later.get(document_id, 0))
        later[document_id] = later.get(document_id, 0) + 1
    return [
        hit_out(hit, more_in_note=count) for hit, count in zip(hits, reversed(counts), strict=True)
    ]


def grouped_hits(hits: list[Hit], limit: int) -> list[HitOut]:
    """One hit per document (its best passage), at most `limit`, in rank order, each naming
    its further passages."""
    return [
        hit_out(
            group.best,
            more_in_note=len(group.more),
            more_ids=[hit.passage.pk for hit in group.more],
        )
        for group in group_by_document(hits, max_groups=limit)
    ]


def listing_body(q: str, page: listing.DocumentList, *, mode: str, elapsed_ms: float) -> SearchOut:
    """The response to a filter-only query: no hits, one page of the documents it keeps."""
    tags = listing.tag_names([document.pk for document in page.documents])
    return SearchOut(
        query=q,
        mode=mode,
        rerank="off",
        error="",
        notes=[*page.parsed.notes, *page.notes],
        degraded=[],
        lexical_candidates=0,
        dense_candidates=0,
        elapsed_ms=elapsed_ms,
        max_chars=settings.LODE_SEARCH_RESPONSE_MAX_CHARS,
        listing=ListingOut(
            page=page.page,
            page_size=page.page_size,
            total=page.total,
            has_more=page.has_next,
            documents=[
                ListedDocumentOut(
                    document_id=document.pk,
                    document_title=document.title,
                    document_kind=document.kind,
                    trust_tier=document.trust_tier,
                    space_id=document.space_id,
                    source_name=document.source_name,
                    tags=tags.get(document.pk, []),
                    version_id=document.head.pk,
                    version_number=document.head.number,
                    version_created_at=document.head.created_at,
                    excerpt=document.excerpt,
                    url=document_url(kind=document.kind, document_id=document.pk),
                )
                for document in page.documents
            ],
        ),
        hits=[],
    )


# --- verified evidence opening ------------------------------------------------------------

evidence_router = Router(tags=["evidence"])


class EvidencePassageOut(Schema):
    id: int
    text: str
    offset_unit: str = "unicode_code_point"
    start: int
    end: int
    start_line: int
    end_line: int
    text_sha256: str


class EvidenceOut(Schema):
    """The outcome of opening an evidence link. `status`: verified_current |
    verified_superseded | source_changed | unavailable. Everything but `status` and `message`
    is null when unavailable (someone else's document looks exactly like a missing one)."""

    status: str
    message: str
    document: int | None = None
    document_title: str | None = None
    version: int | None = None
    version_number: int | None = None
    version_created_at: datetime | None = None
    passage: EvidencePassageOut | None = None
    version_sha256: str | None = None
    head_version_id: int | None = None
    head_version_number: int | None = None
    current_url: str | None = None
    text_in_current: bool | None = None  # superseded only: passage text still in the head
    source_detail: str | None = None  # source_changed only: what happened to the file


def evidence_out(outcome: EvidenceOutcome) -> EvidenceOut:
    if outcome.passage is None:
        return EvidenceOut(status=outcome.status.value, message=outcome.message)
    p, v = outcome.passage, outcome.version
    return EvidenceOut(
        status=outcome.status.value,
        message=outcome.message,
        document=outcome.document.pk,
        document_title=outcome.document.title,
        version=v.pk,
        version_number=v.number,
        version_created_at=v.created_at,
        passage=EvidencePassageOut(
            id=p.pk,
            text=p.text,
            start=p.start,
            end=p.end,
            start_line=p.start_line,
            end_line=p.end_line,
            text_sha256=p.text_sha256,
        ),
        version_sha256=v.sha256,
        head_version_id=outcome.head.pk,
        head_version_number=outcome.head.number,
        current_url=outcome.current_url,
        text_in_current=outcome.text_in_current,
        source_detail=outcome.source_detail or None,
    )


class EvidenceUrlNotFoundOut(Schema):
    """A 404 before any check ran: the URL matches no evidence link (an id outside
    1..2**63-1, say)."""

    detail: str


@evidence_router.get(
    "/{id:document_id}/{id:version_id}/{id:passage_id}/{sha256}",
    response={200: EvidenceOut, 404: EvidenceOut | EvidenceUrlNotFoundOut},
)
def evidence_endpoint(
    request: HttpRequest, document_id: DbId, version_id: DbId, passage_id: DbId, sha256: str
):
    """Open an evidence link: re-check that the passage belongs to the version, the version
    to the document, the content hash matches and the caller may see it; re-read the source
    file if the version came from one. 404 with `status: unavailable` otherwise."""
    outcome = open_evidence(request.auth, document_id, version_id, passage_id, sha256)
    return Status(outcome.http_status, evidence_out(outcome))
