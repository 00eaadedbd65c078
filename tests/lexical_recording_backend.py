"""A lexical backend module for tests, named by `LODE_LEXICAL_BACKEND`: it records each search
it is asked and hands every call to the database vendor's own backend."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from django.db import connection

from retrieval.index.lexical import BACKEND_FUNCTIONS, backend_for
from retrieval.query import ParsedQuery

searches: list[ParsedQuery] = []


def _vendor_backend() -> ModuleType:
    return backend_for("", connection.vendor)


def search(query: ParsedQuery, **kwargs: Any) -> Any:
    searches.append(query)
    return _vendor_backend().search(query, **kwargs)


def __getattr__(name: str) -> Any:
    if name in BACKEND_FUNCTIONS:
        return getattr(_vendor_backend(), name)
    raise AttributeError(name)
