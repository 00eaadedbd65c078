"""BM25 on both lexical backends: the same hand-computed scores from SQLite FTS5's
`bm25()` and PostgreSQL's statistics tables; those statistics right inside the writing
transaction, after a new version and a delete; health finding drifted statistics and repair
rebuilding them.

The corpus uses words that every stemmer leaves alone and no stop words, so a passage's
tokens are its words on both databases and the expected score is plain arithmetic
(`expected_bm25`, FTS5's formula: k1 1.2, b 0.75, title hits weighted 3, IDF clamped at 1e-6).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import pytest
from django.db import connection, transaction

from notes import services
from retrieval.eligibility import audience_for
from retrieval.index import lexical
from retrieval.index.health import index_health, repair_indexes
from retrieval.index.lexical.base import TEXT_WEIGHT, TITLE_WEIGHT
from retrieval.models import Passage
from retrieval.query import parse
from tests.concurrency import postgresql_only, race
from tests.factories import note

pytestmark = pytest.mark.django_db

postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the statistics tables are PostgreSQL's"
)

# (title, body): one passage each.
CORPUS = [
    ("Zebra", "zebra lion zebra"),
    ("Tiger", "lion tiger"),
    ("Otter", "otter otter otter lion"),
    ("Heron", "heron"),
    ("Falcon", "falcon heron lion falcon"),
]


def words(text: str) -> list[str]:
    return text.lower().split()


def expected_bm25(docs: Sequence[tuple[str, str]], query: Sequence[str]) -> list[float]:
    """FTS5's bm25 of every (title, body) in `docs` for the single-word terms `query`."""
    k1, b = 1.2, 0.75
    n = len(docs)
    lengths = [len(words(t)) + len(words(x)) for t, x in docs]
    avgdl = sum(lengths) / n
    scores = []
    for (title, body), length in zip(docs, lengths, strict=True):
        score = 0.0
        for term in query:
            df = sum(term in words(t) or term in words(x) for t, x in docs)
            idf = math.log((n - df + 0.5) / (df + 0.5))
            idf = idf if idf > 0 else 1e-6
            tf = TITLE_WEIGHT * words(title).count(term) + TEXT_WEIGHT * words(body).count(term)
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl))
        scores.append(score)
    return scores


def scores(user, query: str) -> dict[int, float]:
    """document id -> the lexical leg's score for `query`."""
    hits = lexical.backend().search(parse(query), audience=audience_for(user.pk))
    assert all(h.score_name == "bm25" for h in hits)
    document_of = dict(
        Passage.objects.filter(pk__in=[h.passage_id for h in hits]).values_list("pk", "document_id")
    )
    return {document_of[h.passage_id]: h.score for h in hits}


def assert_scores(user, documents, docs, query: str) -> None:
    """The leg returns exactly the documents holding a query word, scored as FTS5 would,
    best first."""
    expected = expected_bm25(docs, words(query))
    want = {d.pk: s for d, s in zip(documents, expected, strict=True) if s > 0}
    got = scores(user, query)
    assert set(got) == set(want)
    for pk, score in want.items():
        assert got[pk] == pytest.approx(score, rel=1e-9), (query, pk)
    hits = lexical.backend().search(parse(query), audience=audience_for(user.pk))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.fixture
def animals(alice) -> list:
    return [note(alice, title, body) for title, body in CORPUS]


def test_the_corpus_is_one_passage_per_note_with_these_words(alice, animals) -> None:
    rows = Passage.objects.filter(is_head=True).order_by("document_id")
    assert [(p.title_text, p.text) for p in rows] == CORPUS


@pytest.mark.parametrize(
    "query", ["zebra", "lion", "heron", "otter", "zebra lion", "falcon heron otter", "tiger heron"]
)
def test_scores_are_bm25_computed_by_hand_on_both_databases(alice, animals, query) -> None:
    assert_scores(alice, animals, CORPUS, query)


def test_a_title_hit_outranks_a_body_hit(alice, animals) -> None:
    # The same words, "ibis" once in the title of one and once in the body of the other.
    extra = [("Ibis", "crane lion"), ("Crane", "ibis lion")]
    titled, bodied = (note(alice, title, body) for title, body in extra)
    hits = lexical.backend().search(parse("ibis"), audience=audience_for(alice.pk))
    document_of = dict(Passage.objects.values_list("pk", "document_id"))
    assert [document_of[h.passage_id] for h in hits] == [titled.pk, bodied.pk]
    assert_scores(alice, [*animals, titled, bodied], [*CORPUS, *extra], "ibis crane")


def test_a_just_saved_note_counts_inside_its_transaction(alice, animals) -> None:
    with transaction.atomic():
        added = note(alice, "Lynx", "lynx lion lynx lion")
        docs = [*CORPUS, ("Lynx", "lynx lion lynx lion")]
        # The new note is found and scored, and the others' scores moved: N, df and avgdl
        # include it before the transaction commits.
        assert_scores(alice, [*animals, added], docs, "lion lynx")
        assert_scores(alice, [*animals, added], docs, "zebra")


def test_a_new_version_replaces_its_words_in_the_statistics(alice, animals) -> None:
    heron = animals[3]
    services.note_update(
        document=heron, user=alice, base_version_id=heron.head_id, title="Heron", body="lion lion"
    )
    docs = [*CORPUS[:3], ("Heron", "lion lion"), CORPUS[4]]
    assert_scores(alice, animals, docs, "lion heron")


def test_deleted_passages_leave_the_statistics(alice, animals) -> None:
    Passage.objects.filter(document=animals[1]).delete()
    docs = [CORPUS[0], *CORPUS[2:]]
    rest = [animals[0], *animals[2:]]
    assert_scores(alice, rest, docs, "lion zebra")


def test_other_owners_count_in_the_statistics_as_in_fts5(alice, bob, animals) -> None:
    note(bob, "Mole", "mole lion mole")
    docs = [*CORPUS, ("Mole", "mole lion mole")]
    expected = expected_bm25(docs, ["lion"])
    got = scores(alice, "lion")
    assert set(got) == {d.pk for d in animals if "lion" in words(dict(CORPUS)[d.title])}
    for document, score in zip(animals, expected, strict=False):
        if document.pk in got:
            assert got[document.pk] == pytest.approx(score, rel=1e-9)


def test_phrases_and_exclusions_keep_their_meaning(alice, animals) -> None:
    assert set(scores(alice, '"lion zebra"')) == {animals[0].pk}
    assert set(scores(alice, "lion -otter")) == {animals[0].pk, animals[1].pk, animals[4].pk}
    assert set(scores(alice, 'heron "falcon heron"')) == {animals[4].pk}


# --- PostgreSQL: the top list from the postings ------------------------------------------


def gin_top_list(query) -> list[tuple[int, float]]:
    """The top list through the GIN matches, as for a phrase: the reference for the
    postings-only way a query of single words takes."""
    from retrieval.index.lexical import postgresql

    original = postgresql.single_words
    postgresql.single_words = lambda query: False
    try:
        return postgresql.floor_search(query)
    finally:
        postgresql.single_words = original


@postgres_only
@pytest.mark.parametrize(
    "query", ["zebra", "lion", "falcon heron otter", "tiger heron gnu", "the lion", "ibis lion"]
)
def test_single_words_are_ranked_from_the_postings_as_from_the_gin_matches(
    alice, bob, animals, query
) -> None:
    from retrieval.index.lexical import postgresql

    note(bob, "Gnu", "gnu lion")  # another owner's passage is in the top list too
    # An edited note (its old passages are no longer at head) and a deleted one.
    services.note_update(
        document=animals[1],
        user=alice,
        base_version_id=animals[1].head_id,
        title="Tiger",
        body="ibis lion tiger",
    )
    services.note_delete(document=animals[3], user=alice)
    parsed = parse(query)
    assert postgresql.single_words(parsed)
    found = postgresql.floor_search(parsed)
    assert found and found == gin_top_list(parsed)


@postgres_only
def test_a_word_the_parser_splits_still_needs_all_its_parts(alice) -> None:
    # PostgreSQL's parser makes 'long-term', 'long' and 'term' of one token, and its
    # plainto_tsquery ANDs them: a passage with "long" alone is not a match. The top list
    # must not take it from the postings of 'long'.
    from retrieval.index.lexical import postgresql
    from retrieval.query import ParsedQuery

    both = note(alice, "Care", "long-term care plans")
    note(alice, "Walk", "a long walk")
    parsed = ParsedQuery(raw="long-term", text="long-term", terms=(("long-term",),))
    found = postgresql.floor_search(parsed)
    assert [pid for pid, _ in found] == list(both.passages.values_list("pk", flat=True))
    assert found == gin_top_list(parsed)


# --- PostgreSQL: the statistics tables, their health and repair ---------------------------


def stats_sql(*statements: str) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def check_detect_and_repair(user, documents, corrupt, expected: str) -> None:
    """Healthy → corrupt → health names it → repair → healthy, canonical unchanged, the
    same scores as before the corruption."""
    assert index_health(vectors=False).healthy
    before = scores(user, "lion zebra heron")
    corrupt()
    damaged = index_health(vectors=False)
    assert any(expected in p for p in damaged.problems), damaged.problems
    repaired = repair_indexes(vectors=False)
    assert repaired.after.healthy, repaired.after.problems
    assert repaired.canonical_unchanged
    assert scores(user, "lion zebra heron") == before
    assert_scores(user, documents, CORPUS, "lion zebra heron")


@postgres_only
def test_a_wrong_posting_is_found_and_repaired(alice, animals) -> None:
    check_detect_and_repair(
        alice,
        animals,
        lambda: stats_sql("UPDATE retrieval_bm25_posting SET body_tf = 7 WHERE lexeme = 'lion'"),
        "BM25 postings disagree",
    )


@postgres_only
def test_missing_and_extra_postings_are_found_and_repaired(alice, animals) -> None:
    def corrupt() -> None:
        stats_sql(
            "DELETE FROM retrieval_bm25_posting WHERE lexeme = 'zebra'",
            "INSERT INTO retrieval_bm25_posting VALUES ('heron', 0, 0, 1, 1)",
        )
        # df moved: the leg scores with what the tables say
        assert scores(alice, "heron") != pytest.approx(
            dict(zip([d.pk for d in animals], expected_bm25(CORPUS, ["heron"]), strict=True))
        )

    check_detect_and_repair(alice, animals, corrupt, "1 extra or different")


@postgres_only
def test_a_wrong_length_is_found_and_repaired(alice, animals) -> None:
    check_detect_and_repair(
        alice,
        animals,
        lambda: stats_sql("UPDATE retrieval_bm25_length SET length = length + 5"),
        "BM25 passage lengths disagree",
    )


@postgres_only
def test_a_dropped_trigger_is_found_and_recreated(alice, animals) -> None:
    def corrupt() -> None:
        stats_sql("DROP TRIGGER retrieval_bm25_ai ON retrieval_passage")
        note(alice, "Newt", "newt lion")  # written while the statistics are not kept

    assert index_health(vectors=False).healthy
    corrupt()
    damaged = index_health(vectors=False)
    assert any("trigger retrieval_bm25_ai is missing" in p for p in damaged.problems)
    assert any("BM25 postings disagree" in p for p in damaged.problems)
    repaired = repair_indexes(vectors=False)
    assert repaired.after.healthy, repaired.after.problems
    newt = note(alice, "Eel", "eel lion")  # the recreated trigger keeps them again
    assert index_health(vectors=False).healthy
    assert newt.pk in scores(alice, "eel")


@postgres_only
def test_dropped_statistics_tables_are_found_and_rebuilt(alice, animals) -> None:
    check_detect_and_repair(
        alice,
        animals,
        lambda: stats_sql("DROP TABLE retrieval_bm25_length"),
        "statistics tables are missing",
    )


@postgres_only
def test_an_update_that_changes_no_words_leaves_the_postings_alone(alice, animals) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT ctid::text FROM retrieval_bm25_posting ORDER BY 1")
        before = cursor.fetchall()
        cursor.execute("UPDATE retrieval_passage SET logical_id = 'x'")
        cursor.execute("SELECT ctid::text FROM retrieval_bm25_posting ORDER BY 1")
        assert cursor.fetchall() == before


@postgresql_only  # row locks between connections
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_never_wait_on_the_statistics(alice, bob) -> None:
    """Two transactions writing passages with the same words: the second commits while the
    first is still open (no shared counter row to wait on; `lock_timeout` turns a wait into
    an error), and afterwards the statistics count both."""
    first_wrote, second_done = threading.Event(), threading.Event()

    def first() -> int:
        with transaction.atomic():
            created = note(alice, "Zebra", "zebra lion zebra")
            first_wrote.set()
            assert second_done.wait(timeout=60)
        return created.pk

    def second() -> int:
        assert first_wrote.wait(timeout=60)
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '5s'")
                created = note(bob, "Lion", "lion zebra")
            return created.pk
        finally:
            second_done.set()

    results = race([first, second])
    assert not [r for r in results if isinstance(r, Exception)], results
    report = index_health(vectors=False)
    assert report.healthy, report.problems
    docs = [("Zebra", "zebra lion zebra"), ("Lion", "lion zebra")]
    expected = expected_bm25(docs, ["zebra", "lion"])
    assert [scores(alice, "zebra lion")[results[0]]] == pytest.approx(expected[:1], rel=1e-9)
    assert [scores(bob, "zebra lion")[results[1]]] == pytest.approx(expected[1:], rel=1e-9)
