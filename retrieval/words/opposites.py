"""Pairs of words with opposite or neighbouring meanings, written for lode. Three tables for
three uses, kept apart: each is tuned to what its stage must not confuse."""

from __future__ import annotations

# The answer shape (retrieval.answer.answer_shape): pairs of words that name two different
# things of one kind: a near-topic question swaps one for the other ("… on my *old* running
# shoes?" against "*New* shoes … 62 km on them"; "… slow down *updates*?" against "slows
# *inserts* by 6%"). Compared as index stems. Pairs whose words often sit side by side in one
# answer about one thing are left out (start/end of a window, first/last of a list, read/write
# of a replica, next/previous).
CONTRAST_PAIRS: tuple[tuple[str, str], ...] = (
    ("old", "new"),
    ("primary", "secondary"),
    ("minimum", "maximum"),
    ("staging", "production"),
    ("insert", "update"),
    ("input", "output"),
    ("upload", "download"),
    ("inbound", "outbound"),
    ("ingress", "egress"),
    ("internal", "external"),
    ("public", "private"),
    ("weekday", "weekend"),
    ("daily", "weekly"),
    ("weekly", "monthly"),
    ("monthly", "yearly"),
    ("backup", "restore"),
    ("cpu", "memory"),
    ("memory", "disk"),
    ("cpu", "disk"),
)

# The answer shape: pairs of directions. A claim that says the other one refutes a statement
# to check or a keyword fragment ("DUSP4 decreases apoptosis." → "DUSP4 overexpression
# increased … apoptosis": SciFact's CONTRADICT evidence answers it), so they count only against
# a wh-question ("Which drug decreases apoptosis?").
DIRECTION_PAIRS: tuple[tuple[str, str], ...] = (
    ("increase", "decrease"),
    ("enable", "disable"),
    ("success", "failure"),
    ("upgrade", "downgrade"),
)

# The gate evaluation's coupling stress test (retrieval.answer.gate_eval): a word and the
# opposite it is swapped for to make a rationale sentence false (first match wins, in order).
ANTONYMS = {
    "increase": "decrease",
    "increases": "decreases",
    "increased": "decreased",
    "decreased": "increased",
    "reduced": "increased",
    "higher": "lower",
    "lower": "higher",
    "more": "less",
    "positive": "negative",
    "positively": "negatively",
}
