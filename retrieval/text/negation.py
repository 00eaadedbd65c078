"""Negation cues in text: whole-token negation words and "n't" contractions read on the raw text
(the word lists are in `retrieval.words.negation`).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

from retrieval.text.tokens import nfc_tokens
from retrieval.words.negation import NEGATION_WORDS

# "n't" contractions, matched whole on the raw (NFC) text: the tokenizer would leave only a
# stem ("isn" + "t"), and stems collide with real words ("Don", "won"). ASCII apostrophe,
# typographic ’ (U+2019) and the modifier-letter ʼ (U+02BC) — an extra cue only ever blocks.
NT_CONTRACTION_RE = re.compile(r"\w+n['\u2019\u02bc]t\b", re.IGNORECASE)
# The looser form conflict detection searches for: the "n't" ending alone, case-sensitive, no
# word before it required. Kept apart from `NT_CONTRACTION_RE` so neither stage's figures move
# ("DON'T" is a gate cue but not a decision negation; a bare "n't" is the reverse).
NT_SUFFIX_RE = re.compile(r"n['\u2019\u02bc]t\b")
_APOSTROPHES_RE = re.compile(r"['\u2019\u02bc]")


def negation_cue_counts(text: str) -> Counter[str]:
    """How often each negation cue occurs in `text`: `NEGATION_WORDS` as whole tokens, plus
    "n't" contractions (case-folded, apostrophe written as ASCII, e.g. "isn't"). The gate
    compares these counts between a claim and its span."""
    nfc = unicodedata.normalize("NFC", text)
    counts = Counter(t for t in nfc_tokens(nfc) if t in NEGATION_WORDS)
    counts.update(
        _APOSTROPHES_RE.sub("'", m.group(0)).casefold() for m in NT_CONTRACTION_RE.finditer(nfc)
    )
    return counts


def negation_cues(text: str) -> frozenset[str]:
    """The negation cues present in `text` (see `negation_cue_counts`)."""
    return frozenset(negation_cue_counts(text))
