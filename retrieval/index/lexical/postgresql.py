"""PostgreSQL full-text lexical backend, ranked by Okapi BM25.

A stored generated `tsvector` column on `retrieval_passage` (title weighted A, body B, the
`lode_english` configuration: `english` stemming with accents folded, as close to SQLite's
`porter unicode61 remove_diacritics 2` as PostgreSQL's own packages allow) with a partial
GIN index over head passages. Being a generated column, it is written in the same statement
as the passage. Queries are composed from `plainto_tsquery`/`phraseto_tsquery` calls with
every user token passed as a bound parameter; the GIN index decides which passages match
(any term, every phrase, no exclusion, eligibility) and BM25 decides their order.

BM25 as SQLite FTS5's `bm25()` computes it, so both databases rank alike:

    score(D) = sum over query lexemes q of
               IDF(q) * tf(q, D) * (k1 + 1) / (tf(q, D) + k1 * (1 - b + b * |D| / avgdl))
    IDF(q)   = ln((N - df(q) + 0.5) / (df(q) + 0.5)), or 1e-6 when that is <= 0

with k1 = 1.2, b = 0.75 and FTS5's column weights (title ×3); N, df and avgdl are taken over
every head passage, as FTS5's statistics are table-wide. A quoted phrase scores as its
lexemes where FTS5 scores it as one unit, and token counts differ slightly (`bm25_sql` says
how). The statistics are kept by statement-level triggers in two tables of derived data,
written by the same statement as the passage, so a just-saved note ranks with its own words
counted; no counter row is shared between writers (see "BM25 statistics" below).

Candidates come from the GIN index (`lode_bm25_matches`, which also keeps the planner off a
sequential scan that would detoast every tsvector to test `@@`), so phrases, exclusions and
the eligibility clause keep their meaning, all before the LIMIT. Three shortcuts, all exact
(`bm25_sql`, `search`, `pruned_top`): a query of single words takes its matches from the
postings it reads anyway; without document filters the top list of every match is ranked
first and only its rows are looked up for eligibility (`base.top_first`, as on SQLite); and
that top list, for a query of single words, comes from MaxScore, which reads the rare
lexemes' postings whole and looks the common ones up for the surviving candidates only.

`index_health()` recomputes postings and lengths from the canonical text and compares;
`rebuild()` refills both tables (and recreates their triggers if they were dropped).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from typing import TYPE_CHECKING

from django.db import connection, transaction
from django.db.models import QuerySet

from notes.models import Document
from retrieval.eligibility import Audience, eligible_clause, space_clause
from retrieval.highlight import (
    HIGHLIGHT_MAX_CHARS,
    Segment,
    collision_free_markers,
    segments_or_plain,
)
from retrieval.index.lexical.base import (
    LEXICAL_LIMIT,
    TEXT_WEIGHT,
    TITLE_WEIGHT,
    LexicalHealth,
    LexicalHit,
    top_first,
    with_spaces,
)
from retrieval.query import ParsedQuery

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

    from lode_site.budget import Budget

# `english` stemming with accents folded first (like FTS5's remove_diacritics), so "cafe"
# finds "café". Creating the unaccent extension needs a role allowed to create extensions.
CONFIG = "lode_english"
INDEX_NAME = "retrieval_passage_search_gin"
# BM25 as FTS5's bm25() (its k1 and b are fixed at these values) with SQLite's column
# weights, so both databases rank alike.
BM25_K1 = 1.2
BM25_B = 0.75
# Clamp for a non-positive IDF (a lexeme in more than half the passages), as FTS5 does.
BM25_MIN_IDF = 1e-6
# Scores are summed in units of 1e-12 (see `bm25_sql`): far below any difference BM25 ranks
# by, far above float rounding, and a few hundred lexemes of parts below 1e3 stay in int8.
FIXED_POINT = "1e12::float8"

# The generated column's expression; the health check recomputes it from canonical text.
VECTOR_SQL = (
    f"setweight(to_tsvector('{CONFIG}'::regconfig, coalesce(title_text, '')), 'A') || "
    f"setweight(to_tsvector('{CONFIG}'::regconfig, coalesce(text, '')), 'B')"
)
INDEX_SQL = (
    f"CREATE INDEX {INDEX_NAME} ON retrieval_passage USING GIN (search_vector) WHERE is_head"
)

SCHEMA_SQL: list[str] = [
    "CREATE EXTENSION IF NOT EXISTS unaccent",
    f"CREATE TEXT SEARCH CONFIGURATION {CONFIG} (COPY = english)",
    f"ALTER TEXT SEARCH CONFIGURATION {CONFIG} "
    "ALTER MAPPING FOR hword, hword_part, word WITH unaccent, english_stem",
    "ALTER TABLE retrieval_passage ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ("
    f"{VECTOR_SQL}) STORED",
    INDEX_SQL,
]

DROP_SQL: list[str] = [
    f"DROP INDEX IF EXISTS {INDEX_NAME}",
    "ALTER TABLE retrieval_passage DROP COLUMN IF EXISTS search_vector",
    f"DROP TEXT SEARCH CONFIGURATION IF EXISTS {CONFIG}",
]

# --- BM25 statistics (migration 0006) ---------------------------------------------------
# The statistics are *derived data in tables written by the same statement as the passage*:
# statement-level triggers on `retrieval_passage` (transition tables, so a bulk insert costs
# one INSERT … SELECT; an UPDATE that changes neither `is_head` nor the tsvector costs a join
# and writes nothing) keep
#
# * `retrieval_bm25_posting` (lexeme, passage, title hits, body hits, passage length): one row
#   per lexeme of each head passage, read from the stored tsvector itself (`unnest`: positions
#   and weights), under a covering B-tree on (lexeme, passage) so scoring reads the index only;
# * `retrieval_bm25_length` (passage, tokens): one row per head passage, for N and avgdl.
#
# df, N and avgdl are then aggregates over those rows taken by the query itself, in its own
# snapshot, so they are right after every write, inside the writing transaction too (a
# just-saved note ranks with its own words counted). No counter row is shared between
# writers: a per-lexeme df table or a totals row would be updated by every passage write
# (common lexemes by nearly all), serialising concurrent writers until they commit and, with
# several rows locked in different orders by two transactions, deadlocking them. Postings
# of different passages never share a key, so concurrent writers never wait on each other
# here. The price is read time: df counts the postings of the query's lexemes (one
# index-only range per lexeme), and N/avgdl scan `retrieval_bm25_length` (narrow rows: about
# 1 ms for SciFact's 8k passages, ~20-40 ms at 200k). Scoring itself reads only what MaxScore
# needs (`pruned_top`); that counting pass stays linear in the query's postings, and
# `statement_timeout` (the request budget) bounds it.

POSTINGS = "retrieval_bm25_posting"
LENGTHS = "retrieval_bm25_length"
BM25_TRIGGERS = {  # trigger name -> its event and transition tables
    "retrieval_bm25_ai": "AFTER INSERT ON retrieval_passage REFERENCING NEW TABLE AS lode_new",
    "retrieval_bm25_au": (
        "AFTER UPDATE ON retrieval_passage REFERENCING OLD TABLE AS lode_old NEW TABLE AS lode_new"
    ),
    "retrieval_bm25_ad": "AFTER DELETE ON retrieval_passage REFERENCING OLD TABLE AS lode_old",
}

# A tsvector's length in tokens: its highest position (stop words take positions too).
LENGTH_FUNCTION_SQL = (
    "CREATE OR REPLACE FUNCTION lode_bm25_length(v tsvector) RETURNS integer "
    "LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ "
    "SELECT coalesce(max(pos), 0)::integer FROM unnest(v) AS u, unnest(u.positions) AS pos $$"
)
# A tsvector's postings: (lexeme, hits weighted A = title, hits weighted B = body). Not STRICT
# and a single SELECT, so the planner inlines it (a STRICT one runs as a function call per
# passage: 70 s instead of 1 s for SciFact's postings).
POSTINGS_FUNCTION_SQL = (
    "CREATE OR REPLACE FUNCTION lode_bm25_postings(v tsvector) "
    "RETURNS TABLE (lexeme text, title_tf integer, body_tf integer) "
    "LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ "
    "SELECT u.lexeme, cardinality(array_positions(u.weights, 'A')), "
    "cardinality(array_positions(u.weights, 'B')) FROM unnest(v) AS u $$"
)
# The head passages matching a tsquery, through the GIN index. The planner cannot see that a
# sequential scan evaluates `@@` on every detoasted tsvector while the GIN bitmap needs no
# recheck for a query of plain OR'd lexemes: on SciFact it picks the scan for a common-word
# query (56 ms where the bitmap takes 4). The function's own `SET` keeps the choice local.
MATCHES_FUNCTION_SQL = (
    "CREATE OR REPLACE FUNCTION lode_bm25_matches(query tsquery) "
    "RETURNS TABLE (id bigint, document_id bigint) "
    "LANGUAGE sql STABLE STRICT PARALLEL SAFE SET enable_seqscan = off AS $$ "
    "SELECT p.id, p.document_id FROM retrieval_passage p "
    "WHERE p.is_head AND p.search_vector @@ query $$"
)
# Statement-level: one INSERT … SELECT per statement, however many passages it wrote. The
# length is computed once per passage (a MATERIALIZED CTE: pulled up into the join it would be
# recomputed for every posting) and copied onto each posting. Inserts overwrite on conflict,
# so drifted statistics never make a canonical write fail.
_ADD_STATS = (
    "WITH n AS MATERIALIZED (SELECT n.id, n.search_vector, "
    "coalesce(lode_bm25_length(n.search_vector), 0) AS length {source} {where} AND n.is_head), "
    f"lengths AS (INSERT INTO {LENGTHS} (passage_id, length) SELECT id, length FROM n "
    "ON CONFLICT (passage_id) DO UPDATE SET length = excluded.length) "
    f"INSERT INTO {POSTINGS} (lexeme, passage_id, title_tf, body_tf, length) "
    "SELECT s.lexeme, n.id, s.title_tf, s.body_tf, n.length "
    "FROM n, lode_bm25_postings(n.search_vector) AS s "
    "ON CONFLICT (lexeme, passage_id) DO UPDATE SET title_tf = excluded.title_tf, "
    "body_tf = excluded.body_tf, length = excluded.length"
)
_NEW_ROWS = {"source": "FROM lode_new n", "where": "WHERE true"}
# Rows of an UPDATE whose head flag or tsvector changed: only those touch the statistics.
_CHANGED_ROWS = {
    "source": "FROM lode_old o JOIN lode_new n ON n.id = o.id",
    "where": "WHERE (o.is_head IS DISTINCT FROM n.is_head "
    "OR o.search_vector IS DISTINCT FROM n.search_vector)",
}
SYNC_FUNCTION_SQL = f"""
CREATE OR REPLACE FUNCTION lode_bm25_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    DELETE FROM {POSTINGS} t USING lode_old o WHERE t.passage_id = o.id AND o.is_head;
    DELETE FROM {LENGTHS} t USING lode_old o WHERE t.passage_id = o.id AND o.is_head;
  ELSIF TG_OP = 'UPDATE' THEN
    DELETE FROM {POSTINGS} t USING lode_old o JOIN lode_new n ON n.id = o.id
      WHERE t.passage_id = o.id AND o.is_head AND (NOT n.is_head
        OR o.search_vector IS DISTINCT FROM n.search_vector);
    DELETE FROM {LENGTHS} t USING lode_old o JOIN lode_new n ON n.id = o.id
      WHERE t.passage_id = o.id AND o.is_head AND (NOT n.is_head
        OR o.search_vector IS DISTINCT FROM n.search_vector);
    {_ADD_STATS.format(**_CHANGED_ROWS)};
  ELSE
    {_ADD_STATS.format(**_NEW_ROWS)};
  END IF;
  RETURN NULL;
END $$
"""
# TRUNCATE fires no row or statement DELETE triggers (Django's test flush uses it).
TRUNCATE_FUNCTION_SQL = f"""
CREATE OR REPLACE FUNCTION lode_bm25_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  TRUNCATE {POSTINGS}, {LENGTHS};
  RETURN NULL;
END $$
"""

# Every statement idempotent: `rebuild()` runs them again when something was dropped.
BM25_SCHEMA_SQL: list[str] = [
    # Covering: scoring and df read the index alone (index-only scans), never the heap.
    f"CREATE TABLE IF NOT EXISTS {POSTINGS} (lexeme text NOT NULL, passage_id bigint NOT NULL, "
    "title_tf integer NOT NULL, body_tf integer NOT NULL, length integer NOT NULL, "
    "PRIMARY KEY (lexeme, passage_id) INCLUDE (title_tf, body_tf, length))",
    f"CREATE INDEX IF NOT EXISTS {POSTINGS}_passage ON {POSTINGS} (passage_id)",
    f"CREATE TABLE IF NOT EXISTS {LENGTHS} (passage_id bigint PRIMARY KEY, "
    "length integer NOT NULL)",
    LENGTH_FUNCTION_SQL,
    POSTINGS_FUNCTION_SQL,
    MATCHES_FUNCTION_SQL,
    SYNC_FUNCTION_SQL,
    TRUNCATE_FUNCTION_SQL,
    *(
        f"CREATE OR REPLACE TRIGGER {name} {event} FOR EACH STATEMENT "
        "EXECUTE FUNCTION lode_bm25_sync()"
        for name, event in BM25_TRIGGERS.items()
    ),
    "CREATE OR REPLACE TRIGGER retrieval_bm25_at AFTER TRUNCATE ON retrieval_passage "
    "FOR EACH STATEMENT EXECUTE FUNCTION lode_bm25_truncate()",
]

# Fill (or refill) the statistics from the stored tsvectors of the head passages.
BM25_FILL_SQL: list[str] = [
    f"DELETE FROM {POSTINGS}",
    f"DELETE FROM {LENGTHS}",
    _ADD_STATS.format(source="FROM retrieval_passage n", where="WHERE true"),
]

BM25_DROP_SQL: list[str] = [
    "DROP TRIGGER IF EXISTS retrieval_bm25_at ON retrieval_passage",
    *(f"DROP TRIGGER IF EXISTS {name} ON retrieval_passage" for name in BM25_TRIGGERS),
    "DROP FUNCTION IF EXISTS lode_bm25_truncate()",
    "DROP FUNCTION IF EXISTS lode_bm25_sync()",
    "DROP FUNCTION IF EXISTS lode_bm25_matches(tsquery)",
    "DROP FUNCTION IF EXISTS lode_bm25_postings(tsvector)",
    "DROP FUNCTION IF EXISTS lode_bm25_length(tsvector)",
    f"DROP TABLE IF EXISTS {LENGTHS}",
    f"DROP TABLE IF EXISTS {POSTINGS}",
]


def tsquery_sql(query: ParsedQuery) -> tuple[str, list[str]]:
    """SQL for a tsquery built from bound parameters, and those parameters."""
    params: list[str] = []
    optional: list[str] = []
    for group in query.terms:
        fn = "plainto_tsquery" if len(group) == 1 else "phraseto_tsquery"
        optional.append(f"{fn}('{CONFIG}'::regconfig, %s)")
        params.append(" ".join(group))
    parts: list[str] = []
    if optional:
        parts.append("(" + " || ".join(optional) + ")")
    for group in query.phrases:
        parts.append(f"phraseto_tsquery('{CONFIG}'::regconfig, %s)")
        params.append(" ".join(group))
    sql = " && ".join(parts)
    for group in query.excluded:
        sql = f"({sql}) && !!phraseto_tsquery('{CONFIG}'::regconfig, %s)"
        params.append(" ".join(group))
    return sql, params


def query_tokens(query: ParsedQuery) -> list[str]:
    """The tokens BM25 scores: every term and every phrase's words, not the exclusions
    (a passage that matched holds none of them; FTS5 gives them a tf of 0 too)."""
    return list(dict.fromkeys(token for group in (*query.terms, *query.phrases) for token in group))


# The module docstring's BM25: tf = TITLE_WEIGHT x hits in the title + TEXT_WEIGHT x hits in the
# body (FTS5's column weights: the weighted sum of per-column hits); |D| the passage's tokens and
# avgdl their mean; N the head passages and df those holding q, over every owner (FTS5's
# statistics are table-wide too). Differences from FTS5, all small: a quoted phrase scores as its
# lexemes, each with its own df and tf, where FTS5 scores the phrase as one unit (every candidate
# contains the phrase anyway, it is required); |D| is the highest token position in the tsvector
# (the parser counts stop words, as FTS5 does, but a trailing stop word of the title or body is
# not counted, and `long-term` takes three positions, `long-term`, `long` and `term`, where FTS5
# counts two tokens).
# A posting's weighted tf, from the postings table aliased `b`.
TF_SQL = f"b.title_tf * {TITLE_WEIGHT}::float8 + b.body_tf * {TEXT_WEIGHT}::float8"


def part_sql(
    idf: str, avgdl: str, tf: str = "b.tf", length: str = "b.length", *, fixed_point: bool = True
) -> str:
    """One lexeme's part of a passage's score in fixed point (int8), from SQL expressions
    for the lexeme's IDF, avgdl, the posting's weighted tf and the passage's length (float8).
    Exhaustive and pruned scoring both use it, so their scores are the same to the bit.
    `fixed_point=False`: the plain float8 part (MaxScore's bounds)."""
    part = (
        f"{idf} * {tf} * {BM25_K1 + 1} / ({tf} + {BM25_K1} * "
        f"(1 - {BM25_B} + {BM25_B} * {length} / nullif({avgdl}, 0)))"
    )
    return f"round({part} * {FIXED_POINT})::int8" if fixed_point else part


def bm25_sql(candidates: str | None) -> str:
    """A statement scoring the passages `candidates` selects (a SELECT of `id`s over `m`,
    the GIN matches of the query, run as a CTE after `q`; None: every match, the top list),
    best BM25 first, ties by id; placeholders: the tsquery's, an array of query tokens,
    whether the query is made of single words only (`single_words`), the candidates', then
    the limit.

    The query's lexemes come from `to_tsvector` of each bound token, the same configuration
    the stored vectors were made with, so stemming and folding cannot drift apart. Their
    postings are read once (an index-only range per lexeme): their count per lexeme is df,
    and the rows of candidates are the tf and length scored. N and avgdl are aggregates over
    the lengths table. All in this statement's snapshot, so right after any write.

    Every match, for a query of single words each making at most one lexeme, is every
    passage with a posting of a query lexeme: postings exist only for head passages and
    hold every lexeme of their tsvector, and such a tsquery is an OR of those lexemes. The
    top list then skips the GIN matches (`m` is never run: the guard is a one-time
    condition and `m` a CTE nobody else reads); a phrase, an exclusion or a word the parser
    splits into several lexemes (an AND) still goes through the GIN index.

    A score is a sum in fixed point (each lexeme's part rounded to 1e-12, summed as
    integers), so it does not depend on the order the rows come in (a repair that rewrites
    the postings gives the same scores), without sorting each passage's rows.
    """
    wanted = (
        "((SELECT single FROM shape) OR b.passage_id IN (SELECT id FROM m))"
        if candidates is None
        else "b.passage_id IN (SELECT id FROM candidates)"
    )
    candidates_cte = "" if candidates is None else f", candidates AS MATERIALIZED ({candidates})"
    return (
        "WITH q AS (SELECT {tsquery} AS query), "
        "tl AS MATERIALIZED (SELECT "
        f"tsvector_to_array(to_tsvector('{CONFIG}'::regconfig, t.token)) AS lexemes "
        "FROM unnest(%s::text[]) AS t(token)), "
        "ql AS (SELECT DISTINCT l AS lexeme FROM tl, unnest(tl.lexemes) AS l), "
        "shape AS (SELECT %s::boolean AND coalesce(bool_and(cardinality(lexemes) <= 1), true) "
        "AS single FROM tl), "
        "totals AS (SELECT count(*)::float8 AS n, "
        f"coalesce(avg(length), 0)::float8 AS avgdl FROM {LENGTHS}), "
        "postings AS MATERIALIZED (SELECT b.lexeme, b.passage_id, "
        f"{TF_SQL} AS tf, b.length::float8 AS length "
        f"FROM {POSTINGS} b WHERE b.lexeme IN (SELECT lexeme FROM ql)), "
        "idf AS (SELECT lexeme, "
        f"greatest(ln((totals.n - count(*) + 0.5) / (count(*) + 0.5)), {BM25_MIN_IDF}) AS idf "
        "FROM postings, totals GROUP BY lexeme, totals.n), "
        "m AS MATERIALIZED (SELECT m.id, m.document_id FROM q, lode_bm25_matches(q.query) m)"
        f"{candidates_cte} "
        f"SELECT b.passage_id, (sum({part_sql('idf.idf', 'totals.avgdl')}) "
        f"/ {FIXED_POINT})::float8 AS score "
        "FROM postings b JOIN idf ON idf.lexeme = b.lexeme CROSS JOIN totals "
        f"WHERE {wanted} "
        "GROUP BY b.passage_id ORDER BY score DESC, b.passage_id LIMIT %s"
    )


def single_words(query: ParsedQuery) -> bool:
    """A query of single words only: no phrase, no exclusion (see `bm25_sql`)."""
    return not query.phrases and not query.excluded and all(len(g) == 1 for g in query.terms)


# --- MaxScore: the top list without scoring every posting -------------------------------
# MaxScore (Turtle & Flood, 1995), over the postings table as it is (no extra statistics):
# every lexeme gets an upper bound of its part of any passage's score; lexemes are read
# whole from the highest bound down (rare lexemes first), summing parts per passage, until
# the k-th best partial sum exceeds the sum of the bounds of the lexemes not read. No
# passage holding only those can then reach the top k, so the unread (common) lexemes are
# looked up for the surviving candidates only, through the (lexeme, passage) key.
#
# A lexeme's bound is its IDF times the largest `tf·(k1+1) / (tf + k1·(1 - b + b·|D|/avgdl))`
# over its postings, read in the query's own snapshot with df (one index-only aggregate per
# lexeme): exact under deletes and new versions with nothing kept between queries, and no
# per-lexeme row that every writer would update (see "BM25 statistics" above).

# Bounds are rounded up by this relative margin (plus one fixed-point unit) so float
# rounding in Python can never make a bound smaller than a part SQL computes.
BOUND_MARGIN = 1e-9

# A posting's part with an IDF of 1: a lexeme's bound is its IDF times the largest of these.
_SATURATION = part_sql(
    "1::float8", "totals.avgdl", f"({TF_SQL})", "b.length::float8", fixed_point=False
)
# Per query lexeme, in one snapshot: df, the largest part with an IDF of 1, the IDF as
# `bm25_sql` computes it, and N, avgdl; plus whether every token makes <= 1 lexeme.
_TERM_STATS_SQL = (
    "WITH tl AS MATERIALIZED (SELECT "
    f"tsvector_to_array(to_tsvector('{CONFIG}'::regconfig, t.token)) AS lexemes "
    "FROM unnest(%s::text[]) AS t(token)), "
    "ql AS (SELECT DISTINCT l AS lexeme FROM tl, unnest(tl.lexemes) AS l), "
    "totals AS (SELECT count(*)::float8 AS n, "
    f"coalesce(avg(length), 0)::float8 AS avgdl FROM {LENGTHS}), "
    "s AS (SELECT ql.lexeme, s.df, s.max_saturation FROM ql, totals CROSS JOIN LATERAL ("
    f"SELECT count(*) AS df, max({_SATURATION}) AS max_saturation "
    f"FROM {POSTINGS} b WHERE b.lexeme = ql.lexeme) s WHERE s.df > 0) "
    "SELECT s.lexeme, s.df, s.max_saturation, "
    f"greatest(ln((totals.n - s.df + 0.5) / (s.df + 0.5)), {BM25_MIN_IDF}) AS idf, "
    "totals.n, totals.avgdl, "
    "(SELECT coalesce(bool_and(cardinality(lexemes) <= 1), true) FROM tl) "
    "FROM totals LEFT JOIN s ON true"
)
# Every posting of one lexeme: (passage, its part in fixed point).
_POSTING_PART = part_sql("%s::float8", "%s::float8", f"({TF_SQL})", "b.length::float8")
_LEXEME_PARTS_SQL = f"SELECT b.passage_id, {_POSTING_PART} FROM {POSTINGS} b WHERE b.lexeme = %s"
# The postings of one lexeme held by these passages (ids sorted, so a merge join can walk
# them beside the lexeme's key range when they are many).
_CANDIDATE_PARTS_SQL = (
    f"SELECT b.passage_id, {_POSTING_PART} FROM {POSTINGS} b "
    "JOIN unnest(%s::bigint[]) AS c(id) ON b.passage_id = c.id WHERE b.lexeme = %s"
)


@dataclasses.dataclass(frozen=True, slots=True)
class _Lexeme:
    lexeme: str
    df: int
    idf: float
    bound: int  # fixed point, >= the part of any posting of this lexeme


def _bound(idf: float, max_saturation: float | None) -> int:
    """The largest part a posting of a lexeme can have, in fixed point, rounded up."""
    return math.ceil(idf * (max_saturation or 0.0) * 1e12 * (1 + BOUND_MARGIN)) + 1


def _kth_best(scores: dict[int, int], k: int) -> int:
    return heapq.nlargest(k, scores.values())[-1]


def pruned_top(query: ParsedQuery, limit: int) -> list[tuple[int, float]] | None:
    """`floor_search`'s list by MaxScore (see above): the same passages, order and scores as
    scoring every posting, or None for a query it does not cover (a phrase, an exclusion, a
    word the parser splits into several lexemes: their matches come from the GIN index).

    Its statements share one snapshot: a REPEATABLE READ transaction of its own, or the
    caller's transaction (whose writes it sees, as `bm25_sql` does)."""
    if not single_words(query):
        return None
    if connection.in_atomic_block:
        return _pruned_top(query, limit)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        return _pruned_top(query, limit)


def _pruned_top(query: ParsedQuery, limit: int) -> list[tuple[int, float]] | None:
    with connection.cursor() as cursor:
        cursor.execute(_TERM_STATS_SQL, [query_tokens(query)])
        rows = cursor.fetchall()
        if not rows[0][-1]:
            return None
        avgdl = rows[0][5]
        lexemes = sorted(
            (
                _Lexeme(lexeme, df, idf, _bound(idf, saturation))
                for lexeme, df, saturation, idf, _n, _avgdl, _single in rows
                if lexeme is not None
            ),
            key=lambda t: (-t.bound, t.lexeme),
        )
        if not lexemes or limit <= 0:
            return []
        partial: dict[int, int] = {}
        unread = sum(t.bound for t in lexemes)
        read = 0
        for lexeme in lexemes:
            if len(partial) >= limit and _kth_best(partial, limit) > unread:
                break
            cursor.execute(_LEXEME_PARTS_SQL, [lexeme.idf, avgdl, lexeme.lexeme])
            for passage_id, part in cursor.fetchall():
                partial[passage_id] = partial.get(passage_id, 0) + part
            unread -= lexeme.bound
            read += 1
        for lexeme in lexemes[read:]:
            # A passage whose partial sum plus every unread bound stays below the k-th best
            # partial sum (itself <= the k-th best score) cannot reach the top k; each
            # lookup raises the partial sums and lowers the unread bounds, so fewer remain.
            threshold = _kth_best(partial, limit)
            partial = {pid: s for pid, s in partial.items() if s + unread >= threshold}
            if lexeme.df <= len(partial):
                # Fewer postings than candidates: one range read beats a probe per candidate
                # (passages outside the candidates are out already).
                cursor.execute(_LEXEME_PARTS_SQL, [lexeme.idf, avgdl, lexeme.lexeme])
            else:
                cursor.execute(
                    _CANDIDATE_PARTS_SQL, [lexeme.idf, avgdl, sorted(partial), lexeme.lexeme]
                )
            for passage_id, part in cursor.fetchall():
                if passage_id in partial:
                    partial[passage_id] += part
            unread -= lexeme.bound
    # The score as `bm25_sql` turns the fixed-point sum into a float (numeric / float8).
    best = heapq.nsmallest(limit, partial.items(), key=lambda item: (-item[1], item[0]))
    return [(pid, total / 1e12) for pid, total in best]


def search(
    query: ParsedQuery,
    *,
    audience: Audience,
    limit: int = LEXICAL_LIMIT,
    documents: QuerySet[Document] | None = None,
) -> list[LexicalHit]:
    """Head passages of the live documents in the audience's spaces matching `query`, best
    BM25 first.

    `query.filters` apply inside the SQL, before `ORDER BY … LIMIT`, as `d.id IN (…)` over
    `documents` (the search's eligible-document queryset; built here from `query` when the
    caller has none), so a filtered-out passage never takes one of the `limit` places.
    Scores are BM25 as FTS5 computes it, higher is better (what sqlite.py returns).

    Without document filters the BM25 top list of every match is taken first and only its
    rows are checked for eligibility (`base.top_first`, as on SQLite): joining every match
    to its document cost more than scoring them. The joined query below is the fallback and
    the only way with filters. Both give exactly the same hits.
    """
    if query.is_empty:
        return []
    eligible, eligible_params = eligible_clause(query, audience=audience, documents=documents)
    if not eligible:
        found = top_first(lambda wanted: _top_list(query, wanted), audience, limit)
        if found is not None:
            return _hits(found)
    in_spaces, space_params = space_clause(audience)
    tsquery, params = tsquery_sql(query)
    candidates = (
        "SELECT m.id FROM m JOIN notes_document d ON d.id = m.document_id "
        f"WHERE {in_spaces} AND d.deleted_at IS NULL {eligible}"
    )
    sql = bm25_sql(candidates).replace("{tsquery}", tsquery)
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                *params,
                query_tokens(query),
                single_words(query),
                *space_params,
                *eligible_params,
                limit,
            ],
        )
        return _hits(cursor.fetchall())


def _hits(rows: list[tuple[int, float]]) -> list[LexicalHit]:
    return [LexicalHit(passage_id=row[0], score=float(row[1]), score_name="bm25") for row in rows]


def _top_list(query: ParsedQuery, limit: int) -> list[tuple[int, float, int | None]]:
    """The floor's top list with the space of each live head passage (None for the rest),
    looked up after the limit in the same statement (`base.TopList`); outer joins, so the
    list keeps its length whatever the lookups find. MaxScore's list where it applies
    (`pruned_top`), its spaces looked up after."""
    pruned = pruned_top(query, limit)
    if pruned is not None:
        return with_spaces(pruned)
    tsquery, params = tsquery_sql(query)
    sql = (
        "SELECT t.passage_id, t.score, "
        "CASE WHEN p.is_head AND d.deleted_at IS NULL THEN d.space_id END "
        f"FROM ({bm25_sql(None).replace('{tsquery}', tsquery)}) t "
        "LEFT JOIN retrieval_passage p ON p.id = t.passage_id "
        "LEFT JOIN notes_document d ON d.id = p.document_id "
        "ORDER BY t.score DESC, t.passage_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, query_tokens(query), single_words(query), limit])
        return cursor.fetchall()


def floor_search(
    query: ParsedQuery, *, limit: int = LEXICAL_LIMIT, pruned: bool = True
) -> list[tuple[int, float]]:
    """The same tsquery and BM25 over every match, with no joins or eligibility: the
    benchmark floor, and the top list `search()` checks first. Best first, ties by id.
    By MaxScore where it applies (`pruned_top`); `pruned=False` scores every posting."""
    if pruned:
        found = pruned_top(query, limit)
        if found is not None:
            return found
    tsquery, params = tsquery_sql(query)
    sql = bm25_sql(None).replace("{tsquery}", tsquery)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, query_tokens(query), single_words(query), limit])
        return cursor.fetchall()


def indexed_row_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM retrieval_passage WHERE is_head AND search_vector IS NOT NULL"
        )
        return cursor.fetchone()[0]


def rebuild() -> None:
    """Make the index what the canonical passages say (idempotent; run it in a transaction).

    REINDEX alone rebuilds the GIN index from the *stored* tsvectors, which may themselves
    be wrong (computed under an older text search configuration, or written around the
    generated expression). A stored generated column is recomputed only when a column it
    depends on is written (measured on PostgreSQL 15: updating another column keeps the old
    value), so head rows whose stored tsvector differs from a fresh one get `text = text`
    (the text itself is unchanged); then the GIN index is rebuilt, or created if missing,
    and the BM25 statistics are refilled from those tsvectors.
    """
    with connection.cursor() as cursor:
        # The BM25 statistics' tables, functions and triggers first, recreated where missing
        # (every statement is idempotent): the UPDATE below fires those triggers.
        for statement in BM25_SCHEMA_SQL:
            cursor.execute(statement)
        cursor.execute(
            "UPDATE retrieval_passage SET text = text "
            f"WHERE is_head AND search_vector IS DISTINCT FROM ({VECTOR_SQL})"
        )
        if gin_index_problem() == "missing":
            cursor.execute(INDEX_SQL)
        else:
            cursor.execute(f"REINDEX INDEX {INDEX_NAME}")
        # Then the statistics, refilled from the now-correct tsvectors.
        for statement in BM25_FILL_SQL:
            cursor.execute(statement)


# --- health (retrieval/index/health.py) --------------------------------------------------------


def gin_index_problem() -> str | None:
    """None when the GIN index exists and is usable, else "missing" or "invalid"."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indisvalid AND indisready AND indislive FROM pg_index "
            "WHERE indexrelid = to_regclass(%s)",
            [INDEX_NAME],
        )
        row = cursor.fetchone()
    if row is None:
        return "missing"
    return None if row[0] else "invalid"


def _digest_sql(column: str) -> str:
    """SHA-256 over one line per head passage, by id: the id and the md5 of a tsvector's text
    (md5 per row keeps the aggregated string small at any corpus size)."""
    lines = f"string_agg(id::text || ' ' || md5({column}::text), E'\\n' ORDER BY id)"
    return f"encode(sha256(convert_to(coalesce({lines}, ''), 'UTF8')), 'hex')"


# The health check's own statement of the postings and length formulas (the same as
# `lode_bm25_postings`/`lode_bm25_length`, written out so a replaced function is caught).
_DIFFERS = "(e.title_tf, e.body_tf, e.length) IS DISTINCT FROM (a.title_tf, a.body_tf, a.length)"
_EXPECTED_STATS_SQL = (
    f"WITH v AS (SELECT id, {VECTOR_SQL} AS vector FROM retrieval_passage WHERE is_head), "
    "el AS (SELECT v.id AS passage_id, (SELECT coalesce(max(pos), 0) "
    "FROM unnest(v.vector) AS u, unnest(u.positions) AS pos)::integer AS length FROM v), "
    "e AS (SELECT u.lexeme, v.id AS passage_id, "
    "cardinality(array_positions(u.weights, 'A')) AS title_tf, "
    "cardinality(array_positions(u.weights, 'B')) AS body_tf, el.length "
    "FROM v JOIN el ON el.passage_id = v.id, unnest(v.vector) AS u), "
    # A full join (hashed) rather than EXCEPT (sorted): half the time on SciFact.
    "postings AS (SELECT "
    f"count(*) FILTER (WHERE e.passage_id IS NOT NULL AND (a.passage_id IS NULL OR {_DIFFERS})) "
    "AS missing, "
    f"count(*) FILTER (WHERE a.passage_id IS NOT NULL AND (e.passage_id IS NULL OR {_DIFFERS})) "
    "AS extra "
    f"FROM e FULL JOIN {POSTINGS} a ON a.lexeme = e.lexeme AND a.passage_id = e.passage_id), "
    "lengths AS (SELECT "
    "count(*) FILTER (WHERE e.passage_id IS NOT NULL "
    "AND (a.passage_id IS NULL OR a.length IS DISTINCT FROM e.length)) "
    "AS missing, "
    "count(*) FILTER (WHERE a.passage_id IS NOT NULL "
    "AND (e.passage_id IS NULL OR a.length IS DISTINCT FROM e.length)) "
    f"AS extra FROM el e FULL JOIN {LENGTHS} a ON a.passage_id = e.passage_id) "
    "SELECT postings.missing, postings.extra, lengths.missing, lengths.extra "
    "FROM postings, lengths"
)


def bm25_problems() -> list[str]:
    """What is wrong with the BM25 statistics, in plain words; empty when they hold exactly
    the postings and lengths recomputed from the head passages' text, and every trigger that
    keeps them is in place. df, N and avgdl are aggregates over these rows, so checking the
    rows checks them."""
    problems: list[str] = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n FROM unnest(%s::text[]) AS n WHERE NOT EXISTS (SELECT 1 FROM pg_trigger "
            "WHERE tgrelid = 'retrieval_passage'::regclass AND tgname = n AND tgenabled <> 'D')",
            [[*BM25_TRIGGERS, "retrieval_bm25_at"]],
        )
        problems.extend(
            f"the BM25 statistics trigger {name} is missing or disabled (`lode_index repair` "
            "recreates it)"
            for (name,) in cursor.fetchall()
        )
        cursor.execute("SELECT to_regclass(%s), to_regclass(%s)", [POSTINGS, LENGTHS])
        if None in cursor.fetchone():
            return [*problems, "the BM25 statistics tables are missing"]
        cursor.execute(_EXPECTED_STATS_SQL)
        missing, extra, lengths_missing, lengths_extra = cursor.fetchone()
    if missing or extra:
        problems.append(
            f"the BM25 postings disagree with a recomputation from the head passages: "
            f"{missing} missing or different, {extra} extra or different"
        )
    if lengths_missing or lengths_extra:
        problems.append(
            f"the BM25 passage lengths disagree with a recomputation from the head passages: "
            f"{lengths_missing} missing or different, {lengths_extra} extra or different"
        )
    return problems


def index_health() -> LexicalHealth:
    """Compare every head passage's stored tsvector with one recomputed from its text.

    One statement, so one snapshot: the generated column's expression (`VECTOR_SQL`) is
    evaluated afresh for each head passage, and the stored and recomputed vectors are
    compared row by row and digested in id order. The GIN index is checked for existence
    and validity only: PostgreSQL 15's amcheck has no GIN check, and `rebuild()` always
    rebuilds it. The BM25 statistics are compared with a recomputation (`bm25_problems`).
    """
    sql = (
        f"WITH p AS (SELECT id, search_vector AS stored, {VECTOR_SQL} AS expected "
        "FROM retrieval_passage WHERE is_head) "
        "SELECT count(*), count(stored), "
        "count(*) FILTER (WHERE stored IS DISTINCT FROM expected), "
        "coalesce(sum(length(expected)), 0), coalesce(sum(length(stored)), 0), "
        f"{_digest_sql('expected')}, {_digest_sql('stored')} FROM p"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        canonical, indexed, mismatches, expected_entries, actual_entries, expected, actual = (
            cursor.fetchone()
        )
    findings: list[str] = []
    problem = gin_index_problem()
    if problem is not None:
        findings.append(f"the GIN index {INDEX_NAME} is {problem}")
    findings.extend(bm25_problems())
    return LexicalHealth(
        engine="postgresql-tsvector",
        canonical_rows=canonical,
        indexed_rows=indexed,
        integrity="not available",
        expected_digest=expected,
        actual_digest=actual,
        expected_entries=int(expected_entries),
        actual_entries=int(actual_entries),
        mismatches=mismatches,
        mismatch_unit="passages",
        findings=tuple(findings),
    )


def headline_options(start: str, stop: str) -> str:
    """`ts_headline` options highlighting every match of the whole text with these markers.

    Values are double-quoted, with any double quote doubled, which is how PostgreSQL's
    options parser reads a value containing commas, spaces, '=' or quotes.
    """

    def quoted(value: str) -> str:
        return '"' + value.replace('"', '""') + '"'

    return f"StartSel={quoted(start)}, StopSel={quoted(stop)}, HighlightAll=true"


def highlight(query: ParsedQuery, passages: list[tuple[int, str]]) -> dict[int, list[Segment]]:
    """Highlight segments for `passages` ((passage id, passage text) of hits the lexical leg
    returned), from `ts_headline` over the stored passage text with the tsquery `search()`
    used minus its exclusions, and `HighlightAll=true` (the whole text, not fragments).
    ts_headline marks every operand of the query, negated ones too, so an excluded phrase's
    words would light up; they already kept the passage out if they matched. Unlike FTS5 it
    also marks a phrase's words wherever they occur, not only where the phrase does.

    Markers are chosen per passage so they occur nowhere in its text (each row's options
    come from a VALUES table). The output is parsed strictly and must add up to the passage
    text, else that passage gets one plain segment (`segments_or_plain`). A passage longer
    than `HIGHLIGHT_MAX_CHARS` is absent from the result.
    """
    if query.is_empty or not passages:
        return {}
    # The engine's cost grows with the square of the matches in one passage: longer
    # passages (chunked before LODE_CHUNK_MAX_CHARS) are left to the caller's bounded
    # Python highlighter (`retrieval.highlight.highlight_terms`).
    texts = {pid: text for pid, text in passages if len(text) <= HIGHLIGHT_MAX_CHARS}
    if not texts:
        return {}
    markers = {pid: collision_free_markers(text) for pid, text in texts.items()}
    tsquery, query_params = tsquery_sql(dataclasses.replace(query, excluded=()))
    values = ", ".join(["(%s::bigint, %s::text)"] * len(markers))
    params: list[object] = [
        x for pid, (s, e) in markers.items() for x in (pid, headline_options(s, e))
    ]
    sql = (
        f"WITH q AS (SELECT {tsquery} AS query), m(id, options) AS (VALUES {values}) "
        f"SELECT p.id, ts_headline('{CONFIG}'::regconfig, p.text, q.query, m.options) "
        "FROM m JOIN retrieval_passage p ON p.id = m.id, q"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*query_params, *params])
        rows = cursor.fetchall()
    return {
        pid: segments_or_plain(texts[pid], marked or "", *markers[pid])
        for pid, marked in rows
        if pid in texts
    }


# --- request time budget (lode_site/budget.py) -------------------------------------------

# SQLSTATE query_canceled: what statement_timeout raises.
QUERY_CANCELED = "57014"


def install_time_budget(connection: BaseDatabaseWrapper, budget: Budget) -> float | None:
    """Make PostgreSQL cancel any statement that runs longer than what is left of `budget`
    (`statement_timeout`, session level; `remove_time_budget` resets it). Sent on the raw
    psycopg connection, past Django's execute wrappers (the budget's own wrapper calls this).
    Returns the limit set, in seconds: it is per statement, so the caller tightens it as the
    deadline nears."""
    milliseconds = max(1, math.ceil(budget.remaining() * 1000))
    with connection.connection.cursor() as cursor:
        cursor.execute(f"SET statement_timeout = {int(milliseconds)}")
    return milliseconds / 1000


def remove_time_budget(connection: BaseDatabaseWrapper) -> None:
    """Back to the server's default, so a persistent connection's next user (another
    request, the worker) runs without this request's limit."""
    with connection.connection.cursor() as cursor:
        cursor.execute("RESET statement_timeout")


def is_time_budget_interrupt(exc: BaseException) -> bool:
    """Whether `exc` (a Django DatabaseError) is a statement cancelled by statement_timeout."""
    return getattr(exc.__cause__, "sqlstate", None) == QUERY_CANCELED
