"""Values that are states ("enabled", "off"), written for lode: conflict detection
(retrieval.answer.decision) reads a one-word value from this list as a fact's value."""

from __future__ import annotations

from retrieval.words.word_set import word_set

STATE_WORDS = word_set(
    "true false yes no on off enabled disabled required optional allowed forbidden "
    "mandatory deprecated supported unsupported public private open closed"
)
