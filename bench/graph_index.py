"""Benchmark: what the graph's edge index costs.

    .venv/bin/python bench/graph_index.py [--db sqlite|postgres|both] [--saves 60]
        [--synthetic 10000] [--links 10]

For each backend, in a fresh database (`_common.fresh_environment`; PostgreSQL: the scratch
database `bench_graph`), in one process:

1. **Edge extraction cost per saved note.** Import `bench/data/linked_corpus/` (332 notes),
   then save `--saves` new notes of ~10 links each (wiki links to corpus titles, Markdown
   links to note pages, a missing link, an unlinked mention) with `note_create`, and edit
   each once with `note_update` — alternately with the edge work on and with
   `refresh_edges` patched out in this process only (the same notes, paired, so machine
   load hits both alike). The difference of the medians is the edge work per save; also
   `derive_edges` alone on the saved notes (the derivation without the writes and the
   reverse look-ups).
2. **Health and repair on the linked corpus**: `edge_health()` (every document re-derived and
   compared), `repair_edges()` of a healthy graph, then a corruption — `--corrupt` edges
   deleted, as many bogus edges added, as many targets altered — detected by
   `index_health(vectors=False)` and repaired by `repair_indexes(vectors=False)`, with the
   canonical digest checked unchanged and the stored edges checked equal to the derivation.
3. The same health/corruption/repair at a larger synthetic size: `--synthetic` notes of
   `--links` wiki links each (bulk-loaded with `notes_import`, whose edges are derived in
   bulk), i.e. about `--synthetic × --links` edges.

Prints a table; writes `bench/out/graph_index_<db>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BACKENDS, ROOT, fresh_environment, percentile

OUT = ROOT / "bench" / "out"
CORPUS = ROOT / "bench" / "data" / "linked_corpus"
SEED = 16
FILLER = (
    "The on-call engineer checks the dashboards, reads the last handover note and confirms "
    "the alert routes before the change window opens. "
)


def _ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(1000 * statistics.median(values), 2),
        "p95_ms": round(1000 * percentile(values, 95), 2),
        "mean_ms": round(1000 * statistics.fmean(values), 2),
    }


def _linked_body(rng: random.Random, titles: list[str], ids: list[int], links: int) -> str:
    """~links links: wiki links (some aliased), two Markdown links to note pages, a missing
    link, and one unlinked mention of another title."""
    chosen = rng.sample(titles, links - 3)
    parts = []
    for i, title in enumerate(chosen):
        link = f"[[{title}|see {i}]]" if i % 3 == 0 else f"[[{title}]]"
        parts.append(f"{FILLER}Depends on {link}.")
    for pk in rng.sample(ids, 2):
        parts.append(f"{FILLER}Details in [this note](/notes/{pk}).")
    parts.append(f"{FILLER}Not written yet: [[Nowhere {rng.randrange(10**6)}]].")
    parts.append(f"{FILLER}Mentioned in passing: {rng.choice(titles)}.")
    return "\n\n".join(parts)


def _corrupt(Edge, count: int, rng: random.Random) -> dict[str, int]:
    """Delete `count` edges, add `count` bogus ones, alter `count` targets."""
    ids = list(
        Edge.objects.filter(kind=Edge.Kind.LINKS_TO, to_document__isnull=False)
        .exclude(kind=Edge.Kind.RELATED)
        .values_list("pk", flat=True)
    )
    picked = rng.sample(ids, 3 * count)
    doomed, altered, templates = picked[:count], picked[count : 2 * count], picked[2 * count :]
    targets = list(Edge.objects.filter(pk__in=templates).values_list("to_document_id", flat=True))
    for pk, target in zip(altered, targets, strict=True):
        Edge.objects.filter(pk=pk).update(to_document_id=target)
    bogus = []
    for edge in Edge.objects.filter(pk__in=templates):
        edge.pk = None
        edge.start = (edge.start or 0) + 100_000  # read at no place any version has
        bogus.append(edge)
    Edge.objects.bulk_create(bogus)
    Edge.objects.filter(pk__in=doomed).delete()
    return {"deleted": len(doomed), "altered": len(altered), "bogus": len(bogus)}


def _health_and_repair(label: str, corrupt_count: int, rng: random.Random) -> dict:
    from collections import Counter

    from notes.models import Document
    from retrieval.index import edge_health, edges
    from retrieval.index.health import canonical_health, index_health, repair_indexes
    from retrieval.models import Edge

    out: dict = {"label": label}
    out["documents"] = Document.objects.count()
    out["edges"] = Edge.objects.count()
    started = time.perf_counter()
    fresh = edge_health.edge_health()
    out["edge_health_s"] = round(time.perf_counter() - started, 3)
    # Loaders may leave drift by design (bulk imports skip the mention scan; a link read
    # before its target was imported is re-derived only within MAX_REVERSE_DOCUMENTS):
    # recorded, then repaired, before the corruption.
    out["initial_drift"] = {
        "missing": fresh.missing,
        "extra": fresh.extra,
        "altered": fresh.altered,
        "drifted_documents": fresh.drifted_documents,
        "examples": fresh.examples,
    }
    if fresh.drifted_documents:
        started = time.perf_counter()
        first = edge_health.repair_edges(related=False)
        out["initial_repair_s"] = round(time.perf_counter() - started, 3)
        out["initial_repair_documents"] = first.rederived
        out["edges"] = Edge.objects.count()
    started = time.perf_counter()
    full = index_health(vectors=False)
    out["index_health_no_vectors_s"] = round(time.perf_counter() - started, 3)
    assert full.healthy, full.problems
    started = time.perf_counter()
    idle = edge_health.repair_edges(related=False)
    out["edge_repair_healthy_s"] = round(time.perf_counter() - started, 3)
    assert idle.rederived == 0
    digest = canonical_health().digest

    out["corruption"] = _corrupt(Edge, corrupt_count, rng)
    started = time.perf_counter()
    damaged = index_health(vectors=False)
    out["detect_s"] = round(time.perf_counter() - started, 3)
    out["detected"] = {
        "missing": damaged.edges.missing,
        "extra": damaged.edges.extra,
        "altered": damaged.edges.altered,
        "drifted_documents": damaged.edges.drifted_documents,
        "problems": damaged.problems,
    }
    assert not damaged.healthy
    started = time.perf_counter()
    repaired = repair_indexes(vectors=False)
    out["repair_s"] = round(time.perf_counter() - started, 3)
    out["edge_repair_s"] = round(repaired.edges.seconds, 3)
    out["repaired_documents"] = repaired.edges.rederived
    out["healthy_after"] = repaired.after.healthy
    out["canonical_unchanged"] = (
        repaired.canonical_unchanged and canonical_health().digest == digest
    )
    stored = Counter(
        edges.edge_signature(e) for e in Edge.objects.exclude(kind=Edge.Kind.RELATED).iterator()
    )
    derived: Counter = Counter()
    last = 0
    while True:
        batch = list(Document.objects.filter(pk__gt=last).order_by("pk")[:500])
        if not batch:
            break
        derived.update(edges.edge_signature(e) for e in edges.derive_many(batch))
        last = batch[-1].pk
    out["stored_equals_derived"] = stored == derived
    return out


def _save_cost(saves: int, links: int, rng: random.Random) -> dict:
    from django.contrib.auth import get_user_model

    from notes import services
    from notes.models import Document
    from retrieval.index import edges, passages

    user = get_user_model().objects.get(username="bench")
    titles = list(Document.objects.values_list("title", flat=True))
    ids = list(Document.objects.values_list("pk", flat=True))
    real = passages.refresh_edges
    timings: dict[str, list[float]] = {
        "create_with_edges": [],
        "create_without_edges": [],
        "update_with_edges": [],
        "update_without_edges": [],
        "derive_only": [],
    }
    edges_per_note: list[int] = []
    for i in range(saves):
        body = _linked_body(rng, titles, ids, links)
        edited = body + f"\n\n{FILLER}Edited."
        order = [True, False] if i % 2 == 0 else [False, True]
        for with_edges in order:
            passages.refresh_edges = real if with_edges else (lambda *a, **k: 0)
            try:
                suffix = "with_edges" if with_edges else "without_edges"
                title = f"Bench note {i} {suffix}"
                started = time.perf_counter()
                document = services.note_create(owner=user, title=title, body=body)
                timings[f"create_{suffix}"].append(time.perf_counter() - started)
                started = time.perf_counter()
                services.note_update(
                    document=document,
                    user=user,
                    base_version_id=document.head_id,
                    title=title,
                    body=edited,
                )
                timings[f"update_{suffix}"].append(time.perf_counter() - started)
            finally:
                passages.refresh_edges = real
            if with_edges:
                document.refresh_from_db()
                started = time.perf_counter()
                derived = edges.derive_edges(document)
                timings["derive_only"].append(time.perf_counter() - started)
                edges_per_note.append(len(derived))
    result = {name: _ms(values) for name, values in timings.items()}
    for action in ("create", "update"):
        result[f"{action}_edge_work_ms"] = round(
            result[f"{action}_with_edges"]["p50_ms"] - result[f"{action}_without_edges"]["p50_ms"],
            2,
        )
    result["edges_per_note_mean"] = round(statistics.fmean(edges_per_note), 1)
    result["saves"] = saves
    return result


def _synthetic(count: int, links: int, rng: random.Random) -> float:
    from django.contrib.auth import get_user_model

    from notes import services

    user = get_user_model().objects.get(username="bench")
    titles = [f"Synthetic service {i:06d}" for i in range(count)]
    started = time.perf_counter()
    for start in range(0, count, 1000):
        batch = []
        for i in range(start, min(count, start + 1000)):
            targets = rng.sample(titles, links)
            body = "\n\n".join(f"{FILLER}Calls [[{t}]]." for t in targets)
            batch.append(services.NoteImport(external_key=f"syn/{i}", title=titles[i], body=body))
        services.notes_import(owner=user, notes=batch, source_name="synthetic")
    return time.perf_counter() - started


def run(db: str, saves: int, synthetic: int, links: int, corrupt: int) -> dict:
    with fresh_environment(db, pg_name="bench_graph") as env:
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        call_command("lode_import_markdown", str(CORPUS), user="bench", no_progress=True)
        report: dict = {"db": db, "linked_import_s": round(time.perf_counter() - started, 2)}
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        rng = random.Random(SEED)
        report["linked"] = _health_and_repair("linked corpus", corrupt, rng)
        report["save_cost"] = _save_cost(saves, links, rng)
        if synthetic:
            report["synthetic_import_s"] = round(_synthetic(synthetic, links, rng), 2)
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("ANALYZE")
            report["synthetic"] = _health_and_repair(
                f"linked + {synthetic} synthetic notes", max(corrupt, synthetic // 100), rng
            )
        connection.close()
        return report


def _print(report: dict) -> None:
    print(f"\n== {report['db']} ==")
    cost = report["save_cost"]
    print(
        f"save cost ({cost['saves']} notes, {cost['edges_per_note_mean']} edges each), "
        "p50 / p95 ms:"
    )
    for name in (
        "create_with_edges",
        "create_without_edges",
        "update_with_edges",
        "update_without_edges",
        "derive_only",
    ):
        print(f"  {name:22} {cost[name]['p50_ms']:8.2f} {cost[name]['p95_ms']:8.2f}")
    print(
        f"  edge work per save (p50 difference): create {cost['create_edge_work_ms']} ms, "
        f"update {cost['update_edge_work_ms']} ms"
    )
    for key in ("linked", "synthetic"):
        part = report.get(key)
        if not part:
            continue
        print(
            f"{part['label']}: {part['documents']} documents, {part['edges']} edges; "
            f"edge health {part['edge_health_s']} s, index health (no vectors) "
            f"{part['index_health_no_vectors_s']} s, repair of a healthy graph "
            f"{part['edge_repair_healthy_s']} s"
        )
        drift = part["initial_drift"]
        if drift["drifted_documents"]:
            print(
                f"  drift left by the loader: {drift['missing']} missing, {drift['extra']} "
                f"extra, {drift['altered']} altered in {drift['drifted_documents']} documents; "
                f"repaired in {part['initial_repair_s']} s"
            )
        print(
            f"  corruption {part['corruption']} → detected {part['detected']['missing']} "
            f"missing, {part['detected']['extra']} extra, {part['detected']['altered']} altered "
            f"in {part['detect_s']} s; repaired {part['repaired_documents']} documents in "
            f"{part['repair_s']} s (edges {part['edge_repair_s']} s); healthy after: "
            f"{part['healthy_after']}, canonical unchanged: {part['canonical_unchanged']}, "
            f"stored = derived: {part['stored_equals_derived']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=[*BACKENDS, "both"], default="both")
    parser.add_argument("--saves", type=int, default=60)
    parser.add_argument("--synthetic", type=int, default=10000)
    parser.add_argument("--links", type=int, default=10)
    parser.add_argument("--corrupt", type=int, default=20)
    args = parser.parse_args()
    if args.db == "both":
        # Django binds to one database per process: one child process per backend.
        for db in BACKENDS:
            cmd = [sys.executable, __file__, "--db", db, "--saves", str(args.saves)]
            cmd += ["--synthetic", str(args.synthetic), "--links", str(args.links)]
            cmd += ["--corrupt", str(args.corrupt)]
            subprocess.run(cmd, check=True)
        return
    OUT.mkdir(parents=True, exist_ok=True)
    report = run(args.db, args.saves, args.synthetic, args.links, args.corrupt)
    (OUT / f"graph_index_{args.db}.json").write_text(json.dumps(report, indent=2) + "\n")
    _print(report)


if __name__ == "__main__":
    main()
