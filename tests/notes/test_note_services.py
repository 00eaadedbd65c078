"""notes.services: create, edit (with conflict detection), soft delete, restore, tags,
validation, permissions, and the head passages each write leaves behind."""

from __future__ import annotations

import hashlib

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from notes import selectors, services
from notes.models import Document, DocumentTag, Tag, Version
from retrieval.models import Passage
from tests.concurrency import postgresql_only, race

pytestmark = pytest.mark.django_db


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tag_names(document: Document) -> set[str]:
    return {name for name, _ in selectors.note_tags(document)}


def body_tags(document: Document) -> set[str]:
    return {name for name, from_body in selectors.note_tags(document) if from_body}


def counts() -> tuple[int, int, int, int]:
    return (
        Document.objects.count(),
        Version.objects.count(),
        Passage.objects.count(),
        DocumentTag.objects.count(),
    )


def restore(note: Document, user, version: Version) -> Version:
    """Restore `version` on top of the note's current head (what a fresh page shows)."""
    note.refresh_from_db()
    return services.note_restore(
        document=note, user=user, version_id=version.pk, base_version_id=note.head_id
    )


def edit(note: Document, user, body: str, *, title: str | None = None, base=None, tags=None):
    note.refresh_from_db()
    return services.note_update(
        document=note,
        user=user,
        base_version_id=(base or note.head).pk,
        title=note.title if title is None else title,
        body=body,
        tags=tags,
    )


# --------------------------------------------------------------------------
# Create and versions
# --------------------------------------------------------------------------


def test_create_writes_first_version_with_provenance(alice):
    body = "Café notes ☕ with an astral 👍🏽 and more.\n"
    note = services.note_create(owner=alice, title="  Coffee  ", body=body, tags="drinks")
    note.refresh_from_db()
    version = note.head
    assert note.owner == alice
    assert note.kind == Document.Kind.NOTE
    assert note.title == "Coffee"  # title is stripped
    assert note.versions.count() == 1
    assert version.number == 1
    assert version.parent is None
    assert version.title == "Coffee"
    assert version.body == body
    assert version.sha256 == sha(body)
    assert version.byte_size == len(body.encode("utf-8"))
    assert version.byte_size > len(body)  # bytes, not code points
    assert version.extractor_name == services.NOTE_EXTRACTOR
    assert version.extractor_version == services.NOTE_EXTRACTOR_VERSION
    assert version.created_by == alice


def test_edit_appends_version_and_leaves_old_one_untouched(alice, alice_note):
    v1 = alice_note.head
    v1_snapshot = Version.objects.filter(pk=v1.pk).values().get()
    new_body = "Completely new text about kubernetes.\n"
    v2 = edit(alice_note, alice, new_body, title="Deploy runbook v2")
    alice_note.refresh_from_db()
    assert alice_note.head == v2
    assert alice_note.title == "Deploy runbook v2"
    assert v2.number == 2
    assert v2.parent_id == v1.pk
    assert v2.body == new_body
    assert v2.sha256 == sha(new_body)
    assert v2.byte_size == len(new_body.encode("utf-8"))
    assert v2.created_by == alice
    # The old version is byte-for-byte what it was.
    assert Version.objects.filter(pk=v1.pk).values().get() == v1_snapshot
    assert list(selectors.note_versions(alice_note).values_list("number", flat=True)) == [2, 1]


def test_three_edits_chain_parents(alice, alice_note):
    v1 = alice_note.head
    v2 = edit(alice_note, alice, "second")
    v3 = edit(alice_note, alice, "third")
    assert [v.number for v in (v1, v2, v3)] == [1, 2, 3]
    assert v3.parent_id == v2.pk
    assert v2.parent_id == v1.pk


def test_identical_edit_writes_no_version(alice, alice_note):
    head = alice_note.head
    before = counts()
    result = edit(alice_note, alice, head.body, title=head.title)
    alice_note.refresh_from_db()
    assert result.pk == head.pk
    assert alice_note.head_id == head.pk
    assert alice_note.versions.count() == 1
    assert Passage.objects.count() == before[2]


def test_identical_content_with_new_tags_updates_tags_only(alice, alice_note):
    head = alice_note.head
    edit(alice_note, alice, head.body, title=head.title, tags="Fresh")
    alice_note.refresh_from_db()
    assert alice_note.versions.count() == 1
    assert "fresh" in tag_names(alice_note)
    assert "infra" not in tag_names(alice_note)


def test_title_only_change_writes_a_version(alice, alice_note):
    head = alice_note.head
    version = edit(alice_note, alice, head.body, title="Renamed")
    assert version.number == 2
    assert version.sha256 == head.sha256  # same body, same digest


# --------------------------------------------------------------------------
# Conflicts
# --------------------------------------------------------------------------


def test_stale_edit_raises_conflict_and_saves_nothing(alice, alice_note):
    v1 = alice_note.head
    v2 = edit(alice_note, alice, "Someone else's edit in another tab.\n")
    before = counts()
    head_passages = set(Passage.objects.filter(is_head=True).values_list("pk", flat=True))

    with pytest.raises(services.EditConflict) as info:
        services.note_update(
            document=alice_note,
            user=alice,
            base_version_id=v1.pk,
            title="My title",
            body="My stale edit.\n",
            tags="stale",
        )
    conflict = info.value
    assert conflict.base.pk == v1.pk
    assert conflict.head.pk == v2.pk
    assert conflict.head.body == "Someone else's edit in another tab.\n"
    assert conflict.body == "My stale edit.\n"
    assert conflict.title == "My title"
    assert str(conflict)  # a user-facing message

    alice_note.refresh_from_db()
    assert counts() == before
    assert alice_note.head_id == v2.pk
    assert alice_note.title == "Deploy runbook"
    assert "stale" not in tag_names(alice_note)
    assert set(Passage.objects.filter(is_head=True).values_list("pk", flat=True)) == head_passages


@pytest.mark.parametrize("whose", ["other note", "bob's note", "missing"])
def test_edit_with_unknown_base_version_says_so(alice, alice_note, bob, whose):
    """A base that is no version of this note is not a conflict (there is nothing to compare
    with): the error names the id and the current version instead of claiming "changed
    (version 1) after you started editing version 1"."""
    other = services.note_create(owner=alice, title="Other", body="other body")
    bobs = services.note_create(owner=bob, title="Bob's", body="bob body")
    base_id = {
        "other note": other.head_id,
        "bob's note": bobs.head_id,
        "missing": Version.objects.order_by("-pk").first().pk + 1000,
    }[whose]
    before = counts()
    with pytest.raises(ValidationError) as info:
        services.note_update(
            document=alice_note, user=alice, base_version_id=base_id, title="x", body="y"
        )
    message = " ".join(info.value.messages)
    assert f"Version id {base_id} is not a version of this note" in message
    assert f"id {alice_note.head_id} (version 1)" in message
    assert "bob" not in message.casefold()
    assert counts() == before


def test_restore_with_unknown_base_version_says_so(alice, alice_note):
    v1 = alice_note.head
    edit(alice_note, alice, "second")
    other = services.note_create(owner=alice, title="Other", body="other body")
    before = counts()
    with pytest.raises(ValidationError, match=f"Version id {other.head_id} is not a version"):
        services.note_restore(
            document=alice_note, user=alice, version_id=v1.pk, base_version_id=other.head_id
        )
    assert counts() == before


def test_restore_from_a_stale_page_is_a_conflict(alice, alice_note):
    """Restore carries the head the user saw; if the note moved since, nothing is written
    (the same conflict type as an edit, with the current head to show)."""
    v1 = alice_note.head
    v2 = edit(alice_note, alice, "second")
    v3 = edit(alice_note, alice, "third, saved in another tab")
    before = counts()
    with pytest.raises(services.RestoreConflict) as info:
        services.note_restore(
            document=alice_note, user=alice, version_id=v1.pk, base_version_id=v2.pk
        )
    conflict = info.value
    assert isinstance(conflict, services.EditConflict)
    assert (conflict.base.pk, conflict.head.pk) == (v2.pk, v3.pk)
    assert conflict.body == v1.body  # what the restore would have written
    assert "Nothing was restored" in str(conflict)
    assert counts() == before
    alice_note.refresh_from_db()
    assert alice_note.head_id == v3.pk


def test_second_restore_from_the_same_page_is_a_conflict(alice, alice_note):
    v1 = alice_note.head
    v2 = edit(alice_note, alice, "second")
    first = services.note_restore(
        document=alice_note, user=alice, version_id=v1.pk, base_version_id=v2.pk
    )
    with pytest.raises(services.RestoreConflict):
        services.note_restore(
            document=alice_note, user=alice, version_id=v1.pk, base_version_id=v2.pk
        )
    alice_note.refresh_from_db()
    assert alice_note.head_id == first.pk
    assert alice_note.versions.count() == 3


# --------------------------------------------------------------------------
# Delete and restore
# --------------------------------------------------------------------------


def test_soft_delete_keeps_history_but_hides_note(alice, alice_note):
    versions_before = alice_note.versions.count()
    services.note_delete(document=alice_note, user=alice)
    alice_note.refresh_from_db()
    assert alice_note.is_deleted
    assert alice_note.versions.count() == versions_before
    assert not selectors.notes_for_user(alice).filter(pk=alice_note.pk).exists()
    with pytest.raises(Document.DoesNotExist):
        selectors.note_get(alice, alice_note.pk)


def test_deleted_note_cannot_be_edited(alice, alice_note):
    services.note_delete(document=alice_note, user=alice)
    before = counts()
    with pytest.raises(ValidationError):
        edit(alice_note, alice, "edited after delete")
    assert counts() == before


def test_restore_creates_new_version_with_old_content(alice, alice_note):
    v1 = alice_note.head
    alice_note_body_v1 = v1.body
    edit(alice_note, alice, "replacement text #newtag", title="Replaced")
    restored = restore(alice_note, alice, v1)
    alice_note.refresh_from_db()
    assert restored.number == 3
    assert restored.pk != v1.pk
    assert restored.body == alice_note_body_v1
    assert restored.title == v1.title
    assert restored.sha256 == v1.sha256
    assert restored.parent.number == 2
    assert alice_note.head_id == restored.pk
    assert alice_note.title == v1.title
    assert alice_note.versions.count() == 3
    # Body tags follow the restored body; manual tags stay.
    assert body_tags(alice_note) == {"ops"}
    assert "infra" in tag_names(alice_note)


def test_restore_version_of_another_note_fails(alice, alice_note):
    other = services.note_create(owner=alice, title="Other", body="other")
    before = counts()
    with pytest.raises(Version.DoesNotExist):
        restore(alice_note, alice, other.head)
    assert counts() == before


# --------------------------------------------------------------------------
# Permissions
# --------------------------------------------------------------------------


def test_bob_cannot_edit_alices_note(alice_note, bob):
    before = counts()
    with pytest.raises(PermissionDenied):
        edit(alice_note, bob, "bob was here")
    assert counts() == before
    alice_note.refresh_from_db()
    assert "bob" not in alice_note.head.body


def test_bob_cannot_delete_alices_note(alice_note, bob):
    with pytest.raises(PermissionDenied):
        services.note_delete(document=alice_note, user=bob)
    alice_note.refresh_from_db()
    assert not alice_note.is_deleted
    assert Passage.objects.filter(document=alice_note, is_head=True).exists()


def test_bob_cannot_restore_alices_note(alice, alice_note, bob):
    v1 = alice_note.head
    edit(alice_note, alice, "second")
    before = counts()
    with pytest.raises(PermissionDenied):
        restore(alice_note, bob, v1)
    assert counts() == before


def test_selectors_hide_alices_note_from_bob(alice_note, bob):
    assert not selectors.notes_for_user(bob).exists()
    with pytest.raises(Document.DoesNotExist):
        selectors.note_get(bob, alice_note.pk)


# --------------------------------------------------------------------------
# Tags
# --------------------------------------------------------------------------


def test_field_tags_and_hashtags_are_case_folded(alice):
    note = services.note_create(
        owner=alice, title="t", body="Talk about #Python and #DJANGO-ninja.", tags="Infra, #DB web"
    )
    rows = selectors.note_tags(note)
    assert {name for name, from_body in rows if not from_body} == {"infra", "db", "web"}
    assert {name for name, from_body in rows if from_body} == {"python", "django-ninja"}
    assert set(Tag.objects.filter(owner=alice).values_list("name", flat=True)) == {
        "infra",
        "db",
        "web",
        "python",
        "django-ninja",
    }


def test_tag_list_input_is_accepted(alice):
    note = services.note_create(owner=alice, title="t", body="", tags=["Alpha", "#beta", "alpha"])
    assert tag_names(note) == {"alpha", "beta"}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("plain #real tag", {"real"}),
        ("```\n#fenced\n```\nafter #kept", {"kept"}),
        ("~~~\n#tilde\n~~~\n", set()),
        ("inline `#code` span", set()),
        ("# Heading\n\n## Sub heading\n", set()),
        ("#Heading-without-space is a tag", {"heading-without-space"}),
        ("entity &#123; and &#x41; and &amp;", set()),
        ("see https://example.com/page#section and http://x.org/#frag", set()),
        ("jump to [the setup](#setup-steps) below", set()),
        ("ticket #123 is numeric", set()),
        ("double ##hash not a tag", set()),
        ("word#inside no tag", set()),
        ("dup #Same and #same", {"same"}),
    ],
)
def test_hashtags_from_body(alice, body, expected):
    note = services.note_create(owner=alice, title="t", body=body)
    assert body_tags(note) == expected


def test_hashtags_follow_the_head_body(alice):
    note = services.note_create(owner=alice, title="t", body="first #alpha")
    edit(note, alice, "second #beta")
    note.refresh_from_db()
    assert body_tags(note) == {"beta"}


@pytest.mark.parametrize("bad", ["bad!tag", "_under", "-dash", "a" * 101, "sp@ce", "dot.tag"])
def test_invalid_tags_rejected(alice, bad):
    before = counts()
    with pytest.raises(ValidationError):
        services.note_create(owner=alice, title="t", body="b", tags=bad)
    assert counts() == before


def test_invalid_tag_on_edit_saves_nothing(alice, alice_note):
    before = counts()
    with pytest.raises(ValidationError):
        edit(alice_note, alice, "new body", tags="no!pe")
    assert counts() == before
    alice_note.refresh_from_db()
    assert alice_note.versions.count() == 1


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "body"),
    [
        ("", "body"),
        ("   ", "body"),
        ("t", "a\x00b"),
        ("t\x00", "body"),
        ("x" * 501, "body"),
        ("t", "lone \ud800 surrogate"),
        ("t", "\udfff"),
    ],
)
def test_invalid_content_rejected_on_create(alice, title, body):
    before = counts()
    with pytest.raises(ValidationError):
        services.note_create(owner=alice, title=title, body=body)
    assert counts() == before


def test_lone_surrogate_in_title_rejected(alice):
    before = counts()
    with pytest.raises(ValidationError):
        services.note_create(owner=alice, title="bad \ud800 title", body="body")
    assert counts() == before


def test_oversized_body_rejected(alice, settings):
    settings.LODE_MAX_NOTE_BYTES = 1024
    services.note_create(owner=alice, title="fits", body="x" * 1024)
    before = counts()
    with pytest.raises(ValidationError):
        services.note_create(owner=alice, title="big", body="x" * 1025)
    # Multi-byte characters count as bytes: 342 × 3 bytes = 1026 > 1024.
    with pytest.raises(ValidationError):
        services.note_create(owner=alice, title="big", body="€" * 342)
    assert counts() == before


@pytest.mark.parametrize("body", ["a\x00b", "\ud800", "y" * 2048])
def test_invalid_content_rejected_on_edit(alice, alice_note, settings, body):
    settings.LODE_MAX_NOTE_BYTES = 1024
    before = counts()
    head = alice_note.head
    with pytest.raises(ValidationError):
        edit(alice_note, alice, body)
    assert counts() == before
    alice_note.refresh_from_db()
    assert alice_note.head_id == head.pk


def test_empty_body_is_allowed(alice):
    note = services.note_create(owner=alice, title="Only a title", body="")
    assert note.head.byte_size == 0
    assert note.head.sha256 == sha("")


# --------------------------------------------------------------------------
# Passages
# --------------------------------------------------------------------------


def test_create_writes_head_passages_matching_body(alice_note):
    version = alice_note.head
    passages = list(Passage.objects.filter(version=version))
    assert passages
    for passage in passages:
        assert passage.is_head
        assert passage.document_id == alice_note.pk
        assert passage.text == version.body[passage.start : passage.end]
        assert passage.text_sha256 == sha(passage.text)
    joined = " ".join(p.text for p in passages)
    assert "Rotate the staging certs" in joined
    assert "maxmemory-policy" in joined


def test_passage_offsets_are_code_points(alice):
    body = "👍🏽 émoji first.\n\nCafé ☕ second paragraph with 中文.\n"
    note = services.note_create(owner=alice, title="Unicode", body=body)
    passages = list(Passage.objects.filter(version=note.head))
    assert passages
    for passage in passages:
        assert passage.text == body[passage.start : passage.end]


def test_edit_moves_head_flag_to_new_passages(alice, alice_note):
    v1 = alice_note.head
    v2 = edit(alice_note, alice, "Brand new paragraph.\n\nAnd a second one.\n")
    old = Passage.objects.filter(version=v1)
    new = Passage.objects.filter(version=v2)
    assert old.exists()
    assert new.exists()
    assert not old.filter(is_head=True).exists()
    assert not new.filter(is_head=False).exists()
    for passage in new:
        assert passage.text == v2.body[passage.start : passage.end]
    assert set(Passage.objects.filter(document=alice_note, is_head=True)) == set(new)


def test_restore_makes_restored_passages_head(alice, alice_note):
    v1 = alice_note.head
    v2 = edit(alice_note, alice, "interim text")
    v3 = restore(alice_note, alice, v1)
    heads = Passage.objects.filter(document=alice_note, is_head=True)
    assert heads.exists()
    assert set(heads.values_list("version_id", flat=True)) == {v3.pk}
    assert not Passage.objects.filter(version__in=[v1, v2], is_head=True).exists()


def test_delete_unindexes_every_passage(alice, alice_note):
    edit(alice_note, alice, "second version")
    services.note_delete(document=alice_note, user=alice)
    assert Passage.objects.filter(document=alice_note).exists()  # kept for audit
    assert not Passage.objects.filter(document=alice_note, is_head=True).exists()


def test_conflict_leaves_passages_unchanged(alice, alice_note):
    v1 = alice_note.head
    v2 = edit(alice_note, alice, "newer text")
    snapshot = list(Passage.objects.order_by("pk").values_list("pk", "is_head", "version_id"))
    with pytest.raises(services.EditConflict):
        services.note_update(
            document=alice_note, user=alice, base_version_id=v1.pk, title="t", body="stale"
        )
    assert list(Passage.objects.order_by("pk").values_list("pk", "is_head", "version_id")) == (
        snapshot
    )
    assert Passage.objects.filter(version=v2, is_head=True).exists()


# --------------------------------------------------------------------------
# Concurrent restores (PostgreSQL: real row locks between connections)
# --------------------------------------------------------------------------


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_concurrent_restores_from_one_page_make_one_version(alice, alice_note):
    """Five restores started from the same page (head v2) write one version: exactly one
    succeeds and four are refused as conflicts, never five identical versions."""
    v1 = alice_note.head
    v2 = edit(alice_note, alice, "second")

    def restore_v1():
        note = Document.objects.get(pk=alice_note.pk)
        return services.note_restore(
            document=note, user=alice, version_id=v1.pk, base_version_id=v2.pk
        )

    results = race([restore_v1] * 5)
    written = [r for r in results if isinstance(r, Version)]
    refused = [r for r in results if isinstance(r, services.RestoreConflict)]
    assert len(written) == 1, results
    assert len(refused) == 4, results
    alice_note.refresh_from_db()
    assert alice_note.versions.count() == 3
    assert alice_note.head_id == written[0].pk
    assert alice_note.head.body == v1.body
    assert {c.head.pk for c in refused} == {written[0].pk}  # each saw the real head
    assert set(Passage.objects.filter(is_head=True, document=alice_note).values_list(
        "version_id", flat=True)) == {written[0].pk}  # fmt: skip


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_concurrent_restores_and_edit_from_one_head_make_one_version(alice, alice_note):
    """Restores racing an edit, all based on the same head: one write wins, the rest are
    conflicts — a restore never silently overwrites the edit (or the other way round)."""
    v1 = alice_note.head
    v2 = edit(alice_note, alice, "second")

    def restore_v1():
        note = Document.objects.get(pk=alice_note.pk)
        return services.note_restore(
            document=note, user=alice, version_id=v1.pk, base_version_id=v2.pk
        )

    def edit_from_v2():
        note = Document.objects.get(pk=alice_note.pk)
        return services.note_update(
            document=note, user=alice, base_version_id=v2.pk, title="T", body="edited"
        )

    results = race([restore_v1, restore_v1, edit_from_v2, restore_v1, restore_v1, restore_v1])
    written = [r for r in results if isinstance(r, Version)]
    refused = [r for r in results if isinstance(r, services.EditConflict)]
    assert (len(written), len(refused)) == (1, 5), results
    alice_note.refresh_from_db()
    assert alice_note.versions.count() == 3
    assert alice_note.head_id == written[0].pk


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_concurrent_edits_from_one_head_make_one_version(alice, alice_note):
    """Writers that waited for the row lock see the head as committed meanwhile (a lock
    query joining the head as of its first read would show waiters no head at all)."""
    v1 = alice_note.head

    def edit_from_v1(n: int):
        def call():
            note = Document.objects.get(pk=alice_note.pk)
            return services.note_update(
                document=note, user=alice, base_version_id=v1.pk, title="T", body=f"edit {n}"
            )

        return call

    results = race([edit_from_v1(n) for n in range(5)])
    written = [r for r in results if isinstance(r, Version)]
    refused = [r for r in results if isinstance(r, services.EditConflict)]
    assert (len(written), len(refused)) == (1, 4), results
    assert {(c.base.pk, c.head.pk) for c in refused} == {(v1.pk, written[0].pk)}
    alice_note.refresh_from_db()
    assert alice_note.versions.count() == 2
