"""Backup and restore of the default install: the SQLite database in the data folder, the
uploads and the settings that matter.

A backup is a folder (or the same as a `.tar.gz`):

    db.sqlite3       the database, copied with SQLite's online backup API in one step: a
                     consistent snapshot while lode keeps writing (WAL readers never block
                     writers), checked with `PRAGMA integrity_check`
    uploads/         the uploaded files sources read (`<data>/uploads`)
    secret_key       the generated secret key, when the key is not set in the environment
                     (sessions and public-link view counts keep working after a restore)
    manifest.json    lode's version, when, each app's applied migrations, counts of what the
                     database holds, and the settings that shaped it (`BackupManifest`)

The vector store (Chroma) is not copied: vectors are derived from passages, so a restore
forgets every vector record and rebuilds them (`lode_index repair`'s functions), then checks
health. A restore refuses a backup whose database holds migrations this code does not have
(made by a newer lode), and an install that already holds notes unless forced; what it
replaces is kept beside it (`*.before-restore-<time>`), never deleted.

On PostgreSQL neither applies: `BackupRefused` says to use pg_dump / pg_restore
(docs/deploy.md gives the commands).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tarfile
import tempfile
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.db import connection, connections
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone

from notes.export import lode_version
from retrieval.index.embeddings import current_manifest
from retrieval.index.health import RepairReport, repair_indexes
from retrieval.models import PassageVector, VectorIndexState

FORMAT = "lode-backup"
FORMAT_VERSION = 1
DATABASE_FILE = "db.sqlite3"
MANIFEST_FILE = "manifest.json"
UPLOADS = "uploads"
SECRET_KEY_FILE = "secret_key"
ARCHIVE_SUFFIX = ".tar.gz"
MAX_MANIFEST_BYTES = 1_000_000
# Settings whose values shaped what the database holds: passages are chunked under the
# chunk bounds, notes were accepted under the size limit, dates shown in the time zone.
# A restore under other values still works; the manifest lets an operator see the change.
MATTERING_SETTINGS = (
    "LODE_CHUNK_MAX_WORDS",
    "LODE_CHUNK_OVERLAP_WORDS",
    "LODE_CHUNK_MAX_CHARS",
    "LODE_MAX_NOTE_BYTES",
    "LODE_SOURCE_MAX_FILE_BYTES",
    "LODE_SOURCE_FOLDER_ROOTS",
    "LODE_LEXICAL_BACKEND",
    "TIME_ZONE",
)
# Tables counted in the manifest and after a restore.
COUNTED_TABLES = (
    "auth_user",
    "spaces_space",
    "notes_document",
    "notes_version",
    "retrieval_passage",
    "externals_source",
)
POSTGRES_REFUSAL = (
    "lode runs on PostgreSQL here: back it up with pg_dump and restore with pg_restore "
    "(docs/deploy.md, “Backup and restore”), and copy the uploads folder ({uploads}) "
    "beside the dump. lode_backup and lode_restore handle the default SQLite install only."
)


class BackupRefused(Exception):
    """The backup or restore cannot go ahead; the message says why and what to do."""


@dataclass
class BackupManifest:
    """What `manifest.json` holds; `to_dict`/`from_dict` are its only writer and reader."""

    lode_version: str
    created_at: str
    migrations: dict[str, list[str]]
    counts: dict[str, int]
    settings: dict[str, object]
    embedding_manifest: str
    data_dir: str
    uploads_files: int = 0
    secret_key_included: bool = False
    format: str = FORMAT
    format_version: int = FORMAT_VERSION

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> BackupManifest:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise BackupRefused(f"{MANIFEST_FILE} is not a lode backup's manifest")
        version = data.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise BackupRefused(
                f"the backup's format version is {version!r}; this lode reads up to "
                f"{FORMAT_VERSION} (upgrade lode to restore it)"
            )
        known = {name for name in cls.__dataclass_fields__}
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except TypeError as exc:
            raise BackupRefused(f"{MANIFEST_FILE} is incomplete: {exc}") from None


@dataclass
class RestoreReport:
    manifest: BackupManifest
    counts: dict[str, int]
    kept_aside: list[str] = field(default_factory=list)
    repair: RepairReport | None = None


# --- the database file --------------------------------------------------------------------


def sqlite_database_path() -> Path:
    """The SQLite file lode uses; `BackupRefused` on PostgreSQL, naming pg_dump."""
    if connection.vendor != "sqlite":
        raise BackupRefused(POSTGRES_REFUSAL.format(uploads=Path(settings.DATA_DIR) / UPLOADS))
    name = str(settings.DATABASES["default"]["NAME"])
    if name == ":memory:" or name.startswith("file:"):
        raise BackupRefused("lode's database is in memory here; there is no file to back up")
    return Path(name)


def copy_database(source: Path, target: Path) -> None:
    """Copy one SQLite database onto another with the online backup API in a single step:
    the copy is the source as of one instant, whatever other connections write meanwhile."""
    reader = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30)
    try:
        writer = sqlite3.connect(target, timeout=30)
        try:
            reader.backup(writer)  # pages=-1: everything in one step, one read snapshot
        finally:
            writer.close()
    finally:
        reader.close()


def integrity(path: Path) -> str:
    """`PRAGMA integrity_check` of the database file: "ok", or what it found."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as check:
        rows = check.execute("PRAGMA integrity_check").fetchall()
    return "; ".join(str(row[0]) for row in rows[:10])


def migration_state(path: Path) -> dict[str, list[str]]:
    """Each app's applied migrations in the database file, by name."""
    state: dict[str, list[str]] = {}
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        try:
            rows = db.execute("SELECT app, name FROM django_migrations ORDER BY app, name")
        except sqlite3.DatabaseError as exc:
            raise BackupRefused(f"the backup's database has no migration table: {exc}") from None
        for app, name in rows:
            state.setdefault(app, []).append(name)
    return state


def table_counts(path: Path) -> dict[str, int]:
    # The table names are the constants above, never input.
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return {
            table: db.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]
            for table in COUNTED_TABLES
        }


def code_migrations() -> dict[str, set[str]]:
    """The migrations this code has on disk, per app."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    known: dict[str, set[str]] = {}
    for app, name in loader.disk_migrations:
        known.setdefault(app, set()).add(name)
    return known


def newer_migrations(applied: dict[str, list[str]]) -> dict[str, list[str]]:
    """Migrations applied in a backup that this code does not have: a newer lode made it."""
    known = code_migrations()
    return {
        app: unknown
        for app, names in applied.items()
        if (unknown := [name for name in names if name not in known.get(app, set())])
    }


# --- backup --------------------------------------------------------------------------------


def _secret_key_file() -> Path | None:
    """The data folder's generated secret key, when it is the one in use."""
    if os.environ.get("SECRET_KEY", "").strip():
        return None
    path = Path(settings.DATA_DIR) / SECRET_KEY_FILE
    return path if path.is_file() else None


def _stamp() -> str:
    return timezone.now().strftime("%Y%m%dT%H%M%SZ")


def take_backup(destination: Path) -> BackupManifest:
    """Write a backup to `destination`: a new folder, or a `.tar.gz` file."""
    database = sqlite_database_path()
    archive = destination.name.endswith(ARCHIVE_SUFFIX)
    if destination.exists() and (archive or not destination.is_dir() or any(destination.iterdir())):
        raise BackupRefused(f"{destination} exists; name a new folder or .tar.gz file")
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=destination.parent, prefix=".lode-backup-"))
    try:
        manifest = _write_backup(database, staging)
        if archive:
            partial = destination.with_name(destination.name + ".partial")
            with tarfile.open(partial, "w:gz") as tar:
                for item in sorted(staging.iterdir()):
                    tar.add(item, arcname=item.name)
            partial.replace(destination)
        else:
            destination.mkdir(exist_ok=True)
            for item in staging.iterdir():
                item.replace(destination / item.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def _write_backup(database: Path, folder: Path) -> BackupManifest:
    copy = folder / DATABASE_FILE
    copy_database(database, copy)
    checked = integrity(copy)
    if checked != "ok":
        raise BackupRefused(f"the copied database failed its integrity check: {checked}")
    uploads = Path(settings.DATA_DIR) / UPLOADS
    files = 0
    if uploads.is_dir():
        shutil.copytree(uploads, folder / UPLOADS, symlinks=True)
        files = sum(len(names) for _, _, names in os.walk(folder / UPLOADS))
    secret = _secret_key_file()
    if secret is not None:
        shutil.copy2(secret, folder / SECRET_KEY_FILE)
        os.chmod(folder / SECRET_KEY_FILE, 0o600)
    manifest = BackupManifest(
        lode_version=lode_version(),
        created_at=timezone.now().isoformat(),
        migrations=migration_state(copy),
        counts=table_counts(copy),
        settings={name: getattr(settings, name, None) for name in MATTERING_SETTINGS}
        | {"SECRET_KEY": "the data folder's secret_key" if secret else "the environment"},
        embedding_manifest=current_manifest().key,
        data_dir=str(settings.DATA_DIR),
        uploads_files=files,
        secret_key_included=secret is not None,
    )
    text = json.dumps(manifest.to_dict(), indent=2, default=str) + "\n"
    (folder / MANIFEST_FILE).write_text(text, encoding="utf-8")
    return manifest


# --- restore -------------------------------------------------------------------------------


def _unpack(source: Path, into: Path) -> Path:
    """The backup folder: `source` itself, or its archive unpacked into `into` (members
    outside the folder, links and devices refused by tarfile's data filter)."""
    if source.is_dir():
        return source
    if not source.name.endswith(ARCHIVE_SUFFIX) or not source.is_file():
        raise BackupRefused(f"{source} is neither a backup folder nor a {ARCHIVE_SUFFIX} file")
    try:
        with tarfile.open(source, "r:gz") as tar:
            tar.extractall(into, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise BackupRefused(f"{source} cannot be unpacked: {exc}") from None
    return into


def read_backup(folder: Path) -> BackupManifest:
    """The backup's manifest, and its database checked: present and intact."""
    path = folder / MANIFEST_FILE
    if not path.is_file() or path.stat().st_size > MAX_MANIFEST_BYTES:
        raise BackupRefused(f"{folder} holds no {MANIFEST_FILE}: not a lode backup")
    try:
        manifest = BackupManifest.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BackupRefused(f"{MANIFEST_FILE} cannot be read: {exc}") from None
    database = folder / DATABASE_FILE
    if not database.is_file():
        raise BackupRefused(f"the backup holds no {DATABASE_FILE}")
    try:
        checked = integrity(database)
    except sqlite3.DatabaseError as exc:
        raise BackupRefused(f"the backup's database cannot be opened: {exc}") from None
    if checked != "ok":
        raise BackupRefused(f"the backup's database failed its integrity check: {checked}")
    return manifest


def install_holds_data(database: Path) -> bool:
    """Whether the install has any account or document (a fresh one has neither)."""
    if not database.is_file():
        return False
    try:
        with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
            if not tables:
                return False  # a file opened but never migrated
            if not {"auth_user", "notes_document"} <= tables:
                return True  # something is there that is not lode
            users = db.execute("SELECT COUNT(*) FROM auth_user").fetchone()[0]
            documents = db.execute("SELECT COUNT(*) FROM notes_document").fetchone()[0]
    except sqlite3.DatabaseError:
        return True  # something is there that is not an empty lode
    return users > 0 or documents > 0


def lode_running() -> bool:
    """Whether lode's server (its pid file in the data folder) is running."""
    pid_file = Path(settings.DATA_DIR) / "gunicorn.pid"
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def _keep_aside(path: Path, stamp: str) -> str:
    aside = path.with_name(f"{path.name}.before-restore-{stamp}")
    path.replace(aside)
    return str(aside)


def restore_backup(source: Path, *, force: bool = False, vectors: bool = True) -> RestoreReport:
    """Restore the backup at `source` (folder or `.tar.gz`) into this install; see the
    module docstring. `vectors=False` leaves re-embedding to the worker (`db_worker`)."""
    database = sqlite_database_path()
    with tempfile.TemporaryDirectory(dir=Path(settings.DATA_DIR), prefix=".restore-") as work:
        folder = _unpack(source, Path(work))
        manifest = read_backup(folder)
        newer = newer_migrations(migration_state(folder / DATABASE_FILE))
        if newer:
            listed = "; ".join(f"{app}: {', '.join(names)}" for app, names in sorted(newer.items()))
            raise BackupRefused(
                f"the backup was made by a newer lode ({manifest.lode_version}); this code "
                f"lacks its migrations ({listed}). Upgrade lode, then restore."
            )
        if not force and lode_running():
            raise BackupRefused("lode is running (its server's pid file is live); stop it first")
        if not force and install_holds_data(database):
            raise BackupRefused(
                f"this install already holds accounts or notes ({database}); restoring would "
                "replace them. Use --force to restore anyway (the current database and "
                "uploads are kept beside them as *.before-restore-<time>)."
            )
        stamp = _stamp()
        kept: list[str] = []
        connections.close_all()
        if database.exists() and install_holds_data(database):
            aside = database.with_name(f"{database.name}.before-restore-{stamp}")
            copy_database(database, aside)
            kept.append(str(aside))
        copy_database(folder / DATABASE_FILE, database)
        uploads = Path(settings.DATA_DIR) / UPLOADS
        if uploads.exists() and any(uploads.iterdir()):
            kept.append(_keep_aside(uploads, stamp))
        elif uploads.exists():
            uploads.rmdir()
        if (folder / UPLOADS).is_dir():
            shutil.copytree(folder / UPLOADS, uploads, symlinks=True)
        secret = folder / SECRET_KEY_FILE
        target = Path(settings.DATA_DIR) / SECRET_KEY_FILE
        if secret.is_file() and not os.environ.get("SECRET_KEY", "").strip():
            if target.is_file() and target.read_bytes() != secret.read_bytes():
                kept.append(_keep_aside(target, stamp))
            shutil.copy2(secret, target)
            os.chmod(target, 0o600)
    # A backup from an older lode gets this code's later migrations (a newer one was refused).
    call_command("migrate", interactive=False, verbosity=0)
    forget_vectors()
    return RestoreReport(
        manifest=manifest,
        counts=table_counts(database),
        kept_aside=kept,
        repair=repair_indexes(vectors=vectors),
    )


def forget_vectors() -> None:
    """The restored database's vector records name vectors in a store that was not restored:
    forget them (and any rebuild in progress), so the repair embeds every head passage."""
    PassageVector.objects.all().delete()
    VectorIndexState.objects.all().delete()
