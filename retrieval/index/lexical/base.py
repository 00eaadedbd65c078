"""What both lexical backends share: the candidate limit and the shapes they return."""

from __future__ import annotations

from dataclasses import dataclass

# Candidates the lexical leg hands to fusion (DESIGN.md: lexical leg <= 256).
LEXICAL_LIMIT = 256
# BM25 column weights (title_text, text), the same on both backends so they rank alike.
# 3:1 measured best on SciFact train (bench/).
TITLE_WEIGHT = 3.0
TEXT_WEIGHT = 1.0


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
