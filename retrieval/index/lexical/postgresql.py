"""PostgreSQL full-text lexical backend.

A stored generated `tsvector` column on `retrieval_passage` (title weighted A, body B, the
`english` configuration, so Porter-style stemming as in SQLite) with a partial GIN index over
head passages. Being a generated column, it is written in the same statement as the passage.
Queries are composed from `plainto_tsquery`/`phraseto_tsquery` calls with every user token
passed as a bound parameter; ranking by `ts_rank_cd`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from django.db import connection
from django.db.models import QuerySet

from notes.models import Document
from retrieval.eligibility import eligible_clause
from retrieval.highlight import (
    HIGHLIGHT_MAX_CHARS,
    Segment,
    collision_free_markers,
    segments_or_plain,
)
from retrieval.index.lexical.base import LEXICAL_LIMIT, LexicalHealth, LexicalHit
from retrieval.query import ParsedQuery

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

    from lode_site.budget import Budget

# `english` stemming with accents folded first (like FTS5's remove_diacritics), so "cafe"
# finds "café". Creating the unaccent extension needs a role allowed to create extensions.
CONFIG = "lode_english"
INDEX_NAME = "retrieval_passage_search_gin"
# ts_rank_cd weights for {D, C, B, A}: title (A) counts three times the body (B).
RANK_WEIGHTS = "{0.1, 0.2, 0.33, 1.0}"

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


def search(
    query: ParsedQuery,
    *,
    owner_id: int,
    limit: int = LEXICAL_LIMIT,
    documents: QuerySet[Document] | None = None,
) -> list[LexicalHit]:
    """Head passages of `owner_id`'s live documents matching `query`, best ts_rank_cd first.

    `query.filters` apply inside the SQL, before `ORDER BY … LIMIT`, as `d.id IN (…)` over
    `documents` (the search's eligible-document queryset; built here from `query` when the
    caller has none), so a filtered-out passage never takes one of the `limit` places.
    """
    if query.is_empty:
        return []
    eligible, eligible_params = eligible_clause(query, owner_id=owner_id, documents=documents)
    tsquery, params = tsquery_sql(query)
    sql = (
        f"WITH q AS (SELECT {tsquery} AS query) "
        f"SELECT p.id, ts_rank_cd('{RANK_WEIGHTS}', p.search_vector, q.query) AS score "
        "FROM retrieval_passage p JOIN notes_document d ON d.id = p.document_id, q "
        "WHERE p.is_head AND p.search_vector @@ q.query AND d.owner_id = %s "
        f"AND d.deleted_at IS NULL {eligible}"
        "ORDER BY score DESC, p.id LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, owner_id, *eligible_params, limit])
        rows = cursor.fetchall()
    return [
        LexicalHit(passage_id=row[0], score=float(row[1]), score_name="ts_rank_cd") for row in rows
    ]


def floor_search(query: ParsedQuery, *, limit: int = LEXICAL_LIMIT) -> list[tuple[int, float]]:
    """The same tsquery against the GIN index with no joins or owner filter: the floor."""
    tsquery, params = tsquery_sql(query)
    sql = (
        f"WITH q AS (SELECT {tsquery} AS query) "
        f"SELECT p.id, ts_rank_cd('{RANK_WEIGHTS}', p.search_vector, q.query) AS score "
        "FROM retrieval_passage p, q WHERE p.is_head AND p.search_vector @@ q.query "
        "ORDER BY score DESC LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, limit])
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
    (the text itself is unchanged); then the GIN index is rebuilt, or created if missing.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE retrieval_passage SET text = text "
            f"WHERE is_head AND search_vector IS DISTINCT FROM ({VECTOR_SQL})"
        )
        if gin_index_problem() == "missing":
            cursor.execute(INDEX_SQL)
        else:
            cursor.execute(f"REINDEX INDEX {INDEX_NAME}")


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


def index_health() -> LexicalHealth:
    """Compare every head passage's stored tsvector with one recomputed from its text.

    One statement, so one snapshot: the generated column's expression (`VECTOR_SQL`) is
    evaluated afresh for each head passage, and the stored and recomputed vectors are
    compared row by row and digested in id order. The GIN index is checked for existence
    and validity only: PostgreSQL 15's amcheck has no GIN check, and `rebuild()` always
    rebuilds it.
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
