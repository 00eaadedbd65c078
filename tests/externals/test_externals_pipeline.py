"""The scan pipeline (ADR 0005): first ingest and refresh are one
pipeline; unchanged files are skipped; a changed file's new snapshot is written before the
old one leaves search; every failure keeps the previous snapshot searchable; only a
successful scan prunes; secrets and escaping links are rejected; logical ids never collide.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from externals import extract as extractors
from externals import folders, pipeline, services, tasks
from externals.models import ScanRecord, Source, SourceItem
from notes.models import Document, TrustTier, Version
from retrieval.models import Passage
from retrieval.search.evidence import EvidenceStatus, open_evidence
from retrieval.search.pipeline import search
from tests.local_http import local_server, minimal_pdf

OK = ScanRecord.Status.OK


@pytest.fixture(autouse=True)
def _small_settings(settings):
    settings.LODE_FETCH_ALLOW_PRIVATE = True
    settings.LODE_SOURCE_MAX_FILE_BYTES = 4096


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def touch_later(path: Path) -> None:
    """Move the mtime on, so a same-second rewrite still looks like a new file state."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def folder_source(owner, root: Path, **kwargs) -> Source:
    return services.source_create(
        owner=owner, name=kwargs.pop("name", "docs"), kind="folder", location=str(root), **kwargs
    )


def found(user, query: str) -> list[Passage]:
    result = search(user=user, query=query, mode="lexical", rerank="off")
    assert not result.error, result.error
    return [hit.passage for hit in result.hits]


def texts(user, query: str) -> list[str]:
    return [p.text for p in found(user, query)]


def head_passages(source: Source) -> list[Passage]:
    return list(
        Passage.objects.filter(document__source_items__source=source, is_head=True).order_by("pk")
    )


@pytest.fixture
def docs(tmp_path) -> Path:
    root = tmp_path / "docs"
    write(root, "alpha.md", "# Alpha\n\nRotate the staging certs with certbot.\n")
    write(root, "beta.txt", "Beta keeps the redis maxmemory policy.\n")
    write(root, "gamma/notes.md", "Gamma explains the zookeeper quorum.\n")
    return root


# --- first ingest and refresh ----------------------------------------------------------------


def test_first_ingest_creates_one_external_per_file(alice, docs):
    source = folder_source(alice, docs, no_egress=True)
    record = pipeline.scan_source(source)
    assert record.status == OK and record.finished_at is not None
    assert (record.items_seen, record.items_new, record.items_failed) == (3, 3, 0)
    items = {item.path: item for item in SourceItem.objects.filter(source=source)}
    assert sorted(items) == ["alpha.md", "beta.txt", "gamma/notes.md"]
    alpha = items["alpha.md"]
    raw = (docs / "alpha.md").read_bytes()
    assert alpha.byte_size == len(raw) and alpha.mtime_ns == (docs / "alpha.md").stat().st_mtime_ns
    document = alpha.document
    assert document.kind == Document.Kind.EXTERNAL and document.owner == alice
    assert document.trust_tier == TrustTier.EXTERNAL_CURRENT
    assert document.no_egress is True and document.source_name == "docs"
    version = document.head
    assert version.extractor_name == "utf8-text" and version.extractor_version == "1"
    assert version.source_path == str(docs / "alpha.md")
    [passage] = found(alice, "certbot")
    assert passage.document_id == document.pk
    assert passage.logical_id == pipeline.logical_id(
        source.pk, "alpha.md", passage.position, passage.text_sha256
    )
    outcome = open_evidence(alice, document.pk, version.pk, passage.pk, version.sha256)
    assert outcome.status == EvidenceStatus.VERIFIED_CURRENT


def test_refresh_skips_unchanged_adds_changes_and_prunes(alice, docs):
    source = folder_source(alice, docs)
    pipeline.scan_source(source)
    beta_before = SourceItem.objects.get(source=source, path="beta.txt").document.head_id
    alpha_doc = SourceItem.objects.get(source=source, path="alpha.md").document
    first_alpha = alpha_doc.head_id

    write(docs, "alpha.md", "# Alpha\n\nRenew the production certs with dehydrated instead.\n")
    touch_later(docs / "alpha.md")
    (docs / "gamma" / "notes.md").unlink()
    write(docs, "delta.md", "Delta documents the kafka retention.\n")

    record = pipeline.scan_source(source, trigger="webhook")
    assert record.status == OK and record.trigger == "webhook"
    counts = (record.items_new, record.items_changed, record.items_unchanged, record.items_pruned)
    assert counts == (1, 1, 1, 1)
    assert SourceItem.objects.get(source=source, path="beta.txt").document.head_id == beta_before
    alpha_doc.refresh_from_db()
    assert alpha_doc.head_id != first_alpha
    assert alpha_doc.versions.count() == 2  # the old snapshot stays as history
    assert Version.objects.get(pk=first_alpha).body.startswith("# Alpha\n\nRotate")
    assert texts(alice, "certbot") == []
    assert len(found(alice, "dehydrated")) == 1
    assert texts(alice, "zookeeper") == []
    assert len(found(alice, "kafka")) == 1
    assert not SourceItem.objects.filter(source=source, path="gamma/notes.md").exists()
    gone = Document.objects.get(owner=alice, external_key=f"source:{source.pk}:gamma/notes.md")
    assert gone.deleted_at is not None
    # One head passage per position per document: nothing duplicated.
    heads = head_passages(source)
    assert len({(p.document_id, p.position) for p in heads}) == len(heads)


def test_a_pruned_file_that_comes_back_is_revived(alice, docs):
    source = folder_source(alice, docs)
    pipeline.scan_source(source)
    saved = (docs / "beta.txt").read_bytes()
    (docs / "beta.txt").unlink()
    assert pipeline.scan_source(source).items_pruned == 1
    (docs / "beta.txt").write_bytes(saved)
    record = pipeline.scan_source(source)
    assert record.items_new == 1
    assert len(found(alice, "maxmemory")) == 1


def test_change_during_extraction_writes_nothing_and_asks_for_retry(alice, docs, monkeypatch):
    source = folder_source(alice, docs)
    pipeline.scan_source(source)
    write(docs, "alpha.md", "# Alpha\n\nVersion two mentions letsencrypt.\n")
    touch_later(docs / "alpha.md")
    real = extractors.extract

    def editing_extract(data, *, filename, content_type=""):
        if filename == "alpha.md":
            write(docs, "alpha.md", "# Alpha\n\nVersion three, written mid-extraction.\n")
        return real(data, filename=filename, content_type=content_type)

    monkeypatch.setattr(extractors, "extract", editing_extract)
    versions = Version.objects.count()
    record = pipeline.scan_source(source)
    assert record.status == ScanRecord.Status.PARTIAL
    assert record.failures == [{"path": "alpha.md", "reason": pipeline.CHANGED_DURING_EXTRACTION}]
    assert Version.objects.count() == versions
    assert len(found(alice, "certbot")) == 1  # the previous snapshot is still searchable
    item = SourceItem.objects.get(source=source, path="alpha.md")
    assert item.last_error == pipeline.CHANGED_DURING_EXTRACTION

    monkeypatch.setattr(extractors, "extract", real)
    record = pipeline.scan_source(source)  # the retry picks up the file as it is now
    assert record.status == OK and record.items_changed == 1
    assert len(found(alice, "mid-extraction")) == 1
    assert SourceItem.objects.get(pk=item.pk).last_error == ""


@pytest.mark.parametrize("problem", ["oversize", "decode", "crash"])
def test_failures_keep_the_previous_snapshot_and_prune_nothing(alice, docs, monkeypatch, problem):
    source = folder_source(alice, docs)
    pipeline.scan_source(source)
    if problem == "oversize":
        write(docs, "alpha.md", "certbot " * 1000)
    elif problem == "decode":
        write(docs, "alpha.md", b"# Alpha\n\ncaf\xe9 certbot\n")
    else:
        write(docs, "alpha.md", "# Alpha\n\nA new text that crashes.\n")

        def crash(data, *, filename, content_type=""):
            raise RuntimeError("segfault-ish")

        monkeypatch.setattr(extractors, "extract", crash)
    touch_later(docs / "alpha.md")
    (docs / "beta.txt").unlink()  # missing, but this scan will not be ok
    record = pipeline.scan_source(source)
    assert record.status == ScanRecord.Status.PARTIAL
    assert record.items_failed == 1 and record.items_pruned == 0
    [failure] = record.failures
    expected = {
        "oversize": "over the 4,096-byte cap",
        "decode": "not valid UTF-8: byte 12 (e9)",
        "crash": "extractor crashed: RuntimeError",
    }[problem]
    assert failure["path"] == "alpha.md" and expected in failure["reason"]
    [passage] = found(alice, "certbot")  # previous snapshot, still verifiable as stored text
    assert passage.version.body.startswith("# Alpha\n\nRotate")
    assert SourceItem.objects.filter(source=source, path="beta.txt").exists()
    assert len(found(alice, "maxmemory")) == 1


def test_missing_folder_fails_the_scan_and_prunes_nothing(alice, docs, tmp_path):
    source = folder_source(alice, docs)
    pipeline.scan_source(source)
    docs.rename(tmp_path / "moved")
    record = pipeline.scan_source(source)
    assert record.status == ScanRecord.Status.FAILED
    # alice is not staff: the one "not allowed" message, nothing about what is on disk.
    assert record.error == folders.folder_not_allowed_message() and record.items_pruned == 0
    assert SourceItem.objects.filter(source=source).count() == 3
    assert len(found(alice, "certbot")) == 1


def test_secrets_and_escaping_links_are_rejected_binary_skipped(alice, docs, tmp_path):
    outside = write(tmp_path / "elsewhere", "secret.md", "outside-the-root passwords\n")
    for name in [
        ".env",
        ".env.local",
        "id_rsa",
        "id_ed25519.pub",
        "server.pem",
        "tls.key",
        ".npmrc",
        ".pypirc",
        "credentials.json",
        ".netrc",
        "cert.p12",
        "cert.pfx",
    ]:
        write(docs, name, "hunter2 topsecret\n")
    write(docs, ".git/config", "hunter2 topsecret\n")
    (docs / "escape.md").symlink_to(outside)
    (docs / "escape-dir").symlink_to(outside.parent, target_is_directory=True)
    (docs / "inside.md").symlink_to(docs / "alpha.md")
    write(docs, "image.md", b"\x89PNG\x00\x00binary")
    write(docs, "photo.jpg", b"\xff\xd8\xff")
    record = pipeline.scan_source(folder_source(alice, docs))
    assert record.status == OK
    rejected = {entry["path"]: entry["reason"] for entry in record.rejected}
    assert rejected[".env"] == "known secret file name"
    assert rejected["escape.md"] == "symbolic link resolving outside the folder"
    assert rejected["escape-dir/"] == "symbolic link resolving outside the folder"
    assert ".git/" in rejected
    assert record.items_rejected == len(rejected) == 15
    skipped = {entry["path"]: entry["reason"] for entry in record.skipped}
    assert skipped["image.md"].startswith("binary file")
    assert skipped["photo.jpg"].startswith("unsupported file type")
    assert "inside.md" in skipped
    assert texts(alice, "hunter2") == [] and texts(alice, "passwords") == []
    assert record.items_new == 3


def test_empty_text_clears_the_external(alice, docs):
    source = folder_source(alice, docs)
    pipeline.scan_source(source)
    write(docs, "alpha.md", "")
    touch_later(docs / "alpha.md")
    write(docs, "empty.md", "   \n")
    record = pipeline.scan_source(source)
    assert record.status == OK and record.items_changed == 1
    assert {"path": "empty.md", "reason": "empty (no text)"} in record.skipped
    assert texts(alice, "certbot") == []
    alpha = SourceItem.objects.get(source=source, path="alpha.md").document
    assert alpha.head.body == "" and alpha.versions.count() == 2


# --- logical ids -------------------------------------------------------------------------------


def test_logical_ids_do_not_collide_on_shared_prefixes_or_repeated_chunks(
    alice, tmp_path, settings
):
    settings.LODE_CHUNK_MAX_WORDS = 40
    settings.LODE_CHUNK_OVERLAP_WORDS = 0
    prefix = "Shared opening words about the deploy pipeline. " * 5  # over 200 characters
    assert len(prefix) > 200
    repeated = "This exact paragraph repeats in the same file and in another file."
    root = tmp_path / "ids"
    write(root, "one.md", f"{prefix}Ending one.\n\n## A\n\n{repeated}\n\n## B\n\n{repeated}\n")
    write(root, "two.md", f"{prefix}Ending two.\n\n## A\n\n{repeated}\n\n## B\n\n{repeated}\n")
    source = folder_source(alice, root)
    pipeline.scan_source(source)
    heads = head_passages(source)
    assert all(len(p.logical_id) == 64 for p in heads)
    assert len({p.logical_id for p in heads}) == len(heads)
    same_text = [p for p in heads if repeated in p.text]
    assert len(same_text) == 4 and len({p.text_sha256 for p in same_text}) <= 2
    # The function itself: every input matters.
    base = pipeline.logical_id(1, "a.md", 0, "0" * 64)
    assert base != pipeline.logical_id(2, "a.md", 0, "0" * 64)
    assert base != pipeline.logical_id(1, "b.md", 0, "0" * 64)
    assert base != pipeline.logical_id(1, "a.md", 1, "0" * 64)
    assert base != pipeline.logical_id(1, "a.md", 0, "1" * 64)


# --- PDF, HTML, URL, upload ----------------------------------------------------------------------


def test_pdf_passages_carry_page_numbers(alice, tmp_path, settings):
    settings.LODE_CHUNK_MAX_WORDS = 6
    settings.LODE_CHUNK_OVERLAP_WORDS = 0
    root = tmp_path / "pdfs"
    write(
        root,
        "manual.pdf",
        minimal_pdf(["Page one covers certbot renewals.", "Page two covers redis eviction."]),
    )
    source = folder_source(alice, root)
    assert pipeline.scan_source(source).status == OK
    version = SourceItem.objects.get(source=source).document.head
    assert version.extractor_name == "pypdf" and version.extractor_version
    [one] = found(alice, "certbot")
    [two] = found(alice, "eviction")
    assert (one.page, two.page) == (1, 2)


def test_url_source_mirrors_html_through_trafilatura(alice):
    html = (
        b"<html><head><title>Runbook page</title></head><body><nav>Home | About</nav>"
        b"<article><h1>Runbook</h1><p>Rotate the staging certs with certbot every quarter, "
        b"before the expiry warning lands in the shared inbox.</p></article></body></html>"
    )
    with local_server() as server:
        server.routes["/runbook"] = (200, {"Content-Type": "text/html; charset=utf-8"}, html)
        source = services.source_create(
            owner=alice, name="web", kind="url", location=server.url("/runbook")
        )
        record = pipeline.scan_source(source)
        assert record.status == OK and record.items_new == 1
        document = SourceItem.objects.get(source=source).document
        assert document.title == "Runbook page"  # the page's <title>
        assert document.head.extractor_name == "trafilatura"
        assert document.head.source_path == ""
        assert len(found(alice, "certbot")) == 1
        assert texts(alice, "About") == []  # navigation is not main content
        again = pipeline.scan_source(source)
        assert (again.items_unchanged, again.items_changed) == (1, 0)


def test_url_source_refuses_loopback_unless_allowed(alice, settings):
    settings.LODE_FETCH_ALLOW_PRIVATE = False
    with local_server() as server:
        server.routes["/"] = (200, {"Content-Type": "text/plain"}, b"internal admin page")
        source = services.source_create(
            owner=alice, name="web", kind="url", location=server.url("/")
        )
        record = pipeline.scan_source(source)
    assert record.status == ScanRecord.Status.FAILED
    assert "private, loopback or reserved" in record.error
    assert server.hits == []


def test_upload_is_stored_under_the_data_folder_and_scanned(alice, settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    source = services.upload_create(
        owner=alice,
        name="upload",
        filename="../../etc/Runbook.md",
        data=b"Upload mentions certbot.\n",
    )
    assert source.kind == Source.Kind.UPLOAD and source.location == "Runbook.md"
    stored = tmp_path / "data" / "uploads" / str(source.pk) / "Runbook.md"
    assert stored.read_bytes() == b"Upload mentions certbot.\n"
    assert source.scans.get().status == OK
    [passage] = found(alice, "certbot")
    version = passage.version
    outcome = open_evidence(alice, version.document_id, version.pk, passage.pk, version.sha256)
    assert outcome.status == EvidenceStatus.VERIFIED_CURRENT
    with pytest.raises(ValidationError):
        services.upload_create(owner=alice, name="big", filename="big.md", data=b"x" * 5000)


# --- ownership, services, tasks ----------------------------------------------------------------


def test_bob_never_sees_alices_externals(alice, bob, docs):
    pipeline.scan_source(folder_source(alice, docs))
    assert len(found(alice, "certbot")) == 1
    assert found(bob, "certbot") == [] and found(bob, "zookeeper") == []


def test_source_flags_follow_the_source(alice, docs):
    source = folder_source(alice, docs)
    pipeline.scan_source(source)
    source.no_egress = True
    source.trust_tier = TrustTier.EXTERNAL_STALE
    source.save()
    pipeline.scan_source(source)
    flags = set(
        Document.objects.filter(source_items__source=source).values_list("no_egress", "trust_tier")
    )
    assert flags == {(True, TrustTier.EXTERNAL_STALE)}


def test_source_create_validates(alice, docs):
    with pytest.raises(ValidationError):
        services.source_create(owner=alice, name="rel", kind="folder", location="relative/path")
    with pytest.raises(ValidationError):
        services.source_create(owner=alice, name="ftp", kind="url", location="ftp://example.com/")
    folder_source(alice, docs)
    with pytest.raises(ValidationError):
        folder_source(alice, docs)  # names are unique per owner


def test_staleness_and_age(alice, docs):
    source = folder_source(alice, docs, stale_after_days=30)
    pipeline.scan_source(source)
    version = SourceItem.objects.filter(source=source).first().document.head
    assert not services.is_stale(version, source)
    assert services.snapshot_age(version) < timedelta(minutes=1)
    Version.objects.filter(pk=version.pk).update(created_at=timezone.now() - timedelta(days=31))
    version.refresh_from_db()
    # Fetched 31 days ago but confirmed unchanged by a scan today: not stale.
    assert not services.is_stale(version, source)
    assert services.snapshot_age(version) > timedelta(days=30)
    SourceItem.objects.filter(source=source).update(verified_at=timezone.now() - timedelta(days=31))
    assert services.is_stale(version, source)


def test_rotate_webhook_secret_returns_a_new_secret(alice, docs):
    source = folder_source(alice, docs)
    first = services.rotate_webhook_secret(source)
    second = services.rotate_webhook_secret(source)
    assert first != second and len(second) >= 40
    source.refresh_from_db()
    assert source.webhook_secret == second


def test_refresh_task_runs_the_scan(alice, docs, settings):
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
    source = folder_source(alice, docs)
    tasks.enqueue_refresh(source, "webhook")
    record = source.scans.get()
    assert record.trigger == "webhook" and record.status == OK
    assert tasks.refresh_source.call(source.pk)["unchanged"] == 3
    source.enabled = False
    source.save()
    assert tasks.refresh_source.call(source.pk)["status"] == "skipped"


def test_a_scan_left_running_by_a_killed_process_is_marked_failed(alice, docs):
    source = folder_source(alice, docs)
    stuck = ScanRecord.objects.create(source=source)
    pipeline.scan_source(source)
    stuck.refresh_from_db()
    assert stuck.status == ScanRecord.Status.FAILED and "interrupted" in stuck.error


def test_a_file_that_failed_then_came_back_is_unchanged_and_cleared(alice, docs):
    source = folder_source(alice, docs)
    pipeline.scan_source(source)
    saved = (docs / "alpha.md").read_bytes()
    write(docs, "alpha.md", b"\xff\xfe broken")
    assert pipeline.scan_source(source).items_failed == 1
    assert SourceItem.objects.get(source=source, path="alpha.md").last_error
    (docs / "alpha.md").write_bytes(saved)
    versions = Version.objects.count()
    record = pipeline.scan_source(source)
    assert record.status == OK and record.items_unchanged == 3
    assert Version.objects.count() == versions
    assert SourceItem.objects.get(source=source, path="alpha.md").last_error == ""


def test_a_running_scan_shows_its_progress(alice, docs, monkeypatch):
    monkeypatch.setattr(pipeline, "PROGRESS_EVERY", 1)
    seen: list[tuple[str, int]] = []
    real = extractors.extract

    def watching(data, *, filename, content_type=""):
        running = ScanRecord.objects.get(status=ScanRecord.Status.RUNNING)
        seen.append((filename, running.items_seen))
        return real(data, filename=filename, content_type=content_type)

    monkeypatch.setattr(extractors, "extract", watching)
    pipeline.scan_source(folder_source(alice, docs))
    assert [count for _, count in seen] == [1, 2, 3]


# --- staleness ---------------------------------------------------------------------------------


def test_staleness_counts_from_the_last_confirmation_and_sets_the_trust_tier(alice, tmp_path):
    """A snapshot not confirmed for longer than the source's stale age ranks and shows as a
    stale external; a scan that finds the file unchanged confirms it and makes it current."""
    from datetime import timedelta

    from django.utils import timezone

    from externals.models import SourceItem
    from externals.pipeline import refresh_staleness, scan_source
    from externals.services import is_stale, source_create
    from notes.models import Document, TrustTier
    from retrieval.search.pipeline import search

    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nThe quokka census runs every spring.\n")
    source = source_create(owner=alice, name="docs", kind="folder", location=str(root))
    assert scan_source(source).status == "ok"
    document = Document.objects.get(source_items__source=source)
    assert document.trust_tier == TrustTier.EXTERNAL_CURRENT

    long_ago = timezone.now() - timedelta(days=source.stale_after_days + 1)
    SourceItem.objects.filter(source=source).update(verified_at=long_ago)
    type(document.head).objects.filter(pk=document.head_id).update(created_at=long_ago)
    refresh_staleness(source)
    document.refresh_from_db()
    assert document.trust_tier == TrustTier.EXTERNAL_STALE
    assert is_stale(document.head, source)
    found = search(user=alice, query="quokka trust:external_stale", mode="lexical")
    assert [h.passage.document_id for h in found.hits] == [document.pk]

    # Unchanged on disk: the next scan confirms it, and it is current again.
    record = scan_source(source)
    assert (record.status, record.items_unchanged) == ("ok", 1)
    document.refresh_from_db()
    assert document.trust_tier == TrustTier.EXTERNAL_CURRENT
    assert not is_stale(document.head, source)


def test_an_embedding_failure_is_recorded_and_keeps_the_content_searchable(
    alice, tmp_path, monkeypatch
):
    """Embedding runs in the worker; a scan that writes snapshots while the model is
    unavailable says so on its scan record, and the new text is searchable by keywords."""
    from externals.pipeline import scan_source
    from externals.services import source_create
    from retrieval.index import embeddings
    from retrieval.search.pipeline import search

    def unavailable():
        raise embeddings.EmbeddingUnavailable("model folder is corrupt")

    monkeypatch.setattr(embeddings, "get_embedder", unavailable)
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# Numbats\n\nNumbats eat termites.\n")
    source = source_create(owner=alice, name="docs", kind="folder", location=str(root))
    record = scan_source(source)
    assert record.status == "ok" and record.items_new == 1
    (problem,) = record.failures
    assert problem["path"] == "(embedding)" and "model folder is corrupt" in problem["reason"]
    assert search(user=alice, query="numbats", mode="lexical").hits


# --- who may mirror a server folder -----------------------------------------------------------


def test_folder_sources_only_inside_allowed_roots_for_every_account(alice, tmp_path, settings):
    """A folder source reads the server's disk: every account, staff too, only inside
    LODE_SOURCE_FOLDER_ROOTS (no climbing out with .. or symlinks), and a scan re-checks in
    case the roots changed."""
    from django.core.exceptions import ValidationError

    from externals.pipeline import scan_source
    from externals.services import source_create

    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "docs").mkdir(parents=True)
    (outside / "sub").mkdir(parents=True)
    (allowed / "docs" / "a.md").write_text("# A\n\nAardvarks dig.\n")
    (allowed / "escape").symlink_to(outside, target_is_directory=True)
    settings.LODE_SOURCE_FOLDER_ROOTS = [str(allowed)]

    ok = source_create(owner=alice, name="ok", kind="folder", location=str(allowed / "docs"))
    for i, refused in enumerate(
        [outside, allowed / "docs" / ".." / ".." / "outside", allowed / "escape" / "sub"]
    ):
        with pytest.raises(ValidationError, match="only from inside"):
            source_create(owner=alice, name=f"no{i}", kind="folder", location=str(refused))

    settings.LODE_SOURCE_FOLDER_ROOTS = []
    with pytest.raises(ValidationError, match="mirrors no server folders"):
        source_create(owner=alice, name="none", kind="folder", location=str(allowed / "docs"))
    record = scan_source(ok)  # the roots changed after the source was added
    assert record.status == "failed" and "mirrors no server folders" in record.error

    alice.is_staff = alice.is_superuser = True
    alice.save()
    settings.LODE_SOURCE_FOLDER_ROOTS = [str(allowed)]
    with pytest.raises(ValidationError, match="only from inside"):
        source_create(owner=alice, name="staff", kind="folder", location=str(outside))
    assert scan_source(ok).status == "ok"


@pytest.mark.django_db
def test_a_mirrored_file_over_the_note_limit_verifies_under_the_source_limit(
    alice, tmp_path, settings
):
    """Verified opening re-reads an external's file under the cap it was mirrored with
    (`LODE_SOURCE_MAX_FILE_BYTES`), not a note's: a file the scan accepted must verify."""
    from retrieval.search.evidence import EvidenceStatus, open_evidence

    settings.LODE_MAX_NOTE_BYTES = 2_000
    settings.LODE_SOURCE_MAX_FILE_BYTES = 50_000
    root = tmp_path / "docs"
    root.mkdir()
    body = "# Big runbook\n\n" + "\n\n".join(
        f"Step {i}: rotate the replica certificate number {i}." for i in range(200)
    )
    (root / "big.md").write_text(body, "utf-8")
    assert len(body.encode()) > settings.LODE_MAX_NOTE_BYTES
    source = folder_source(alice, root)
    pipeline.scan_source(source)
    passage = head_passages(source)[0]
    outcome = open_evidence(
        alice, passage.document_id, passage.version_id, passage.pk, passage.version.sha256
    )
    assert outcome.status == EvidenceStatus.VERIFIED_CURRENT, outcome


@pytest.mark.django_db
def test_a_mirrored_file_grown_over_the_source_cap_says_which_cap(alice, tmp_path, settings):
    """When the re-read refuses an external's file for its size, the reason names the cap
    it was read under (the source file cap), not the note limit it was not held to."""
    from retrieval.search.evidence import EvidenceStatus, open_evidence

    settings.LODE_MAX_NOTE_BYTES = 2_000
    settings.LODE_SOURCE_MAX_FILE_BYTES = 4_096
    root = tmp_path / "docs"
    root.mkdir()
    (root / "guide.md").write_text("# Guide\n\nRotate the replica certificate.\n", "utf-8")
    source = folder_source(alice, root)
    pipeline.scan_source(source)
    passage = head_passages(source)[0]
    with (root / "guide.md").open("a", encoding="utf-8") as handle:
        handle.write("x" * 5_000)
    outcome = open_evidence(
        alice, passage.document_id, passage.version_id, passage.pk, passage.version.sha256
    )
    assert outcome.status == EvidenceStatus.SOURCE_CHANGED, outcome
    assert "over the 4,096-byte source file cap" in outcome.source_detail
    assert "note limit" not in outcome.source_detail
