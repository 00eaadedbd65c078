"""Database ids in URLs: one bounded integer type for page URLs and the API.

Every primary key is a `BigAutoField`, so a valid id is 1..2**63-1 on SQLite (INTEGER) and
PostgreSQL (bigint) alike. A number outside that range cannot name a row, and handing it to
the database fails in driver-specific ways (SQLite's OverflowError, PostgreSQL's "out of
range" error, Python's ValueError for a negative slice) — server errors instead of "not
found". So ids are checked where they enter:

- page URLs and API paths use the `<id:...>` path converter registered here: at most 19
  digits and at most `MAX_ID`, so anything else does not match the URL and is a 404;
- API parameters are typed `DbId` (ids) or `Offset` (a position in a list), which declare
  their bounds in the OpenAPI schema and answer 422 when they are out of range.

Import this module (or anything that imports it) before building URL patterns that use
`<id:...>`; Django refuses a converter registered twice, and Python imports a module once.
"""

from __future__ import annotations

from typing import Annotated

from django.urls import register_converter
from pydantic import Field

MAX_ID = 2**63 - 1  # the largest BigAutoField value on SQLite and PostgreSQL

DbId = Annotated[int, Field(ge=1, le=MAX_ID, description="A database id (1 to 2**63-1).")]
Offset = Annotated[
    int, Field(ge=0, le=MAX_ID, description="How many items to skip (0 to 2**63-1).")
]


class IdConverter:
    """`<id:name>`: a positive database id; out-of-range numbers do not match (a 404)."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if not 1 <= number <= MAX_ID:
            # Django treats a ValueError here as "this pattern does not match".
            raise ValueError(f"{value} is not a database id")
        return number

    def to_url(self, value: int | str) -> str:
        return str(int(value))


register_converter(IdConverter, "id")


def parse_id(value: str) -> int | None:
    """`value` as a database id, or None when it is not one (not 1–19 digits, or out of
    range): for ids that arrive in query strings and form fields."""
    value = value.strip()
    if not value.isascii() or not value.isdigit() or len(value) > 19:
        return None
    number = int(value)
    return number if 1 <= number <= MAX_ID else None
