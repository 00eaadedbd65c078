"""Index health and repair (DESIGN.md invariant 1).

Each corruption test follows LOOM's fts_repair shape: search, corrupt the derived index,
see health report it (and `lode_index health` exit non-zero with the problem in its JSON),
repair, see health clean with the canonical digest unchanged, repair again and see nothing
change, and get the same search results as before the corruption. SQLite corruptions hit
the FTS5 shadow tables and inject tokens; PostgreSQL ones leave stored tsvectors that differ
from what the canonical text gives (written under a changed text search configuration) or
break the GIN index. Vector checks use the real embedder and a private Chroma folder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from io import StringIO

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

from notes import services
from notes.models import Document
from retrieval.index import health, vectors
from retrieval.index.health import index_health, repair_indexes
from retrieval.index.sync import sync_vectors
from retrieval.models import Passage, PassageVector, VectorIndexState
from retrieval.search.pipeline import search
from tests import factories

pytestmark = pytest.mark.django_db

SQLITE = connection.vendor == "sqlite"
POSTGRES = connection.vendor == "postgresql"
sqlite_only = pytest.mark.skipif(not SQLITE, reason="FTS5 shadow tables are SQLite's")
postgres_only = pytest.mark.skipif(not POSTGRES, reason="tsvector and GIN are PostgreSQL's")

FTS = "retrieval_passage_fts"
QUERIES = ["certs", "redis cache", "rotate certificates", '"eviction policy"', "backup -redis"]
TOPICS = [
    "Rotate the staging certs with certbot before Friday and reload nginx.",
    "Set maxmemory-policy allkeys-lru on the Redis cache; the eviction policy matters.",
    "Nightly backups go to the NAS; test a restore of the Postgres dump every month.",
    "Certificates for the VPN expire in March; rotate them with the same playbook.",
    "The café on the corner has the best croissants; résumé review on Tuesday.",
]


@pytest.fixture
def corpus(alice) -> list[int]:
    """Notes of several passages each, in separate transactions (so several FTS5 segments)."""
    for i in range(12):
        body = "\n\n".join(
            f"## Section {j}\n\n{TOPICS[(i + j) % len(TOPICS)]} Note {i} part {j}."
            for j in range(3)
        )
        services.note_create(owner=alice, title=f"Runbook {i}", body=body, tags="ops")
    return sorted(Passage.objects.filter(is_head=True).values_list("pk", flat=True))


def results(user: User) -> list[tuple]:
    """Lexical results of every query in QUERIES: ids, reasons (scores) and highlights."""
    found = []
    for query in QUERIES:
        result = search(user=user, query=query, mode="lexical")
        assert not result.error
        found.append([(h.passage.pk, h.reasons, h.segments) for h in result.hits])
    return found


def rewrite(document: Document, user: User) -> None:
    """A new head version: the document's previous passages leave the head set."""
    services.note_update(
        document=document,
        user=user,
        base_version_id=document.head_id,
        title=document.title,
        body="Rewritten.",
    )


def run(*args: str) -> tuple[int, str]:
    """`manage.py lode_index …`: (exit status, stdout)."""
    out = StringIO()
    try:
        call_command("lode_index", *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue()
    return 0, out.getvalue()


def sql(*statements: str, params: list | None = None) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement, params)


def check_detect_and_repair(user: User, corrupt: Callable[[], None], expected: str) -> None:
    """Corrupt → health reports `expected` → repair → healthy, canonical digest unchanged →
    a second repair changes nothing → search results as before the corruption."""
    fresh = index_health(vectors=False)
    assert fresh.healthy, fresh.problems
    before = results(user)
    assert all(before), "every query should find something"

    corrupt()
    damaged = index_health(vectors=False)
    assert not damaged.healthy
    assert any(expected in problem for problem in damaged.problems), damaged.problems
    assert damaged.canonical == fresh.canonical
    status, out = run("health", "--json", "--skip-vectors")
    assert status == 1
    report = json.loads(out)
    assert report["healthy"] is False and report["problems"] == damaged.problems

    repaired = repair_indexes(vectors=False)
    assert repaired.before == damaged
    assert repaired.after.healthy, repaired.after.problems
    assert repaired.after == fresh  # same counts and digests as the uncorrupted index
    assert repaired.canonical_unchanged

    again = repair_indexes(vectors=False)
    assert again.before == again.after == repaired.after
    assert again.before.lexical.actual_digest == again.after.lexical.expected_digest
    assert results(user) == before
    assert run("health", "--skip-vectors")[0] == 0


# --- both databases ----------------------------------------------------------------------


def test_a_fresh_index_is_healthy(alice, corpus) -> None:
    report = index_health(vectors=False)
    assert report.healthy, report.problems
    lex = report.lexical
    assert report.canonical.head_passages == lex.canonical_rows == lex.indexed_rows == len(corpus)
    assert lex.expected_digest == lex.actual_digest and len(lex.expected_digest) == 64
    assert lex.expected_entries == lex.actual_entries > 0
    assert lex.mismatches == 0
    assert report.canonical.hash_mismatches == 0

    status, out = run("health", "--skip-vectors")
    assert status == 0
    assert "index health: healthy" in out and str(len(corpus)) in out
    data = json.loads(run("health", "--json", "--skip-vectors")[1])
    assert data["healthy"] is True and data["problems"] == []
    assert data["canonical"]["digest"] == report.canonical.digest
    assert data["vectors"]["checked"] is False


def test_the_canonical_digest_covers_ids_and_text_hashes(alice, corpus) -> None:
    first = health.canonical_health()
    assert health.canonical_health() == first
    # Superseding a version changes the head set, so the digest moves.
    document = Passage.objects.get(pk=corpus[0]).document
    rewrite(document, alice)
    assert health.canonical_health().digest != first.digest
    # Canonical damage is reported and is not something repair claims to fix.
    Passage.objects.filter(pk=corpus[-1]).update(text_sha256="0" * 64)
    damaged = index_health(vectors=False)
    assert damaged.canonical.hash_mismatches == 1
    assert any("canonical damage" in problem for problem in damaged.problems)


def test_an_empty_database_is_healthy(db) -> None:
    report = index_health(vectors=False)
    assert report.healthy, report.problems
    assert report.canonical.head_passages == report.lexical.indexed_rows == 0


def test_repair_fails_loudly_when_the_canonical_digest_moves(alice, corpus, monkeypatch) -> None:
    written = iter(range(10))

    def rebuild_while_a_passage_changes() -> None:
        Passage.objects.filter(pk=corpus[0]).update(text_sha256=f"{next(written)}" * 64)

    monkeypatch.setattr(health, "repair_lexical_index", rebuild_while_a_passage_changes)
    with pytest.raises(health.CanonicalChanged) as raised:
        repair_indexes(vectors=False)
    assert raised.value.report.before.canonical != raised.value.report.after.canonical
    status, out = run("repair", "--skip-vectors")
    assert status == 3
    assert "CANONICAL DIGEST CHANGED" in out


# --- SQLite FTS5 -------------------------------------------------------------------------


@sqlite_only
def test_sqlite_bogus_tokens_for_an_existing_row_are_found(alice, corpus) -> None:
    # External content: FTS5 indexes whatever text it is handed for a rowid. The row count
    # stays the same; only the vocabulary betrays it.
    target = corpus[3]

    def corrupt() -> None:
        sql(
            f"INSERT INTO {FTS}(rowid, title_text, text) VALUES (%s, 'zebra', 'quokka certs')",
            params=[target],
        )
        assert index_health(vectors=False).lexical.indexed_rows == len(corpus)
        # The index now answers with words the passage does not contain.
        hits = search(user=alice, query="quokka", mode="lexical").hits
        assert [hit.passage.pk for hit in hits] == [target]

    check_detect_and_repair(alice, corrupt, "digests differ")
    assert search(user=alice, query="quokka", mode="lexical").hits == []


@sqlite_only
def test_sqlite_deleted_docsize_rows_are_found(alice, corpus) -> None:
    def corrupt() -> None:
        sql(f"DELETE FROM {FTS}_docsize WHERE id IN (%s, %s)", params=corpus[:2])

    check_detect_and_repair(alice, corrupt, f"holds {len(corpus) - 2} rows")


@sqlite_only
def test_sqlite_deleted_data_pages_are_found(alice, corpus) -> None:
    def corrupt() -> None:
        sql(f"DELETE FROM {FTS}_data WHERE id = (SELECT max(id) FROM {FTS}_data)")

    check_detect_and_repair(alice, corrupt, "integrity check failed")


@sqlite_only
def test_sqlite_a_removed_document_with_the_count_restored_is_found(alice, corpus) -> None:
    # Postings of one passage removed through FTS5's own 'delete' command, then its docsize
    # row put back by hand: the row count is right, the index is not.
    target = Passage.objects.get(pk=corpus[5])

    def corrupt() -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT sz FROM {FTS}_docsize WHERE id = %s", [target.pk])
            (size,) = cursor.fetchone()
            cursor.execute(
                f"INSERT INTO {FTS}({FTS}, rowid, title_text, text) VALUES ('delete', %s, %s, %s)",
                [target.pk, target.title_text, target.text],
            )
            cursor.execute(f"INSERT INTO {FTS}_docsize(id, sz) VALUES (%s, %s)", [target.pk, size])
        lex = index_health(vectors=False).lexical
        assert lex.indexed_rows == lex.canonical_rows

    check_detect_and_repair(alice, corrupt, "disagree with a rebuild")


@sqlite_only
def test_sqlite_deleted_idx_rows_break_lookups_and_are_found(alice, corpus) -> None:
    # A passage long enough to span several leaf pages, so the segment has `_idx` rows that
    # term lookups use; a full scan (and fts5vocab 'instance') never reads them.
    words = " ".join(f"term{i:05d}" for i in range(3000))
    services.note_create(owner=alice, title="Glossary", body=f"{words}\n\nRotate the certs.")

    def corrupt() -> None:
        sql(f"DELETE FROM {FTS}_idx WHERE pgno > 1")

    check_detect_and_repair(alice, corrupt, "disagree with a rebuild")


@sqlite_only
def test_sqlite_an_unreadable_index_is_reported_not_raised(alice, corpus) -> None:
    sql(f"DELETE FROM {FTS}_data WHERE id > 10")  # every leaf page gone
    report = index_health(vectors=False)
    assert not report.healthy
    assert report.lexical.integrity != "ok"
    repair_indexes(vectors=False)
    assert index_health(vectors=False).healthy


@sqlite_only
def test_sqlite_a_missing_fts_table_is_reported_not_raised(alice, corpus) -> None:
    sql(f"DROP TABLE {FTS}")
    report = index_health(vectors=False)
    assert f"the FTS5 table {FTS} is missing" in report.problems
    assert report.lexical.actual_digest == "" and report.canonical.head_passages == len(corpus)


# --- PostgreSQL tsvector + GIN -----------------------------------------------------------


def write_under_other_mapping(passage_ids: list[int], mapping: str) -> None:
    """Rewrite these passages' stored tsvectors while `lode_english` maps plain ASCII words
    differently, then restore the mapping: their stored vectors now differ from what their
    canonical text gives (the drift a dictionary change or an old config leaves behind)."""
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TEXT SEARCH CONFIGURATION lode_english {mapping}")
        cursor.execute("UPDATE retrieval_passage SET text = text WHERE id = ANY(%s)", [passage_ids])
        cursor.execute(
            "ALTER TEXT SEARCH CONFIGURATION lode_english "
            "ALTER MAPPING FOR asciiword WITH english_stem"
        )


@postgres_only
def test_postgres_unstemmed_tokens_in_stored_vectors_are_found(alice, corpus) -> None:
    def corrupt() -> None:
        write_under_other_mapping(corpus[:3], "ALTER MAPPING FOR asciiword WITH simple")
        lex = index_health(vectors=False).lexical
        assert lex.indexed_rows == lex.canonical_rows and lex.mismatches == 3

    check_detect_and_repair(alice, corrupt, "3 passages in the lexical index disagree")


@postgres_only
@pytest.mark.slow
def test_postgres_words_missing_from_stored_vectors_are_found(alice, corpus) -> None:
    def corrupt() -> None:
        write_under_other_mapping(corpus[4:6], "DROP MAPPING FOR asciiword")

    check_detect_and_repair(alice, corrupt, "digests differ")


@postgres_only
@pytest.mark.slow
def test_postgres_an_invalid_gin_index_is_found(alice, corpus) -> None:
    def corrupt() -> None:  # what a failed CREATE INDEX CONCURRENTLY leaves behind
        sql(
            "UPDATE pg_index SET indisvalid = false "
            "WHERE indexrelid = 'retrieval_passage_search_gin'::regclass"
        )

    check_detect_and_repair(alice, corrupt, "GIN index retrieval_passage_search_gin is invalid")


@postgres_only
@pytest.mark.slow
def test_postgres_a_missing_gin_index_is_recreated(alice, corpus) -> None:
    def corrupt() -> None:
        # The test's own transaction holds deferred foreign-key checks of the corpus it just
        # wrote, and CREATE INDEX refuses to run with those pending; run them now.
        sql("SET CONSTRAINTS ALL IMMEDIATE", "DROP INDEX retrieval_passage_search_gin")

    check_detect_and_repair(alice, corrupt, "GIN index retrieval_passage_search_gin is missing")


# --- vectors -----------------------------------------------------------------------------


@pytest.mark.slow
def test_vector_drift_is_reported_and_repaired(private_vectors, embedder, alice, corpus) -> None:
    sync_vectors(None, embedder=embedder)
    key = embedder.manifest.key
    fresh = index_health()
    assert fresh.healthy, fresh.problems
    assert fresh.vectors.vectors == fresh.vectors.records == fresh.vectors.head_passages
    assert fresh.vectors.manifest_key == fresh.vectors.code_manifest_key == key

    store = vectors.open_vector_store(key)
    gone_vector, gone_record, stale, moved = corpus[0], corpus[1], corpus[2], corpus[3]
    good = store.get_embeddings([stale])[stale]
    store.delete([gone_vector])  # record kept, vector lost
    PassageVector.objects.filter(passage_id=gone_record).delete()  # vector kept, record lost
    session = vectors._connection()
    with session.session(write=True):  # a vector made from other text (say, an id reused)
        collection = session.collection(store.name, create=False, metadata={})
        meta = collection.get(ids=[str(stale)], include=["metadatas"])["metadatas"][0]
        collection.update(
            ids=[str(stale)],
            embeddings=[np.roll(good, 1)],
            metadatas=[{**meta, "text_sha256": "0" * 64}],
        )
        stray = dict(meta, document=0)
        collection.upsert(ids=["999999"], embeddings=[good], metadatas=[stray])  # no passage
    document = Passage.objects.get(pk=moved).document  # superseded: old vectors now orphans
    rewrite(document, alice)
    superseded = list(
        PassageVector.objects.filter(
            passage__document=document, passage__is_head=False
        ).values_list("passage_id", flat=True)
    )
    assert superseded

    report = index_health()
    found = report.vectors
    assert not report.healthy
    assert found.missing == 3  # gone_vector, gone_record, and the edited note's new passage
    assert found.stale == 1 and found.examples["stale"] == [stale]
    assert found.orphan_vectors == 1 + len(superseded)
    assert found.orphan_records == len(superseded)
    assert any(p.startswith("3 head passages have no vector") for p in report.problems)
    status, out = run("health", "--json")
    assert status == 1 and json.loads(out)["vectors"]["stale"] == 1

    repaired = repair_indexes(embedder=embedder)
    assert repaired.after.healthy, repaired.after.problems
    assert repaired.canonical_unchanged
    done = repaired.vectors
    assert (done.dropped, done.records_lost, done.orphans_deleted) == (1, 1, 1)
    assert done.pruned == len(superseded)
    assert done.embedded == 3 + 1
    assert np.allclose(store.get_embeddings([stale])[stale], good, atol=1e-5)
    assert sorted(store.ids()) == sorted(vectors.head_passages().values_list("pk", flat=True))

    again = repair_indexes(embedder=embedder)
    assert again.before == again.after == repaired.after
    assert (again.vectors.dropped, again.vectors.embedded, again.vectors.pruned) == (0, 0, 0)


def test_a_vector_index_of_another_manifest_is_rebuilt(
    private_vectors, embedder, alice, corpus
) -> None:
    sync_vectors(None, embedder=embedder)
    VectorIndexState.objects.filter(pk=1).update(active_key="0123456789abcdef")
    report = index_health()
    assert any("needs a rebuild" in problem for problem in report.problems)
    repaired = repair_indexes(embedder=embedder)
    assert repaired.vectors.reindexed
    assert repaired.after.healthy, repaired.after.problems
    assert VectorIndexState.objects.get(pk=1).active_key == embedder.manifest.key


def test_an_unreachable_vector_index_is_reported_not_raised(settings, alice, corpus) -> None:
    settings.CHROMA_URL = "http://127.0.0.1:9"  # nothing listens on the discard port
    try:
        report = index_health()
        assert not report.vectors.available
        assert report.problems == ["the vector index cannot be checked: vector server unreachable"]
        status, out = run("health")
        assert status == 1 and "vectors    unavailable: vector server unreachable" in out
        repaired = repair_indexes()  # the lexical part still runs; the vector part says why not
        assert repaired.vectors.error == "vector server unreachable"
        assert repaired.after.lexical == report.lexical
    finally:
        vectors.reset_vector_stores()


# --- the admin page ----------------------------------------------------------------------


def test_staff_see_the_index_health_page(alice, corpus, private_vectors) -> None:
    client = factories.staff_client(superuser=False)  # staff is enough, no superuser needed
    url = reverse("admin:retrieval_index_health")
    assert url in client.get(reverse("admin:index")).content.decode()
    page = client.get(url)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Index health" in text and health.canonical_health().digest in text
    assert "head passages have no vector" in text  # nothing embedded yet: unhealthy
    assert "lode_index repair" in text
    assert client.post(url).status_code == 405  # read-only


def test_non_staff_do_not_see_the_index_health_page(alice_client) -> None:
    url = reverse("admin:retrieval_index_health")
    page = alice_client.get(url)
    assert page.status_code == 302
    assert reverse("admin:login") in page["Location"]
    assert Client().get(url).status_code == 302


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_health_and_repair_outside_a_transaction(alice, corpus) -> None:
    """The production path: no surrounding transaction (on SQLite the check opens its own
    deferred read transaction and must close it again)."""
    report = index_health(vectors=False)
    assert report.healthy, report.problems
    assert connection.get_autocommit() and not connection.in_atomic_block
    repaired = repair_indexes(vectors=False)
    assert repaired.before == repaired.after == report
    assert connection.get_autocommit() and not connection.in_atomic_block


# --- passages longer than the character bound ---------------------------------


TABLE_LINE = "|x" * 5000  # one 10,000-character line: no whitespace, 5,000 matches of "x"


def _legacy_note(user: User, settings, title: str = "Wide table") -> Document:
    """A note chunked as before the character bound existed: its table line is one passage."""
    default = settings.LODE_CHUNK_MAX_CHARS
    settings.LODE_CHUNK_MAX_CHARS = 1_000_000
    document = services.note_create(
        owner=user, title=title, body=f"Intro about the table.\n\n{TABLE_LINE}\n\nOutro."
    )
    settings.LODE_CHUNK_MAX_CHARS = default
    return document


def test_oversized_head_passages_are_reported_and_rechunked_by_repair(alice, settings) -> None:
    from retrieval.search.evidence import EvidenceStatus, open_evidence

    settings.LODE_CHUNK_MAX_CHARS = 2000
    document = _legacy_note(alice, settings)
    services.note_create(owner=alice, title="Ordinary", body="An ordinary note about x.")
    (legacy,) = Passage.objects.filter(document=document, is_head=True)  # all of it, packed
    assert TABLE_LINE in legacy.text and len(legacy.text) > 10_000

    report = index_health(vectors=False)
    assert report.canonical.oversized == 1 and report.canonical.max_chars == 2000
    assert any("longer than 2000 characters" in p for p in report.problems), report.problems
    status, out = run("health", "--json", "--skip-vectors")
    assert status == 1 and json.loads(out)["canonical"]["oversized"] == 1

    repaired = repair_indexes(vectors=False)
    assert repaired.rechunked.documents == 1
    assert (repaired.rechunked.retired, repaired.rechunked.written) == (1, 7)
    assert repaired.after.healthy, repaired.after.problems
    assert repaired.after.canonical.oversized == 0
    assert repaired.canonical_unchanged  # the index rebuild after re-chunking changed nothing
    assert repaired.before.canonical.digest != repaired.after.canonical.digest

    heads = list(Passage.objects.filter(document=document, is_head=True).order_by("position"))
    version = document.versions.get()
    assert [p.position for p in heads] == list(range(len(heads)))
    assert all(len(p.text) <= 2000 for p in heads)
    assert all(version.body[p.start : p.end] == p.text for p in heads)
    assert "".join(p.text for p in heads if p.text.startswith("|")) == TABLE_LINE
    # The old passage is retired, not deleted or edited: its evidence link still verifies.
    legacy.refresh_from_db()
    assert legacy.is_head is False and legacy.text == version.body
    opened = open_evidence(alice, document.pk, version.pk, legacy.pk, version.sha256)
    assert opened.status == EvidenceStatus.VERIFIED_CURRENT
    # Search finds the new passages, and nothing but head passages.
    hits = search(user=alice, query="x", mode="lexical", rerank="off", limit=100).hits
    assert {h.passage.pk for h in hits} >= {p.pk for p in heads if "x" in p.text}
    assert all(h.passage.is_head for h in hits)

    again = repair_indexes(vectors=False)
    assert again.rechunked.documents == 0 and again.canonical_unchanged
    assert again.before == again.after
    status, out = run("repair", "--skip-vectors")
    assert status == 0 and "re-chunked: 0 head versions" in out


@pytest.mark.django_db(transaction=True)  # the worker closes its connection when done
@pytest.mark.slow
def test_the_worker_rechunks_over_long_passages_when_it_starts(alice, settings) -> None:
    """An upgraded install needs no operator step: `db_worker` re-chunks head passages
    longer than the bound before its loop (here one batch over an empty queue)."""
    settings.LODE_CHUNK_MAX_CHARS = 2000
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    document = _legacy_note(alice, settings)
    assert index_health(vectors=False).canonical.oversized == 1
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload")
    assert index_health(vectors=False).canonical.oversized == 0
    heads = Passage.objects.filter(document=document, is_head=True)
    assert heads.count() == 7 and all(len(p.text) <= 2000 for p in heads)


def test_rechunk_leaves_old_versions_and_current_passages_alone(alice, settings) -> None:
    from retrieval.index.passages import rechunk_head

    settings.LODE_CHUNK_MAX_CHARS = 2000
    document = _legacy_note(alice, settings)
    first = document.head_id
    rewrite(document, alice)  # the oversized passage now belongs to an old version
    assert index_health(vectors=False).canonical.oversized == 0
    old_rows = list(Passage.objects.filter(version_id=first).values_list("pk", "position", "text"))
    assert repair_indexes(vectors=False).rechunked.documents == 0
    assert list(Passage.objects.filter(version_id=first).values_list("pk", "position", "text")) == (
        old_rows
    )
    document.refresh_from_db()
    assert rechunk_head(document.pk) == (0, 0)  # already what the chunker makes


def test_rechunk_keeps_external_labels(alice, settings, tmp_path) -> None:
    from externals import pipeline
    from externals import services as source_services
    from externals.models import SourceItem

    settings.LODE_SOURCE_MAX_FILE_BYTES = 100_000
    settings.LODE_CHUNK_MAX_CHARS = 1_000_000
    root = tmp_path / "wide"
    root.mkdir()
    (root / "table.md").write_text(f"Intro.\n\n{TABLE_LINE}\n", encoding="utf-8")
    source = source_services.source_create(
        owner=alice, name="wide", kind="folder", location=str(root)
    )
    pipeline.scan_source(source)
    item = SourceItem.objects.get(source=source)
    settings.LODE_CHUNK_MAX_CHARS = 2000
    assert repair_indexes(vectors=False).rechunked.documents == 1
    heads = list(Passage.objects.filter(document=item.document, is_head=True).order_by("position"))
    assert len(heads) == 6  # the intro and five 2,000-character pieces of the table line
    assert [p.logical_id for p in heads] == [
        pipeline.logical_id(source.pk, "table.md", p.position, p.text_sha256) for p in heads
    ]
