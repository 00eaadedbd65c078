"""Crash injection: SIGKILL a folder refresh at random points.

    .venv/bin/python bench/crash_refresh.py [--rounds 20] [--files 300] [--changed 120]

In a fresh SQLite database (`_common.fresh_environment`), a folder of `--files` Markdown
files is ingested. Then, `--rounds` times: `--changed` files get new content (a new unique
token per file and round), a refresh starts in a child process and is SIGKILLed after a
random delay within the measured refresh time. After every kill a checker process verifies:

* nothing lost: every file still has its external, each with exactly one head version;
* no duplicates: head passages belong only to the head version, one per position;
* each file's head is either its previous content or its new content, never empty, and its
  token is found by `search()` (lexical) with the hit opening as verified by
  `open_evidence()` (the stored snapshot re-checked; `source_changed` is the expected answer
  while the file on disk is newer than the snapshot);

then the next refresh runs to completion and the checker verifies every file now has its
new content, verified current, with the same duplicate and loss checks. Prints the counts
and writes bench/out/crash_refresh.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, fresh_environment

OUT = ROOT / "bench" / "out"


def body(n: int, round_: int) -> str:
    return (
        f"# File {n}\n\nThis file carries token tok{n}r{round_} for round {round_}.\n\n"
        f"## More\n\nA second paragraph so the file has two passages, round {round_}.\n"
    )


# --- children (Django set up once per process) ----------------------------------------------


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()


def child_setup(folder: str) -> None:
    setup_django()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from externals import pipeline, services

    call_command("migrate", verbosity=0)
    owner = User.objects.create_user("crash")
    source = services.source_create(owner=owner, name="docs", kind="folder", location=folder)
    record = pipeline.scan_source(source)
    print(f"SETUP {record.status} {record.items_new}", flush=True)


def child_refresh() -> None:
    setup_django()
    from externals import pipeline
    from externals.models import Source

    source = Source.objects.get(name="docs")
    print("READY", flush=True)
    started = time.perf_counter()
    record = pipeline.scan_source(source)
    print(f"DONE {record.status} {record.items_changed} {time.perf_counter() - started:.3f}")


def child_check(expect_path: str, phase: str) -> None:
    """Print a JSON report of the checks described in the module docstring."""
    setup_django()
    from django.contrib.auth.models import User
    from django.db.models import Count

    from externals.models import Source, SourceItem
    from retrieval.models import Passage
    from retrieval.search.evidence import EvidenceStatus, open_evidence
    from retrieval.search.pipeline import search

    expect: dict[str, list[str]] = json.loads(Path(expect_path).read_text())
    user = User.objects.get(username="crash")
    source = Source.objects.get(name="docs")
    problems: list[str] = []
    items = {i.path: i for i in SourceItem.objects.filter(source=source).select_related("document")}
    if sorted(items) != sorted(expect):
        problems.append(f"items {len(items)} != files {len(expect)}")
    for path, item in items.items():
        document = item.document
        if document.deleted_at is not None or document.head_id is None:
            problems.append(f"{path}: no live head")
            continue
        heads = Passage.objects.filter(document=document, is_head=True)
        if heads.exclude(version_id=document.head_id).exists():
            problems.append(f"{path}: head passages from an old version")
        dupes = heads.values("position").annotate(n=Count("id")).filter(n__gt=1)
        if dupes.exists() or heads.count() == 0:
            problems.append(f"{path}: {heads.count()} head passages, duplicates {list(dupes)}")
        body_text = Passage.objects.filter(version_id=document.head_id).first()
        tokens = [t for t in expect[path] if body_text and t in document.head.body]
        if not tokens:
            problems.append(f"{path}: head has none of {expect[path]}")
    sample = random.Random(len(expect)).sample(sorted(expect), min(30, len(expect)))
    statuses: dict[str, int] = {}
    for path in sample:
        item = items.get(path)
        token = next((t for t in expect[path] if item and t in item.document.head.body), None)
        if token is None:
            continue
        hits = search(user=user, query=token, mode="lexical", rerank="off").hits
        if not hits:
            problems.append(f"{path}: {token} not found by search")
            continue
        p = hits[0].passage
        outcome = open_evidence(user, p.document_id, p.version_id, p.pk, p.version.sha256)
        statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
        allowed = {EvidenceStatus.VERIFIED_CURRENT}
        if phase == "killed":
            allowed.add(EvidenceStatus.SOURCE_CHANGED)
        if outcome.status not in allowed:
            problems.append(f"{path}: evidence {outcome.status}")
    print("CHECK " + json.dumps({"problems": problems, "evidence": statuses}), flush=True)


# --- parent ---------------------------------------------------------------------------------


def run(env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, __file__, *args], env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        sys.exit(f"child {args} failed:\n{proc.stderr}")
    return proc.stdout


def check(env: dict[str, str], expect: Path, phase: str) -> dict:
    out = run(env, "--child", "check", "--expect", str(expect), "--phase", phase)
    return json.loads(next(line for line in out.splitlines() if line.startswith("CHECK"))[6:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--changed", type=int, default=120)
    parser.add_argument("--child", choices=("setup", "refresh", "check"))
    parser.add_argument("--folder", default="")
    parser.add_argument("--expect", default="")
    parser.add_argument("--phase", default="killed")
    args = parser.parse_args()
    if args.child == "setup":
        return child_setup(args.folder)
    if args.child == "refresh":
        return child_refresh()
    if args.child == "check":
        return child_check(args.expect, args.phase)

    rng = random.Random(2026)
    summary = {"rounds": args.rounds, "killed": 0, "finished_before_kill": 0}
    summary |= {"killed_checks_ok": 0, "completion_checks_ok": 0, "problems": []}
    with fresh_environment("sqlite", "jp") as env, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "docs"
        folder.mkdir()
        current = dict.fromkeys(range(args.files), 0)
        for n in current:
            (folder / f"f{n:04d}.md").write_text(body(n, 0), encoding="utf-8")
        expect_file = Path(tmp) / "expect.json"
        print(run(env, "--child", "setup", "--folder", str(folder)).strip(), flush=True)
        # Calibrate: one complete refresh with the usual number of changes.
        window = 0.0
        for round_ in range(1, args.rounds + 1):
            changed = rng.sample(sorted(current), args.changed)
            previous = dict(current)
            for n in changed:
                current[n] = round_
                (folder / f"f{n:04d}.md").write_text(body(n, round_), encoding="utf-8")
            expect_file.write_text(
                json.dumps(
                    {
                        f"f{n:04d}.md": sorted({f"tok{n}r{previous[n]}", f"tok{n}r{current[n]}"})
                        for n in current
                    }
                )
            )
            proc = subprocess.Popen(
                [sys.executable, __file__, "--child", "refresh"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert proc.stdout is not None
            proc.stdout.readline()  # READY: Django is up, the scan starts now
            delay = rng.uniform(0, window or 1.0)
            time.sleep(delay)
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                summary["killed"] += 1
                state = "killed"
            else:
                summary["finished_before_kill"] += 1
                state = "finished"
            proc.wait()
            killed = check(env, expect_file, "killed")
            summary["killed_checks_ok"] += not killed["problems"]
            # The next refresh runs to completion and must leave only the new content.
            done = run(env, "--child", "refresh").splitlines()[-1].split()
            window = max(window, float(done[3]))
            expect_file.write_text(
                json.dumps({f"f{n:04d}.md": [f"tok{n}r{current[n]}"] for n in current})
            )
            complete = check(env, expect_file, "complete")
            summary["completion_checks_ok"] += not complete["problems"]
            for phase, report in (("after kill", killed), ("after refresh", complete)):
                for problem in report["problems"][:5]:
                    summary["problems"].append(f"round {round_} {phase}: {problem}")
            print(
                f"round {round_:2d}: {state} after {delay:.2f}s; after kill: "
                f"{len(killed['problems'])} problems, evidence {killed['evidence']}; next "
                f"refresh {done[1]} ({done[2]} changed): {len(complete['problems'])} problems",
                flush=True,
            )
    print(json.dumps(summary, indent=2))
    OUT.mkdir(exist_ok=True)
    (OUT / "crash_refresh.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
