"""Words that frame a question: wh-words, auxiliaries, *how* degrees, openers and framing.

All written for lode. Lists that look alike stay apart where their callers read them
differently (said beside each); merging them would move the figures measured with them.
"""

from __future__ import annotations

from retrieval.words.word_set import word_set

# The wh-words: where a question's type is read from (retrieval.plan.question),
# and words a question's named things never are.
WH_WORDS = word_set("what which who whom whose when where why how")

# Words between a wh-word and its noun phrase that are not the phrase ("what is the …"):
# question typing, and the answer shape's restating rule.
AUXILIARIES = word_set(
    "is are was were be been am do does did done has have had can could will would shall "
    "should may might must the a an of our my your their its this that these those we i you "
    "they he she it there s"
)
# Words that end a noun phrase ("how many retries *does* …", "schools *in* Nigeria"): question
# typing.
PHRASE_END_WORDS = AUXILIARIES | word_set(
    "in on at by for from with to into over under about per during after before since until "
    "than and or but if when where which who that get got use used run ran own owns runs "
    "handle handles uses need needs hold holds store stores contain contains cause causes "
    "listen listens serve serves live lives mean means go goes come comes take takes make makes "
    "happen happens work works say says show shows keep keeps cover covers support supports"
)
# "what *did* we decide": an auxiliary right after the wh-word means a verb follows, not the
# thing asked for (question typing).
DO_AUXILIARIES = word_set(
    "do does did can could will would shall should may might must have has had"
)
# "how do/can/should I …": the auxiliaries and askers of a procedure question (question
# typing). Narrower than `DO_AUXILIARIES`: "how will we …" asks about the future, not a method.
PROCEDURE_AUXILIARIES = word_set("do does can could should would shall must")
ASKERS = word_set("i we you one someone anyone")

# The word after "how" that makes a question ask for a number ("how *many*", "how *long*") or
# a time ("how *often*"): question typing. Not `HOW_DEGREE`: that one holds "late" and "early"
# and lacks "tall", "heavy" …, and the relevance weights were fitted with these two.
HOW_NUMBER = word_set("many much long old big large far fast tall heavy wide deep high")
HOW_TIME = word_set("often soon frequently")
# Words that only complete the question after "how" ("how long are backups kept?"): the
# answerability decision drops them, since asking the corpus to contain "long" would abstain
# on answerable questions.
HOW_DEGREE = word_set("long often far old big large many much soon late early fast")

# A question that names deciding asks what was decided ("what did we decide about backups"):
# question typing (the intent), and the word is the intent, not the topic.
DECISION_QUESTION_WORDS = word_set(
    "decide decided decides deciding decision decisions agree agreed agreement choose chose "
    "chosen choice conclude concluded conclusion settle settled resolve resolved resolution "
    "outcome outcomes verdict"
)

# A question that starts with one of these asks yes or no: restating the question (with a
# "not", or a qualification) is how such a question is answered (the answer shape).
YES_NO_OPENERS = word_set(
    "is are was were am do does did can could should would will shall has have had may might "
    "must isn aren wasn weren don doesn didn can't won"
)

# Words a question's first capitalised run may start with only because they open the
# sentence ("Who", "What", "The"): dropped before reading the run as a name (the graph rule,
# retrieval.plan.graph_discipline).
SENTENCE_OPENERS = frozenset(
    (
        *("who", "what", "when", "where", "which", "why", "how", "is", "are", "does", "do"),
        *("did", "can", "should", "could", "would", "will", "if", "the", "a", "an", "in"),
        *("on", "at", "for", "of", "to"),
    )
)

# Words that point back at something named before ("does *it* still run?"): a question with
# one and too few content words asks which thing is meant (the answerability decision).
DEICTIC_WORDS = ("it", "this", "that", "these", "those", "them", "they", "there", "here", "one")

# Words that frame a question without naming its topic, so the evidence need not contain
# them: the answerability decision's coverage rule and the extractive answerer. A note that
# answers "When do the nightly backups run now?" says "the nightly backups moved to 03:30
# UTC": it never says "now". Matched as typed (case-folded), never by stem: "currently" is
# here, "current" (a current smoker) is a topic. By class:
QUESTION_FRAMING_VERBS = word_set(
    # Speech and decision verbs: how the asker met a fact (a meeting decided it, a colleague
    # said it), not the fact; a decision note lists "Decisions" or just the outcome. They
    # still say which kind of passage is wanted, so the decision counts them towards a
    # question being specific enough ("What did we decide about backups?" vs "backups?").
    "decide decides decided deciding decision decisions agree agrees agreed say says said "
    "mention mentions mentioned discuss discusses discussed plan plans planned planning "
    "conclude concluded"
)
QUESTION_FRAME_WORDS = QUESTION_FRAMING_VERBS | word_set(
    # Time and aspect: when the asker stands, not what they ask about. Notes are dated by
    # their versions; they rarely say "now" or "these days" about their own facts.
    "now currently nowadays presently still today tonight yesterday tomorrow ever anymore "
    "already yet recently lately usually normally typically generally "
    # Hedges and intensifiers: the asker's tone.
    "actually really exactly basically precisely even quite "
    # The asker's pronouns `QUESTION_FILLER_WORDS` lacks.
    "ours myself ourselves "
    # What is left of a negated auxiliary ("didn't" → didn, t): the negation matters to the
    # answer, but no note says "didn" ("Why didn't we go with Auth0?"). Not "won" or "can":
    # "won" is also a topic (who won the final?).
    "didn doesn don isn aren wasn weren haven hasn hadn wouldn shouldn couldn mustn needn "
    # Generic verbs of taking place or running, like "work" and "happen" there: "when does the
    # backup run?" asks about the backup.
    "run runs running ran occur occurs occurred "
    # Prepositions and conjunctions the other lists lack: they join a question's topics.
    "during after before while until since within without between through via across per "
    "upon onto among whether"
)
