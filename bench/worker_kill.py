"""What killing the background worker costs the site: `bootstrap run` under load, worker killed.

    .venv/bin/python bench/worker_kill.py                        # this checkout
    .venv/bin/python bench/worker_kill.py --root /tmp/wt-old     # an older checkout

Starts lode as a user does (`python3 -m lode_site.bootstrap run`: migrate, gunicorn, one
`manage.py db_worker`) on a free port with a fresh SQLite data folder (the install step is
skipped: this venv serves every checkout). `--clients` threads, signed in as the first
account, then ask for search pages (`/search?q=…`, hybrid) for `--seconds`; a third of the
way in the worker is killed with SIGKILL. Printed: requests, connection errors and statuses,
p50/p95 latency before the kill and after it, whether lode was still running at the end,
and its log lines about the worker.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ("freight invoice", "harbour crane", "customs clearance", "night shift", "tariff")

# `bootstrap run` of the checkout at sys.argv[1], without its install step.
RUN = """
import sys
sys.path.insert(0, sys.argv[1])
from lode_site import bootstrap
bootstrap.ensure_venv = lambda dev: None
sys.exit(bootstrap.main(["run", "--port", sys.argv[2]]))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round((len(ordered) - 1) * q / 100))]


def children(pid: int) -> dict[int, str]:
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                cmd = (stat.parent / "cmdline").read_text().replace("\0", " ")
                found[int(stat.parent.name)] = cmd
        except (OSError, IndexError, ValueError):
            continue
    return found


def signed_in_opener(base: str, username: str, password: str) -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{base}/accounts/login/", timeout=60).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": token, "username": username, "password": password}
    ).encode()
    request = urllib.request.Request(
        f"{base}/accounts/login/", data=form, headers={"Referer": f"{base}/accounts/login/"}
    )
    opener.open(request, timeout=60).read()
    return opener


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the lode checkout to run")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=36.0)
    args = parser.parse_args()
    root = args.root.resolve()

    data = Path(tempfile.mkdtemp(prefix="lode-kill-"))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DEBUG")}
    env.update(LODE_DATA_DIR=str(data), OPENBLAS_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = data / "bootstrap.log"
    with log_path.open("wb") as log:
        lode = subprocess.Popen(
            [sys.executable, "-c", RUN, str(root), str(port)],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while True:
            text = log_path.read_text()
            login = re.search(r"username: (\S+)\s+password: (\S+)", text)
            try:
                if login:
                    opener = signed_in_opener(base, *login.groups())
                    opener.open(f"{base}/search?q=warmup", timeout=60).read()
                    break
            except (OSError, urllib.error.URLError, AttributeError):
                pass
            if lode.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"lode did not start:\n{text[-3000:]}")
            time.sleep(1)

        samples: list[tuple[float, float, str]] = []  # (started, seconds, outcome)
        lock = threading.Lock()
        stop = threading.Event()

        def client(number: int) -> None:
            n = number
            while not stop.is_set():
                query = urllib.parse.quote(QUERIES[n % len(QUERIES)])
                n += 1
                began = time.monotonic()
                try:
                    with opener.open(f"{base}/search?q={query}", timeout=30) as response:
                        response.read()
                        outcome = str(response.status)
                except urllib.error.HTTPError as exc:
                    outcome = str(exc.code)
                except (OSError, urllib.error.URLError):
                    outcome = "connection error"
                    time.sleep(0.05)  # a refused connection returns at once
                with lock:
                    samples.append((began, time.monotonic() - began, outcome))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        time.sleep(args.seconds / 3)
        worker = next(pid for pid, cmd in children(lode.pid).items() if "db_worker" in cmd)
        killed = time.monotonic()
        os.kill(worker, signal.SIGKILL)
        time.sleep(max(0.0, started + args.seconds - time.monotonic()))
        stop.set()
        for thread in threads:
            thread.join()
        still_running = lode.poll() is None

        before = [s for s in samples if s[0] < killed]
        after = [s for s in samples if s[0] >= killed]
        print(f"checkout {root}: {args.clients} clients, {args.seconds:.0f} s, worker killed")
        for name, part in (("before the kill", before), ("after the kill", after)):
            outcomes = Counter(outcome for _, _, outcome in part)
            served = [seconds * 1000 for _, seconds, outcome in part if outcome == "200"]
            print(
                f"  {name}: {len(part)} requests, {dict(outcomes)}; "
                f"p50 {percentile(served, 50):.0f} ms, p95 {percentile(served, 95):.0f} ms"
            )
        print(f"  lode still running at the end: {still_running}")
        for line in log_path.read_text().splitlines():
            if line.startswith("[lode]") and ("worker" in line or "stopping" in line):
                print(f"  log: {line}")
    finally:
        if lode.poll() is None:
            lode.send_signal(signal.SIGTERM)
            try:
                lode.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(lode.pid, signal.SIGKILL)
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
