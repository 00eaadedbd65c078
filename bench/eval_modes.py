"""Retrieval quality of every search mode on SciFact train, through the real pipeline.

    .venv/bin/python bench/eval_modes.py --data-dir var/fit [--modes lexical semantic ...]

`--data-dir` must hold SciFact loaded and embedded for user `eval` (`manage.py
lode_load_beir ../shared/data/scifact`, then `manage.py lode_embed_pending`). Runs
`manage.py lode_eval` once per mode (the same `search()` the page uses: chunked passages,
eligibility filters, fusion, rerank) and once with `--ann-check`, prints a table and writes
bench/out/eval_modes.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = Path(os.environ.get("LODE_BENCH_SCIFACT", ROOT.parent / "shared" / "data" / "scifact"))
OUT = ROOT / "bench" / "out"
MODES = ("lexical", "semantic", "hybrid", "hybrid+rerank")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--modes", nargs="*", default=list(MODES))
    args = parser.parse_args()
    env = dict(
        os.environ, LODE_DATA_DIR=str(Path(args.data_dir).resolve()), OPENBLAS_NUM_THREADS="1"
    )
    env.pop("DATABASE_URL", None)
    OUT.mkdir(parents=True, exist_ok=True)
    results = {}
    for mode in args.modes:
        target = OUT / f"eval_{mode.replace('+', '_')}.json"
        command = [
            sys.executable,
            "manage.py",
            "lode_eval",
            "--corpus-dir",
            str(SCIFACT),
            "--queries",
            str(SCIFACT / "queries.jsonl"),
            "--qrels",
            str(SCIFACT / "qrels" / "train.tsv"),
            "--mode",
            mode,
            "--json",
            str(target),
            "--no-progress",
        ]
        if mode == "semantic":
            command.append("--ann-check")
        subprocess.run(command, cwd=ROOT, env=env, check=True)
        results[mode] = json.loads(target.read_text())
    print(f"{'mode':<15}{'nDCG@10':>9}{'R@100':>8}{'MRR@10':>8}{'p50 ms':>9}{'p95 ms':>9}")
    for mode, r in results.items():
        print(
            f"{mode:<15}{r['ndcg@10']:>9.4f}{r['recall@100']:>8.4f}{r['mrr@10']:>8.4f}"
            f"{r['latency_ms']['p50']:>9.1f}{r['latency_ms']['p95']:>9.1f}"
        )
    if "semantic" in results and "ann_check" in results["semantic"]:
        print("ANN check:", json.dumps(results["semantic"]["ann_check"]))
    (OUT / "eval_modes.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
