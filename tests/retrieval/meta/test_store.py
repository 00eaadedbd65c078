"""The meta rows follow a document's head version, and dates and kinds read from them."""

from __future__ import annotations

from datetime import date

import pytest

from retrieval.meta import document_dates, document_kinds
from retrieval.meta.extract import DateSource, Kind
from retrieval.models import DocumentAlias, DocumentMeta, DocumentTerm
from tests.factories import edit, make_external, note

pytestmark = pytest.mark.django_db


def test_saving_a_note_writes_its_meta_rows(alice) -> None:
    document = note(
        alice,
        "March 2024 ops meeting",
        "## Attendees\nAnn\n\nLoki keeps the Service Level Objective (SLO) logs.",
    )
    row = DocumentMeta.objects.get(document=document)
    assert (row.date, row.date_source, row.date_precision) == (date(2024, 3, 1), "title", "month")
    assert (row.kind, row.kind_source, row.version_id) == (Kind.MEETING, "title", document.head_id)
    assert DocumentAlias.objects.filter(document=document).values_list("short_key", "long_key")[
        0
    ] == ("slo", "service level objective")
    assert "loki" in set(
        DocumentTerm.objects.filter(document=document).values_list("term", flat=True)
    )


def test_a_new_version_replaces_the_rows(alice) -> None:
    document = note(alice, "Failover runbook", "Service Level Objective (SLO).")
    edit(document, alice, "---\ndate: 2023-11-02\nkind: decision\n---\nNo acronyms now.")
    document.refresh_from_db()
    row = DocumentMeta.objects.get(document=document)
    assert (row.version_id, row.kind, row.date) == (document.head_id, "decision", date(2023, 11, 2))
    assert row.date_source == DateSource.FRONT_MATTER
    assert not DocumentAlias.objects.filter(document=document).exists()


def test_dates_and_kinds_by_document_id(alice) -> None:
    meeting = note(alice, "Standup 2024-05-14", "Talked about the queue.")
    plain = note(alice, "Groceries", "milk and eggs")
    mirrored = make_external(alice, title="Cache runbook")
    dates = document_dates([meeting.pk, plain.pk, mirrored.pk, 999_999])
    assert dates[meeting.pk] == date(2024, 5, 14)
    plain.refresh_from_db()
    assert dates[plain.pk] == plain.head.created_at.date()  # its first version's day
    assert 999_999 not in dates
    assert document_kinds([meeting.pk, plain.pk, mirrored.pk]) == {
        meeting.pk: Kind.MEETING,
        plain.pk: Kind.OTHER,
        mirrored.pk: Kind.EXTERNAL,
    }


def test_a_document_without_a_row_is_derived_on_read(alice) -> None:
    document = note(alice, "Design of the 12 June 2024 queue", "x")
    DocumentMeta.objects.filter(document=document).delete()
    assert document_dates([document.pk]) == {document.pk: date(2024, 6, 12)}
    assert document_kinds([document.pk]) == {document.pk: Kind.DESIGN}
    assert not DocumentMeta.objects.filter(document=document).exists()  # reading writes nothing


def test_the_date_falls_back_to_the_first_version_not_the_head(alice) -> None:
    document = note(alice, "Groceries", "milk")
    first = document.head
    edit(document, alice, "milk and eggs")
    type(first).objects.filter(pk=first.pk).update(created_at="2020-02-03T10:00:00Z")
    edit(document, alice, "milk, eggs and bread")
    assert document_dates([document.pk]) == {document.pk: date(2020, 2, 3)}
