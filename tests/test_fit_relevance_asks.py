"""The ask-level refit's threshold rule (retrieval/answer/training/fit_relevance_asks.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from retrieval.answer.relevance import FEATURE_NAMES
from retrieval.answer.training import fit_relevance_asks as refit
from retrieval.answer.training.fit_relevance import Group, Question


def group(set_name: str, labels: list[int], qid: str = "q") -> Group:
    question = Question(qid=qid, set_name=set_name, text="x", corpus="notes", split="tune")
    n = len(labels)
    return Group(
        question, [], np.asarray(labels, dtype=np.float64), [], np.zeros((n, len(FEATURE_NAMES)))
    )


def test_ask_table_counts_an_ask_right_when_any_kept_claim_is_right_and_false_per_ask() -> None:
    groups = [
        group(refit.NOTES_ANSWERABLE, [0, 1]),
        group(refit.NOTES_UNANSWERABLE, [0, 0]),
        group(refit.SCIFACT_TRAIN, [1]),  # counted in its own set, never in right/false
    ]
    scores = [np.array([0.9, 0.5]), np.array([0.3, 0.35]), np.array([0.99])]
    at = {line["threshold"]: line for line in refit.ask_table(groups, scores)}
    assert (at[0.3]["right"], at[0.3]["false"], at[0.3]["net"]) == (1, 1, -2.0)
    assert (at[0.4]["right"], at[0.4]["false"], at[0.4]["net"]) == (1, 0, 1.0)
    # Above the right claim's score only the wrong claim of the answerable ask is kept.
    assert (at[0.6]["right"], at[0.6]["false"]) == (0, 0)
    assert at[0.6]["sets"][refit.NOTES_ANSWERABLE] == {"n": 1, "answered": 1, "right": 0}
    # The cost rule takes the best net, the lowest threshold among equals.
    assert refit.best_line(refit.ask_table(groups, scores))["threshold"] == 0.36


def test_egress_floor_is_a_low_percentile_of_right_claims_never_above_the_threshold() -> None:
    groups = [group(refit.NOTES_ANSWERABLE, [1, 0, 1]), group(refit.NOTES_UNANSWERABLE, [0])]
    scores = [np.array([0.2, 0.1, 0.7]), np.array([0.9])]
    assert refit.egress_floor(groups, scores, 0.5) == 0.2
    assert refit.egress_floor(groups, scores, 0.15) == 0.15


def test_load_groups_refuses_holdout_rows(tmp_path: Path) -> None:
    dump = tmp_path / "claims.jsonl"
    row = {"qid": "a", "set": refit.NOTES_ANSWERABLE, "question": "x", "claims": []}
    dump.write_text(json.dumps({**row, "split": "holdout"}) + "\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        refit.load_groups([str(dump)])
    dump.write_text(json.dumps({**row, "split": "tune"}) + "\n", encoding="utf-8")
    (loaded,) = refit.load_groups([str(dump)])
    assert loaded.x.shape == (0, len(FEATURE_NAMES))


def test_part_rows_embeds_what_the_asking_user_has_pending(alice, alice_note, monkeypatch) -> None:
    """`collect`'s set-up embeds the user's pending passages before asking (the space-aware
    count: it once passed a user id where space ids go and failed before the first ask)."""
    from retrieval.eligibility import member_space_ids
    from retrieval.index.vectors import pending_count

    commands: list[str] = []
    monkeypatch.setattr(
        "django.core.management.call_command", lambda name, **_: commands.append(name)
    )
    monkeypatch.setattr(refit, "ensure_user", lambda username: alice)
    monkeypatch.setattr(refit, "notes_rows", lambda user, split: [])
    assert pending_count(member_space_ids(alice.pk)) > 0  # the note's passages await vectors
    user, rows = refit.part_rows("notes", "tune", train=False)
    assert (user, rows) == (alice, [])
    assert commands == ["migrate", "lode_embed_pending"]
