"""The section rule: a procedure question answered by a step of the section named for it.

"How do I promote the replica during a failover?" over "Run `pg_ctl promote` on the standby
host." under "Failover > Promote the replica": the step's own words never say "replica", so the
fitted scorer scores it low; a runbook section whose headings hold every word of the question is
the author saying what its steps are for. Narrow on purpose, since a near-topic question that
swaps one word ("... promote the replica in staging?") must not pass: every content word of the
question in the heading path itself (the title is shared by every section of a document), at
least `MIN_SECTION_WORDS` of them, and the claim a step. The gate records such a pass as
`section_match`; `SECTION_RULE_VERSION` is in the relevance manifest.
"""

from __future__ import annotations

from retrieval.answer.relevance.candidate import Candidate
from retrieval.answer.relevance.claim_types import is_step, stems
from retrieval.plan.question import INTENT_PROCEDURE, QuestionProfile

SECTION_RULE_VERSION = 1
MIN_SECTION_WORDS = 2


def section_answers(profile: QuestionProfile, candidate: Candidate) -> bool:
    """Whether `candidate` answers a procedure question as a step of the section named for
    it: the question asks how to do something, every one of its content words (at least
    `MIN_SECTION_WORDS`) is in the candidate's heading path, and the candidate reads as a
    step (`is_step`). Pure."""
    if profile.intent != INTENT_PROCEDURE or not candidate.heading_path:
        return False
    wanted = set(profile.content_stems)
    if len(wanted) < MIN_SECTION_WORDS or not is_step(candidate.text):
        return False
    return wanted <= stems(candidate.heading_path)
