"""Hybrid search's cost above the floor: the cheaper ways must answer exactly as
the ones they replace.

* the lexical leg takes the engine's own top list first (FTS5's; PostgreSQL's BM25 over
  every match) and checks only those rows for eligibility (`base.top_first`): the same
  hits, in the same order, as the joined query, whether it finds enough at once, looks
  deeper, or hands over, on both databases;
* the candidates' canonical rows are read with one plain statement (`_canonical_rows`):
  the same rows, eligibility and order as the ORM read;
* a candidate's words are counted from cached stems (`passage_stems`): the folded tokens,
  as before, and an edited passage is a new entry;
* the "not yet embedded" note counts at most `PENDING_NOTE_MAX` passages, from the pending
  table (never a cache): a note saved a moment ago is counted at once. The table's upkeep
  through every writer is tested in `test_pending_vectors.py`.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from notes import services
from notes.models import Document
from retrieval.eligibility import audience_for
from retrieval.index import lexical, vectors
from retrieval.index.lexical import base
from retrieval.index.sync import sync_vectors
from retrieval.models import Passage
from retrieval.query import parse
from retrieval.search import pipeline
from retrieval.search.pipeline import CandidateRow, search
from retrieval.text.stemming import folded_tokens
from spaces.models import personal_space_id
from tests import factories

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_vectors")]

# Single words, and a phrase and an exclusion (PostgreSQL ranks those through its GIN
# matches, single words from their postings).
QUERIES = (
    "certbot staging certificates",
    "redis cache policy",
    "certbot",
    "rotate keys friday",
    '"rotate the certificates" staging',
    "certbot -redis",
)
# How the two ways read in the SQL log, per database: the engine's own top list (it starts
# the statement on SQLite; on PostgreSQL, MaxScore's first statement, which reads each query
# word's statistics, or the exhaustive top list), and the joined query.
TOP_LIST, JOINED = {
    "sqlite": ("SELECT rowid, bm25(retrieval_passage_fts", "JOIN retrieval_passage p ON p.id = "),
    "postgresql": (
        ("AS max_saturation FROM", "(SELECT single FROM shape) OR"),
        "candidates AS MATERIALIZED",
    ),
}[connection.vendor]


def is_top_list(sql: str) -> bool:
    if connection.vendor == "sqlite":
        return sql.startswith(TOP_LIST)
    return any(marker in sql for marker in TOP_LIST)


def _body(i: int) -> str:
    # Varied lengths and word counts, so bm25 orders the notes and ties are rare but present.
    extra = " certbot" * (i % 5) + " staging" * (i % 3) + " redis cache" * (i % 4)
    return f"Rotate the certificates{extra}.\n\n# Notes {i}\n\nKeys rotate on Friday {i}."


@pytest.fixture
def library(alice, bob) -> dict[str, list[Document]]:
    """Alice's 30 notes (3 of them deleted) and bob's 60, all matching the queries."""
    mine = [
        services.note_create(owner=alice, title=f"Runbook {i}", body=_body(i)) for i in range(30)
    ]
    for document in mine[5:8]:
        services.note_delete(document=document, user=alice)
    theirs = [
        services.note_create(owner=bob, title=f"Bob runbook {i}", body=_body(i + 1))
        for i in range(60)
    ]
    return {"alice": mine, "bob": theirs}


def joined(query: str, user_id: int, limit: int) -> list[base.LexicalHit]:
    """The joined query alone: what the lexical leg answered before the top-list-first path."""
    backend = lexical.backend()
    original = backend.top_first
    backend.top_first = lambda *args, **kwargs: None
    try:
        return backend.search(parse(query), audience=audience_for(user_id), limit=limit)
    finally:
        backend.top_first = original


def statements(query: str, user_id: int, limit: int) -> tuple[list[base.LexicalHit], list[str]]:
    with CaptureQueriesContext(connection) as captured:
        hits = lexical.backend().search(parse(query), audience=audience_for(user_id), limit=limit)
    return hits, [q["sql"] for q in captured.captured_queries]


@pytest.mark.parametrize("limit", [1, 3, 10, 256])
@pytest.mark.slow
def test_the_top_list_first_gives_the_joined_querys_hits(library, alice, bob, limit) -> None:
    deleted = {p for d in library["alice"][5:8] for p in d.passages.values_list("pk", flat=True)}
    for query in QUERIES:
        for user in (alice, bob):
            hits, sql = statements(query, user.pk, limit)
            assert hits == joined(query, user.pk, limit), (query, user.username, limit)
            assert hits, query
            assert not {h.passage_id for h in hits} & deleted
            if user == bob:  # he sees most of what matches: FTS5's top list answers
                assert not any(JOINED in s for s in sql), (query, limit)


@pytest.mark.slow
def test_a_short_first_look_goes_deeper_then_answers(library, alice, bob, monkeypatch) -> None:
    # Alice sees every note but bob's two best matches, so a first look of exactly `limit`
    # rows (no margin) is short but mostly eligible: it looks again, deeper.
    top = {hit.passage_id for hit in joined("certbot", bob.pk, 2)}
    Document.objects.filter(owner=bob).exclude(passages__in=top).update(
        space_id=personal_space_id(alice.pk)
    )
    assert not {hit.passage_id for hit in joined("certbot", alice.pk, 256)} & top
    monkeypatch.setattr(base, "TOP_MARGIN", 0)
    limit = 12
    hits, sql = statements("certbot", alice.pk, limit)
    assert hits == joined("certbot", alice.pk, limit)
    assert len(hits) == limit and not {h.passage_id for h in hits} & top
    assert len([s for s in sql if is_top_list(s)]) == 2
    assert not any(JOINED in s for s in sql)


@pytest.mark.slow
def test_an_audience_seeing_little_of_the_index_hands_over(library, alice) -> None:
    # Alice sees 27 of 87 live notes: about a third of any top list is hers, too few to
    # fill it, so the joined query answers — and still exactly.
    limit = 40
    hits, sql = statements("certbot staging certificates", alice.pk, limit)
    assert hits == joined("certbot staging certificates", alice.pk, limit)
    assert len([s for s in sql if is_top_list(s)]) == 1
    assert any(JOINED in s for s in sql)
    assert {Passage.objects.get(pk=h.passage_id).document.owner_id for h in hits} == {alice.pk}


@pytest.mark.slow
def test_filters_still_go_to_the_joined_query(library, alice) -> None:
    hits, sql = statements("certbot type:note", alice.pk, 256)
    assert hits and hits == joined("certbot type:note", alice.pk, 256)
    assert not any(is_top_list(s) for s in sql)


def orm_rows(ids: set[int], space_ids: frozenset[int]) -> dict[int, CandidateRow]:
    """The ORM read `_canonical_rows` replaced, as the reference."""
    rows = {}
    for pid, doc, title, text, position, tier, key, head, space, deleted in Passage.objects.filter(
        pk__in=ids
    ).values_list(
        "id",
        "document_id",
        "title_text",
        "text",
        "position",
        "document__trust_tier",
        "document__external_key",
        "is_head",
        "document__space_id",
        "document__deleted_at",
    ):
        if head and space in space_ids and deleted is None:
            rows[pid] = CandidateRow(pid, doc, title, text, position, tier, key)
    return rows


def test_canonical_rows_are_the_orm_reads(library, alice, bob) -> None:
    runbook = library["alice"][0]
    services.note_update(
        document=runbook,
        user=alice,
        base_version_id=runbook.head_id,
        title=runbook.title,
        body="A new head version: the old passages stop being head passages.",
    )
    ids = set(Passage.objects.values_list("pk", flat=True))  # head, old, deleted, bob's
    for user in (alice, bob):
        audience = audience_for(user.pk)
        rows = pipeline._canonical_rows(ids, audience)
        expected = orm_rows(ids, audience.space_ids)
        assert list(rows.items()) == list(expected.items())  # same rows, same order
        assert rows and all(
            Passage.objects.get(pk=pid).is_head
            and Passage.objects.get(pk=pid).document.owner_id == user.pk
            for pid in rows
        )
    assert pipeline._canonical_rows(set(), audience_for(alice.pk)) == {}


# --- the pending note --------------------------------------------------------------------------


INDEXING = "New and changed notes are still being indexed for meaning search"


def pending_notes(result: pipeline.SearchResult) -> list[str]:
    return [m for m in result.degraded if "being indexed for meaning search" in m]


def test_the_notes_count_stops_after_at_most(library, alice) -> None:
    spaces = [personal_space_id(alice.pk)]
    total = vectors.pending_count(spaces)
    assert (
        total
        == Passage.objects.filter(
            document__owner=alice, is_head=True, document__deleted_at__isnull=True
        ).count()
    )
    assert total > 5
    assert vectors.pending_note_count(spaces, at_most=total) == total
    assert vectors.pending_note_count(spaces, at_most=total + 10) == total
    assert vectors.pending_note_count(spaces, at_most=5) == 6  # "more than 5"
    assert vectors.pending_note_count(spaces, at_most=0) == 1
    assert vectors.pending_note_count([personal_space_id(alice.pk) + 999], at_most=10) == 0


def test_the_note_says_more_than_beyond_its_bound(library, alice, monkeypatch) -> None:
    total = vectors.pending_count([personal_space_id(alice.pk)])
    result = search(user=alice, query="certbot", mode="hybrid", rerank="off")
    assert pending_notes(result) == [
        f"{INDEXING} ({total:,} passages waiting); keyword search already finds them."
    ]
    monkeypatch.setattr(pipeline, "PENDING_NOTE_MAX", total - 1)
    for mode, tail in (
        ("hybrid", "; keyword search already finds them."),
        ("semantic", ": this search by meaning misses them until then."),
    ):
        result = search(user=alice, query="certbot", mode=mode, rerank="off")
        assert pending_notes(result) == [
            f"{INDEXING} (more than {total - 1:,} passages waiting){tail}"
        ]


def test_a_note_saved_a_moment_ago_is_counted_at_once(alice) -> None:
    services.note_create(owner=alice, title="Certs", body="Rotate certbot certificates.")
    sync_vectors()
    assert pending_notes(search(user=alice, query="certbot", mode="hybrid", rerank="off")) == []
    services.note_create(owner=alice, title="More certs", body="Certbot renews on Friday.")
    result = search(user=alice, query="certbot", mode="hybrid", rerank="off")
    assert pending_notes(result) == [
        f"{INDEXING} (1 passage waiting); keyword search already finds them."
    ]
    sync_vectors()
    assert pending_notes(search(user=alice, query="certbot", mode="hybrid", rerank="off")) == []


def test_graph_expansion_scoring_counts_no_pending_passages(alice, monkeypatch) -> None:
    factories.note(alice, "Team Falcon", "# Team Falcon\n\nPages go to the falcon-pager alias.\n")
    factories.note(
        alice,
        "Billing API",
        "# Billing API\n\nBilling API takes card payments.\n\nOn call: see [[Team Falcon]].\n",
    )
    counted: list[object] = []
    real = vectors.pending_note_count

    def counting(*args: object, **kwargs: object) -> int:
        counted.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(vectors, "pending_note_count", counting)
    result = search(
        user=alice, query="Who is on call for Billing API?", mode="hybrid", follow_links=True
    )
    assert result.expansion is not None and result.expansion.ran
    assert [h for h in result.hits if h.via is not None]  # expansion scored linked documents
    assert len(counted) == 1  # the search's own note only: expansion's scoring discards notes
    assert pending_notes(result) == [
        f"{INDEXING} (2 passages waiting); keyword search already finds them."
    ]


# --- counting a candidate's words -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "text"),
    [
        ("Runbooks › Failovers", "Promoting replicas quickly; the replica's fail-over."),
        ("Café", "Crème brûlée, naïve résumé: CAFÉ cafe\u0301 ﬁle ﬁles Ⅻ x\ue000y"),
        ("", ""),
        ("Title only", ""),
        ("", "rotate rotating rotated ROTATES rotation 2024 v2 ext4 allkeys-lru"),
    ],
)
def test_passage_stems_are_the_folded_tokens(title: str, text: str) -> None:
    assert pipeline.passage_stems(title, text) == set(folded_tokens(title + "\n" + text))


def test_words_matched_reads_the_cached_stems_of_the_passage_as_it_is_now() -> None:
    query = parse("failover replicas")
    row = CandidateRow(1, 1, "Runbooks", "Promoting replicas after a failover", 0, "note", "")
    assert pipeline.words_matched(query, row) == 2
    edited = row._replace(text="Promoting replicas")  # same passage id, new text: new entry
    assert pipeline.words_matched(query, edited) == 1
    assert pipeline.words_matched(query, row) == 2
