"""The lexical index over head passages: one interface, one backend module per vendor.

`backend()` returns the module `LODE_LEXICAL_BACKEND` names (a dotted module path), or by
default the module `VENDOR_BACKENDS` gives for the default connection's vendor; nothing else
in lode branches on `connection.vendor`. Both backends take a `ParsedQuery` (never raw user
text), apply eligibility (the audience's spaces, not deleted, head only) inside the SQL
before the limit, and return `LexicalHit`s ordered best first with ties broken by passage id.
A backend module provides every function in `BACKEND_FUNCTIONS`.
"""

from __future__ import annotations

from types import ModuleType

from django.conf import settings
from django.db import connection

from retrieval.index.backend_paths import BackendPathError, load_module, require_members
from retrieval.index.lexical.base import LEXICAL_LIMIT, LexicalHealth, LexicalHit

__all__ = ["LEXICAL_LIMIT", "LexicalHealth", "LexicalHit", "backend"]

# The backend module of each database vendor lode supports.
VENDOR_BACKENDS: dict[str, str] = {
    "sqlite": "retrieval.index.lexical.sqlite",
    "postgresql": "retrieval.index.lexical.postgresql",
}

# What search, highlighting, index health and the time budget call on a backend module.
BACKEND_FUNCTIONS = (
    "search",
    "floor_search",
    "highlight",
    "index_health",
    "indexed_row_count",
    "rebuild",
    "install_time_budget",
    "remove_time_budget",
    "is_time_budget_interrupt",
)


def backend_for(value: str, vendor: str) -> ModuleType:
    """The backend module `value` names (a dotted module path; empty: the vendor's own).
    Raises BackendPathError when it does not import or lacks a backend function."""
    if not value and vendor not in VENDOR_BACKENDS:
        raise BackendPathError(
            f"lode has no lexical backend for {vendor}; set LODE_LEXICAL_BACKEND to one"
        )
    module = load_module("LODE_LEXICAL_BACKEND", value or vendor, VENDOR_BACKENDS, "lexical")
    require_members("LODE_LEXICAL_BACKEND", value or vendor, module, BACKEND_FUNCTIONS)
    return module


def backend() -> ModuleType:
    """The backend module for the default connection."""
    return backend_for(settings.LODE_LEXICAL_BACKEND, connection.vendor)
