"""Stop words: words that carry no topic, one list per job.

The lists differ on purpose: each was tuned where it is used, and merging any two would change
what a stage does (and the figures measured with it).
"""

from __future__ import annotations

from retrieval.words.question_words import QUESTION_FRAME_WORDS
from retrieval.words.word_set import word_set

# Search (retrieval.query): dropped from the optional (OR-ed) terms when the query has other
# words — they match nearly every passage and only cost time; kept when they are all the query
# has. Also the reranker's non-content words and, with `QUESTION_FILLER_WORDS`, the
# answerability decision's. Source: written for lode.
QUERY_STOPWORDS = word_set(
    "a an and are as at be but by for from has have in into is it its of on or that the their "
    "then there these they this to was were will with"
)

# The gate (retrieval.answer.gate): the only words coupling may ignore, articles and forms of
# "to be". Deliberately minimal — every word left out makes coupling stricter (the fail-closed
# direction). Numbers, negations and quantifiers ("no", "all", "off", "most") are never here.
GLUE_WORDS = word_set("a an the be am is are was were been being")

# The extractive answerer (retrieval.answer.answerers): words that say nothing about the topic
# of a question, matched as typed and folded (`fold`) like every other token. Wider than
# `QUERY_STOPWORDS`: a sentence is picked by the question's *topic* words.
EXTRACTIVE_STOPWORDS = word_set(
    "a an the of to in on at by for from with about into over under as and or but if then "
    "than so not no nor is are was were be been being am do does did done doing has have "
    "had having can could should would will shall may might must what which who whom "
    "whose when where why how i me my we us our you your he him his she her it its they "
    "them their this that these those there here any some all each every tell me please "
    "explain describe list give show know say said according note notes"
)

# The answerability decision (retrieval.answer.decision): question words, pronouns and generic
# verbs ("fix", "work", "mean" …), on top of `QUERY_STOPWORDS`; what is left are the content
# words a question must have to be specific enough to retrieve on.
QUESTION_FILLER_WORDS = word_set(
    "what whats which who whom whose when where why how is are am do does did done can could "
    "would should shall may might must about any some anything something please tell me my "
    "mine i im ive you your yours we our us he him his she her hers they them their theirs "
    "it its this that these those there here one ones thing things stuff again also just "
    "so than too very more most much many not no yes if else like get got give know say "
    "said show explain describe mean means meant happen happened happens work works working "
    "worked fix fixed fixing do doing go going make use used using need needs want help "
    "problem issue way s t ll re ve d"
)

# The relevance scorer (retrieval.answer.relevance): words that carry no topic in a question,
# beyond the answerer's and the decision's lists: time-of-asking fillers ("now", "currently",
# "still") that a note never repeats, and the prepositions those lists lack ("during a
# failover": the topic is the failover). Not `QUESTION_FRAME_WORDS`: it holds "current" and
# "today's", and the fitted weights were measured with this list.
RELEVANCE_FILLER_WORDS = word_set(
    "now currently current still yet already nowadays today's actually really exactly "
    "ok okay hey hi guys again anymore lately recently "
    "during between within via per across through among since until while"
)

# The clarifying choices (retrieval.answer.decision): a word a choice may suggest must carry a
# topic: not a question's glue, filler or framing, nor a function word the extractive answerer
# ignores ("every", "after" and "then" were offered as choices).
SUGGESTION_STOPWORDS = (
    QUERY_STOPWORDS | QUESTION_FILLER_WORDS | EXTRACTIVE_STOPWORDS | QUESTION_FRAME_WORDS
)
