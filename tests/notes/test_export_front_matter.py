"""Front matter lode writes reads back the same in lode and in a YAML reader (what Obsidian
uses); what Obsidian writes after a person edits properties reads back in lode too."""

from __future__ import annotations

import pytest

from notes.front_matter import FrontMatterError, render_front_matter, split_front_matter

AWKWARD = [
    'quote " and \\ backslash',
    "colon: and # hash and - dash",
    "line\nbreak\ttab",
    "\u2028 line separator \ufeff bom \x85 nel \x7f del",
    "emoji 🦫 and accents é",
    "[not a list]",
    "---",
    "'single'",
]


@pytest.mark.parametrize("text", AWKWARD)
def test_strings_read_back_exactly_in_lode_and_yaml(text: str) -> None:
    yaml = pytest.importorskip("yaml")
    block = render_front_matter({"title": text, "tags": [text, "b"], "version": 3})
    fields, body = split_front_matter(block + "body")
    assert fields == {"title": text, "tags": [text, "b"], "version": 3}
    assert body == "body"
    assert yaml.safe_load(block.strip().strip("-")) == fields


def test_obsidian_style_properties_are_read() -> None:
    text = (
        "---\r\n"
        "lode_id: 12\r\n"
        "title: Plain title # a comment\r\n"
        "tags:\r\n"
        "  - ops\r\n"
        "  - 'it''s'\r\n"
        "aliases: [one, two]\r\n"
        "---\r\n"
        "---\nbody keeps its own rule\r\n"
    )
    fields, body = split_front_matter(text)
    assert fields == {
        "lode_id": 12,
        "title": "Plain title",
        "tags": ["ops", "it's"],
        "aliases": ["one", "two"],
    }
    assert body == "---\nbody keeps its own rule\r\n"


def test_no_front_matter_and_bad_front_matter() -> None:
    assert split_front_matter("# just markdown\n---\n") is None
    assert split_front_matter("") is None
    with pytest.raises(FrontMatterError, match="never closes"):
        split_front_matter("---\ntitle: x\n")
    with pytest.raises(FrontMatterError, match="line 2"):
        split_front_matter("---\nnot a field\n---\n")
    with pytest.raises(FrontMatterError, match="twice"):
        split_front_matter("---\na: 1\na: 2\n---\n")
    with pytest.raises(FrontMatterError, match="characters"):
        split_front_matter("---\n" + "a: 1\n" * 20_000 + "---\n")
