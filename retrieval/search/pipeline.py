"""The search service: the one function the page, the API and the evaluation harness call.

    parse → eligibility (owner, live, head, query filters) inside each leg, before its limit
          → lexical leg (≤256) ‖ dense leg (≤256)
          → RRF k=60 + exact phrase/identifier boosts + deterministic ties (fusion.py)
          → short hybrid queries: word-coverage tiers (fusion.py `word_tiers`)
          → meaning-only hits below MEANING_ONLY_FLOOR hidden unless asked for (`show_weaker`)
          → rerank of the fused top N (rerank.py; learned by default, toggle per request)
          → trust rank (trust.py) within each tier → orphaned annotations after live hits
          → hits with their parent block (small-to-big)
          → highlight segments and evidence anchor for the returned hits (highlight.py)
          → bounded: a context window around each passage, a response size cap (`bound_hits`)

If the dense leg cannot run (model missing or corrupt, Chroma down) search answers from
the lexical leg and says so in `degraded`; passages not yet embedded are counted there too.
Never raises for bad input: `error` carries the message. Runs under the request's time
budget when there is one (`lode_site.budget`): the loops over candidates check it.
"""

from __future__ import annotations

import itertools
import logging
import time
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, NamedTuple

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import F, QuerySet
from django.db.models.functions import Greatest, Least, Substr

from externals.models import Annotation
from lode_site import budget
from notes.models import Document, TrustTier
from retrieval import links
from retrieval.eligibility import (
    Audience,
    apply_filters,
    audience_for,
    document_filters,
    eligible_documents,
    eligible_ids,
    narrow_audience,
)
from retrieval.highlight import (
    Anchor,
    Highlight,
    Segment,
    cap_marks,
    contains_group,
    evidence_anchor,
    highlight_terms,
    highlights,
)
from retrieval.index import lexical
from retrieval.meta.aliases import alias_expansions
from retrieval.models import Passage
from retrieval.query import SHORT_QUERY_TERMS, ParsedQuery, QueryError, parse
from retrieval.search.fusion import FusedHit, LegHit, exact_matches, fuse, word_tier, word_tiers
from retrieval.search.graph_expand import Added, Expansion, Via, expand, merge
from retrieval.search.rerank import (
    RERANK_CHOICES,
    RERANK_TOP_N,
    Candidate,
    RerankUnavailable,
    get_reranker,
)
from retrieval.text.stemming import fold
from retrieval.text.tokens import token_strings
from retrieval.trust import trust_rank

if TYPE_CHECKING:
    import numpy as np

    from retrieval.index.vectors import VectorHit, VectorStore

logger = logging.getLogger("lode.search")

MODES = ("hybrid", "lexical", "semantic")
DEFAULT_MODE = "hybrid"
# Modes the evaluation harness measures: (search mode, reranker; None = the configured default).
EVAL_MODES: dict[str, tuple[str, str | None]] = {
    "lexical": ("lexical", "off"),
    "semantic": ("semantic", "off"),
    "hybrid": ("hybrid", "off"),
    "hybrid+rerank": ("hybrid", None),
}
DENSE_LIMIT = 256
# Filtered dense search (see `_dense_leg`): eligible document ids per Chroma `$in` filter,
# and the eligible share of the owner's documents from which post-filtering is used instead.
DENSE_IN_CHUNK = 5000
DENSE_POST_FILTER_SHARE = 0.5
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
# Internal callers (evaluation, answers) may take the whole fused list.
MAX_LIMIT = lexical.LEXICAL_LIMIT + DENSE_LIMIT

# The similarity floor for meaning-only hits: a passage holding none of
# the query's words, found by the dense leg alone, is shown only when its cosine with the
# query reaches this — or when the user asks for weaker matches (`show_weaker`). The dense
# leg always returns its 256 nearest passages, however unrelated ("kubernetes helm chart"
# over notes that never mention it returned all of them). Chosen by bench/similarity_floor.py
# over the notes corpus (all-MiniLM-L6-v2), on tune rows only: the cosine best separating the
# passage that answers a `notes_answerable` question (79 of 87 reach 0.29; median 0.485) from
# the best meaning-only passage of an off-topic question (5 of 50 reach it; median 0.217),
# max Youden's J 0.81 (flat from 0.29 to 0.31). Held out: 80 of 87 answering passages and 10
# of 50 off-topic questions reach it. No answering passage in either half holds none of its
# question's words, so none is actually hidden; meaning-only hits per answerable question
# fall from 165 to 3.3. A new embedding model needs the script run again.
MEANING_ONLY_FLOOR = 0.29


@dataclass
class Hit:
    rank: int  # 1-based position in the final ranking
    passage: Passage
    fused: FusedHit
    rerank_score: float | None = None
    rerank_score_name: str = ""
    reasons: list[str] = field(default_factory=list)
    # Highlight segments of the passage text (invariant 2) and the first-to-last highlight
    # range; set by `highlight_hits`. `highlighted_by`: "index" (FTS5 highlight() or
    # ts_headline), "query terms" (computed in Python for hits the index did not match),
    # or "" (not highlighted).
    segments: list[Segment] = field(default_factory=list)
    anchor: Anchor | None = None
    highlighted_by: str = ""
    # Some matches are not marked: past the per-passage cap on marks, or beyond the window
    # a too-long passage is highlighted in (retrieval/highlight.py, "Bounded cost").
    highlights_truncated: bool = False
    # Bounded responses (`bound_hits`): the parent context actually returned — a window of
    # the parent section around the passage, [context_start, context_end) in the version
    # body — and whether the response size cap left out the context or the passage text.
    context_text: str = ""
    context_start: int = 0
    context_end: int = 0
    context_trimmed: bool = False
    text_trimmed: bool = False
    # A meaning-only hit below MEANING_ONLY_FLOOR: shown only because weaker matches were
    # asked for (`search(show_weaker=True)`).
    weak: bool = False
    # An annotation whose quote is no longer in the current snapshot of its external: kept
    # in results (never dropped) but labelled and ranked after every live hit.
    orphaned: bool = False
    # Graph expansion (graph_expand.py): this passage was not found by the query
    # but reached by a link from (or to) the document of a top hit; `via` names the edge.
    via: Via | None = None

    @property
    def context_truncated(self) -> bool:
        """The context returned is less than the whole parent section."""
        p = self.passage
        return self.context_trimmed or (self.context_start, self.context_end) != (
            p.parent_start,
            p.parent_end,
        )

    @property
    def display_segments(self) -> list[Segment]:
        """The segments to render: the highlight segments, or the passage as one plain one
        (none when the response size cap left the text out)."""
        if self.text_trimmed:
            return []
        if self.segments:
            return self.segments
        return [Segment(self.passage.text, False)] if self.passage.text else []

    @property
    def highlights(self) -> list[Highlight]:
        """Each highlighted span, in code points and UTF-16 code units of the passage text."""
        return highlights(self.passage.text, self.segments)

    # Cached: a page asks each hit for its links more than once, and each is a `reverse()`;
    # both read only the passage, which a hit never changes.
    @cached_property
    def evidence_url(self) -> str:
        """The verified-opening URL pinned to (document, version, passage, content hash)."""
        return links.evidence_url(self.passage)

    @cached_property
    def version_url(self) -> str:
        """The page of the hit's version (a note version or an external's snapshot): what
        the hit's title links to. Reads `passage.document.kind`."""
        p = self.passage
        return links.version_url(
            kind=p.document.kind, document_id=p.document_id, version_id=p.version_id
        )

    @property
    def parent_text(self) -> str:
        """Small-to-big: the passage's whole heading section. Reads the version body (deferred
        when `search()` loaded the hit); responses use the bounded `context_text` instead.
        The citation stays the passage's own range."""
        p = self.passage
        return p.version.body[p.parent_start : p.parent_end]

    @property
    def score(self) -> float:
        """The score that decided the rank (see `score_name`)."""
        if self.rerank_score is not None:
            return self.rerank_score
        if self.fused.lexical and not self.fused.dense:
            return self.fused.lexical.score
        if self.fused.dense and not self.fused.lexical:
            return self.fused.dense.score
        return self.fused.fused_score

    @property
    def score_name(self) -> str:
        if self.rerank_score is not None:
            return self.rerank_score_name
        if self.fused.lexical and not self.fused.dense:
            return self.fused.lexical.score_name
        if self.fused.dense and not self.fused.lexical:
            return self.fused.dense.score_name
        return "reciprocal rank fusion"


@dataclass
class SearchResult:
    query: str
    mode: str
    rerank: str = "off"
    parsed: ParsedQuery | None = None
    hits: list[Hit] = field(default_factory=list)
    error: str = ""
    notes: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    lexical_candidates: int = 0
    dense_candidates: int = 0
    elapsed_ms: float = 0.0
    # Hits whose context or text the response size cap left out (`bound_hits`).
    trimmed_hits: int = 0
    # Whether meaning-only hits below MEANING_ONLY_FLOOR were included (`show_weaker`), and
    # how many candidates were left out because they were not (before the page-size cut).
    show_weaker: bool = True
    weaker_hidden: int = 0
    # Set by the legs: the lexical leg ran and returned fewer than its limit, so it found
    # every eligible passage holding a query word (a candidate it did not return holds none).
    lexical_complete: bool = field(default=False, repr=False)
    # Graph expansion: whether links were followed, the rule that decided, and
    # what was added (the added hits are also in `hits`, with `via` set). None: not reached.
    expansion: Expansion | None = None
    # Alias phrases from the reader's notes also searched for (`with_aliases`).
    alias_terms: list[str] = field(default_factory=list)

    @property
    def is_empty_query(self) -> bool:
        return not self.error and (self.parsed is None or self.parsed.is_empty)


def _dense_leg(
    parsed: ParsedQuery,
    audience: Audience,
    documents: QuerySet[Document] | None = None,
    query_vector: Future[np.ndarray] | None = None,
) -> list[LegHit]:
    """Dense candidates, eligibility-filtered before the top-k cut. Raises the Unavailable
    errors of the embedding and vector modules.

    Without filters Chroma's `where` holds the audience's spaces (`VectorStore.query`). With
    filters (`documents`, the eligible-document queryset) there are two exact ways, chosen
    by how much of the audience's library is eligible:

    * a small share: the `where` also requires the vector's `document` to be one of the
      eligible ids, so the nearest-neighbour cut only sees eligible vectors. Chroma binds each
      id as an SQL variable (embedded Chroma 1.5.9 fails above ~16k ids), so the ids go
      `DENSE_IN_CHUNK` at a time and the per-chunk top lists are merged;
    * at least `DENSE_POST_FILTER_SHARE`: the spaces-only query, its hits kept when their
      document is eligible, searching deeper until `DENSE_LIMIT` are kept or the index is
      exhausted. A filtered HNSW walk over most of the index costs ~3x an unfiltered one,
      and here few hits are dropped (SciFact, all 5,183 documents eligible, hybrid p50:
      109 ms with `$in`, 43 ms post-filtered, 34 ms with no filter; 4% eligible: 45 ms
      with `$in`).

    Either way no ineligible vector takes one of the `DENSE_LIMIT` places. Document ids are
    used because they never change for a vector, unlike its kind/trust metadata, which could
    lag the canonical row.

    `query_vector`: the query's embedding already under way (`embed_query_soon`), waited
    for only where the model is needed; without it the query is embedded here.
    """
    from retrieval.index.embeddings import get_embedder
    from retrieval.index.vectors import chunked, get_vector_store

    eligible: list[int] = []
    if not audience.space_ids:
        return []  # no space to search: no need for the model or Chroma
    if documents is not None:
        eligible = eligible_ids(documents)
        if not eligible:
            return []  # nothing eligible: no need for the model or Chroma
    vector = (
        query_vector.result()
        if query_vector is not None
        else get_embedder().embed_query(parsed.text)
    )
    store = get_vector_store()
    if documents is None:
        hits = store.query(vector, space_ids=audience.space_ids, limit=DENSE_LIMIT)
    else:
        library = Document.objects.filter(
            space_id__in=audience.sorted_space_ids, deleted_at__isnull=True
        ).count()
        share = len(eligible) / max(library, 1)
        if share >= DENSE_POST_FILTER_SHARE:
            hits = _dense_post_filtered(store, vector, audience, set(eligible), share)
        else:
            hits = [
                hit
                for part in chunked(eligible, DENSE_IN_CHUNK)
                for hit in store.query(
                    vector,
                    space_ids=audience.space_ids,
                    limit=DENSE_LIMIT,
                    where={"document": {"$in": list(part)}},
                )
            ]
            hits.sort(key=lambda hit: (-hit.cosine, hit.passage_id))
            hits = hits[:DENSE_LIMIT]
    return [
        LegHit(passage_id=h.passage_id, rank=i, score=h.cosine, score_name="cosine")
        for i, h in enumerate(hits, start=1)
    ]


def _dense_post_filtered(
    store: VectorStore, vector: np.ndarray, audience: Audience, eligible: set[int], share: float
) -> list[VectorHit]:
    """The `DENSE_LIMIT` nearest vectors whose document is in `eligible`, from spaces-only
    queries that go deeper until enough are kept or nothing is left (see `_dense_leg`)."""
    wanted = int(DENSE_LIMIT / max(share, 0.01)) + 32
    while True:
        found = store.query(vector, space_ids=audience.space_ids, limit=wanted)
        document_of = dict(
            Passage.objects.filter(pk__in=[hit.passage_id for hit in found]).values_list(
                "pk", "document_id"
            )
        )
        kept = [hit for hit in found if document_of.get(hit.passage_id) in eligible]
        if len(kept) >= DENSE_LIMIT or len(found) < wanted:
            return kept[:DENSE_LIMIT]
        wanted *= 4


def _dense_unavailable_errors() -> tuple[type[Exception], ...]:
    from retrieval.index.embeddings import EmbeddingUnavailable
    from retrieval.index.vectors import VectorStoreUnavailable

    return (EmbeddingUnavailable, VectorStoreUnavailable)


# The notice that meaning search is behind counts at most this many pending passages and says
# "more than" beyond it: the count runs on every hybrid and semantic search, so its cost must
# not grow with a backlog (`vectors.pending_note_count`, which reads the pending table, not
# the corpus).
PENDING_NOTE_MAX = 1000


def pending_notice(audience: Audience, mode: str = "hybrid") -> str | None:
    """Plain words for "passages of these spaces are not embedded yet", or None when none
    are: counted over the audience's spaces only (never another user's backlog), from the
    pending table (`pending_note_count`: one query when nothing is pending). Search results
    and a note's page show it."""
    from retrieval.index.vectors import pending_note_count

    pending = pending_note_count(audience.space_ids, at_most=PENDING_NOTE_MAX)
    if not pending:
        return None
    if pending > PENDING_NOTE_MAX:
        waiting = f"more than {PENDING_NOTE_MAX:,} passages waiting"
    else:
        waiting = f"{pending:,} passage{'s' if pending != 1 else ''} waiting"
    notice = f"New and changed notes are still being indexed for meaning search ({waiting})"
    if mode == "semantic":
        return f"{notice}: this search by meaning misses them until then."
    return f"{notice}; keyword search already finds them."


def _lexical_leg(
    parsed: ParsedQuery, audience: Audience, documents: QuerySet[Document] | None = None
) -> list[LegHit]:
    found = lexical.backend().search(parsed, audience=audience, documents=documents)
    return [
        LegHit(passage_id=h.passage_id, rank=i, score=h.score, score_name=h.score_name)
        for i, h in enumerate(found, start=1)
    ]


class CandidateRow(NamedTuple):
    """The few columns ranking needs, loaded for every candidate; full rows (with the version
    body for small-to-big) are loaded only for the hits actually returned. A named tuple:
    hundreds are built per search, and a frozen dataclass costs ~5x more to build."""

    passage_id: int
    document_id: int
    title_text: str
    text: str
    position: int
    trust_tier: str
    external_key: str


def _candidate_sql(count: int) -> str:
    """The statement `_canonical_rows` runs for `count` passage ids: the candidate columns
    plus what eligibility is checked on (head, space, live). Plain SQL both databases read
    alike, from the models' own table and column names: built through the ORM it cost more
    than running it (compiling a join with hundreds of parameters, converting every value)."""
    passage, document = Passage._meta, Document._meta
    p = {name: passage.get_field(name).column for name in ("document", "version", "is_head")}
    d = {name: document.get_field(name).column for name in ("space", "deleted_at")}
    return (
        f'SELECT p."{passage.pk.column}", p."{p["document"]}", p."title_text", p."text", '
        f'p."position", d."trust_tier", d."external_key", p."{p["is_head"]}", '
        f'd."{d["space"]}", d."{d["deleted_at"]}" IS NULL '
        f'FROM "{passage.db_table}" p JOIN "{document.db_table}" d '
        f'ON d."{document.pk.column}" = p."{p["document"]}" '
        f'WHERE p."{passage.pk.column}" IN ({", ".join(["%s"] * count)}) '
        # The model's own order (`Passage.Meta.ordering`), as the ORM read gave it.
        f'ORDER BY p."{p["version"]}", p."position"'
    )


def fused_candidates(
    parsed: ParsedQuery,
    *,
    audience: Audience,
    mode: str,
    result: SearchResult,
    restrict: QuerySet[Document] | None = None,
) -> tuple[list[FusedHit], dict[int, CandidateRow]]:
    """Both legs, canonical eligibility, exact matches and fusion: everything before rerank.

    Records candidate counts and any degradation on `result`. Also used by the reranker's
    fitting script, so the model is trained on exactly what search feeds it.

    The audience (the user's spaces, narrowed by any `space:` filter) and the query's other
    filters become one space set and one eligible-document queryset
    (`retrieval.eligibility`), applied inside each leg before its limit and again to every
    candidate here.

    `restrict` (graph expansion: the linked documents) narrows the eligible documents
    further; eligibility still comes from the audience and the filters.
    """
    audience, notes = narrow_audience(parsed, audience)
    result.notes.extend(notes)
    documents = eligible_documents(parsed, audience)
    if restrict is not None:
        documents = restrict if documents is None else documents.filter(pk__in=restrict)
    # Graph expansion's scoring (`restrict`) discards `result`: no pending note to count there.
    lexical_hits, dense_hits = _run_legs(
        parsed, audience, mode, documents, result, pending_note=restrict is None
    )
    result.lexical_candidates, result.dense_candidates = len(lexical_hits), len(dense_hits)

    ids = {h.passage_id for h in lexical_hits} | {h.passage_id for h in dense_hits}
    rows = _canonical_rows(ids, audience)
    if restrict is not None and rows:
        allowed = set(restrict.values_list("pk", flat=True))
        rows = {pid: row for pid, row in rows.items() if row.document_id in allowed}
    if document_filters(parsed) and rows:
        rows = _rows_passing_filters(rows, parsed)
    if parsed.phrases or parsed.excluded:
        rows = _rows_honouring_phrases(rows, parsed, {h.passage_id for h in lexical_hits})
    lexical_hits = [h for h in lexical_hits if h.passage_id in rows]
    dense_hits = [h for h in dense_hits if h.passage_id in rows]
    budget.check()
    exact = _exact_matches_by_passage(rows, parsed) if parsed.needles else {}
    return fuse(lexical_hits, dense_hits, exact=exact), rows


def _run_legs(
    parsed: ParsedQuery,
    audience: Audience,
    mode: str,
    documents: QuerySet[Document] | None,
    result: SearchResult,
    *,
    pending_note: bool = True,
) -> tuple[list[LegHit], list[LegHit]]:
    """The lexical and dense legs `mode` asks for (lexical first). When the dense leg is
    unavailable `result.degraded` says so, and semantic mode falls back to keywords; with
    `pending_note` it also says how many passages are not yet embedded."""
    lexical_hits: list[LegHit] = []
    # Hybrid: the query is embedded on a background thread while the lexical leg runs here.
    query_vector = None
    if mode == "hybrid" and audience.space_ids:
        from retrieval.index.embeddings import embed_query_soon

        query_vector = embed_query_soon(parsed.text)
    if mode in ("hybrid", "lexical"):
        lexical_hits = _lexical_leg(parsed, audience, documents)
        result.lexical_complete = len(lexical_hits) < lexical.LEXICAL_LIMIT
    dense_hits: list[LegHit] = []
    if mode in ("hybrid", "semantic"):
        try:
            dense_hits = _dense_leg(parsed, audience, documents, query_vector)
            note = pending_notice(audience, mode) if pending_note else None
            if note:
                result.degraded.append(note)
        except _dense_unavailable_errors() as exc:
            logger.warning("dense leg unavailable: %s", exc)
            result.degraded.append(f"Semantic search unavailable: {exc}. Showing keyword matches.")
            if mode == "semantic":
                lexical_hits = _lexical_leg(parsed, audience, documents)
                result.lexical_complete = len(lexical_hits) < lexical.LEXICAL_LIMIT
    return lexical_hits, dense_hits


def _canonical_rows(ids: set[int], audience: Audience) -> dict[int, CandidateRow]:
    """The candidates that are head passages of live documents in the audience's spaces,
    by passage id.

    Canonical eligibility for every candidate (a vector may outlive its head passage for a
    moment, until the worker deletes it, and a moved document's vectors name its old space
    until the sync re-stamps them). Fetched by primary key and checked here: letting SQL
    filter on the spaces too makes SQLite walk every document they hold."""
    rows: dict[int, CandidateRow] = {}
    if not ids:
        return rows
    spaces = audience.space_ids
    with connection.cursor() as cursor:
        cursor.execute(_candidate_sql(len(ids)), list(ids))
        found = cursor.fetchall()
    for pid, doc_id, title, text, position, tier, key, is_head, space, live in found:
        if is_head and live and space in spaces:
            rows[pid] = CandidateRow(pid, doc_id, title, text, position, tier, key)
    return rows


def _rows_passing_filters(
    rows: dict[int, CandidateRow], parsed: ParsedQuery
) -> dict[int, CandidateRow]:
    """The query's document filters again, on canonical rows, by document primary key
    (spaces and liveness were checked in `_canonical_rows`)."""
    kept = set(
        apply_filters(
            Document.objects.filter(pk__in={row.document_id for row in rows.values()}),
            document_filters(parsed),
        ).values_list("pk", flat=True)
    )
    return {pid: row for pid, row in rows.items() if row.document_id in kept}


def _rows_honouring_phrases(
    rows: dict[int, CandidateRow], parsed: ParsedQuery, lexical_ids: set[int]
) -> dict[int, CandidateRow]:
    """The rows found by the lexical leg, plus those found only by meaning that honour the
    query's phrases and exclusions.

    The lexical leg's MATCH already requires every phrase and rules out exclusions; hold
    candidates found only by meaning to the same words, so `"…"` and `-word` mean the same
    in every mode."""
    kept_rows: dict[int, CandidateRow] = {}
    for pid, row in rows.items():
        budget.check()
        if pid in lexical_ids or honours_phrases_and_exclusions(parsed, row):
            kept_rows[pid] = row
    return kept_rows


def _exact_matches_by_passage(
    rows: dict[int, CandidateRow], parsed: ParsedQuery
) -> dict[int, tuple[str, ...]]:
    """The query's exact needles found in each candidate's text (passages with none left out)."""
    exact: dict[int, tuple[str, ...]] = {}
    for pid, row in rows.items():
        budget.check()
        found = exact_matches(parsed.needles, row.text)
        if found:
            exact[pid] = found
    return exact


def honours_phrases_and_exclusions(parsed: ParsedQuery, row: CandidateRow) -> bool:
    """Every quoted phrase occurs in the passage (title or text) and no excluded word or
    phrase does: the lexical MATCH's rules, checked in Python with the index's folding."""
    fields = (row.title_text, row.text)
    if any(not any(contains_group(f, group) for f in fields) for group in parsed.phrases):
        return False
    return not any(contains_group(f, group) for group in parsed.excluded for f in fields)


@dataclass
class _Ranked:
    fused: FusedHit
    row: CandidateRow
    rerank_score: float | None = None
    reasons: list[str] = field(default_factory=list)
    tier: int = 0  # word-coverage tier (`fusion.word_tier`); 0 when tiers do not apply
    weak: bool = False
    orphaned: bool = False


# Candidates' stems, per process: short hybrid queries count the words of every candidate
# (word-coverage tiers), and the same passages come back search after search; folding each
# one's title and text was most of such a search's time (bench/README.md). Keyed
# by the strings themselves, so an edited passage is a new entry (as the reranker's
# `rerank.passage_terms`); the bound keeps memory to a few tens of MB per process.
PASSAGE_STEMS_CACHE_SIZE = 4096


@lru_cache(maxsize=PASSAGE_STEMS_CACHE_SIZE)
def passage_stems(title_text: str, text: str) -> frozenset[str]:
    """The index form (`retrieval.text.fold`) of every token of a passage's title text and
    text: `set(folded_tokens(title_text + "\n" + text))`, folding each distinct token once."""
    return frozenset(map(fold, set(token_strings(title_text + "\n" + text))))


def words_matched(parsed: ParsedQuery, row: CandidateRow) -> int:
    """How many of the query's optional terms the passage holds, in its title text or its
    text, under the index's folding (`retrieval.text.fold`, as Python highlighting matches)."""
    stems = passage_stems(row.title_text, row.text)
    count = 0
    for group in parsed.terms:
        if len(group) == 1:
            count += fold(group[0]) in stems
        else:
            count += contains_group(row.title_text, group) or contains_group(row.text, group)
    return count


def _count_words(
    parsed: ParsedQuery, fused: list[FusedHit], rows: dict[int, CandidateRow], *, complete: bool
) -> None:
    """Set `words_matched` on each of `fused`. A hit the lexical leg did not return holds no
    query word when that leg was complete (`SearchResult.lexical_complete`): the engine is
    the authority and Python need not look. A hit it did return holds at least one, even if
    Python's stemmer reads a word differently from the engine's."""
    for hit in fused:
        budget.check()
        if hit.lexical is None and complete:
            hit.words_matched = 0
            continue
        count = words_matched(parsed, rows[hit.passage_id])
        hit.words_matched = max(count, 1) if hit.lexical is not None else count


def _is_weak(hit: FusedHit) -> bool:
    """A meaning-only hit (holds no query word) whose cosine is below the floor."""
    return (
        hit.lexical is None
        and hit.dense is not None
        and hit.dense.score < MEANING_ONLY_FLOOR
        and not hit.exact_matches
        and hit.words_matched == 0
    )


def _weak_candidates(
    parsed: ParsedQuery,
    fused: list[FusedHit],
    rows: dict[int, CandidateRow],
    *,
    complete: bool,
) -> set[int]:
    """Passage ids of the weak hits among `fused`; counts words only where it matters (a
    dense-only hit below the floor)."""
    below = [
        h for h in fused if h.lexical is None and h.dense and h.dense.score < MEANING_ONLY_FLOOR
    ]
    _count_words(parsed, [h for h in below if h.words_matched is None], rows, complete=complete)
    return {h.passage_id for h in below if _is_weak(h)}


def uses_word_tiers(parsed: ParsedQuery, mode: str) -> bool:
    """Word-coverage tiers apply to short queries in hybrid mode (`fusion.word_tiers`)."""
    return mode == "hybrid" and 0 < len(parsed.terms) <= SHORT_QUERY_TERMS


def _orphaned_annotation_documents(rows: dict[int, CandidateRow]) -> set[int]:
    """The annotation documents among the candidates whose annotation is orphaned (its quote
    is not in the external's current snapshot)."""
    annotations = {r.document_id for r in rows.values() if r.trust_tier == TrustTier.ANNOTATION}
    if not annotations:
        return set()
    return set(
        Annotation.objects.filter(
            note_document_id__in=annotations, status=Annotation.Status.ORPHANED
        ).values_list("note_document_id", flat=True)
    )


def _trust_rank_within_tiers(ranked: list[_Ranked]) -> list[_Ranked]:
    """Trust rank (trust.py) applied to each run of hits of one word-coverage tier: trust
    reorders near-ties in relevance, never a passage holding none of a short query's words
    above one holding them all."""
    out: list[_Ranked] = []
    for _, group in itertools.groupby(ranked, key=lambda r: r.tier):
        out.extend(
            trust_rank(
                list(group),
                tier_of=lambda r: r.row.trust_tier,
                passage_id_of=lambda r: r.row.passage_id,
            )
        )
    return out


def _rerank(
    ranked: list[_Ranked], parsed: ParsedQuery, name: str, result: SearchResult
) -> tuple[list[_Ranked], str]:
    """Re-score the top N with reranker `name`; returns the new order and the score's name.
    On failure the fused order stands and `result.degraded` says why."""
    try:
        reranker = get_reranker(name)
    except RerankUnavailable as exc:
        result.degraded.append(f"Reranking unavailable: {exc}. Showing fused order.")
        return ranked, ""
    if reranker is None:
        return ranked, ""
    head, tail = ranked[:RERANK_TOP_N], ranked[RERANK_TOP_N:]
    candidates = [
        Candidate(
            passage_id=r.row.passage_id,
            document_id=r.row.document_id,
            title_text=r.row.title_text,
            text=r.row.text,
            position=r.row.position,
            fused=r.fused,
        )
        for r in head
    ]
    try:
        scores = reranker.scores(parsed, candidates)
    except RerankUnavailable as exc:
        result.degraded.append(f"Reranking unavailable: {exc}. Showing fused order.")
        return ranked, ""
    for r, score in zip(head, scores, strict=True):
        r.rerank_score = score
        r.reasons.append(f"{reranker.score_name} {score:.4g}")
    # Exact matches stay first, then word-coverage tiers (short hybrid queries; all 0
    # otherwise); equal scores keep the fused order (the sort is stable).
    head.sort(key=lambda r: (not r.fused.exact_matches, r.tier, -(r.rerank_score or 0.0)))
    result.rerank = reranker.name
    return head + tail, reranker.score_name


def highlight_hits(parsed: ParsedQuery, hits: list[Hit]) -> None:
    """Set each hit's highlight segments and evidence anchor.

    Hits the lexical leg returned are highlighted by the lexical engine itself (one statement
    for all of them, with the query `search()` ran; on SQLite over a scratch copy of their
    index rows); the others (semantic-only hits, or the lexical
    leg did not run) get the query's terms and phrases found in Python with the index's
    tokenizer rules (`highlight_terms`), as do passages too long for the engine. Marks are
    capped per passage (`highlights_truncated` says when). Only the returned hits, never
    every candidate.
    """
    lexical_hits = [(h.passage.pk, h.passage.text) for h in hits if h.fused.lexical]
    by_index = lexical.backend().highlight(parsed, lexical_hits) if lexical_hits else {}
    groups = [*parsed.terms, *parsed.phrases]
    for hit in hits:
        budget.check()
        p = hit.passage
        segments = by_index.get(p.pk)
        if segments is not None:
            segments, hit.highlights_truncated = cap_marks(segments)
            hit.highlighted_by = "index"
        else:
            segments, hit.highlights_truncated = highlight_terms(p.text, groups)
            hit.highlighted_by = "query terms"
        hit.segments = segments
        hit.anchor = evidence_anchor(
            segments, text=p.text, passage_start=p.start, passage_start_line=p.start_line
        )


def with_aliases(parsed: ParsedQuery, audience: Audience, result: SearchResult) -> ParsedQuery:
    """`parsed` with one more optional term per alias phrase the audience's notes state for
    its words (`retrieval.meta.aliases`, bounded there); each is named in the result's
    notes and `alias_terms`."""
    words = [token for term in (*parsed.terms, *parsed.phrases) for token in term]
    expansions = alias_expansions(audience, words)
    if not expansions:
        return parsed
    result.alias_terms = [item.phrase for item in expansions]
    result.notes.append("Aliases from your notes: " + "; ".join(i.note for i in expansions) + ".")
    added = tuple(item.words for item in expansions if item.words not in parsed.terms)
    return replace(parsed, terms=(*parsed.terms, *added))


def search(
    *,
    user: AbstractBaseUser,
    query: str,
    mode: str = DEFAULT_MODE,
    rerank: str | None = None,
    limit: int = DEFAULT_PAGE_SIZE,
    highlight: bool = True,
    show_weaker: bool = True,
    space_id: int | None = None,
    audience: Audience | None = None,
    follow_links: bool | None = None,
    follow_inferred: bool = False,
) -> SearchResult:
    """Search the passages `user` may see: those of every space they are a member of, or
    of `space_id` only (raises `eligibility.NoAccess` when they are not a member of it).
    `audience`, when given, is used as is (the ask pipeline passes the one it checked).
    `highlight=False` skips highlight segments and anchors (the evaluation harness ranks
    hundreds of hits and shows none).

    `show_weaker=False` (what the page and the API do unless asked) leaves out meaning-only
    hits below MEANING_ONLY_FLOOR and counts them in `weaker_hidden`; with True (the default
    for internal callers: evaluation, ask) they stay, marked `weak`.

    Graph expansion (graph_expand.py): `follow_links` None lets the graph
    discipline rule decide (graph_discipline.py), True always follows links from the top
    hits' documents, False never does; `follow_inferred` also follows inferred edges
    (`mentions`, `related`). Added passages join `hits` with `via` set (after the page-size
    cut: at most `graph_expand.MAX_ADDED` more); `result.expansion` says what ran and why."""
    started = time.perf_counter()
    if audience is None:
        audience = audience_for(user.pk, space_id=space_id)
    rerank = rerank or settings.LODE_RERANK
    # `result.rerank` names the reranker that actually ran; it stays "off" if none could.
    result = SearchResult(query=query, mode=mode, rerank="off", show_weaker=show_weaker)
    if mode not in MODES:
        result.error = f"Unknown search mode {mode!r}; choose one of: {', '.join(MODES)}."
        return result
    if rerank not in RERANK_CHOICES:
        result.error = f"Unknown reranker {rerank!r}; choose one of: {', '.join(RERANK_CHOICES)}."
        return result
    try:
        parsed = parse(query)
    except QueryError as exc:
        result.error = str(exc)
        return result
    result.parsed = parsed
    result.notes.extend(parsed.notes)
    if parsed.is_empty:
        return result

    # Candidates also for the aliases the reader's notes state; coverage tiers, weak
    # matches and highlights keep to the words typed.
    searched = with_aliases(parsed, audience, result)
    fused, rows = fused_candidates(searched, audience=audience, mode=mode, result=result)
    tiers = uses_word_tiers(parsed, mode)
    if tiers:
        _count_words(parsed, fused, rows, complete=result.lexical_complete)
        fused = word_tiers(fused, len(parsed.terms))
    if not show_weaker:
        # Left out before rerank and the page-size cut, so they never take a place.
        weak = _weak_candidates(parsed, fused, rows, complete=result.lexical_complete)
        result.weaker_hidden = len(weak)
        fused = [f for f in fused if f.passage_id not in weak]
    orphaned = _orphaned_annotation_documents(rows)
    ranked = [
        _Ranked(
            fused=f,
            row=rows[f.passage_id],
            reasons=list(f.reasons),
            tier=word_tier(f.words_matched or 0, len(parsed.terms)) if tiers else 0,
            orphaned=rows[f.passage_id].document_id in orphaned,
        )
        for f in fused
    ]
    score_name = ""
    if rerank != "off" and ranked:
        budget.check()
        ranked, score_name = _rerank(ranked, parsed, rerank, result)
    ranked = _trust_rank_within_tiers(ranked)
    if orphaned:
        # Stable: live hits keep their order, orphaned annotations follow in theirs.
        ranked = [r for r in ranked if not r.orphaned] + [r for r in ranked if r.orphaned]
        for r in ranked:
            if r.orphaned:
                r.reasons.append(
                    "orphaned annotation: its quote is no longer in the current snapshot, "
                    "so it ranks after every live result"
                )
    ranked = ranked[: max(1, min(limit, MAX_LIMIT))]
    if show_weaker:
        # Shown, but marked: only the returned hits need their words counted.
        weak = _weak_candidates(
            parsed, [r.fused for r in ranked], rows, complete=result.lexical_complete
        )
        for r in ranked:
            if r.fused.passage_id in weak:
                r.weak = True
                r.reasons.append(
                    f"weaker match: holds no query word and its cosine "
                    f"{r.fused.dense.score:.4g} is below the floor {MEANING_ONLY_FLOOR:g}"
                )
    budget.check()

    context_chars = settings.LODE_SEARCH_CONTEXT_CHARS
    passages = with_context_window(
        Passage.objects.select_related("document", "version").defer("version__body"),
        context_chars,
    ).in_bulk([r.row.passage_id for r in ranked])
    result.hits = [
        Hit(
            rank=i,
            passage=passages[r.row.passage_id],
            fused=r.fused,
            rerank_score=r.rerank_score,
            rerank_score_name=score_name if r.rerank_score is not None else "",
            reasons=r.reasons,
            context_text=passages[r.row.passage_id].context_text,
            context_start=passages[r.row.passage_id].context_start,
            context_end=passages[r.row.passage_id].context_end,
            weak=r.weak,
            orphaned=r.orphaned,
        )
        for i, r in enumerate(ranked, start=1)
        if r.row.passage_id in passages  # deleted between the two reads: drop, never guess
    ]
    budget.check()
    result.expansion = expand(
        parsed,
        result.hits,
        audience,
        follow_links=follow_links,
        follow_inferred=follow_inferred,
        score=scored_in_documents,
        build=expansion_hits,
        mode=mode,
    )
    if result.expansion.added:
        result.hits = merge(result.hits, result.expansion.added)
    if highlight:
        highlight_hits(parsed, result.hits)
        result.trimmed_hits = bound_hits(
            result.hits, max_chars=settings.LODE_SEARCH_RESPONSE_MAX_CHARS
        )
    result.elapsed_ms = (time.perf_counter() - started) * 1000
    return result


def scored_in_documents(
    parsed: ParsedQuery, audience: Audience, *, mode: str, restrict: QuerySet[Document]
) -> list[tuple[FusedHit, int]]:
    """The head passages of `restrict` (graph expansion's linked documents) ranked by the
    same legs and fusion as search, with each one's document id: (fused hit, document id),
    best first. Degradation (no dense leg) only narrows what is scored."""
    scratch = SearchResult(query=parsed.raw, mode=mode)
    fused, rows = fused_candidates(
        parsed, audience=audience, mode=mode, result=scratch, restrict=restrict
    )
    return [(hit, rows[hit.passage_id].document_id) for hit in fused]


def expansion_hits(added: list[Added]) -> list[Hit]:
    """Hits for the passages graph expansion added (loaded like search's own; one that
    vanished between the two reads is dropped, never guessed)."""
    passages = load_passages([a.passage_id for a in added])
    hits = []
    for a in added:
        passage = passages.get(a.passage_id)
        if passage is None:
            continue
        hits.append(
            Hit(
                rank=0,
                passage=passage,
                fused=a.fused,
                reasons=list(a.reasons),
                context_text=passage.context_text,
                context_start=passage.context_start,
                context_end=passage.context_end,
                via=a.via,
            )
        )
    return hits


def load_passages(ids: list[int]) -> dict[int, Passage]:
    """Passages by id, loaded as `search()` loads its hits (document, version without the
    body, the bounded context window)."""
    if not ids:
        return {}
    return with_context_window(
        Passage.objects.select_related("document", "version").defer("version__body"),
        settings.LODE_SEARCH_CONTEXT_CHARS,
    ).in_bulk(ids)


def with_context_window(passages: QuerySet[Passage], context_chars: int) -> QuerySet[Passage]:
    """Annotate each passage with its bounded small-to-big context: the part of its parent
    section from `context_chars` code points before the passage to as many after it
    (`context_start`, `context_end`: offsets in the version body; `context_text`).

    Cut in SQL (SUBSTR counts characters on both databases, like Python's code points), so
    a hit in a 1 MB note loads a few kilobytes, not the version body once per hit.
    """
    context_start = Greatest(F("parent_start"), F("start") - context_chars)
    context_end = Least(F("parent_end"), F("end") + context_chars)
    return passages.annotate(
        context_start=context_start,
        context_end=context_end,
        context_text=Substr(
            "version__body", context_start + 1, Greatest(context_end - context_start, 0)
        ),
    )


# What each highlight piece adds to a response besides its text, roughly, as JSON: a segment
# ({"text": "", "highlighted": false}) and a highlight span (four offsets). A passage with a
# match every other word has hundreds of each, so they count against the size cap too.
SEGMENT_COST = 32
HIGHLIGHT_COST = 64


def hit_text_cost(hit: Hit) -> int:
    """What a hit's passage text costs a response: `text`, its highlight segments (the same
    text again plus each piece's markup) and its highlight spans."""
    highlighted = sum(1 for segment in hit.segments if segment.highlighted)
    return (
        2 * len(hit.passage.text) + SEGMENT_COST * len(hit.segments) + HIGHLIGHT_COST * highlighted
    )


def bound_hits(hits: list[Hit], *, max_chars: int) -> int:
    """Keep one response's passage text, highlights and context within `max_chars`
    characters (`hit_text_cost` + the context window per hit); returns how many hits were
    trimmed.

    Hits are charged in rank order. A hit that does not fit loses its context first
    (`context_trimmed`), then its text, segments and highlights (`text_trimmed`); its ids,
    offsets, anchor and evidence URL stay, so the client can fetch what was left out (the
    evidence endpoint gives the passage, the note version endpoint the whole body).
    """
    left = max_chars
    trimmed = 0
    for hit in hits:
        # The heading path always goes out (new passages cut each heading to 200 characters;
        # older ones may carry longer), so it is charged first and squeezes the rest.
        left -= sum(len(heading) for heading in hit.passage.heading_path)
        text_cost = hit_text_cost(hit)
        if text_cost + len(hit.context_text) <= left:
            left -= text_cost + len(hit.context_text)
            continue
        trimmed += 1
        hit.context_text, hit.context_trimmed = "", True
        if text_cost <= left:
            left -= text_cost
            continue
        hit.text_trimmed = True
        hit.segments = []  # the anchor (offsets only) stays
    return trimmed
