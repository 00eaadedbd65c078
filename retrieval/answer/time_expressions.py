"""Time expressions in a claim's text: the one place lode's answer rules read them.

Two questions are asked of a claim, each a pattern built from the same pieces:

* `TIME_RE` — does it carry a time cue at all (a clock time, "5pm", a year, an ISO date, a
  quarter, a duration like "30s" or "2 hrs", cron)? The relevance scorer's answer types
  (`retrieval.answer.relevance.claim_types.answer_types`) and the *when* rule of
  `retrieval.answer.answer_shape` use it.
* `OCCASION_RE` — does it name one occasion (a date written any of the usual ways, a clock
  time, a weekday, or today / tonight / tomorrow / yesterday)? A *when … last / next* question
  needs one; "yearly, in January" says only how often (`answer_shape.only_schedule`).

Lexical cues, not a date parser: they decide whether a claim has the shape of an answer, never
what date it means. dateparser (installed, used by nothing here) is not used: its search finds
dates in ordinary words ("may", "second", "sun") and costs milliseconds per claim, while these
run on every claim the gate checks.
"""

from __future__ import annotations

import re

MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
ISO_DATE = r"\b\d{4}-\d{2}-\d{2}\b"
CLOCK_TIME = r"\b\d{1,2}:\d{2}\b"
_ORDINAL = r"(?:st|nd|rd|th)?"

# Any time cue: a clock time, an hour with am/pm, a year, an ISO date, a quarter, a number with
# a time unit, or cron.
TIME_RE = re.compile(
    rf"{CLOCK_TIME}|\b\d{{1,2}}\s?(?:am|pm)\b|\b(?:19|20)\d{{2}}\b|{ISO_DATE}"
    r"|\bq[1-4]\b|\b\d+\s?(?:ms|s|sec|secs|min|mins|h|hrs?|d|w)\b|\bcron\b",
    re.IGNORECASE,
)

# One occasion: an ISO date, a d/m(/y) date, "5th of March", "March 5", "March 2026", a clock
# time, a weekday, or a day relative to today.
OCCASION_RE = re.compile(
    rf"{ISO_DATE}|\b\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?\b"
    rf"|\b\d{{1,2}}{_ORDINAL}\s+(?:of\s+)?{MONTHS}\b|\b{MONTHS}\s+\d{{1,2}}{_ORDINAL}\b"
    rf"|\b{MONTHS}\s+\d{{4}}\b|{CLOCK_TIME}"
    r"|\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|\b(?:today|tonight|tomorrow|yesterday)\b",
    re.IGNORECASE,
)
