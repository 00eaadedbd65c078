"""Verified evidence opening: the service, the page, the API and the
importer's provenance; each outcome, isolation between users, broken links, source files
changed on disk, and the database re-check after the file read."""

from __future__ import annotations

import hashlib
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils.html import escape

from lode_site.models import ApiToken, token_digest
from notes import services, sources
from notes.models import Document, Version
from retrieval.links import evidence_url
from retrieval.models import Passage
from retrieval.search.evidence import (
    EvidenceStatus,
    Unavailable,
    open_evidence,
    passage_context,
)

pytestmark = pytest.mark.django_db

RAW_TOKEN = "lode-evidence-token-0123456789abcdefghijklmnopqrstuvwxyz"
CURRENT, SUPERSEDED = EvidenceStatus.VERIFIED_CURRENT, EvidenceStatus.VERIFIED_SUPERSEDED
SOURCE_CHANGED, UNAVAILABLE = EvidenceStatus.SOURCE_CHANGED, EvidenceStatus.UNAVAILABLE

CERTS = "Rotate the staging certs with certbot before Friday."
REDIS = "Set maxmemory-policy allkeys-lru on the cache. #ops"


def passage_with(document: Document, text: str) -> Passage:
    """The head passage of `document` whose text contains `text`."""
    return Passage.objects.select_related("version").get(
        version_id=document.head_id, text__contains=text
    )


def ids(passage: Passage) -> tuple[int, int, int, str]:
    return passage.document_id, passage.version_id, passage.pk, passage.version.sha256


def api_url(passage: Passage) -> str:
    return "/api/evidence/{}/{}/{}/{}".format(*ids(passage))


def without_csrf(html: str) -> str:
    """A page's HTML minus the per-request CSRF token and the user name in the top bar."""
    html = re.sub(r'"X-CSRFToken": "[^"]*"', "", html)
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", html)


def edit(note: Document, user, body: str) -> Version:
    note.refresh_from_db()
    return services.note_update(
        document=note, user=user, base_version_id=note.head_id, title=note.title, body=body
    )


# --- the URL -----------------------------------------------------------------------------------


def test_evidence_url_carries_document_version_passage_and_hash(alice_note):
    passage = passage_with(alice_note, CERTS)
    url = evidence_url(passage)
    document, version, passage_id, sha = ids(passage)
    assert url == f"/evidence/{document}/{version}/{passage_id}/{sha}/"
    assert len(sha) == 64


# --- verified, current ---------------------------------------------------------------------------


def test_current_version_is_verified_current(alice, alice_note):
    passage = passage_with(alice_note, CERTS)
    outcome = open_evidence(alice, *ids(passage))
    assert outcome.status == CURRENT
    assert outcome.verified and outcome.http_status == 200
    assert outcome.passage == passage and outcome.version == alice_note.head
    assert outcome.head == alice_note.head and outcome.text_in_current is None


def test_current_page_shows_state_passage_in_context_and_hash(alice_client, alice_note):
    passage = passage_with(alice_note, CERTS)
    response = alice_client.get(evidence_url(passage))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-status="verified_current"' in page
    assert "verified · current" in page
    assert "Deploy runbook" in page
    assert f"lines {passage.start_line}–{passage.end_line}" in page
    assert f"<mark>{escape(passage.text)}</mark>" in page
    assert passage.version.sha256 in page and passage.text_sha256 in page
    assert "Version 1 of 1" in page


def test_page_escapes_passage_text_and_query(alice, alice_client):
    body = "Intro.\n\n<script>alert(1)</script> and </mark> and &lt; literally.\n"
    note = services.note_create(owner=alice, title="<b>XSS</b>", body=body)
    passage = passage_with(note, "alert")
    response = alice_client.get(
        evidence_url(passage), {"q": '"><script>alert(2)</script>', "mode": "lexical"}
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "<script>alert" not in page and "<b>XSS</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; and &lt;/mark&gt; and &amp;lt;" in page
    assert page.count("<mark>") == 1 and page.count("</mark>") == 1
    assert "back to results" in page
    # The way back is the whole search (query, mode, reranker), URL-encoded then escaped.
    assert "?q=%22%3E%3Cscript%3Ealert%282%29%3C%2Fscript%3E&amp;mode=lexical&amp;rerank=" in page


def test_search_results_link_evidence_with_the_way_back(alice, alice_client, alice_note):
    page = alice_client.get("/search", {"q": "certbot", "mode": "lexical"}).content.decode()
    passage = passage_with(alice_note, "certbot")
    link = f'href="{evidence_url(passage)}?q=certbot&amp;mode=lexical&amp;rerank='
    assert link in page
    evidence = alice_client.get(
        evidence_url(passage), {"q": "certbot", "mode": "lexical", "rerank": "off"}
    ).content.decode()
    assert 'href="/search?q=certbot&amp;mode=lexical&amp;rerank=off">← back to results' in evidence


# --- verified, superseded --------------------------------------------------------------------


def test_edit_keeping_the_text_supersedes_with_text_in_current(alice, alice_client, alice_note):
    passage = passage_with(alice_note, CERTS)
    old_body = alice_note.head.body
    head = edit(alice_note, alice, old_body + "\nA NEW PARAGRAPH written later.\n")

    outcome = open_evidence(alice, *ids(passage))
    assert outcome.status == SUPERSEDED and outcome.verified
    assert outcome.version.pk == passage.version_id and outcome.head == head
    assert outcome.text_in_current is True
    assert outcome.current_url == f"/notes/{alice_note.pk}"

    response = alice_client.get(evidence_url(passage))
    page = response.content.decode()
    assert response.status_code == 200
    assert "verified · superseded" in page
    assert f'href="/notes/{alice_note.pk}"' in page
    assert "still occurs, word for word, in the current version" in page
    assert "NEW PARAGRAPH" not in page  # the old version's text, never the new one's


def test_edit_removing_the_text_supersedes_without_text_in_current(alice, alice_client, alice_note):
    passage = passage_with(alice_note, CERTS)
    edit(alice_note, alice, "# Deploy runbook\n\nRotate the certs whenever.\n")
    outcome = open_evidence(alice, *ids(passage))
    assert outcome.status == SUPERSEDED
    assert outcome.text_in_current is False
    assert outcome.passage.text == passage.text  # the cited text, unchanged
    page = alice_client.get(evidence_url(passage)).content.decode()
    assert "no longer occurs word for word in the current version" in page
    assert "Rotate the certs whenever" not in page


def test_superseded_twice_still_links_to_the_latest_head(alice, alice_note):
    passage = passage_with(alice_note, CERTS)
    edit(alice_note, alice, alice_note.head.body + "\nv2\n")
    v3 = edit(alice_note, alice, "# Deploy runbook\n\nOnly v3.\n")
    outcome = open_evidence(alice, *ids(passage))
    assert outcome.status == SUPERSEDED and outcome.head == v3
    assert outcome.text_in_current is False


# --- unavailable ---------------------------------------------------------------------------


def test_deleted_note_is_unavailable(alice, alice_client, alice_note):
    passage = passage_with(alice_note, CERTS)
    services.note_delete(document=alice_note, user=alice)
    outcome = open_evidence(alice, *ids(passage))
    assert outcome.status == UNAVAILABLE and outcome.reason == Unavailable.DELETED
    assert outcome.passage is None and outcome.document is None

    response = alice_client.get(evidence_url(passage))
    page = response.content.decode()
    assert response.status_code == 404
    assert "unavailable" in page
    assert CERTS not in page and "Deploy runbook" not in page


def test_another_users_document_looks_exactly_like_a_missing_one(
    alice, alice_note, bob, bob_client
):
    passage = passage_with(alice_note, CERTS)
    missing = (999_999, 999_999, 999_999, "0" * 64)

    theirs, nothing = open_evidence(bob, *ids(passage)), open_evidence(bob, *missing)
    assert theirs.status == UNAVAILABLE and theirs.reason == Unavailable.NOT_FOUND
    assert theirs == nothing

    response = bob_client.get(evidence_url(passage))
    other = bob_client.get("/evidence/{}/{}/{}/{}/".format(*missing))
    assert response.status_code == other.status_code == 404
    page = response.content.decode()
    for secret in (CERTS, "Deploy runbook", "certbot", passage.version.sha256[:16]):
        assert secret not in page
    assert without_csrf(page) == without_csrf(other.content.decode())

    api, api_missing = (
        bob_client.get(api_url(passage)),
        bob_client.get("/api/evidence/{}/{}/{}/{}".format(*missing)),
    )
    assert api.status_code == api_missing.status_code == 404
    assert api.json() == api_missing.json()
    assert api.json()["status"] == "unavailable" and api.json()["passage"] is None
    assert "certbot" not in api.content.decode()


def test_wrong_hash_is_unavailable(alice, alice_client, alice_note):
    document, version, passage_id, sha = ids(passage_with(alice_note, CERTS))
    for wrong in ("0" * 64, sha.upper(), sha[:-1], "not-a-hash"):
        outcome = open_evidence(alice, document, version, passage_id, wrong)
        assert outcome.status == UNAVAILABLE and outcome.reason == Unavailable.MISMATCH
    response = alice_client.get(f"/evidence/{document}/{version}/{passage_id}/{'0' * 64}/")
    assert response.status_code == 404 and CERTS not in response.content.decode()


def test_version_of_another_document_is_unavailable(alice, alice_note):
    other = services.note_create(owner=alice, title="Other", body="Other words entirely.")
    mine, theirs = passage_with(alice_note, CERTS), passage_with(other, "Other words")
    # the other document's version and passage under this document's id, and mixes
    for document, version, passage, sha in (
        (alice_note.pk, theirs.version_id, theirs.pk, theirs.version.sha256),
        (alice_note.pk, theirs.version_id, mine.pk, theirs.version.sha256),
        (alice_note.pk, mine.version_id, theirs.pk, mine.version.sha256),
        (other.pk, mine.version_id, mine.pk, mine.version.sha256),
    ):
        outcome = open_evidence(alice, document, version, passage, sha)
        assert outcome.status == UNAVAILABLE and outcome.reason == Unavailable.MISMATCH


def test_passage_of_another_version_is_unavailable(alice, alice_note):
    old = passage_with(alice_note, CERTS)
    edit(alice_note, alice, alice_note.head.body + "\nmore\n")
    new = passage_with(alice_note, CERTS)
    assert new.version_id != old.version_id
    # new version + old passage, and old version + new passage: both refused
    for version, passage in ((new.version, old), (old.version, new)):
        outcome = open_evidence(alice, alice_note.pk, version.pk, passage.pk, version.sha256)
        assert outcome.status == UNAVAILABLE and outcome.reason == Unavailable.MISMATCH


def test_ids_of_another_users_version_leak_nothing(alice, alice_note, bob):
    theirs = services.note_create(owner=bob, title="Bob", body="Bob's secret words.")
    bob_passage = passage_with(theirs, "secret")
    mixed = open_evidence(
        alice, alice_note.pk, bob_passage.version_id, bob_passage.pk, bob_passage.version.sha256
    )
    made_up = open_evidence(alice, alice_note.pk, 999_999, 999_999, bob_passage.version.sha256)
    assert mixed == made_up and mixed.status == UNAVAILABLE


def test_stored_rows_that_fail_their_hash_are_unavailable(alice, alice_note):
    passage = passage_with(alice_note, CERTS)
    Version.objects.filter(pk=passage.version_id).update(body="tampered " + passage.version.body)
    outcome = open_evidence(alice, *ids(passage))
    assert outcome.status == UNAVAILABLE and outcome.reason == Unavailable.INTEGRITY


def test_tampered_passage_text_is_unavailable(alice, alice_note):
    passage = passage_with(alice_note, CERTS)
    Passage.objects.filter(pk=passage.pk).update(text="Rotate nothing.")
    outcome = open_evidence(alice, *ids(passage))
    assert outcome.status == UNAVAILABLE and outcome.reason == Unavailable.INTEGRITY


def test_login_required(client, alice_note):
    passage = passage_with(alice_note, CERTS)
    response = client.get(evidence_url(passage))
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert client.get(api_url(passage)).status_code == 401


# --- source files ------------------------------------------------------------------------------


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "Field notes"
    root.mkdir()
    (root / "runbook.md").write_text(f"# Runbook\n\n{CERTS}\n\n## Redis\n\n{REDIS}\n")
    (root / "bom.md").write_bytes("\ufeff# With BOM\n\nBOM words here.\n".encode())
    return root


def import_vault(root: Path, *extra: str) -> str:
    out = StringIO()
    call_command(
        "lode_import_markdown",
        str(root),
        *extra,
        user="alice",
        no_progress=True,
        stdout=out,
        stderr=StringIO(),
    )
    return out.getvalue()


def imported(key: str) -> Document:
    return Document.objects.select_related("head").get(owner__username="alice", external_key=key)


def test_import_records_source_path_hash_and_name(alice, vault):
    import_vault(vault)
    note = imported("runbook.md")
    raw = (vault / "runbook.md").read_bytes()
    assert note.head.source_path == str((vault / "runbook.md").resolve())
    assert Path(note.head.source_path).is_absolute()
    assert note.head.source_sha256 == hashlib.sha256(raw).hexdigest()
    assert note.source_name == "Field notes"
    # the hash is of the raw bytes: the BOM the body drops is still counted
    bom = imported("bom.md")
    assert bom.head.source_sha256 == hashlib.sha256((vault / "bom.md").read_bytes()).hexdigest()
    assert bom.head.source_sha256 != bom.head.sha256


def test_import_source_option_and_unchanged_reimport(alice, vault):
    import_vault(vault, "--source", "work")
    note = imported("runbook.md")
    assert note.source_name == "work"
    first = note.head_id
    out = import_vault(vault, "--source", "work")
    assert "unchanged 2" in out
    assert imported("runbook.md").head_id == first  # unchanged content writes no version

    (vault / "runbook.md").write_text(f"# Runbook\n\n{CERTS}\n\nNew line.\n")
    import_vault(vault)  # default name again: the folder's
    note = imported("runbook.md")
    assert note.head_id != first and note.source_name == "Field notes"
    assert note.head.source_sha256 == sources.sha256_bytes((vault / "runbook.md").read_bytes())


def test_import_rejects_a_blank_source_name(alice, vault):
    with pytest.raises(CommandError, match="--source"):
        import_vault(vault, "--source", "  ")
    assert not Document.objects.exists()


def test_typed_notes_have_no_source(alice_note):
    assert alice_note.head.source_path == "" and alice_note.head.source_sha256 == ""
    assert alice_note.source_name == ""


def test_imported_file_unchanged_is_verified_current(alice, vault):
    import_vault(vault)
    outcome = open_evidence(alice, *ids(passage_with(imported("runbook.md"), CERTS)))
    assert outcome.status == CURRENT
    assert "source file still has the bytes" in outcome.message


def test_imported_file_edited_on_disk_is_source_changed(alice, alice_client, vault):
    import_vault(vault)
    passage = passage_with(imported("runbook.md"), CERTS)
    (vault / "runbook.md").write_text("# Runbook\n\nSomething else EDITED ON DISK.\n")

    outcome = open_evidence(alice, *ids(passage))
    assert outcome.status == SOURCE_CHANGED and not outcome.verified
    assert outcome.source_detail == "the source file's bytes changed since it was indexed"
    assert outcome.passage == passage  # the stored text, still shown

    response = alice_client.get(evidence_url(passage))
    page = response.content.decode()
    assert response.status_code == 200
    assert "source changed" in page
    assert "the text lode stored when the file was indexed" in page
    assert f"<mark>{escape(passage.text)}</mark>" in page
    assert "EDITED ON DISK" not in page

    data = alice_client.get(api_url(passage)).json()
    assert data["status"] == "source_changed" and data["passage"]["text"] == passage.text


def test_imported_file_deleted_is_source_changed(alice, vault):
    import_vault(vault)
    passage = passage_with(imported("runbook.md"), CERTS)
    (vault / "runbook.md").unlink()
    outcome = open_evidence(alice, *ids(passage))
    assert outcome.status == SOURCE_CHANGED
    assert outcome.source_detail == "the source file is missing"


def test_imported_file_replaced_by_symlink_is_source_changed(alice, vault, tmp_path):
    import_vault(vault)
    passage = passage_with(imported("runbook.md"), CERTS)
    # a link to a file with the very same bytes is still refused: links are never followed
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_bytes((vault / "runbook.md").read_bytes())
    (vault / "runbook.md").unlink()
    (vault / "runbook.md").symlink_to(elsewhere)
    outcome = open_evidence(alice, *ids(passage))
    assert outcome.status == SOURCE_CHANGED
    assert "symbolic link" in outcome.source_detail


def test_imported_folder_replaced_by_symlink_is_source_changed(alice, vault, tmp_path):
    import_vault(vault)
    passage = passage_with(imported("runbook.md"), CERTS)
    moved = tmp_path / "moved"
    vault.rename(moved)
    vault.symlink_to(moved, target_is_directory=True)  # same bytes, reached through a link
    outcome = open_evidence(alice, *ids(passage))
    assert outcome.status == SOURCE_CHANGED
    assert outcome.source_detail == "the source path now goes through a symbolic link"


def test_imported_file_over_the_size_limit_is_source_changed(alice, vault, settings):
    import_vault(vault)
    passage = passage_with(imported("runbook.md"), CERTS)
    settings.LODE_MAX_NOTE_BYTES = 1024
    with (vault / "runbook.md").open("a") as handle:
        handle.write("x" * 2000)
    outcome = open_evidence(alice, *ids(passage))
    assert outcome.status == SOURCE_CHANGED and "note limit" in outcome.source_detail


def test_database_is_rechecked_after_the_file_read(alice, vault, monkeypatch):
    """The note is edited while its file is being read: the answer must come from the second
    database read (superseded), not the first (current)."""
    import_vault(vault)
    note = imported("runbook.md")
    passage = passage_with(note, CERTS)
    real_read = sources.read_source_file
    calls = []

    def read_while_someone_edits(path: Path, *, limit: int | None = None) -> sources.SourceFile:
        calls.append(path)
        found = real_read(path, limit=limit)  # the file still matches...
        edit(note, alice, note.head.body + "\nEdited during the read.\n")  # ...the DB moves on
        return found

    monkeypatch.setattr(sources, "read_source_file", read_while_someone_edits)
    outcome = open_evidence(alice, *ids(passage))
    assert calls == [Path(passage.version.source_path)]
    assert outcome.status == SUPERSEDED
    assert outcome.text_in_current is True


def test_delete_during_the_file_read_is_unavailable(alice, vault, monkeypatch):
    import_vault(vault)
    note = imported("runbook.md")
    passage = passage_with(note, CERTS)
    real_read = sources.read_source_file
    calls = []

    def read_while_someone_deletes(path: Path, *, limit: int | None = None) -> sources.SourceFile:
        calls.append(path)
        found = real_read(path, limit=limit)
        services.note_delete(document=note, user=alice)
        return found

    monkeypatch.setattr(sources, "read_source_file", read_while_someone_deletes)
    outcome = open_evidence(alice, *ids(passage))
    assert calls == [Path(passage.version.source_path)]
    assert outcome.status == UNAVAILABLE and outcome.reason == Unavailable.DELETED


def test_superseded_imported_version_does_not_read_the_file(alice, vault, monkeypatch):
    import_vault(vault)
    passage = passage_with(imported("runbook.md"), CERTS)
    (vault / "runbook.md").write_text(f"# Runbook\n\n{CERTS}\n\nAdded.\n")
    import_vault(vault)

    def must_not_read(path: Path, *, limit: int | None = None) -> sources.SourceFile:
        raise AssertionError("a superseded version's file is not re-read")

    monkeypatch.setattr(sources, "read_source_file", must_not_read)
    outcome = open_evidence(alice, *ids(passage))
    assert outcome.status == SUPERSEDED and outcome.text_in_current is True


@pytest.mark.django_db(transaction=True)
def test_file_is_read_outside_any_transaction(monkeypatch, tmp_path):
    from django.contrib.auth.models import User

    alice = User.objects.create_user("alice", password="x")
    root = tmp_path / "v"
    root.mkdir()
    (root / "a.md").write_text(f"# A\n\n{CERTS}\n")
    import_vault(root)
    passage = passage_with(imported("a.md"), CERTS)
    seen = []
    real_read = sources.read_source_file

    def spy(path: Path, *, limit: int | None = None) -> sources.SourceFile:
        seen.append(connection.in_atomic_block)
        return real_read(path, limit=limit)

    monkeypatch.setattr(sources, "read_source_file", spy)
    client = Client()
    client.force_login(alice)
    assert client.get(evidence_url(passage)).status_code == 200
    assert seen == [False]


# --- the API -----------------------------------------------------------------------------------


def test_api_current(alice_client, alice_note):
    passage = passage_with(alice_note, CERTS)
    response = alice_client.get(api_url(passage))
    assert response.status_code == 200
    data = response.json()
    assert data["status"] == "verified_current"
    assert data["document"] == alice_note.pk and data["version"] == passage.version_id
    assert data["passage"] == {
        "id": passage.pk,
        "text": passage.text,
        "offset_unit": "unicode_code_point",
        "start": passage.start,
        "end": passage.end,
        "start_line": passage.start_line,
        "end_line": passage.end_line,
        "text_sha256": passage.text_sha256,
    }
    assert data["version_sha256"] == passage.version.sha256
    assert data["head_version_id"] == passage.version_id
    assert data["current_url"] == f"/notes/{alice_note.pk}"
    assert data["text_in_current"] is None


def test_api_superseded_and_unavailable(alice, alice_client, alice_note):
    passage = passage_with(alice_note, REDIS)
    head = edit(alice_note, alice, "# Deploy runbook\n\nRedis is gone.\n")
    data = alice_client.get(api_url(passage)).json()
    assert data["status"] == "verified_superseded"
    assert data["head_version_id"] == head.pk and data["version"] == passage.version_id
    assert data["text_in_current"] is False
    assert data["passage"]["text"] == passage.text

    services.note_delete(document=alice_note, user=alice)
    response = alice_client.get(api_url(passage))
    assert response.status_code == 404
    data = response.json()
    assert data["status"] == "unavailable" and data["passage"] is None
    assert data["document"] is None and data["version_sha256"] is None


def test_api_with_bearer_token(alice, alice_note):
    ApiToken.objects.create(user=alice, name="t", digest=token_digest(RAW_TOKEN))
    passage = passage_with(alice_note, CERTS)
    response = Client().get(api_url(passage), HTTP_AUTHORIZATION=f"Bearer {RAW_TOKEN}")
    assert response.status_code == 200 and response.json()["status"] == "verified_current"


def test_api_wrong_hash_is_404(alice_client, alice_note):
    document, version, passage_id, _ = ids(passage_with(alice_note, CERTS))
    response = alice_client.get(f"/api/evidence/{document}/{version}/{passage_id}/{'a' * 64}")
    assert response.status_code == 404 and response.json()["status"] == "unavailable"


# --- the context window ------------------------------------------------------------------------


def test_passage_context_is_a_contiguous_slice_cut_at_line_breaks():
    body = "".join(f"line {n}\n" for n in range(1000))
    start = body.index("line 500")
    end = start + len("line 500")
    ctx = passage_context(body, start, end, chars=100)
    assert ctx.passage == "line 500"
    joined = ctx.before + ctx.passage + ctx.after
    at = start - len(ctx.before)
    assert body[at : at + len(joined)] == joined
    assert body[at - 1] == "\n" and body[at + len(joined)] == "\n"  # whole lines
    assert ctx.clipped_before and ctx.clipped_after
    assert len(ctx.before) <= 100 and len(ctx.after) <= 100
    small = passage_context("a\nbc\nd", 2, 4)
    assert (small.before, small.passage, small.after) == ("a\n", "bc", "\nd")
    assert not small.clipped_before and not small.clipped_after
