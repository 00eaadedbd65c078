"""`bootstrap run` stops its children on SIGTERM and SIGHUP as on Ctrl-C.

End to end with real processes: `python -m lode_site.bootstrap run --port <free port>` with
its own data folder, wait until the web server answers on the port, send the signal, then
check that bootstrap exited, that nothing listens on the port and that neither child (web
server, db_worker) is alive. The third case starts lode the way a script would, in the
background under `nohup` (SIGHUP ignored, and SIGINT ignored because a non-interactive
shell ignores it in background jobs), and stops it with SIGTERM.

Before the fix, SIGTERM killed bootstrap alone and left both children running on the port.
The data folder is shared by the module so only the first start pays for the migrations.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import (
    STOP_TIMEOUT,
    assert_stopped_cleanly,
    child_env,
    free_port,
    wait_until_serving,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MAX_SEARCHED_BYTES = 64 * 1024 * 1024


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lode-data")


def assert_login_shown_not_stored(output: str, data_dir: Path) -> None:
    """The first start prints the first account's password; a later one says how to set a
    new one. Neither leaves the password in any file of the data folder."""
    printed = re.search(r"password: (\S+)", output)
    if printed is None:
        assert "changepassword" in output, output[-2000:]
        return
    for path in data_dir.rglob("*"):
        # Model weights (hundreds of MB) are skipped: lode writes them from the model files.
        if path.is_file() and path.stat().st_size < MAX_SEARCHED_BYTES:
            assert printed.group(1).encode() not in path.read_bytes(), path


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_run_stops_its_children_on_signal(signum, data_dir, tmp_path, started):
    port = free_port()
    log = tmp_path / "bootstrap.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "lode_site.bootstrap", "run", "--port", str(port)],
            cwd=ROOT,
            env=child_env(data_dir),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # as from a service manager: no terminal, own group
        )
    started["pids"].add(process.pid)
    children = wait_until_serving(process.pid, port, log)
    started["pids"] |= children
    assert_login_shown_not_stored(log.read_text(), data_dir)

    process.send_signal(signum)
    try:
        code = process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"bootstrap did not stop on {signum.name}:\n{log.read_text()[-2000:]}")
    assert code == 0, log.read_text()[-2000:]
    assert_stopped_cleanly(process.pid, children, port, log)
    assert f"{signum.name} received" in log.read_text()


def test_background_nohup_run_stops_on_sigterm(data_dir, tmp_path, started):
    """`nohup python3 -m lode_site.bootstrap run &` from a script: SIGHUP and SIGINT arrive
    ignored, bootstrap is reparented once the script exits, and SIGTERM still stops it."""
    port = free_port()
    log = tmp_path / "bootstrap.log"
    script = (
        f"nohup {sys.executable} -m lode_site.bootstrap run --port {port} "
        f'> "{log}" 2>&1 < /dev/null &\necho $!\n'
    )
    shell = subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env=child_env(data_dir),
        capture_output=True,
        text=True,
        timeout=30,
        start_new_session=True,
    )
    pid = int(shell.stdout.strip())
    started["pids"].add(pid)
    children = wait_until_serving(pid, port, log)
    started["pids"] |= children
    ignored = int(
        next(
            line.split()[1]
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("SigIgn:")
        ),
        16,
    )
    assert ignored & (1 << (signal.SIGHUP - 1)), "nohup should have ignored SIGHUP"

    os.kill(pid, signal.SIGTERM)
    assert_stopped_cleanly(pid, children, port, log)
    assert "SIGTERM received" in log.read_text()
