"""Benchmark: milliseconds per verified evidence opening on the SciFact corpus.

    .venv/bin/python bench/verified_opening.py [--db sqlite|postgres|both] [--passages 300]
                                               [--files 300]

For each backend, in a fresh database (see `_common.fresh_environment`; PostgreSQL uses the
scratch database `lode_bench_evidence`): `migrate`, the whole SciFact corpus through
`lode_load_beir` (versions with no source file), and the first `--files` abstracts written as
markdown files to a temporary folder and imported with `lode_import_markdown` (versions with a
source file, so opening re-reads and re-hashes the file between two database reads). Then,
for `--passages` head passages drawn at random (seed 7) from each kind, it times:

* `open_evidence()` — the service: two database reads around the file check when there is a
  file, one read otherwise, plus re-hashing the stored body and passage;
* `check_source()` alone — the file re-read and SHA-256 (files only);
* the page — `GET /evidence/...` through Django's test client (service + template render of
  the passage in context).

Prints median and p95 in ms and writes bench/out/verified_opening.json. Each backend runs in
a child process (Django is set up once per process).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BACKENDS, ROOT, SCIFACT, fresh_environment, percentile

OUT = ROOT / "bench" / "out"
USER = "eval"


def timed_ms(fn, items, warmup: int = 10) -> list[float]:
    for item in items[:warmup]:
        fn(item)
    times = []
    for item in items:
        started = time.perf_counter()
        fn(item)
        times.append((time.perf_counter() - started) * 1000)
    return times


def write_markdown(folder: Path, count: int) -> None:
    with (SCIFACT / "corpus.jsonl").open(encoding="utf-8") as handle:
        for n, line in enumerate(handle):
            if n >= count:
                break
            row = json.loads(line)
            title = " ".join(str(row.get("title") or row["_id"]).split())
            (folder / f"{row['_id']}.md").write_text(
                f"# {title}\n\n{row['text']}\n", encoding="utf-8"
            )


def child(db: str, passages: int, files: int) -> dict:
    """Runs inside a fresh environment (DATABASE_URL / LODE_DATA_DIR already set)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment

    from notes.models import Document
    from retrieval.links import evidence_url
    from retrieval.models import Passage
    from retrieval.search.evidence import EvidenceStatus, check_source, open_evidence

    setup_test_environment()  # lets the test client's "testserver" host through
    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    call_command("lode_load_beir", str(SCIFACT), user=USER, no_progress=True)
    load_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="lode-bench-files-") as tmp:
        folder = Path(tmp) / "scifact-files"
        folder.mkdir()
        write_markdown(folder, files)
        call_command("lode_import_markdown", str(folder), user=USER, no_progress=True)

        from django.contrib.auth import get_user_model

        user = get_user_model().objects.get(username=USER)
        client = Client()
        client.force_login(user)
        rng = random.Random(7)
        base = Passage.objects.filter(is_head=True, document__owner=user).select_related("version")
        with_file = list(base.exclude(version__source_path=""))
        without = list(base.filter(version__source_path=""))
        samples = {
            "no source file": rng.sample(without, min(passages, len(without))),
            "source file": rng.sample(with_file, min(passages, len(with_file))),
        }

        def service(p: Passage) -> None:
            outcome = open_evidence(user, p.document_id, p.version_id, p.pk, p.version.sha256)
            assert outcome.status == EvidenceStatus.VERIFIED_CURRENT, outcome

        def file_check(p: Passage) -> None:
            assert check_source(p.version.source_path, p.version.source_sha256).matches

        def page(p: Passage) -> None:
            assert client.get(evidence_url(p)).status_code == 200

        rows = []
        for kind, items in samples.items():
            layers = [("open_evidence()", service), ("page GET", page)]
            if kind == "source file":
                layers.insert(1, ("check_source() alone", file_check))
            for layer, fn in layers:
                times = timed_ms(fn, items)
                rows.append(
                    {
                        "db": db,
                        "kind": kind,
                        "layer": layer,
                        "n": len(times),
                        "median_ms": percentile(times, 50),
                        "p95_ms": percentile(times, 95),
                    }
                )
    return {
        "db": db,
        "documents": Document.objects.filter(owner__username=USER).count(),
        "head_passages": Passage.objects.filter(is_head=True).count(),
        "source_files": files,
        "load_s": load_s,
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=(*BACKENDS, "both"), default="both")
    parser.add_argument("--passages", type=int, default=300, help="passages timed per kind")
    parser.add_argument("--files", type=int, default=300, help="abstracts imported as files")
    parser.add_argument("--child", choices=BACKENDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.passages, args.files)))
        return
    results = []
    for db in BACKENDS if args.db == "both" else (args.db,):
        with fresh_environment(db, pg_name="lode_bench_evidence") as env:
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    db,
                    "--passages",
                    str(args.passages),
                    "--files",
                    str(args.files),
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
        if done.returncode:
            sys.stderr.write(done.stdout + done.stderr)
            raise SystemExit(f"{db} run failed ({done.returncode})")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    OUT.mkdir(exist_ok=True)
    (OUT / "verified_opening.json").write_text(json.dumps(results, indent=2))
    print("verified evidence opening on SciFact (ms per opening)")
    print(f"{'db':<9} {'versions':<15} {'layer':<21} {'n':>4} {'median':>7} {'p95':>7}")
    for result in results:
        for r in result["rows"]:
            print(
                f"{r['db']:<9} {r['kind']:<15} {r['layer']:<21} {r['n']:>4} "
                f"{r['median_ms']:>7.2f} {r['p95_ms']:>7.2f}"
            )
        print(
            f"{result['db']:<9} ({result['documents']} documents, {result['head_passages']} head "
            f"passages; SciFact loaded in {result['load_s']:.0f} s)"
        )


if __name__ == "__main__":
    main()
