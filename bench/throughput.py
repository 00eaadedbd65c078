"""Search throughput of the web server under 50 concurrent searchers.

    .venv/bin/python bench/throughput.py [--server gunicorn|runserver|both] [--clients 50]
        [--seconds 30] [--notes 300] [--db sqlite|postgres] [--shapes 2x4,2x1,3x2]

A new user's view: a fresh lode (SQLite in a temporary data folder, or the scratch
PostgreSQL database `lode_bench_throughput`, dropped afterwards) with the first `--notes`
SciFact abstracts loaded as notes of the first account and embedded (`lode_embed_pending`),
then served the way `bootstrap run` serves it — gunicorn with lode_site/gunicorn_conf.py, or
`runserver` as `run --debug` does (and `run` once did) — without the background
worker (nothing is left to embed). `--clients` threads, each with its own connection, search
for `--seconds`, alternating the search page (`GET /search?q=…&mode=hybrid`, signed in) and
the API (`GET /api/search/?q=…&mode=hybrid`, bearer token), with SciFact's test queries in
turn. Printed per server: searches/s (answered 200 within the run), median and p95 latency,
and every other status by count (503 = the time budget stopped a search).

This is a **small corpus** (300 abstracts → ~450 passages by default): it measures the
server's concurrency (processes, threads, the model per process), not search over a large
index; SciFact's full 5,183 abstracts take ~30 minutes to embed on two cores. The load
generator runs on the same machine and takes CPU from the server; the load average is
printed. Wall-clock figures on a shared machine: compare runs made together.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, SCIFACT, fresh_environment

sys.path.insert(0, str(ROOT))

from lode_site import bootstrap

PG_NAME = "lode_bench_throughput"
PYTHON = str(ROOT / ".venv" / "bin" / "python")


def manage(env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        [PYTHON, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def load_corpus(env: dict[str, str], notes: int, cache: str | None) -> tuple[str, str]:
    """Migrate, create the first account, load and embed `notes` abstracts; returns the
    account's password and an API token."""
    manage(env, "migrate", "--noinput")
    manage(env, "collectstatic", "--noinput", "-v", "0")
    login = manage(env, "lode_first_user")  # the password is printed once, never stored
    password = re.search(r"password: (\S+)", login).group(1)
    started = time.monotonic()
    manage(env, "lode_load_beir", str(SCIFACT), "--limit", str(notes), "--user", "lode",
           "--no-progress")  # fmt: skip
    if cache:
        # The vectors of the same inputs, read from an embedded folder (bench/cached_embed.py).
        subprocess.run(
            [PYTHON, str(ROOT / "bench" / "cached_embed.py"), "lode_embed_pending",
             "--no-progress"],
            cwd=ROOT, env=dict(env, LODE_EMBED_CACHE=cache), check=True, capture_output=True,
        )  # fmt: skip
    else:
        manage(env, "lode_embed_pending", "--no-progress")
    print(f"loaded and embedded {notes} abstracts in {time.monotonic() - started:.0f} s")
    token = manage(env, "lode_token", "create", "lode", "bench").split()[0]
    return password, token


def queries() -> list[str]:
    with (SCIFACT / "queries.jsonl").open() as handle:
        return [json.loads(line)["text"] for line in handle][:300]


def wait_serving(port: int, process: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("the server exited before serving")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit("the server did not start")


def session_cookies(base: str, password: str) -> dict[str, str]:
    import httpx

    with httpx.Client(base_url=base, timeout=60) as client:
        form = client.get("/accounts/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        done = client.post(
            "/accounts/login/",
            data={"username": "lode", "password": password, "csrfmiddlewaretoken": csrf},
            headers={"Referer": f"{base}/accounts/login/"},
        )
        if done.status_code != 302:
            raise SystemExit(f"login failed: {done.status_code}")
        return dict(client.cookies)


def load(base: str, cookies: dict[str, str], token: str, clients: int, seconds: float) -> dict:
    import httpx

    texts = queries()
    stop_at = time.monotonic() + seconds
    lock = threading.Lock()
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    counter = iter(range(10**9))

    def client_loop(number: int) -> None:
        with httpx.Client(base_url=base, timeout=120, cookies=cookies) as client:
            kind = number % 2
            while time.monotonic() < stop_at:
                with lock:
                    text = texts[next(counter) % len(texts)]
                if kind == 0:
                    path, params, headers = "/search", {"q": text, "mode": "hybrid"}, {}
                else:
                    path = "/api/search/"
                    params = {"q": text, "mode": "hybrid"}
                    headers = {"Authorization": f"Bearer {token}"}
                kind = 1 - kind
                began = time.monotonic()
                try:
                    status = str(client.get(path, params=params, headers=headers).status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                elapsed = time.monotonic() - began
                with lock:
                    statuses[status] = statuses.get(status, 0) + 1
                    if status == "200" and time.monotonic() <= stop_at + 0.001:
                        latencies.append(elapsed)

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(clients)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - began
    latencies.sort()
    return {
        "searches_per_s": len(latencies) / seconds,
        "median_s": statistics.median(latencies) if latencies else float("nan"),
        "p95_s": latencies[int(0.95 * (len(latencies) - 1))] if latencies else float("nan"),
        "answered": len(latencies),
        "statuses": statuses,
        "wall_s": wall,
    }


def group_cpu_seconds(group: int) -> float:
    """CPU seconds (user + system) used so far by the live processes of process group
    `group` (the server: gunicorn's master and workers, or runserver)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        # After the command name: state, ppid, pgrp, …; utime and stime are fields 14, 15.
        if int(fields[2]) == group:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def serve_and_measure(server: str, env: dict[str, str], args, password: str, token: str):
    port = free_port()
    env = dict(env, LODE_WEB_WORKERS=str(args.web_workers), LODE_WEB_THREADS=str(args.threads))
    command = bootstrap.web_server_command("127.0.0.1", port, debug=server == "runserver")
    if server == "runserver":
        env["DEBUG"] = "0"  # as `run` once served: runserver with DEBUG off
        env.pop("DJANGO_SETTINGS_MODULE", None)
    log = Path(env["LODE_DATA_DIR"]) / f"{server}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_serving(port, process)
        base = f"http://127.0.0.1:{port}"
        cookies = session_cookies(base, password)
        load(base, cookies, token, clients=4, seconds=5)  # warm up: models loaded everywhere
        server_cpu, client_cpu = group_cpu_seconds(process.pid), time.process_time()
        result = load(base, cookies, token, args.clients, args.seconds)
        answered = max(sum(result["statuses"].values()), 1)
        result["server_cpu_ms"] = (group_cpu_seconds(process.pid) - server_cpu) * 1000 / answered
        result["client_cpu_ms"] = (time.process_time() - client_cpu) * 1000 / answered
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=("gunicorn", "runserver", "both"), default="both")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--notes", type=int, default=300)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--embed-cache",
        help="an embedded SciFact data folder to take the vectors from (bench/cached_embed.py)",
    )
    parser.add_argument(
        "--shapes",
        default="2x4",
        help="gunicorn shapes to measure, PROCESSESxTHREADS, comma-separated (2x4)",
    )
    args = parser.parse_args()
    shapes = [tuple(int(n) for n in shape.split("x")) for shape in args.shapes.split(",")]
    runs: list[tuple[str, int, int]] = []
    if args.server in ("runserver", "both"):
        runs.append(("runserver", 1, 0))
    if args.server in ("gunicorn", "both"):
        runs += [("gunicorn", processes, threads) for processes, threads in shapes]
    with fresh_environment(args.db, PG_NAME) as env:
        env.pop("DEBUG", None)
        env.pop("CHROMA_URL", None)
        password, token = load_corpus(env, args.notes, args.embed_cache)
        for server, processes, threads in runs:
            args.web_workers, args.threads = processes, threads
            result = serve_and_measure(server, env, args, password, token)
            shape = (
                "runserver (one process, a thread per request)"
                if server == "runserver"
                else f"gunicorn {processes} processes × {threads} threads"
            )
            print(
                f"{shape}, {args.clients} clients, {args.seconds:.0f} s, {args.db}, "
                f"{args.notes} abstracts: {result['searches_per_s']:.1f} searches/s, "
                f"median {result['median_s']:.2f} s, p95 {result['p95_s']:.2f} s; "
                f"statuses {result['statuses']}; CPU per request: server "
                f"{result['server_cpu_ms']:.0f} ms, load generator {result['client_cpu_ms']:.0f} "
                f"ms; load average {os.getloadavg()[0]:.1f}"
            )


if __name__ == "__main__":
    main()
