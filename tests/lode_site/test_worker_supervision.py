"""`bootstrap run` supervises its background worker: a worker that dies is started again
with back-off while the web server keeps answering; the web server dying still stops lode.

The back-off schedule is checked as pure functions; the rest end to end with real
processes (`python -m lode_site.bootstrap run` on a free port with a private data folder),
reusing the helpers of `test_bootstrap_signals`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from lode_site import bootstrap
from lode_site.bootstrap import failures_in_a_row, restart_delay
from tests.factories import (
    STOP_TIMEOUT,
    accepts_connections,
    assert_stopped_cleanly,
    child_env,
    children_of,
    free_port,
    is_alive,
    wait_gone,
    wait_until_serving,
)

ROOT = Path(__file__).resolve().parents[2]
RESTART_TIMEOUT = 60.0


# --- the schedule ------------------------------------------------------------------------


def test_restart_delays_double_from_one_second_up_to_a_minute() -> None:
    assert [restart_delay(n) for n in range(1, 10)] == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert restart_delay(10_000) == bootstrap.RESTART_MAX_DELAY_SECONDS
    with pytest.raises(ValueError):
        restart_delay(0)


def test_the_streak_of_exits_starts_again_once_the_worker_stayed_up() -> None:
    stable = bootstrap.RESTART_STABLE_SECONDS
    assert failures_in_a_row(0, 0.5) == 1
    assert failures_in_a_row(3, 0.5) == 4  # dies at once again: wait longer
    assert failures_in_a_row(3, stable - 1) == 4
    assert failures_in_a_row(6, stable) == 1  # ran a while: the next restart is quick
    assert restart_delay(failures_in_a_row(6, stable + 300)) == 1


# --- end to end --------------------------------------------------------------------------


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def worker_pid(bootstrap_pid: int) -> int | None:
    found = [pid for pid in children_of(bootstrap_pid) if "db_worker" in cmdline(pid)]
    return found[0] if found else None


def web_pid(bootstrap_pid: int) -> int:
    return next(pid for pid in children_of(bootstrap_pid) if "gunicorn" in cmdline(pid))


class Prober(threading.Thread):
    """Asks for the login page in a loop, counting answers and connection errors."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/accounts/login/"
        self.stopping = threading.Event()
        self.answered = 0
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    assert response.status == 200
                self.answered += 1
            except (OSError, urllib.error.URLError, AssertionError) as exc:
                self.errors.append(repr(exc))
            self.stopping.wait(0.1)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=15)


def start_lode(data_dir: Path, log: Path, port: int) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "lode_site.bootstrap", "run", "--port", str(port)],
            cwd=ROOT,
            env=child_env(data_dir),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lode-supervised")


def wait_until_answering(port: int, log: Path) -> None:
    """Wait for a first page: gunicorn's processes load the embedding model before it."""
    deadline = time.monotonic() + RESTART_TIMEOUT
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=30):
                return
        except (OSError, urllib.error.URLError):
            time.sleep(0.5)
    pytest.fail(f"no page within {RESTART_TIMEOUT:.0f} s:\n{log.read_text()[-3000:]}")


def wait_for_new_worker(pid: int, old: int, log: Path) -> int:
    deadline = time.monotonic() + RESTART_TIMEOUT
    while time.monotonic() < deadline:
        new = worker_pid(pid)
        if new is not None and new != old:
            return new
        if not is_alive(pid):
            pytest.fail(f"bootstrap exited after the worker died:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"no new worker within {RESTART_TIMEOUT:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.mark.slow
def test_a_killed_worker_is_restarted_while_the_site_keeps_answering(
    data_dir, tmp_path, started
) -> None:
    port = free_port()
    log = tmp_path / "bootstrap.log"
    process = start_lode(data_dir, log, port)
    started["pids"].add(process.pid)
    started["pids"] |= wait_until_serving(process.pid, port, log)
    web = web_pid(process.pid)
    first = worker_pid(process.pid)
    assert first is not None

    wait_until_answering(port, log)
    prober = Prober(port)
    prober.start()
    try:
        time.sleep(1)
        os.kill(first, signal.SIGKILL)
        second = wait_for_new_worker(process.pid, first, log)
        started["pids"].add(second)
        # Killed again at once: the next restart waits twice as long.
        time.sleep(0.5)
        os.kill(second, signal.SIGKILL)
        third = wait_for_new_worker(process.pid, second, log)
        started["pids"].add(third)
        time.sleep(3)
    finally:
        prober.stop()

    text = log.read_text()
    assert "the worker exited (code -9); restarting it in 1 s" in text, text[-3000:]
    assert "the worker exited (code -9); restarting it in 2 s" in text, text[-3000:]
    assert text.count("restarted the worker") == 2
    assert "stopping lode" not in text
    assert prober.errors == [] and prober.answered > 10, prober.errors[:5]
    assert is_alive(process.pid) and web_pid(process.pid) == web  # the same web server

    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"bootstrap did not stop on SIGTERM:\n{log.read_text()[-2000:]}")
    assert code == 0, log.read_text()[-2000:]
    assert_stopped_cleanly(process.pid, {web, third}, port, log)


@pytest.mark.slow
def test_the_web_server_dying_still_stops_lode(data_dir, tmp_path, started) -> None:
    port = free_port()
    log = tmp_path / "bootstrap.log"
    process = start_lode(data_dir, log, port)
    started["pids"].add(process.pid)
    children = wait_until_serving(process.pid, port, log)
    started["pids"] |= children
    worker = worker_pid(process.pid)

    os.killpg(web_pid(process.pid), signal.SIGKILL)  # gunicorn and its processes
    try:
        code = process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"bootstrap kept running without its web server:\n{log.read_text()[-2000:]}")
    assert code != 0
    assert "the web server exited (code -9); stopping lode" in log.read_text()
    assert wait_gone(worker), "the worker outlived lode"
    assert not accepts_connections(port)
