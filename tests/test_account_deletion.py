"""Deleting an account removes everything it owns — notes with their history, sources with
their snapshots and annotations, asks — and nothing of anyone else's; a single version can
never be deleted out from under its document."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db.models import RestrictedError

from notes import services
from notes.models import Document, Version
from retrieval.models import AskTrace, Passage

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
