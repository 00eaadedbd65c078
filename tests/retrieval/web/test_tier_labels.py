"""Trust tiers in the reader's words: a note is "Your note" only to the person who wrote it.
A teammate reading it in a shared space sees "Note by <author>" — on the search page, in the
graph picture and on the answer page alike — while the tier itself (and so the ranking) stays
the same for every reader."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from notes import services
from notes.models import Document, TrustTier
from retrieval.answer.types import ShownClaim, ShownSupport
from retrieval.eligibility import audience_for
from retrieval.models import AskTrace
from retrieval.search.backlinks import neighbourhood
from retrieval.trust import document_tier_labels, tier_label
from retrieval.web.graph_picture import hood_picture_nodes, neighbourhood_svg
from spaces.models import Membership, Role, Space

QUOTE = "Rotate the ingress certificates with certbot every quarter."


@pytest.fixture
def team(alice, bob) -> Space:
    space = Space.objects.create(name="Team", created_by=alice)
    Membership.objects.create(space=space, user=alice, role=Role.ADMIN)
    Membership.objects.create(space=space, user=bob, role=Role.VIEWER)
    return space


@pytest.fixture
def runbook(alice, team) -> Document:
    return services.note_create(
        owner=alice,
        title="Ingress runbook",
        body=f"# Ingress runbook\n\n{QUOTE}\n\nSee [[Certificate inventory]].\n",
        space=team,
    )


@pytest.fixture
def inventory(bob, team) -> Document:
    Membership.objects.filter(space=team, user=bob).update(role=Role.EDITOR)
    return services.note_create(
        owner=bob,
        title="Certificate inventory",
        body="# Certificate inventory\n\nThe ingress certificate expires in March.\n",
        space=team,
    )


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_words_depend_on_who_wrote_it_not_on_the_tier():
    assert tier_label(TrustTier.NOTE, mine=True) == "Your note"
    assert tier_label(TrustTier.NOTE, mine=False, author="alice") == "Note by alice"
    assert tier_label(TrustTier.NOTE, mine=False) == "Note"
    assert tier_label(TrustTier.ANNOTATION, mine=True) == "Your annotation"
    assert tier_label(TrustTier.ANNOTATION, mine=False, author="carol") == "Annotation by carol"
    # Externals are nobody's own: the same words for every reader.
    assert tier_label(TrustTier.EXTERNAL_CURRENT, mine=False, author="x") == "External snapshot"
    assert tier_label(TrustTier.EXTERNAL_STALE, mine=True) == "Stale external snapshot"
    assert tier_label("unheard-of", mine=True) == "unheard-of"


def test_alices_note_is_hers_to_alice_and_by_alice_to_bob(alice, bob, runbook):
    assert document_tier_labels(alice.pk, [runbook.pk]) == {runbook.pk: "Your note"}
    assert document_tier_labels(bob.pk, [runbook.pk]) == {runbook.pk: "Note by alice"}


def test_a_reader_outside_the_space_gets_no_label_and_so_no_author(alice, runbook):
    outsider = User.objects.create_user("dave", "dave@example.com", "pw")
    assert document_tier_labels(outsider.pk, [runbook.pk]) == {}
    assert document_tier_labels(None, [runbook.pk]) == {}


def test_search_hits_name_the_author_to_a_teammate(alice, bob, runbook):
    params = {"q": "certbot", "mode": "lexical", "adv": "1"}
    mine = client_for(alice).get("/search", params).content.decode()
    theirs = client_for(bob).get("/search", params).content.decode()
    assert "Ingress runbook" in mine and "Ingress runbook" in theirs
    assert "Your note" in mine and "Note by alice" not in mine
    assert "Note by alice" in theirs and "Your note" not in theirs
    # The calm view badges a teammate's note, never the reader's own.
    calm = {"q": "certbot", "mode": "lexical"}
    assert "badge tier-note" in client_for(bob).get("/search", calm).content.decode()
    assert "badge tier-note" not in client_for(alice).get("/search", calm).content.decode()


def test_the_graph_picture_names_each_node_for_its_reader(alice, bob, runbook, inventory):
    runbook.refresh_from_db()
    for reader, own, other in ((alice, runbook, inventory), (bob, inventory, runbook)):
        hood = neighbourhood(audience_for(reader.pk), runbook)
        labels = {n.id: n.tier_label for n in hood_picture_nodes(hood, viewer_id=reader.pk)}
        author = other.owner.get_username()
        assert labels == {own.pk: "Your note", other.pk: f"Note by {author}"}
        svg = neighbourhood_svg(hood, viewer_id=reader.pk)
        assert "Your note" in svg and f"Note by {author}" in svg


def test_the_note_page_picture_does_not_call_alices_note_bobs(alice, bob, runbook, inventory):
    page = client_for(bob).get(reverse("notes:detail", args=[runbook.pk])).content.decode()
    assert "(note, Note by alice)" in page
    assert "(note, Your note)" in page  # bob's own inventory, linked from the runbook
    assert "Ingress runbook (note, Your note)" not in page


def stored_answer(asker: User, space: Space, note: Document) -> AskTrace:
    version = note.head
    start = version.body.index(QUOTE)
    support = ShownSupport(
        version_id=version.pk,
        version_number=version.number,
        document_id=note.pk,
        document_title=note.title,
        kind=note.kind,
        trust_tier=note.trust_tier,
        quoted_span=QUOTE,
        start=start,
        end=start + len(QUOTE),
        segments=((QUOTE, True),),
        evidence_url="",
        version_created_at=version.created_at.isoformat(),
    ).as_dict()
    claim = {**ShownClaim(text=QUOTE, support=()).as_dict(), "support": [support]}
    question = "How often are the ingress certificates rotated?"
    return AskTrace.objects.create(
        user=asker,
        space=space,
        question=question,
        decision="ANSWER",
        answerer="extractive",
        answer={"question": question, "decision": "ANSWER", "claims": [claim], "dropped": []},
    )


def test_the_answer_page_agrees_with_search_for_each_reader(alice, bob, team, runbook):
    trace = stored_answer(alice, team, runbook)
    mine = client_for(alice).get(reverse("ask-permalink", args=[trace.pk])).content.decode()
    theirs = client_for(bob).get(reverse("ask-permalink", args=[trace.pk])).content.decode()
    assert QUOTE in mine and QUOTE in theirs
    assert '<span class="badge tier-note">Your note</span>' in mine
    assert '<span class="badge tier-note">Note by alice</span>' in theirs
    assert "Your note" not in theirs
