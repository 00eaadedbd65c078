"""`lode_index health` finds missing, stale and altered meta rows; `repair` rewrites them."""

from __future__ import annotations

import io
from datetime import date

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from retrieval.index.health import index_health, repair_indexes
from retrieval.meta.health import meta_health, repair_meta
from retrieval.meta.store import RULES
from retrieval.models import DocumentAlias, DocumentMeta, DocumentTerm
from tests.factories import edit, note

pytestmark = pytest.mark.django_db


def three_notes(owner) -> list:
    return [
        note(owner, "Standup 2024-05-14", "Service Level Objective (SLO) talk."),
        note(owner, "Failover runbook", "Promote the replica."),
        note(owner, "Journal", "A quiet day."),
    ]


def test_fresh_rows_are_healthy(alice) -> None:
    documents = three_notes(alice)
    edit(documents[1], alice, "Promote the replica, then check lag.")
    found = meta_health()
    assert (found.documents, found.rows, found.problems) == (3, 3, [])


def test_each_kind_of_drift_is_found_and_repaired(alice) -> None:
    first, second, third = three_notes(alice)
    DocumentMeta.objects.filter(document=first).delete()  # missing
    DocumentMeta.objects.filter(document=second).update(rules=RULES + 1)  # stale
    DocumentMeta.objects.filter(document=third).update(kind="meeting")  # altered
    DocumentAlias.objects.filter(document=first).delete()
    found = meta_health()
    assert (found.missing, found.stale, found.altered) == (1, 1, 1)
    assert found.examples == {
        "missing": [first.pk],
        "stale": [second.pk],
        "altered": [third.pk],
    }
    assert len(found.problems) == 3
    assert repair_meta().rewritten == 3
    assert meta_health().problems == []
    assert DocumentMeta.objects.get(document=third).kind == "personal"
    assert DocumentAlias.objects.filter(document=first, short_key="slo").exists()
    assert DocumentMeta.objects.get(document=first).date == date(2024, 5, 14)


def test_altered_terms_or_aliases_count(alice) -> None:
    first, second, _ = three_notes(alice)
    DocumentTerm.objects.filter(document=first).update(weight=99)
    DocumentAlias.objects.filter(document=first).update(long="something else")
    DocumentAlias.objects.create(
        document=second, short="X", long="Y", short_key="x", long_key="y", pattern="also_called"
    )
    assert meta_health().altered == 2
    repair_meta()
    assert not DocumentAlias.objects.filter(document=second).exists()
    assert meta_health().problems == []


def test_index_health_and_repair_include_meta(alice) -> None:
    first, _, _ = three_notes(alice)
    DocumentMeta.objects.filter(document=first).delete()
    report = index_health(vectors=False, edges=False)
    assert not report.healthy
    assert any("no meta row" in problem for problem in report.problems)
    assert report.as_dict()["meta"]["missing"] == 1
    repaired = repair_indexes(vectors=False, edges=False)
    assert repaired.meta.rewritten == 1
    assert repaired.after.meta.problems == []
    assert index_health(vectors=False, edges=False, meta=False).meta.checked is False


def test_the_command_reports_and_repairs(alice) -> None:
    first, _, _ = three_notes(alice)
    DocumentMeta.objects.filter(document=first).update(date=date(1999, 1, 1))
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("lode_index", "health", "--skip-vectors", "--skip-edges", stdout=out)
    assert "meta       3 rows for 3 documents; missing 0, stale 0, altered 1" in out.getvalue()
    out = io.StringIO()
    call_command("lode_index", "repair", "--skip-vectors", "--skip-edges", stdout=out)
    assert "meta: re-derived the rows of 1 document" in out.getvalue()
    call_command("lode_index", "health", "--skip-vectors", "--skip-edges", stdout=io.StringIO())
