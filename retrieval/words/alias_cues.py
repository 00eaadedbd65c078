"""Words around an alias cue ("X, also called Y"), written for lode."""

from __future__ import annotations

from retrieval.words.word_set import word_set

# The meta layer's alias miner (retrieval.meta.extract): reading a name backwards from a cue,
# one of these (a sentence's verb, article or preposition) ends it.
ALIAS_NAME_BOUNDARY_WORDS = word_set(
    "a an the is are was were be we i you they it this that these those our my your their "
    "use uses used using call calls called named with for of in on at to by from and or "
    "also which who"
)
