"""docs/planner.md's rules table is the code's table, row for row, so neither drifts."""

from __future__ import annotations

from pathlib import Path

from retrieval.plan.rules import INTENT_RULES, TABLE_HEADER

DOC = Path(__file__).resolve().parents[3] / "docs" / "planner.md"


def doc_table() -> list[list[str]]:
    """The rows of the first table in docs/planner.md whose header is the rules header."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    header = "| # | " + " | ".join(TABLE_HEADER) + " |"
    start = lines.index(header)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def test_the_docs_table_is_the_codes_table():
    expected = [[str(i), *rule.cells()] for i, rule in enumerate(INTENT_RULES, start=1)]
    assert doc_table() == expected


def test_a_changed_row_would_be_caught():
    rows = doc_table()
    rows[0][2] = "something else"
    expected = [[str(i), *rule.cells()] for i, rule in enumerate(INTENT_RULES, start=1)]
    assert rows != expected
