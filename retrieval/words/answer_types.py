"""Words that show an answer's type — a number, a time, a person, a place, a reason — and the
nouns a *which/what X* question names to ask for one. Written for lode; lexical cues, not a
parse. Read by question typing and the claim's answer types (retrieval.answer.relevance) and by
the answer shape's rules (retrieval.answer.answer_shape).
"""

from __future__ import annotations

from retrieval.words.word_set import word_set

# A claim holds a number (relevance's answer types; the answer shape's counting).
NUMBER_WORDS = word_set(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty "
    "ninety hundred hundreds thousand thousands million millions billion dozen dozens half "
    "twice once single double triple quarter"
)
# A claim holds a time, date, day or duration (relevance's answer types).
TIME_WORDS = word_set(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday "
    "saturday sunday mon tue tues wed thu thurs fri sat sun daily nightly weekly monthly "
    "yearly annually hourly quarterly today tomorrow yesterday tonight midnight noon morning "
    "afternoon evening night weekend weekends weekday weekdays utc gmt cet cest pst pdt est edt "
    "ist am pm second seconds minute minutes hour hours day days week weeks month months year "
    "years ago every since until before after during sprint deadline schedule scheduled "
    "timestamp dawn"
)
# A claim names a person, a role or a team (relevance's answer types; the answer shape's *who*).
PERSON_WORDS = word_set(
    "owner owners owns owned lead leads manager managers engineer engineers admin admins "
    "administrator team teams oncall on-call sre sres dba maintainer maintainers author authors "
    "responsible assigned assignee contact ceo cto cfo vp director architect developer "
    "developers operator operators colleague colleagues person people someone who he she him "
    "her they them whoever chair rotation secondary primary vendor support"
)
# A claim names a place, host, path or store (relevance's answer types).
PLACE_WORDS = word_set(
    "room office floor building region zone datacenter datacentre dc rack server servers "
    "host hosts cluster directory folder bucket repository repo channel wiki drive site city "
    "country located location address path file files disk volume mount node machine "
    "namespace database endpoint url"
)
# A claim gives a cause (relevance's answer types).
REASON_WORDS = word_set(
    "because due since cause caused causes causing reason reasons result resulted results "
    "therefore thus hence so led leads owing why order root triggered trigger"
)

# The X of "what/which X" that asks for a number, a time, a person, a place or a reason
# (question typing; matched as typed or without a final "s").
COUNT_FOCUS_WORDS = word_set(
    "number percentage percent proportion fraction share amount ratio rate size count "
    "total port version timeout limit maximum minimum max min threshold capacity cost "
    "price duration length ttl retention frequency dose"
)
TIME_FOCUS_WORDS = word_set("time date day year month hour week deadline schedule")
PERSON_FOCUS_WORDS = word_set(
    "person people team owner engineer manager lead contact maintainer author"
)
PLACE_FOCUS_WORDS = word_set(
    "host hostname server directory folder path file url region zone bucket machine "
    "node room office location place site repo repository channel cluster database"
)
REASON_FOCUS_WORDS = word_set("reason cause")

# The answer shape's refinements of the lists above. Time words that only place something
# relative to another event ("after the upgrade"): not a time by themselves, so they do not
# answer *when*.
WEAK_TIME_WORDS = word_set(
    "after before since until during every ago sprint deadline schedule scheduled timestamp"
)
STRONG_TIME_WORDS = TIME_WORDS - WEAK_TIME_WORDS
# Words before a counted noun that count or mention it without naming it.
COUNTING_WORDS = NUMBER_WORDS | word_set("a an some several many most few all both each other")
# A question about what something costs: its nouns, and the verbs that count only after
# *how much*.
MONEY_NOUNS = word_set("price prices cost costs fee fees charge charges rent salary wage wages")
MONEY_VERBS = word_set("priced costing charged pay paid pays sell sells sold spend spent")
# A *when … last / next* question asks for one occasion; a schedule word says how often.
OCCASION_WORDS = word_set("last next")
SCHEDULE_WORDS = word_set(
    "daily nightly hourly weekly fortnightly monthly quarterly yearly annually annual biannual "
    "every each"
)
# Words among `PERSON_WORDS` that say someone is responsible without naming anyone: "owned by
# Mei" answers *who owns* through "Mei", and "owned" alone answers no *who* ("Who runs the
# drill while Mei is on holiday?" is not answered by "… owned by Mei": Mei is the question's).
RESPONSIBILITY_WORDS = word_set("owns owned responsible assigned")
# Capitalised words that are days or months, not names: "first Tuesday of each month" names no
# one. April, May, June and August are left out: they are first names as often as months.
CALENDAR_NAMES = word_set(
    "monday tuesday wednesday thursday friday saturday sunday january february march "
    "september october november december"
)
