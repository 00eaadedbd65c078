"""Abbreviations a sentence does not end after ("e.g.", "Fig. 2"), written for lode."""

from __future__ import annotations

from retrieval.words.word_set import word_set

# The extractive answerer's sentence splitter (retrieval.text.sentences): a ". " after one of
# these (case-folded, trailing dot removed) or after a single letter (an initial) is no end.
ABBREVIATIONS = word_set(
    "e.g i.e etc vs al fig figs no nos dr mr mrs ms prof approx cf eq ref refs st jr sr inc ltd"
)
