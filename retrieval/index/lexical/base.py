"""What both lexical backends share: the candidate limit, the shapes they return, and the
top-list-first way of applying eligibility (`top_first`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection

from retrieval.eligibility import Audience

# Candidates the lexical leg hands to fusion (DESIGN.md: lexical leg <= 256).
LEXICAL_LIMIT = 256
# BM25 column weights (title_text, text), the same on both backends so they rank alike.
# 3:1 measured best on SciFact train (bench/).
TITLE_WEIGHT = 3.0
TEXT_WEIGHT = 1.0

# The top-list-first path (`top_first`): how many matches past `limit` the first look takes,
# so a few ineligible ones (passages of deleted documents, another space's) do not send it
# deeper; the eligible share of a look below which it hands over to the joined query
# instead of looking deeper; how many looks at most, each this many times deeper.
TOP_MARGIN = 32
TOP_FIRST_MIN_SHARE = 0.5
TOP_FIRST_ROUNDS = 2
TOP_FIRST_GROWTH = 4

# An engine's own ranking of every passage matching the query, with no eligibility, best
# first, ties by passage id, cut at the given length: (passage id, score, the space of its
# document when it is a head passage of a live document, else None).
TopList = Callable[[int], list[tuple[int, float, int | None]]]


@dataclass(frozen=True, slots=True)
class LexicalHit:
    passage_id: int
    # What the number is: "bm25", higher is better on both backends (SQLite FTS5's bm25()
    # is lower-is-better and reported negated; PostgreSQL computes the same formula).
    score: float
    score_name: str


@dataclass(frozen=True, slots=True)
class LexicalHealth:
    """What one backend found comparing its index with the canonical head passages.

    The expected side is an independent reconstruction from canonical rows (SQLite: a
    temporary FTS5 index with the same tokenizer; PostgreSQL: every tsvector recomputed),
    never a second read of the index under test, so wrong tokens with unchanged row counts
    show up (../shared/seeds/loom-chain-of-custody.md). Used by `retrieval.index.health`.
    """

    engine: str  # "sqlite-fts5" or "postgresql-tsvector"
    canonical_rows: int  # head passages
    indexed_rows: int  # rows the index holds (-1: could not be read)
    integrity: str  # the engine's own check: "ok", "not available", or what it reported
    expected_digest: str  # SHA-256 over the reconstruction, in a fixed order
    actual_digest: str  # the same over the stored index ("" when it could not be read)
    expected_entries: int  # SQLite: token instances; PostgreSQL: lexemes
    actual_entries: int
    mismatches: int  # units (`mismatch_unit`) where the index disagrees with the reconstruction
    mismatch_unit: str  # "terms" (SQLite index lookups) or "passages" (PostgreSQL)
    findings: tuple[str, ...] = ()  # further problems in plain words (index unreadable, …)

    @property
    def problems(self) -> list[str]:
        """Everything wrong, in plain words; empty when the index agrees with its source."""
        problems: list[str] = []
        if 0 <= self.indexed_rows != self.canonical_rows:  # -1: unreadable, in findings
            problems.append(
                f"the lexical index holds {self.indexed_rows} rows for "
                f"{self.canonical_rows} head passages"
            )
        if self.integrity not in ("ok", "not available"):
            problems.append(f"the {self.engine} integrity check failed: {self.integrity}")
        if self.actual_digest and self.actual_digest != self.expected_digest:
            entries = (
                f"{self.actual_entries} entries where a rebuild from the canonical passages "
                f"holds {self.expected_entries}"
                if self.actual_entries != self.expected_entries
                else f"the same number of entries ({self.actual_entries}) but different ones"
            )
            problems.append(f"the lexical index holds {entries} (digests differ)")
        if self.mismatches:
            problems.append(
                f"{self.mismatches} {self.mismatch_unit} in the lexical index disagree with "
                "a rebuild from the canonical passages"
            )
        problems.extend(self.findings)
        return problems


def top_first(top_list: TopList, audience: Audience, limit: int) -> list[tuple[int, float]] | None:
    """The lexical leg without document filters, from the engine's own top list: the
    eligible rows of it in its order, or None when the backend's joined query should answer.

    The joined query looks up every match's passage and document row before it sorts: a
    SciFact claim matches ~40% of all passages, so that is most of the leg's cost
    (bench/README.md, "Hybrid ÷ floor"). Here the engine ranks its matches alone (what the
    benchmark floor runs) and only the top `limit + TOP_MARGIN` are looked up. Exact: both
    orders are (score, passage id) over the same matches and a passage's score does not
    depend on who asks, so the eligible rows of the top list, in its order, are the first of
    all eligible rows. When fewer than `limit` of them are eligible and the engine had more
    matches, it looks deeper, or hands over when most of the list was ineligible (an
    audience that sees a small part of the index is better served by the joined query than
    by ever deeper looks).
    """
    if not audience.space_ids:
        return []  # no space, nothing eligible (the joined query's `1 = 0`)
    wanted = limit + TOP_MARGIN
    for _ in range(TOP_FIRST_ROUNDS):
        rows = top_list(wanted)
        if not rows:
            return []
        kept = [(pid, score) for pid, score, space in rows if space in audience.space_ids]
        if len(kept) >= limit or len(rows) < wanted:
            return kept[:limit]
        if len(kept) < TOP_FIRST_MIN_SHARE * len(rows):
            return None
        wanted *= TOP_FIRST_GROWTH
    return None


def with_spaces(rows: list[tuple[int, float]]) -> list[tuple[int, float, int | None]]:
    """A top list's rows with the space of each live head passage (None for the rest)."""
    spaces = live_head_spaces([row[0] for row in rows])
    return [(pid, score, spaces.get(pid)) for pid, score in rows]


# Ids per statement: SQLite's bound-parameter limit, with room to spare.
LOOKUP_BATCH = 900


def live_head_spaces(passage_ids: list[int]) -> dict[int, int]:
    """The space of each of these passages that is a head passage of a live document, by
    primary key (one statement per `LOOKUP_BATCH` ids). Plain SQL both databases read
    alike; callers compare the spaces in Python: with them in SQL, SQLite walks every
    document of the spaces instead of looking the few hundred ids up (as in the search
    pipeline's `_canonical_rows`). Unordered: an ORDER BY would sort in a temporary B-tree."""
    spaces: dict[int, int] = {}
    with connection.cursor() as cursor:
        for start in range(0, len(passage_ids), LOOKUP_BATCH):
            part = passage_ids[start : start + LOOKUP_BATCH]
            cursor.execute(
                "SELECT p.id, d.space_id FROM retrieval_passage p "
                "JOIN notes_document d ON d.id = p.document_id "
                f"WHERE p.id IN ({', '.join(['%s'] * len(part))}) AND p.is_head "
                "AND d.deleted_at IS NULL",
                part,
            )
            spaces.update(cursor.fetchall())
    return spaces
