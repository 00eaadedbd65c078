"""The answer page, "ask about this note" and the ask API.

Two kinds of test:
* through the real pipeline (`ask()` with the offline extractive answerer over alice's note):
  login, CSRF, the POST → permalink redirect, the htmx swap and pushed URL, isolation between
  users, re-run comparison, the note page's pinned ask, API shapes and statuses;
* over hand-built stored answers (`outcome_from_trace` replaced): every decision, the error
  state, dropped claims, withheld documents, the age of externals, conflict order, and
  hostile text in the question, claims, spans and reasons, which must come out escaped.
"""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from lode_site.models import ApiToken, token_digest
from notes import services
from notes.models import Document, TrustTier
from retrieval.answer import stored_view
from retrieval.answer.types import (
    AskOutcome,
    Claim,
    ClaimVerdict,
    Decision,
    PackItem,
    ShownClaim,
    ShownSupport,
    Support,
)
from retrieval.models import AskTrace
from retrieval.web import ask_views
from tests import factories

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
ON_TOPIC = "Which maxmemory-policy is set on the cache?"
OFF_TOPIC = "How long should I boil a soft egg for breakfast?"
RAW_TOKEN = "lode-ask-token-0123456789abcdefghijklmnopqrstuvwxyz"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags_of(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def assert_inert(html: str) -> None:
    """No element that note or model text could have injected: scripts only from /static/,
    no images or frames, no inline event handlers."""
    for tag, attrs in tags_of(html):
        assert tag not in {"img", "iframe", "object", "embed", "svg"}, (tag, attrs)
        if tag == "script":
            assert (attrs.get("src") or "").startswith("/static/"), attrs
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)


def post_ask(client: Client, **data):
    return client.post("/ask", data)


def api_post(client: Client, data: dict, **kwargs):
    return client.post("/api/ask", data, content_type="application/json", **kwargs)


# --------------------------------------------------------------------------
# Access: login, CSRF, isolation
# --------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/ask", "/ask?q=x", "/ask/1"])
def test_pages_require_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(LOGIN)


def test_post_requires_login_and_runs_nothing(client, alice_note):
    response = post_ask(client, question=ON_TOPIC)
    assert response.status_code == 302
    assert response["Location"].startswith(LOGIN)
    assert not AskTrace.objects.exists()


def test_api_requires_auth(client, alice_note):
    assert api_post(client, {"question": ON_TOPIC}).status_code == 401
    assert client.get("/api/ask/1").status_code == 401
    assert not AskTrace.objects.exists()


def test_post_without_csrf_is_403(alice, alice_note):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert post_ask(client, question=ON_TOPIC).status_code == 403
    assert api_post(client, {"question": ON_TOPIC}).status_code == 403
    assert not AskTrace.objects.exists()


def test_post_with_csrf_token_works(alice, alice_note):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    client.get("/ask")  # sets the CSRF cookie
    csrf = client.cookies["csrftoken"].value
    response = client.post("/ask", {"question": ON_TOPIC, "csrfmiddlewaretoken": csrf})
    assert response.status_code == 303
    assert AskTrace.objects.filter(user=alice).count() == 1


def test_get_only_prefills_and_runs_nothing(alice_client, alice_note):
    response = alice_client.get("/ask", {"q": ON_TOPIC})
    assert response.status_code == 200
    assert f'value="{escape(ON_TOPIC)}"' in response.content.decode()
    assert not AskTrace.objects.exists()


def test_get_prefills_pinned_note_of_owner_only(alice_client, bob_client, alice_note):
    page = alice_client.get("/ask", {"q": "x", "pinned": alice_note.pk}).content.decode()
    assert f'name="pinned_document_id" value="{alice_note.pk}"' in page
    assert "Asking about" in page
    page = bob_client.get("/ask", {"q": "x", "pinned": alice_note.pk}).content.decode()
    assert "pinned_document_id" not in page
    assert alice_note.title not in page


def test_other_users_permalink_is_404(alice_client, bob_client, alice_note):
    response = post_ask(alice_client, question=ON_TOPIC)
    trace_id = AskTrace.objects.get().pk
    assert response["Location"] == f"/ask/{trace_id}"
    assert alice_client.get(f"/ask/{trace_id}").status_code == 200
    assert bob_client.get(f"/ask/{trace_id}").status_code == 404
    assert bob_client.get(f"/api/ask/{trace_id}").status_code == 404
    assert bob_client.get("/ask/999999").status_code == 404


# --------------------------------------------------------------------------
# Through the real pipeline
# --------------------------------------------------------------------------


def test_post_redirects_to_permalink_that_shows_the_verified_claim(alice_client, alice, alice_note):
    response = post_ask(alice_client, question=ON_TOPIC)
    assert response.status_code == 303
    trace = AskTrace.objects.get()
    assert trace.user == alice and trace.question == ON_TOPIC
    page = alice_client.get(response["Location"])
    html = page.content.decode()
    assert page.status_code == 200
    assert 'data-decision="ANSWER"' in html
    assert '<li class="claim">' in html
    assert "<mark>" in html and "allkeys-lru" in html
    assert f"/evidence/{alice_note.pk}/{alice_note.head_id}/" in html
    assert "offline" in html
    assert f"http://testserver/ask/{trace.pk}" in html  # the permalink, absolute
    assert 'name="previous"' in html  # the re-run form


def test_off_topic_question_abstains(alice_client, alice_note):
    response = post_ask(alice_client, question=OFF_TOPIC)
    html = alice_client.get(response["Location"]).content.decode()
    assert 'data-decision="ABSTAIN_NO_EVIDENCE"' in html
    assert "Not in your notes" in html  # the decision in words
    assert '<li class="claim">' not in html


def test_htmx_post_swaps_the_answer_and_pushes_the_permalink(alice_client, alice_note):
    response = alice_client.post("/ask", {"question": ON_TOPIC}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    trace = AskTrace.objects.get()
    assert response["HX-Push-Url"] == f"/ask/{trace.pk}"
    html = response.content.decode()
    assert "<html" not in html and '<section class="answer"' in html
    assert "<mark>" in html


def test_rerun_links_back_and_compares(alice_client, alice_note):
    first = post_ask(alice_client, question=ON_TOPIC)
    first_id = int(first["Location"].rsplit("/", 1)[1])
    again = post_ask(alice_client, question=ON_TOPIC, previous=first_id)
    second_id = AskTrace.objects.exclude(pk=first_id).get().pk
    assert again["Location"] == f"/ask/{second_id}?previous={first_id}"
    html = alice_client.get(again["Location"]).content.decode()
    assert f'href="/ask/{first_id}"' in html
    assert "Same decision, answerer and verified claims as before." in html


def test_rerun_compare_ignores_other_users_previous(alice_client, bob, bob_client, alice_note):
    post_ask(alice_client, question=ON_TOPIC)
    alice_trace = AskTrace.objects.get()
    services.note_create(owner=bob, title="Bob", body="Bob sets maxmemory-policy noeviction.")
    response = post_ask(bob_client, question=ON_TOPIC, previous=alice_trace.pk)
    html = bob_client.get(response["Location"]).content.decode()
    assert "Re-run of" not in html
    assert ON_TOPIC in html


def test_note_page_asks_about_this_note(alice_client, alice_note):
    detail = alice_client.get(f"/notes/{alice_note.pk}").content.decode()
    assert 'action="/ask"' in detail
    assert f'name="pinned_document_id" value="{alice_note.pk}"' in detail
    response = post_ask(
        alice_client, question="When are the certs rotated?", pinned_document_id=alice_note.pk
    )
    assert response.status_code == 303
    trace = AskTrace.objects.get()
    assert trace.pinned_document_id == alice_note.pk
    html = alice_client.get(response["Location"]).content.decode()
    assert "About the note" in html and alice_note.title in html


def test_conflict_between_note_and_external_renders_note_first(alice_client, alice):
    """Through the real pipeline: the extractive answerer quotes both documents, the
    decision finds the conflict, the page shows both values, the note's first."""
    services.note_create(
        owner=alice,
        title="Deploy runbook",
        body="## Timeouts\n\nThe staging timeout is 30 seconds.\n",
    )
    vendor = services.note_create(
        owner=alice,
        title="Vendor docs",
        body="Vendor guidance.\n\nThe staging timeout is 60 seconds.",
    )
    Document.objects.filter(pk=vendor.pk).update(
        kind=Document.Kind.EXTERNAL, trust_tier=TrustTier.EXTERNAL_CURRENT
    )
    response = post_ask(alice_client, question="What is the staging timeout?")
    html = alice_client.get(response["Location"]).content.decode()
    assert_inert(html)
    assert 'data-decision="ANSWER_WITH_CONFLICTS"' in html
    conflicts = html[html.index('<div class="conflict conflicts">') :]
    assert conflicts.index("30 seconds</strong>") < conflicts.index("60 seconds</strong>")
    assert "snapshot " in conflicts and " old</span>" in conflicts  # the external's age
    assert "<mark>The staging timeout is 30 seconds.</mark>" in conflicts


def test_pinning_someone_elses_note_is_refused(bob_client, alice_note):
    response = post_ask(bob_client, question="What is in it?", pinned_document_id=alice_note.pk)
    assert response.status_code == 200
    assert "No such note." in response.content.decode()
    assert not AskTrace.objects.exists()


@pytest.mark.parametrize(
    ("question", "message"), [("   ", "Type a question."), ("x" * 1001, "limited to 1000")]
)
def test_page_rejects_empty_and_too_long_questions(alice_client, settings, question, message):
    settings.LODE_MAX_QUERY_CHARS = 1000
    response = post_ask(alice_client, question=question)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not AskTrace.objects.exists()


def test_nav_and_search_page_link_to_ask(alice_client, alice_note):
    assert 'href="/ask"' in alice_client.get("/notes/").content.decode()
    search = alice_client.get("/search", {"q": "certs"}).content.decode()
    assert 'href="/ask?q=certs"' in search


# --------------------------------------------------------------------------
# API
# --------------------------------------------------------------------------


def test_api_endpoints_are_documented(alice_client):
    paths = alice_client.get("/api/openapi.json").json()["paths"]
    assert "post" in paths["/api/ask"]
    assert "get" in paths["/api/ask/{trace_id}"]


def test_api_ask_shape_and_stored_answer(alice_client, alice_note):
    response = api_post(alice_client, {"question": ON_TOPIC, "mode": "lexical"})
    assert response.status_code == 200
    data = response.json()
    trace = AskTrace.objects.get()
    assert data["trace_id"] == trace.pk
    assert data["permalink"] == f"http://testserver/ask/{trace.pk}"
    assert data["decision"] == "ANSWER"
    assert set(data) >= {
        "question",
        "decision",
        "answerer",
        "claims",
        "dropped",
        "withheld",
        "clarifying_questions",
        "conflicts",
        "message",
        "error",
        "notes",
    }
    support = data["claims"][0]["support"][0]
    assert support["version_id"] == alice_note.head_id
    assert support["offset_unit"] == "unicode_code_point"
    assert (
        "".join(s["text"] for s in support["segments"] if s["highlighted"])
        == support["quoted_span"]
    )
    assert support["evidence_url"].startswith(f"/evidence/{alice_note.pk}/")
    stored = alice_client.get(f"/api/ask/{trace.pk}")
    assert stored.status_code == 200
    assert stored.json()["claims"] == data["claims"]
    assert stored.json()["decision"] == data["decision"]


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"question": ""}, 422),
        ({"question": "   "}, 422),
        ({"question": "x" * 1001}, 422),
        ({"question": "nul \x00 byte"}, 422),
        ({"question": "ok?", "mode": "nonsense"}, 422),
        ({}, 422),
    ],
)
def test_api_bad_input(alice_client, settings, payload, status):
    settings.LODE_MAX_QUERY_CHARS = 1000
    response = api_post(alice_client, payload)
    assert response.status_code == status
    assert response.json()["detail"]
    assert not AskTrace.objects.exists()


def test_api_pinning_someone_elses_note_is_404(bob_client, alice_note):
    response = api_post(bob_client, {"question": "What?", "pinned_document_id": alice_note.pk})
    assert response.status_code == 404
    assert not AskTrace.objects.exists()


def test_api_bearer_token_needs_no_csrf(alice, alice_note):
    ApiToken.objects.create(user=alice, name="t", digest=token_digest(RAW_TOKEN))
    client = Client(enforce_csrf_checks=True)
    headers = {"Authorization": f"Bearer {RAW_TOKEN}"}
    response = api_post(client, {"question": OFF_TOPIC}, headers=headers)
    assert response.status_code == 200
    assert response.json()["decision"] == "ABSTAIN_NO_EVIDENCE"
    assert client.get(f"/api/ask/{response.json()['trace_id']}", headers=headers).status_code == 200


# --------------------------------------------------------------------------
# Rendering of stored answers (hand-built outcomes)
# --------------------------------------------------------------------------


def support(note, **overrides) -> ShownSupport:
    values = {
        "version_id": note.head_id,
        "version_number": 1,
        "document_id": note.pk,
        "document_title": note.title,
        "kind": "note",
        "trust_tier": "note",
        "quoted_span": "allkeys-lru",
        "start": 10,
        "end": 21,
        "segments": (("Set maxmemory-policy ", False), ("allkeys-lru", True), (" on it.", False)),
        "evidence_url": f"/evidence/{note.pk}/{note.head_id}/1/abc/",
        "version_created_at": note.head.created_at.isoformat(),
    }
    values.update(overrides)
    return ShownSupport(**values)


@pytest.fixture
def stored(monkeypatch, alice):
    """`stored(outcome)` → the permalink of a trace whose stored answer is `outcome`."""
    outcomes: dict[int, AskOutcome] = {}

    def fake_outcome_from_trace(trace: AskTrace) -> AskOutcome:
        return outcomes[trace.pk]

    monkeypatch.setattr(ask_views, "outcome_from_trace", fake_outcome_from_trace)
    monkeypatch.setattr(stored_view, "outcome_from_trace", fake_outcome_from_trace)

    def _store(outcome: AskOutcome) -> str:
        trace = AskTrace.objects.create(
            user=alice,
            question=outcome.question,
            decision=str(outcome.decision),
            answerer=outcome.answerer,
        )
        outcome.trace_id = trace.pk
        outcomes[trace.pk] = outcome
        return f"/ask/{trace.pk}"

    return _store


def page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200
    html = response.content.decode()
    assert_inert(html)
    return html


def test_answer_renders_claim_span_version_tier_and_dropped(alice_client, alice_note, stored):
    dropped = ClaimVerdict(
        claim=Claim("The cache uses volatile-lru.", (Support(alice_note.head_id, "volatile"),)),
        passed=False,
        step="verbatim",
        reason="quoted span not found in version",
    )
    url = stored(
        AskOutcome(
            question="Which policy?",
            decision=Decision.ANSWER,
            answerer="extractive",
            claims=[ShownClaim("The policy is allkeys-lru.", (support(alice_note),))],
            dropped=[dropped],
        )
    )
    html = page(alice_client, url)
    assert "<mark>allkeys-lru</mark>" in html
    assert "Set maxmemory-policy <mark>" in html  # context around the span
    assert "Your note" in html and "version 1" in html
    # The evidence link marks the quoted span and leads back to this answer.
    assert f'href="/evidence/{alice_note.pk}/{alice_note.head_id}/1/abc/?span=' in html
    assert "1 claim dropped by the gate" in html
    assert '<details class="dropped">' in html
    assert "The cache uses volatile-lru." in html and "quoted span not found" in html


def test_abstention_renders_the_honest_message(alice_client, stored):
    html = page(
        alice_client,
        stored(AskOutcome(question="Tides?", decision=Decision.ABSTAIN_NO_EVIDENCE, answerer="x")),
    )
    assert "Not in your notes" in html  # the decision in words
    assert "ABSTAIN_NO_EVIDENCE</" not in html  # never the enum name as text
    assert '<li class="claim">' not in html


def test_clarifying_questions_link_to_a_prefilled_form(alice_client, stored):
    html = page(
        alice_client,
        stored(
            AskOutcome(
                question="certs",
                decision=Decision.ASK_CLARIFYING,
                answerer="rules",
                clarifying_questions=["Which certs expire first?", "How are certs rotated?"],
                message="Your question is short. Did you mean:",
            )
        ),
    )
    assert 'href="/ask?q=Which%20certs%20expire%20first%3F"' in html
    assert "How are certs rotated?" in html
    assert "Your question is short. Did you mean:" in html


def test_conflicts_show_both_values_higher_tier_first(alice_client, alice_note, stored):
    vendor = factories.make_external(alice_note.owner, title="Vendor page")
    cited = {"document_id": alice_note.pk, "version_id": alice_note.head_id}
    cited_external = {"document_id": vendor.pk, "version_id": vendor.head_id}
    external = support(
        alice_note,
        kind="external",
        trust_tier="external",
        document_title="Vendor page",
        version_created_at=(timezone.now() - timedelta(days=3, hours=1)).isoformat(),
    )
    html = page(
        alice_client,
        stored(
            AskOutcome(
                question="How long are backups kept?",
                decision=Decision.ANSWER_WITH_CONFLICTS,
                answerer="extractive",
                claims=[
                    ShownClaim("Backups are kept 30 days.", (external,)),
                    ShownClaim("Backups are kept 14 days.", (support(alice_note),)),
                ],
                conflicts=[
                    {
                        "subject": "backup retention",
                        "values": [
                            {"value": "30 days", "trust_tier": "external", "claim": "kept 30 days"}
                            | cited_external,
                            {"value": "14 days", "trust_tier": "note", "claim": "kept 14 days"}
                            | cited,
                        ],
                    }
                ],
            )
        ),
    )
    assert "Your sources disagree." in html
    assert html.index("14 days</strong>") < html.index("30 days</strong>")
    assert "External snapshot" in html and "Your note" in html
    assert "snapshot 3\xa0days old" in html
    # An external support links to its snapshot page, never to the note view.
    snapshot = f"/externals/{alice_note.pk}/snapshots/{alice_note.head_id}/"
    assert f'<a class="support-title" href="{snapshot}">Vendor page</a>' in html


def test_answerer_failure_says_nothing_is_verified(alice_client, stored):
    html = page(
        alice_client,
        stored(
            AskOutcome(
                question="Anything?",
                decision=Decision.ABSTAIN_NO_EVIDENCE,
                answerer="chat:tiny",
                error="the model's JSON was cut off at max_tokens",
            )
        ),
    )
    assert "nothing here is verified" in html
    assert "cut off at max_tokens" in html
    assert "remote model" in html


def test_withheld_documents_are_listed_once(alice_client, alice_note, stored):
    item = PackItem(
        passage_id=1,
        document_id=alice_note.pk,
        version_id=alice_note.head_id,
        version_number=1,
        document_title="Secret plans",
        kind="note",
        trust_tier="note",
        text="t",
        start=0,
        end=1,
        start_line=1,
        end_line=1,
        parent_start=0,
        parent_end=1,
        version_created_at=alice_note.head.created_at.isoformat(),
        no_egress=True,
    )
    html = page(
        alice_client,
        stored(
            AskOutcome(
                question="Plans?",
                decision=Decision.ABSTAIN_NO_EVIDENCE,
                answerer="chat:m",
                withheld=[item, item],
            )
        ),
    )
    assert "Present, withheld from cloud synthesis" in html
    assert html.count("<li>Secret plans</li>") == 1


def test_hostile_text_everywhere_is_escaped(alice_client, alice_note, stored):
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    url = stored(
        AskOutcome(
            question=f"q {evil}",
            decision=Decision.ANSWER_WITH_CONFLICTS,
            answerer=f"a {evil}",
            claims=[
                ShownClaim(
                    f"claim {evil}",
                    (
                        support(
                            alice_note,
                            document_title=f"title {evil}",
                            quoted_span="</mark><script>alert(2)</script>",
                            segments=(
                                (f"before {evil}", False),
                                ("</mark><script>alert(2)</script>", True),
                                ("&lt;b&gt;", False),
                            ),
                        ),
                    ),
                )
            ],
            dropped=[ClaimVerdict(Claim(f"dropped {evil}", ()), False, "coupling", f"r {evil}")],
            clarifying_questions=[f"cq {evil}"],
            conflicts=[{"subject": f"s {evil}", "values": [{"value": evil, "trust_tier": evil}]}],
            message=f"m {evil}",
            error=f"e {evil}",
            notes=[f"n {evil}"],
        )
    )
    html = page(alice_client, url)
    assert escape(evil) in html
    assert "<mark>&lt;/mark&gt;&lt;script&gt;alert(2)&lt;/script&gt;</mark>" in html
    assert "&amp;lt;b&amp;gt;" in html  # entity-like text is shown literally
    assert "<script>alert" not in html


def test_stored_answer_over_api_carries_segments(alice_client, alice_note, stored):
    url = stored(
        AskOutcome(
            question="Which policy?",
            decision=Decision.ANSWER,
            answerer="extractive",
            claims=[ShownClaim("The policy is allkeys-lru.", (support(alice_note),))],
        )
    )
    trace_id = int(url.rsplit("/", 1)[1])
    data = alice_client.get(f"/api/ask/{trace_id}").json()
    assert data["claims"][0]["support"][0]["segments"][1] == {
        "text": "allkeys-lru",
        "highlighted": True,
    }
    assert data["permalink"] == f"http://testserver{url}"


def test_answer_differences_name_what_changed(alice_note):
    claim = ShownClaim("A.", (support(alice_note),))
    before = AskOutcome(question="q", decision=Decision.ANSWER, answerer="x", claims=[claim])
    same = AskOutcome(question="q", decision=Decision.ANSWER, answerer="x", claims=[claim])
    after = AskOutcome(question="q", decision=Decision.ABSTAIN_NO_EVIDENCE, answerer="y")
    assert ask_views.answer_differences(before, same) == []
    changes = ask_views.answer_differences(before, after)
    assert changes[0] == "Decision changed from “Answered” to “Not in your notes”."
    assert "Answerer changed from x to y." in changes
    assert "1 claim no longer shown: “A.”" in changes


# --------------------------------------------------------------------------
# Abstentions that help, clarifying choices
# --------------------------------------------------------------------------

NEAR_TOPIC = "How do I rotate the production certs with acme.sh?"


def forms_of(html: str) -> list[dict[str, str]]:
    """Each <form class="choice">'s hidden inputs and button, in order."""
    forms: list[dict[str, str]] = []
    for tag, attrs in tags_of(html):
        if tag == "form" and "choice" in (attrs.get("class") or "").split():
            forms.append({"action": attrs.get("action") or "", "method": attrs.get("method") or ""})
        elif tag == "input" and forms and attrs.get("type") == "hidden":
            forms[-1].setdefault(attrs.get("name") or "", attrs.get("value") or "")
    return forms


def test_an_abstention_shows_the_closest_passages_and_search_instead(alice_client, alice_note):
    response = post_ask(alice_client, question=NEAR_TOPIC, mode="lexical")
    assert response.status_code == 303
    html = page(alice_client, response["Location"])
    assert 'data-decision="ABSTAIN_NO_EVIDENCE"' in html
    assert "Closest passages — these do not answer the question" in html
    passage = alice_note.head.passages.filter(text__contains="certbot").get()
    evidence = f"/evidence/{alice_note.pk}/{alice_note.head_id}/{passage.pk}/"
    assert f'<a class="evidence-link" href="{evidence}' in html
    assert "Rotate the staging certs with certbot before Friday." in html  # the snippet
    search = (
        "/search?q=How%20do%20I%20rotate%20the%20production%20certs%20with%20acme.sh%3F"
        "&amp;space=all"
    )
    assert f'<a class="search-instead-link" href="{search}">Search instead</a>' in html
    assert alice_client.get(search.replace("&amp;", "&")).status_code == 200


def test_the_closest_passages_come_back_on_the_permalink_and_over_the_api(alice_client, alice_note):
    data = api_post(alice_client, {"question": NEAR_TOPIC, "mode": "lexical"}).json()
    assert data["decision"] == "ABSTAIN_NO_EVIDENCE"
    [first, *_] = data["closest"]
    assert first["document_id"] == alice_note.pk and first["version_id"] == alice_note.head_id
    assert first["evidence_url"].startswith(f"/evidence/{alice_note.pk}/")
    assert "certbot" in first["snippet"]
    stored = alice_client.get(f"/api/ask/{data['trace_id']}").json()
    assert stored["closest"] == data["closest"]
    html = page(alice_client, f"/ask/{data['trace_id']}")
    assert f'href="{first["evidence_url"]}?from=answer&amp;answer={data["trace_id"]}"' in html


def test_clarifying_choices_are_buttons_that_ask_the_rewritten_question(alice_client, alice_note):
    response = post_ask(alice_client, question="staging?", mode="lexical")
    html = page(alice_client, response["Location"])
    assert 'data-decision="ASK_CLARIFYING"' in html
    forms = forms_of(html)
    assert forms, "the suggestions are choices, not text"
    assert all(f["method"] == "post" and f["action"] == "/ask" for f in forms)
    assert all(f["csrfmiddlewaretoken"] and f["mode"] == "lexical" for f in forms)
    scoped = [f for f in forms if "pinned_document_id" in f]
    assert scoped and scoped[0]["pinned_document_id"] == str(alice_note.pk)
    assert scoped[0]["question"] == "staging?"
    added = [f["question"] for f in forms if "pinned_document_id" not in f]
    assert added and all(q.startswith("staging ") for q in added)
    assert "/search?q=staging%3F" in html  # search instead, carrying the question
    # Choosing one asks it: the rewritten question is answered or abstains, never clarified.
    chosen = {k: v for k, v in scoped[0].items() if k not in {"action", "method"}}
    again = alice_client.post("/ask", chosen)
    assert again.status_code == 303
    trace = AskTrace.objects.get(pk=int(again["Location"].rsplit("/", 1)[1]))
    assert trace.pinned_document_id == alice_note.pk and trace.decision != "ASK_CLARIFYING"


def test_choices_and_closest_render_from_a_stored_answer_escaped(alice_client, alice_note, stored):
    from retrieval.answer.types import ClarifyingChoice, ClosestPassage

    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    clarify = stored(
        AskOutcome(
            question=f"certs {evil}",
            decision=Decision.ASK_CLARIFYING,
            answerer="rules",
            clarifying_questions=["Do you mean “Deploy runbook”?"],
            clarifying_choices=[ClarifyingChoice(label=f"Add {evil}", question=f"certs {evil}")],
        )
    )
    html = page(alice_client, clarify)
    assert escape(f"Add {evil}") in html and evil not in html
    [form] = forms_of(html)
    assert form["question"] == f"certs {evil}"  # the attribute carries the text, escaped
    assert "Do you mean" not in html  # the plain-text list gives way to the choices
    abstain = stored(
        AskOutcome(
            question="Tides?",
            decision=Decision.ABSTAIN_NO_EVIDENCE,
            answerer="extractive",
            closest=[
                ClosestPassage(
                    passage_id=1,
                    document_id=alice_note.pk,
                    version_id=alice_note.head_id,
                    version_number=1,
                    document_title=f"Title {evil}",
                    kind="note",
                    trust_tier="note",
                    heading_path=("Redis", f"Policy {evil}"),
                    snippet=f"Snippet {evil}",
                    evidence_url=f"/evidence/{alice_note.pk}/{alice_note.head_id}/1/abc/",
                )
            ],
        )
    )
    html = page(alice_client, abstain)
    assert evil not in html
    assert escape(f"Snippet {evil}") in html and escape(f"Title {evil}") in html
    assert "› Redis › Policy " in html
    assert f'href="/evidence/{alice_note.pk}/{alice_note.head_id}/1/abc/?from=answer' in html
    assert f'href="/notes/{alice_note.pk}/versions/{alice_note.head_id}"' in html
    assert '<a class="search-instead-link" href="/search?q=Tides%3F&amp;space=all">' in html


def test_an_answer_offers_no_closest_passages_or_search_instead(alice_client, alice_note):
    response = post_ask(alice_client, question=ON_TOPIC, mode="lexical")
    html = page(alice_client, response["Location"])
    assert 'data-decision="ANSWER"' in html
    assert "Closest passages" not in html and "search-instead" not in html


# --------------------------------------------------------------------------
# Quotes a person reads
# --------------------------------------------------------------------------

BACKUP_NOTE = (
    "# Ops notes\n\n"
    "## Backups\n\n"
    "```sh\nbackup --now --target s3://ops-backups\n```\n\n"
    "- The restore drill is on the first Monday of the month.\n"
    "- Nightly backups run at 03:30 UTC since October. The **old** `02:00` slot is retired, "
    "see [the plan](https://example.com/plan).\n"
    "    - Dana owns the backup job.\n\n"
    "## Restores\n\n"
    "Restores go through the staging bucket first.\n"
)
SUPPORT_QUOTE_RE = re.compile(
    r'<p class="meta quote-heading heading-path">(?P<label>.*?)</p>\s*'
    r'<blockquote class="support-text passage-text">(?P<quote>.*?)</blockquote>',
    re.S,
)


def test_a_quote_from_a_markdown_list_reads_as_text_with_its_exact_span(alice, alice_client):
    document = services.note_create(owner=alice, title="Ops notes", body=BACKUP_NOTE)
    response = post_ask(alice_client, question="When do the nightly backups run?", mode="lexical")
    html = page(alice_client, response["Location"])
    assert 'data-decision="ANSWER"' in html
    match = SUPPORT_QUOTE_RE.search(html)
    assert match, html
    # The heading path is a label over the quote, not "##" in it.
    assert unescape(re.sub(r"<[^>]+>", "", match["label"])) == "Backups"
    quote = match["quote"]
    [marked] = re.findall(r"<mark>(.*?)</mark>", quote, re.S)
    shown = unescape(re.sub(r"<[^>]+>", "", quote))
    # The highlighted text is exactly the stored span the gate verified…
    stored = AskTrace.objects.get().answer["claims"][0]["support"][0]
    span = "Nightly backups run at 03:30 UTC since October."
    assert unescape(marked) == stored["quoted_span"] == span
    assert BACKUP_NOTE[stored["start"] : stored["end"]] == span
    assert stored["version_id"] == document.head_id
    # …and its context is the list item as text: no heading marks, fences, list markers,
    # emphasis, code ticks or link syntax, and nothing of the neighbouring items.
    assert shown == span + " The old 02:00 slot is retired, see the plan."
    for markup in ("##", "```", "**", "`", "](", "- "):
        assert markup not in shown, markup
    assert "restore drill" not in shown and "Dana" not in shown


def test_readable_context_keeps_the_span_and_drops_markup_only_outside_it():
    from retrieval.answer.display import quote_segments

    body = "## Steps\n\n> - Run **`deploy`** first, then\n>   check the *canary* — see [docs](http://x).\n"
    start = body.index("then")
    end = start + len("then\n>   check the *canary*")
    segments = quote_segments(body, start, end, None)
    assert [text for text, marked in segments if marked] == [body[start:end]]  # markup kept
    before, after = [text for text, marked in segments if not marked]
    assert before == "Run deploy first, "
    assert after == " — see docs."
