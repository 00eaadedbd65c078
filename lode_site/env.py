"""Typed readers for lode's environment variables, the one place settings are parsed.

Every helper fails loudly: a bad value stops start-up with a message naming the
variable, the value and what was expected, instead of silently falling back.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean; use one of {sorted(TRUE_WORDS | FALSE_WORDS - {''})}"
    )


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum}")
    return value


def _number(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None


def env_probability(name: str) -> float | None:
    """A probability in (0, 1) from the environment, or None when unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    value = _number(name, raw)
    if not 0.0 < value < 1.0:
        raise ImproperlyConfigured(f"{name}={raw!r} must be strictly between 0 and 1")
    return value


# PostgreSQL's default random_page_cost (4.0) prices an index lookup like a spinning disk's
# seek, so for a few hundred passage ids it joins by a sequential scan of every document
# (SciFact: 3.2 ms where the index lookups take 1.2; bench/README.md, "PostgreSQL BM25").
# 1.1 is the usual value for SSDs and for data that stays in memory.
PG_RANDOM_PAGE_COST = "1.1"


def pg_random_page_cost() -> float | None:
    """`LODE_PG_RANDOM_PAGE_COST`: the planner's `random_page_cost` every PostgreSQL
    connection of lode's starts with (default 1.1); empty leaves the server's own, for a
    connection pooler that refuses startup options (PgBouncer)."""
    raw = os.environ.get("LODE_PG_RANDOM_PAGE_COST", PG_RANDOM_PAGE_COST).strip()
    if not raw:
        return None
    value = _number("LODE_PG_RANDOM_PAGE_COST", raw)
    if not 0.0 < value <= 1000.0:
        raise ImproperlyConfigured(
            f"LODE_PG_RANDOM_PAGE_COST={raw!r} must be above 0 and at most 1000"
        )
    return value


def with_page_cost(options: str, page_cost: float) -> str:
    """libpq startup `options` with `-c random_page_cost=…` added, unless they set it."""
    if "random_page_cost" in options:
        return options
    return f"{options} -c random_page_cost={page_cost:g}".strip()


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


_HOST_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOST_NAME = re.compile(rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*")


def env_hosts(name: str) -> list[str]:
    """Host names, comma-separated (`images.example.org,cdn.example.com`), lower-cased and
    in ASCII (an international name as its `xn--` form, as URLs and the CSP carry it).
    Anything else — a scheme, a path, a port, a `*` — is refused, naming the item."""
    hosts = []
    for item in env_list(name, []):
        try:
            host = item.encode("idna").decode("ascii").lower()
        except UnicodeError:
            host = ""
        if not _HOST_NAME.fullmatch(host):
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not a host name (write only the name, like "
                "images.example.org: no scheme, path, port or wildcard)"
            )
        hosts.append(host)
    return hosts


def folder_roots(name: str, default: str, *, lode_folders: dict[str, Path]) -> list[str]:
    """Folders that folder sources may read (`name`, comma-separated; `~` expanded); unset:
    `default` when it expands to an absolute path (nothing is created); set but empty: none.

    Each must be absolute and must not be, or lie inside, one of `lode_folders` (what each
    is → its path): a root there would hand lode's own files to every folder source. A root
    that holds them is allowed; `externals.folders` keeps lode's folders out of it."""
    raw = os.environ.get(name)
    if raw is None:
        path = os.path.expanduser(default)
        return [path] if os.path.isabs(path) else []
    roots = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        path = os.path.expanduser(item)
        if not os.path.isabs(path) or "\0" in path:
            raise ImproperlyConfigured(f"{name}: {item!r} is not an absolute path")
        real = Path(os.path.realpath(path))
        for what, folder in lode_folders.items():
            own = Path(os.path.realpath(folder))
            if real == own or own in real.parents:
                raise ImproperlyConfigured(
                    f"{name}: {item!r} is inside {what} ({own}); folder sources may never "
                    "read lode's own files"
                )
        roots.append(os.path.normpath(path))
    return roots


def data_dir(base_dir: Path) -> Path:
    """The data folder (`LODE_DATA_DIR`, default `./var/`), created if missing."""
    raw = os.environ.get("LODE_DATA_DIR", "")
    path = Path(raw).expanduser() if raw.strip() else base_dir / "var"
    if not path.is_absolute():
        path = (base_dir / path).resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ImproperlyConfigured(f"LODE_DATA_DIR={str(path)!r} cannot be created: {exc}") from exc
    return path


def secret_key(folder: Path) -> str:
    """`SECRET_KEY` from the environment, else one generated once into the data folder.

    The generated key lives in `<data>/secret_key` (mode 0600) so sessions survive
    restarts; it is never part of the repository.
    """
    from_env = os.environ.get("SECRET_KEY", "").strip()
    if from_env:
        if len(from_env) < 32:
            raise ImproperlyConfigured("SECRET_KEY is set but shorter than 32 characters")
        return from_env
    key_file = folder / "secret_key"
    if key_file.exists():
        key = key_file.read_text(encoding="utf-8").strip()
        if len(key) >= 32:
            return key
        raise ImproperlyConfigured(f"{key_file} is damaged (too short); delete it to regenerate")
    key = secrets.token_urlsafe(50)
    try:
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process won the race; use its key
        return key_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ImproperlyConfigured(f"cannot write the secret key to {key_file}: {exc}") from exc
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(key)
    return key


# How much of the SQLite file each connection maps (`PRAGMA mmap_size`); the rest is read
# through SQLite's own cache.
SQLITE_MMAP_BYTES = 256 * 1024 * 1024


def database(folder: Path) -> dict[str, Any]:
    """Parse `DATABASE_URL`; default is the SQLite file `<data>/lode.sqlite3`."""
    import dj_database_url

    raw = os.environ.get("DATABASE_URL", "").strip()
    if not raw:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(folder / "lode.sqlite3"),
            # Each web thread keeps its connection for a minute, as on PostgreSQL: opening
            # one per request re-read the schema and started every request's page cache
            # cold (bench/throughput.py).
            "CONN_MAX_AGE": 60,
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                # mmap_size: pages are read from the OS page cache that every connection
                # shares instead of being copied into each connection's own cache (several
                # web threads read the same index pages; bench/request_cpu.py). Reads only:
                # SQLite writes through its own cache as before.
                "init_command": (
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; "
                    f"PRAGMA mmap_size={SQLITE_MMAP_BYTES};"
                ),
            },
        }
    try:
        config = dj_database_url.parse(raw, conn_max_age=60)
    except Exception as exc:  # dj-database-url raises several types for bad URLs
        raise ImproperlyConfigured(f"DATABASE_URL could not be parsed: {exc}") from exc
    engine = config.get("ENGINE", "")
    if engine not in {"django.db.backends.sqlite3", "django.db.backends.postgresql"}:
        raise ImproperlyConfigured(
            f"DATABASE_URL names {engine or 'an unknown engine'}; lode supports sqlite:// and "
            "postgres:// only"
        )
    if engine == "django.db.backends.postgresql" and not config.get("NAME"):
        raise ImproperlyConfigured("DATABASE_URL for PostgreSQL must name a database")
    return config


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={raw!r} must be one of: {', '.join(choices)}")
    return value
