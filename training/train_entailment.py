"""Fine-tune a small entailment cross-encoder and export it as a folder lode's entailment seam
loads (`LODE_ENTAILMENT=cross-encoder`, `LODE_ENTAILMENT_MODEL_DIR=<out>`).

It runs in its own venv, not lode's: a standalone script (no Django, no lode import) that
needs torch, transformers, safetensors, onnx and onnxruntime, which lode's venv does not carry
(PyPI's torch for lode's Python is a multi-gigabyte CUDA build). Run it with that venv's
python:

    python3 -m venv TRAIN_VENV
    TRAIN_VENV/bin/pip install torch transformers safetensors onnx onnxruntime
    HF_HUB_OFFLINE=1 TRAIN_VENV/bin/python training/train_entailment.py \\
        --train DATA/train.jsonl --dev DATA/dev.jsonl \\
        --report kept_apart=DATA/kept_apart_pairs.jsonl \\
        --base-model <all-MiniLM-L6-v2 folder> --out var/entailment-model

`python -m training.entailment --python TRAIN_VENV/bin/python …` (in lode's venv) prepares
DATA (`prepare_entailment.py`), runs this under the given python, and checks that lode loads
the folder it wrote.

The model: BertForSequenceClassification over the base weights with a three-way head, class 0
= entailment, 1 = neutral, 2 = contradiction, trained on (premise = evidence, hypothesis =
claim) pairs. The exported ONNX graph has ONE output column, the log-odds of entailment
against the other two classes, `l0 - logsumexp(l1, l2)`: fastembed's `TextCrossEncoder` reads
column 0 and lode squashes it with a sigmoid, so the gate's score is exactly the model's
P(entailment) — a raw three-way head read through column 0 would be uncalibrated, and a
two-class (entailment vs rest) head would lose what contradiction teaches.

Padding: the graph is traced on a padded batch with the eager attention path, so the mask is
part of the graph, and the export is checked: a padded batch and the same pairs one at a time
must give the same logits in onnxruntime, and match torch. Deterministic for a given seed,
data and thread count. Nothing is downloaded: the base model is a local folder, and
HF_HUB_OFFLINE=1 is set before transformers is imported.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

LABELS = ("entailment", "neutral", "contradiction")  # class ids; 0 must stay entailment
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)
ONNX_OPSET = 17
PARITY_TOLERANCE = 1e-3  # max |logit| difference allowed between padded and unpadded runs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    paragraphs = __doc__.split("\n\n")
    parser = argparse.ArgumentParser(
        description="\n\n".join(paragraphs[:3]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--train", type=Path, required=True, help="training pairs (JSONL)")
    parser.add_argument("--dev", type=Path, default=None, help="pairs reported as 'dev'")
    parser.add_argument(
        "--report",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="more pair files to measure after training (only measured, never used to decide)",
    )
    parser.add_argument("--base-model", type=Path, required=True, help="local BERT folder")
    parser.add_argument("--out", type=Path, required=True, help="the model folder to write")
    parser.add_argument("--manifest", type=Path, default=None, help="data manifest to embed")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--max-pairs", type=int, default=None, help="first N training pairs")
    parser.add_argument("--max-len", type=int, default=128, help="training truncation")
    parser.add_argument(
        "--export-max-len", type=int, default=256, help="model_max_length written for inference"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=8e-5)
    parser.add_argument("--warmup", type=float, default=0.06, help="share of steps")
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument(
        "--train-word-embeddings",
        action="store_true",
        help="also update the word embeddings (off: they are half the weights, and AdamW "
        "would rewrite every row each step for little gain on CPU)",
    )
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument(
        "--max-minutes", type=float, default=None, help="stop training after this (then export)"
    )
    parser.add_argument(
        "--gate-threshold",
        type=float,
        default=0.9,
        help="lode's ENTAILMENT_THRESHOLD: accept rates are reported at it",
    )
    return parser.parse_args(argv)


def read_pairs(path: Path) -> list[dict[str, str]]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                row = json.loads(line)
                if row.get("label") not in LABELS:
                    raise SystemExit(f"{path}:{number}: label must be one of {LABELS}")
                rows.append(row)
    return rows


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)


def encode(tokenizer: Any, rows: list[dict[str, str]], max_len: int) -> dict[str, Any]:
    """A batch in pair order (premise = evidence first), padded to its longest pair."""
    return tokenizer(
        [r["premise"] for r in rows],
        [r["hypothesis"] for r in rows],
        truncation=True,
        max_length=max_len,
        padding=True,
        return_tensors="pt",
    )


def entailment_log_odds(logits: Any) -> Any:
    """log P(entailment) - log P(not entailment), per row, from three-way logits."""
    import torch

    return logits[:, 0] - torch.logsumexp(logits[:, 1:], dim=1)


def length_buckets(rows: list[dict[str, str]], batch_size: int, seed: int) -> list[list[int]]:
    """Batches of row indexes in a seeded order, each of pairs of similar length: rows are
    shuffled, cut into windows of 50 batches, sorted by length inside a window, cut into
    batches, and the batches shuffled. Padding to the longest pair of a batch then costs little
    (CPU time is the budget here) while the order stays random across lengths."""
    rng = random.Random(seed)
    order = list(range(len(rows)))
    rng.shuffle(order)
    window = batch_size * 50
    batches: list[list[int]] = []
    for start in range(0, len(order), window):
        chunk = sorted(
            order[start : start + window],
            key=lambda i: len(rows[i]["premise"]) + len(rows[i]["hypothesis"]),
        )
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def train(
    args: argparse.Namespace, model: Any, tokenizer: Any, rows: list[dict[str, str]]
) -> dict[str, Any]:
    import torch
    from transformers import get_linear_schedule_with_warmup

    steps_per_epoch = math.ceil(len(rows) / args.batch_size)
    total_steps = max(1, math.ceil(steps_per_epoch * args.epochs))
    if not args.train_word_embeddings:
        model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {
            "params": [
                p
                for n, p in model.named_parameters()
                if p.requires_grad and not n.endswith(no_decay)
            ],
            "weight_decay": args.weight_decay,
        },
        {
            "params": [
                p for n, p in model.named_parameters() if p.requires_grad and n.endswith(no_decay)
            ],
            "weight_decay": 0.0,
        },
    ]
    optimiser = torch.optim.AdamW(groups, lr=args.lr)
    schedule = get_linear_schedule_with_warmup(
        optimiser, int(total_steps * args.warmup), total_steps
    )
    label_id = {label: i for i, label in enumerate(LABELS)}
    started = time.monotonic()
    deadline = started + args.max_minutes * 60 if args.max_minutes else None
    step, losses, stopped_early = 0, [], False
    model.train()
    epoch = 0
    while step < total_steps and not stopped_early:
        for batch_indexes in length_buckets(rows, args.batch_size, args.seed + epoch):
            if step >= total_steps:
                break
            if deadline and time.monotonic() > deadline:
                stopped_early = True
                break
            batch_rows = [rows[i] for i in batch_indexes]
            batch = encode(tokenizer, batch_rows, args.max_len)
            labels = torch.tensor([label_id[r["label"]] for r in batch_rows])
            loss = torch.nn.functional.cross_entropy(model(**batch).logits, labels)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
            losses.append(loss.item())
            step += 1
            if step % 50 == 0 or step == total_steps:
                elapsed = time.monotonic() - started
                recent = sum(losses[-50:]) / len(losses[-50:])
                print(
                    f"step {step}/{total_steps}  loss {recent:.4f}  "
                    f"{step * args.batch_size / elapsed:.1f} pairs/s  {elapsed / 60:.1f} min",
                    flush=True,
                )
        epoch += 1
    model.eval()
    return {
        "steps": step,
        "planned_steps": total_steps,
        "pairs_seen": min(step * args.batch_size, len(rows) * max(1, epoch)),
        "stopped_early": stopped_early,
        "seconds": round(time.monotonic() - started, 1),
        "final_loss": round(sum(losses[-50:]) / max(1, len(losses[-50:])), 4),
    }


def predict(
    model: Any, tokenizer: Any, rows: list[dict[str, str]], max_len: int
) -> list[list[float]]:
    """Three-way logits for each pair, in order."""
    import torch

    out: list[list[float]] = []
    with torch.no_grad():
        for start in range(0, len(rows), 64):
            batch = encode(tokenizer, rows[start : start + 64], max_len)
            out.extend(model(**batch).logits.tolist())
    return out


def measure(
    rows: list[dict[str, str]], logits: list[list[float]], threshold: float
) -> dict[str, Any]:
    """Three-way accuracy, the confusion matrix, and per gold label the share whose
    P(entailment) is above the gate's threshold (what the gate would accept)."""
    confusion: dict[str, Counter[str]] = {label: Counter() for label in LABELS}
    accepted: Counter[str] = Counter()
    for row, logit in zip(rows, logits, strict=True):
        predicted = LABELS[max(range(3), key=lambda i: logit[i])]
        confusion[row["label"]][predicted] += 1
        top = max(logit)
        log_sum = top + math.log(sum(math.exp(v - top) for v in logit))
        if math.exp(logit[0] - log_sum) > threshold:
            accepted[row["label"]] += 1
    totals = {label: sum(c.values()) for label, c in confusion.items()}
    correct = sum(confusion[label][label] for label in LABELS)
    return {
        "pairs": len(rows),
        "accuracy": round(correct / len(rows), 4) if rows else None,
        "confusion": {label: dict(confusion[label]) for label in LABELS if totals[label]},
        "accepted_above_threshold": {
            label: {
                "n": totals[label],
                "accepted": accepted[label],
                "rate": round(accepted[label] / totals[label], 4),
            }
            for label in LABELS
            if totals[label]
        },
    }


class LogOddsHead:
    """Factory for the export wrapper (a torch Module built lazily, so importing this script
    does not need torch)."""

    @staticmethod
    def wrap(model: Any) -> Any:
        import torch

        class Wrapper(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                logits = self.inner(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    token_type_ids=token_type_ids,
                ).logits
                return entailment_log_odds(logits).unsqueeze(1)  # [batch, 1]: column 0

        return Wrapper(model).eval()


def export_onnx(model: Any, tokenizer: Any, path: Path, max_len: int) -> None:
    """Trace on a *padded* batch (two pairs of different lengths), so the attention mask is in
    the graph rather than folded away as "no padding"; batch and sequence axes dynamic."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    sample = encode(
        tokenizer,
        [
            {"premise": "A short premise.", "hypothesis": "Short."},
            {
                "premise": "A considerably longer premise sentence, so that the first pair of "
                "this tracing batch needs padding tokens after it.",
                "hypothesis": "The second hypothesis is longer too.",
            },
        ],
        max_len,
    )
    assert int(sample["attention_mask"].min()) == 0, "the tracing batch must contain padding"
    wrapper = LogOddsHead.wrap(model)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with torch.no_grad():
        torch.onnx.export(
            wrapper,
            tuple(sample[name] for name in names),
            str(path),
            input_names=names,
            output_names=["logits"],
            dynamic_axes={
                **{name: {0: "batch", 1: "sequence"} for name in names},
                "logits": {0: "batch"},
            },
            opset_version=ONNX_OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def onnx_parity(
    path: Path, model: Any, tokenizer: Any, rows: list[dict[str, str]], max_len: int
) -> dict[str, Any]:
    """Run the exported graph on `rows` as one padded batch and one at a time, and torch on
    the batch: the largest differences, which must be tiny for a padding-safe export."""
    import numpy as np
    import onnxruntime
    import torch

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def run(batch: Any) -> Any:
        feeds = {
            name: batch[name].numpy().astype(np.int64)
            for name in ("input_ids", "attention_mask", "token_type_ids")
        }
        return session.run(None, feeds)[0][:, 0]

    padded = run(encode(tokenizer, rows, max_len))
    single = np.array([run(encode(tokenizer, [row], max_len))[0] for row in rows])
    with torch.no_grad():
        reference = entailment_log_odds(model(**encode(tokenizer, rows, max_len)).logits).numpy()
    return {
        "pairs": len(rows),
        "max_diff_padded_vs_single": float(np.abs(padded - single).max()),
        "max_diff_onnx_vs_torch": float(np.abs(padded - reference).max()),
        "logits": [float(v) for v in padded],
    }


def write_folder(args: argparse.Namespace, model: Any) -> None:
    """Tokenizer files copied from the base folder (model_max_length set for inference), the
    model's config, and (by export_onnx) onnx/model.onnx: fastembed's cross-encoder layout."""
    args.out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        source = args.base_model / name
        if source.is_file():
            shutil.copyfile(source, args.out / name)
    config_path = args.out / "tokenizer_config.json"
    config = json.loads(config_path.read_text("utf-8"))
    config["model_max_length"] = args.export_max_len
    config_path.write_text(json.dumps(config, indent=2) + "\n", "utf-8")
    model.config.to_json_file(str(args.out / "config.json"))


def check_pairs(rows: list[dict[str, str]], count: int) -> list[dict[str, str]]:
    """A few pairs of each label, of varied lengths, for the parity check and for lode to
    re-score after loading the folder."""
    by_label: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_label.setdefault(row["label"], []).append(row)
    picked: list[dict[str, str]] = []
    for label in LABELS:
        group = sorted(by_label.get(label, []), key=lambda r: len(r["premise"]))
        if group:
            step = max(1, len(group) // count)
            picked.extend(group[::step][:count])
    return picked


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import torch
        from transformers import AutoTokenizer, BertForSequenceClassification
    except ImportError as exc:
        print(f"this Python lacks what training needs ({exc}); see the docstring", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    train_rows = read_pairs(args.train)[: args.max_pairs]
    dev_rows = read_pairs(args.dev) if args.dev else []
    reports: dict[str, list[dict[str, str]]] = {}
    for item in args.report:
        name, _, file = item.partition("=")
        if not file:
            raise SystemExit(f"--report takes NAME=FILE, not {item!r}")
        reports[name] = read_pairs(Path(file))
    print(f"training pairs: {len(train_rows)} {dict(Counter(r['label'] for r in train_rows))}")

    tokenizer = AutoTokenizer.from_pretrained(str(args.base_model))
    model = BertForSequenceClassification.from_pretrained(
        str(args.base_model),
        num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)),
        label2id={label: i for i, label in enumerate(LABELS)},
        attn_implementation="eager",  # traces the mask into the graph (see export_onnx)
    )
    training = train(args, model, tokenizer, train_rows)
    print(f"trained: {training}", flush=True)

    metrics: dict[str, Any] = {}
    for name, rows in (("dev", dev_rows), *reports.items()):
        if rows:
            metrics[name] = measure(
                rows, predict(model, tokenizer, rows, args.export_max_len), args.gate_threshold
            )
            print(f"{name}: {json.dumps(metrics[name])}", flush=True)

    write_folder(args, model)
    onnx_path = args.out / "onnx" / "model.onnx"
    export_onnx(model, tokenizer, onnx_path, args.max_len)
    probes = check_pairs(dev_rows or train_rows, 4)
    parity = onnx_parity(onnx_path, model, tokenizer, probes, args.export_max_len)
    print(
        f"onnx parity: padded vs single {parity['max_diff_padded_vs_single']:.2e}, "
        f"onnx vs torch {parity['max_diff_onnx_vs_torch']:.2e}",
        flush=True,
    )
    manifest = json.loads(args.manifest.read_text("utf-8")) if args.manifest else {}
    card = {
        "kind": "lode entailment cross-encoder",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "output": "one logit (column 0): log-odds of entailment against neutral or "
        "contradiction; its sigmoid is P(entailment)",
        "pair_order": "premise = evidence (the cited spans joined with a space), "
        "hypothesis = claim",
        "labels": list(LABELS),
        "base_model": {
            "path": str(args.base_model),
            "name": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0)",
        },
        "training": {
            "seed": args.seed,
            "epochs": args.epochs,
            "max_pairs": args.max_pairs,
            "pairs": len(train_rows),
            "max_len": args.max_len,
            "export_max_len": args.export_max_len,
            "batch_size": args.batch_size,
            "lr": args.lr,
            "warmup": args.warmup,
            "weight_decay": args.weight_decay,
            "threads": args.threads,
            "train_word_embeddings": args.train_word_embeddings,
            "torch": torch.__version__,
            **training,
        },
        "gate_threshold": args.gate_threshold,
        "metrics": metrics,
        "onnx": {
            "opset": ONNX_OPSET,
            "max_diff_padded_vs_single": parity["max_diff_padded_vs_single"],
            "max_diff_onnx_vs_torch": parity["max_diff_onnx_vs_torch"],
        },
        # lode re-scores these after loading the folder through fastembed and compares.
        "check_pairs": [
            {
                "premise": r["premise"],
                "hypothesis": r["hypothesis"],
                "label": r["label"],
                "logit": v,
            }
            for r, v in zip(probes, parity["logits"], strict=True)
        ],
        "data": manifest,
        "licences": manifest.get("licences", {}),
        "use": "The weights derive from the training data: where any set is non-commercial "
        "(SciFact CC BY-NC 2.0, SICK CC BY-NC-SA 3.0) or unlicensed (CLIMATE-FEVER, "
        "HealthVer, COVID-Fact), treat the model as research-only and do not distribute or "
        "use it commercially without checking those terms.",
    }
    (args.out / "lode_model.json").write_text(
        json.dumps(card, indent=2, ensure_ascii=False) + "\n", "utf-8"
    )
    worst = max(parity["max_diff_padded_vs_single"], parity["max_diff_onnx_vs_torch"])
    if worst > PARITY_TOLERANCE:
        print(f"onnx export is not padding-safe (diff {worst:.2e})", file=sys.stderr)
        return 1
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
