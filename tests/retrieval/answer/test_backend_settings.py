"""Backends named by settings (retrieval/index/backend_paths.py): `LODE_ANSWERER`,
`LODE_ENTAILMENT` and `LODE_LEXICAL_BACKEND` take the short names they always took or the
dotted import path of a class, factory or module of one's own, which lode then uses; a name
that does not import or lacks what the backend's Protocol asks for fails the start-up checks
(retrieval/web/backend_checks.py) with the setting and the reason."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection

from notes import services
from retrieval.answer.answerers import ChatAnswerer, ExtractiveAnswerer, get_answerer
from retrieval.answer.ask import ask
from retrieval.answer.egress import EgressPlan
from retrieval.answer.entailment import (
    CrossEncoderEntailment,
    LLMJudge,
    get_entailment_scorer,
)
from retrieval.answer.types import AnswerDraft, Claim, EvidencePack, Support
from retrieval.eligibility import audience_for
from retrieval.index import lexical
from retrieval.index.backend_paths import BackendPathError
from retrieval.models import AskTrace
from retrieval.query import parse
from tests import lexical_recording_backend

HERE = __name__
RUNBOOK = "# Deploy runbook\n\nRotate the staging certs with certbot before Friday.\n"
SPAN = "Rotate the staging certs with certbot before Friday."


class FirstPassageAnswerer:
    """An answerer of one's own: quotes the pack's first item whole."""

    name = "first-passage"
    remote = False

    def answer(
        self, question: str, pack: EvidencePack, *, user: Any, egress: EgressPlan | None = None
    ) -> AnswerDraft:
        from notes.models import Version

        first = pack.items[0]
        body = Version.objects.get(pk=first.version_id).body
        return AnswerDraft(
            answerer=self.name,
            claims=[Claim(text=SPAN, support=(Support(first.version_id, SPAN),))],
            sent_versions={first.version_id: body},
        )


class NotAnAnswerer:
    """Has a name but no `answer` method."""

    name = "not-an-answerer"
    remote = False


class FixedScorer:
    """An entailment scorer of one's own, built with the user who asked."""

    name = "fixed"
    remote = False

    def __init__(self, *, user: Any = None):
        self.user = user

    def score(self, premise: str, hypothesis: str) -> float:
        return 1.0


def check_errors(check_id: str) -> list[str]:
    return [str(message.msg) for message in run_checks() if message.id == check_id]


# --- the answerer ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_answerer_class_named_by_the_setting_answers_the_ask(alice, settings) -> None:
    settings.LODE_ANSWERER = f"{HERE}.FirstPassageAnswerer"
    runbook = services.note_create(owner=alice, title="Deploy runbook", body=RUNBOOK)
    outcome = ask(user=alice, question="When do I rotate the staging certs?", mode="lexical")
    assert outcome.answerer == "first-passage"
    assert [c.text for c in outcome.claims] == [SPAN]
    assert outcome.claims[0].support[0].version_id == runbook.head_id
    assert AskTrace.objects.get(pk=outcome.trace_id).answerer == "first-passage"
    assert check_errors("lode.E003") == []


def test_the_short_answerer_names_keep_their_meaning(settings) -> None:
    settings.LODE_LLM_BASE_URL = ""
    settings.LODE_ANSWERER = "auto"
    assert isinstance(get_answerer(), ExtractiveAnswerer)
    settings.LODE_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    assert isinstance(get_answerer(), ChatAnswerer)
    settings.LODE_ANSWERER = "extractive"
    assert isinstance(get_answerer(), ExtractiveAnswerer)
    settings.LODE_ANSWERER = "chat"
    assert isinstance(get_answerer(), ChatAnswerer)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (f"{HERE}.NoSuchAnswerer", "does not import"),
        ("no_such_package.Answerer", "does not import"),
        (f"{HERE}.NotAnAnswerer", "NotAnAnswerer lacks answer"),
        ("gpt", "unknown answerer backend; use one of chat, extractive or a dotted import path"),
    ],
)
def test_a_bad_answerer_setting_fails_the_start_up_check(settings, value, reason) -> None:
    settings.LODE_ANSWERER = value
    [message] = check_errors("lode.E003")
    assert message.startswith(f"LODE_ANSWERER={value!r}") and reason in message
    with pytest.raises(BackendPathError, match=reason):
        get_answerer()


def test_manage_py_check_stops_on_a_bad_answerer_path(settings) -> None:
    settings.LODE_ANSWERER = f"{HERE}.NoSuchAnswerer"
    with pytest.raises(SystemCheckError, match=r"lode\.E003.*LODE_ANSWERER="):
        call_command("check")


# --- the entailment scorer -------------------------------------------------------------------


def test_an_entailment_scorer_named_by_the_setting_is_built_for_the_asker(settings) -> None:
    settings.LODE_ENTAILMENT = f"{HERE}.FixedScorer"
    asker = object()
    scorer = get_entailment_scorer(user=asker)
    assert isinstance(scorer, FixedScorer) and scorer.user is asker
    assert check_errors("lode.E004") == []


def test_the_short_entailment_names_keep_their_meaning(settings) -> None:
    assert get_entailment_scorer("none") is None
    assert isinstance(get_entailment_scorer("cross-encoder"), CrossEncoderEntailment)
    judge = get_entailment_scorer("llm-judge", user=None)
    assert isinstance(judge, LLMJudge) and judge.remote


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (f"{HERE}.NoSuchScorer", "does not import"),
        (f"{HERE}.NotAnAnswerer", "NotAnAnswerer cannot be called with user="),
        (f"{HERE}.FirstPassageAnswerer", "cannot be called with user="),
        ("cross_encoder", "unknown entailment backend; use one of cross-encoder, llm-judge or"),
    ],
)
def test_a_bad_entailment_setting_fails_the_start_up_check(settings, value, reason) -> None:
    settings.LODE_ENTAILMENT = value
    [message] = check_errors("lode.E004")
    assert message.startswith(f"LODE_ENTAILMENT={value!r}") and reason in message


# --- the lexical backend ---------------------------------------------------------------------


def test_the_lexical_backend_follows_the_database_vendor_by_default(settings) -> None:
    settings.LODE_LEXICAL_BACKEND = ""
    assert lexical.backend().__name__ == f"retrieval.index.lexical.{connection.vendor}"
    settings.LODE_LEXICAL_BACKEND = f"retrieval.index.lexical.{connection.vendor}"
    assert lexical.backend().__name__ == f"retrieval.index.lexical.{connection.vendor}"
    assert check_errors("lode.E005") == []


@pytest.mark.django_db
def test_a_lexical_backend_module_named_by_the_setting_is_searched(alice, settings) -> None:
    settings.LODE_LEXICAL_BACKEND = "tests.lexical_recording_backend"
    services.note_create(owner=alice, title="Deploy runbook", body=RUNBOOK)
    lexical_recording_backend.searches.clear()
    query = parse("certbot")
    hits = lexical.backend().search(query, audience=audience_for(alice.id))
    assert lexical_recording_backend.searches == [query]
    assert len(hits) == 1
    assert check_errors("lode.E005") == []


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("retrieval.index.lexical.mysql", "does not import"),
        ("retrieval.index.lexical.base", "retrieval.index.lexical.base lacks floor_search"),
    ],
)
def test_a_bad_lexical_backend_setting_fails_the_start_up_check(settings, value, reason) -> None:
    settings.LODE_LEXICAL_BACKEND = value
    [message] = check_errors("lode.E005")
    assert message.startswith(f"LODE_LEXICAL_BACKEND={value!r}") and reason in message
