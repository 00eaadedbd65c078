"""PostgreSQL full-text lexical backend.

A stored generated `tsvector` column on `retrieval_passage` (title weighted A, body B, the
`english` configuration, so Porter-style stemming as in SQLite) with a partial GIN index over
head passages. Being a generated column, it is written in the same statement as the passage.
Queries are composed from `plainto_tsquery`/`phraseto_tsquery` calls with every user token
passed as a bound parameter; ranking by `ts_rank_cd`.
"""

from __future__ import annotations

from django.db import connection

from retrieval.lexical import LEXICAL_LIMIT, LexicalHit
from retrieval.query import ParsedQuery

# `english` stemming with accents folded first (like FTS5's remove_diacritics), so "cafe"
# finds "café". Creating the unaccent extension needs a role allowed to create extensions.
CONFIG = "lode_english"
INDEX_NAME = "retrieval_passage_search_gin"
# ts_rank_cd weights for {D, C, B, A}: title (A) counts three times the body (B).
RANK_WEIGHTS = "{0.1, 0.2, 0.33, 1.0}"

SCHEMA_SQL: list[str] = [
    "CREATE EXTENSION IF NOT EXISTS unaccent",
    f"CREATE TEXT SEARCH CONFIGURATION {CONFIG} (COPY = english)",
    f"ALTER TEXT SEARCH CONFIGURATION {CONFIG} "
    "ALTER MAPPING FOR hword, hword_part, word WITH unaccent, english_stem",
    "ALTER TABLE retrieval_passage ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ("
    f"setweight(to_tsvector('{CONFIG}'::regconfig, coalesce(title_text, '')), 'A') || "
    f"setweight(to_tsvector('{CONFIG}'::regconfig, coalesce(text, '')), 'B')) STORED",
    f"CREATE INDEX {INDEX_NAME} ON retrieval_passage USING GIN (search_vector) WHERE is_head",
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


def search(query: ParsedQuery, *, owner_id: int, limit: int = LEXICAL_LIMIT) -> list[LexicalHit]:
    """Head passages of `owner_id`'s live documents matching `query`, best ts_rank_cd first."""
    if query.is_empty:
        return []
    tsquery, params = tsquery_sql(query)
    sql = (
        f"WITH q AS (SELECT {tsquery} AS query) "
        f"SELECT p.id, ts_rank_cd('{RANK_WEIGHTS}', p.search_vector, q.query) AS score "
        "FROM retrieval_passage p JOIN notes_document d ON d.id = p.document_id, q "
        "WHERE p.is_head AND p.search_vector @@ q.query AND d.owner_id = %s "
        "AND d.deleted_at IS NULL "
        "ORDER BY score DESC, p.id LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, owner_id, limit])
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
    """Generated columns recompute on write; reindexing rebuilds the GIN index itself."""
    with connection.cursor() as cursor:
        cursor.execute(f"REINDEX INDEX {INDEX_NAME}")
