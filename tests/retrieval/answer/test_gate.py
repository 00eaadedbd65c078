"""The faithfulness gate (retrieval/answer/gate.py) and its entailment seam
(retrieval/answer/entailment.py):
one regression test per case seeds/lode-retrieval.md names, the helpers, and the local
cross-encoder folder proved with a tiny ONNX model built by the test (the helper in
tests/retrieval/search/test_rerank.py). Pure: no database, no network.
"""

from __future__ import annotations

import shutil
import unicodedata

import pytest

from retrieval.answer import entailment as entailment_module
from retrieval.answer.entailment import (
    ENTAILMENT_THRESHOLD,
    CrossEncoderEntailment,
    EntailmentUnavailable,
    get_entailment_scorer,
    sigmoid,
)
from retrieval.answer.gate import (
    NO_ENTAILMENT_REASON,
    STEP_COUPLING,
    STEP_ENTAILMENT,
    STEP_VERBATIM,
    compound_words,
    in_order,
    numbers,
    payload_tokens,
    run_gate,
    span_occurs,
    span_tokens,
)
from retrieval.answer.types import Claim, ClaimVerdict, Support
from retrieval.text.negation import negation_cues
from retrieval.text.normalise import nfc_collapsed
from retrieval.words.negation import NEGATION_WORDS
from retrieval.words.stopwords import GLUE_WORDS
from tests.factories import BOOSTED_WORD, DEFAULT_MODEL_NAME, UnavailableScorer

V1, V2, V_WITHHELD = 11, 22, 33


class StubScorer:
    """An entailment scorer returning a fixed score and recording what it was asked."""

    def __init__(self, value: float, name: str = "stub"):
        self.value = value
        self.name = name
        self.calls: list[tuple[str, str]] = []

    def score(self, premise: str, hypothesis: str) -> float:
        self.calls.append((premise, hypothesis))
        return self.value


class CrashingScorer:
    name = "crashing"

    def score(self, premise: str, hypothesis: str) -> float:
        raise RuntimeError("socket closed")


def claim(text: str, *spans: tuple[int, str]) -> Claim:
    return Claim(text=text, support=tuple(Support(v, s) for v, s in spans))


def gate_one(c: Claim, versions: dict[int, str], scorer=None) -> ClaimVerdict:
    (verdict,) = run_gate([c], versions, scorer=scorer)
    return verdict


def assert_coupled(verdict: ClaimVerdict) -> None:
    assert verdict.passed, verdict.reason
    assert verdict.step == STEP_COUPLING


def assert_needs_entailment_and_dropped(verdict: ClaimVerdict) -> None:
    """Not coupled: handed to step 3, which with no scorer drops it (fail closed)."""
    assert not verdict.passed
    assert verdict.step == STEP_ENTAILMENT
    assert verdict.reason == NO_ENTAILMENT_REASON


# --- helpers ----------------------------------------------------------------------------------


def test_payload_drops_only_articles_and_to_be():
    assert payload_tokens("The cache is an LRU and was a mess") == {"cache", "lru", "and", "mess"}
    assert {"a", "an", "the", "be", "am", "is", "are", "was", "were", "been", "being"} == GLUE_WORDS


def test_payload_keeps_numbers_negations_and_quantifiers():
    text = "no all none some most off 30 not never without every any"
    assert payload_tokens(text) == set(text.split())
    assert not (NEGATION_WORDS & GLUE_WORDS)


def test_payload_tokens_casefold_and_split_on_non_letters():
    assert payload_tokens("Set maxmemory-policy allkeys_lru, DNS-01!") == {
        "set",
        "maxmemory",
        "policy",
        "allkeys",
        "lru",
        "dns",
        "01",
    }


def test_negation_cues_words_and_contractions():
    assert negation_cues("It is not cached, and never was; nobody cannot say") == {
        "not",
        "never",
        "nobody",
        "cannot",
    }
    assert negation_cues("It ISN'T done and they won’t and don't") == {"isn't", "won't", "don't"}
    assert negation_cues("Don won the race; the nothing-burger") == {"nothing"}
    assert negation_cues("knot notes nonetheless") == frozenset()


def test_normalise_is_nfc_and_whitespace():
    decomposed = unicodedata.normalize("NFD", "café  au\n\tlait ")
    assert nfc_collapsed(decomposed) == "café au lait"
    assert nfc_collapsed(decomposed) == unicodedata.normalize("NFC", "café au lait")


def test_span_occurs():
    body = "Rotate the staging\n  certs   with certbot."
    assert span_occurs("the staging certs with", body)
    assert span_occurs("Rotate the staging\n  certs", body)
    assert not span_occurs("the production certs", body)
    assert not span_occurs("", body)
    assert not span_occurs("   \n", body)


def test_span_tokens_drop_a_word_cut_at_the_edge():
    body = "The dose of 250 mg was safe."
    assert span_tokens("dose of 25", body) == {"dose", "of"}
    assert span_tokens("ose of 250", body) == {"of", "250"}
    assert span_tokens("dose of 250", body) == {"dose", "of", "250"}
    # A hyphen is not a letter: a span starting after one has cut nothing.
    assert span_tokens("policy allkeys-lru", "maxmemory-policy allkeys-lru") == {
        "policy",
        "allkeys",
        "lru",
    }


def test_in_order_and_numbers():
    assert in_order(["a", "c"], ["a", "b", "c"])
    assert not in_order(["c", "a"], ["a", "b", "c"])
    assert not in_order(["a", "a"], ["a", "b"])
    assert in_order([], ["a"])
    assert numbers("0.8 mg in 1 to 4 weeks, 2,500 people, DNS-01") == {
        "0.8",
        "1",
        "4",
        "2,500",
        "01",
    }


def test_compound_words():
    assert compound_words("UCP1-dependent and ATP‑dependent (DNS-01)") == {
        "ucp1-dependent",
        "atp-dependent",
        "dns-01",
    }


# --- step 1: verbatim span --------------------------------------------------------------------


def test_fabricated_quote_is_dropped_at_verbatim():
    versions = {V1: "Backups run nightly at 02:00 on the NAS."}
    verdict = gate_one(claim("Backups run hourly", (V1, "Backups run hourly on the NAS")), versions)
    assert not verdict.passed
    assert verdict.step == STEP_VERBATIM
    # Without labels a reason names no version; never its database id.
    assert verdict.reason == "quoted span 1 does not occur in the version it cites"


def test_one_fabricated_span_among_real_ones_fails_the_claim():
    versions = {V1: "Backups run nightly.", V2: "The NAS is in the basement."}
    c = claim(
        "Backups run nightly",
        (V1, "Backups run nightly"),
        (V2, "The NAS is on the roof"),
    )
    verdict = gate_one(c, versions)
    assert (verdict.passed, verdict.step) == (False, STEP_VERBATIM)
    assert "quoted span 2" in verdict.reason


def test_span_from_a_version_not_sent_is_dropped_like_a_fabrication():
    # The version exists and holds the text — but the answerer was never shown it.
    versions = {V1: "Deploys are frozen on Fridays."}
    c = claim("Deploys are frozen on Fridays", (V_WITHHELD, "Deploys are frozen on Fridays"))
    verdict = gate_one(c, versions)
    assert (verdict.passed, verdict.step) == (False, STEP_VERBATIM)
    assert "not shown to the answerer" in verdict.reason


def test_claim_without_support_fails():
    verdict = gate_one(Claim(text="Deploys are frozen", support=()), {V1: "Deploys are frozen"})
    assert (verdict.passed, verdict.step) == (False, STEP_VERBATIM)
    assert verdict.reason == "the claim cites no evidence"


@pytest.mark.parametrize("span", ["", "   ", "\n\t"])
def test_empty_or_whitespace_span_fails(span):
    verdict = gate_one(claim("Deploys are frozen", (V1, span)), {V1: "Deploys are frozen. "})
    assert (verdict.passed, verdict.step) == (False, STEP_VERBATIM)
    assert "is empty" in verdict.reason


def test_claim_without_text_fails():
    verdict = gate_one(claim("  ", (V1, "Deploys are frozen")), {V1: "Deploys are frozen"})
    assert (verdict.passed, verdict.step) == (False, STEP_VERBATIM)


def test_whitespace_normalisation_passes_newlines_vs_spaces():
    versions = {V1: "Set maxmemory-policy\n   allkeys-lru\ton the cache."}
    c = claim("set maxmemory-policy allkeys-lru", (V1, "Set maxmemory-policy allkeys-lru"))
    assert_coupled(gate_one(c, versions))


def test_nfc_normalisation_passes_composed_vs_decomposed():
    composed = unicodedata.normalize("NFC", "The café on Rue Délice opens at 8.")
    decomposed = unicodedata.normalize("NFD", composed)
    assert composed != decomposed
    # Body decomposed, span and claim composed …
    assert_coupled(
        gate_one(
            claim("the café opens at 8", (V1, "The café on Rue Délice opens at 8")),
            {V1: decomposed},
        )
    )
    # … and the other way round.
    assert_coupled(
        gate_one(
            claim(
                unicodedata.normalize("NFD", "the café opens at 8"),
                (V1, unicodedata.normalize("NFD", "café on Rue Délice opens at 8")),
            ),
            {V1: composed},
        )
    )


# --- step 2: extractive coupling --------------------------------------------------------------


def test_claim_inside_its_span_couples_with_no_model():
    versions = {V1: "# Deploy\n\nRotate the staging certs with certbot before Friday.\n"}
    c = claim(
        "Rotate the staging certs before Friday",
        (V1, "Rotate the staging certs with certbot before Friday."),
    )
    verdict = gate_one(c, versions, scorer=None)
    assert_coupled(verdict)
    assert verdict.entailment_score is None


def test_compound_identifier_fragment_couples_known_fail_open_exposure():
    """CANARY (seed decision lode-1qxy): `[^\\W_]+` splits hyphenated compounds, so a claim
    naming a fragment of a compound couples. The exposure is accepted; if the tokenizer is
    ever tightened this test fails and must be updated together with the seed's note."""
    redis = {V1: "Set maxmemory-policy allkeys-lru on the cache."}
    assert_coupled(
        gate_one(claim("the policy is allkeys-lru", (V1, "maxmemory-policy allkeys-lru")), redis)
    )
    acme = {V1: "Certificates are issued with the DNS-01 challenge."}
    assert_coupled(
        gate_one(
            claim("issued with the DNS challenge", (V1, "issued with the DNS-01 challenge")), acme
        )
    )


def test_claim_compound_split_across_span_compounds_does_not_couple():
    """Measured on SciFact (claim 221, CONTRADICT): "UCP1-dependent" must not couple with a
    span saying "UCP1-independent … ATP-dependent", though every letter run is there, in order."""
    body = "Beige fat uses a UCP1-independent and ATP-dependent Ca2+ cycling."
    span = "a UCP1-independent and ATP-dependent Ca2+ cycling"
    verdict = gate_one(claim("UCP1-dependent Ca2+ cycling", (V1, span)), {V1: body})
    assert_needs_entailment_and_dropped(verdict)
    assert_coupled(gate_one(claim("UCP1-independent Ca2+ cycling", (V1, span)), {V1: body}))


def test_claim_words_in_another_order_do_not_couple():
    # Set containment would couple this swap: both words are in the sentence.
    body = (
        "These mice showed decreased fat mass; this was accompanied by increased fatty acid "
        "oxidation."
    )
    swapped = (
        "These mice showed increased fat mass; this was accompanied by decreased fatty acid "
        "oxidation"
    )
    assert payload_tokens(swapped) <= span_tokens(body, body)
    assert_needs_entailment_and_dropped(gate_one(claim(swapped, (V1, body)), {V1: body}))
    faithful = "mice showed decreased fat mass"
    assert_coupled(gate_one(claim(faithful, (V1, body)), {V1: body}))


def test_a_number_is_read_whole():
    body = "The maximum was reached at 0.8 mg per day in 1 to 4 weeks."
    span = "reached at 0.8 mg per day in 1 to 4 weeks"
    verdict = gate_one(claim("reached at 1.8 mg per day in 4 weeks", (V1, span)), {V1: body})
    assert_needs_entailment_and_dropped(verdict)
    assert_coupled(gate_one(claim("reached at 0.8 mg per day", (V1, span)), {V1: body}))


def test_dropping_one_of_two_negations_does_not_couple():
    span = "10E8 did not bind phospholipids and was not autoreactive"
    dropped_one = "10E8 did bind phospholipids and was not autoreactive"
    assert negation_cues(span) == negation_cues(dropped_one)  # same cues, different counts
    assert_needs_entailment_and_dropped(gate_one(claim(dropped_one, (V1, span)), {V1: span}))
    assert_coupled(gate_one(claim(span, (V1, span)), {V1: span}))
    # The cost, as with the seed's presence check: cues are not scoped to clauses, so a claim
    # taking one negated clause of a doubly negated span also goes to step 3.
    one_clause = gate_one(claim("10E8 was not autoreactive", (V1, span)), {V1: span})
    assert_needs_entailment_and_dropped(one_clause)


@pytest.mark.parametrize(
    ("span", "claim_text"),
    [
        ("the cache isn't invalidated on deploy", "the cache is invalidated on deploy"),
        ("we don't rotate the keys monthly", "we rotate the keys monthly"),
        ("the job won't retry failed uploads", "the job will retry failed uploads"),
        ("the job won't retry failed uploads", "the job retry failed uploads"),
        ("backups do not run on Sunday", "backups do run on Sunday"),
        ("the flag is never set in production", "the flag is set in production"),
    ],
)
def test_negated_span_does_not_couple_and_falls_to_entailment(span, claim_text):
    verdict = gate_one(claim(claim_text, (V1, span)), {V1: f"Notes: {span}."})
    assert_needs_entailment_and_dropped(verdict)


def test_negated_span_is_accepted_only_by_entailment_when_a_scorer_says_so():
    versions = {V1: "The cache isn't invalidated on deploy."}
    c = claim("the cache is invalidated on deploy", (V1, "The cache isn't invalidated on deploy."))
    low = gate_one(c, versions, scorer=StubScorer(0.2))
    assert (low.passed, low.step, low.entailment_score) == (False, STEP_ENTAILMENT, 0.2)
    high = gate_one(c, versions, scorer=StubScorer(0.95))
    assert (high.passed, high.step, high.entailment_score) == (True, STEP_ENTAILMENT, 0.95)


def test_typographic_apostrophe_negation_blocks_coupling():
    span = "the cache isn’t invalidated on deploy"
    assert "isn't" in negation_cues(span)
    assert_needs_entailment_and_dropped(
        gate_one(claim("the cache is invalidated on deploy", (V1, span)), {V1: span})
    )


def test_claim_stating_the_same_negation_couples():
    span = "the cache isn't invalidated on deploy"
    assert_coupled(gate_one(claim("The cache isn’t invalidated on deploy", (V1, span)), {V1: span}))
    span = "backups do not run on Sunday"
    assert_coupled(gate_one(claim("backups do not run on Sunday", (V1, span)), {V1: span}))


def test_don_and_won_as_real_words_still_couple():
    body = "Don won the race in 2019 and Won Lee came second."
    assert_coupled(
        gate_one(claim("Don won the race in 2019", (V1, "Don won the race in 2019")), {V1: body})
    )
    assert_coupled(gate_one(claim("Won Lee came second", (V1, "Won Lee came second")), {V1: body}))


def test_drifted_number_does_not_couple():
    body = "The request timeout is 20 seconds."
    verdict = gate_one(
        claim("The request timeout is 30 seconds", (V1, "request timeout is 20 seconds")),
        {V1: body},
    )
    assert_needs_entailment_and_dropped(verdict)


def test_truncated_span_cannot_couple_a_drifted_number():
    body = "The maximum dose is 250 mg per day."
    c = claim("The maximum dose is 25", (V1, "maximum dose is 25"))
    verdict = gate_one(c, {V1: body})
    assert_needs_entailment_and_dropped(verdict)


def test_inverted_quote_does_not_couple():
    # A real quote stating the opposite of the claim.
    body = "Backups are disabled on staging. Backups are enabled on production."
    verdict = gate_one(
        claim("Backups are enabled on staging", (V1, "Backups are disabled on staging.")),
        {V1: body},
    )
    assert_needs_entailment_and_dropped(verdict)
    # The other real sentence does not rescue it either: "staging" is not in it.
    verdict = gate_one(
        claim("Backups are enabled on staging", (V1, "Backups are enabled on production.")),
        {V1: body},
    )
    assert_needs_entailment_and_dropped(verdict)


def test_one_coupling_span_among_several_is_enough():
    versions = {V1: "The NAS is in the basement.", V2: "Backups run nightly at 02:00."}
    c = claim(
        "Backups run nightly at 02:00",
        (V1, "The NAS is in the basement."),
        (V2, "Backups run nightly at 02:00."),
    )
    verdict = gate_one(c, versions)
    assert_coupled(verdict)
    assert "span 2" in verdict.reason


# --- step 3: entailment ---------------------------------------------------------------------

SYNTH_VERSIONS = {V1: "The NAS sits in the basement.", V2: "Backups run nightly at 02:00."}
SYNTHESIS = claim(
    "Nightly backups go to the NAS in the basement",
    (V1, "The NAS sits in the basement."),
    (V2, "Backups run nightly at 02:00."),
)


def test_synthesis_across_two_notes_does_not_couple_and_drops_with_no_scorer():
    assert_needs_entailment_and_dropped(gate_one(SYNTHESIS, SYNTH_VERSIONS, scorer=None))


def test_synthesis_across_two_notes_is_accepted_by_an_entailing_scorer():
    scorer = StubScorer(0.97)
    verdict = gate_one(SYNTHESIS, SYNTH_VERSIONS, scorer=scorer)
    assert verdict.passed
    assert verdict.step == STEP_ENTAILMENT
    assert verdict.entailment_score == 0.97
    assert verdict.entailment_scorer == "stub"
    # The cited spans, normalised and joined, are the premise; the claim is the hypothesis.
    assert scorer.calls == [
        (
            "The NAS sits in the basement. Backups run nightly at 02:00.",
            "Nightly backups go to the NAS in the basement",
        )
    ]


def test_synthesis_at_or_below_threshold_is_dropped():
    for value in (ENTAILMENT_THRESHOLD, 0.5, 0.0):
        verdict = gate_one(SYNTHESIS, SYNTH_VERSIONS, scorer=StubScorer(value))
        assert (verdict.passed, verdict.step, verdict.entailment_score) == (
            False,
            STEP_ENTAILMENT,
            value,
        )
        assert "do not entail" in verdict.reason


def test_synthesis_with_an_unavailable_scorer_is_dropped_with_its_reason():
    scorer = UnavailableScorer()
    verdicts = run_gate([SYNTHESIS, SYNTHESIS], SYNTH_VERSIONS, scorer=scorer)
    for verdict in verdicts:
        assert (verdict.passed, verdict.step) == (False, STEP_ENTAILMENT)
        assert "the model folder is gone" in verdict.reason
        assert verdict.entailment_scorer == "broken"
        assert verdict.entailment_score is None
    # Asked for each claim: unavailability is per claim, never carried over.
    assert scorer.calls == 2


def test_a_scorer_that_crashes_fails_closed():
    verdict = gate_one(SYNTHESIS, SYNTH_VERSIONS, scorer=CrashingScorer())
    assert (verdict.passed, verdict.step) == (False, STEP_ENTAILMENT)
    assert "RuntimeError" in verdict.reason


def test_a_scorer_returning_nan_fails_closed():
    verdict = gate_one(SYNTHESIS, SYNTH_VERSIONS, scorer=StubScorer(float("nan")))
    assert (verdict.passed, verdict.step) == (False, STEP_ENTAILMENT)


def test_the_scorer_is_never_called_for_coupled_or_unverified_claims():
    scorer = StubScorer(1.0)
    versions = {V1: "Backups run nightly."}
    verdicts = run_gate(
        [
            claim("Backups run nightly", (V1, "Backups run nightly")),
            claim("Backups run hourly", (V1, "Backups run hourly")),
        ],
        versions,
        scorer=scorer,
    )
    assert [(v.passed, v.step) for v in verdicts] == [(True, STEP_COUPLING), (False, STEP_VERBATIM)]
    assert scorer.calls == []


def test_run_gate_keeps_claim_order_and_serialises():
    claims = [SYNTHESIS, claim("Backups run nightly", (V2, "Backups run nightly"))]
    verdicts = run_gate(claims, SYNTH_VERSIONS, scorer=None)
    assert [v.claim for v in verdicts] == claims
    assert [v.passed for v in verdicts] == [False, True]
    data = verdicts[0].as_dict()
    assert data["step"] == "entailment" and data["reason"] == NO_ENTAILMENT_REASON
    assert run_gate([], SYNTH_VERSIONS, scorer=None) == []


# --- the entailment seam ----------------------------------------------------------------------


def test_sigmoid():
    assert sigmoid(0.0) == 0.5
    assert sigmoid(1000.0) == 1.0
    assert sigmoid(-1000.0) == 0.0
    assert sigmoid(2.0) == pytest.approx(0.8808, abs=1e-4)


def test_threshold_is_conservative():
    assert 0.5 < ENTAILMENT_THRESHOLD < 1.0


def test_get_entailment_scorer_none_and_unknown(settings):
    settings.LODE_ENTAILMENT = "none"
    assert get_entailment_scorer() is None
    assert get_entailment_scorer("none") is None
    with pytest.raises(ValueError, match="unknown entailment backend"):
        get_entailment_scorer("magic")


def test_unconfigured_cross_encoder_drops_with_a_clear_reason(settings):
    settings.LODE_ENTAILMENT = "cross-encoder"
    settings.LODE_ENTAILMENT_MODEL_DIR = ""
    scorer = get_entailment_scorer()
    assert scorer is not None and scorer.name == "cross-encoder"
    with pytest.raises(EntailmentUnavailable, match="LODE_ENTAILMENT_MODEL_DIR"):
        scorer.score("a", "b")
    verdict = gate_one(SYNTHESIS, SYNTH_VERSIONS, scorer=scorer)
    assert not verdict.passed and "LODE_ENTAILMENT_MODEL_DIR" in verdict.reason


def test_llm_judge_is_the_chat_endpoints_judge():
    scorer = get_entailment_scorer("llm-judge")
    assert isinstance(scorer, entailment_module.LLMJudge) and scorer.remote


@pytest.fixture
def no_downloads(fastembed_offline):
    """No model hub (conftest's `fastembed_offline`); a fresh scorer cache per test."""
    entailment_module._cross_encoder.cache_clear()
    yield
    entailment_module._cross_encoder.cache_clear()


def test_cross_encoder_loads_a_local_folder_and_scores(no_downloads, tiny_entailment_dir):
    scorer = CrossEncoderEntailment(tiny_entailment_dir, DEFAULT_MODEL_NAME)
    high = scorer.score("The TLS certificate expires in May.", f"The {BOOSTED_WORD} expires")
    plain = scorer.score("The lease ends in May.", "The lease ends")
    assert 0.0 <= plain <= 1.0 and 0.0 <= high <= 1.0
    assert high > ENTAILMENT_THRESHOLD >= plain
    assert plain == pytest.approx(0.5, abs=0.1)
    assert scorer.score("The lease ends in May.", "The lease ends") == plain  # deterministic


def test_configured_cross_encoder_accepts_and_drops_through_the_gate(
    no_downloads, tiny_entailment_dir, settings
):
    settings.LODE_ENTAILMENT = "cross-encoder"
    settings.LODE_ENTAILMENT_MODEL_DIR = str(tiny_entailment_dir)
    settings.LODE_ENTAILMENT_MODEL_NAME = DEFAULT_MODEL_NAME
    scorer = get_entailment_scorer()
    assert isinstance(scorer, CrossEncoderEntailment)
    assert get_entailment_scorer() is scorer  # loaded once per (folder, model name)
    versions = {V1: "The certificate lives on the proxy.", V2: "The proxy renews at midnight."}
    synthesis = claim(
        "The certificate renews at midnight",
        (V1, "The certificate lives on the proxy."),
        (V2, "The proxy renews at midnight."),
    )
    plain = claim(
        "The proxy renews the lease",
        (V2, "The proxy renews at midnight."),
    )
    accepted, dropped = run_gate([synthesis, plain], versions, scorer=scorer)
    assert (accepted.passed, accepted.step, accepted.entailment_scorer) == (
        True,
        STEP_ENTAILMENT,
        "cross-encoder",
    )
    assert accepted.entailment_score > ENTAILMENT_THRESHOLD
    assert (dropped.passed, dropped.step) == (False, STEP_ENTAILMENT)
    assert dropped.entailment_score is not None and dropped.entailment_score <= ENTAILMENT_THRESHOLD


def test_folder_without_a_model_is_unavailable_and_the_claim_dropped(no_downloads, tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    scorer = CrossEncoderEntailment(folder, DEFAULT_MODEL_NAME)
    with pytest.raises(EntailmentUnavailable) as excinfo:
        scorer.score("a", "b")
    assert str(folder / "onnx" / "model.onnx") in str(excinfo.value)
    verdict = gate_one(SYNTHESIS, SYNTH_VERSIONS, scorer=scorer)
    assert (verdict.passed, verdict.step) == (False, STEP_ENTAILMENT)
    assert "no entailment model at" in verdict.reason


def test_corrupt_model_folder_is_unavailable_and_the_claim_dropped(
    no_downloads, tmp_path, tiny_entailment_dir
):
    folder = tmp_path / "corrupt"
    shutil.copytree(tiny_entailment_dir, folder)
    (folder / "onnx" / "model.onnx").write_bytes(b"this is not an onnx protobuf")
    scorer = CrossEncoderEntailment(folder, DEFAULT_MODEL_NAME)
    with pytest.raises(EntailmentUnavailable, match="failed to load"):
        scorer.score("a", "b")
    verdict = gate_one(SYNTHESIS, SYNTH_VERSIONS, scorer=scorer)
    assert (verdict.passed, verdict.step) == (False, STEP_ENTAILMENT)
    assert "failed to load" in verdict.reason


def test_folder_without_tokenizer_is_unavailable(no_downloads, tmp_path, tiny_entailment_dir):
    folder = tmp_path / "no-tokenizer"
    shutil.copytree(tiny_entailment_dir, folder)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(EntailmentUnavailable):
        CrossEncoderEntailment(folder, DEFAULT_MODEL_NAME).score("a", "b")
