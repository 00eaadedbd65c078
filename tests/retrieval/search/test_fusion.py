"""Reciprocal rank fusion with exact-match boosts (retrieval/search/fusion.py). Pure: no database.

The documented order: an exact match of a quoted phrase or identifier first, then the RRF sum
(k = 60, each leg contributes 1 / (k + rank)), then lexical rank, dense rank, passage id.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from retrieval.query import parse
from retrieval.search.fusion import (
    EXACT_MATCH_BOOST,
    RRF_K,
    FusedHit,
    LegHit,
    exact_matches,
    fuse,
)
from retrieval.text.normalise import nfkc_folded


def lex(passage_id: int, rank: int, score: float | None = None) -> LegHit:
    return LegHit(
        passage_id=passage_id,
        rank=rank,
        score=score if score is not None else 20.0 - rank / 10,
        score_name="bm25",
    )


def dense(passage_id: int, rank: int, score: float | None = None) -> LegHit:
    return LegHit(
        passage_id=passage_id,
        rank=rank,
        score=score if score is not None else 0.9 - rank / 1000,
        score_name="cosine",
    )


def ids(hits: list[FusedHit]) -> list[int]:
    return [h.passage_id for h in hits]


def documented_key(hit: FusedHit, k: int = RRF_K) -> tuple[float, float, float, int]:
    """The order the module documents, computed from the legs, not from the hit's own rrf."""
    rrf = 0.0
    if hit.lexical:
        rrf += 1.0 / (k + hit.lexical.rank)
    if hit.dense:
        rrf += 1.0 / (k + hit.dense.rank)
    boost = EXACT_MATCH_BOOST if hit.exact_matches else 0.0
    return (
        -(rrf + boost),
        hit.lexical.rank if hit.lexical else math.inf,
        hit.dense.rank if hit.dense else math.inf,
        hit.passage_id,
    )


# --- RRF arithmetic ---------------------------------------------------------------------------


def test_default_k_is_60():
    assert RRF_K == 60


def test_rrf_contributions_are_one_over_k_plus_rank_summed_across_legs():
    fused = fuse([lex(1, 1), lex(2, 2), lex(3, 7)], [dense(3, 1), dense(4, 3)])
    by_id = {h.passage_id: h for h in fused}
    assert by_id[1].rrf == pytest.approx(1 / 61)
    assert by_id[2].rrf == pytest.approx(1 / 62)
    assert by_id[3].rrf == pytest.approx(1 / 67 + 1 / 61)
    assert by_id[4].rrf == pytest.approx(1 / 63)
    # No exact match anywhere: the fused score is the RRF sum alone.
    assert all(h.fused_score == h.rrf for h in fused)


def test_custom_k_changes_the_contributions():
    fused = fuse([lex(1, 1)], [dense(1, 4)], k=10)
    assert fused[0].rrf == pytest.approx(1 / 11 + 1 / 14)


def test_passage_in_both_legs_outranks_one_in_a_single_leg_at_the_same_rank():
    # 9 is at rank 2 in both legs; 5 and 7 are at rank 1 of one leg only.
    fused = fuse([lex(5, 1), lex(9, 2)], [dense(9, 2), dense(7, 1)])
    order = ids(fused)
    # 2 / 62 > 1 / 61.
    assert order[0] == 9
    assert order.index(9) < order.index(5)
    assert order.index(9) < order.index(7)


def test_both_legs_beat_single_leg_even_against_a_better_single_rank():
    # 2 / (60 + 10) > 1 / (60 + 1): agreement between legs outweighs one leg's top spot.
    fused = fuse([lex(1, 1), *[lex(100 + r, r) for r in range(2, 10)], lex(2, 10)], [dense(2, 10)])
    assert ids(fused)[0] == 2


def test_empty_legs_give_no_hits():
    assert fuse([], []) == []
    assert ids(fuse([], [dense(3, 1)])) == [3]
    assert ids(fuse([lex(3, 1)], [])) == [3]


def test_a_repeated_passage_in_one_leg_is_counted_once():
    fused = fuse([lex(1, 1), lex(1, 2)], [])
    assert len(fused) == 1
    assert fused[0].rrf == pytest.approx(1 / 61)
    assert fused[0].lexical.rank == 1


@pytest.mark.parametrize("k", [0, -1, -60])
def test_non_positive_k_raises(k):
    with pytest.raises(ValueError, match="positive"):
        fuse([lex(1, 1)], [dense(1, 1)], k=k)


# --- deterministic ties -----------------------------------------------------------------------


def test_equal_rrf_is_broken_by_lexical_rank_first():
    # 10 is lexical rank 3 only, 2 is dense rank 3 only: both 1/63 exactly. The lexical hit
    # wins although its passage id is larger.
    fused = fuse([lex(20, 1), lex(21, 2), lex(10, 3)], [dense(30, 1), dense(31, 2), dense(2, 3)])
    by_id = {h.passage_id: h for h in fused}
    assert by_id[10].fused_score == by_id[2].fused_score
    order = ids(fused)
    assert order.index(10) < order.index(2)


def test_equal_rrf_across_both_legs_is_broken_by_lexical_rank():
    # 8: lexical 1 + dense 5; 3: lexical 5 + dense 1. Same sum, lexical rank 1 < 5.
    fused = fuse(
        [lex(8, 1), lex(40, 2), lex(41, 3), lex(42, 4), lex(3, 5)],
        [dense(3, 1), dense(50, 2), dense(51, 3), dense(52, 4), dense(8, 5)],
    )
    by_id = {h.passage_id: h for h in fused}
    assert by_id[8].fused_score == by_id[3].fused_score
    order = ids(fused)
    assert order[:2] == [8, 3]


def test_equal_rrf_and_lexical_rank_is_broken_by_dense_rank():
    # With a very large k every rank contributes the same float (1 / 1e17), so the fused
    # scores tie exactly; neither passage is in the lexical leg, so dense rank decides —
    # ahead of the passage id, which points the other way.
    k = 10**17
    fused = fuse([], [dense(1, 1), dense(9, 2), dense(4, 3)], k=k)
    assert len({h.fused_score for h in fused}) == 1
    assert ids(fused) == [1, 9, 4]
    # The same with both passages sharing a lexical rank (a tied lexical score).
    fused = fuse([lex(9, 1), lex(4, 1)], [dense(9, 2), dense(4, 1)], k=k)
    assert fused[0].fused_score == fused[1].fused_score
    assert ids(fused) == [4, 9]


def test_full_tie_is_broken_by_passage_id():
    # Two passages at the same lexical rank (a tie inside the leg) and in no dense list.
    fused = fuse([lex(42, 2), lex(7, 2), lex(5, 1)], [])
    assert ids(fused) == [5, 7, 42]
    fused = fuse([], [dense(42, 4), dense(7, 4)])
    assert ids(fused) == [7, 42]


def test_sort_key_matches_the_documented_order():
    hit = FusedHit(passage_id=3, rrf=0.5, lexical=None, dense=dense(3, 2))
    assert hit.sort_key() == (-0.5, math.inf, 2, 3)
    hit.exact_matches = ("nginx.conf",)
    assert hit.sort_key() == (-(0.5 + EXACT_MATCH_BOOST), math.inf, 2, 3)


# --- determinism ------------------------------------------------------------------------------


def _sample_legs(seed: int) -> tuple[list[LegHit], list[LegHit]]:
    rng = random.Random(seed)
    pool = list(range(1, 120))
    lexical_ids = rng.sample(pool, 60)
    dense_ids = rng.sample(pool, 60)
    return (
        [lex(pid, r) for r, pid in enumerate(lexical_ids, start=1)],
        [dense(pid, r) for r, pid in enumerate(dense_ids, start=1)],
    )


def _snapshot(hits: list[FusedHit]) -> list[tuple]:
    return [
        (h.passage_id, h.rrf, h.lexical, h.dense, h.exact_matches, tuple(h.reasons)) for h in hits
    ]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_input_gives_the_same_output(seed):
    lexical_hits, dense_hits = _sample_legs(seed)
    exact = {lexical_hits[30].passage_id: ("allkeys-lru",)}
    first = fuse(lexical_hits, dense_hits, exact=exact)
    second = fuse(list(lexical_hits), list(dense_hits), exact=dict(exact))
    assert _snapshot(first) == _snapshot(second)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shuffled_input_lists_give_the_identical_order(seed):
    lexical_hits, dense_hits = _sample_legs(seed)
    reference = ids(fuse(lexical_hits, dense_hits))
    rng = random.Random(seed + 100)
    for _ in range(5):
        shuffled_lexical, shuffled_dense = list(lexical_hits), list(dense_hits)
        rng.shuffle(shuffled_lexical)
        rng.shuffle(shuffled_dense)
        assert ids(fuse(shuffled_lexical, shuffled_dense)) == reference
        # Swapping which list arrives first does not matter either.
        assert ids(fuse(shuffled_lexical, shuffled_dense)) == ids(
            fuse(list(reversed(shuffled_lexical)), list(reversed(shuffled_dense)))
        )


# --- exact matches ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "needle", "passage_text"),
    [
        (
            "chrome ERR_SSL_PROTOCOL_ERROR fix",
            "ERR_SSL_PROTOCOL_ERROR",
            "Chrome shows ERR_SSL_PROTOCOL_ERROR when the proxy speaks plain HTTP.",
        ),
        (
            "redis allkeys-lru eviction",
            "allkeys-lru",
            "Set maxmemory-policy allkeys-lru on the cache.",
        ),
        (
            "where is nginx.conf",
            "nginx.conf",
            "The main file is /etc/nginx/nginx.conf on Debian.",
        ),
        (
            'rotate "staging certs" soon',
            "staging certs",
            "Rotate the Staging   Certs with certbot before Friday.",
        ),
    ],
)
def test_exact_match_ranks_first_even_from_rank_250_of_one_leg(query, needle, passage_text):
    parsed = parse(query)
    assert needle in parsed.needles
    target = 999
    found = exact_matches(parsed.needles, passage_text)
    assert found == (needle,)
    lexical_hits = [lex(pid, r) for r, pid in enumerate(range(1, 250), start=1)]
    lexical_hits.append(lex(target, 250))
    dense_hits = [dense(pid, r) for r, pid in enumerate(range(1, 257), start=1)]
    # Passage 1 is first in both legs: the strongest possible fused score without a boost.
    fused = fuse(lexical_hits, dense_hits, exact={target: found})
    assert fused[0].passage_id == target
    assert fused[0].exact_matches == (needle,)
    assert fused[0].fused_score == pytest.approx(EXACT_MATCH_BOOST + 1 / 310)
    assert fused[1].passage_id == 1
    assert fused[0].reasons[0] == f"exact match: “{needle}”"


def test_exact_match_from_the_dense_leg_alone_also_ranks_first():
    fused = fuse(
        [lex(1, 1), lex(2, 2)],
        [dense(1, 1), dense(2, 2), dense(77, 250)],
        exact={77: ("nginx.conf",)},
    )
    assert ids(fused)[0] == 77


def test_several_exact_matches_keep_rrf_order_among_themselves():
    fused = fuse(
        [lex(1, 1), lex(2, 2), lex(3, 3)],
        [],
        exact={3: ("allkeys-lru",), 2: ("allkeys-lru",)},
    )
    assert ids(fused) == [2, 3, 1]


def test_exact_matches_for_passages_outside_both_legs_are_ignored():
    fused = fuse([lex(1, 1)], [], exact={5: ("nginx.conf",), 1: ()})
    assert ids(fused) == [1]
    assert fused[0].exact_matches == ()
    assert not any(r.startswith("exact match") for r in fused[0].reasons)


def test_exact_matches_is_case_insensitive_and_whitespace_normalising():
    text = "Run   certbot\trenew\n\nthen restart NGINX.CONF reload; err_ssl_protocol_error gone"
    assert exact_matches(["certbot renew"], text) == ("certbot renew",)
    assert exact_matches(["CERTBOT   RENEW"], text) == ("CERTBOT   RENEW",)
    assert exact_matches(["nginx.conf"], text) == ("nginx.conf",)
    assert exact_matches(["ERR_SSL_PROTOCOL_ERROR"], text) == ("ERR_SSL_PROTOCOL_ERROR",)
    # Order of the needles is kept; absent and empty needles are dropped.
    assert exact_matches(["nginx.conf", "allkeys-lru", "", "certbot renew"], text) == (
        "nginx.conf",
        "certbot renew",
    )


def test_exact_matches_requires_the_whole_needle():
    assert exact_matches(["allkeys-lru"], "allkeys lru") == ()
    assert exact_matches(["nginx.conf"], "nginx conf") == ()
    assert exact_matches(["certbot renew"], "certbot will renew") == ()


def test_needles_are_compared_folded_in_case_width_and_whitespace():
    assert nfkc_folded("  Ａｂｃ \u00a0 DEF\n\tghi ") == "abc def ghi"
    assert nfkc_folded("Straße") == "strasse"
    assert exact_matches(["ＡＢＣ  def"], "x abc\u00a0DEF y") == ("ＡＢＣ  def",)


# --- explanations -----------------------------------------------------------------------------


def test_every_fused_hit_keeps_per_leg_rank_score_name_and_reasons():
    lexical_hits = [lex(1, 1, 12.5), lex(2, 2, 7.25)]
    dense_hits = [dense(2, 1, 0.8125), dense(3, 2, 0.5)]
    fused = fuse(lexical_hits, dense_hits, exact={3: ("nginx.conf",)})
    by_id = {h.passage_id: h for h in fused}

    assert by_id[1].lexical == lexical_hits[0]
    assert by_id[1].dense is None
    assert by_id[1].reasons == ["lexical rank 1 (bm25 12.5)"]

    both = by_id[2]
    assert (both.lexical.rank, both.lexical.score, both.lexical.score_name) == (2, 7.25, "bm25")
    assert (both.dense.rank, both.dense.score, both.dense.score_name) == (1, 0.8125, "cosine")
    assert both.reasons == ["lexical rank 2 (bm25 7.25)", "dense rank 1 (cosine 0.8125)"]

    assert by_id[3].lexical is None
    assert by_id[3].dense == dense_hits[1]
    assert by_id[3].reasons == ["exact match: “nginx.conf”", "dense rank 2 (cosine 0.5)"]
    for hit in fused:
        assert all(isinstance(r, str) and r for r in hit.reasons)
        assert not any("confidence" in r for r in hit.reasons)


def test_reasons_are_not_shared_between_hits():
    fused = fuse([lex(1, 1), lex(2, 2)], [])
    fused[0].reasons.append("extra")
    assert fused[1].reasons == ["lexical rank 2 (bm25 19.8)"]


# --- property ---------------------------------------------------------------------------------


@st.composite
def rankings(draw):
    pool = st.integers(min_value=1, max_value=60)
    lexical_ids = draw(st.lists(pool, unique=True, max_size=40))
    dense_ids = draw(st.lists(pool, unique=True, max_size=40))
    union = sorted(set(lexical_ids) | set(dense_ids))
    exact_ids = draw(st.sets(st.sampled_from(union), max_size=5)) if union else set()
    k = draw(st.sampled_from([1, 5, 60, 1000]))
    return lexical_ids, dense_ids, exact_ids, k


@hypothesis_settings(max_examples=200, deadline=None)
@given(rankings(), st.randoms(use_true_random=False))
def test_property_each_passage_once_sorted_by_the_documented_key(data, rng):
    lexical_ids, dense_ids, exact_ids, k = data
    lexical_hits = [lex(pid, r) for r, pid in enumerate(lexical_ids, start=1)]
    dense_hits = [dense(pid, r) for r, pid in enumerate(dense_ids, start=1)]
    exact = {pid: ("allkeys-lru",) for pid in exact_ids}

    fused = fuse(lexical_hits, dense_hits, k=k, exact=exact)

    out = ids(fused)
    assert len(out) == len(set(out))
    assert set(out) == set(lexical_ids) | set(dense_ids)
    keys = [documented_key(h, k) for h in fused]
    assert keys == sorted(keys)
    lexical_rank = {pid: r for r, pid in enumerate(lexical_ids, start=1)}
    dense_rank = {pid: r for r, pid in enumerate(dense_ids, start=1)}
    for h in fused:
        assert (h.lexical.rank if h.lexical else None) == lexical_rank.get(h.passage_id)
        assert (h.dense.rank if h.dense else None) == dense_rank.get(h.passage_id)
        expected = sum(
            1 / (k + r[h.passage_id]) for r in (lexical_rank, dense_rank) if h.passage_id in r
        )
        assert h.rrf == pytest.approx(expected)
        assert bool(h.exact_matches) == (h.passage_id in exact_ids)
    # Every exact match precedes every passage without one.
    flags = [bool(h.exact_matches) for h in fused]
    assert flags == sorted(flags, reverse=True)
    # Shuffled input lists give the identical order.
    shuffled_lexical, shuffled_dense = list(lexical_hits), list(dense_hits)
    rng.shuffle(shuffled_lexical)
    rng.shuffle(shuffled_dense)
    assert ids(fuse(shuffled_lexical, shuffled_dense, k=k, exact=exact)) == out
