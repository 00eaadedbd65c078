"""PostgreSQL BM25 by MaxScore (`postgresql.pruned_top`) gives exactly what scoring every
posting gives: the same passages, order, ties and scores, on a generated corpus with a
Zipfian vocabulary (common words in most passages, rare ones in few, and duplicated
passages for ties), and right inside a writing transaction after writes, new versions and
deletes. SQLite FTS5 has no such path: these tests skip there.
"""

from __future__ import annotations

import random

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from notes import services
from retrieval.eligibility import audience_for
from retrieval.models import Passage
from retrieval.query import parse
from tests.factories import edit, note

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="MaxScore pruning is PostgreSQL's BM25 path"
    ),
]

SYLLABLES = ["ka", "lo", "mi", "ru", "te", "ba", "zo", "ne", "fi", "du", "sa", "vo"]
VOCABULARY_SIZE = 3000
PASSAGES = 2000
QUERIES = 500


def postgresql():
    from retrieval.index.lexical import postgresql

    return postgresql


def vocabulary(rng: random.Random) -> list[str]:
    """Distinct made-up words of three to four syllables (rank order: first most common)."""
    words: set[str] = set()
    while len(words) < VOCABULARY_SIZE:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(3, 4))))
    return sorted(words)


def zipf_text(rng: random.Random, words: list[str], weights: list[float], size: int) -> str:
    return " ".join(rng.choices(words, weights=weights, k=size))


def query_words(rng: random.Random, words: list[str], weights: list[float]) -> str:
    """Two to twelve words: common ones drawn by frequency, rarer ones uniformly."""
    common = rng.choices(words, weights=weights, k=rng.randint(1, 8))
    rare = rng.sample(words, rng.randint(1, 4))
    return " ".join(common + rare)


@pytest.mark.slow
def test_pruned_top_ten_is_the_exhaustive_top_ten_on_500_queries(alice) -> None:
    rng = random.Random(20)
    words = vocabulary(rng)
    weights = [1 / rank for rank in range(1, len(words) + 1)]
    bodies = [zipf_text(rng, words, weights, rng.randint(8, 60)) for _ in range(PASSAGES)]
    # Every tenth passage is another's text again: equal scores, ordered by passage id.
    bodies = [bodies[i - 1] if i % 10 == 9 else body for i, body in enumerate(bodies)]
    services.notes_import(
        owner=alice,
        notes=[
            services.NoteImport(f"gen:{i}", zipf_text(rng, words, weights, 2), body)
            for i, body in enumerate(bodies)
        ],
    )
    backend = postgresql()
    queries = [parse(query_words(rng, words, weights)) for _ in range(QUERIES)]
    stopped_early = 0
    for query in queries:
        exhaustive = backend.floor_search(query, limit=10, pruned=False)
        with CaptureQueriesContext(connection) as statements:
            pruned = backend.floor_search(query, limit=10)
        assert pruned == exhaustive, query
        stopped_early += any("unnest(" in s["sql"] for s in statements.captured_queries)
    # Most queries leave their common words to the candidates' lookups.
    assert stopped_early > QUERIES / 2
    # The lexical leg's own depth, and the leg itself (top list first, then eligibility).
    audience = audience_for(alice.pk)
    for query in queries[:40]:
        exhaustive = backend.floor_search(query, limit=256, pruned=False)
        assert backend.floor_search(query, limit=256) == exhaustive
        hits = backend.search(query, audience=audience)
        assert [(h.passage_id, h.score) for h in hits] == exhaustive


def test_pruning_sees_writes_new_versions_and_deletes_in_the_writing_transaction(alice) -> None:
    backend = postgresql()
    common = "lumen " * 3
    documents = [note(alice, f"Note {i}", f"{common} rare{i % 4} filler words") for i in range(40)]
    query = parse("lumen rare1 rare2 fresh")
    assert backend.floor_search(query, limit=5) == backend.floor_search(
        query, limit=5, pruned=False
    )
    with transaction.atomic():
        fresh = note(alice, "Fresh", "fresh fresh lumen")
        edit(documents[1], alice, "rare2 rare2 rare2 lumen")
        # Passages deleted outright (a soft-deleted note keeps its postings: eligibility
        # hides it) take their postings and lengths with them.
        gone = documents[2].passages.get(is_head=True).pk
        Passage.objects.filter(pk=gone).delete()
        pruned = backend.floor_search(query, limit=5)
        assert pruned == backend.floor_search(query, limit=5, pruned=False)
        ids = [pid for pid, _score in pruned]
        assert fresh.passages.get(is_head=True).pk in ids
        assert documents[1].passages.get(is_head=True).pk in ids
        assert gone not in ids


def test_phrases_and_exclusions_are_left_to_the_exhaustive_path(alice) -> None:
    note(alice, "One", "alpha beta gamma")
    note(alice, "Two", "alpha gamma beta")
    backend = postgresql()
    for text in ['"alpha beta"', "alpha -gamma", "alpha beta"]:
        query = parse(text)
        covered = backend.pruned_top(query, 10) is not None
        assert covered == (text == "alpha beta")
        assert backend.floor_search(query) == backend.floor_search(query, pruned=False)


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_statements_share_one_snapshot_of_their_own(alice) -> None:
    for i in range(12):
        note(alice, f"Note {i}", f"lumen lumen rare{i % 3} words")
    backend = postgresql()
    query = parse("lumen rare1")
    assert not connection.in_atomic_block
    with CaptureQueriesContext(connection) as statements:
        pruned = backend.floor_search(query, limit=3)
    assert pruned == backend.floor_search(query, limit=3, pruned=False)
    sql = [s["sql"] for s in statements.captured_queries if s["sql"] != "BEGIN"]
    assert "REPEATABLE READ" in sql[0]
    assert not connection.in_atomic_block
