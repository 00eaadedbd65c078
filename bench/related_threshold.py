"""Benchmark: choose the `related` edge threshold (LODE_RELATED_THRESHOLD) on the linked corpus.

    .venv/bin/python bench/related_threshold.py [--db sqlite|postgres] [--negatives 4] [--seed 16]

In a fresh database (`_common.fresh_environment`; PostgreSQL: the scratch database
`bench_rel`), in one process:

1. import `bench/data/linked_corpus/` with `lode_import_markdown` (edges are derived on save);
2. embed every head passage with the real model through `sync_vectors` (related edges off);
3. score document pairs exactly as `retrieval/index/related.py` does: the cosine of the two
   documents' normalised mean passage vectors, read back from Chroma;
4. positives: pairs joined by a declared, resolved `links_to` edge (either direction);
   negatives: `--negatives` random pairs per positive that no declared edge joins in
   either direction (a seeded sample); pairs are split 60/40 into tune and holdout;
5. precision, recall and F0.5 per threshold on tune (precision weighted: a related edge is
   shown to people, an inferred one, so a wrong one costs more than a missed one); the
   chosen T is the threshold with the best tune F0.5, then reported on holdout;
6. with T in force, `refresh_related` over every document (≤ 5 per document, same space),
   and what share of the edges it writes join documents that a declared edge joins (1 hop)
   or that are two declared hops apart.

Linked pairs are a proxy for "related": two notes can be about the same thing without a link
(a negative that is really a positive lowers measured precision), so the figures are a
floor. Writes `bench/out/related_threshold_<db>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, fresh_environment

OUT = ROOT / "bench" / "out"
CORPUS = ROOT / "bench" / "data" / "linked_corpus"
THRESHOLDS = [round(0.20 + 0.025 * i, 3) for i in range(29)]  # 0.20 … 0.90


def _metrics(pairs: list[tuple[float, bool]], threshold: float) -> dict[str, float]:
    tp = sum(1 for score, positive in pairs if positive and score >= threshold)
    fp = sum(1 for score, positive in pairs if not positive and score >= threshold)
    fn = sum(1 for score, positive in pairs if positive and score < threshold)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    beta2 = 0.25
    f05 = (
        (1 + beta2) * precision * recall / (beta2 * precision + recall)
        if precision + recall
        else 0.0
    )
    return {
        "threshold": threshold,
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f0_5": round(f05, 4),
        "tp": tp,
        "fp": fp,
        "fn": fn,
    }


def run(db: str, negatives: int, seed: int) -> dict:
    with fresh_environment(db, pg_name="bench_rel") as env:
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
        import django

        django.setup()
        import numpy as np
        from django.core.management import call_command

        from notes.models import Document
        from retrieval.index import related
        from retrieval.index.embeddings import get_embedder
        from retrieval.index.sync import sync_vectors
        from retrieval.index.vectors import get_vector_store
        from retrieval.models import Edge

        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        call_command("lode_import_markdown", str(CORPUS), user="bench", no_progress=True)
        import_s = time.perf_counter() - started
        embedder = get_embedder()
        started = time.perf_counter()
        sync = sync_vectors(None, embedder=embedder, related=False)
        embed_s = time.perf_counter() - started

        store = get_vector_store()
        heads = related._head_passages_by_document(
            Document.objects.filter(deleted_at__isnull=True).values_list("pk", flat=True)
        )
        vectors = related.document_vectors(store, heads)
        ids = sorted(vectors)
        linked = {
            tuple(sorted(pair))
            for pair in Edge.objects.filter(
                kind=Edge.Kind.LINKS_TO,
                resolution=Edge.Resolution.RESOLVED,
                from_document__isnull=False,
                to_document__isnull=False,
            ).values_list("from_document_id", "to_document_id")
            if pair[0] != pair[1] and pair[0] in vectors and pair[1] in vectors
        }
        rng = random.Random(seed)
        wanted = negatives * len(linked)
        unlinked: set[tuple[int, int]] = set()
        while len(unlinked) < wanted:
            a, b = rng.sample(ids, 2)
            pair = (min(a, b), max(a, b))
            if pair not in linked:
                unlinked.add(pair)

        def score(pair: tuple[int, int]) -> float:
            return float(np.dot(vectors[pair[0]], vectors[pair[1]]))

        labelled = [(score(p), True) for p in sorted(linked)]
        labelled += [(score(p), False) for p in sorted(unlinked)]
        rng.shuffle(labelled)
        cut = int(len(labelled) * 0.6)
        tune, holdout = labelled[:cut], labelled[cut:]
        curve = [_metrics(tune, t) for t in THRESHOLDS]
        best = max(curve, key=lambda row: (row["f0_5"], row["threshold"]))
        chosen = best["threshold"]
        held = _metrics(holdout, chosen)

        # The real thing with the chosen threshold: edges written, and how many of them
        # join documents the declared graph joins within one or two hops.
        neighbours: dict[int, set[int]] = {}
        for a, b in linked:
            neighbours.setdefault(a, set()).add(b)
            neighbours.setdefault(b, set()).add(a)
        started = time.perf_counter()
        report = related.refresh_related(ids, store=store, threshold=chosen)
        refresh_s = time.perf_counter() - started
        written = list(
            Edge.objects.filter(kind=Edge.Kind.RELATED).values_list(
                "from_document_id", "to_document_id"
            )
        )
        one_hop = sum(1 for a, b in written if b in neighbours.get(a, set()))
        two_hop = sum(
            1
            for a, b in written
            if b not in neighbours.get(a, set())
            and any(b in neighbours.get(n, set()) for n in neighbours.get(a, set()))
        )
        # What the written edges would be at other thresholds (top 5 per document above T,
        # computed in memory from the same vectors): how many, and how many join documents
        # the declared graph joins within one or two hops.
        matrix = np.stack([vectors[i] for i in ids])
        sims = matrix @ matrix.T
        np.fill_diagonal(sims, -1.0)
        written_view = []
        for t in (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7):
            pairs = []
            for row, a in enumerate(ids):
                order = np.argsort(-sims[row])[:5]
                pairs += [(a, ids[col]) for col in order if sims[row, col] >= t]
            near = sum(1 for a, b in pairs if b in neighbours.get(a, set()))
            near2 = sum(
                1
                for a, b in pairs
                if b in neighbours.get(a, set())
                or any(b in neighbours.get(n, set()) for n in neighbours.get(a, set()))
            )
            written_view.append(
                {
                    "threshold": t,
                    "edges": len(pairs),
                    "documents_with_edges": len({a for a, _ in pairs}),
                    "share_declared_neighbours": round(near / max(1, len(pairs)), 4),
                    "share_within_two_hops": round(near2 / max(1, len(pairs)), 4),
                }
            )
        pos = [s for s, p in labelled if p]
        neg = [s for s, p in labelled if not p]
        return {
            "db": db,
            "corpus": str(CORPUS.relative_to(ROOT)),
            "documents": len(ids),
            "head_passages": sync.pending,
            "import_s": round(import_s, 2),
            "embed_s": round(embed_s, 2),
            "positives": len(linked),
            "negatives": len(unlinked),
            "tune_pairs": len(tune),
            "holdout_pairs": len(holdout),
            "score_positive_mean": round(float(np.mean(pos)), 4),
            "score_negative_mean": round(float(np.mean(neg)), 4),
            "curve_tune": curve,
            "chosen_threshold": chosen,
            "holdout_at_chosen": held,
            "written_edges_by_threshold": written_view,
            "refresh": {
                "documents": report.documents,
                "edges": report.edges,
                "skipped": report.skipped,
                "seconds": round(refresh_s, 2),
                "ms_per_document": round(1000 * refresh_s / max(1, len(ids)), 2),
                "edges_joining_declared_neighbours": one_hop,
                "edges_joining_two_hop_neighbours": two_hop,
                "share_within_two_hops": round((one_hop + two_hop) / max(1, len(written)), 4),
            },
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--negatives", type=int, default=4, help="negatives per positive")
    parser.add_argument("--seed", type=int, default=16)
    args = parser.parse_args()
    result = run(args.db, args.negatives, args.seed)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"related_threshold_{args.db}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{result['documents']} documents, {result['positives']} linked pairs, "
        f"{result['negatives']} unlinked pairs; mean cosine linked "
        f"{result['score_positive_mean']}, unlinked {result['score_negative_mean']}"
    )
    print("tune:  threshold  precision  recall  F0.5")
    for row in result["curve_tune"]:
        print(
            f"       {row['threshold']:.3f}      {row['precision']:.3f}     "
            f"{row['recall']:.3f}   {row['f0_5']:.3f}"
        )
    held = result["holdout_at_chosen"]
    print(
        f"chosen T = {result['chosen_threshold']} (best tune F0.5); holdout: precision "
        f"{held['precision']}, recall {held['recall']} ({held['tp']} tp, {held['fp']} fp, "
        f"{held['fn']} fn)"
    )
    print(f"refresh_related at T: {json.dumps(result['refresh'])}")
    print(
        "written edges (top 5 per document above T): threshold, edges, documents with one, "
        "share joining declared neighbours, share within two hops"
    )
    for row in result["written_edges_by_threshold"]:
        print(
            f"       {row['threshold']:.2f}  {row['edges']:5d}  {row['documents_with_edges']:4d}"
            f"  {row['share_declared_neighbours']:.3f}  {row['share_within_two_hops']:.3f}"
        )


if __name__ == "__main__":
    main()
