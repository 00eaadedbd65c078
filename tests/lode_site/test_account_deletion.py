"""Deleting an account removes everything it owns — notes with their history, sources with
their snapshots and annotations, asks — and nothing of anyone else's; a single version can
never be deleted out from under its document."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db.models import RestrictedError

from externals.models import Source
from notes import services
from notes.models import Document, Version
from retrieval.models import AskTrace, Passage
from tests.factories import make_source

pytestmark = pytest.mark.django_db


def test_deleting_a_user_removes_what_they_own_and_nothing_else(alice, bob, tmp_path) -> None:
    from externals.annotations import annotation_create
    from externals.models import Annotation, Source
    from externals.pipeline import scan_source
    from externals.services import source_create
    from retrieval.answer.ask import ask

    note = services.note_create(owner=alice, title="Runbook", body="Rotate certs on Friday.")
    services.note_update(
        document=note,
        title="Runbook",
        body="Rotate certs on Monday.",
        user=alice,
        base_version_id=note.head_id,
    )
    root = tmp_path / "site"
    root.mkdir()
    (root / "page.md").write_text("# Page\n\nThe staging cluster has three nodes.\n")
    source = source_create(owner=alice, name="site", kind="folder", location=str(root))
    scan_source(source)
    external = Document.objects.get(source_items__source=source)
    body = external.head.body
    start = body.index("three nodes")
    annotation_create(
        owner=alice,
        version=external.head,
        start=start,
        end=start + len("three nodes"),
        quote="three nodes",
        text="Was four last year.",
    )
    ask(user=alice, question="When are certs rotated?")
    bobs = services.note_create(owner=bob, title="Bob's", body="Bob rotates nothing.")

    alice.delete()

    assert not User.objects.filter(username="alice").exists()
    assert not Document.objects.exclude(owner=bob).exists()
    assert not Version.objects.exclude(document__owner=bob).exists()
    assert not Passage.objects.exclude(document__owner=bob).exists()
    assert not (Source.objects.exists() or Annotation.objects.exists())
    assert not AskTrace.objects.exists()
    assert Document.objects.get(owner=bob) == bobs and bobs.head.passages.exists()


def test_a_head_version_cannot_be_deleted_alone(alice_note) -> None:
    with pytest.raises(RestrictedError):
        alice_note.head.delete()


def test_deleting_an_account_hands_its_shared_content_to_another_member(alice, bob) -> None:
    """What a user wrote in a shared space stays with the space when their account
    goes (an admin of the space inherits it), tags included; their personal space, and a
    shared space nobody else is in, go with the account."""
    from django.contrib.auth import get_user_model

    from spaces.models import Membership, Role, Space

    carol = get_user_model().objects.create_user("carol", "c@example.com", "pw-carol-123")
    team = Space.objects.create(name="Team", created_by=alice)
    Membership.objects.create(space=team, user=alice, role=Role.ADMIN)
    Membership.objects.create(space=team, user=bob, role=Role.VIEWER)
    Membership.objects.create(space=team, user=carol, role=Role.EDITOR)
    lonely = Space.objects.create(name="Carol alone", created_by=carol)
    Membership.objects.create(space=lonely, user=carol, role=Role.ADMIN)
    runbook = services.note_create(
        owner=carol, title="Team runbook", body="Rotate certs on Monday.", tags="ops", space=team
    )
    AskTrace.objects.create(
        user=carol, space=team, question="When?", decision="ANSWER", answerer="x"
    )
    kept = make_source(carol, name="Team wiki", space=team)
    clash = make_source(carol, name="Feeds", space=team)
    make_source(alice, name="Feeds")  # alice already has a source of that name
    private = services.note_create(owner=carol, title="Carol's diary", body="Mine only.")
    alone = services.note_create(owner=carol, title="Nobody else", body="x", space=lonely)

    carol.delete()

    runbook.refresh_from_db()
    assert runbook.owner_id == alice.pk  # the admin inherits, not bob the viewer
    assert runbook.space_id == team.pk and runbook.head.passages.exists()
    assert AskTrace.objects.filter(space=team, user=alice).count() == 1
    kept.refresh_from_db()
    assert kept.owner_id == alice.pk and kept.space_id == team.pk
    # A source whose name the heir already uses cannot be handed over: it goes.
    assert not Source.objects.filter(pk=clash.pk).exists()
    assert not Document.objects.filter(pk__in=[private.pk, alone.pk]).exists()
