"""The rerank stage (retrieval/search/rerank.py): features, the learned linear reranker, the
cross-encoder seam through fastembed's `TextCrossEncoder` from a local folder, and how the
search service uses them.

No cross-encoder ships offline (MODELS.md), so the cross-encoder path is proved with a tiny
ONNX model this module builds itself: token embedding gather → masked sum over the sequence →
matmul to one logit, with the tokenizer files of the bundled BERT WordPiece model beside it.
One token ("certificate") has a large embedding, so a document containing it gets a higher
logit. Nothing is downloaded: fastembed's download functions are replaced by ones that fail.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from notes import services
from retrieval.query import parse
from retrieval.search import rerank as rerank_module
from retrieval.search.fusion import FusedHit, LegHit
from retrieval.search.pipeline import search
from retrieval.search.rerank import (
    FEATURE_NAMES,
    LEARNED_MODEL_FILE,
    Candidate,
    CrossEncoderReranker,
    LearnedReranker,
    LinearModel,
    RerankUnavailable,
    features,
    get_reranker,
)
from tests.factories import (
    DEFAULT_MODEL_NAME,
    TOKENIZER_FILES,
    build_tiny_cross_encoder,
)

F = len(FEATURE_NAMES)


def column(name: str) -> int:
    return FEATURE_NAMES.index(name)


def candidate(
    passage_id: int,
    text: str,
    *,
    title: str = "",
    position: int = 1,
    lexical: tuple[int, float] | None = None,
    dense: tuple[int, float] | None = None,
    exact: tuple[str, ...] = (),
) -> Candidate:
    lex = LegHit(passage_id, lexical[0], lexical[1], "bm25") if lexical else None
    den = LegHit(passage_id, dense[0], dense[1], "cosine") if dense else None
    rrf = sum(1 / (60 + leg.rank) for leg in (lex, den) if leg)
    fused = FusedHit(passage_id=passage_id, rrf=rrf, lexical=lex, dense=den, exact_matches=exact)
    return Candidate(
        passage_id=passage_id,
        document_id=passage_id,
        title_text=title,
        text=text,
        position=position,
        fused=fused,
    )


@pytest.fixture(autouse=True)
def _no_downloads_and_fresh_caches(fastembed_offline):
    """No model hub (conftest's `fastembed_offline`), and every test starts with the
    reranker caches empty."""
    rerank_module._cross_encoder.cache_clear()
    rerank_module._learned.cache_clear()
    yield
    rerank_module._cross_encoder.cache_clear()
    rerank_module._learned.cache_clear()


# --- the tiny cross-encoder -------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    build_tiny_cross_encoder(folder)
    return folder


@pytest.fixture
def configured_cross_encoder(settings, tiny_model_dir) -> Path:
    settings.LODE_RERANK_MODEL_DIR = str(tiny_model_dir)
    settings.LODE_RERANK_MODEL_NAME = DEFAULT_MODEL_NAME
    return tiny_model_dir


# --- a. features ------------------------------------------------------------------------------


def test_features_shape_and_finite_values():
    query = parse("rotate staging certs")
    candidates = [
        candidate(1, "Rotate the staging certs with certbot.", position=0, lexical=(1, 9.5)),
        candidate(2, "Nothing related here.", dense=(1, 0.71)),
        candidate(3, "Rotate keys.", lexical=(2, 3.0), dense=(2, 0.55)),
        candidate(4, "", title="", lexical=(3, 3.0)),
    ]
    x = features(query, candidates)
    assert x.shape == (4, F)
    assert x.dtype == np.float64
    assert np.isfinite(x).all()
    # Leg indicators and reciprocal ranks follow the fused hit.
    assert x[:, column("in_lexical")].tolist() == [1.0, 0.0, 1.0, 1.0]
    assert x[:, column("in_dense")].tolist() == [0.0, 1.0, 1.0, 0.0]
    assert x[:, column("lexical_rr")].tolist() == pytest.approx([1.0, 0.0, 0.5, 1 / 3])
    assert x[:, column("dense_cosine")].tolist() == pytest.approx([0.0, 0.71, 0.55, 0.0])
    assert x[:, column("lexical_norm")].tolist() == pytest.approx([1.0, 0.0, 0.0, 0.0])
    assert x[:, column("first_passage")].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert x[1, column("rrf")] == pytest.approx(61 / 61)


def test_features_of_a_single_candidate_are_finite():
    x = features(parse("redis"), [candidate(1, "redis", lexical=(1, 2.0), dense=(1, 0.5))])
    assert x.shape == (1, F)
    assert np.isfinite(x).all()


def test_coverage_is_one_when_every_content_word_is_present_and_zero_when_none():
    query = parse("rotate the staging certs")  # "the" is a stopword, not a content word
    full = candidate(1, "Certs: rotate them on staging every Friday.", lexical=(1, 5.0))
    half = candidate(2, "Rotate the logs.", lexical=(2, 4.0))
    none = candidate(3, "Redis eviction uses allkeys-lru.", dense=(1, 0.4))
    x = features(query, [full, half, none])
    coverage = x[:, column("coverage")].tolist()
    assert coverage == pytest.approx([1.0, 1 / 3, 0.0])
    idf = x[:, column("idf_coverage")].tolist()
    assert idf[0] == pytest.approx(1.0)
    assert idf[2] == 0.0
    assert 0.0 < idf[1] < 1.0


def test_coverage_counts_the_title():
    query = parse("certbot renew")
    in_title = candidate(1, "Run it on Fridays.", title="Certbot renew")
    x = features(query, [in_title, candidate(2, "Unrelated.")])
    assert x[0, column("coverage")] == 1.0
    assert x[0, column("title_coverage")] == 1.0
    assert x[1, column("title_coverage")] == 0.0


def test_exact_match_flag_follows_the_fused_hit():
    query = parse("where is nginx.conf")
    with_match = candidate(1, "Edit nginx.conf.", lexical=(1, 3.0), exact=("nginx.conf",))
    # The text contains the needle, but the flag follows FusedHit.exact_matches only.
    without = candidate(2, "Edit nginx.conf too.", lexical=(2, 2.0))
    x = features(query, [with_match, without])
    assert x[:, column("exact_match")].tolist() == [1.0, 0.0]


def test_features_of_no_candidates_is_an_empty_matrix():
    x = features(parse("anything"), [])
    assert x.shape == (0, F)


def test_features_are_deterministic():
    query = parse("rotate staging certs")
    candidates = [
        candidate(1, "Rotate staging certs.", lexical=(1, 3.0)),
        candidate(2, "staging", dense=(1, 0.3)),
    ]
    assert np.array_equal(features(query, candidates), features(query, list(candidates)))


def test_pairs_present_counts_what_the_set_of_every_pair_would():
    from retrieval.search.rerank import _bigrams, pairs_present

    stems = ["rotat", "stagi", "certs", "rotat", "stagi", "rotat", "certs", "certs"]
    for query_pairs in (
        set(),
        {("rotat", "stagi")},  # twice in the passage: counted once
        {("rotat", "stagi"), ("stagi", "certs"), ("certs", "rotat"), ("certs", "certs")},
        {("stagi", "rotat"), ("certs", "stagi"), ("none", "such")},
        set(itertools.pairwise(stems)),
    ):
        assert pairs_present(query_pairs, stems) == len(query_pairs & _bigrams(stems))
    assert pairs_present({("a", "b")}, []) == 0 and pairs_present({("a", "b")}, ["a"]) == 0


def test_passage_analysis_is_cached_bounded_and_follows_an_edit():
    rerank_module.passage_terms.cache_clear()
    query = parse("rotate staging certs")
    before = features(query, [candidate(1, "Rotate staging certs.", lexical=(1, 3.0))])
    again = features(query, [candidate(1, "Rotate staging certs.", lexical=(1, 3.0))])
    assert np.array_equal(before, again)
    info = rerank_module.passage_terms.cache_info()
    assert (info.hits, info.misses) == (1, 1)  # the second query re-used the analysis
    assert info.maxsize == rerank_module.PASSAGE_TERMS_CACHE_SIZE
    # An edited passage is analysed afresh: its features follow the new text.
    edited = features(query, [candidate(1, "Staging only.", lexical=(1, 3.0))])
    assert edited[0, column("coverage")] < before[0, column("coverage")]


# --- b. the learned (linear) reranker ---------------------------------------------------------


def coverage_only_model() -> LinearModel:
    weights = np.zeros(F)
    weights[column("coverage")] = 1.0
    return LinearModel(
        feature_names=FEATURE_NAMES, mean=np.zeros(F), scale=np.ones(F), weights=weights
    )


def test_learned_reranker_ranks_full_coverage_first():
    query = parse("rotate staging certs")
    candidates = [
        candidate(1, "Rotate the logs daily.", lexical=(1, 9.0), dense=(1, 0.9), position=0),
        candidate(2, "Unrelated redis text.", lexical=(2, 8.0)),
        candidate(3, "Staging certs: rotate them.", lexical=(3, 1.0)),
    ]
    reranker = LearnedReranker(coverage_only_model())
    scores = reranker.scores(query, candidates)
    assert len(scores) == 3
    assert all(isinstance(s, float) for s in scores)
    best = max(range(3), key=lambda i: scores[i])
    assert candidates[best].passage_id == 3
    assert scores == pytest.approx([1 / 3, 0.0, 1.0])
    assert reranker.scores(query, []) == []
    assert reranker.score_name == "learned fusion score"
    assert "confidence" not in reranker.score_name


def test_linear_model_standardises_before_weighting():
    weights = np.zeros(F)
    weights[column("coverage")] = 2.0
    model = LinearModel(
        feature_names=FEATURE_NAMES,
        mean=np.full(F, 0.5),
        scale=np.full(F, 0.25),
        weights=weights,
    )
    x = np.zeros((2, F))
    x[0, column("coverage")] = 1.0
    assert model.score(x).tolist() == pytest.approx([4.0, -4.0])


def test_linear_model_round_trips_through_json(tmp_path):
    rng = np.random.default_rng(7)
    model = LinearModel(
        feature_names=FEATURE_NAMES,
        mean=rng.standard_normal(F),
        scale=rng.random(F) + 0.5,
        weights=rng.standard_normal(F),
    )
    path = tmp_path / "model.json"
    path.write_text(model.to_json(cv_ndcg_at_10=0.71, note="test"), encoding="utf-8")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["cv_ndcg_at_10"] == 0.71
    assert data["feature_names"] == list(FEATURE_NAMES)

    loaded = LinearModel.from_file(path)
    assert loaded.feature_names == FEATURE_NAMES
    assert np.array_equal(loaded.mean, model.mean)
    assert np.array_equal(loaded.scale, model.scale)
    assert np.array_equal(loaded.weights, model.weights)
    x = rng.standard_normal((5, F))
    assert np.array_equal(loaded.score(x), model.score(x))


def test_linear_model_fitted_on_other_features_is_unavailable(tmp_path):
    model = coverage_only_model()
    data = json.loads(model.to_json())
    data["feature_names"] = [*FEATURE_NAMES[:-1], "some_old_feature"]
    path = tmp_path / "stale.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RerankUnavailable, match=r"stale\.json.*other features"):
        LinearModel.from_file(path)

    data["feature_names"] = list(FEATURE_NAMES[:-1])  # one fewer
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RerankUnavailable):
        LinearModel.from_file(path)


def test_corrupt_learned_model_file_is_unavailable(tmp_path):
    path = tmp_path / "truncated.json"
    path.write_text(coverage_only_model().to_json()[:40], encoding="utf-8")
    with pytest.raises(RerankUnavailable):
        LinearModel.from_file(path)


def test_get_reranker_off_and_unknown():
    assert get_reranker("off") is None
    with pytest.raises(RerankUnavailable, match="unknown reranker 'bm42'"):
        get_reranker("bm42")


# --- c. the checked-in learned weights --------------------------------------------------------


def test_learned_reranker_loads_the_checked_in_weights_or_says_they_are_missing():
    if LEARNED_MODEL_FILE.is_file():
        reranker = get_reranker("learned")
        assert isinstance(reranker, LearnedReranker)
        assert reranker.name == "learned"
        assert reranker.model.feature_names == FEATURE_NAMES
        assert reranker.model.weights.shape == (F,)
        assert np.isfinite(reranker.model.weights).all()
        assert (reranker.model.scale > 0).all()
        metadata = json.loads(LEARNED_MODEL_FILE.read_text(encoding="utf-8"))
        # What it was fitted on, and each corpus's cross-validated figure (fit_rerank.py).
        assert {c["corpus"] for c in metadata["fitted_on"]} == set(metadata["cv_by_corpus"])
        for figures in metadata["cv_by_corpus"].values():
            assert 0.0 < figures["learned"]["ndcg_at_10"] <= 1.0
        # Loaded once per process.
        assert get_reranker("learned") is reranker
        query = parse("rotate staging certs")
        scores = reranker.scores(
            query,
            [
                candidate(1, "Rotate the staging certs.", lexical=(1, 5.0), dense=(1, 0.8)),
                candidate(2, "Unrelated.", dense=(2, 0.2)),
            ],
        )
        assert len(scores) == 2
        assert all(np.isfinite(scores))
    else:
        with pytest.raises(RerankUnavailable, match="weights are missing"):
            get_reranker("learned")


# --- d. the cross-encoder through fastembed from a local folder -------------------------------


def test_tiny_model_folder_has_the_layout_fastembed_loads(tiny_model_dir):
    assert (tiny_model_dir / "onnx" / "model.onnx").is_file()
    for name in TOKENIZER_FILES:
        assert (tiny_model_dir / name).is_file()


def test_cross_encoder_ranks_the_document_with_the_boosted_word_first(tiny_model_dir):
    query = parse("renew the lease")
    candidates = [
        candidate(1, "Renew the lease on the office before March.", lexical=(1, 9.0)),
        candidate(2, "Renew the TLS certificate with certbot.", lexical=(2, 4.0)),
        candidate(3, "Lease terms are in the shared drive.", lexical=(3, 2.0)),
    ]
    reranker = CrossEncoderReranker(tiny_model_dir, DEFAULT_MODEL_NAME)
    scores = reranker.scores(query, candidates)
    assert len(scores) == 3
    assert all(isinstance(s, float) and np.isfinite(s) for s in scores)
    assert max(range(3), key=lambda i: scores[i]) == 1
    # The boosted token adds 4 × 10 to the logit; everything else is noise around zero.
    assert scores[1] - max(scores[0], scores[2]) == pytest.approx(40.0, abs=1.0)
    assert reranker.score_name == "cross-encoder logit"
    assert reranker.scores(query, []) == []
    # Deterministic: the same pair scores the same.
    assert reranker.scores(query, candidates) == scores


def test_cross_encoder_uses_the_whole_batch_and_keeps_candidate_order(tiny_model_dir):
    query = parse("renew")
    texts = [f"note number {i}" for i in range(70)]
    texts[57] = "the certificate expires soon"
    candidates = [candidate(i, t) for i, t in enumerate(texts)]
    scores = CrossEncoderReranker(tiny_model_dir, DEFAULT_MODEL_NAME).scores(query, candidates)
    assert len(scores) == 70
    assert int(np.argmax(scores)) == 57


def test_get_reranker_cross_encoder_uses_the_configured_folder(configured_cross_encoder):
    reranker = get_reranker("cross-encoder")
    assert isinstance(reranker, CrossEncoderReranker)
    assert reranker.folder == configured_cross_encoder
    assert reranker.model_name == DEFAULT_MODEL_NAME
    assert reranker.name == "cross-encoder"
    scores = reranker.scores(
        parse("expiry"),
        [candidate(1, "expiry of things"), candidate(2, "certificate expiry")],
    )
    assert scores[1] > scores[0]
    # One instance per (folder, model name).
    assert get_reranker("cross-encoder") is reranker


def test_cross_encoder_without_a_configured_folder_is_unavailable(settings):
    settings.LODE_RERANK_MODEL_DIR = ""
    with pytest.raises(RerankUnavailable, match="LODE_RERANK_MODEL_DIR"):
        get_reranker("cross-encoder")


def test_default_model_name_is_one_fastembed_knows_with_the_onnx_model_layout():
    from fastembed.rerank.cross_encoder import TextCrossEncoder

    from lode_site import settings as site_settings

    described = {m["model"]: m for m in TextCrossEncoder.list_supported_models()}
    assert site_settings.LODE_RERANK_MODEL_NAME == DEFAULT_MODEL_NAME or (
        site_settings.LODE_RERANK_MODEL_NAME in described
    )
    assert described[DEFAULT_MODEL_NAME]["model_file"] == "onnx/model.onnx"


def test_folder_without_onnx_model_is_unavailable_with_a_clear_message(tmp_path):
    folder = tmp_path / "empty-model"
    folder.mkdir()
    reranker = CrossEncoderReranker(folder, DEFAULT_MODEL_NAME)
    with pytest.raises(RerankUnavailable) as excinfo:
        reranker.scores(parse("renew"), [candidate(1, "renew it")])
    message = str(excinfo.value)
    assert "no cross-encoder model" in message
    assert str(folder / "onnx" / "model.onnx") in message
    # Empty candidates never touch the model.
    assert reranker.scores(parse("renew"), []) == []


def test_folder_with_a_corrupt_model_is_unavailable(tmp_path, tiny_model_dir):
    folder = tmp_path / "corrupt"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "onnx" / "model.onnx").write_bytes(b"this is not an onnx protobuf")
    with pytest.raises(RerankUnavailable, match="failed to load"):
        CrossEncoderReranker(folder, DEFAULT_MODEL_NAME).scores(
            parse("renew"), [candidate(1, "renew it")]
        )


def test_folder_without_tokenizer_is_unavailable(tmp_path, tiny_model_dir):
    folder = tmp_path / "no-tokenizer"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(RerankUnavailable, match="tokenizer"):
        CrossEncoderReranker(folder, DEFAULT_MODEL_NAME).scores(
            parse("renew"), [candidate(1, "renew it")]
        )


def test_unknown_model_name_is_unavailable(tiny_model_dir):
    with pytest.raises(RerankUnavailable, match="failed to load"):
        CrossEncoderReranker(tiny_model_dir, "nobody/not-a-reranker").scores(
            parse("renew"), [candidate(1, "renew it")]
        )


# --- e. through the search service ------------------------------------------------------------


@pytest.fixture
def two_notes(alice):
    lease = services.note_create(
        owner=alice,
        title="Office",
        body="# Office\n\nRenew renew renew the lease. Renew early.\n",
    )
    certificate = services.note_create(
        owner=alice,
        title="TLS",
        body=(
            "# TLS\n\nRenew the TLS certificate with certbot before it expires; the "
            "staging and production hosts share one renewal timer and one cron entry.\n"
        ),
    )
    return lease, certificate


@pytest.mark.django_db
def test_search_with_cross_encoder_reranks_and_names_the_score(
    alice, two_notes, configured_cross_encoder
):
    lease, certificate = two_notes
    fused_only = search(user=alice, query="renew", mode="lexical", rerank="off")
    assert fused_only.error == ""
    assert [h.passage.document_id for h in fused_only.hits] == [lease.pk, certificate.pk]

    result = search(user=alice, query="renew", mode="lexical", rerank="cross-encoder")
    assert result.error == ""
    assert result.rerank == "cross-encoder"
    assert not any("Reranking unavailable" in d for d in result.degraded)
    assert len(result.hits) == 2
    # The tiny model prefers the passage with "certificate": the rerank changed the order.
    assert [h.passage.document_id for h in result.hits] == [certificate.pk, lease.pk]
    assert [h.rank for h in result.hits] == [1, 2]
    for hit in result.hits:
        assert hit.rerank_score_name == "cross-encoder logit"
        assert hit.score_name == "cross-encoder logit"
        assert hit.score == hit.rerank_score
        assert isinstance(hit.rerank_score, float)
        assert any(r.startswith("cross-encoder logit ") for r in hit.reasons)
        assert any(r.startswith("lexical rank ") for r in hit.reasons)
    assert result.hits[0].rerank_score > result.hits[1].rerank_score


@pytest.mark.django_db
def test_search_with_unconfigured_cross_encoder_degrades_to_lexical(alice, two_notes, settings):
    settings.LODE_RERANK_MODEL_DIR = ""
    lease, certificate = two_notes
    result = search(user=alice, query="renew", mode="lexical", rerank="cross-encoder")
    assert result.error == ""
    assert {h.passage.document_id for h in result.hits} == {lease.pk, certificate.pk}
    assert any(d.startswith("Reranking unavailable") for d in result.degraded)
    assert any("LODE_RERANK_MODEL_DIR" in d for d in result.degraded)
    assert all(h.rerank_score is None for h in result.hits)
    assert all(h.score_name != "cross-encoder logit" for h in result.hits)


@pytest.mark.django_db
def test_search_with_a_broken_model_folder_degrades_to_lexical(
    alice, two_notes, settings, tmp_path
):
    settings.LODE_RERANK_MODEL_DIR = str(tmp_path / "nothing-here")
    result = search(user=alice, query="renew", mode="lexical", rerank="cross-encoder")
    assert result.error == ""
    assert len(result.hits) == 2
    assert any(
        d.startswith("Reranking unavailable: no cross-encoder model at") for d in result.degraded
    )
    assert all(h.rerank_score is None for h in result.hits)


@pytest.mark.django_db
def test_search_with_rerank_off_has_no_rerank_scores(alice, two_notes, configured_cross_encoder):
    result = search(user=alice, query="renew", mode="lexical", rerank="off")
    assert result.error == ""
    assert result.rerank == "off"
    assert len(result.hits) == 2
    assert all(h.rerank_score is None for h in result.hits)
    assert all(h.rerank_score_name == "" for h in result.hits)
    assert all(h.score_name == "bm25" for h in result.hits)
    assert not any("Reranking" in d for d in result.degraded)


@pytest.mark.django_db
def test_search_never_shows_another_users_passages_to_the_reranker(
    alice, bob, two_notes, configured_cross_encoder
):
    services.note_create(owner=bob, title="Bob", body="Renew the certificate, says Bob.\n")
    result = search(user=alice, query="renew", mode="lexical", rerank="cross-encoder")
    assert result.rerank == "cross-encoder"
    assert {h.passage.document.owner_id for h in result.hits} == {alice.pk}
