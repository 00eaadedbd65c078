"""Export → fresh install → import gives back the same notes, by content hash; re-importing
never duplicates; a newer note in lode is never rolled back; each user exports only what
they may see. Runs on both databases."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from django.core.management import call_command

from notes import services
from notes.export import (
    MANIFEST_PATH,
    ExportTooLarge,
    ZipSink,
    export_documents,
    export_to_path,
    safe_stem,
)
from notes.front_matter import split_front_matter
from notes.markdown_import import import_export_folder
from notes.models import Document, DocumentTag, Tag, Version
from spaces.models import Role, Space
from spaces.services import member_add, space_create
from tests import factories

# Titles that are not file names, and two notes with the same title.
TITLES = ["Plans: Q3/Q4 * draft?", "Same title", "same TITLE", ".hidden", "CON", "é" * 200]


def content_state(user) -> list[tuple[object, ...]]:
    """Every live note the user may see, as content: space (name, personal), title, manual
    tags, and the SHA-256 of each version's title and body in order."""
    rows = []
    documents = Document.objects.filter(
        space__memberships__user=user, deleted_at__isnull=True, kind=Document.Kind.NOTE
    ).select_related("space")
    for document in documents:
        history = Version.objects.filter(document=document).order_by("number")
        versions = tuple((v.title, v.sha256) for v in history)
        tags = tuple(
            sorted(
                DocumentTag.objects.filter(document=document, from_body=False).values_list(
                    "tag__name", flat=True
                )
            )
        )
        rows.append((document.space.name, document.space.is_personal, tags, versions))
    return sorted(rows)


def wipe_notes() -> None:
    """What a fresh install has of notes: nothing (the accounts stay)."""
    Document.objects.all().delete()
    Tag.objects.all().delete()
    Space.objects.filter(personal_of__isnull=True).delete()


@pytest.fixture
def library(alice, bob):
    """Alice's notes (awkward titles, tags, links, CRLF and a BOM-like start, several
    versions), a space she shares with bob, and bob's private note."""
    team = space_create(by=alice, name="Team: ops/infra")
    member_add(by=alice, space=team, username="bob", role=Role.EDITOR)
    notes = [
        services.note_create(owner=alice, title=title, body=f"# {title}\n\nBody {i}. #tagged\n")
        for i, title in enumerate(TITLES)
    ]
    linked = services.note_create(
        owner=alice,
        title="Runbook",
        body="See [[Same title]] and [[Plans: Q3/Q4 * draft?|plans]].\r\nLine two\r\n\n---\nx",
        tags="ops, infra",
    )
    factories.edit(linked, alice, linked.head.body + "\nsecond")
    factories.edit(linked, alice, linked.head.body + "\nthird")
    shared = services.note_create(owner=bob, title="Team note", body="Shared by bob", space=team)
    private = services.note_create(owner=bob, title="Bob private", body="secret words")
    return {"notes": notes, "linked": linked, "shared": shared, "private": private, "team": team}


def test_round_trip_into_a_fresh_install_is_equal_by_content_hash(tmp_path, alice, library):
    before = content_state(alice)
    export_to_path(tmp_path / "vault", user=alice, versions=True)
    wipe_notes()
    report = import_export_folder(tmp_path / "vault", user=alice)
    assert report.count("skipped") == 0, [r.line() for r in report.files]
    assert report.count("created") == len(before)
    assert content_state(alice) == before
    again = import_export_folder(tmp_path / "vault", user=alice)
    assert again.count("unchanged") == len(before), [r.line() for r in again.files]
    assert content_state(alice) == before


def test_reimport_into_the_same_install_changes_nothing(tmp_path, alice, library):
    before = content_state(alice)
    count = Document.objects.count()
    export_to_path(tmp_path / "vault", user=alice)
    report = import_export_folder(tmp_path / "vault", user=alice)
    assert report.count("unchanged") == len(before), [r.line() for r in report.files]
    assert Document.objects.count() == count
    assert content_state(alice) == before


def test_bodies_are_byte_for_byte_and_links_untouched(tmp_path, alice, library):
    export_to_path(tmp_path / "vault", user=alice)
    linked = library["linked"]
    files = list((tmp_path / "vault").rglob("Runbook.md"))
    assert len(files) == 1
    fields, body = split_front_matter(files[0].read_bytes().decode("utf-8"))
    assert body.encode("utf-8") == linked.head.body.encode("utf-8")
    assert "[[Same title]]" in body and "\r\n" in body
    assert fields["lode_id"] == linked.pk and fields["version"] == 3
    assert fields["tags"] == ["infra", "ops"] and fields["space"] == "Personal"


def test_file_names_are_safe_and_unique(tmp_path, alice, library):
    export_to_path(tmp_path / "vault", user=alice)
    names = sorted(p.name for p in (tmp_path / "vault" / "Personal").iterdir())
    assert "Plans- Q3-Q4 - draft-.md" in names
    assert "Same title.md" in names and "same TITLE (2).md" in names
    assert "hidden.md" in names and "CON_.md" in names
    assert all(len(name.encode()) < 200 for name in names)
    assert safe_stem("") == "Untitled" and safe_stem("a/b") == "a-b"
    plans = (tmp_path / "vault" / "Personal" / "Plans- Q3-Q4 - draft-.md").read_text()
    assert 'aliases: ["Plans: Q3/Q4 * draft?"]' in plans  # Obsidian resolves [[links]] by it


def test_each_user_exports_only_what_they_may_see(tmp_path, alice, bob, library):
    export_to_path(tmp_path / "alice", user=alice)
    export_to_path(tmp_path / "bob", user=bob)
    alice_text = "".join(p.read_text() for p in (tmp_path / "alice").rglob("*.md"))
    bob_text = "".join(p.read_text() for p in (tmp_path / "bob").rglob("*.md"))
    assert "Shared by bob" in alice_text and "secret words" not in alice_text
    assert "secret words" in bob_text and "Shared by bob" in bob_text
    assert "Body 0" not in bob_text  # alice's personal notes


def test_newer_version_in_lode_is_kept(tmp_path, alice, library):
    linked = library["linked"]
    export_to_path(tmp_path / "vault", user=alice)
    factories.edit(linked, alice, "edited in lode after the export")
    path = next((tmp_path / "vault").rglob("Runbook.md"))
    # The exported (older) text: lode holds it as version 3 and keeps its version 4.
    report = import_export_folder(tmp_path / "vault", user=alice)
    result = next(r for r in report.files if r.path.endswith("Runbook.md"))
    assert result.outcome == "unchanged" and "version 4 stays" in result.detail
    linked.refresh_from_db()
    assert linked.head.body == "edited in lode after the export"
    # Edited in Obsidian meanwhile: a new version on top; lode's version 4 stays in history.
    path.write_bytes(path.read_bytes() + b"\nedited in Obsidian")
    report = import_export_folder(tmp_path / "vault", user=alice)
    result = next(r for r in report.files if r.path.endswith("Runbook.md"))
    assert result.outcome == "updated" and "version 4 was newer" in result.detail
    linked.refresh_from_db()
    assert linked.head.number == 5 and linked.head.body.endswith("edited in Obsidian")
    assert Version.objects.get(document=linked, number=4).body == "edited in lode after the export"


def test_bad_files_are_refused_one_by_one(tmp_path, alice, library, settings):
    export_to_path(tmp_path / "vault", user=alice)
    vault = tmp_path / "vault"
    (vault / "Personal" / "broken.md").write_bytes(b"---\nlode_id: 1\n---\n\xff\xfe bad")
    (vault / "Personal" / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (vault / "Personal" / "huge.md").write_bytes(b"x" * (settings.LODE_MAX_NOTE_BYTES + 70_000))
    (vault / "Personal" / "unclosed.md").write_text("---\nlode_id: 1\ntitle: x\n")
    (vault / "Personal" / "New in Obsidian.md").write_text("written outside lode [[Runbook]]")
    report = import_export_folder(vault, user=alice)
    reasons = {r.path.rsplit("/", 1)[1]: r for r in report.files}
    assert "not valid UTF-8" in reasons["broken.md"].detail
    assert "binary" in reasons["binary.md"].detail
    assert "limit" in reasons["huge.md"].detail
    assert "never closes" in reasons["unclosed.md"].detail
    created = reasons["New in Obsidian.md"]
    assert created.outcome == "created"
    assert Document.objects.get(pk=created.document_id).head.body == (
        "written outside lode [[Runbook]]"
    )
    again = import_export_folder(vault, user=alice)
    assert {r.path: r.outcome for r in again.files}[created.path] == "unchanged"


def test_shared_space_is_found_by_name_or_created(tmp_path, alice, bob, library):
    export_to_path(tmp_path / "vault", user=bob)
    wipe_notes()
    import_export_folder(tmp_path / "vault", user=bob)
    team = Space.objects.get(name="Team: ops/infra")
    assert team.memberships.get().user == bob  # created, bob its admin
    assert Document.objects.get(title="Team note").space == team
    assert Document.objects.get(title="Bob private").space.personal_of == bob


def test_viewer_cannot_import_into_a_space(tmp_path, alice, bob, library):
    export_to_path(tmp_path / "vault", user=bob)
    wipe_notes()
    team = space_create(by=alice, name="Team: ops/infra")
    member_add(by=alice, space=team, username="bob", role=Role.VIEWER)
    report = import_export_folder(tmp_path / "vault", user=bob)
    refused = [r for r in report.files if r.outcome == "skipped"]
    assert len(refused) == 1 and "viewer" in refused[0].detail
    assert not Document.objects.filter(title="Team note").exists()


def test_externals_are_exported_and_skipped_on_import(tmp_path, alice, library):
    factories.make_external(alice, source_name="Docs")
    report = export_to_path(tmp_path / "vault", user=alice)
    assert report.externals == 1
    text = next((tmp_path / "vault" / "external").rglob("*.md")).read_text()
    assert 'lode_kind: "external"' in text and "Runbook for the cache." in text
    imported = import_export_folder(tmp_path / "vault", user=alice)
    skipped = [r for r in imported.files if r.outcome == "skipped"]
    assert len(skipped) == 1 and "re-add its source" in skipped[0].detail


def test_zip_export_and_its_bound(tmp_path, alice, library):
    buffer = io.BytesIO()
    sink = ZipSink(buffer)
    export_documents(sink, user=alice)
    sink.close()
    names = zipfile.ZipFile(buffer).namelist()
    assert MANIFEST_PATH in names and "Personal/Runbook.md" in names
    with pytest.raises(ExportTooLarge, match="over 100 bytes"):
        export_documents(ZipSink(io.BytesIO()), user=alice, max_bytes=100)


def test_commands_round_trip(tmp_path, alice, library):
    before = content_state(alice)
    out = io.StringIO()
    call_command(
        "lode_export", str(tmp_path / "n.zip"), "--user", "alice", "--versions", stdout=out
    )
    assert "exported" in out.getvalue()
    with zipfile.ZipFile(tmp_path / "n.zip") as archive:
        archive.extractall(tmp_path / "unzipped")
    wipe_notes()
    out = io.StringIO()
    call_command("lode_import_markdown", str(tmp_path / "unzipped"), "--user", "alice", stdout=out)
    assert f"created {len(before)}," in out.getvalue()
    assert content_state(alice) == before


def test_export_refuses_a_folder_that_is_not_empty(tmp_path, alice):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.md").write_text("mine")
    with pytest.raises(FileExistsError):
        export_to_path(tmp_path / "full", user=alice)
    assert (tmp_path / "full" / "keep.md").read_text() == "mine"
    assert not Path(tmp_path / "full" / ".lode").exists()


def test_round_trip_without_versions_keeps_heads_tags_spaces_and_dates(
    tmp_path, alice, library, settings
):
    def heads() -> list[tuple[object, ...]]:
        return sorted(
            (d.space.name, d.title, d.head.sha256, d.created_at, d.updated_at, tags)
            for d in Document.objects.filter(space__memberships__user=alice).select_related(
                "head", "space"
            )
            for tags in [tuple(sorted(d.documenttag_set.values_list("tag__name", flat=True)))]
        )

    before = heads()
    export_to_path(tmp_path / "vault", user=alice)
    big = tmp_path / "vault" / "Personal" / "Runbook.md"
    too_big = big.read_text().replace("Line two", "x" * (settings.LODE_MAX_NOTE_BYTES + 10))
    (tmp_path / "vault" / "Personal" / "Too big.md").write_text(
        too_big.replace(f"lode_id: {library['linked'].pk}", "lode_id: 999999")
    )
    wipe_notes()
    report = import_export_folder(tmp_path / "vault", user=alice)
    skipped = [r for r in report.files if r.outcome == "skipped"]
    assert [r.path for r in skipped] == ["Personal/Too big.md"]
    assert "limit" in skipped[0].detail
    assert report.count("created") == len(before)
    assert heads() == before
    assert import_export_folder(tmp_path / "vault", user=alice).count("created") == 0
