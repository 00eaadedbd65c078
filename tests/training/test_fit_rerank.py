"""Fitting the learned reranker (training/fit_rerank.py): passage-level labels
from a notes question's answer text, dumps of one corpus, per-corpus loss shares, the ranking
the measures score (as search orders it), stratified cross-validation, and a fit from dumps
that writes weights the reranker loads and records what they were fitted on.

The pure parts run on small synthetic corpora; `collect_answers` runs through the real
search (bundled embedding model, private Chroma) on a few notes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from notes import services
from retrieval.index.sync import sync_vectors
from retrieval.models import Passage
from retrieval.search.rerank import FEATURE_NAMES, LinearModel
from training import fit_rerank
from training.fit_rerank import (
    ANSWER_UNIT,
    Corpus,
    DumpError,
    QueryData,
    answer_range,
    answer_units,
    collect_answers,
    corpus_metrics,
    corpus_shares,
    cross_validate,
    feature_standardiser,
    query_metrics,
    ranked_units,
    read_dump,
    stratified_folds,
    weighted_pairs,
    write_dump,
)
from training.logistic import fit_pairwise

F = len(FEATURE_NAMES)


def query(
    corpus: str,
    query_id: str,
    x: np.ndarray,
    labels: list[float],
    *,
    exact: list[float] | None = None,
    tail: list[str] | None = None,
) -> QueryData:
    """A query whose positives are the answer and whose negatives are named by position."""
    units = [ANSWER_UNIT if label else f"p{i}" for i, label in enumerate(labels)]
    return QueryData(
        query_id=query_id,
        x=x,
        labels=np.asarray(labels, dtype=np.float64),
        exact=np.asarray(exact or [0.0] * len(labels)),
        units=units,
        tail=tail or [],
        relevant={ANSWER_UNIT: 1},
        corpus=corpus,
    )


def synthetic(corpus: str, n: int, good: int, seed: int) -> list[QueryData]:
    """`n` queries of 8 candidates where feature `good` alone marks the positive (placed at
    fused position 5, so fused order misses it in the top 5) and the other features are noise."""
    rng = np.random.default_rng(seed)
    data = []
    for k in range(n):
        x = rng.normal(size=(8, F))
        labels = [0.0] * 8
        labels[5] = 1.0
        x[:, good] = rng.normal(size=8) - 1.0
        x[5, good] = 2.0
        data.append(query(corpus, f"{corpus}-{k}", x, labels))
    return data


# --- labels ------------------------------------------------------------------------------------


def test_answer_range_is_verbatim_or_none() -> None:
    body = "# Backups\n\nThey run at 03:30 UTC now.\n"
    assert answer_range(body, "03:30 UTC") == (body.index("03:30"), body.index("03:30") + 9)
    assert answer_range(body, "03:30  UTC") is None  # whitespace differs: not pinned
    assert answer_range(body, "") is None


def test_a_passage_is_positive_when_it_overlaps_the_answer() -> None:
    answer = (100, 140)
    spans = [(0, 100), (90, 110), (139, 200), (140, 300), None]
    units, labels = answer_units(spans, [1, 2, 3, 4, 5], answer)
    # Touching the answer's edge is not overlapping it; another document's passage never is.
    assert labels.tolist() == [0.0, 1.0, 1.0, 0.0, 0.0]
    assert units == ["p1", ANSWER_UNIT, ANSWER_UNIT, "p4", "p5"]


@pytest.mark.django_db
def test_collect_answers_labels_the_passage_holding_the_answer(alice, private_vectors) -> None:
    sections = [
        "## Backups\n\nThe nightly backups moved from 02:00 to 03:30 UTC in March.",
        "## Monitoring\n\nAlerts page the on-call engineer through the pager rota.",
        "## Certificates\n\nCertbot renews the TLS certificates every sixty days.",
    ]
    runbook = services.note_create(
        owner=alice, title="Ops runbook", body="\n\n".join(sections), external_key="notes:ops.md"
    )
    services.note_create(
        owner=alice, title="Garden", body="Water the tomatoes in July.", external_key="notes:g.md"
    )
    sync_vectors()
    rows = [
        {
            "id": "q1",
            "question": "When do the nightly backups run?",
            "file": "ops.md",
            "answer": "moved from 02:00 to 03:30 UTC",
        },
        {"id": "q2", "question": "certbot renewal", "file": "ops.md", "answer": "not in the file"},
    ]

    data, skipped = collect_answers(rows, "alice", top_n=100, key_prefix="notes:")

    assert skipped == 1  # q2's answer is not in the file: no labels, never guessed
    (q,) = data
    assert (q.query_id, q.corpus, q.relevant) == ("q1", "notes", {ANSWER_UNIT: 1})
    assert q.x.shape == (len(q.units), F)
    positives = [u for u, label in zip(q.units, q.labels, strict=True) if label]
    assert positives == [ANSWER_UNIT]
    answer_at = runbook.head.body.index("moved from")
    holding = Passage.objects.get(
        document=runbook, is_head=True, start__lte=answer_at, end__gt=answer_at
    )
    others = {f"p{pk}" for pk in Passage.objects.filter(is_head=True).values_list("pk", flat=True)}
    assert set(q.units) - {ANSWER_UNIT} <= others - {f"p{holding.pk}"}


# --- dumps -------------------------------------------------------------------------------------


def test_a_dump_round_trips_and_refuses_other_features(tmp_path: Path) -> None:
    data = synthetic("notes", 3, good=0, seed=1)
    data[1].tail = ["p9", ANSWER_UNIT]
    data[2].exact[0] = 1.0
    path = tmp_path / "notes.npz"
    write_dump(Corpus("notes", "three questions", data), path, FEATURE_NAMES)

    corpus = read_dump(path, FEATURE_NAMES)
    assert (corpus.name, corpus.description, len(corpus.queries)) == (
        "notes",
        "three questions",
        3,
    )
    for before, after in zip(data, corpus.queries, strict=True):
        assert np.array_equal(before.x, after.x)
        assert np.array_equal(before.labels, after.labels)
        assert np.array_equal(before.exact, after.exact)
        assert (before.units, before.tail, before.relevant) == (
            after.units,
            after.tail,
            after.relevant,
        )
        assert after.corpus == "notes"
    with pytest.raises(DumpError, match="other features"):
        read_dump(path, (*FEATURE_NAMES[:-1], "renamed"))


# --- weighting and fitting ---------------------------------------------------------------------


def test_corpus_shares_run_from_per_query_to_per_corpus() -> None:
    sizes = {"scifact": 800, "notes": 80}
    assert corpus_shares(sizes, 0.0) == pytest.approx({"scifact": 800 / 880, "notes": 80 / 880})
    assert corpus_shares(sizes, 1.0) == pytest.approx({"scifact": 0.5, "notes": 0.5})
    above = corpus_shares(sizes, 1.5)
    assert above["notes"] > above["scifact"] and sum(above.values()) == pytest.approx(1.0)


def test_uniform_weights_are_the_plain_mean() -> None:
    data = synthetic("scifact", 20, good=3, seed=2)
    mean, scale = feature_standardiser(data)
    diffs, weights = weighted_pairs(data, mean, scale, 200, balance=0.0)
    assert weights == pytest.approx(np.full(len(diffs), 1 / len(diffs)))
    assert np.allclose(fit_pairwise(diffs, 0.01), fit_pairwise(diffs, 0.01, weights))


def conflicting(corpus: str, n: int, sign: float, seed: int) -> list[QueryData]:
    """Queries whose answer (fused position 5) has features 0 and 1 at ±2 (`sign`, and the
    opposite), the other candidates the reverse on average: two corpora of opposite sign
    ask for opposite weights."""
    rng = np.random.default_rng(seed)
    data = []
    for k in range(n):
        x = rng.normal(size=(8, F))
        x[:, 0] = rng.normal(size=8) - sign
        x[:, 1] = rng.normal(size=8) + sign
        x[5, 0], x[5, 1] = 2.0 * sign, -2.0 * sign
        labels = [0.0] * 8
        labels[5] = 1.0
        data.append(query(corpus, f"{corpus}-{k}", x, labels))
    return data


def test_the_loss_share_decides_which_corpus_the_model_serves() -> None:
    # Per query the large corpus wins; with the small one's share raised, the small one does.
    data = conflicting("big", 200, 1.0, seed=3) + conflicting("small", 20, -1.0, seed=4)
    mean, scale = feature_standardiser(data)

    def found(balance: float) -> dict[str, float]:
        diffs, weights = weighted_pairs(data, mean, scale, 200, balance)
        w = fit_pairwise(diffs, 0.01, weights)
        metrics = corpus_metrics(data, w, mean, scale)
        return {corpus: m["found_at_5"] for corpus, m in metrics.items()}

    per_query, small_first = found(0.0), found(1.5)
    assert per_query["big"] > small_first["big"]
    assert small_first["small"] > per_query["small"]


# --- measuring ---------------------------------------------------------------------------------


def test_ranking_keeps_exact_matches_first_then_score_then_tail() -> None:
    q = query(
        "notes",
        "q",
        np.zeros((4, F)),
        [0.0, 0.0, 1.0, 0.0],
        exact=[0.0, 0.0, 0.0, 1.0],
        tail=["p7", ANSWER_UNIT],
    )
    assert ranked_units(q, None) == ["p0", "p1", ANSWER_UNIT, "p3", "p7"]
    # Scores put the answer first among the non-exact, but the exact match stays on top, and
    # an answer unit seen again in the tail is not counted twice.
    assert ranked_units(q, np.asarray([0.5, 0.5, 0.9, -5.0])) == [
        "p3",
        ANSWER_UNIT,
        "p0",
        "p1",
        "p7",
    ]


def test_query_metrics_judge_by_the_first_answering_passage() -> None:
    labels = [0.0] * 6 + [1.0]
    q = query("notes", "q", np.zeros((7, F)), labels)
    fused = query_metrics(q, None)
    assert fused["found_at_5"] == 0.0 and fused["mrr_at_10"] == pytest.approx(1 / 7)
    promoted = query_metrics(q, np.asarray([0, 0, 0, 0, 0, 0, 1.0]))
    assert promoted == {"ndcg_at_10": 1.0, "found_at_5": 1.0, "mrr_at_10": 1.0}


def test_folds_are_stratified_by_corpus() -> None:
    data = synthetic("big", 50, good=0, seed=5) + synthetic("small", 10, good=1, seed=6)
    fold_of = stratified_folds(data, 5, seed=13)
    for corpus, size in (("big", 50), ("small", 10)):
        counts = np.bincount(
            [f for f, q in zip(fold_of, data, strict=True) if q.corpus == corpus], minlength=5
        )
        assert counts.tolist() == [size // 5] * 5


def test_cross_validation_reports_each_corpus_on_unseen_queries() -> None:
    data = synthetic("big", 60, good=0, seed=7) + synthetic("small", 20, good=0, seed=8)
    result = cross_validate(data, l2=0.01, balance=1.0)
    mean, scale = feature_standardiser(data)
    fused = corpus_metrics(data, None, mean, scale)
    assert set(result.metrics) == {"big", "small"}
    for corpus in ("big", "small"):
        assert fused[corpus]["found_at_5"] == 0.0
        assert result.metrics[corpus]["found_at_5"] > 0.9
        assert len(result.fold_ndcg[corpus]) == 5
    assert result.objective == pytest.approx(
        (result.metrics["big"]["ndcg_at_10"] + result.metrics["small"]["ndcg_at_10"]) / 2
    )


# --- the command -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_fit_from_dumps_writes_weights_that_load_and_say_what_they_saw(tmp_path: Path) -> None:
    big, small = tmp_path / "big.npz", tmp_path / "small.npz"
    write_dump(
        Corpus("scifact", "document-level qrels", synthetic("scifact", 40, good=2, seed=9)),
        big,
        FEATURE_NAMES,
    )
    write_dump(
        Corpus("notes", "answer overlap", synthetic("notes", 15, good=2, seed=10)),
        small,
        FEATURE_NAMES,
    )
    out = tmp_path / "weights.json"

    code = fit_rerank.main(
        ["--fit-from", str(big), str(small), "--out", str(out), "--l2", "0.01", "--balance", "1"]
    )

    assert code == 0
    model = LinearModel.from_file(out)
    assert np.argmax(model.weights) == 2
    meta = json.loads(out.read_text())
    assert meta["script"] == "training/fit_rerank.py"
    assert (Path(__file__).resolve().parents[2] / meta["script"]).is_file()
    assert [(c["corpus"], c["queries"], c["loss_share"]) for c in meta["fitted_on"]] == [
        ("scifact", 40, 0.5),
        ("notes", 15, 0.5),
    ]
    assert meta["balance"] == 1.0 and meta["l2"] == 0.01
    for corpus in ("scifact", "notes"):
        figures = meta["cv_by_corpus"][corpus]
        assert figures["learned"]["found_at_5"] > figures["fused"]["found_at_5"]


def test_a_fit_without_an_output_file_is_refused(tmp_path: Path) -> None:
    dump = tmp_path / "notes.npz"
    write_dump(Corpus("notes", "answer overlap", synthetic("notes", 10, good=1, seed=11)), dump,
               FEATURE_NAMES)  # fmt: skip
    with pytest.raises(SystemExit, match="--out"):
        fit_rerank.main(["--fit-from", str(dump), "--l2", "0.01"])
