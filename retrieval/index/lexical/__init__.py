"""The lexical index over head passages: one interface, one backend module per vendor.

`backend()` picks the module for the default connection's vendor; nothing else in lode
branches on `connection.vendor`. Both backends take a `ParsedQuery` (never raw user text),
apply eligibility (the audience's spaces, not deleted, head only) inside the SQL before the
limit, and return
`LexicalHit`s ordered best first with ties broken by passage id.
"""

from __future__ import annotations

from types import ModuleType

from django.db import connection

from retrieval.index.lexical.base import LEXICAL_LIMIT, LexicalHealth, LexicalHit

__all__ = ["LEXICAL_LIMIT", "LexicalHealth", "LexicalHit", "backend"]


def backend() -> ModuleType:
    """The backend module for the current database vendor."""
    if connection.vendor == "sqlite":
        from retrieval.index.lexical import sqlite

        return sqlite
    if connection.vendor == "postgresql":
        from retrieval.index.lexical import postgresql

        return postgresql
    raise RuntimeError(f"lode has no lexical backend for {connection.vendor}")
