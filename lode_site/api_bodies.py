"""How the API reads JSON request bodies: depth-limited, and objects only.

Python's `json.loads` recurses once per nesting level, so a body such as 100,000 `[` raises
RecursionError (a server error) before any schema is consulted. `BoundedJSONParser`, the
API's parser (`lode_site/api.py`), scans the bytes first, without recursion, and refuses a
body nested deeper than `MAX_JSON_DEPTH` levels with `JsonBodyRefused`; the API answers
that with a 400 whose `detail` says what was wrong.

Every endpoint's body is a JSON object. Ninja's `Schema` also accepts any Python object by
reading its attributes (for ORM rows), so a JSON string "abc" would fill `title` from
`"abc".title()` and `[null, null]` would read as "no fields". `BodySchema`, the base of
every request-body schema, refuses anything but an object with a 422 that names the type
that arrived.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from django.http import HttpRequest
from ninja import Schema
from ninja.parser import Parser
from ninja.schema import DjangoGetter
from pydantic import ConfigDict, model_validator
from pydantic_core import PydanticCustomError

# Deeper than any body the API's schemas describe (the graph query is four levels deep),
# and far below the recursion limit of the parser and of pydantic.
MAX_JSON_DEPTH = 64

# A JSON string, escapes included; "unrolled" (no alternation per character), so a long
# string is skipped at the regex engine's speed.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# Openers to +1 and closers to -1 (as signed bytes), summed by `accumulate` in C.
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")

# Text the database can store: no NUL character (PostgreSQL's text cannot hold one). Every
# free-text field of a request and every text query parameter states it. (Lone surrogates,
# which UTF-8 cannot encode either, are refused with the body: `parse_json_body`.)
STORABLE_TEXT = r"^[^\x00]*$"
# The same, holding more than whitespace (the services strip text, then refuse "").
NOT_BLANK_TEXT = r"^\s*[^\s\x00][^\x00]*$"
# A `\uD800`-`\uDFFF` escape: half of a surrogate pair, or a lone surrogate.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")

_JSON_TYPES = {
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    list: "an array",
    type(None): "null",
}


class JsonBodyRefused(ValueError):
    """A request body the API will not parse; the message is the 400's `detail`."""


def json_depth(body: bytes) -> int:
    """How deeply `body`'s arrays and objects nest (0 for a scalar), counted without
    recursion. Brackets inside strings do not count."""
    if body.count(b"[") + body.count(b"{") == 0:
        return 0
    steps = _STRING.sub(b"", body).translate(None, _NOT_BRACKETS).translate(_STEPS)
    return max(accumulate(memoryview(steps).cast("b")), default=0)


def parse_json_body(body: bytes) -> Any:
    """`body` parsed as JSON, or `JsonBodyRefused` saying why not (not UTF-8 JSON, nested
    deeper than `MAX_JSON_DEPTH`, or a string with a lone surrogate)."""
    if body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH:
        depth = json_depth(body)
        if depth > MAX_JSON_DEPTH:
            raise JsonBodyRefused(
                f"The request body nests arrays and objects {depth} levels deep; "
                f"the API reads at most {MAX_JSON_DEPTH}."
            )
    try:
        value = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise JsonBodyRefused(f"Cannot parse the request body as JSON: {exc}") from None
    if _SURROGATE_ESCAPE.search(body) and _holds_lone_surrogate(value):
        raise JsonBodyRefused(
            "The request body holds a lone surrogate escape (\\ud800 to \\udfff without its "
            "pair), which is not Unicode text."
        )
    return value


def _holds_lone_surrogate(value: Any) -> bool:
    """Whether a parsed JSON value has a string (or key) with an unpaired surrogate: such a
    string cannot be encoded as UTF-8, so no database or index can store it."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class BoundedJSONParser(Parser):
    """Ninja's JSON parser with `parse_json_body`'s depth limit."""

    def parse_body(self, request: HttpRequest) -> Any:
        return parse_json_body(request.body)


def json_type_name(value: object) -> str:
    """How a JSON value's type is called in an error message ("a string", "an array"…)."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


def integral_floats_as_ints(value: Any) -> Any:
    """JSON Schema counts `516.0` as an integer; strict pydantic does not, so whole floats
    become ints (request bodies have no float fields)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [integral_floats_as_ints(item) for item in value]
    if isinstance(value, dict):
        return {key: integral_floats_as_ints(item) for key, item in value.items()}
    return value


class BodySchema(Schema):
    """The base of request-body schemas: the body must be a JSON object, and each field of
    the JSON type its schema declares — strict, so `0` is not `false` and `"1"` is not `1`,
    as the OpenAPI schema says (422 otherwise)."""

    # Patterns are matched by Python's `re`, as schemathesis and Python clients read them
    # (`\s` is `str.isspace`, which is what the services' `strip()` removes).
    model_config = ConfigDict(strict=True, regex_engine="python-re")

    @model_validator(mode="before")
    @classmethod
    def _json_object_only(cls, data: Any) -> Any:
        # Ninja's own validator has already wrapped the value for attribute access.
        value = data._obj if isinstance(data, DjangoGetter) else data
        if not isinstance(value, dict):
            raise PydanticCustomError(
                "json_object",
                "The request body must be a JSON object, not {got}.",
                {"got": json_type_name(value)},
            )
        return integral_floats_as_ints(value)
