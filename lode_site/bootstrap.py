"""Set up and run lode, or run its tests, from a fresh checkout. Standard library only, so
any `python3` (even one too old for Django) can start it:

    python3 -m lode_site.bootstrap run     # create .venv, install, migrate, serve on :8000
    python3 -m lode_site.bootstrap test    # create .venv, install with dev extras, run pytest

It finds a Python >= 3.12 (this one, `python3.13`/`python3.12` on PATH, or a pyenv
install), creates `.venv/` at the project root with it, and (re)installs the pinned
dependencies whenever `pyproject.toml` changes.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
VENV_PYTHON = VENV / "bin" / "python"
MIN_VERSION = (3, 12)


def say(message: str) -> None:
    print(f"[lode] {message}", flush=True)


def python_version(executable: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [executable, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
        return int(out[0]), int(out[1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def candidate_pythons() -> list[str]:
    found = [sys.executable]
    for name in ("python3.14", "python3.13", "python3.12", "python3"):
        path = shutil.which(name)
        if path:
            found.append(path)
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    found.extend(sorted(glob.glob(f"{pyenv_root}/versions/3.1[2-9]*/bin/python3"), reverse=True))
    return list(dict.fromkeys(found))


def find_python() -> str:
    for executable in candidate_pythons():
        version = python_version(executable)
        if version and version >= MIN_VERSION:
            return executable
    sys.exit(
        "[lode] lode needs Python 3.12 or newer and none was found.\n"
        "  Debian 13:  sudo apt install python3 python3-venv   (ships 3.13)\n"
        "  Debian 12:  install 3.12 with pyenv (https://github.com/pyenv/pyenv), e.g.\n"
        "              pyenv install 3.12 — then run this command again."
    )


def ensure_venv(*, dev: bool) -> None:
    version = python_version(str(VENV_PYTHON)) if VENV_PYTHON.exists() else None
    if version is None or version < MIN_VERSION:
        if VENV.exists():
            say(f"replacing {VENV} (its Python is missing or older than 3.12)")
            shutil.rmtree(VENV)
        python = find_python()
        say(f"creating {VENV} with {python}")
        result = subprocess.run([python, "-m", "venv", str(VENV)])
        if result.returncode != 0:
            sys.exit(
                "[lode] could not create the virtual environment; on Debian install "
                "the venv module: sudo apt install python3-venv"
            )
    extras = ".[dev]" if dev else "."
    stamp = VENV / f".lode-installed{'-dev' if dev else ''}"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    # A dev install is a superset of the runtime one, so `run` after `test` installs nothing.
    satisfied_by = [stamp] if dev else [stamp, VENV / ".lode-installed-dev"]
    if any(path.exists() and path.read_text() == digest for path in satisfied_by):
        return
    say(f"installing lode and its pinned dependencies ({extras}) into .venv")
    pip = [str(VENV_PYTHON), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--upgrade", "pip"], check=True, cwd=ROOT)
    subprocess.run([*pip, "install", "-e", extras], check=True, cwd=ROOT)
    stamp.write_text(digest)


def manage(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([str(VENV_PYTHON), "manage.py", *args], check=True, cwd=ROOT, env=env)


def run(args: argparse.Namespace) -> int:
    ensure_venv(dev=False)
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    if args.debug:
        env["DEBUG"] = "1"
    manage("migrate", "--noinput", env=env)
    manage("collectstatic", "--noinput", "-v", "0", env=env)
    manage("lode_first_user", "--url", f"http://{args.host}:{args.port}/", env=env)
    say(f"serving lode at http://{args.host}:{args.port}/  (Ctrl-C or SIGTERM stops it)")
    say("with the background worker (manage.py db_worker) that embeds saved notes")
    return supervise(
        {
            "web server": [
                str(VENV_PYTHON),
                "manage.py",
                "runserver",
                f"{args.host}:{args.port}",
                "--noreload",
            ],
            "worker": [str(VENV_PYTHON), "manage.py", "db_worker", "--no-reload"],
        },
        env=env,
    )


# Signals that stop lode as Ctrl-C does: SIGTERM (kill, systemd, docker stop), SIGHUP (the
# terminal closed) and SIGINT (Ctrl-C).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
STOP_GRACE_SECONDS = 10.0


def _die_with_parent(supervisor_pid: int) -> Callable[[], None]:
    """A `preexec_fn` (it runs in the child, before exec): ask Linux to send SIGTERM when the
    supervisor dies, so even a `kill -9` of bootstrap cannot leave the web server holding
    the port."""

    def set_parent_death_signal() -> None:
        if not sys.platform.startswith("linux"):
            return
        import ctypes

        pr_set_pdeathsig = 1
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
        if os.getppid() != supervisor_pid:  # it died before prctl took effect
            os._exit(1)

    return set_parent_death_signal


def _signal_group(child: subprocess.Popen[bytes], signum: int) -> None:
    """Send `signum` to the child's process group (each child leads its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signum)


def stop_all(
    children: dict[str, subprocess.Popen[bytes]], grace: float = STOP_GRACE_SECONDS
) -> None:
    """Ask every running child's process group to stop (SIGTERM), wait up to `grace`
    seconds, then kill (SIGKILL) whatever is left, and reap every child."""
    running = [child for child in children.values() if child.returncode is None]
    for child in running:
        if child.poll() is None:
            _signal_group(child, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for child in running:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(child, signal.SIGKILL)
            child.wait()
        # Anything the child started and left in its group goes too (a no-op when empty;
        # the group id cannot have been reused while a member is alive).
        _signal_group(child, signal.SIGKILL)


def _install_stop_handlers(received: list[int]) -> dict[int, Callable | int | None]:
    """Record stop signals in `received` instead of dying on them; returns the previous
    handlers. A signal that was ignored when lode started stays ignored, except SIGTERM:
    `nohup` ignores SIGHUP and a shell ignores SIGINT in background jobs on purpose."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous: dict[int, Callable | int | None] = {}
    for signum in STOP_SIGNALS:
        if signum != signal.SIGTERM and signal.getsignal(signum) == signal.SIG_IGN:
            continue
        previous[signum] = signal.signal(signum, on_signal)
    return previous


def supervise(commands: dict[str, list[str]], *, env: dict[str, str]) -> int:
    """Run `commands` side by side; stop them all on SIGTERM, SIGHUP or Ctrl-C, or as soon
    as one exits.

    A silently dead worker would leave dense search stale with no visible sign, so either
    process dying stops both and the exit code says which failed. Each child leads its own
    process group: a signal sent to lode (by a service manager, `kill`, or a closed
    terminal) is forwarded to the groups, which get `STOP_GRACE_SECONDS` to exit before
    they are killed — so the port is free when this returns.
    """
    received: list[int] = []
    previous = _install_stop_handlers(received)
    children: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, command in commands.items():
            if received:
                break
            children[name] = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                start_new_session=True,  # its own process group, reachable with killpg
                preexec_fn=_die_with_parent(os.getpid()),
            )
        while not received:
            for name, child in children.items():
                code = child.poll()
                if code is not None:
                    say(f"the {name} exited (code {code}); stopping lode")
                    stop_all(children)
                    return code or 1
            time.sleep(0.2)
        say(f"{signal.Signals(received[0]).name} received; stopping lode")
        stop_all(children)
        return 0
    finally:
        # Whatever happened above (even an exception), no child outlives the supervisor.
        stop_all(children)
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def test(args: argparse.Namespace, extra: list[str]) -> int:
    ensure_venv(dev=True)
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    database = env.get("DATABASE_URL", "") or "SQLite"
    say(f"running the test suite on {database.split('@')[-1]}")
    return subprocess.run([str(VENV_PYTHON), "-m", "pytest", *extra], cwd=ROOT, env=env).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m lode_site.bootstrap",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run", help="set up and serve lode")
    run_parser.add_argument("--host", default="127.0.0.1")
    run_parser.add_argument("--port", default=8000, type=int)
    run_parser.add_argument("--debug", action="store_true", help="turn on Django's DEBUG")
    sub.add_parser("test", help="set up and run the tests (extra arguments go to pytest)")
    args, extra = parser.parse_known_args(argv)
    if args.command == "run":
        if extra:
            parser.error(f"unrecognised arguments: {' '.join(extra)}")
        return run(args)
    return test(args, extra)


if __name__ == "__main__":
    sys.exit(main())
