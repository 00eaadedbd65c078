"""Load and fault test of the scale-out topology.

    .venv/bin/python bench/load_faults.py                       # both scenarios, 50 users, 60 s
    .venv/bin/python bench/load_faults.py --scenario faults --seconds 90

It starts the topology of docs/deploy.md on this machine, all on 127.0.0.1: a private
PostgreSQL cluster (`tests/pg_cluster.py`, never the shared server, because this test
restarts it), a `chroma run` server (`CHROMA_URL`), `--workers` `manage.py db_worker`s and
gunicorn with `--web-workers` processes (`lode_site/gunicorn_conf.py`, as `bootstrap run`
starts it). Ten accounts each get the notes corpus of `bench/data/notes_corpus/`; `--users`
virtual users, each signed in with a session of its own (and an API token), run for
`--seconds`:

* search pages (`/search`) and API searches (`/api/search/`), modes mixed (hybrid, lexical,
  semantic), questions from `bench/data/questions/`;
* asks (`POST /api/ask`);
* note writes (`POST /api/notes/`): every write answered 201 must survive the run.

Scenario `clean` is just that. Scenario `faults` adds, a fifth, two fifths and three quarters
into the run: SIGKILL of one background worker (not restarted: the others must take over
its claimed work), a restart of the Chroma server (stopped, then started again on the same
port and folder a few seconds later), and a restart of PostgreSQL (`pg_ctl restart`, fast
shutdown: every connection is dropped).

Expected and checked (the exit code is 1 when a check fails):
* no 500 (a request that meets the database mid-restart gets a 503 with Retry-After, see
  lode_site/errors.py; those are counted and shown);
* while Chroma is down, searches answer with keyword matches and say so (`degraded`);
* after each fault the system recovers by itself: searches are no longer degraded once
  Chroma is back, requests succeed again after the PostgreSQL restart, and the surviving
  workers embed everything, the killed worker's claimed work included;
* nothing saved is lost: every note answered 201 exists, each with exactly one head version,
  its head passages, and a vector for every head passage (recorded and in Chroma).

Figures: per endpoint requests/s, p50/p95/p99 latency and status counts, for each scenario;
the recovery times. A report lands in `bench/out/load_faults.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx  # noqa: E402

from lode_site.bootstrap import web_server_command  # noqa: E402
from tests import pg_cluster  # noqa: E402
from tests.deployment import Deployment  # noqa: E402

OUT = ROOT / "bench" / "out"
ACCOUNTS = 10
MODES = ("hybrid", "hybrid", "lexical", "semantic")
DEGRADED_WORDS = "Semantic search unavailable"

# Accounts, the notes corpus for each, one session and one API token per virtual user.
SETUP = textwrap.dedent(
    """
    import json, secrets
    from importlib import import_module
    from pathlib import Path
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User
    from lode_site.models import ApiToken, token_digest
    from notes.services import note_create

    corpus = sorted(Path({corpus!r}).rglob("*.md"))
    store = import_module(settings.SESSION_ENGINE).SessionStore
    users = []
    for a in range({accounts}):
        user = User.objects.create_user(f"load{{a:02d}}", password=secrets.token_urlsafe(16))
        for path in corpus:
            text = path.read_text(encoding="utf-8")
            title = next((l[2:].strip() for l in text.splitlines() if l.startswith("# ")),
                         path.stem)
            note_create(owner=user, title=title, body=text)
        users.append(user)
    virtual = []
    for v in range({virtual}):
        user = users[v % len(users)]
        session = store()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        raw = "lode_" + secrets.token_urlsafe(32)
        ApiToken.objects.create(user=user, name=f"load{{v}}", digest=token_digest(raw))
        virtual.append({{"user": user.username, "session": session.session_key, "token": raw}})
    print(json.dumps({{"cookie": settings.SESSION_COOKIE_NAME, "virtual": virtual}}))
    """
)

# What the run saved: every note by title prefix, its head versions, passages and vectors.
SAVED_STATE = textwrap.dedent(
    """
    import json
    from notes.models import Document, Version
    from retrieval.index.embeddings import current_manifest
    from retrieval.index.vectors import get_vector_store
    from retrieval.models import Passage, PassageVector

    key = current_manifest().key
    chroma = set(get_vector_store().ids())
    notes = {{}}
    for doc in Document.objects.filter(title__startswith={prefix!r}):
        # One head version: the document's head is its newest version, and every head
        # passage belongs to it.
        newest = Version.objects.filter(document=doc).order_by("-number").first()
        head_versions = set(Passage.objects.filter(document=doc, is_head=True)
                            .values_list("version_id", flat=True))
        heads = int(doc.head_id is not None and newest is not None
                    and doc.head_id == newest.pk and head_versions <= {{doc.head_id}})
        passages = list(Passage.objects.filter(document=doc, is_head=True)
                        .values_list("pk", flat=True))
        vectors = set(PassageVector.objects.filter(manifest_key=key, passage_id__in=passages)
                      .values_list("passage_id", flat=True))
        notes.setdefault(doc.title, []).append({{
            "heads": heads, "passages": len(passages),
            "recorded": len(vectors), "in_chroma": sum(1 for p in passages if p in chroma),
        }})
    print(json.dumps(notes))
    """
)


@dataclass
class Sample:
    endpoint: str
    started: float  # seconds since the run started
    seconds: float
    status: int  # 0: no HTTP answer (connection refused or reset, timeout)
    degraded: bool = False
    error: str = ""
    mode: str = ""  # of a search: lexical searches never use Chroma


@dataclass
class Run:
    scenario: str
    seconds: float
    samples: list[Sample] = field(default_factory=list)
    events: dict[str, float] = field(default_factory=dict)  # fault name → run second
    written: dict[str, int] = field(default_factory=dict)  # title → 201 count
    attempted: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, sample: Sample) -> None:
        with self.lock:
            self.samples.append(sample)


def questions() -> list[str]:
    path = ROOT / "bench" / "data" / "questions" / "notes_answerable.jsonl"
    found = [json.loads(line)["question"] for line in path.read_text().splitlines() if line]
    return found or ["backups", "failover"]


def virtual_user(
    run: Run, base: str, cookie: tuple[str, str], token: str, index: int, started: float
) -> None:
    rng = random.Random(index)
    asked = questions()
    headers = {"Authorization": f"Bearer {token}"}
    written = 0
    with httpx.Client(base_url=base, timeout=40.0, cookies={cookie[0]: cookie[1]}) as client:
        while (now := time.monotonic()) - started < run.seconds:
            roll = rng.random()
            question = rng.choice(asked)
            mode = rng.choice(MODES)
            title = ""
            try:
                if roll < 0.35:
                    endpoint = "page search"
                    response = client.get("/search", params={"q": question, "mode": mode})
                    degraded = response.status_code == 200 and DEGRADED_WORDS in response.text
                elif roll < 0.70:
                    endpoint = "api search"
                    response = client.get(
                        "/api/search/", params={"q": question, "mode": mode}, headers=headers
                    )
                    degraded = response.status_code == 200 and any(
                        DEGRADED_WORDS in note for note in response.json().get("degraded", [])
                    )
                elif roll < 0.85:
                    endpoint = "api ask"
                    response = client.post("/api/ask", json={"question": question}, headers=headers)
                    degraded = False
                else:
                    endpoint = "api note write"
                    written += 1
                    title = f"load-{run.scenario}-{index}-{written}"
                    with run.lock:
                        run.attempted.add(title)
                    body = (
                        f"# {title}\n\nWritten under load by virtual user {index}. "
                        f"It mentions {question.lower()} and the run {run.scenario}.\n\n"
                        "## Details\n\nA second section so the note has two passages."
                    )
                    response = client.post(
                        "/api/notes/", json={"title": title, "body": body}, headers=headers
                    )
                    degraded = False
                    if response.status_code == 201:
                        with run.lock:
                            run.written[title] = run.written.get(title, 0) + 1
                run.add(
                    Sample(
                        endpoint,
                        now - started,
                        time.monotonic() - now,
                        response.status_code,
                        degraded,
                        response.text[:200] if response.status_code >= 500 else "",
                        mode if endpoint.endswith("search") else "",
                    )
                )
            except httpx.HTTPError as exc:
                run.add(Sample(endpoint, now - started, time.monotonic() - now, 0, error=repr(exc)))
                time.sleep(0.2)


def inject_faults(run: Run, install: Deployment, pg: pg_cluster.PrivatePostgres, started: float):
    """A fifth in: SIGKILL a background worker; two fifths: restart Chroma; three quarters
    (and at least 8 s after Chroma is back): restart PostgreSQL."""

    def at(fraction: float) -> None:
        time.sleep(max(0.0, started + run.seconds * fraction - time.monotonic()))

    at(0.2)
    install.processes["worker-0"].send_signal(signal.SIGKILL)
    run.events["worker SIGKILLed"] = time.monotonic() - started
    at(0.4)
    assert install.chroma is not None
    install.chroma.terminate()
    install.chroma.wait(timeout=30)
    run.events["Chroma stopped"] = time.monotonic() - started
    time.sleep(5)
    # Searches before this moment certainly met no Chroma; the heartbeat that ends
    # start_chroma() may be noticed late (this thread shares the GIL with the users).
    run.events["Chroma starting"] = time.monotonic() - started
    install.start_chroma()
    run.events["Chroma started"] = time.monotonic() - started
    at(0.75)
    # Leave searches a while with Chroma back before the next fault (it may start slowly).
    time.sleep(max(0.0, started + run.events["Chroma started"] + 8 - time.monotonic()))
    run.events["PostgreSQL restart begun"] = time.monotonic() - started
    pg.restart()
    run.events["PostgreSQL restarted"] = time.monotonic() - started


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarise(run: Run) -> dict[str, Any]:
    by_endpoint: dict[str, list[Sample]] = defaultdict(list)
    for sample in run.samples:
        by_endpoint[sample.endpoint].append(sample)
    endpoints = {}
    for name, samples in sorted(by_endpoint.items()):
        ok = [s.seconds * 1000 for s in samples if 200 <= s.status < 300]
        endpoints[name] = {
            "requests": len(samples),
            "per_second": round(len(samples) / run.seconds, 2),
            "ok_per_second": round(len(ok) / run.seconds, 2),
            "p50_ms": round(percentile(ok, 0.50)),
            "p95_ms": round(percentile(ok, 0.95)),
            "p99_ms": round(percentile(ok, 0.99)),
            "statuses": dict(Counter(str(s.status) for s in samples)),
        }
    searches = [s for s in run.samples if s.endpoint.endswith("search") and s.status == 200]
    return {
        "scenario": run.scenario,
        "seconds": run.seconds,
        "endpoints": endpoints,
        "status_500": sum(1 for s in run.samples if s.status == 500),
        "errors_5xx_sample": [s.error for s in run.samples if s.status >= 500][:5],
        "errors_5xx_at": [
            f"{s.endpoint} {s.status} {s.started:.1f}-{s.started + s.seconds:.1f}s"
            for s in run.samples
            if s.status >= 500
        ][:20],
        "no_answer": sum(1 for s in run.samples if s.status == 0),
        "degraded_searches": sum(1 for s in searches if s.degraded),
        "events": {k: round(v, 1) for k, v in run.events.items()},
    }


def recovery(run: Run) -> dict[str, Any]:
    """What the faults did, read off the samples: searches while Chroma was down, the first
    undegraded search after it came back, the failures around the PostgreSQL restart."""
    ev = run.events
    searches = [
        s
        for s in run.samples
        if s.endpoint.endswith("search") and s.status == 200 and s.mode != "lexical"
    ]
    # Searches wholly inside the outage: one that waited in a queue and ended after Chroma
    # was back may rightly have used it.
    down = [
        s
        for s in searches
        if ev["Chroma stopped"] + 0.5 < s.started and s.started + s.seconds < ev["Chroma starting"]
    ]
    after_chroma = [s for s in searches if s.started > ev["Chroma started"]]
    clean = [
        s.started
        for s in after_chroma
        if not s.degraded and s.started < ev["PostgreSQL restart begun"]
    ]
    first_clean = min(clean, default=None)
    # Requests that ended (not started) from just before the restart on: at this load a
    # request takes seconds, so the ones it broke started well before it.
    pg_window = [
        s for s in run.samples if s.started + s.seconds >= ev["PostgreSQL restart begun"] - 1
    ]
    failures = [s for s in pg_window if s.status == 0 or s.status >= 500]
    last_failure = max((s.started + s.seconds for s in failures), default=None)
    late = [s for s in run.samples if s.started > ev["PostgreSQL restarted"] + 5]
    return {
        "hybrid_or_semantic_searches_while_chroma_down": len(down),
        "of_them_degraded_and_saying_so": sum(1 for s in down if s.degraded),
        "undegraded_while_down": [
            f"{s.endpoint} {s.mode} at {s.started:.1f}s took {s.seconds:.2f}s"
            for s in down
            if not s.degraded
        ][:20],
        "seconds_to_undegraded_search_after_chroma_start": (
            round(first_clean - ev["Chroma started"], 1) if first_clean else None
        ),
        "failed_requests_around_pg_restart": dict(Counter(str(s.status) for s in failures)),
        "seconds_from_pg_restarted_to_last_failure": (
            round(last_failure - ev["PostgreSQL restarted"], 1) if last_failure else None
        ),
        "requests_5s_after_pg_restart_failed": sum(1 for s in late if s.status in (0, 500, 503)),
    }


def check_saved(install: Deployment, runs: list[Run]) -> dict[str, Any]:
    state = json.loads(install.manage("shell", "-v", "0", "-c", SAVED_STATE.format(prefix="load-")))
    problems: list[str] = []
    written = {title for run in runs for title in run.written}
    for title in written:
        rows = state.get(title)
        if not rows:
            problems.append(f"{title}: answered 201, missing")
            continue
        if len(rows) != 1:
            problems.append(f"{title}: {len(rows)} documents")
        for row in rows:
            if row["heads"] != 1:
                problems.append(f"{title}: not exactly one head version")
            if not row["passages"]:
                problems.append(f"{title}: no head passages")
            if row["recorded"] != row["passages"] or row["in_chroma"] != row["passages"]:
                problems.append(f"{title}: vectors {row['recorded']}/{row['in_chroma']} "
                                f"for {row['passages']} passages")  # fmt: skip
    # A write that got no answer (or a 503) may or may not have been saved, never twice.
    unanswered = {t for run in runs for t in run.attempted} - written
    for title in unanswered:
        if len(state.get(title, [])) > 1:
            problems.append(f"{title}: unanswered write saved {len(state[title])} times")
    return {
        "notes_answered_201": len(written),
        "writes_without_201": len(unanswered),
        "of_them_saved_anyway": sum(1 for t in unanswered if t in state),
        "problems": problems[:20],
        "problem_count": len(problems),
    }


def wait_for_web(base: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/accounts/login/", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit("gunicorn did not answer")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=["clean", "faults", "both"], default="both")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=3, help="background workers")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn processes")
    parser.add_argument(
        "--accounts", type=int, default=ACCOUNTS, help="accounts, each with the notes corpus"
    )
    args = parser.parse_args()
    ok, why = pg_cluster.available()
    if not ok:
        raise SystemExit(f"cannot start a private PostgreSQL: {why}")
    from retrieval.index.embeddings import assemble_model_folder

    folder = Path(tempfile.mkdtemp(prefix="lode-load-"))
    model = assemble_model_folder(folder / "model")
    runs: list[Run] = []
    report: dict[str, Any] = {"args": vars(args)}
    with pg_cluster.PrivatePostgres() as pg:
        install = Deployment(folder, pg, model_dir=model)
        try:
            print("[load] migrating, starting Chroma and loading the corpus", flush=True)
            install.manage("migrate", "-v", "0")
            install.start_chroma()
            corpus = str(ROOT / "bench" / "data" / "notes_corpus")
            setup = json.loads(
                install.manage(
                    "shell", "-v", "0", "-c",
                    SETUP.format(corpus=corpus, accounts=args.accounts, virtual=args.users),
                    timeout=900,
                )
            )  # fmt: skip
            for i in range(args.workers):
                install.start_worker(f"worker-{i}")
            port = pg_cluster.free_port()
            install.start(
                "web", web_server_command("127.0.0.1", port, debug=False, workers=args.web_workers)
            )
            base = f"http://127.0.0.1:{port}"
            wait_for_web(base)
            t0 = time.monotonic()
            install.wait_until_done(
                timeout=1800, watch=[f"worker-{i}" for i in range(args.workers)]
            )
            report["corpus_embedded_seconds"] = round(time.monotonic() - t0, 1)
            print(f"[load] corpus embedded in {report['corpus_embedded_seconds']} s", flush=True)
            scenarios = ["clean", "faults"] if args.scenario == "both" else [args.scenario]
            for scenario in scenarios:
                run = Run(scenario, args.seconds)
                print(f"[load] scenario {scenario}: {args.users} users for {args.seconds:g} s",
                      flush=True)  # fmt: skip
                started = time.monotonic()
                threads = [
                    threading.Thread(
                        target=virtual_user,
                        args=(run, base, (setup["cookie"], v["session"]), v["token"], i, started),
                        daemon=True,
                    )
                    for i, v in enumerate(setup["virtual"])
                ]
                if scenario == "faults":
                    threads.append(
                        threading.Thread(target=inject_faults, args=(run, install, pg, started))
                    )
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join(timeout=args.seconds + 120)
                runs.append(run)
                summary = summarise(run)
                if scenario == "faults":
                    summary["recovery"] = recovery(run)
                report[scenario] = summary
                print(json.dumps(summary, indent=2), flush=True)
            survivors = [f"worker-{i}" for i in range(1 if "faults" in scenarios else 0,
                                                        args.workers)]  # fmt: skip
            t0 = time.monotonic()
            install.wait_until_done(timeout=900, watch=survivors)
            report["catch_up_seconds"] = round(time.monotonic() - t0, 1)
            report["tasks"] = install.task_counts()
            report["saved"] = check_saved(install, runs)
            print(json.dumps({k: report[k] for k in ("catch_up_seconds", "tasks", "saved")},
                             indent=2), flush=True)  # fmt: skip
        finally:
            install.close()
    OUT.mkdir(exist_ok=True)
    (OUT / "load_faults.json").write_text(json.dumps(report, indent=2))
    failures = []
    for scenario in ("clean", "faults"):
        if scenario in report and report[scenario]["status_500"]:
            failures.append(f"{scenario}: {report[scenario]['status_500']} responses were 500")
    if "faults" in report:
        rec = report["faults"]["recovery"]
        if (
            rec["of_them_degraded_and_saying_so"]
            != rec["hybrid_or_semantic_searches_while_chroma_down"]
        ):
            failures.append("a search while Chroma was down did not say it was degraded")
        if rec["seconds_to_undegraded_search_after_chroma_start"] is None:
            failures.append("searches stayed degraded after Chroma came back")
        if rec["requests_5s_after_pg_restart_failed"]:
            failures.append("requests still failed 5 s after PostgreSQL was back")
    if report["saved"]["problem_count"]:
        failures.append(f"{report['saved']['problem_count']} problems with saved notes")
    if report["tasks"].get("RUNNING") or report["tasks"].get("READY"):
        failures.append(f"tasks left unfinished: {report['tasks']}")
    print("[load] " + ("FAILED: " + "; ".join(failures) if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
