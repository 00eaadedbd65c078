"""One user-facing version number: a dropped claim's reason names a
version by its number within its document — the number the note, history and version pages
show — never by its database id, which only URLs and the API's fields carry.

The note here has three versions and other notes were saved before it, so its head's id is
not its number: a reason naming the id ("does not occur in version 7") would contradict the
version page ("Version 3 of 3").
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from notes import services
from notes.models import Document, Version
from retrieval.answer.ask import ask
from retrieval.answer.gate import relabel_reason, version_labels
from retrieval.answer.trace import Trace
from retrieval.answer.types import Claim, Support
from retrieval.models import AskTrace
from tests.factories import ScriptedAnswerer

pytestmark = pytest.mark.django_db

TITLE = "Replica runbook"
BODIES = [
    "Fail over to the replica when the primary is down.",
    "Fail over to the replica when the primary is down for a minute.",
    "Fail over to the replica when the primary is down for two minutes.",
]
QUESTION = "When do I fail over to the replica?"


@pytest.fixture
def runbook(alice) -> Document:
    """A note saved three times, after enough other versions that its ids are not 1, 2, 3."""
    for i in range(4):
        services.note_create(owner=alice, title=f"Other {i}", body=f"Unrelated text {i}.")
    note = services.note_create(owner=alice, title=TITLE, body=BODIES[0])
    for body in BODIES[1:]:
        note.refresh_from_db()
        services.note_update(
            document=note, user=alice, base_version_id=note.head_id, title=TITLE, body=body
        )
    note.refresh_from_db()
    assert note.head.number == 3 and note.head_id != note.head.number
    return note


def fabricated(version_id: int) -> Claim:
    """A claim quoting text its cited version does not hold: dropped at the verbatim step."""
    text = "Fail over after five minutes."
    return Claim(text=text, support=(Support(version_id=version_id, quoted_span=text),))


def version_page_number(client, note: Document, version: Version) -> str:
    """The number the version page gives `version` ("Version N of M" → "N")."""
    page = client.get(reverse("notes:version", args=[note.pk, version.pk])).content.decode()
    match = re.search(r"Version (\d+) of \d+", page)
    assert match, page
    return match.group(1)


def dropped_reasons(client, trace_id: int) -> list[str]:
    page = client.get(reverse("ask-permalink", args=[trace_id])).content.decode()
    return re.findall(r"failed at verbatim: ([^<]*)</li>", page)


def test_a_dropped_claim_names_the_number_the_version_page_shows(alice, alice_client, runbook):
    head = runbook.head
    outcome = ask(
        user=alice,
        question=QUESTION,
        answerer=ScriptedAnswerer([fabricated(head.pk)]),
        mode="lexical",
    )
    number = version_page_number(alice_client, runbook, head)
    assert number == "3"
    expected = f"quoted span 1 does not occur in version {number} of “{TITLE}”"
    assert [v.reason for v in outcome.dropped] == [expected]
    # The answer page (its permalink) says the same.
    assert dropped_reasons(alice_client, outcome.trace_id) == [expected]


def test_a_claim_citing_a_version_never_shown_names_no_id(alice, alice_client, runbook):
    old = runbook.versions.get(number=1)  # not in the pack: only head passages are searched
    outcome = ask(
        user=alice,
        question=QUESTION,
        answerer=ScriptedAnswerer([fabricated(old.pk)]),
        mode="lexical",
    )
    reason = "quoted span 1 cites a version that was not shown to the answerer"
    assert [v.reason for v in outcome.dropped] == [reason]
    assert dropped_reasons(alice_client, outcome.trace_id) == [reason]


def test_a_reason_stored_with_a_version_id_is_shown_with_its_number(alice, alice_client, runbook):
    """Answers stored before the fix named the version by id; their pages now name it by
    its number, read from the stored pack."""
    head = runbook.head
    outcome = ask(
        user=alice,
        question=QUESTION,
        answerer=ScriptedAnswerer([fabricated(head.pk)]),
        mode="lexical",
    )
    row = AskTrace.objects.get(pk=outcome.trace_id)
    row.answer["dropped"][0]["reason"] = f"quoted span 1 does not occur in version {head.pk}"
    row.save(update_fields=["answer"])
    assert dropped_reasons(alice_client, row.pk) == [
        f"quoted span 1 does not occur in version 3 of “{TITLE}”"
    ]


def test_relabel_reason_rewrites_only_the_id_reasons():
    labels = {7: "version 3 of “Runbook”"}
    assert (
        relabel_reason("quoted span 2 does not occur in version 7", labels)
        == "quoted span 2 does not occur in version 3 of “Runbook”"
    )
    assert (
        relabel_reason("quoted span 1 cites version 7, which was not shown to the answerer", labels)
        == "quoted span 1 cites version 3 of “Runbook”, which was not shown to the answerer"
    )
    assert (
        relabel_reason("quoted span 1 cites version 9, which was not shown to the answerer", labels)
        == "quoted span 1 cites a version that was not shown to the answerer"
    )
    assert (
        relabel_reason("quoted span 1 does not occur in version 9", labels)
        == "quoted span 1 does not occur in the version it cites"
    )
    for unchanged in (
        "quoted span 1 does not occur in version 3 of “Runbook”",
        "the claim cites no evidence",
        "does not answer the question: its relevance score 0.10 is below the threshold 0.50",
    ):
        assert relabel_reason(unchanged, labels) == unchanged


def test_version_labels_use_the_pack_items_numbers(alice, runbook):
    outcome = ask(user=alice, question=QUESTION, answerer=ScriptedAnswerer([]), mode="lexical")
    row = AskTrace.objects.get(pk=outcome.trace_id)
    pack = Trace.from_row(row).pack
    assert pack is not None
    labels = version_labels(pack.items)
    assert labels[runbook.head_id] == f"version 3 of “{TITLE}”"
