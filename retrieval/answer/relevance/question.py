"""The question's typing, as the relevance scorer reads it: it lives in the planner
(`retrieval.plan.question`), which types every question before retrieval; this module names
the same objects for the scorer's callers (the fitting commands, the answerers)."""

from __future__ import annotations

from retrieval.plan.question import (
    FOCUS_KIND,
    INTENT_DECISION,
    INTENT_PROCEDURE,
    KIND_COUNT,
    KIND_FOCUS,
    KIND_PERSON,
    KIND_PLACE,
    KIND_REASON,
    KIND_TIME,
    TYPED_KINDS,
    QuestionProfile,
    named_things,
    question_intent,
    question_profile,
    stop_stems,
)

__all__ = [
    "FOCUS_KIND",
    "INTENT_DECISION",
    "INTENT_PROCEDURE",
    "KIND_COUNT",
    "KIND_FOCUS",
    "KIND_PERSON",
    "KIND_PLACE",
    "KIND_REASON",
    "KIND_TIME",
    "TYPED_KINDS",
    "QuestionProfile",
    "named_things",
    "question_intent",
    "question_profile",
    "stop_stems",
]
