"""Lexical search through `retrieval.search.pipeline.search`: index freshness, head-only indexing,
per-user isolation, stemming, diacritics, phrases, exclusions, and hostile query text."""

from __future__ import annotations

import re

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from notes import services
from retrieval.index import lexical
from retrieval.query import QueryError, parse
from retrieval.search.pipeline import search
from tests.factories import HOSTILE_QUERIES, note

pytestmark = pytest.mark.django_db

LEXICAL = "lexical"


def find(user, query: str, **kwargs):
    kwargs.setdefault("mode", LEXICAL)
    return search(user=user, query=query, **kwargs)


def doc_ids(result) -> set[int]:
    assert result.error == "", result.error
    return {hit.passage.document_id for hit in result.hits}


# --------------------------------------------------------------------------
# Freshness and head-only indexing
# --------------------------------------------------------------------------


@pytest.mark.slow
def test_note_is_findable_inside_the_saving_transaction(alice):
    with transaction.atomic():
        created = note(alice, "Fresh", "The quokka smiles for the camera.")
        assert created.pk in doc_ids(find(alice, "quokka"))


def test_fixture_note_is_found_with_its_head_version(alice, alice_note):
    result = find(alice, "certbot")
    assert doc_ids(result) == {alice_note.pk}
    for hit in result.hits:
        assert hit.passage.is_head
        assert hit.passage.version_id == alice_note.head_id
        assert hit.rank >= 1
        assert hit.score_name


def test_edit_replaces_indexed_words(alice, alice_note):
    services.note_update(
        document=alice_note,
        user=alice,
        base_version_id=alice_note.head_id,
        title="Deploy runbook",
        body="Now we only talk about the giraffe enclosure.\n",
    )
    alice_note.refresh_from_db()
    assert doc_ids(find(alice, "certbot")) == set()
    assert doc_ids(find(alice, "maxmemory")) == set()
    result = find(alice, "giraffe")
    assert doc_ids(result) == {alice_note.pk}
    assert {hit.passage.version_id for hit in result.hits} == {alice_note.head_id}


def test_restore_brings_old_words_back(alice, alice_note):
    v1 = alice_note.head
    services.note_update(
        document=alice_note,
        user=alice,
        base_version_id=v1.pk,
        title="Deploy runbook",
        body="giraffe only",
    )
    alice_note.refresh_from_db()
    services.note_restore(
        document=alice_note, user=alice, version_id=v1.pk, base_version_id=alice_note.head_id
    )
    assert doc_ids(find(alice, "certbot")) == {alice_note.pk}
    assert doc_ids(find(alice, "giraffe")) == set()


def test_deleted_note_is_not_found(alice, alice_note):
    assert doc_ids(find(alice, "certbot")) == {alice_note.pk}
    services.note_delete(document=alice_note, user=alice)
    assert doc_ids(find(alice, "certbot")) == set()
    assert doc_ids(find(alice, '"deploy runbook"')) == set()


# --------------------------------------------------------------------------
# Isolation between users
# --------------------------------------------------------------------------


def test_users_only_find_their_own_passages(alice, bob):
    text = "Shared words: the pelican migration schedule."
    a = note(alice, "Pelicans", text)
    b = note(bob, "Pelicans", text)
    assert doc_ids(find(alice, "pelican migration")) == {a.pk}
    assert doc_ids(find(bob, "pelican migration")) == {b.pk}
    assert doc_ids(find(bob, '"pelican migration"')) == {b.pk}


def test_bob_never_finds_alices_only_words(alice_note, bob):
    note(bob, "Bob's", "Nothing about certificates here.")
    for query in ("certbot", "Rotate", "maxmemory-policy", '"staging certs"', "deploy runbook"):
        assert doc_ids(find(bob, query)) == set()


def test_eligibility_applies_before_the_limit(alice, bob):
    # Alice has many better-scoring matches; bob's single match must still be his top hit.
    for i in range(30):
        note(alice, f"Wombat {i}", "wombat wombat wombat wombat burrow")
    mine = note(bob, "Mine", "A wombat was seen once, long ago, near the river bank.")
    result = find(bob, "wombat", limit=1)
    assert [hit.passage.document_id for hit in result.hits] == [mine.pk]


def test_default_mode_respects_ownership(alice, bob):
    a = note(alice, "Otters", "otters hold hands while sleeping")
    b = note(bob, "Otters", "otters hold hands while sleeping")
    result_a = search(user=alice, query="otters")
    result_b = search(user=bob, query="otters")
    assert result_a.error == ""
    assert result_b.error == ""
    assert {h.passage.document_id for h in result_a.hits} == {a.pk}
    assert {h.passage.document_id for h in result_b.hits} == {b.pk}


# --------------------------------------------------------------------------
# Matching behaviour
# --------------------------------------------------------------------------


def test_stemming(alice, alice_note):
    assert alice_note.pk in doc_ids(find(alice, "rotating"))
    assert alice_note.pk in doc_ids(find(alice, "rotated"))


def test_case_insensitive(alice, alice_note):
    assert alice_note.pk in doc_ids(find(alice, "CERTBOT"))


def test_diacritics_are_folded(alice):
    cafe = note(alice, "Coffee", "We met at the café near the station.")
    assert doc_ids(find(alice, "cafe")) == {cafe.pk}
    assert doc_ids(find(alice, "café")) == {cafe.pk}


def test_quoted_phrase_requires_adjacency(alice):
    adjacent = note(alice, "One", "The orange harbour crane lifts containers.")
    apart = note(alice, "Two", "An orange boat sailed into the harbour at dawn.")
    assert doc_ids(find(alice, "orange harbour")) == {adjacent.pk, apart.pk}
    assert doc_ids(find(alice, '"orange harbour"')) == {adjacent.pk}
    assert doc_ids(find(alice, '"harbour orange"')) == set()


def test_excluded_word(alice):
    with_cache = note(alice, "Cache", "redis as a cache layer")
    without = note(alice, "Queue", "redis as a job queue")
    assert doc_ids(find(alice, "redis")) == {with_cache.pk, without.pk}
    assert doc_ids(find(alice, "redis -cache")) == {without.pk}
    assert doc_ids(find(alice, 'redis -"job queue"')) == {with_cache.pk}


def test_any_free_word_may_match(alice):
    first = note(alice, "A", "lighthouse keeper")
    second = note(alice, "B", "submarine captain")
    assert doc_ids(find(alice, "lighthouse submarine")) == {first.pk, second.pk}


def test_title_words_match(alice):
    titled = note(alice, "Kubernetes upgrade plan", "Steps to follow on the day.")
    assert doc_ids(find(alice, "kubernetes")) == {titled.pk}


def test_operator_words_are_searched_as_words(alice):
    near = note(alice, "Near", "The shop is NEAR the station and NOT far.")
    assert near.pk in doc_ids(find(alice, "NEAR"))
    assert near.pk in doc_ids(find(alice, '"NOT far"'))


def test_punctuated_identifier(alice, alice_note):
    assert alice_note.pk in doc_ids(find(alice, "maxmemory-policy"))
    assert alice_note.pk in doc_ids(find(alice, "allkeys-lru"))


def test_empty_query_is_not_an_error(alice, alice_note):
    for query in ("", "   "):
        result = find(alice, query)
        assert result.error == ""
        assert result.hits == []
        assert result.is_empty_query


def test_over_long_query_is_a_clean_error(alice, alice_note):
    result = find(alice, "rotate " * 5000)
    assert result.error
    assert result.hits == []


def test_unknown_mode_is_a_clean_error(alice, alice_note):
    result = search(user=alice, query="certbot", mode="telepathy")
    assert result.error
    assert result.hits == []


# --------------------------------------------------------------------------
# Hostile queries
# --------------------------------------------------------------------------


@pytest.fixture
def corpus(alice, bob, alice_note):
    note(alice, "NEAR and AND", "near and or not col foo title text rotate certs")
    note(bob, "Bob's copy", "Rotate the staging certs with certbot before Friday. foo near")
    return alice_note


def assert_clean(result, user) -> None:
    assert isinstance(result.error, str)
    if result.error:
        assert result.hits == []
    for hit in result.hits:
        assert hit.passage.document.owner_id == user.pk
        assert hit.passage.is_head


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_hostile_queries_never_raise(corpus, alice, query):
    assert_clean(find(alice, query), alice)


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_hostile_queries_never_raise_in_default_mode(corpus, alice, bob, query):
    assert_clean(search(user=alice, query=query), alice)
    assert_clean(search(user=bob, query=query), bob)


def test_hostile_queries_still_find_real_words(corpus, alice):
    # Operator-looking syntax around real words must not hide the words.
    for query in ("NEAR(rotate certs)", "^certbot", "{certbot}", '"certbot'):
        assert corpus.pk in doc_ids(find(alice, query)), query


_VOCAB = [
    "rotate",
    "certs",
    "certbot",
    "redis",
    "foo",
    "near",
    "NEAR",
    "AND",
    "OR",
    "NOT",
    '"',
    "-",
    "*",
    "(",
    ")",
    ":",
    "^",
    "{",
    "}",
    "café",
    "\x00",
    "\ud800",
    "👍🏽",
]
QUERY_TEXT = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(_VOCAB), max_size=12).map(" ".join),
    st.lists(st.sampled_from(_VOCAB), max_size=12).map("".join),
)


@pytest.mark.slow
@hypothesis_settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(query=QUERY_TEXT)
def test_search_never_raises_property(corpus, alice, query):
    result = find(alice, query)
    assert_clean(result, alice)


# --------------------------------------------------------------------------
# SQLite FTS5 MATCH construction
# --------------------------------------------------------------------------

sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="FTS5 MATCH syntax exists only on SQLite"
)
FTS_OPERATORS = {"(", ")", "OR", "AND", "NOT"}
QUOTED_RE = re.compile(r'"[^"]*"')


def assert_only_quoted_words(expression: str) -> None:
    for quoted in QUOTED_RE.findall(expression):
        inner = quoted[1:-1]
        assert inner.strip(), expression  # an empty "" would match nothing or error
    outside = QUOTED_RE.sub(" ", expression)
    assert '"' not in outside
    leftover = outside.replace("(", " ( ").replace(")", " ) ").split()
    assert set(leftover) <= FTS_OPERATORS, expression


@sqlite_only
@pytest.mark.parametrize("query", [q for q in HOSTILE_QUERIES if q.strip()])
def test_match_expression_quotes_everything(query):
    try:
        parsed = parse(query)
    except QueryError:
        return
    expression = lexical.backend().match_expression(parsed)
    if not parsed.is_empty:
        assert expression
    assert_only_quoted_words(expression)


@sqlite_only
def test_match_expression_shape():
    expression = lexical.backend().match_expression(parse('near AND "not or" -NEAR rotate'))
    assert_only_quoted_words(expression)
    assert '"near"' in expression
    assert '"not or"' in expression
    assert 'NOT "near"' in expression


@sqlite_only
@hypothesis_settings(max_examples=300, deadline=None, database=None)
@given(query=QUERY_TEXT)
def test_match_expression_never_lets_an_operator_through(query):
    try:
        parsed = parse(query)
    except QueryError:
        return
    assert_only_quoted_words(lexical.backend().match_expression(parsed))
