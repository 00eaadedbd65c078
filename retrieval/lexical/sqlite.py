"""SQLite FTS5 lexical backend.

The index is an external-content FTS5 table over the view of head passages, kept in step by
triggers on `retrieval_passage`, so a passage is indexed in the same transaction that writes
it. Tokenizer `porter unicode61 remove_diacritics 2`; ranking by `bm25()` with the title
column weighted above the body.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from retrieval.lexical import LEXICAL_LIMIT, LexicalHit
from retrieval.query import ParsedQuery

FTS_TABLE = "retrieval_passage_fts"
HEAD_VIEW = "retrieval_head_passage"
TOKENIZER = "porter unicode61 remove_diacritics 2"
# bm25() column weights (title_text, text). 3:1 measured best on SciFact train (bench/).
TITLE_WEIGHT = 3.0
TEXT_WEIGHT = 1.0

SCHEMA_SQL: list[str] = [
    f"CREATE VIEW {HEAD_VIEW} AS SELECT id, title_text, text FROM retrieval_passage WHERE is_head",
    f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5("
    f"title_text, text, content='{HEAD_VIEW}', content_rowid='id', tokenize='{TOKENIZER}')",
    f"CREATE TRIGGER {FTS_TABLE}_ai AFTER INSERT ON retrieval_passage WHEN new.is_head BEGIN "
    f"INSERT INTO {FTS_TABLE}(rowid, title_text, text) VALUES (new.id, new.title_text, new.text);"
    " END",
    f"CREATE TRIGGER {FTS_TABLE}_ad AFTER DELETE ON retrieval_passage WHEN old.is_head BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, title_text, text) "
    "VALUES ('delete', old.id, old.title_text, old.text); END",
    f"CREATE TRIGGER {FTS_TABLE}_au AFTER UPDATE ON retrieval_passage BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, title_text, text) "
    "SELECT 'delete', old.id, old.title_text, old.text WHERE old.is_head; "
    f"INSERT INTO {FTS_TABLE}(rowid, title_text, text) "
    "SELECT new.id, new.title_text, new.text WHERE new.is_head; END",
]

DROP_SQL: list[str] = [
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_au",
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_ad",
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_ai",
    f"DROP TABLE IF EXISTS {FTS_TABLE}",
    f"DROP VIEW IF EXISTS {HEAD_VIEW}",
]


def _quote(group: Sequence[str]) -> str:
    # Tokens are letter/digit runs (retrieval.query.WORD_RE), so they cannot contain a double
    # quote; quoting every one keeps words like NEAR, AND, NOT from being FTS5 operators.
    return '"' + " ".join(group) + '"'


def match_expression(query: ParsedQuery) -> str:
    """The FTS5 MATCH string for a parsed query: (any term) AND every phrase NOT exclusions."""
    parts: list[str] = []
    if query.terms:
        parts.append("(" + " OR ".join(_quote(g) for g in query.terms) + ")")
    parts.extend(_quote(g) for g in query.phrases)
    expression = " AND ".join(parts)
    for group in query.excluded:
        expression += " NOT " + _quote(group)
    return expression


def search(query: ParsedQuery, *, owner_id: int, limit: int = LEXICAL_LIMIT) -> list[LexicalHit]:
    """Head passages of `owner_id`'s live documents matching `query`, best bm25 first."""
    if query.is_empty:
        return []
    sql = (
        f"SELECT p.id, bm25({FTS_TABLE}, %s, %s) AS score FROM {FTS_TABLE} "
        f"JOIN retrieval_passage p ON p.id = {FTS_TABLE}.rowid "
        "JOIN notes_document d ON d.id = p.document_id "
        f"WHERE {FTS_TABLE} MATCH %s AND p.is_head AND d.owner_id = %s "
        "AND d.deleted_at IS NULL "
        "ORDER BY score, p.id LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [TITLE_WEIGHT, TEXT_WEIGHT, match_expression(query), owner_id, limit])
        rows = cursor.fetchall()
    # bm25() is negative, more negative = better; negate so every score reads "higher is better".
    return [LexicalHit(passage_id=row[0], score=-row[1], score_name="bm25") for row in rows]


def floor_search(query: ParsedQuery, *, limit: int = LEXICAL_LIMIT) -> list[tuple[int, float]]:
    """The same MATCH straight against FTS5, no joins or eligibility: the benchmark floor."""
    sql = (
        f"SELECT rowid, bm25({FTS_TABLE}, %s, %s) AS score FROM {FTS_TABLE} "
        f"WHERE {FTS_TABLE} MATCH %s ORDER BY score LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [TITLE_WEIGHT, TEXT_WEIGHT, match_expression(query), limit])
        return cursor.fetchall()


def indexed_row_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {FTS_TABLE}_docsize")
        return cursor.fetchone()[0]


def rebuild() -> None:
    """Rebuild the index from the head-passage view (idempotent)."""
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
