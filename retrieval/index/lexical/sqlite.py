"""SQLite FTS5 lexical backend.

The index is an external-content FTS5 table over the view of head passages, kept in step by
triggers on `retrieval_passage`, so a passage is indexed in the same transaction that writes
it. Tokenizer `porter unicode61 remove_diacritics 2`; ranking by `bm25()` with the title
column weighted above the body.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from django.db import DatabaseError, connection
from django.db.backends.utils import CursorWrapper
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

FTS_TABLE = "retrieval_passage_fts"
HEAD_VIEW = "retrieval_head_passage"
TOKENIZER = "porter unicode61 remove_diacritics 2"

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
    # Tokens are letter/digit runs (retrieval.text.WORD_RE), so they cannot contain a double
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


def search(
    query: ParsedQuery,
    *,
    audience: Audience,
    limit: int = LEXICAL_LIMIT,
    documents: QuerySet[Document] | None = None,
) -> list[LexicalHit]:
    """Head passages of the live documents in the audience's spaces matching `query`, best
    bm25 first (ties by passage id).

    `query.filters` apply inside the SQL, before `ORDER BY … LIMIT`, as `d.id IN (…)` over
    `documents` (the search's eligible-document queryset; built here from `query` when the
    caller has none), so a filtered-out passage never takes one of the `limit` places.

    Without document filters the FTS5 top list is taken first and only its rows are checked
    for eligibility (`_search_top_first`); the joined query below is the fallback and the
    only way with filters. Both give exactly the same hits.
    """
    if query.is_empty:
        return []
    eligible, eligible_params = eligible_clause(query, audience=audience, documents=documents)
    in_spaces, space_params = space_clause(audience)
    if not eligible:
        found = _search_top_first(query, audience, limit)
        if found is not None:
            return found
    sql = (
        f"SELECT p.id, bm25({FTS_TABLE}, %s, %s) AS score FROM {FTS_TABLE} "
        f"JOIN retrieval_passage p ON p.id = {FTS_TABLE}.rowid "
        "JOIN notes_document d ON d.id = p.document_id "
        f"WHERE {FTS_TABLE} MATCH %s AND p.is_head AND {in_spaces} "
        f"AND d.deleted_at IS NULL {eligible}"
        "ORDER BY score, p.id LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                TITLE_WEIGHT,
                TEXT_WEIGHT,
                match_expression(query),
                *space_params,
                *eligible_params,
                limit,
            ],
        )
        rows = cursor.fetchall()
    return _hits(rows)


def _hits(rows: Sequence[tuple[int, float]]) -> list[LexicalHit]:
    # bm25() is negative, more negative = better; negate so every score reads "higher is better".
    return [LexicalHit(passage_id=row[0], score=-row[1], score_name="bm25") for row in rows]


def _search_top_first(
    query: ParsedQuery, audience: Audience, limit: int
) -> list[LexicalHit] | None:
    """`search()` without document filters, from FTS5's own top list (`base.top_first`):
    None when the joined query should answer instead."""
    expression = match_expression(query)

    def top_list(wanted: int) -> list[tuple[int, float, int | None]]:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT rowid, bm25({FTS_TABLE}, %s, %s) AS score FROM {FTS_TABLE} "
                f"WHERE {FTS_TABLE} MATCH %s ORDER BY score, rowid LIMIT %s",
                [TITLE_WEIGHT, TEXT_WEIGHT, expression, wanted],
            )
            return with_spaces(cursor.fetchall())

    found = top_first(top_list, audience, limit)
    return None if found is None else _hits(found)


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


# --- health (retrieval/index/health.py) --------------------------------------------------------

# TEMP tables (this connection only) the health check builds and drops again.
RECONSTRUCTION = "lode_health_fts"
_TEMP_TABLES = (
    f"{RECONSTRUCTION}_instance",
    f"{RECONSTRUCTION}_row",
    f"{FTS_TABLE}_instance",
    f"{FTS_TABLE}_row",
    RECONSTRUCTION,
)
DIGEST_BATCH = 10_000


@contextmanager
def _read_snapshot() -> Iterator[None]:
    """Every read inside sees one state of the database.

    A deferred transaction, not `atomic()`: lode opens those with BEGIN IMMEDIATE, which
    would hold the write lock (and make note saves wait) for the whole check. Under WAL a
    reader blocks no writer. Inside an existing transaction (tests) that one is used.
    """
    if connection.in_atomic_block or not connection.get_autocommit():
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("BEGIN DEFERRED")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("COMMIT")


def _drop_temp_tables(cursor: CursorWrapper) -> None:
    for name in _TEMP_TABLES:
        cursor.execute(f"DROP TABLE IF EXISTS temp.{name}")


def _create_vocabularies(cursor: CursorWrapper, schema: str, table: str) -> None:
    """TEMP fts5vocab tables `<table>_instance` and `<table>_row` over an FTS5 table."""
    for kind in ("instance", "row"):
        cursor.execute(
            f"CREATE VIRTUAL TABLE temp.{table}_{kind} USING fts5vocab({schema}, {table}, {kind})"
        )


def _vocabulary_digest(cursor: CursorWrapper, vocab: str) -> tuple[str, int]:
    """SHA-256 over every (term, rowid, column, offset) of an fts5vocab `instance` table,
    ordered, one tab-separated line each; and how many there are."""
    cursor.execute(
        "SELECT term || char(9) || doc || char(9) || col || char(9) || offset "
        f"FROM temp.{vocab} ORDER BY term, doc, col, offset"
    )
    digest = hashlib.sha256()
    count = 0
    while rows := cursor.fetchmany(DIGEST_BATCH):
        count += len(rows)
        digest.update(("\n".join(row[0] for row in rows) + "\n").encode("utf-8"))
    return digest.hexdigest(), count


def integrity_check() -> str:
    """FTS5's own check; rank 1 also compares the index with its content (the head-passage
    view), not just its internal structure. "ok" or the error SQLite raised."""
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rank) VALUES ('integrity-check', 1)"
            )
    except DatabaseError as exc:
        return str(exc) or type(exc).__name__
    return "ok"


def index_health() -> LexicalHealth:
    """Compare the FTS5 index with an independent rebuild from the canonical passages.

    A contentless TEMP FTS5 table with the same columns and tokenizer is filled straight
    from `retrieval_passage` (not through the index's content view), then both indexes are
    read through fts5vocab: `instance` tables, scanned in order, give the two vocabulary
    digests; `row` tables, looked up term by term, check the index's b-tree (deleting
    `_idx` rows breaks lookups while a scan still reads every entry). With the row count
    and FTS5's integrity-check this catches bogus tokens, missing entries and deleted
    shadow rows even when the row count is unchanged.
    """
    findings: list[str] = []
    integrity = integrity_check()
    with _read_snapshot(), connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM retrieval_passage WHERE is_head")
        canonical = cursor.fetchone()[0]
        cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", [FTS_TABLE])
        found = cursor.fetchone()
        if found is None:
            findings.append(f"the FTS5 table {FTS_TABLE} is missing")
        elif f"tokenize='{TOKENIZER}'" not in found[0]:
            findings.append(f"the FTS5 table is not built with tokenize='{TOKENIZER}'")
        try:
            indexed = indexed_row_count()
        except DatabaseError as exc:
            indexed = -1
            findings.append(f"the index's row count cannot be read: {exc}")
        _drop_temp_tables(cursor)
        try:
            cursor.execute(
                f"CREATE VIRTUAL TABLE temp.{RECONSTRUCTION} USING fts5("
                f"title_text, text, content='', tokenize='{TOKENIZER}')"
            )
            cursor.execute(
                f"INSERT INTO temp.{RECONSTRUCTION}(rowid, title_text, text) "
                "SELECT id, title_text, text FROM retrieval_passage WHERE is_head ORDER BY id"
            )
            _create_vocabularies(cursor, "temp", RECONSTRUCTION)
            expected, expected_entries = _vocabulary_digest(cursor, f"{RECONSTRUCTION}_instance")
            try:
                _create_vocabularies(cursor, "main", FTS_TABLE)
                actual, actual_entries = _vocabulary_digest(cursor, f"{FTS_TABLE}_instance")
                cursor.execute(
                    f"SELECT count(*) FROM temp.{RECONSTRUCTION}_row e WHERE NOT EXISTS ("
                    f"SELECT 1 FROM temp.{FTS_TABLE}_row a "
                    "WHERE a.term = e.term AND a.doc = e.doc AND a.cnt = e.cnt)"
                )
                mismatches = cursor.fetchone()[0]
            except DatabaseError as exc:
                actual, actual_entries, mismatches = "", -1, 0
                findings.append(f"the lexical index cannot be read: {exc}")
        finally:
            _drop_temp_tables(cursor)
    return LexicalHealth(
        engine="sqlite-fts5",
        canonical_rows=canonical,
        indexed_rows=indexed,
        integrity=integrity,
        expected_digest=expected,
        actual_digest=actual,
        expected_entries=expected_entries,
        actual_entries=actual_entries,
        mismatches=mismatches,
        mismatch_unit="terms",
        findings=tuple(findings),
    )


# Column index of the passage text in the FTS5 table (title_text is 0).
TEXT_COLUMN = 1

# Highlighting runs FTS5's `highlight()` over a scratch copy of just the hits: TEMP tables of
# this connection (no other connection sees them, and writing them takes no lock on the
# database), with the index's columns and tokenizer, filled from the head-passage view the
# index is built from. Run on the index itself, `highlight()` evaluates the MATCH expression
# again for each row across every segment of the index, a cost that grows with the corpus
# (~210 µs a hit at 8k passages, ~325 µs at 56k); on the copy it is ~110 µs whatever the
# corpus (bench/highlight_cost.py). The marks are the same: the same engine, tokenizer, MATCH
# expression and row text (checked against the index's own in
# tests/retrieval/search/test_highlight_search.py).
HIGHLIGHT_TABLE = "lode_highlight_fts"
HIGHLIGHT_CONTENT = "lode_highlight_rows"


def _scratch_highlight_tables(cursor: CursorWrapper) -> None:
    """The scratch tables, created once per connection, and empty: `highlight` empties them
    after use too, but a clean-up that a spent time budget interrupted leaves rows behind."""
    cursor.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {HIGHLIGHT_CONTENT}"
        "(id INTEGER PRIMARY KEY, title_text TEXT NOT NULL, text TEXT NOT NULL)"
    )
    cursor.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{HIGHLIGHT_TABLE} USING fts5(title_text, text, "
        f"content='{HIGHLIGHT_CONTENT}', content_rowid='id', tokenize='{TOKENIZER}')"
    )
    _empty_scratch_highlight_tables(cursor)


def _empty_scratch_highlight_tables(cursor: CursorWrapper) -> None:
    cursor.execute(f"INSERT INTO temp.{HIGHLIGHT_TABLE}({HIGHLIGHT_TABLE}) VALUES ('delete-all')")
    cursor.execute(f"DELETE FROM temp.{HIGHLIGHT_CONTENT}")


def highlight(query: ParsedQuery, passages: list[tuple[int, str]]) -> dict[int, list[Segment]]:
    """Highlight segments for `passages` ((passage id, passage text) of hits the lexical leg
    returned), from FTS5 `highlight()` with the same MATCH expression `search()` used, over
    a scratch copy of those passages' index rows (see `HIGHLIGHT_TABLE`).

    Markers are chosen per passage so they occur nowhere in its text (one statement: each
    row's markers come from a VALUES table joined on rowid). The output is parsed strictly
    and must add up to the passage text, else that passage gets one plain segment
    (`segments_or_plain`). A passage that is no longer a head passage, that the MATCH
    expression does not match, or longer than `HIGHLIGHT_MAX_CHARS`, is absent from the
    result. The copy is emptied again before returning: passage text never waits in a
    connection that the next request, maybe another user's, reuses.
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
    values = ", ".join(["(%s, %s, %s)"] * len(markers))
    params: list[object] = [x for pid, (s, e) in markers.items() for x in (pid, s, e)]
    ids = ", ".join(["%s"] * len(texts))
    with connection.cursor() as cursor:
        _scratch_highlight_tables(cursor)
        try:
            cursor.execute(
                f"INSERT INTO temp.{HIGHLIGHT_CONTENT}(id, title_text, text) "
                f"SELECT id, title_text, text FROM {HEAD_VIEW} WHERE id IN ({ids})",
                list(texts),
            )
            cursor.execute(
                f"INSERT INTO temp.{HIGHLIGHT_TABLE}(rowid, title_text, text) "
                f"SELECT id, title_text, text FROM temp.{HIGHLIGHT_CONTENT}"
            )
            cursor.execute(
                f"WITH m(id, s, e) AS (VALUES {values}) "
                f"SELECT {HIGHLIGHT_TABLE}.rowid, "
                f"highlight({HIGHLIGHT_TABLE}, {TEXT_COLUMN}, m.s, m.e) "
                f"FROM m JOIN temp.{HIGHLIGHT_TABLE} ON {HIGHLIGHT_TABLE}.rowid = m.id "
                f"WHERE {HIGHLIGHT_TABLE} MATCH %s",
                [*params, match_expression(query)],
            )
            rows = cursor.fetchall()
        finally:
            _empty_scratch_highlight_tables(cursor)
    return {
        pid: segments_or_plain(texts[pid], marked or "", *markers[pid])
        for pid, marked in rows
        if pid in texts
    }


# --- request time budget (lode_site/budget.py) -------------------------------------------

# The progress handler runs every this many virtual-machine instructions (tens of
# nanoseconds each): often enough that a statement stops within a millisecond or so of the
# deadline, rarely enough that the Python call costs little (bench/hostile_requests.py).
PROGRESS_INSTRUCTIONS = 10_000


def install_time_budget(connection: BaseDatabaseWrapper, budget: Budget) -> float | None:
    """Interrupt any statement on `connection` once `budget` has run out: a progress handler
    that returns true after the deadline makes SQLite abandon the statement
    (`sqlite3.OperationalError: interrupted`). It reads the deadline on every call, so it
    follows pauses and needs no refreshing (returns None)."""
    clock = budget.clock

    def past_deadline() -> bool:
        # As lean as possible: SQLite calls it throughout every statement of the request.
        return budget.deadline < clock() and not budget.released

    connection.connection.set_progress_handler(past_deadline, PROGRESS_INSTRUCTIONS)
    return None


def remove_time_budget(connection: BaseDatabaseWrapper) -> None:
    """Take the progress handler off again (the connection outlives the request)."""
    connection.connection.set_progress_handler(None, 0)


def is_time_budget_interrupt(exc: BaseException) -> bool:
    """Whether `exc` is SQLite abandoning a statement because the progress handler said so."""
    return "interrupted" in str(exc)
