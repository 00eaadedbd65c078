"""Benchmark: does graph expansion answer questions one link away?

    .venv/bin/python bench/graph_quality.py [--mode hybrid] [--data DIR]

The linked corpus (`bench/data/linked_corpus/`, bench/make_linked_corpus.py) is imported with
`manage.py lode_import_markdown` as notes of user `graph` into a fresh temporary data folder
(SQLite; `--data DIR` reuses one, importing only once) and embedded with the bundled model
(`lode_embed_pending`). Then, for the three question sets of
`bench/data/linked_questions/` — `multi_hop` (the answer sits in a note one or two links
away from the note the question's words point at), `single_hop` (the answer is in that
note) and `unanswerable` (near-topic, no note answers) — and three settings of
`follow_links`:

* `off` (False): no expansion — plain search;
* `rule` (None): the graph discipline rule decides (what search and ask do by default);
* `always` (True): expansion on every question;

each question is asked with `ask()` (extractive answerer, `--mode`, the configured reranker)
and we count:

* **evidence recall**: the answer's note is among the evidence pack's items (the stored
  trace's pack), and **search recall@10**: it is among search's first 10 hits;
* **answer rate** and **right answers** (a shown claim quotes the answer's note) on
  multi-hop and single-hop; **false answers** on unanswerable (any answer is false);
* **ask latency** p50/p95 per setting;
* **the discipline rule**: precision and recall of "expansion runs" for multi-hop questions
  (positives) against single-hop and unanswerable ones (negatives), and how often each rule
  fired.

Tune and holdout are printed apart (the rule was written looking at tune questions only).
Writes `bench/out/graph_quality.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, percentile

OUT = ROOT / "bench" / "out"
DATA = ROOT / "bench" / "data"
CORPUS = DATA / "linked_corpus"
QUESTIONS = DATA / "linked_questions"
SETS = ("multi_hop", "single_hop", "unanswerable")
SPLITS = ("tune", "holdout")
SETTINGS = {"off": False, "rule": None, "always": True}
ANSWERED = ("ANSWER", "ANSWER_WITH_CONFLICTS")
RECALL_K = 10
USER = "graph"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def setup_django(data_dir: str) -> None:
    os.environ.pop("DATABASE_URL", None)
    os.environ["LODE_DATA_DIR"] = data_dir
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()


def load(user_name: str) -> tuple[Any, dict[str, int], float]:
    """Import and embed the corpus (once per data folder); {relative path: document id}."""
    from django.core.management import call_command

    from notes.management.commands.lode_import_markdown import ensure_user
    from notes.models import Document
    from retrieval.eligibility import member_space_ids
    from retrieval.index.vectors import pending_count

    call_command("migrate", verbosity=0)
    user = ensure_user(user_name)
    started = time.perf_counter()
    if not Document.objects.filter(owner=user).exists():
        call_command("lode_import_markdown", str(CORPUS), user=user_name, no_progress=True)
    if pending_count(member_space_ids(user.pk)):
        call_command("lode_embed_pending", verbosity=0)
    seconds = time.perf_counter() - started
    docs = dict(
        Document.objects.filter(owner=user, deleted_at__isnull=True).values_list(
            "external_key", "pk"
        )
    )
    return user, docs, seconds


def one(user: Any, row: dict[str, Any], answer_doc: int | None, *, mode: str, follow) -> dict:
    """One question under one setting: search recall, the discipline decision, the ask."""
    from retrieval.answer.answerers import ExtractiveAnswerer
    from retrieval.answer.ask import ask
    from retrieval.answer.trace import Trace
    from retrieval.models import AskTrace
    from retrieval.search.pipeline import search

    result = search(
        user=user, query=row["question"], mode=mode, limit=RECALL_K, follow_links=follow
    )
    hit_docs = [h.passage.document_id for h in result.hits]
    expansion = result.expansion
    started = time.perf_counter()
    outcome = ask(
        user=user,
        question=row["question"],
        answerer=ExtractiveAnswerer(),
        mode=mode,
        follow_links=follow,
    )
    ms = (time.perf_counter() - started) * 1000
    trace = Trace.from_row(AskTrace.objects.get(pk=outcome.trace_id))
    pack_docs = [item.document_id for item in (trace.pack.items if trace.pack else [])]
    answered = str(outcome.decision) in ANSWERED and bool(outcome.claims)
    quoted = {s.document_id for claim in outcome.claims for s in claim.support}
    return {
        "id": row["id"],
        "split": row["split"],
        "question": row["question"],
        "ms": round(ms, 2),
        "ran": bool(expansion and expansion.ran),
        "rule": expansion.discipline.rule if expansion else "",
        "added": len(expansion.added) if expansion else 0,
        "search_recall": answer_doc in hit_docs[: RECALL_K + 4] if answer_doc else False,
        "search_recall_direct": answer_doc
        in [h.passage.document_id for h in result.hits if h.via is None]
        if answer_doc
        else False,
        "evidence_recall": answer_doc in pack_docs if answer_doc else False,
        "answered": answered,
        "right": answered and answer_doc in quoted if answer_doc else False,
        "decision": str(outcome.decision),
    }


def share(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    n = len(rows)
    k = sum(1 for r in rows if r[key])
    return {"n": n, "count": k, "rate": round(k / n, 3) if n else 0.0}


def by_split(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return {split: share([r for r in rows if r["split"] == split], key) for split in SPLITS}


def discipline(rows_by_set: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Precision/recall of "expansion runs" (the rule setting) for multi-hop questions."""
    out: dict[str, Any] = {}
    for split in SPLITS:
        pos = [r for r in rows_by_set["multi_hop"] if r["split"] == split]
        neg = [
            r
            for name in ("single_hop", "unanswerable")
            for r in rows_by_set[name]
            if r["split"] == split
        ]
        tp = sum(r["ran"] for r in pos)
        fp = sum(r["ran"] for r in neg)
        out[split] = {
            "positives": len(pos),
            "negatives": len(neg),
            "true_positives": tp,
            "false_positives": fp,
            "precision": round(tp / (tp + fp), 3) if tp + fp else 0.0,
            "recall": round(tp / len(pos), 3) if pos else 0.0,
            "single_hop_fired": sum(
                r["ran"] for r in rows_by_set["single_hop"] if r["split"] == split
            ),
            "rules": dict(
                Counter(
                    r["rule"] for name in SETS for r in rows_by_set[name] if r["split"] == split
                )
            ),
        }
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    data_dir = args.data or tempfile.mkdtemp(prefix="lode-graph-bench-")
    setup_django(data_dir)
    from retrieval.models import Edge

    user, docs, load_seconds = load(USER)
    sets = {name: read_jsonl(QUESTIONS / f"{name}.jsonl") for name in SETS}
    report: dict[str, Any] = {
        "mode": args.mode,
        "documents": len(docs),
        "edges": Edge.objects.count(),
        "edges_by_kind": dict(Counter(Edge.objects.values_list("kind", flat=True))),
        "load_seconds": round(load_seconds, 1),
        "settings": {},
    }
    for label, follow in SETTINGS.items():
        rows_by_set: dict[str, list[dict[str, Any]]] = {}
        for name in SETS:
            rows = []
            for row in sets[name]:
                answer_doc = docs.get(row["file"]) if "file" in row else None
                rows.append(one(user, row, answer_doc, mode=args.mode, follow=follow))
            rows_by_set[name] = rows
            print(f"  {label} {name}: {len(rows)} questions", file=sys.stderr, flush=True)
        times = [r["ms"] for name in SETS for r in rows_by_set[name]]
        block: dict[str, Any] = {
            "latency_ms": {
                "p50": round(percentile(times, 50), 1),
                "p95": round(percentile(times, 95), 1),
            },
        }
        for name in ("multi_hop", "single_hop"):
            rows = rows_by_set[name]
            block[name] = {
                key: by_split(rows, key)
                for key in ("evidence_recall", "search_recall", "answered", "right", "ran")
            }
        block["unanswerable"] = {
            "false_answers": by_split(rows_by_set["unanswerable"], "answered"),
            "ran": by_split(rows_by_set["unanswerable"], "ran"),
        }
        if follow is None:
            block["discipline"] = discipline(rows_by_set)
        block["rows"] = rows_by_set
        report["settings"][label] = block
    return report


def pct(block: dict[str, Any]) -> str:
    return f"{block['count']}/{block['n']} ({100 * block['rate']:.0f}%)"


def show(report: dict[str, Any]) -> None:
    print(
        f"linked corpus: {report['documents']} notes, {report['edges']} edges "
        f"{report['edges_by_kind']}, loaded+embedded in {report['load_seconds']} s; "
        f"mode {report['mode']}"
    )
    for split in SPLITS:
        print(f"\n== {split} ==")
        print(
            f"{'setting':8} {'set':12} {'evidence recall':>16} {'search recall':>16} "
            f"{'answered':>14} {'right':>14} {'expanded':>14}"
        )
        for label, block in report["settings"].items():
            for name in ("multi_hop", "single_hop"):
                b = block[name]
                print(
                    f"{label:8} {name:12} {pct(b['evidence_recall'][split]):>16} "
                    f"{pct(b['search_recall'][split]):>16} {pct(b['answered'][split]):>14} "
                    f"{pct(b['right'][split]):>14} {pct(b['ran'][split]):>14}"
                )
            u = block["unanswerable"]
            print(
                f"{label:8} {'unanswerable':12} false answers {pct(u['false_answers'][split])}"
                f", expanded {pct(u['ran'][split])}"
            )
    print()
    for label, block in report["settings"].items():
        lat = block["latency_ms"]
        print(f"ask latency, {label}: p50 {lat['p50']} ms, p95 {lat['p95']} ms")
    rule = report["settings"].get("rule", {}).get("discipline")
    if rule:
        for split in SPLITS:
            d = rule[split]
            print(
                f"discipline rule [{split}]: precision {d['precision']} recall {d['recall']} "
                f"(TP {d['true_positives']}/{d['positives']} multi-hop, FP {d['false_positives']}"
                f"/{d['negatives']} single-hop+unanswerable); rules {d['rules']}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=("lexical", "hybrid", "semantic"), default="hybrid")
    parser.add_argument("--data", default=None, help="reuse this data folder (SQLite)")
    args = parser.parse_args()
    report = run(args)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "graph_quality.json").write_text(
        json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    show(report)


if __name__ == "__main__":
    main()
