"""A stored answer shows a claim only while its reader may see every document it cites
(DESIGN.md invariant 14), on every reader of stored answers: the permalink page, the API,
the public link, a re-run's comparison and the admin.

The world: space Team (alice admin, bob and carol editors, public links on) holds the note
"Cache runbook"; space Vault holds alice alone. Bob asks in Team through the real pipeline
(offline extractive answerer), so the stored answer quotes the note. Then the note moves to
Vault, goes to the trash, or its row goes, and every reader is checked for every string that
names it: the quote, the claim, the title, the evidence and version links.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from notes import services
from notes.models import Document
from retrieval.admin import TRACE_HIDDEN
from retrieval.answer.types import ClaimVerdict, ClosestPassage
from retrieval.eligibility import NO_LONGER_VISIBLE, citable_for_user, citable_in_public_link
from retrieval.links import evidence_url
from retrieval.models import AskTrace, Passage
from spaces import public
from spaces.models import Membership, Role, Space
from spaces.services import document_move, member_add, space_leave
from tests import factories

pytestmark = pytest.mark.django_db

QUESTION = "Which maxmemory-policy is set on the cache?"
TITLE = "Cache runbook"
BODY = "# Cache runbook\n\nSet maxmemory-policy allkeys-lru on the cache.\n"
QUOTE = "allkeys-lru"
OTHER_TITLE = "Pager rota"
OTHER_BODY = "# Pager rota\n\nThe pager rotates every Monday at nine.\n"


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def team(alice, bob, carol) -> Space:
    space = Space.objects.create(name="Team", created_by=alice, public_links_enabled=True)
    Membership.objects.create(space=space, user=alice, role=Role.ADMIN)
    Membership.objects.create(space=space, user=bob, role=Role.EDITOR)
    Membership.objects.create(space=space, user=carol, role=Role.EDITOR)
    return space


@pytest.fixture
def vault(alice) -> Space:
    space = Space.objects.create(name="Vault", created_by=alice)
    Membership.objects.create(space=space, user=alice, role=Role.ADMIN)
    return space


@pytest.fixture
def cache_note(alice, team) -> Document:
    return services.note_create(owner=alice, title=TITLE, body=BODY, space=team)


@pytest.fixture
def pager_note(alice, team) -> Document:
    return services.note_create(owner=alice, title=OTHER_TITLE, body=OTHER_BODY, space=team)


def ask_in(client: Client, space: Space | None, **extra: object) -> AskTrace:
    """Ask QUESTION through the page (the real pipeline) and return the stored answer."""
    data = {"question": QUESTION, "space": space.pk if space else "all", **extra}
    response = client.post("/ask", data)
    assert response.status_code == 303, response.content[:500]
    return AskTrace.objects.get(pk=int(response["Location"].split("?")[0].rsplit("/", 1)[1]))


def names_of(answer: AskTrace, note: Document) -> list[str]:
    """Every string the stored answer holds that names `note`: the quoted spans, the claims
    quoting it, its title, the evidence and version links. Asserted non-empty, so a test
    whose answer never quoted the note cannot pass."""
    names = {note.title}
    for claim in answer.answer["claims"]:
        for support in claim["support"]:
            if support["document_id"] == note.pk:
                names |= {claim["text"], support["quoted_span"], support["evidence_url"]}
                names.add(f"/notes/{note.pk}/versions/{support['version_id']}")
    assert QUOTE in "".join(names), "the stored answer does not quote the note"
    return sorted(name for name in names if name)


@pytest.fixture
def asked(bob, team, cache_note, pager_note) -> AskTrace:
    """Bob's answer, asked in Team: it quotes the cache note."""
    return ask_in(client_for(bob), team)


def page(client: Client, answer: AskTrace) -> str:
    response = client.get(f"/ask/{answer.pk}")
    assert response.status_code == 200
    return response.content.decode()


def leaked(text: str, names: list[str]) -> list[str]:
    return [name for name in names if name in text]


def move_out(alice: User, note: Document, vault: Space) -> None:
    document_move(by=alice, document=note, to_space=vault)


# --- the permalink page ----------------------------------------------------------------------


def test_members_see_the_claim_while_the_cited_note_is_in_the_space(bob, carol, asked, cache_note):
    names = names_of(asked, cache_note)
    for user in (bob, carol):
        html = page(client_for(user), asked)
        assert leaked(html, names) == names
        assert NO_LONGER_VISIBLE not in html


def test_moving_the_cited_note_out_hides_the_claim_from_members_who_cannot_follow_it(
    alice, bob, carol, vault, asked, cache_note
):
    names = names_of(asked, cache_note)
    move_out(alice, cache_note, vault)
    for user in (bob, carol):
        html = page(client_for(user), asked)
        assert NO_LONGER_VISIBLE in html and 'class="claim claim-hidden"' in html
        assert leaked(html, names) == []
    # alice is a member of the note's new space as well: the same answer still shows it all.
    assert leaked(page(client_for(alice), asked), names) == names


def test_the_stored_answer_is_unchanged_and_shows_again_when_the_note_comes_back(
    alice, bob, team, vault, asked, cache_note
):
    names = names_of(asked, cache_note)
    stored = dict(asked.answer)
    move_out(alice, cache_note, vault)
    assert leaked(page(client_for(bob), asked), names) == []
    asked.refresh_from_db()
    assert asked.answer == stored  # hidden at read time, never rewritten
    move_out(alice, Document.objects.get(pk=cache_note.pk), team)
    assert leaked(page(client_for(bob), asked), names) == names


def test_a_cited_note_in_the_trash_is_hidden_from_every_member_until_restored(
    alice, bob, asked, cache_note
):
    names = names_of(asked, cache_note)
    services.note_delete(document=cache_note, user=alice)
    for user in (alice, bob):
        html = page(client_for(user), asked)
        assert NO_LONGER_VISIBLE in html and leaked(html, names) == []
    services.note_undelete(document=Document.objects.get(pk=cache_note.pk), user=alice)
    assert leaked(page(client_for(bob), asked), names) == names


def test_a_cited_note_whose_row_is_gone_is_hidden(alice, bob, asked, cache_note):
    names = names_of(asked, cache_note)
    Document.objects.filter(pk=cache_note.pk).delete()
    for user in (alice, bob):
        html = page(client_for(user), asked)
        assert NO_LONGER_VISIBLE in html and leaked(html, names) == []


def test_a_reader_who_left_the_space_no_longer_sees_what_their_own_answer_quoted_from_it(
    bob, team, cache_note, pager_note
):
    # Asked across all bob's spaces: private to him, so he still opens it after leaving.
    answer = ask_in(client_for(bob), None)
    names = names_of(answer, cache_note)
    assert leaked(page(client_for(bob), answer), names) == names
    space_leave(user=bob, space=team)
    html = page(client_for(bob), answer)
    assert NO_LONGER_VISIBLE in html and leaked(html, names) == []


def test_a_new_member_sees_the_claim_only_while_the_note_is_in_the_space(
    alice, dave, team, vault, asked, cache_note
):
    names = names_of(asked, cache_note)
    member_add(by=alice, space=team, username="dave", role=Role.VIEWER)
    assert leaked(page(client_for(dave), asked), names) == names
    move_out(alice, cache_note, vault)
    html = page(client_for(dave), asked)
    assert NO_LONGER_VISIBLE in html and leaked(html, names) == []


def test_a_member_added_after_the_move_never_sees_the_claim(
    alice, dave, team, vault, asked, cache_note
):
    names = names_of(asked, cache_note)
    move_out(alice, cache_note, vault)
    member_add(by=alice, space=team, username="dave", role=Role.VIEWER)
    html = page(client_for(dave), asked)
    assert NO_LONGER_VISIBLE in html and leaked(html, names) == []


# --- the API ---------------------------------------------------------------------------------


def test_the_api_names_nothing_of_a_hidden_note(alice, bob, vault, asked, cache_note):
    names = [n for n in names_of(asked, cache_note) if "/versions/" not in n]  # a page link
    before = client_for(bob).get(f"/api/ask/{asked.pk}").content.decode()
    assert leaked(before, names) == names
    move_out(alice, cache_note, vault)
    response = client_for(bob).get(f"/api/ask/{asked.pk}")
    assert response.status_code == 200
    body = response.content.decode()
    assert leaked(body, names) == []
    assert str(cache_note.head_id) not in {
        str(s["version_id"]) for c in json.loads(body)["claims"] for s in c["support"]
    }
    claims = json.loads(body)["claims"]
    assert claims and all(c["hidden"] and c["text"] == NO_LONGER_VISIBLE for c in claims)
    assert all(c["support"] == [] for c in claims)


# --- what else a stored answer holds: dropped claims, closest passages, conflicts ------------


def _passage(note: Document) -> Passage:
    return (
        Passage.objects.filter(document=note, version_id=note.head_id, text__contains=QUOTE)
        .select_related("version")
        .first()
        or Passage.objects.filter(document=note, version_id=note.head_id)
        .select_related("version")
        .first()
    )


def _dropped(note: Document, text: str, span: str) -> dict:
    verdict = {
        "claim": {"text": text, "support": [{"version_id": note.head_id, "quoted_span": span}]},
        "passed": False,
        "step": "relevance",
        "reason": f"quoted span 1 does not occur in version 1 of \u201c{note.title}\u201d",
        "entailment_score": None,
        "entailment_scorer": "",
    }
    assert ClaimVerdict.from_dict(verdict).claim.text == text
    return verdict


def _closest(note: Document) -> dict:
    passage = _passage(note)
    return ClosestPassage(
        passage_id=passage.pk,
        document_id=note.pk,
        version_id=note.head_id,
        version_number=1,
        document_title=note.title,
        kind=note.kind,
        trust_tier=note.trust_tier,
        heading_path=(),
        snippet=passage.text,
        evidence_url=evidence_url(passage),
    ).as_dict()


def _conflict_value(note: Document, value: str, statement: str) -> dict:
    return {
        "value": value,
        "trust_tier": note.trust_tier,
        "document_id": note.pk,
        "document_title": note.title,
        "version_id": note.head_id,
        "statement": statement,
        "claim": statement,
        "origin": "evidence",
        "start": None,
        "end": None,
        "segments": [{"text": statement, "highlighted": True}],
        "evidence_url": evidence_url(_passage(note)),
    }


@pytest.fixture
def everything(bob, team, cache_note, pager_note) -> AskTrace:
    """A stored answer citing both notes in every part that names a document: a dropped
    claim, closest passages and a conflict's values."""
    return AskTrace.objects.create(
        user=bob,
        space=team,
        question=QUESTION,
        decision="ANSWER_WITH_CONFLICTS",
        answerer="extractive",
        answer={
            "question": QUESTION,
            "decision": "ANSWER_WITH_CONFLICTS",
            "answerer": "extractive",
            "claims": [],
            "dropped": [
                _dropped(cache_note, "The cache evicts with allkeys-lru.", QUOTE),
                _dropped(pager_note, "The pager rotates on Mondays.", "every Monday"),
            ],
            "closest": [_closest(cache_note), _closest(pager_note)],
            "conflicts": [
                {
                    "subject": "policy",
                    "values": [
                        _conflict_value(cache_note, QUOTE, "Set maxmemory-policy allkeys-lru"),
                        _conflict_value(pager_note, "Monday", "every Monday at nine"),
                    ],
                }
            ],
            "withheld": [
                {
                    "document_id": cache_note.pk,
                    "version_id": cache_note.head_id,
                    "document_title": TITLE,
                }
            ],
            "notes": [f"Asked about \u201c{TITLE}\u201d: its passages come first."],
        },
    )


def everything_names(note: Document) -> list[str]:
    passage = _passage(note)
    return [note.title, QUOTE, "The cache evicts", evidence_url(passage), passage.text.strip()]


def test_dropped_claims_closest_passages_conflicts_hide_the_moved_note_only(
    alice, bob, vault, everything, cache_note, pager_note
):
    names = everything_names(cache_note)
    html = page(client_for(bob), everything)
    assert leaked(html, names) == names  # the check can fail: everything is there before
    move_out(alice, cache_note, vault)
    html = page(client_for(bob), everything)
    assert leaked(html, names) == []
    # One dropped claim, one closest passage and one conflicting value hidden; the pager
    # note's stay as they were.
    assert html.count(NO_LONGER_VISIBLE) == 3
    assert "The pager rotates on Mondays." in html and "every Monday at nine" in html
    assert OTHER_TITLE in html


def test_the_api_hides_dropped_claims_closest_passages_and_conflicts_of_the_moved_note(
    alice, bob, vault, everything, cache_note
):
    names = everything_names(cache_note)
    move_out(alice, cache_note, vault)
    body = client_for(bob).get(f"/api/ask/{everything.pk}").content.decode()
    assert leaked(body, names) == []
    data = json.loads(body)
    assert [d.get("hidden", False) for d in data["dropped"]] == [True, False]
    assert [c["hidden"] for c in data["closest"]] == [True, False]
    assert [v.get("hidden", False) for v in data["conflicts"][0]["values"]] == [True, False]
    assert data["withheld"] == [] and data["notes"] == []


# --- a re-run compares against the stored answer as the reader may see it -------------------


def test_a_rerun_lists_no_text_of_a_claim_whose_note_moved_out(
    alice, bob, vault, asked, cache_note
):
    names = names_of(asked, cache_note)
    move_out(alice, cache_note, vault)
    client = client_for(bob)
    rerun = client.post(
        "/ask", {"question": QUESTION, "space": asked.space_id, "previous": asked.pk}
    )
    assert rerun.status_code == 303
    html = client.get(rerun["Location"]).content.decode()
    assert f'href="/ask/{asked.pk}"' in html
    assert "1 earlier claim cited a note no longer visible to you." in html
    assert leaked(html, names) == []


# --- the public link -------------------------------------------------------------------------


@pytest.fixture
def published(carol, asked) -> str:
    """Carol (an editor of Team) publishes Bob's answer; the public page's path."""
    return public.public_url(public.link_create(by=carol, answer=asked))


def test_the_public_link_hides_a_claim_whose_note_moved_out_and_shows_it_back(
    alice, team, vault, asked, cache_note, published
):
    names = [n for n in names_of(asked, cache_note) if not n.startswith("/")]
    assert leaked(Client().get(published).content.decode(), names) == names
    move_out(alice, cache_note, vault)
    html = Client().get(published).content.decode()
    assert NO_LONGER_VISIBLE in html and leaked(html, names) == []
    assert "no longer verifies" not in html  # not a claim beside a failed check: no claim
    move_out(alice, Document.objects.get(pk=cache_note.pk), team)
    assert leaked(Client().get(published).content.decode(), names) == names


@pytest.mark.parametrize("gone", ["trash", "row"])
def test_the_public_link_hides_a_claim_whose_note_was_deleted(
    alice, asked, cache_note, published, gone
):
    names = [n for n in names_of(asked, cache_note) if not n.startswith("/")]
    if gone == "trash":
        services.note_delete(document=cache_note, user=alice)
    else:
        Document.objects.filter(pk=cache_note.pk).delete()
    response = Client().get(published)
    assert response.status_code == 200
    html = response.content.decode()
    assert NO_LONGER_VISIBLE in html and leaked(html, names) == []


# --- the admin -------------------------------------------------------------------------------


def staff(user: User, *, superuser: bool) -> Client:
    client = factories.staff_client(user, superuser=superuser)
    if not superuser:
        user.user_permissions.set(Permission.objects.filter(codename="view_asktrace"))
    return client


def test_the_admin_shows_staff_who_are_not_superusers_only_what_they_may_see(
    alice, bob, vault, asked, cache_note
):
    names = [n for n in names_of(asked, cache_note) if not n.startswith("/")]
    url = f"/admin/retrieval/asktrace/{asked.pk}/change/"
    move_out(alice, cache_note, vault)
    html = staff(bob, superuser=False).get(url).content.decode()
    assert NO_LONGER_VISIBLE in html and TRACE_HIDDEN in html
    assert leaked(html, names) == []
    # A superuser reads the stored answer and its trace as they are (so the check can fail).
    root = User.objects.create_user("root", "root@example.com", "pw")
    assert leaked(staff(root, superuser=True).get(url).content.decode(), names) == names


def test_the_admin_shows_a_staff_member_the_whole_trace_while_they_may_see_every_note(
    bob, asked, cache_note
):
    names = [n for n in names_of(asked, cache_note) if not n.startswith("/")]
    html = staff(bob, superuser=False).get(f"/admin/retrieval/asktrace/{asked.pk}/change/")
    html = html.content.decode()
    assert TRACE_HIDDEN not in html and leaked(html, names) == names


# --- the rule itself -------------------------------------------------------------------------


def test_citable_counts_live_documents_of_the_readers_spaces_and_nothing_unknown(
    alice, bob, team, vault, cache_note, pager_note
):
    ids = {"version_ids": [cache_note.head_id, "x", None], "document_ids": [cache_note.pk]}
    assert citable_for_user(bob.pk, **ids).shows(
        versions=[cache_note.head_id], documents=[cache_note.pk]
    )
    assert not citable_for_user(bob.pk, **ids).shows(versions=["x"])
    assert not citable_for_user(None, **ids).shows(documents=[cache_note.pk])
    move_out(alice, cache_note, vault)
    assert not citable_for_user(bob.pk, **ids).shows(documents=[cache_note.pk])
    assert citable_for_user(alice.pk, **ids).shows(documents=[cache_note.pk])
    # The public rule: only the space the answer was published from counts.
    assert not citable_in_public_link(team.pk, **ids).shows(documents=[cache_note.pk])
    assert citable_in_public_link(vault.pk, **ids).shows(versions=[cache_note.head_id])
