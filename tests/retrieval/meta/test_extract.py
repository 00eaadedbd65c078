"""Reading a document's date, kind, aliases and top terms from its own text."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from retrieval.meta.extract import (
    AliasPair,
    DateSource,
    Kind,
    KindSource,
    Precision,
    alias_key,
    aliases_in,
    date_in,
    date_of,
    front_matter,
    headings,
    kind_of,
    top_terms,
)

CREATED = datetime(2025, 1, 9, 15, 30, tzinfo=UTC)


def test_front_matter_reads_flat_keys_and_needs_a_closing_line() -> None:
    assert front_matter('---\ndate: "2024-05-01"\nKind: ADR\ntags:\n  - x\n---\n# Body') == {
        "date": "2024-05-01",
        "kind": "ADR",
        "tags": "",
    }
    assert front_matter("---\ndate: 2024-05-01\n# never closed") == {}
    assert front_matter("date: 2024-05-01\n") == {}


def test_headings_skip_fenced_code() -> None:
    body = "# One\n```\n# not a heading\n```\n## Two ##\ntext"
    assert headings(body) == ["One", "Two"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Standup 2024-03-12", (date(2024, 3, 12), Precision.DAY)),
        ("2024/03/12 notes", (date(2024, 3, 12), Precision.DAY)),
        ("12 March 2024", (date(2024, 3, 12), Precision.DAY)),
        ("Notes for March 5th, 2024", (date(2024, 3, 5), Precision.DAY)),
        ("March 2024 ops meeting", (date(2024, 3, 1), Precision.MONTH)),
        ("Sept. 2023 review", (date(2023, 9, 1), Precision.MONTH)),
        ("ops review 2024-07", (date(2024, 7, 1), Precision.MONTH)),
        ("2024-02-30 is no day", None),
        ("version 1.2.3 of the tool", None),
        ("Mayday planning", None),
    ],
)
def test_date_in_reads_days_before_months(text: str, expected: object) -> None:
    assert date_in(text) == expected


def test_date_order_front_matter_then_title_then_heading_then_first_version() -> None:
    body = "---\ndate: 2023-11-02\n---\n# Review 1 May 2022\n"
    dated = date_of(title="Ops 2024-03-12", body=body, first_version_at=CREATED)
    assert (dated.value, dated.source) == (date(2023, 11, 2), DateSource.FRONT_MATTER)
    dated = date_of(title="Ops 2024-03-12", body="# Review 1 May 2022", first_version_at=CREATED)
    assert (dated.value, dated.source) == (date(2024, 3, 12), DateSource.TITLE)
    dated = date_of(title="Review", body="# Review 1 May 2022\n", first_version_at=CREATED)
    assert (dated.value, dated.source) == (date(2022, 5, 1), DateSource.HEADING)
    dated = date_of(
        title="Ops sync", body="", first_version_at=CREATED, path="/n/2024/2023-10-05-sync.md"
    )
    assert (dated.value, dated.source) == (date(2023, 10, 5), DateSource.PATH)
    # Only the first heading names the document's date; a later one is its content.
    dated = date_of(title="Review", body="# Review\n## 1 May 2022\n", first_version_at=CREATED)
    assert (dated.value, dated.source) == (date(2025, 1, 9), DateSource.FIRST_VERSION)


@pytest.mark.parametrize(
    ("title", "body", "path", "external", "expected"),
    [
        ("March 2024 ops meeting", "Loki was discussed.", "", False, (Kind.MEETING, "title")),
        ("Team standup", "", "", False, (Kind.MEETING, "title")),
        ("Notes", "## Attendees\nAnn\n## Action items\n", "", False, (Kind.MEETING, "headings")),
        ("Postgres failover runbook", "", "", False, (Kind.RUNBOOK, "title")),
        ("Failover", "## Steps\n## Rollback\n", "", False, (Kind.RUNBOOK, "headings")),
        ("ADR-7: design of the queue", "", "", False, (Kind.DECISION, "title")),
        (
            "Use Loki",
            "## Context\nx\n## Decision\ny\n## Consequences\nz",
            "",
            False,
            (Kind.DECISION, KindSource.HEADINGS),
        ),
        ("Search service design", "", "", False, (Kind.DESIGN, "title")),
        ("RFC: new sync", "", "", False, (Kind.DESIGN, "title")),
        ("Queue", "## Goals\n## Non-goals\n", "", False, (Kind.DESIGN, "headings")),
        ("Journal", "Today I rested.", "", False, (Kind.PERSONAL, "title")),
        ("Tuesday", "", "/notes/journal/tuesday.md", False, (Kind.PERSONAL, "path")),
        ("Restore backups", "", "/notes/misc.md", True, (Kind.EXTERNAL, KindSource.EXTERNAL)),
        ("Grocery list", "milk", "", False, (Kind.OTHER, KindSource.DEFAULT)),
        ("Ops sync, 2026-09-29", "", "", False, (Kind.MEETING, "title")),
        ("Ops sync", "", "", False, (Kind.OTHER, KindSource.DEFAULT)),  # a date makes a session
        ("Restart the billing API", "", "", False, (Kind.RUNBOOK, "title")),
        ("Handling a complaint", "", "", False, (Kind.RUNBOOK, "title")),
        ("Holiday rules", "", "", False, (Kind.OTHER, KindSource.DEFAULT)),
        ("Journal club rota", "", "", False, (Kind.OTHER, KindSource.DEFAULT)),
        ("Postmortem: replica lag", "## Action items\n", "", False, (Kind.OTHER, "title")),
        ("Incident 2026-03-11 sync errors", "", "", False, (Kind.OTHER, "title")),
        ("Banana bread", "## Steps", "/n/personal/recipe.md", False, (Kind.PERSONAL, "path")),
        ("Western blot", "", "/lab/protocols/western-blot.md", False, (Kind.RUNBOOK, "path")),
    ],
)
def test_kind_rules(title: str, body: str, path: str, external: bool, expected: object) -> None:
    assert kind_of(title=title, body=body, path=path, external=external) == expected


def test_front_matter_kind_or_type_wins_over_every_cue() -> None:
    body = "---\ntype: ADR\n---\n## Attendees\n"
    assert kind_of(title="Weekly meeting", body=body) == (Kind.DECISION, KindSource.FRONT_MATTER)
    body = "---\nkind: journal\n---\n"
    assert kind_of(title="x", body=body, external=True) == (Kind.PERSONAL, "front_matter")
    # A value naming no kind is ignored.
    assert kind_of(title="Weekly meeting", body="---\nkind: zebra\n---\n")[0] == Kind.MEETING


def test_aliases_stated_outright() -> None:
    text = (
        "We track the Service Level Objective (SLO) weekly. An SLI (service level indicator) "
        "is measured. The staging cluster, also called blue, runs tests. Loki aka the log "
        "store is here. PgBouncer (also known as the pooler) sits in front."
    )
    assert aliases_in(text) == [
        AliasPair("SLO", "Service Level Objective", "acronym_after"),
        AliasPair("SLI", "service level indicator", "acronym_before"),
        AliasPair("blue", "staging cluster", "also_called"),
        AliasPair("log store", "Loki", "also_called"),
        AliasPair("pooler", "PgBouncer", "also_called"),
    ]


def test_glossary_lines_and_hyphenated_long_forms() -> None:
    text = (
        "# Glossary\n"
        "- **RPO**: recovery point objective, how much data we may lose.\n"
        "- **PITR**: point-in-time recovery, restoring to a chosen moment.\n"
        "SLO - service level objective\n"
        "- **canary**: the first app host.\n"  # not an acronym
        "TODO: fix the alerts\n"  # initials spell nothing
        "- **IC**: whoever is on call leads.\n"  # a definition, not a long form
    )
    assert aliases_in(text) == [
        AliasPair("RPO", "recovery point objective", "glossary"),
        AliasPair("PITR", "point-in-time recovery", "glossary"),
        AliasPair("SLO", "service level objective", "glossary"),
    ]
    assert aliases_in("Point-in-time Recovery (PITR) is tested.") == [
        AliasPair("PITR", "Point-in-time Recovery", "acronym_after")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "See the notes (below) and the plan (TODO).",
        "We moved the disks (NVMe) last week.",  # the initials spell nothing
        "The Recovery Point Objective (RTO) is wrong.",  # initials do not match
        "Call me (maybe).",
        "Kubernetes (K8s) runs it.",  # one capital: not read as an acronym
        "Ops review, Aka will compare the two dashboards.",  # a person named Aka
    ],
)
def test_no_alias_without_a_precise_statement(text: str) -> None:
    assert aliases_in(text) == []


def test_alias_key_folds() -> None:
    assert alias_key("Service  Level-Objective") == "service level objective"


def test_top_terms_weight_titles_and_are_stable() -> None:
    terms = top_terms(title="Loki logging", body="Loki stores logs. Loki is cheap. The 2024 logs.")
    assert terms[:3] == [("loki", 5), ("logging", 3), ("logs", 2)]
    assert all(term not in ("the", "2024") for term, _ in terms)
