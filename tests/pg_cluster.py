"""A private PostgreSQL cluster a test (or a benchmark) starts, restarts and stops itself.

Never the shared server at 127.0.0.1:5432: restarting that would break everyone else's
tests. `PrivatePostgres` runs `initdb` into a temporary folder (trust auth, one superuser
`postgres`), then `pg_ctl start|stop|restart` on a free port of 127.0.0.1 with its socket in
that folder. As root the binaries run as the `postgres` user (`runuser`), since PostgreSQL
refuses to run as root.

    with PrivatePostgres() as pg:          # initdb + start
        url = pg.create_database("lode")   # postgres://postgres@127.0.0.1:PORT/lode
        pg.restart()                       # fast shutdown: every connection is dropped
    # stopped and its folder removed

`available()` says whether the binaries are here (tests skip with its reason otherwise).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
USER = "postgres"


def bin_dir() -> Path | None:
    """The newest installed PostgreSQL's bin folder with initdb and pg_ctl, or None."""
    override = os.environ.get("LODE_PG_BIN")
    candidates = [Path(override)] if override else BIN_DIRS
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    found = shutil.which("pg_ctl")
    return Path(found).parent if found and (Path(found).parent / "initdb").exists() else None


def available() -> tuple[bool, str]:
    """(True, "") when a private cluster can be started here, else (False, why not)."""
    if bin_dir() is None:
        return False, "PostgreSQL server binaries (initdb, pg_ctl) are not installed"
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            return False, "running as root without runuser to drop to the postgres user"
        try:
            import pwd

            pwd.getpwnam(USER)
        except KeyError:
            return False, "running as root and there is no postgres user to run the server"
    return True, ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivatePostgres:
    """One throwaway cluster; `url` points at its `postgres` database."""

    def __init__(self, port: int | None = None, *, folder: Path | None = None) -> None:
        ok, why = available()
        if not ok:
            raise RuntimeError(why)
        self.bin = bin_dir()
        self.port = port or free_port()
        self._own_folder = folder is None
        self.folder = Path(folder or tempfile.mkdtemp(prefix="lode-pg-"))
        self.data = self.folder / "data"
        self.socket_dir = self.folder / "socket"
        self.log = self.folder / "server.log"
        self._initialised = False

    # --- addresses ----------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        return f"postgres://{USER}@127.0.0.1:{self.port}/{name}"

    # --- running the binaries -----------------------------------------------------------

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", USER, "--", *command]
        return subprocess.run(command, check=True, capture_output=True, text=True, timeout=timeout)

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1"
        try:
            self._run(
                "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                "-o", options, *extra, action,
            )  # fmt: skip
        except subprocess.CalledProcessError as exc:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"pg_ctl {action} failed: {exc.stderr}\n{tail}") from exc

    def init(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.folder, USER)
            shutil.chown(self.socket_dir, USER)
        self._run(
            "initdb", "-D", str(self.data), "-U", USER, "--auth=trust", "--no-sync",
            "-E", "UTF8", "--locale=C.UTF-8",
        )  # fmt: skip
        # Small and quick: a test cluster needs neither durability nor many connections.
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
            conf.write("max_connections = 50\nshared_buffers = 32MB\n")
        self._initialised = True

    def start(self) -> None:
        if not self._initialised:
            self.init()
        self._pg_ctl("start")
        self.wait_ready()

    def stop(self) -> None:
        """Fast shutdown: open sessions are disconnected, as in a real restart."""
        self._pg_ctl("stop", "-m", "fast")

    def restart(self) -> None:
        self._pg_ctl("restart", "-m", "fast")
        self.wait_ready()

    def wait_ready(self, timeout: float = 60) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def create_database(self, name: str) -> str:
        """Create a database in this cluster; returns its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    def cleanup(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self.stop()
        finally:
            if self._own_folder:
                shutil.rmtree(self.folder, ignore_errors=True)

    # --- context manager ----------------------------------------------------------------

    def __enter__(self) -> PrivatePostgres:
        try:
            self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()
