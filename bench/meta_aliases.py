"""Benchmark: does alias query expansion keep (or lift) recall@5 on the notes corpora?

    .venv/bin/python bench/meta_aliases.py                       # notes, lab, cafe
    .venv/bin/python bench/meta_aliases.py --parts notes --modes lexical

Each corpus (`answer_quality.CORPORA`: its folder and answerable question sets) is loaded as
notes of one user into a fresh temporary data folder on SQLite (a child process per corpus:
a Django process has one data folder) and embedded with the bundled model when a mode needs
vectors. Then every answerable question is searched twice per mode, with the alias
expansion of `retrieval.search.pipeline.with_aliases` off (*before*) and on (*after*), and
recall@5 is counted the way answer_quality.py counts it: a top-5 hit whose passage overlaps
the question's answer text in its file. Also printed: the aliases mined from the corpus and
how many questions an alias expanded, and the median milliseconds a search took each way.
*Probes*: each side of each mined alias searched alone, found when a top-5 hit holds the other
side and not the side typed (what only the expansion can find), before → after.
Writes bench/out/meta_aliases.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT
from answer_quality import (
    CORPORA,
    QUESTIONS,
    RECALL_K,
    answer_range,
    load_notes_corpus,
    overlaps,
    read_jsonl,
    setup_django,
)

OUT = ROOT / "bench" / "out"
MODES = {"lexical": ("lexical", "off"), "hybrid": ("hybrid", "off")}


def corpus_figures(part: str, modes: list[str]) -> dict[str, Any]:
    corpus = CORPORA[part]
    setup_django(tempfile.mkdtemp(prefix=f"lode-meta-{part}-"))
    from django.core.management import call_command

    from notes.management.commands.lode_import_markdown import ensure_user
    from retrieval.eligibility import audience_for
    from retrieval.meta.aliases import alias_expansions
    from retrieval.models import DocumentAlias, Passage
    from retrieval.query import parse
    from retrieval.search import pipeline

    call_command("migrate", verbosity=0)
    user = ensure_user(part)
    docs = load_notes_corpus(corpus, user)
    if any(MODES[mode][0] != "lexical" for mode in modes):
        call_command("lode_embed_pending", verbosity=0)
    rows = [row for name in corpus.answerable for row in read_jsonl(QUESTIONS / f"{name}.jsonl")]
    for row in rows:
        row["doc"] = docs[row["file"]]
        row["range"] = answer_range(row["doc"], row["answer"])
    audience = audience_for(user.pk)
    expanded = []
    for row in rows:
        parsed = parse(row["question"])
        words = [token for term in (*parsed.terms, *parsed.phrases) for token in term]
        found = alias_expansions(audience, words)
        if found:
            expanded.append({"question": row["question"], "added": [f.phrase for f in found]})

    def recall(mode: str, rerank: str) -> tuple[float, float]:
        """Recall@5 and the median milliseconds a search."""
        hits = 0
        times = []
        for row in rows:
            started = time.perf_counter()
            result = pipeline.search(
                user=user,
                query=row["question"],
                mode=mode,
                rerank=rerank,
                limit=RECALL_K,
                highlight=False,
            )
            times.append((time.perf_counter() - started) * 1000)
            hits += any(
                h.passage.document_id == row["doc"]
                and row["range"] is not None
                and overlaps((h.passage.start, h.passage.end), row["range"])
                for h in result.hits[:RECALL_K]
            )
        return (round(hits / len(rows), 4) if rows else 0.0), round(statistics.median(times), 2)

    figures: dict[str, Any] = {}
    with_aliases = pipeline.with_aliases
    for label in modes:
        mode, rerank = MODES[label]
        pipeline.with_aliases = lambda parsed, audience, result: parsed  # expansion off
        before, before_ms = recall(mode, rerank)
        pipeline.with_aliases = with_aliases
        after, after_ms = recall(mode, rerank)
        figures[label] = {"before": before, "after": after, "ms": [before_ms, after_ms]}

    # Probes: each side of each mined alias searched alone; a probe is found when a top-5 hit
    # holds the *other* side and not the side typed (what only the expansion can find).
    probes = []
    for short, long in set(DocumentAlias.objects.values_list("short", "long")):
        for typed, other in ((short, long), (long, short)):
            targets = {
                pk
                for pk, text in Passage.objects.filter(is_head=True).values_list("pk", "text")
                if other.casefold() in text.casefold() and typed.casefold() not in text.casefold()
            }
            if targets:
                probes.append((typed, targets))

    def probe_recall(mode: str, rerank: str) -> float:
        found = 0
        for typed, targets in probes:
            result = pipeline.search(
                user=user, query=typed, mode=mode, rerank=rerank, limit=RECALL_K, highlight=False
            )
            found += any(h.passage.pk in targets for h in result.hits[:RECALL_K])
        return round(found / len(probes), 4) if probes else 0.0

    for label in modes:
        mode, rerank = MODES[label]
        pipeline.with_aliases = lambda parsed, audience, result: parsed  # expansion off
        before = probe_recall(mode, rerank)
        pipeline.with_aliases = with_aliases
        figures[label]["probes"] = {"count": len(probes), "before": before}
        figures[label]["probes"]["after"] = probe_recall(mode, rerank)
    return {
        "part": part,
        "documents": len(docs),
        "questions": len(rows),
        "aliases": list(
            DocumentAlias.objects.order_by("pk").values_list("short", "long").distinct()
        ),
        "questions_expanded": expanded,
        "recall_at_5": figures,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--parts", nargs="*", default=list(CORPORA))
    parser.add_argument("--modes", nargs="*", default=list(MODES), choices=list(MODES))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(corpus_figures(args.child, args.modes)))
        return 0
    results = []
    for part in args.parts:
        command = [sys.executable, __file__, "--child", part, "--modes", *args.modes]
        done = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(
        f"{'corpus':<8}{'docs':>6}{'qs':>5}{'aliases':>9}{'expanded':>10}  recall@5 before → after"
    )
    for r in results:
        cells = "  ".join(
            f"{mode} {f['before']:.4f} → {f['after']:.4f} (median {f['ms'][0]} → {f['ms'][1]} ms;"
            f" {f['probes']['count']} probes {f['probes']['before']:.2f} → "
            f"{f['probes']['after']:.2f})"
            for mode, f in r["recall_at_5"].items()
        )
        print(
            f"{r['part']:<8}{r['documents']:>6}{r['questions']:>5}{len(r['aliases']):>9}"
            f"{len(r['questions_expanded']):>10}  {cells}"
        )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "meta_aliases.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
