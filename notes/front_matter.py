"""Front matter: the `---` block of `key: value` lines at the top of a Markdown file, as
Obsidian, Jekyll and Hugo read it.

lode writes a small, strict subset of YAML that every YAML reader parses the same way:
one `key: value` line per field, strings double-quoted with JSON's escapes (a YAML
double-quoted scalar accepts them all), whole numbers bare, lists in flow form
(`["a", "b"]`). Reading accepts that subset and what Obsidian writes when a person edits
the properties (plain and single-quoted scalars, block lists of `- item` lines), so a file
touched in Obsidian still reads back; anything else is a `FrontMatterError` naming the line.

The body is everything after the closing `---` line, byte for byte: `split_front_matter`
never strips or re-encodes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

DELIMITER = "---"
# Bounds on a block lode reads: a front matter larger than this is not a note's properties.
MAX_FRONT_MATTER_CHARS = 64_000
MAX_FIELDS = 200

_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+(.*))?$")
_INTEGER = re.compile(r"^-?[0-9]+$")
# Characters a YAML double-quoted scalar may not hold raw: outside YAML's "printable" set,
# or line breaks a reader folds into a space (NEL, the Unicode line and paragraph
# separators). JSON escapes C0 controls itself; these are escaped here.
_UNPRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")

FrontMatterValue = str | int | list[str]


class FrontMatterError(ValueError):
    """The front matter cannot be read; the message names the line and what is wrong."""


def quote(text: str) -> str:
    """`text` as a double-quoted scalar that YAML and JSON both read back as `text`."""
    encoded = json.dumps(text, ensure_ascii=False)
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)


def render_front_matter(fields: Mapping[str, FrontMatterValue]) -> str:
    """The front matter block for `fields`, in their order, ending with a newline."""
    lines = [DELIMITER]
    for key, value in fields.items():
        if not _KEY.match(f"{key}:"):
            raise ValueError(f"front matter key {key!r} is not a plain name")
        if isinstance(value, bool) or not isinstance(value, (str, int, list)):
            raise TypeError(f"front matter value for {key!r} must be a string, int or list")
        if isinstance(value, int):
            rendered = str(value)
        elif isinstance(value, str):
            rendered = quote(value)
        else:
            rendered = "[" + ", ".join(quote(str(item)) for item in value) + "]"
        lines.append(f"{key}: {rendered}")
    lines.append(DELIMITER)
    return "\n".join(lines) + "\n"


def split_front_matter(text: str) -> tuple[dict[str, FrontMatterValue], str] | None:
    """The fields and the body of `text`, or None when it does not open with front matter.

    The body starts right after the closing `---` line's newline; a file ending at that
    line has an empty body. Raises `FrontMatterError` for a block that opens and never
    closes, is too large, or holds a line this reader does not understand.
    """
    first_end = text.find("\n")
    if first_end < 0 or text[:first_end].rstrip("\r") != DELIMITER:
        return None
    position = first_end + 1
    lines: list[tuple[int, str]] = []
    number = 1
    while True:
        end = text.find("\n", position)
        line = text[position:] if end < 0 else text[position:end]
        number += 1
        if line.rstrip("\r") == DELIMITER:
            body = "" if end < 0 else text[end + 1 :]
            return parse_fields(lines), body
        if end < 0:
            raise FrontMatterError("the front matter opened with --- never closes")
        if end > MAX_FRONT_MATTER_CHARS:
            raise FrontMatterError(
                f"the front matter is over {MAX_FRONT_MATTER_CHARS:,} characters"
            )
        lines.append((number, line.rstrip("\r")))
        position = end + 1


def parse_fields(lines: list[tuple[int, str]]) -> dict[str, FrontMatterValue]:
    """The fields of a front matter block's lines (each with its line number)."""
    fields: dict[str, FrontMatterValue] = {}
    current_list: list[str] | None = None
    for number, line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if line[:1] in (" ", "\t", "-") and stripped.startswith("-"):
            if current_list is None:
                raise FrontMatterError(f"line {number}: a list item outside a list")
            current_list.append(str(_scalar(stripped[1:].strip(), number)))
            continue
        match = _KEY.match(line)
        if match is None:
            raise FrontMatterError(f"line {number}: not a `key: value` line")
        key, raw = match.group(1), (match.group(2) or "").strip()
        if key in fields:
            raise FrontMatterError(f"line {number}: {key} appears twice")
        if len(fields) >= MAX_FIELDS:
            raise FrontMatterError(f"more than {MAX_FIELDS} fields")
        if not raw:
            current_list = []
            fields[key] = current_list
            continue
        current_list = None
        fields[key] = _flow_list(raw, number) if raw.startswith("[") else _scalar(raw, number)
    return fields


def _flow_list(raw: str, number: int) -> list[str]:
    if not raw.endswith("]"):
        raise FrontMatterError(f"line {number}: a list that does not close with ]")
    try:
        items = json.loads(raw)
    except json.JSONDecodeError:
        # Obsidian's plain flow list: [a, b]
        inner = raw[1:-1].strip()
        return [str(_scalar(item.strip(), number)) for item in inner.split(",")] if inner else []
    if not isinstance(items, list):
        raise FrontMatterError(f"line {number}: not a list")
    return [item if isinstance(item, str) else json.dumps(item) for item in items]


def _scalar(raw: str, number: int) -> str | int:
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise FrontMatterError(
                f"line {number}: a double-quoted value that is not closed"
            ) from None
        if not isinstance(value, str):
            raise FrontMatterError(f"line {number}: not a string")
        return value
    if raw.startswith("'"):
        if len(raw) < 2 or not raw.endswith("'"):
            raise FrontMatterError(f"line {number}: a single-quoted value that is not closed")
        return raw[1:-1].replace("''", "'")
    if _INTEGER.match(raw):
        return int(raw)
    # A plain scalar; a comment after it (" #") is not part of the value.
    return raw.split(" #", 1)[0].rstrip()
