"""The catalog: what a reader's notes hold about some words, by kind and date, and per
space; rendered in plain words."""

from __future__ import annotations

from datetime import date

import pytest
from django.template.loader import render_to_string

from notes.services import note_delete
from retrieval.eligibility import audience_for
from retrieval.meta.catalog import (
    catalog_for_topic,
    month_range,
    space_catalog,
    topic_words,
)
from tests.factories import make_external, note

pytestmark = pytest.mark.django_db


def loki_notes(owner) -> None:
    note(owner, "March 2024 ops meeting", "Loki ingestion lagged. Loki retention set.")
    note(owner, "April 2024 ops meeting", "Loki upgraded; Loki dashboards moved.")
    note(owner, "Standup 2024-04-20", "Loki and Loki alerts again.")
    note(owner, "Logging runbook", "Restart Loki. Check Loki disk. Loki logs.")
    note(owner, "Groceries", "milk and eggs")


def test_month_range() -> None:
    assert month_range(date(2024, 3, 2), date(2024, 3, 30)) == "March 2024"
    assert month_range(date(2024, 3, 2), date(2024, 4, 1)) == "March–April 2024"
    assert month_range(date(2023, 11, 2), date(2024, 2, 1)) == "November 2023–February 2024"
    assert month_range(None, None) == ""


def test_topic_words_drop_question_words() -> None:
    assert topic_words(["What", "did", "we", "decide", "about", "Loki", "logs?"]) == [
        "decide",
        "loki",
        "logs",
    ]


def test_catalog_for_a_topic_groups_by_kind_with_months(alice) -> None:
    loki_notes(alice)
    found = catalog_for_topic(audience_for(alice.pk), ["what", "about", "Loki"])
    assert found.matched == ("loki",)
    assert [(g.kind, g.count, g.months) for g in found.groups] == [
        ("meeting", 3, "March–April 2024"),
        ("runbook", 1, month_range(found.groups[1].first, found.groups[1].last)),
    ]
    assert found.groups[0].documents[0].title == "Standup 2024-04-20"  # newest first
    assert found.sentence == (
        "About “loki”, your notes hold 3 meeting notes from March–April 2024 and the runbook "
        "“Logging runbook”."
    )
    assert [d.when for d in found.groups[0].documents] == [
        "20 April 2024",
        "April 2024",  # "April 2024 ops meeting" names a month, not a day
        "March 2024",
    ]


def test_catalog_sees_only_the_audience_and_not_the_trash(alice, bob) -> None:
    loki_notes(bob)
    assert catalog_for_topic(audience_for(alice.pk), ["loki"]).empty
    trashed = note(alice, "Loki design", "Loki Loki Loki")
    note_delete(document=trashed, user=alice)
    assert catalog_for_topic(audience_for(alice.pk), ["loki"]).empty


def test_a_plural_finds_the_singular_term(alice) -> None:
    note(alice, "Backup runbook", "backup backup backup nightly")
    assert catalog_for_topic(audience_for(alice.pk), ["backups"]).total == 1


def test_space_catalog(alice) -> None:
    loki_notes(alice)
    make_external(alice, source_name="wiki")
    [catalog] = space_catalog(audience_for(alice.pk))
    assert catalog.documents == 6
    assert [(k.kind, k.count) for k in catalog.kinds][:2] == [("meeting", 3), ("external", 1)]
    assert ("wiki", 1) in catalog.sources
    assert catalog.top_terms[0] == ("loki", 4)


def test_the_include_renders_plain_words_and_escapes_titles(alice) -> None:
    loki_notes(alice)
    note(alice, "<script>alert(1)</script> Loki meeting", "Loki Loki")
    page = render_to_string(
        "ask/_catalog.html", {"catalog": catalog_for_topic(audience_for(alice.pk), ["loki"])}
    )
    assert "your notes hold 4 meeting notes" in page
    assert "The runbook" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert 'href="/notes/' in page
    assert "and 1 more" in page
    assert (
        render_to_string(
            "ask/_catalog.html", {"catalog": catalog_for_topic(audience_for(alice.pk), ["zebra"])}
        ).strip()
        == ""
    )
