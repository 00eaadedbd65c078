"""Words that show what a claim is: a step of a procedure, or a decision. Written for lode;
read by the relevance scorer's features (retrieval.answer.relevance.answer_types).
"""

from __future__ import annotations

from retrieval.words.word_set import word_set

# A step of a procedure starts with one of these verbs in the imperative ("Run …", "Stop
# writes …").
IMPERATIVE_VERBS = word_set(
    "add apply ask back build call change check clear click close configure confirm connect "
    "copy create delete deploy disable drain edit enable ensure fence fill find follow go grant "
    "install kill log make mark merge move note open pause pick point post promote pull push put "
    "read rebuild reboot reload remove rename repeat replace request reset restart restore "
    "resume revert revoke roll rotate run save scale select send set ssh start stop switch "
    "tag tell trigger turn type uncordon update upgrade upload use verify wait watch write "
    "cordon bump drop flush mount unmount snapshot sync take tail test"
)
# Where a decision is recorded (a heading holding one of these) …
DECISION_CONTEXT_WORDS = word_set(
    "decision decisions decided agreed agreement outcome outcomes resolution resolutions "
    "conclusion conclusions action actions adr"
)
# … or said (a cue in the sentence).
DECISION_CUE_WORDS = word_set(
    "decided decide decision agreed agree chose chosen choose going will moved moves move "
    "switched switch switching goes adopt adopted approved accepted rejected dropped keep kept "
    "stay stays instead"
)
