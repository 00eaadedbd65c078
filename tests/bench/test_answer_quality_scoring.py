"""How `bench/answer_quality.py` judges one ask of an answerable row, and how it counts per
split and intent: right and wrong Answers, the first thing shown (an Answer's first claim, or
the Best match), superseded values shown, procedure steps quoted completely and in order.

Pure: the scoring functions run on hand-made ask rows; no database, no model.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def aq() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "answer_quality_under_test", ROOT / "bench" / "answer_quality.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


DOC, OLD_DOC = 7, 8


def quote(start: int, end: int, doc: int = DOC) -> dict[str, Any]:
    return {"document_id": doc, "start": start, "end": end, "span": "x"}


def ask(*claims: list[dict[str, Any]], tier: str = "", best: list | None = None) -> dict:
    """An ask row as `ask_row` returns it: shown claims' quotes, tier and Best match."""
    answered = bool(claims)
    return {
        "answered": answered,
        "tier": tier or ("answer" if answered else "not_in_notes"),
        "claim_spans": list(claims),
        "supports": [q for claim in claims for q in claim],
        "best_match_spans": best or [],
        "split": "tune",
    }


def row(**extra: Any) -> dict[str, Any]:
    return {"doc": DOC, "range": (100, 150), "intent": "fact", **extra}


def test_right_wrong_and_first_shown(aq: ModuleType) -> None:
    r = ask([quote(0, 20)], [quote(120, 130)])
    aq.score_answerable(r, row())
    assert r["right"] and not r["wrong"] and not r["first_carries"]

    r = ask([quote(120, 130, doc=OLD_DOC)])
    aq.score_answerable(r, row())
    assert r["wrong"] and not r["right"] and not r["first_carries"]

    r = ask(tier="best_match", best=[quote(140, 160)])
    aq.score_answerable(r, row())
    assert r["first_carries"] and not r["right"] and not r["wrong"]

    # Not found in the stored body: nothing can carry it.
    r = ask([quote(120, 130)])
    aq.score_answerable(r, row(range=None))
    assert not r["right"] and r["wrong"]


def test_superseded_value_shown(aq: ModuleType) -> None:
    latest = row(intent="latest", superseded_ranges=[(OLD_DOC, (10, 30))])
    r = ask([quote(100, 150)], [quote(15, 25, doc=OLD_DOC)])
    aq.score_answerable(r, latest)
    assert r["right"] and r["superseded_shown"] and not r["latest_right"]

    r = ask([quote(100, 150)], [quote(15, 25)])  # same offsets, another document
    aq.score_answerable(r, latest)
    assert r["latest_right"] and not r["superseded_shown"]


def test_steps_complete_and_in_order(aq: ModuleType) -> None:
    steps = row(intent="procedure", step_ranges=[(10, 20), (30, 40), (50, 60)])
    r = ask([quote(10, 40)], [quote(50, 60)])  # one quote may carry two steps
    aq.score_answerable(r, steps)
    assert r["steps_complete"] and r["steps_in_order"]

    r = ask([quote(50, 60)], [quote(10, 20)], [quote(30, 40)])
    aq.score_answerable(r, steps)
    assert r["steps_complete"] and not r["steps_in_order"]

    r = ask([quote(10, 20)], [quote(50, 60)])
    aq.score_answerable(r, steps)
    assert not r["steps_complete"] and not r["steps_in_order"]


def test_counts_per_split_and_intent(aq: ModuleType) -> None:
    rows = []
    for intent, claims in (("fact", [[quote(100, 110)]]), ("fact", []), ("date", [[quote(0, 5)]])):
        r = ask(*claims)
        aq.score_answerable(r, row(intent=intent))
        rows.append(r)
    rows[2]["split"] = "holdout"
    table = aq.by_split_and_intent(rows)
    assert table["tune"]["fact"] == {
        "n": 2,
        "answered": 1,
        "right": 1,
        "wrong": 0,
        "first_carries": 1,
    }
    assert table["holdout"]["date"]["wrong"] == 1
    assert set(table) == {"tune", "holdout"}
