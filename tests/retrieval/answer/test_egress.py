"""Egress control (retrieval/answer/egress.py): no-egress documents withheld (by the database flag,
not only the pack's copy of it), the log row's fields, the refusal to log inside an open
transaction, and the read-only admin list with its filters."""

from __future__ import annotations

import hashlib

import pytest
from django.db import transaction
from django.urls import reverse

from notes import services
from notes.models import Document
from retrieval.answer.egress import (
    BELOW_FLOOR,
    OVER_BUDGET,
    WITHHELD_LABEL,
    EgressLogError,
    destination_host,
    log_egress,
    plan_egress,
)
from retrieval.answer.types import PackItem
from retrieval.models import EgressLog
from tests.factories import pack_of


@pytest.fixture
def two_notes(alice) -> tuple[Document, Document]:
    shared = services.note_create(
        owner=alice, title="Cache", body="Set maxmemory-policy allkeys-lru on the cache."
    )
    private = services.note_create(
        owner=alice, title="HR notes", body="The salary review happens in March."
    )
    return shared, private


def test_no_egress_document_is_withheld(two_notes) -> None:
    shared, private = two_notes
    # The pack was built before the flag was set: its items still say no_egress=False.
    pack = pack_of(shared, private)
    Document.objects.filter(pk=private.pk).update(no_egress=True)
    assert not any(item.no_egress for item in pack.items)
    plan = plan_egress(pack)
    assert {i.document_id for i in plan.sendable} == {shared.pk}
    assert {i.document_id for i in plan.withheld} == {private.pk}
    assert plan.withheld_documents() == [
        {
            "document_id": private.pk,
            "version_id": private.head_id,
            "document_title": "HR notes",
            "label": WITHHELD_LABEL,
        }
    ]


def test_item_flag_alone_also_withholds(two_notes) -> None:
    shared, private = two_notes
    pack = pack_of(shared, private)
    pack.items[1] = PackItem(**{**pack.items[1].as_dict(), "no_egress": True})
    plan = plan_egress(pack)
    assert [i.document_id for i in plan.withheld] == [private.pk]


def test_nothing_withheld_by_default(two_notes) -> None:
    plan = plan_egress(pack_of(*two_notes))
    assert plan.withheld == [] and len(plan.sendable) == 2


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://127.0.0.1:8080/v1/chat/completions", "127.0.0.1:8080"),
        ("https://api.openai.com/v1/chat/completions", "api.openai.com"),
        ("https://user:secret@LLM.example.com:443/v1", "llm.example.com:443"),
        ("http://[::1]:11434/v1/chat/completions", "[::1]:11434"),
    ],
)
def test_destination_host_is_host_and_port_only(url: str, host: str) -> None:
    assert destination_host(url) == host


def test_log_egress_writes_the_row(two_notes, alice) -> None:
    shared, _ = two_notes
    items = pack_of(shared).items
    body = b'{"messages": []}'
    row = log_egress(
        user=alice,
        destination_url="https://user:pw@llm.example.com:8443/v1/chat/completions",
        purpose="qa",
        items=items + items,  # the same version twice is one entry
        chars_sent=1234,
        redaction_count=2,
        withheld_count=1,
        request_body=body,
        item_chars={shared.head_id: 99},
    )
    row.refresh_from_db()
    assert row.user == alice
    assert row.destination_host == "llm.example.com:8443"
    assert row.purpose == "qa"
    assert row.items == [{"document_id": shared.pk, "version_id": shared.head_id, "chars": 99}]
    assert (row.chars_sent, row.redaction_count, row.withheld_count) == (1234, 2, 1)
    assert row.request_sha256 == hashlib.sha256(body).hexdigest()
    assert row.created_at is not None


def test_log_egress_counts_item_text_without_item_chars(two_notes) -> None:
    shared, _ = two_notes
    items = pack_of(shared).items
    row = log_egress(
        user=None,
        destination_url="http://127.0.0.1:1/v1",
        purpose="judge",
        items=items,
        chars_sent=10,
        redaction_count=0,
        withheld_count=0,
        request_body=b"x",
    )
    assert row.user is None
    assert row.items[0]["chars"] == sum(len(i.text) for i in items)


def test_log_egress_refuses_inside_a_transaction(db) -> None:
    with transaction.atomic(), pytest.raises(EgressLogError, match="open transaction"):
        log_egress(
            user=None,
            destination_url="http://127.0.0.1:1/v1",
            purpose="qa",
            items=[],
            chars_sent=0,
            redaction_count=0,
            withheld_count=0,
            request_body=b"x",
        )
    assert EgressLog.objects.count() == 0


def test_log_egress_rejects_unknown_purpose(db) -> None:
    with pytest.raises(ValueError, match="purpose"):
        log_egress(
            user=None,
            destination_url="http://127.0.0.1:1/v1",
            purpose="exfiltrate",
            items=[],
            chars_sent=0,
            redaction_count=0,
            withheld_count=0,
            request_body=b"x",
        )


# --- admin -----------------------------------------------------------------------------------


def _row(user, host: str, purpose: str) -> EgressLog:
    return log_egress(
        user=user,
        destination_url=f"http://{host}/v1/chat/completions",
        purpose=purpose,
        items=[],
        chars_sent=5,
        redaction_count=0,
        withheld_count=0,
        request_body=purpose.encode(),
    )


def test_admin_lists_egress_read_only_with_filters(staff_client, alice, bob) -> None:
    _row(alice, "127.0.0.1:8080", "qa")
    _row(bob, "api.example.com", "judge")
    url = reverse("admin:retrieval_egresslog_changelist")

    def hosts(**params: object) -> set[str]:
        page = staff_client.get(url, params)
        assert page.status_code == 200
        return {row.destination_host for row in page.context["cl"].result_list}

    assert hosts() == {"127.0.0.1:8080", "api.example.com"}
    assert hosts(purpose="judge") == {"api.example.com"}
    assert hosts(destination_host="127.0.0.1:8080") == {"127.0.0.1:8080"}
    assert hosts(user__id__exact=bob.pk) == {"api.example.com"}
    assert hosts(created_at__gte="2000-01-01T00:00:00+00:00") == {
        "127.0.0.1:8080",
        "api.example.com",
    }
    assert hosts(created_at__lt="2000-01-01T00:00:00+00:00") == set()
    assert "127.0.0.1:8080" in staff_client.get(url).content.decode()
    # Read-only: no add, no delete, no change form that saves.
    assert staff_client.get(reverse("admin:retrieval_egresslog_add")).status_code == 403
    row = EgressLog.objects.first()
    change = staff_client.post(
        reverse("admin:retrieval_egresslog_change", args=[row.pk]), {"purpose": "tool"}
    )
    assert change.status_code == 403
    row.refresh_from_db()
    assert row.purpose != "tool"


def test_admin_egress_list_needs_staff(alice_client) -> None:
    page = alice_client.get(reverse("admin:retrieval_egresslog_changelist"))
    assert page.status_code == 302
    assert reverse("admin:login") in page["Location"]


# --- only what is needed leaves the machine --------------------------------


@pytest.fixture
def three_notes(alice) -> tuple[Document, Document, Document]:
    backups = services.note_create(
        owner=alice, title="Backups", body="The nightly backups run at 03:30 UTC since March."
    )
    restore = services.note_create(
        owner=alice, title="Restore", body="Restore drills happen on the first Monday."
    )
    secrets = services.note_create(
        owner=alice, title="Credentials", body="Backup bucket key: sk_test_4eC39HqLyjWDarjtT1zdp7dc"
    )
    return backups, restore, secrets


def test_a_document_below_the_relevance_floor_is_not_sent(three_notes) -> None:
    backups, restore, secrets = three_notes
    pack = pack_of(backups, restore, secrets)
    scores = {pack.items[0].passage_id: 0.9, pack.items[1].passage_id: 0.5}
    plan = plan_egress(pack, question="When do backups run?", relevance=scores, floor=0.4)
    assert [i.document_id for i in plan.sendable] == [backups.pk, restore.pk]
    assert [(i.document_id, why) for i, why in plan.not_sent] == [(secrets.pk, BELOW_FLOOR)]
    assert secrets.head_id not in plan.sent_versions() and secrets.head_id not in plan.bodies
    assert all("sk_test" not in block.text for block in plan.blocks)
    assert not plan.clears([secrets.head_id]) and plan.clears([backups.head_id])


def test_the_budget_keeps_the_best_items_first(three_notes) -> None:
    backups, restore, secrets = three_notes
    pack = pack_of(backups, restore, secrets)
    first, second, third = (item.passage_id for item in pack.items)
    scores = {first: 0.5, second: 0.9, third: 0.7}
    budget = len(pack.items[1].text) + len(pack.items[2].text)
    plan = plan_egress(pack, relevance=scores, floor=0.1, max_chars=budget)
    # Pack order is kept among the sent items; the lowest-scoring one is over the budget.
    assert [i.passage_id for i in plan.sendable] == [second, third]
    assert [(i.passage_id, why) for i, why in plan.not_sent] == [(first, OVER_BUDGET)]
    assert sum(len(b.text) for b in plan.blocks) <= budget


def test_the_best_item_goes_even_past_the_budget(three_notes) -> None:
    pack = pack_of(*three_notes)
    scores = {item.passage_id: 0.8 for item in pack.items}
    plan = plan_egress(pack, relevance=scores, floor=0.1, max_chars=1)
    assert [i.passage_id for i in plan.sendable] == [pack.items[0].passage_id]
    assert len(plan.not_sent) == 2


def test_without_scores_every_cleared_item_goes(three_notes) -> None:
    plan = plan_egress(pack_of(*three_notes), floor=0.99, max_chars=1)
    assert len(plan.sendable) == 3 and plan.not_sent == []


def test_a_large_parent_block_is_cut_to_the_budget_around_its_item(alice) -> None:
    filler = " ".join(f"word{n}" for n in range(3000))  # one paragraph, one parent section
    note = services.note_create(
        owner=alice, title="Huge", body=f"{filler}\n\nThe backup key rotates monthly.\n"
    )
    pack = pack_of(note)
    last = pack.items[-1]
    assert last.parent_end - last.parent_start > 4000  # the whole note is one section
    scores = {item.passage_id: (0.9 if item is last else 0.0) for item in pack.items}
    plan = plan_egress(pack, relevance=scores, floor=0.5, max_chars=1000)
    assert [i.passage_id for i in plan.sendable] == [last.passage_id]
    (block,) = plan.blocks
    assert len(block.text) <= 1000 and "rotates monthly" in block.text
    body = note.head.body
    assert body[block.block.start : block.block.end] == block.text


def test_a_non_finite_score_never_clears_the_floor(three_notes) -> None:
    pack = pack_of(*three_notes)
    scores = {item.passage_id: float("nan") for item in pack.items}
    scores[pack.items[0].passage_id] = 0.9
    plan = plan_egress(pack, relevance=scores, floor=0.1)
    assert [i.passage_id for i in plan.sendable] == [pack.items[0].passage_id]
