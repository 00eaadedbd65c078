"""Trust rank (retrieval/trust.py), following docs/trust-rank.md: key = r × (1 + penalty[tier]),
ordered by key, then r, then passage id. Pure: no database."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from notes.models import TrustTier
from retrieval.trust import PENALTY, TIER_ORDER, tier_order, trust_key, trust_rank

NOTE = TrustTier.NOTE
ANNOTATION = TrustTier.ANNOTATION
EXTERNAL = TrustTier.EXTERNAL_CURRENT
STALE = TrustTier.EXTERNAL_STALE
INFERRED = TrustTier.INFERRED


@dataclass(frozen=True)
class Item:
    passage_id: int
    tier: str


def rank(items: list[Item]) -> list[Item]:
    return trust_rank(items, tier_of=lambda i: i.tier, passage_id_of=lambda i: i.passage_id)


def relevance(*tiers: str, first_id: int = 100) -> list[Item]:
    """Items in relevance order; passage ids descend so id order never agrees by accident."""
    return [Item(first_id - i, tier) for i, tier in enumerate(tiers)]


def position_of(order: list[Item], item: Item) -> int:
    return order.index(item) + 1


# --- the table in docs/trust-rank.md ----------------------------------------------------------


def test_penalties_match_the_documented_table():
    assert PENALTY == {
        NOTE: 0.0,
        ANNOTATION: 0.1,
        EXTERNAL: 0.25,
        STALE: 0.5,
        INFERRED: 1.0,
    }
    # Plain strings (as stored in the database) find the same penalties.
    assert trust_key(4, "external") == 5.0
    assert trust_key(4, "external_stale") == 6.0


@pytest.mark.parametrize(
    ("position", "tier", "key"),
    [
        (5, NOTE, 5.0),
        (4, EXTERNAL, 5.0),
        (4, STALE, 6.0),
        (3, INFERRED, 6.0),
        (2, EXTERNAL, 2.5),
        (10, ANNOTATION, 11.0),
    ],
)
def test_trust_key_is_position_times_one_plus_penalty(position, tier, key):
    assert trust_key(position, tier) == pytest.approx(key)


def test_unknown_tier_gets_the_lowest_trust():
    assert trust_key(3, "something-new") == trust_key(3, INFERRED)


# --- consequences listed in docs/trust-rank.md ------------------------------------------------


@pytest.mark.parametrize("tier", [NOTE, ANNOTATION, EXTERNAL, STALE, INFERRED])
def test_equal_trust_keeps_relevance_order(tier):
    items = relevance(*([tier] * 12))
    assert rank(items) == items


def test_note_at_5_goes_ahead_of_stale_external_at_4():
    items = relevance(NOTE, NOTE, NOTE, STALE, NOTE)
    stale, note5 = items[3], items[4]
    order = rank(items)
    assert position_of(order, note5) < position_of(order, stale)
    assert order == [items[0], items[1], items[2], note5, stale]


def test_note_at_5_goes_ahead_of_inferred_edge_at_3():
    items = relevance(NOTE, NOTE, INFERRED, NOTE, NOTE)
    inferred, note5 = items[2], items[4]
    order = rank(items)
    assert position_of(order, note5) < position_of(order, inferred)
    # Key 6 for the inferred edge: behind the notes at 4 and 5, which keep their order.
    assert order == [items[0], items[1], items[3], note5, inferred]


def test_current_external_at_4_stays_ahead_of_note_at_5_on_a_key_tie():
    items = relevance(NOTE, NOTE, NOTE, EXTERNAL, NOTE)
    external, note5 = items[3], items[4]
    assert trust_key(4, EXTERNAL) == trust_key(5, NOTE)
    order = rank(items)
    assert position_of(order, external) < position_of(order, note5)
    assert order == items


def test_key_tie_is_decided_by_relevance_not_passage_id():
    # Same situation, but the note's passage id is the smaller one: r still decides.
    items = [Item(1, NOTE), Item(2, NOTE), Item(3, NOTE), Item(900, EXTERNAL), Item(4, NOTE)]
    assert rank(items) == items


def test_external_at_2_stays_ahead_of_note_at_3():
    items = relevance(NOTE, EXTERNAL, NOTE)
    order = rank(items)
    assert position_of(order, items[1]) < position_of(order, items[2])
    assert order == items


def test_a_much_more_relevant_external_is_not_buried():
    # Stale external at 1 (key 1.5) stays ahead of a note at 2; inferred at 1 (key 2) ties the
    # note at 2 and wins on r.
    assert rank(relevance(STALE, NOTE))[0].tier == STALE
    assert rank(relevance(INFERRED, NOTE))[0].tier == INFERRED


def test_trust_moves_a_note_only_past_near_ties():
    # A note at 10 passes a current external at 9 (key 11.25) and 8 (key 10, tie → r), no more.
    items = relevance(*([NOTE] * 7), EXTERNAL, EXTERNAL, NOTE)
    order = rank(items)
    note10 = items[9]
    assert position_of(order, note10) == 9
    assert order[7] == items[7]  # external at 8 keeps its place (key 10 ties, r = 8 < 10)
    assert order[9] == items[8]  # external at 9 drops one place


# --- determinism ------------------------------------------------------------------------------


def test_deterministic_and_input_untouched():
    items = relevance(STALE, INFERRED, NOTE, NOTE, EXTERNAL, NOTE)
    snapshot = list(items)
    first = rank(items)
    assert items == snapshot
    assert rank(list(items)) == first
    # keys 1.5, 4, 3, 4, 6.25, 6 → by key, then r.
    assert [i.passage_id for i in first] == [100, 98, 99, 97, 95, 96]


def test_result_depends_on_positions_and_tiers_not_on_passage_ids():
    tiers = (EXTERNAL, NOTE, STALE, NOTE, INFERRED, NOTE, ANNOTATION)
    ascending = relevance(*tiers, first_id=100)
    descending = [Item(1000 + i, tier) for i, tier in enumerate(tiers)]

    def positions(order, items):
        return [items.index(i) for i in order]

    assert positions(rank(ascending), ascending) == positions(rank(descending), descending)


@hypothesis_settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([NOTE, ANNOTATION, EXTERNAL, STALE, INFERRED]), max_size=40),
    st.permutations(range(40)),
)
def test_property_ordered_by_key_then_r_then_passage_id(tiers, ids):
    items = [Item(ids[i], tier) for i, tier in enumerate(tiers)]
    order = rank(items)
    assert sorted(order, key=lambda i: i.passage_id) == sorted(items, key=lambda i: i.passage_id)
    r = {item: position for position, item in enumerate(items, start=1)}
    keys = [(trust_key(r[i], i.tier), r[i], i.passage_id) for i in order]
    assert keys == sorted(keys)
    # Among hits of one tier, relevance order is kept.
    for tier in set(tiers):
        assert [i for i in order if i.tier == tier] == [i for i in items if i.tier == tier]
    # A note never falls behind a less trusted hit that was less relevant.
    for a in items:
        for b in items:
            if a.tier == NOTE and r[a] < r[b]:
                assert order.index(a) < order.index(b)


def test_the_tier_order_is_the_penalty_order_and_the_declared_gradient():
    """One trust order: conflicts and claims (answer/decision.py) order tiers by the same
    penalties search ranks with, and that order is `TrustTier`'s declared gradient."""
    assert tuple(TrustTier.values) == TIER_ORDER
    assert [PENALTY[t] for t in TIER_ORDER] == sorted(PENALTY.values())
    assert [tier_order(t) for t in TIER_ORDER] == list(range(len(TIER_ORDER)))
    assert tier_order("bogus") == len(TIER_ORDER)  # unknown: after every known tier
