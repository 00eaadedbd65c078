"""The ask-level refit (training/fit_relevance_asks.py): its threshold rule, its egress floor,
its refusal of holdout rows, its set-up before asking, and a fit from claim dumps that writes
weights the product loads."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from retrieval.answer.relevance.features import FEATURE_NAMES
from retrieval.answer.relevance.model import FULL_MODEL, RELEVANCE_FILE, read_model
from training import fit_relevance_asks as refit
from training.fit_relevance import Group, Question


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
    monkeypatch.setattr(refit, "notes_rows", lambda user, split, questions, corpus: [])
    assert pending_count(member_space_ids(alice.pk)) > 0  # the note's passages await vectors
    args = argparse.Namespace(questions="q", notes_corpus="c", scifact=None)
    user, rows = refit.part_rows("notes", "tune", False, args)
    assert (user, rows) == (alice, [])
    assert commands == ["migrate", "lode_embed_pending"]


def claim_dump(path: Path, feature: int, mean: np.ndarray, scale: np.ndarray) -> None:
    """Tune asks whose right claims sit three scales *below* the mean of `feature` and whose
    wrong ones three above; every other feature at its mean. The shipped model weighs that
    feature up, so it prefers the wrong claims; a refit on these claims learns the reverse."""

    def claim(x_value: float, label: int) -> dict:
        x = mean.copy()
        x[feature] = x_value
        return {"candidate": {"text": f"claim {label}"}, "x": x.tolist(), "label": label}

    low, high = mean[feature] - 3 * scale[feature], mean[feature] + 3 * scale[feature]
    rows = []
    for n in range(20):
        rows.append(
            {
                "qid": f"a{n}",
                "set": refit.NOTES_ANSWERABLE,
                "split": "tune",
                "question": f"answerable {n}",
                "claims": [claim(low, 1), claim(high, 0)],
            }
        )
        rows.append({"qid": f"u{n}", "set": refit.NOTES_UNANSWERABLE, "split": "tune",
                     "question": f"unanswerable {n}", "claims": [claim(high, 0)]})  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_a_refit_that_beats_the_current_weights_writes_a_file_the_product_loads(
    tmp_path: Path,
) -> None:
    current = read_model(RELEVANCE_FILE).full
    feature = int(np.argmax(current.weights))
    dump, out = tmp_path / "claims.jsonl", tmp_path / "relevance.json"
    claim_dump(dump, feature, np.asarray(current.mean), np.asarray(current.scale))

    code = refit.main(
        ["fit", "--dump", str(dump), "--current", str(RELEVANCE_FILE), "--out", str(out)]
    )

    assert code == 0
    refitted = read_model(out).full
    right, wrong = json.loads(dump.read_text().splitlines()[0])["claims"]
    scores = refitted.probabilities(np.asarray([right["x"], wrong["x"]]))
    assert scores[0] >= refitted.threshold > scores[1]
    payload = json.loads(out.read_text())
    assert payload["script"] == "training/fit_relevance_asks.py"
    assert payload["report"][FULL_MODEL]["tune_out_of_fold_at_chosen"]["false"] == 0


def test_a_refit_no_better_than_the_current_weights_writes_nothing(tmp_path: Path) -> None:
    current = read_model(RELEVANCE_FILE).full
    feature = int(np.argmax(current.weights))
    dump, out = tmp_path / "claims.jsonl", tmp_path / "relevance.json"
    # The reverse labelling: the shipped model already ranks these claims right.
    claim_dump(dump, feature, np.asarray(current.mean), -np.asarray(current.scale))

    code = refit.main(
        ["fit", "--dump", str(dump), "--current", str(RELEVANCE_FILE), "--out", str(out)]
    )

    assert code == 1 and not out.exists()
