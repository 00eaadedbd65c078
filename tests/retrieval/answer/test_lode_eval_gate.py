"""`manage.py lode_eval_gate` on a tiny SciFact-shaped fixture (tests/fixtures/
scifact-claims-mini): per-step, per-backend accept rates, skipped backends said why, JSON shape.

The fixture, by design: SUPPORT — claim 1 quotes itself (couples), claims 2 and 7 need
synthesis (dropped without a model); claim 7 also cites a document missing from the corpus.
CONTRADICT — claims 3 and 5 are contradicted by their sentence (do not couple), claim 6
("DNS" vs "DNS-01") couples through the accepted compound-fragment exposure: two false
accepts. Claim 4 has no evidence (skipped).
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from retrieval.answer import entailment as entailment_module
from tests.factories import DEFAULT_MODEL_NAME, UnavailableScorer

FIXTURE = Path(__file__).parents[2] / "fixtures" / "scifact-claims-mini"
CLAIMS = FIXTURE / "claims.jsonl"
CORPUS = FIXTURE / "corpus.jsonl"


def run(tmp_path: Path, **options: object) -> tuple[dict, str]:
    out = StringIO()
    report_path = tmp_path / "gate.json"
    call_command(
        "lode_eval_gate", claims=CLAIMS, corpus=CORPUS, json=report_path, stdout=out, **options
    )
    return json.loads(report_path.read_text("utf-8")), out.getvalue()


@pytest.fixture
def no_models(settings):
    settings.LODE_ENTAILMENT_MODEL_DIR = ""
    settings.LODE_LLM_BASE_URL = ""
    entailment_module._cross_encoder.cache_clear()
    yield
    entailment_module._cross_encoder.cache_clear()


def test_default_run_reports_each_step_and_skips_unconfigured_backends(tmp_path, no_models):
    report, printed = run(tmp_path)
    assert report["default_backend"] == "none"
    assert report["skipped"] == {
        "claims without evidence": 1,
        "rationales citing a document not in the corpus": 1,
    }
    support, contradict = report["support"], report["contradict"]
    assert support["accept_rate"] == pytest.approx(1 / 3, abs=1e-3)
    assert contradict["accept_rate"] == 0.5
    assert report["contradict_false_accept_rate"] == 0.5

    assert support["rationales"] == 3 and support["claims"] == 3
    assert support["verbatim"] == {"passed": 3, "pass_rate": 1.0}
    assert support["coupling"]["passed"] == 1
    assert support["entailment"]["reached"] == 2
    assert support["entailment"]["accepted"] == 0
    assert contradict["rationales"] == 4 and contradict["claims"] == 3
    assert contradict["coupling"] == {"reached": 4, "passed": 2, "pass_rate": 0.5}
    assert contradict["claims_accepted"] == 1
    assert {e["claim_id"] for e in contradict["accepted_examples"]} == {6}
    assert contradict["drop_reasons"] == {
        "entailment: needs entailment and no entailment model is configured": 2
    }

    backends = report["backends"]
    assert backends["none"]["support"] == support
    assert "LODE_ENTAILMENT_MODEL_DIR" in backends["cross-encoder"]["skipped"]
    assert "LODE_LLM_BASE_URL" in backends["llm-judge"]["skipped"]
    assert "CONTRADICT false-accept rate (none): 50.0%" in printed
    assert "cross-encoder skipped: LODE_ENTAILMENT_MODEL_DIR" in printed


def test_cross_encoder_backend_runs_from_a_local_folder(
    tmp_path,
    no_models,
    settings,
    tiny_entailment_dir,
):
    settings.LODE_ENTAILMENT_MODEL_DIR = str(tiny_entailment_dir)
    settings.LODE_ENTAILMENT_MODEL_NAME = DEFAULT_MODEL_NAME
    report, _ = run(tmp_path, entailment="cross-encoder,none")
    assert report["default_backend"] == "cross-encoder"
    ce = report["backends"]["cross-encoder"]
    # The tiny model "entails" any pair mentioning "certificate": claim 7 (support) and claim 5
    # (contradict) reach step 3 with such a premise; claim 2 and claim 3 do not.
    assert ce["support"]["entailment"] == {
        "reached": 2,
        "scored": 2,
        "unscored": 0,
        "accepted": 1,
        "accept_rate": 0.5,
        "mean_score": ce["support"]["entailment"]["mean_score"],
    }
    assert ce["support"]["accepted"] == 2
    assert ce["contradict"]["accepted"] == 3
    assert report["contradict"] == ce["contradict"]
    assert report["backends"]["none"]["contradict"]["accepted"] == 2


def test_broken_cross_encoder_folder_is_skipped_with_why(tmp_path, no_models, settings):
    settings.LODE_ENTAILMENT_MODEL_DIR = str(tmp_path / "nowhere")
    report, _ = run(tmp_path, entailment="cross-encoder")
    assert "no entailment model at" in report["backends"]["cross-encoder"]["skipped"]
    assert report["default_backend"] is None
    assert "support" not in report


def test_limit_takes_the_first_claims_with_evidence(tmp_path, no_models):
    report, _ = run(tmp_path, entailment="none", limit=2)
    assert report["support"]["claims"] == 2
    assert report["contradict"]["rationales"] == 0
    assert report["contradict"]["accept_rate"] is None


def test_bad_arguments_are_command_errors(tmp_path, no_models):
    with pytest.raises(CommandError, match="does not exist"):
        call_command("lode_eval_gate", claims=tmp_path / "no.jsonl", corpus=CORPUS)
    with pytest.raises(CommandError, match="--entailment"):
        call_command("lode_eval_gate", claims=CLAIMS, corpus=CORPUS, entailment="magic")
    with pytest.raises(CommandError, match="--limit"):
        call_command("lode_eval_gate", claims=CLAIMS, corpus=CORPUS, limit=0)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n", "utf-8")
    with pytest.raises(CommandError, match="not JSON"):
        call_command("lode_eval_gate", claims=broken, corpus=CORPUS, stdout=StringIO())


def test_a_backend_that_fails_on_every_claim_is_reported_not_hidden(
    tmp_path, no_models, monkeypatch
):
    from retrieval.answer import gate_eval

    monkeypatch.setattr(gate_eval, "backend_unavailable", lambda name: "")
    monkeypatch.setattr(gate_eval, "get_entailment_scorer", lambda name: UnavailableScorer())
    report, printed = run(tmp_path, entailment="llm-judge")
    entailment = report["backends"]["llm-judge"]["contradict"]["entailment"]
    assert entailment["reached"] == 2 and entailment["unscored"] == 2
    assert entailment["accepted"] == 0
    assert "warning: llm-judge gave no score for 2 of 2 contradict rationales" in printed


def test_coupling_stress_on_perturbed_rationale_sentences(tmp_path, no_models):
    report, printed = run(tmp_path, entailment="none")
    stress = report["coupling_stress"]
    # Five distinct rationale sentences; each quoted whole couples with itself …
    assert stress["self_quote"] == {"n": 5, "coupled": 5, "examples": [], "rate": 1.0}
    # … and no edit that makes it false couples.
    assert stress["number_drift"]["n"] == 3
    assert stress["antonym_swap"]["n"] == 1
    assert stress["negation_removed"]["n"] == 1
    for edit in ("number_drift", "antonym_swap", "negation_removed"):
        assert stress[edit]["coupled"] == 0, stress[edit]
    assert "number_drift" in printed
