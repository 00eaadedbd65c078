"""The evidence pack: stable order (pinned by position, then search rank, ties by passage id),
near-duplicate removal with its recorded reasons, the item and character budget that pinned
passages bypass, PackItem fields from the canonical rows, and one copy of each parent block
at egress."""

from __future__ import annotations

import random

import pytest

from notes import services
from notes.models import Document, TrustTier
from retrieval.answer.pack import (
    JACCARD_THRESHOLD,
    assemble,
    build_pack,
    egress_blocks,
    token_set,
)
from retrieval.answer.types import PackItem
from retrieval.models import Passage
from retrieval.search.pipeline import search
from retrieval.text.normalise import nfkc_folded


def item(pid: int, text: str, *, rank: int = 0, pinned: bool = False, start: int = 0) -> PackItem:
    return PackItem(
        passage_id=pid,
        document_id=100 + pid,
        version_id=200 + pid,
        version_number=1,
        document_title=f"doc {pid}",
        kind="note",
        trust_tier="note",
        text=text,
        start=start,
        end=start + len(text),
        start_line=1,
        end_line=1,
        parent_start=start,
        parent_end=start + len(text),
        version_created_at="2025-01-01T00:00:00+00:00",
        pinned=pinned,
        rank=rank,
    )


def ids(pack) -> list[int]:
    return [i.passage_id for i in pack.items]


def reasons(pack) -> dict[int, str]:
    return {d["passage_id"]: d["reason"] for d in pack.dropped}


LONG = (
    "The nightly backup job copies the primary database to the replica host and then "
    "verifies every table checksum before it rotates the older archives away"
)


# --- order ------------------------------------------------------------------------------------


def test_pinned_first_by_position_then_hits_by_rank_ties_by_passage_id():
    pinned = [item(7, "second part", pinned=True, start=50), item(9, "first part", pinned=True)]
    ranked = [item(4, "gamma text", rank=2), item(3, "beta text", rank=2), item(5, "alpha", rank=1)]
    pack = assemble(pinned, ranked, max_items=10, max_chars=10_000)
    assert ids(pack) == [9, 7, 5, 3, 4]
    assert [i.pinned for i in pack.items] == [True, True, False, False, False]


def test_order_does_not_depend_on_input_order():
    ranked = [
        item(i, f"distinct passage number {i} about topic {i * 7}", rank=i) for i in range(1, 9)
    ]
    expected = ids(assemble([], ranked, max_items=5, max_chars=10_000))
    for seed in range(5):
        shuffled = ranked[:]
        random.Random(seed).shuffle(shuffled)
        assert ids(assemble([], shuffled, max_items=5, max_chars=10_000)) == expected


# --- near-duplicates ------------------------------------------------------------------------------


def test_same_text_keeps_the_better_ranked_and_records_why():
    pack = assemble(
        [],
        [item(2, "Rotate the certs.", rank=2), item(1, "Rotate the certs.", rank=1)],
        max_items=10,
        max_chars=1000,
    )
    assert ids(pack) == [1]
    assert pack.dropped == [
        {"passage_id": 2, "reason": "near-duplicate of 1", "rule": "same text", "rank": 2}
    ]


def test_same_normalised_text_is_a_duplicate():
    pack = assemble(
        [],
        [item(1, "Rotate  the\nCerts.", rank=1), item(2, "rotate the certs.", rank=2)],
        max_items=10,
        max_chars=1000,
    )
    assert ids(pack) == [1]
    assert pack.dropped[0]["rule"] == "same normalised text"
    assert nfkc_folded("A\u00a0B  c") == "a b c"


def test_near_identical_text_by_token_jaccard_is_a_duplicate():
    variant = LONG.replace("away", "off")  # one word of ~26 differs
    a, b = token_set(LONG), token_set(variant)
    assert len(a & b) / len(a | b) >= JACCARD_THRESHOLD
    pack = assemble(
        [], [item(1, LONG, rank=1), item(2, variant, rank=2)], max_items=10, max_chars=10_000
    )
    assert ids(pack) == [1]
    assert pack.dropped[0]["reason"] == "near-duplicate of 1"
    assert pack.dropped[0]["rule"].startswith("token Jaccard 0.9")


@pytest.mark.parametrize(
    "variant",
    [
        LONG + " every 6 hours",  # vs "every 12 hours": a value conflict, not a repeat
        LONG.replace("then verifies", "then never verifies"),
        LONG.replace("it rotates", "it doesn't rotate"),
    ],
)
def test_near_identical_text_differing_in_a_number_or_negation_is_kept(variant):
    original = LONG + " every 12 hours" if "hours" in variant else LONG
    pack = assemble(
        [], [item(1, original, rank=1), item(2, variant, rank=2)], max_items=10, max_chars=10_000
    )
    assert ids(pack) == [1, 2]


def test_dissimilar_text_is_kept():
    pack = assemble(
        [],
        [item(1, "Rotate the staging certs.", rank=1), item(2, "Set maxmemory.", rank=2)],
        max_items=10,
        max_chars=1000,
    )
    assert ids(pack) == [1, 2]
    assert pack.dropped == []


def test_a_hit_that_is_a_pinned_passage_is_dropped_as_already_pinned():
    pack = assemble(
        [item(1, "pinned text", pinned=True)],
        [item(1, "pinned text", rank=1)],
        max_items=10,
        max_chars=1000,
    )
    assert ids(pack) == [1]
    assert reasons(pack) == {1: "already pinned"}


def test_a_hit_duplicating_a_pinned_passage_is_dropped_and_pinned_wins():
    pack = assemble(
        [item(5, "Rotate the certs.", pinned=True)],
        [item(1, "Rotate the certs.", rank=1)],
        max_items=10,
        max_chars=1000,
    )
    assert ids(pack) == [5]
    assert reasons(pack) == {1: "near-duplicate of 5"}


# --- budget -------------------------------------------------------------------------------------


def test_max_items_drops_the_rest_as_over_budget():
    ranked = [item(i, f"passage {i} says something else {i * 11}", rank=i) for i in range(1, 6)]
    pack = assemble([], ranked, max_items=2, max_chars=10_000)
    assert ids(pack) == [1, 2]
    assert reasons(pack) == {3: "over budget", 4: "over budget", 5: "over budget"}


def test_max_chars_skips_a_long_item_and_still_takes_shorter_ones():
    ranked = [item(1, "a" * 60, rank=1), item(2, "b " * 40, rank=2), item(3, "c" * 30, rank=3)]
    pack = assemble([], ranked, max_items=10, max_chars=100)
    assert ids(pack) == [1, 3]
    assert reasons(pack) == {2: "over budget"}
    assert pack.chars <= 100


def test_pinned_passages_bypass_the_budget_and_do_not_use_it_up():
    pinned = [
        item(10 + i, f"section {i} of the pinned note {i * 3}", pinned=True, start=i * 100)
        for i in range(6)
    ]
    ranked = [item(1, "one hit", rank=1), item(2, "another hit entirely", rank=2)]
    pack = assemble(pinned, ranked, max_items=1, max_chars=10)
    assert ids(pack) == [10, 11, 12, 13, 14, 15, 1]
    assert reasons(pack) == {2: "over budget"}


def test_as_dict_records_budget_and_drops():
    pack = assemble([], [item(1, "x", rank=1), item(2, "x", rank=2)], max_items=3, max_chars=50)
    data = pack.as_dict()
    assert data["max_items"] == 3 and data["max_chars"] == 50
    assert [i["passage_id"] for i in data["items"]] == [1]
    assert data["dropped"][0]["passage_id"] == 2


# --- from the database ---------------------------------------------------------------------------


@pytest.fixture
def library(alice):
    note = services.note_create(
        owner=alice,
        title="Deploy runbook",
        body=(
            "# Deploy runbook\n\nRotate the staging certs with certbot before Friday.\n\n"
            "## Redis\n\nSet maxmemory-policy allkeys-lru on the staging cache.\n"
        ),
    )
    mirror = services.note_create(
        owner=alice, title="Certbot docs", body="Certbot rotates staging certs automatically."
    )
    Document.objects.filter(pk=mirror.pk).update(
        kind=Document.Kind.EXTERNAL, trust_tier=TrustTier.EXTERNAL_CURRENT, no_egress=True
    )
    return note, mirror


@pytest.mark.django_db
def test_build_pack_fills_items_from_the_canonical_rows(alice, library, settings):
    note, mirror = library
    settings.LODE_ASK_MAX_ITEMS = 5
    settings.LODE_ASK_MAX_CHARS = 5000
    result = search(user=alice, query="staging certs", mode="lexical", rerank="off")
    pack = build_pack(result.hits)
    assert pack.max_items == 5 and pack.max_chars == 5000
    assert [i.rank for i in pack.items] == sorted(i.rank for i in pack.items)
    by_doc = {i.document_id: i for i in pack.items}
    ext = by_doc[mirror.pk]
    assert ext.kind == "external" and ext.trust_tier == "external" and ext.no_egress is True
    first = next(i for i in pack.items if i.document_id == note.pk)
    passage = Passage.objects.select_related("version").get(pk=first.passage_id)
    assert first.version_id == note.head_id and first.version_number == 1
    assert first.document_title == "Deploy runbook" and first.no_egress is False
    assert first.text == passage.text == passage.version.body[first.start : first.end]
    assert (first.parent_start, first.parent_end) == (passage.parent_start, passage.parent_end)
    assert first.version_created_at == passage.version.created_at.isoformat()
    assert first.score_name and first.rank >= 1 and not first.pinned


@pytest.mark.django_db
def test_build_pack_with_pinned_passages_puts_every_one_first(alice, library):
    note, _ = library
    pinned = list(
        Passage.objects.filter(document=note, is_head=True)
        .select_related("document", "version")
        .order_by("-position")  # given out of order: the pack restores document order
    )
    assert len(pinned) >= 2
    result = search(user=alice, query="staging certs", mode="lexical", rerank="off")
    pack = build_pack(result.hits, pinned=pinned, max_items=1, max_chars=200)
    head = pack.items[: len(pinned)]
    assert [i.passage_id for i in head] == [p.pk for p in sorted(pinned, key=lambda p: p.position)]
    assert all(i.pinned and i.rank == 0 for i in head)
    assert len(pack.items) <= len(pinned) + 1


@pytest.mark.django_db
def test_egress_blocks_send_a_shared_parent_block_once(alice):
    # One section of three ~120-word paragraphs: chunked into several passages that share
    # the section as their parent block; a second section has its own.
    paragraphs = "\n\n".join(" ".join([f"word{p}x{i}" for i in range(120)]) for p in range(3))
    note = services.note_create(
        owner=alice, title="Steps", body=f"## Steps\n\n{paragraphs}\n\n## Other\n\nShort.\n"
    )
    passages = list(
        Passage.objects.filter(document=note, is_head=True)
        .select_related("document", "version")
        .order_by("position")
    )
    pack = build_pack([], pinned=passages)
    blocks = egress_blocks(pack.items)
    body = note.head.body
    assert sum(len(b.passage_ids) for b in blocks) == len(pack.items)
    for block in blocks:
        assert block.text == body[block.start : block.end]
        for pid in block.passage_ids:
            it = next(i for i in pack.items if i.passage_id == pid)
            assert block.start <= it.start and it.end <= block.end  # each keeps its own range
    shared = {(i.parent_start, i.parent_end) for i in pack.items}
    assert len(pack.items) >= 3 and len(blocks) == len(shared) == 2
    assert sum(len(b.text) for b in blocks) < sum(
        len(body[i.parent_start : i.parent_end]) for i in pack.items
    )


def test_egress_blocks_fall_back_to_the_item_text_when_the_block_does_not_fit():
    one = item(1, "hello", start=0)
    blocks = egress_blocks([one], bodies={one.version_id: "hel"})
    assert [(b.text, b.passage_ids) for b in blocks] == [("hello", [1])]
