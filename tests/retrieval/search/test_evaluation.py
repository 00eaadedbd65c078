"""Evaluation metrics against hand-computed values, the BEIR loaders, and hit→document mapping."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from notes import services
from retrieval.search import evaluation
from retrieval.search.evaluation import (
    beir_ids,
    docs_from_hits,
    load_qrels,
    load_queries,
    mrr_at_k,
    ndcg_at_k,
    percentile,
    recall_at_k,
)
from retrieval.search.pipeline import search

FIXTURE = Path(__file__).parents[2] / "fixtures" / "beir-mini"


# --- metrics ---------------------------------------------------------------------------------


def test_no_relevant_document_retrieved_scores_zero():
    ranked = ["x", "y", "z"]
    relevant = {"a": 1}
    assert ndcg_at_k(ranked, relevant, 10) == 0.0
    assert recall_at_k(ranked, relevant, 100) == 0.0
    assert mrr_at_k(ranked, relevant, 10) == 0.0


def test_relevant_at_rank_one_scores_one():
    ranked = ["a", "x", "y"]
    relevant = {"a": 1}
    assert ndcg_at_k(ranked, relevant, 10) == pytest.approx(1.0)
    assert recall_at_k(ranked, relevant, 100) == 1.0
    assert mrr_at_k(ranked, relevant, 10) == 1.0


def test_single_relevant_at_rank_three():
    ranked = ["x", "y", "a"]
    relevant = {"a": 1}
    # DCG = 1/log2(3+1) = 0.5; IDCG = 1/log2(2) = 1.
    assert ndcg_at_k(ranked, relevant, 10) == pytest.approx(0.5)
    assert mrr_at_k(ranked, relevant, 10) == pytest.approx(1 / 3)
    # Outside the cut-off it does not count.
    assert ndcg_at_k(ranked, relevant, 2) == 0.0
    assert mrr_at_k(ranked, relevant, 2) == 0.0
    assert recall_at_k(ranked, relevant, 2) == 0.0


def test_two_relevant_documents():
    ranked = ["a", "x", "b", "y"]
    relevant = {"a": 1, "b": 1}
    # DCG = 1/log2(2) + 1/log2(4) = 1.5; IDCG = 1/log2(2) + 1/log2(3) = 1.63093.
    expected = 1.5 / (1 + 1 / math.log2(3))
    assert ndcg_at_k(ranked, relevant, 10) == pytest.approx(expected)
    assert ndcg_at_k(ranked, relevant, 10) == pytest.approx(0.919721, abs=1e-6)
    assert recall_at_k(ranked, relevant, 2) == 0.5
    assert recall_at_k(ranked, relevant, 100) == 1.0
    assert mrr_at_k(ranked, relevant, 10) == 1.0
    # Both relevant but only the second one in the top 1: recall 0.5, ideal DCG of one slot.
    assert ndcg_at_k(["b", "a"], relevant, 1) == pytest.approx(1.0)


def test_second_relevant_found_late_and_reciprocal_rank_uses_first():
    ranked = ["x", "b", "y", "z", "a"]
    relevant = {"a": 1, "b": 1}
    dcg = 1 / math.log2(3) + 1 / math.log2(6)
    idcg = 1 + 1 / math.log2(3)
    assert ndcg_at_k(ranked, relevant, 10) == pytest.approx(dcg / idcg)
    assert mrr_at_k(ranked, relevant, 10) == pytest.approx(0.5)


def test_zero_scores_are_not_relevant_and_empty_judgements_score_zero():
    assert ndcg_at_k(["a"], {"a": 0}, 10) == 0.0
    assert recall_at_k(["a"], {"a": 0}, 10) == 0.0
    assert mrr_at_k(["a"], {}, 10) == 0.0
    assert ndcg_at_k([], {"a": 1}, 10) == 0.0


def test_repeated_ids_count_once_at_their_first_rank():
    relevant = {"a": 1}
    assert ndcg_at_k(["a", "a", "a"], relevant, 10) == pytest.approx(1.0)
    # A repeat does not push a relevant document down: "b" is at rank 2, not 3.
    assert mrr_at_k(["x", "x", "a"], relevant, 10) == pytest.approx(0.5)


def test_percentile_interpolates_linearly():
    values = [10.0, 20.0, 30.0, 40.0]
    assert percentile(values, 50) == pytest.approx(25.0)
    assert percentile(values, 95) == pytest.approx(38.5)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) == 0.0


# --- loaders ---------------------------------------------------------------------------------


def test_load_qrels_strips_crlf_and_skips_the_header():
    raw = (FIXTURE / "qrels" / "test.tsv").read_bytes()
    assert b"\r\n" in raw  # the fixture keeps the published line ends
    qrels = load_qrels(FIXTURE / "qrels" / "test.tsv")
    assert "query-id" not in qrels
    assert qrels["q1"] == {"d01": 1}
    assert qrels["q9"] == {"d06": 1, "d19": 1}
    assert all("\r" not in doc for docs in qrels.values() for doc in docs)


def test_load_qrels_rejects_a_bad_score(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"query-id\tcorpus-id\tscore\r\nq1\td1\tyes\r\n")
    with pytest.raises(ValueError, match="not a whole number"):
        load_qrels(bad)


def test_load_queries_keeps_file_order():
    queries = load_queries(FIXTURE / "queries.jsonl")
    assert list(queries)[:3] == ["q1", "q2", "q3"]
    assert queries["q2"] == "Coffee protects against liver cirrhosis."


# --- hits to documents -----------------------------------------------------------------------


def _hit(document: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(passage=SimpleNamespace(document=document))


def test_docs_from_hits_ranks_each_document_at_its_best_passage():
    a = SimpleNamespace(pk=1, external_key="beir:a")
    b = SimpleNamespace(pk=2, external_key="beir:b")
    c = SimpleNamespace(pk=3, external_key="")
    hits = [_hit(a), _hit(b), _hit(a), _hit(c), _hit(b)]
    assert [d.pk for d in docs_from_hits(hits)] == [1, 2, 3]
    # Documents that did not come from a BEIR corpus have no BEIR id and are dropped.
    assert beir_ids(docs_from_hits(hits)) == ["a", "b"]


@pytest.mark.django_db
def test_docs_from_hits_on_real_search_results(alice):
    words = " ".join(f"filler{i}" for i in range(250))
    long_note = services.note_create(
        owner=alice,
        title="Quasar survey",
        body=f"# Quasar survey\n\nquasar one. {words}\n\nquasar two {words} quasar three.",
        external_key="beir:long",
    )
    other = services.note_create(
        owner=alice, title="Other", body="a quasar aside", external_key="beir:other"
    )
    result = search(user=alice, query="quasar", limit=50)
    assert result.error == ""
    passage_docs = [hit.passage.document_id for hit in result.hits]
    assert passage_docs.count(long_note.pk) > 1  # several passages of the long note matched
    documents = docs_from_hits(result.hits)
    assert sorted(d.pk for d in documents) == sorted({long_note.pk, other.pk})
    # Each document sits where its first (best) passage was.
    first_seen = list(dict.fromkeys(passage_docs))
    assert [d.pk for d in documents] == first_seen


@pytest.mark.django_db
def test_evaluate_skips_queries_without_judgements(alice):
    services.note_create(
        owner=alice, title="Zebra stripes", body="zebra stripes deter flies", external_key="beir:z"
    )
    queries = {"q1": "zebra flies", "q2": "no judgements for this one"}
    result = evaluation.evaluate(alice, queries, {"q1": {"z": 1}}, "lexical")
    assert result.queries == 1
    assert result.ndcg_at_10 == pytest.approx(1.0)
    assert result.runs == {"q1": ["z"]}
    assert set(result.as_json()) == {
        "ndcg@10",
        "recall@100",
        "mrr@10",
        "latency_ms",
        "queries",
        "mode",
    }
