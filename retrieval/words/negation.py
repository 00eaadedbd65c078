"""Negation words and what the tokenizer leaves of "n't" contractions.

The gate's cues follow seed decision lode-w2y7; three unions serve three stages, kept apart
because each stage's figures were measured with its own.
"""

from __future__ import annotations

from retrieval.words.word_set import word_set

# Negation cues matched as whole tokens (the gate's cues; seed decision lode-w2y7).
NEGATION_WORDS = word_set("not no never cannot nothing nobody none neither nor without")
# What the tokenizer leaves of the common "n't" contractions ("isn't" → "isn" + "t").
NT_STEMS = word_set("isn aren wasn weren don doesn didn won wouldn shouldn couldn hasn haven hadn")
# Rarer contraction stems ("mustn't", "needn't", "ain't").
RARE_NT_STEMS = word_set("mustn needn ain")

# Evidence-pack dedup (retrieval.answer.pack): two near-identical passages differing in one of
# these tokens are both kept. Over-protecting only keeps a passage that could have been
# dropped, so this list is the widest: every stem and the stray "t".
NEGATION_TOKENS = NEGATION_WORDS | NT_STEMS | RARE_NT_STEMS | {"t"}
# Conflict detection (retrieval.answer.decision): these words mark a statement as negated and
# are never content words. Without `RARE_NT_STEMS`: "ain" (also an abbreviation, e.g. AIN in
# medicine) would stop being a content word and change which statements conflict; decision.py
# treats the stray "t" itself and reads contractions with `NT_SUFFIX_RE`
# (retrieval.text.negation).
CONFLICT_NEGATIONS = NEGATION_WORDS | NT_STEMS
