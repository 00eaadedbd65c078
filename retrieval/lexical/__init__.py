"""The lexical index over head passages: one interface, one backend module per vendor.

`backend()` picks the module for the default connection's vendor; nothing else in lode
branches on `connection.vendor`. Both backends take a `ParsedQuery` (never raw user text),
apply eligibility (owner, not deleted, head only) inside the SQL before the limit, and return
`LexicalHit`s ordered best first with ties broken by passage id.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from django.db import connection

# Candidates the lexical leg hands to fusion (DESIGN.md: lexical leg <= 256).
LEXICAL_LIMIT = 256


@dataclass(frozen=True, slots=True)
class LexicalHit:
    passage_id: int
    # What the number is: "bm25" (SQLite FTS5, lower is better, reported negated so that
    # higher is better) or "ts_rank_cd" (PostgreSQL, higher is better).
    score: float
    score_name: str


def backend(using: ModuleType | None = None) -> ModuleType:
    """The backend module for the current database vendor."""
    if connection.vendor == "sqlite":
        from retrieval.lexical import sqlite

        return sqlite
    if connection.vendor == "postgresql":
        from retrieval.lexical import postgresql

        return postgresql
    raise RuntimeError(f"lode has no lexical backend for {connection.vendor}")
