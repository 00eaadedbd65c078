"""The answer page, its API and the public answer page at each tier (Answer, Best match —
check it, Not in your notes), with no score in the everyday view; and a stored answer whose
cited notes changed: the notice, the re-run it offers (a POST with CSRF, same question and
scope) and the API's `stale` flag."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from notes import services
from retrieval.models import AskTrace
from spaces import public
from spaces.models import Membership, Role, Space
from tests.factories import edit

pytestmark = pytest.mark.django_db

QUESTION = "When do I rotate the staging certs?"
NOTICE = "The notes cited here changed since this answer"


@pytest.fixture
def best_match_settings(settings):
    settings.LODE_RELEVANCE_THRESHOLD = 0.999999  # no claim passes the relevance step
    settings.LODE_BEST_MATCH_FLOOR = 0.000001
    return settings


def ask_page(client: Client, question: str = QUESTION, **extra: str) -> tuple[int, str]:
    response = client.post("/ask", {"question": question, "mode": "lexical", **extra})
    assert response.status_code == 303
    trace_id = int(re.search(r"/ask/(\d+)", response["Location"]).group(1))
    return trace_id, client.get(response["Location"]).content.decode()


def everyday(html: str) -> str:
    """The page without its Advanced disclosure."""
    return html.split('<details class="advanced answer-advanced">')[0]


def test_a_best_match_is_shown_to_check_never_as_an_answer(
    alice_client, alice_note, best_match_settings
):
    _, html = ask_page(alice_client)
    assert 'data-tier="best_match"' in html and 'data-decision="ABSTAIN_NO_EVIDENCE"' in html
    assert "Best match — check it" in html
    section = html.split('<section class="best-match">')[1].split("</section>")[0]
    assert "<mark>" in section and "Open verified evidence" in section
    link = re.search(r'class="evidence-link" href="([^"?]+)', section).group(1)
    assert html.count(f'href="{link}') == 1  # its passage is not listed again among the closest
    assert '<ol class="claims">' not in html  # not styled as an answer's claims
    assert "do not answer" not in html and "Answered" not in html
    assert "score" not in everyday(html)  # scores only behind Advanced
    assert "relevance score" in html.split('<details class="advanced answer-advanced">')[1]


def test_not_in_your_notes_shows_the_closest_passages(alice_client, alice_note, settings):
    settings.LODE_RELEVANCE_THRESHOLD = 0.999999
    settings.LODE_BEST_MATCH_FLOOR = 0.999998
    _, html = ask_page(alice_client)
    assert 'data-tier="not_in_notes"' in html and "Not in your notes" in html
    assert "Closest passages — these do not answer the question" in html
    assert "Best match" not in html and '<section class="best-match">' not in html
    assert "score" not in everyday(html)
    # What the notes do hold about the topic (the meta-knowledge catalog), linked.
    catalog = html.split('<section class="catalog"')[1].split("</section>")[0]
    assert f'href="/notes/{alice_note.pk}"' in catalog and "Deploy runbook" in catalog


def test_an_answer_or_best_match_shows_no_catalog(alice_client, alice_note, best_match_settings):
    _, html = ask_page(alice_client)
    assert '<section class="catalog"' not in html


def test_an_answer_leads_with_its_claims(alice_client, alice_note, settings):
    settings.LODE_RELEVANCE_THRESHOLD = 0.000001
    _, html = ask_page(alice_client)
    assert 'data-tier="answer"' in html and "Answered" in html
    assert '<ol class="claims">' in html and "Best match" not in html
    assert "score" not in everyday(html)


def test_the_api_carries_the_tier_and_the_best_match(alice_client, alice_note, best_match_settings):
    data = alice_client.post(
        "/api/ask", {"question": QUESTION, "mode": "lexical"}, content_type="application/json"
    ).json()
    assert data["tier"] == "best_match" and data["decision"] == "ABSTAIN_NO_EVIDENCE"
    assert data["claims"] == [] and data["best_match"]["support"][0]["quoted_span"]
    stored = alice_client.get(f"/api/ask/{data['trace_id']}").json()
    assert stored["tier"] == "best_match" and stored["best_match"] == data["best_match"]
    assert stored["stale"] is False


def test_a_stale_answer_says_so_and_offers_a_rerun_of_the_same_question(
    alice, alice_client, alice_note, settings
):
    settings.LODE_RELEVANCE_THRESHOLD = 0.000001
    trace_id, html = ask_page(alice_client)
    assert NOTICE not in html
    assert alice_client.get(f"/api/ask/{trace_id}").json()["stale"] is False
    edit(alice_note, alice, alice_note.head.body + "\nRenew the prod certs too.\n")

    html = alice_client.get(f"/ask/{trace_id}").content.decode()
    notice = html.split('<div class="stale-notice warning" role="status">')[1].split("</div>")[0]
    assert NOTICE in notice
    form = dict(re.findall(r'name="(\w+)" value="([^"]*)"', notice))
    assert form["csrfmiddlewaretoken"] and form["previous"] == str(trace_id)
    assert form["question"] == QUESTION and form["mode"] == "lexical" and form["space"] == "all"
    assert alice_client.get(f"/api/ask/{trace_id}").json()["stale"] is True

    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(alice)
    page = csrf_client.get(f"/ask/{trace_id}").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    rerun = {k: v for k, v in form.items() if k != "csrfmiddlewaretoken"}
    assert csrf_client.post("/ask", rerun).status_code == 403  # CSRF checked
    response = csrf_client.post("/ask", {**rerun, "csrfmiddlewaretoken": token})
    assert response.status_code == 303 and f"previous={trace_id}" in response["Location"]
    again = csrf_client.get(response["Location"]).content.decode()
    assert NOTICE not in again and f"/ask/{trace_id}" in again  # the comparison links back
    assert AskTrace.objects.latest("pk").question == QUESTION


def test_the_public_answer_page_shows_the_notice_without_a_button(alice, alice_client, settings):
    settings.LODE_RELEVANCE_THRESHOLD = 0.000001
    team = Space.objects.create(name="Team", created_by=alice, public_links_enabled=True)
    Membership.objects.create(space=team, user=alice, role=Role.ADMIN)
    note = services.note_create(
        owner=alice,
        title="Deploy runbook",
        body="# Deploy runbook\n\nRotate the staging certs with certbot before Friday.\n",
        space=team,
    )
    trace_id, _ = ask_page(alice_client, space=str(team.pk))
    link = public.link_create(by=alice, answer=AskTrace.objects.get(pk=trace_id))
    anonymous = Client()
    assert NOTICE not in anonymous.get(public.public_url(link)).content.decode()
    edit(note, alice, note.head.body + "\nRenew the prod certs too.\n")
    html = anonymous.get(public.public_url(link)).content.decode()
    assert NOTICE in html
    assert "<form" not in html and "Re-run" not in html


def test_a_rerun_says_when_the_best_match_changed(alice_client, alice_note, best_match_settings):
    first, _ = ask_page(alice_client)
    best_match_settings.LODE_BEST_MATCH_FLOOR = 0.999998
    _, html = ask_page(alice_client, previous=str(first))
    assert "Best match changed from “Rotate the staging certs" in html and "to none." in html


def test_a_public_best_match_is_not_called_unanswered(alice, alice_client, best_match_settings):
    team = Space.objects.create(name="Team", created_by=alice, public_links_enabled=True)
    Membership.objects.create(space=team, user=alice, role=Role.ADMIN)
    services.note_create(
        owner=alice,
        title="Deploy runbook",
        body="# Deploy runbook\n\nRotate the staging certs with certbot before Friday.\n",
        space=team,
    )
    trace_id, _ = ask_page(alice_client, space=str(team.pk))
    assert AskTrace.objects.get(pk=trace_id).answer["tier"] == "best_match"
    link = public.link_create(by=alice, answer=AskTrace.objects.get(pk=trace_id))
    html = Client().get(public.public_url(link)).content.decode()
    assert "No sentence of the notes was confirmed as the answer" in html
    assert "did not answer" not in html
