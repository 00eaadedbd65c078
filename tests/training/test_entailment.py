"""Training an entailment model (`python -m training.entailment`): the data preparation
(training/prepare_entailment.py) on small fixtures written here — labels,
evidence-first pair order, the kept-apart split disjoint by claim id and by cited abstract —
and the trainer's torch-free helpers. The end-to-end run (train, export, load through the
seam) needs a Python with torch: it runs when `LODE_TRAIN_PYTHON` names one (or this Python
has torch) and is skipped otherwise.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from training import entailment as entailment_command
from training import prepare_entailment as prep
from training import train_entailment as trainer

SHARED_SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "data" / "scifact-claims"
TRAINER_SCRIPT = Path(__file__).resolve().parents[2] / "training" / "train_entailment.py"

# Document 10: sentences 0 and 1 support claim 1 ("Aspirin lowers fever"), sentence 2 is the
# same finding negated for claim 2; claims 1 and 2 are the SciFact-style twin pair and cite
# the same abstract, so they must always share a split. Claim 3 has no evidence (NEI).
CORPUS = [
    {
        "doc_id": 10,
        "title": "Aspirin",
        "abstract": [
            "Aspirin lowered fever in 80% of patients.  ",
            "The effect appeared within an hour.\n",
            "Aspirin did not raise fever in any group.",
            "Patients were recruited in 2019.",
            "Fever was measured orally.",
        ],
        "structured": False,
    },
    {
        "doc_id": 20,
        "title": "Sleep",
        "abstract": [
            "Sleep deprivation impaired memory.",
            "Sleep was recorded for a week.",
            "Participants kept diaries of sleep.",
        ],
        "structured": False,
    },
    {
        "doc_id": 30,
        "title": "Coffee",
        "abstract": ["Coffee intake was surveyed.", "No outcome was measured."],
        "structured": False,
    },
]
CLAIMS = [
    {
        "id": 1,
        "claim": "Aspirin lowers fever.",
        "evidence": {"10": [{"sentences": [0, 1], "label": "SUPPORT"}]},
        "cited_doc_ids": [10],
    },
    {
        "id": 2,
        "claim": "Aspirin raises fever.",
        "evidence": {"10": [{"sentences": [2], "label": "CONTRADICT"}]},
        "cited_doc_ids": [10],
    },
    {"id": 3, "claim": "Coffee prevents headaches.", "evidence": {}, "cited_doc_ids": [30]},
    {
        "id": 4,
        "claim": "Sleep loss impairs memory.",
        "evidence": {"20": [{"sentences": [0], "label": "SUPPORT"}]},
        "cited_doc_ids": [20],
    },
]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")


@pytest.fixture
def scifact_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "scifact-claims"
    write_jsonl(folder / "corpus.jsonl", CORPUS)
    write_jsonl(folder / "claims_train.jsonl", CLAIMS)
    return folder


@pytest.fixture
def nli_dir(tmp_path: Path) -> Path:
    """One tiny file per set, in each set's own format, with a row of each kept-apart split
    that must not be read."""
    root = tmp_path / "nli"
    snli = root / "snli"
    snli.mkdir(parents=True)
    (snli / "s1.dev").write_text("A man do n't sleep . \nTwo dogs run , fast . \n", "utf-8")
    (snli / "s2.dev").write_text("A man is awake . \nCats sleep . \n", "utf-8")
    (snli / "labels.dev").write_text("entailment\ncontradiction\n", "utf-8")
    for name in ("s1.test", "s2.test"):
        (snli / name).write_text("TEST ROW . \n", "utf-8")
    (snli / "labels.test").write_text("neutral\n", "utf-8")
    sick = root / "sick"
    sick.mkdir()
    header = (
        "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tentailment_AB\t"
        "entailment_BA\tsentence_A_original\tsentence_B_original\tsentence_A_dataset\t"
        "sentence_B_dataset\tSemEval_set\n"
    )
    rows = [
        ("1", "A boy runs", "A kid runs", "ENTAILMENT", "TRAIN"),
        ("2", "A girl sings", "Nobody sings", "CONTRADICTION", "TRIAL"),
        ("3", "A cat naps", "SICK TEST ROW", "NEUTRAL", "TEST"),
    ]
    (sick / "SICK.txt").write_text(
        header
        + "".join(
            f"{i}\t{a}\t{b}\t{label}\t4\tx\ty\ta\tb\tF\tF\t{split}\n"
            for i, a, b, label, split in rows
        ),
        "utf-8",
    )
    write_jsonl(
        root / "climate-fever" / "climate-fever.jsonl",
        [
            {
                "claim_id": "7",
                "claim": "Seas are rising.",
                "claim_label": "DISPUTED",
                "evidences": [
                    {"evidence": "Sea level rose 20 cm.", "evidence_label": "SUPPORTS"},
                    {"evidence": "Glaciers exist.", "evidence_label": "NOT_ENOUGH_INFO"},
                    {"evidence": "Sea level fell.", "evidence_label": "REFUTES"},
                ],
            }
        ],
    )
    healthver = root / "healthver"
    healthver.mkdir()
    (healthver / "healthver_dev.csv").write_text(
        "id,evidence,claim,label,topic_ip,question\n"
        '1,"Masks, worn well, cut spread.",Masks reduce spread,Supports,1,q\n'
        "2,Vitamin C was studied.,Vitamin C cures COVID,Neutral,2,q\n",
        "utf-8",
    )
    (healthver / "healthver_test.csv").write_text(
        "id,evidence,claim,label,topic_ip,question\n9,HV TEST ROW,x,Refutes,1,q\n", "utf-8"
    )
    return root


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]


# --- SciFact pairs ---------------------------------------------------------------------------


def test_scifact_rationales_give_evidence_first_pairs_with_their_labels():
    corpus = {row["doc_id"]: [s.strip() for s in row["abstract"]] for row in CORPUS}
    pairs = prep.scifact_pairs(CLAIMS[:2], corpus, neutral_per_claim=1)
    labelled = {(p.hypothesis, p.label): p for p in pairs}
    support = labelled[("Aspirin lowers fever.", "entailment")]
    # Premise = the rationale's sentences, trimmed, joined with one space (as the gate joins
    # cited spans); the claim is the hypothesis, never the other way round.
    assert support.premise == (
        "Aspirin lowered fever in 80% of patients. The effect appeared within an hour."
    )
    contradict = labelled[("Aspirin raises fever.", "contradiction")]
    assert contradict.premise == "Aspirin did not raise fever in any group."
    assert {p.source for p in pairs} == {"scifact"}
    assert support.group == "scifact:1" and contradict.group == "scifact:2"


def test_scifact_neutrals_come_from_cited_sentences_outside_the_claims_rationales():
    corpus = {row["doc_id"]: [s.strip() for s in row["abstract"]] for row in CORPUS}
    pairs = prep.scifact_pairs(CLAIMS, corpus, neutral_per_claim=2)
    neutrals = [p for p in pairs if p.label == "neutral"]
    by_claim = Counter(p.group for p in neutrals)
    assert by_claim == {"scifact:1": 2, "scifact:2": 2, "scifact:3": 2, "scifact:4": 2}
    aspirin_rationale = {corpus[10][0], corpus[10][1]}
    for pair in neutrals:
        if pair.group == "scifact:1":
            assert pair.premise not in aspirin_rationale
            assert pair.premise in corpus[10]
    # Claim 2's rationale is sentence 2; sentence 0 (claim 1's rationale) is neutral for it and
    # closest in words (aspirin, fever), then sentence 4 (fever).
    claim2 = [p.premise for p in neutrals if p.group == "scifact:2"]
    assert claim2 == [corpus[10][0], corpus[10][4]]
    # A claim without evidence gets neutrals only.
    assert {p.label for p in pairs if p.group == "scifact:3"} == {"neutral"}


def test_closest_sentences_prefers_shared_words_then_position():
    sentences = ["Nothing here.", "Aspirin lowers fever fast.", "Aspirin works.", "Fever."]
    # Jaccard with {aspirin, lowers, fever}: 3/4, 0, 1/4, 1/3.
    assert prep.closest_sentences("Aspirin lowers fever", sentences, range(4), 2) == [1, 3]
    # Equal overlap: the earlier sentence first.
    assert prep.closest_sentences("fever", ["Fever.", "Fever."], range(2), 1) == [0]


# --- the split -------------------------------------------------------------------------------


def test_split_keeps_claims_citing_a_common_abstract_together():
    claims = [
        {"id": 1, "cited_doc_ids": [10]},
        {"id": 2, "cited_doc_ids": [10, 11]},
        {"id": 3, "cited_doc_ids": [11]},  # linked to 1 through 2
        {"id": 4, "cited_doc_ids": [12]},
    ]
    assert prep.claim_groups(claims) == {1: 1, 2: 1, 3: 1, 4: 4}
    for seed in range(20):
        parts = prep.split_claims(claims, kept_apart=0.3, dev=0.0, seed=seed)
        assert parts[1] == parts[2] == parts[3]
        assert set(parts.values()) <= set(prep.PARTS)


def test_split_rejects_fractions_that_leave_nothing_to_train_on():
    with pytest.raises(ValueError):
        prep.split_claims(CLAIMS, kept_apart=0.6, dev=0.5, seed=1)


@pytest.mark.skipif(not SHARED_SCIFACT.is_dir(), reason="SciFact train data not present")
def test_split_of_scifact_train_is_disjoint_by_claim_and_by_abstract():
    claims = [
        json.loads(line)
        for line in (SHARED_SCIFACT / "claims_train.jsonl").read_text("utf-8").splitlines()
    ]
    parts = prep.split_claims(claims, kept_apart=0.25, dev=0.1, seed=13)
    assert set(parts) == {c["id"] for c in claims}
    share = Counter(parts.values())
    assert 0.24 <= share["kept_apart"] / len(claims) <= 0.28
    assert 0.09 <= share["dev"] / len(claims) <= 0.13
    docs: dict[str, set[int]] = {part: set() for part in prep.PARTS}
    for claim in claims:
        docs[parts[claim["id"]]].update(claim["cited_doc_ids"])
    assert not docs["kept_apart"] & (docs["train"] | docs["dev"])
    assert not docs["dev"] & docs["train"]
    assert parts == prep.split_claims(claims, kept_apart=0.25, dev=0.1, seed=13)
    assert parts != prep.split_claims(claims, kept_apart=0.25, dev=0.1, seed=14)


# --- the NLI readers -------------------------------------------------------------------------


def test_nli_readers_map_labels_and_leave_evaluation_splits_out(nli_dir):
    snli = prep.nli_pairs(nli_dir, "snli")
    assert [(p.premise, p.hypothesis, p.label) for p in snli] == [
        ("A man don't sleep.", "A man is awake.", "entailment"),
        ("Two dogs run, fast.", "Cats sleep.", "contradiction"),
    ]
    sick = prep.nli_pairs(nli_dir, "sick")
    assert [(p.premise, p.label) for p in sick] == [
        ("A boy runs", "entailment"),
        ("A girl sings", "contradiction"),
    ]
    climate = prep.nli_pairs(nli_dir, "climate-fever")
    assert [(p.premise, p.hypothesis, p.label) for p in climate] == [
        ("Sea level rose 20 cm.", "Seas are rising.", "entailment"),
        ("Glaciers exist.", "Seas are rising.", "neutral"),
        ("Sea level fell.", "Seas are rising.", "contradiction"),
    ]
    healthver = prep.nli_pairs(nli_dir, "healthver")
    assert [(p.premise, p.hypothesis, p.label) for p in healthver] == [
        ("Masks, worn well, cut spread.", "Masks reduce spread", "entailment"),
        ("Vitamin C was studied.", "Vitamin C cures COVID", "neutral"),
    ]
    everything = " ".join(p.premise + p.hypothesis for p in snli + sick + climate + healthver)
    assert "TEST ROW" not in everything
    with pytest.raises(ValueError):
        prep.nli_pairs(nli_dir, "mnli")


def test_pairs_take_the_gates_normal_form():
    pair = prep.make_pair("  Cafe\u0301   au\nlait ", "x\ty", "neutral", "snli", "g")
    assert pair is not None and pair.premise == "Café au lait" and pair.hypothesis == "x y"
    assert prep.make_pair("   ", "claim", "neutral", "snli", "g") is None
    with pytest.raises(ValueError):
        prep.make_pair("a", "b", "SUPPORT", "snli", "g")


def test_sample_keeps_label_shares_and_is_seeded():
    pairs = [
        prep.Pair(f"p{i}", "h", label, "snli", "g")
        for i, label in enumerate(["entailment"] * 60 + ["neutral"] * 30 + ["contradiction"] * 10)
    ]
    taken = prep.sample(pairs, 50, seed=3)
    assert Counter(p.label for p in taken) == {"entailment": 30, "neutral": 15, "contradiction": 5}
    assert taken == prep.sample(pairs, 50, seed=3)
    assert taken != prep.sample(pairs, 50, seed=4)
    assert prep.sample(pairs, None, seed=3) == pairs


# --- synthetic contradictions ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("claim", "negated"),
    [
        (
            "Pre-mRNAs are more stable than substrates.",
            "Pre-mRNAs are less stable than substrates.",
        ),
        ("Increased IL-6 is seen.", "Decreased IL-6 is seen."),
        ("Folic acid does not affect CKD.", "Folic acid does affect CKD."),
        ("Vitamin C can cure colds.", "Vitamin C cannot cure colds."),
        ("The drug is toxic to mice.", "The drug is not toxic to mice."),
        ("IFI16 causes STING activation.", "IFI16 does not cause STING activation."),
        ("Ly49Q has a role in polarity.", "Ly49Q does not have a role in polarity."),
        ("Stem cells give rise to neurons.", None),
    ],
)
def test_negated_claim_makes_one_edit(claim, negated):
    assert prep.negated_claim(claim) == negated


def test_negated_pairs_contradict_entailed_claims_of_the_chosen_sources_only():
    pairs = [
        prep.Pair(
            "Aspirin lowered fever.",
            "Aspirin lowers fever in more patients.",
            "entailment",
            "scifact",
            "scifact:1",
        ),
        prep.Pair(
            "Aspirin lowered fever.", "Aspirin is a drug.", "neutral", "scifact", "scifact:1"
        ),
        prep.Pair("A man sleeps.", "A man is asleep.", "entailment", "snli", "snli:x"),
    ]
    made = prep.negated_pairs(pairs)
    assert made == [
        prep.Pair(
            "Aspirin lowered fever.",
            "Aspirin lowers fever in less patients.",
            "contradiction",
            "scifact",
            "scifact:1",
        )
    ]


def test_negations_reach_the_training_pairs_only(nli_dir, scifact_dir, tmp_path):
    out = tmp_path / "data"
    prep.prepare(
        nli_dir=nli_dir,
        scifact_dir=scifact_dir,
        out_dir=out,
        kept_apart=0.3,
        dev=0.0,
        seed=5,
        negations=True,
    )
    train = rows_of(out / "train.jsonl")
    # HealthVer's "Masks reduce spread" (Supports) → "Masks increase spread" (a contradiction).
    assert {
        "premise": "Masks, worn well, cut spread.",
        "hypothesis": "Masks increase spread",
        "label": "contradiction",
        "source": "healthver",
        "group": "healthver:" + prep._digest("Masks reduce spread"),
    } in train
    manifest = json.loads((out / "manifest.json").read_text("utf-8"))
    assert manifest["negated_contradictions"]["on"] is True
    made = sum(
        n
        for labels in manifest["negated_contradictions"]["pairs"].values()
        for n in labels.values()
    )
    assert made >= 1
    original = {c["claim"] for c in CLAIMS}
    for name in ("kept_apart_pairs.jsonl", "dev.jsonl"):
        assert {r["hypothesis"] for r in rows_of(out / name)} <= original


# --- prepare() and the command ---------------------------------------------------------------


def test_prepare_writes_parts_that_share_no_claim(nli_dir, scifact_dir, tmp_path):
    out = tmp_path / "data"
    prepared = prep.prepare(
        nli_dir=nli_dir, scifact_dir=scifact_dir, out_dir=out, kept_apart=0.3, dev=0.0, seed=5
    )
    split = json.loads((out / "split.json").read_text("utf-8"))
    assert split == prepared.split
    assert sorted(c for ids in split.values() for c in ids) == [1, 2, 3, 4]
    assert split["kept_apart"], "the fixture's fractions keep at least one group apart"
    assert (1 in split["kept_apart"]) == (2 in split["kept_apart"])  # twins stay together
    kept_claims = {c["claim"] for c in CLAIMS if c["id"] in split["kept_apart"]}
    train = rows_of(out / "train.jsonl")
    assert not kept_claims & {r["hypothesis"] for r in train}
    assert {r["hypothesis"] for r in rows_of(out / "kept_apart_pairs.jsonl")} == kept_claims
    # The kept-apart claims file is lode_eval_gate's input: the original lines, unchanged.
    original = {c["id"]: json.dumps(c) for c in CLAIMS}
    kept_lines = (out / "kept_apart_claims.jsonl").read_text("utf-8").splitlines()
    assert kept_lines == [original[i] for i in sorted(split["kept_apart"])]
    assert {r["source"] for r in train} == {"scifact", "snli", "sick", "climate-fever", "healthver"}
    assert set(Counter(r["label"] for r in train)) == set(prep.LABELS)
    manifest = json.loads((out / "manifest.json").read_text("utf-8"))
    assert "non-commercial" in manifest["licences"]["scifact"]
    assert "non-commercial" in manifest["licences"]["sick"]
    assert "covid-fact" not in manifest["licences"]
    # Same seed, same files.
    again = prep.prepare(
        nli_dir=nli_dir,
        scifact_dir=scifact_dir,
        out_dir=tmp_path / "again",
        kept_apart=0.3,
        dev=0.0,
        seed=5,
    )
    assert again.split == prepared.split
    assert (tmp_path / "again" / "train.jsonl").read_bytes() == (out / "train.jsonl").read_bytes()


def run_command(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    """`python -m training.entailment ARGV` in this process: (exit code, stdout, stderr)."""
    code = entailment_command.main([str(a) for a in argv])
    printed = capsys.readouterr()
    return code, printed.out, printed.err


def test_command_prepares_only_when_asked(nli_dir, scifact_dir, tmp_path, capsys):
    code, out, _ = run_command(
        capsys,
        "--nli", nli_dir, "--scifact", scifact_dir, "--out", tmp_path / "model",
        "--prepare-only", "--kept-apart", "0.3", "--dev", "0.0",
    )  # fmt: skip
    work = tmp_path / "model-data"
    assert code == 0
    assert (work / "train.jsonl").is_file() and (work / "kept_apart_claims.jsonl").is_file()
    assert "SciFact claims: train" in out
    assert not (tmp_path / "model").exists()


def test_command_refuses_a_python_without_torch(nli_dir, scifact_dir, tmp_path, capsys):
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("this Python has torch")
    common = ("--nli", nli_dir, "--scifact", scifact_dir, "--out", tmp_path / "model")
    code, _, err = run_command(capsys, *common, "--python", sys.executable)
    assert code == 2 and re.search(r"lacks torch.*--python", err)
    code, _, err = run_command(capsys, *common)
    assert code == 2 and "--python is required" in err
    assert not (tmp_path / "model-data").exists(), "nothing is prepared before the check"


def test_command_rejects_unknown_sources_and_missing_files(nli_dir, scifact_dir, tmp_path, capsys):
    common = ("--nli", nli_dir, "--scifact", scifact_dir, "--out", tmp_path / "m", "--prepare-only")
    code, _, err = run_command(capsys, *common, "--sources", "snli,mnli")
    assert code == 2 and "unknown source" in err
    code, _, err = run_command(capsys, *common, "--sources", "covid-fact")
    assert code == 2 and "covid-fact does not exist" in err


def test_the_trainer_says_in_its_help_that_it_runs_in_its_own_venv():
    done = subprocess.run(
        [sys.executable, str(TRAINER_SCRIPT), "--help"], capture_output=True, text=True, check=True
    )
    assert "It runs in its own venv, not lode's" in done.stdout
    assert "TRAIN_VENV/bin/python training/train_entailment.py" in done.stdout


# --- the trainer's torch-free helpers --------------------------------------------------------


def test_trainer_labels_put_entailment_in_column_zero():
    assert trainer.LABELS == prep.LABELS and trainer.LABELS[0] == "entailment"


def test_measure_reports_what_the_gate_would_accept():
    rows = [
        {"premise": "p", "hypothesis": "h", "label": "entailment"},
        {"premise": "p", "hypothesis": "h", "label": "entailment"},
        {"premise": "p", "hypothesis": "h", "label": "contradiction"},
    ]
    # P(entailment) = softmax[0]: ~0.98, ~0.58, ~0.02.
    logits = [[4.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 4.0]]
    report = trainer.measure(rows, logits, threshold=0.9)
    assert report["accuracy"] == 1.0
    assert report["accepted_above_threshold"]["entailment"] == {"n": 2, "accepted": 1, "rate": 0.5}
    assert report["accepted_above_threshold"]["contradiction"]["accepted"] == 0
    assert report["confusion"]["contradiction"] == {"contradiction": 1}


def test_length_buckets_cover_every_row_once_in_a_seeded_order():
    rows = [{"premise": "x" * (i % 17), "hypothesis": "y"} for i in range(203)]
    batches = trainer.length_buckets(rows, 8, seed=1)
    assert sorted(i for batch in batches for i in batch) == list(range(203))
    assert all(len(batch) <= 8 for batch in batches)
    assert batches == trainer.length_buckets(rows, 8, seed=1)
    assert batches != trainer.length_buckets(rows, 8, seed=2)


# --- end to end, with torch ------------------------------------------------------------------


def training_python() -> str | None:
    if os.environ.get("LODE_TRAIN_PYTHON"):
        return os.environ["LODE_TRAIN_PYTHON"]
    return sys.executable if importlib.util.find_spec("torch") is not None else None


@pytest.mark.slow
@pytest.mark.skipif(
    training_python() is None, reason="no Python with torch (set LODE_TRAIN_PYTHON)"
)
def test_train_export_and_load_through_the_seam(nli_dir, scifact_dir, tmp_path, settings, capsys):
    """A few steps on the fixtures: the folder has the seam's layout, loads through fastembed,
    scores the trainer's probes identically, and records data, seed and licences."""
    from retrieval.answer import entailment

    out = tmp_path / "model"
    code, printed, _ = run_command(
        capsys,
        "--nli", nli_dir, "--scifact", scifact_dir, "--out", out,
        "--python", training_python(), "--kept-apart", "0.3", "--dev", "0.0",
        "--max-pairs", "8", "--batch-size", "4",
    )  # fmt: skip
    assert code == 0
    assert (out / "onnx" / "model.onnx").is_file() and (out / "tokenizer.json").is_file()
    assert "probe pairs agree" in printed
    card = json.loads((out / "lode_model.json").read_text("utf-8"))
    assert card["training"]["seed"] == 13 and card["training"]["pairs"] == 8
    assert card["onnx"]["max_diff_padded_vs_single"] < 1e-3
    assert "non-commercial" in card["licences"]["scifact"]
    settings.LODE_ENTAILMENT = "cross-encoder"
    settings.LODE_ENTAILMENT_MODEL_DIR = str(out)
    entailment._cross_encoder.cache_clear()
    try:
        scorer = entailment.get_entailment_scorer()
        assert scorer is not None
        score = scorer.score("Aspirin lowered fever.", "Aspirin lowers fever.")
        assert 0.0 < score < 1.0
    finally:
        entailment._cross_encoder.cache_clear()
