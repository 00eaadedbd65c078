"""How a word list is written: one string of words, split on whitespace."""

from __future__ import annotations


def word_set(text: str) -> frozenset[str]:
    """A word list written as one string (easier to read and extend than a list literal)."""
    return frozenset(text.split())
