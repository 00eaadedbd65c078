"""lode_site.env: typed environment readers that fail loudly, DATABASE_URL parsing, the
generated secret key, and `manage.py check` refusing a bad environment."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from lode_site import env

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------
# env_bool / env_int / env_list / env_choice
# --------------------------------------------------------------------------


def test_env_bool_default_when_unset(monkeypatch):
    monkeypatch.delenv("LODE_TEST_FLAG", raising=False)
    assert env.env_bool("LODE_TEST_FLAG", True) is True
    assert env.env_bool("LODE_TEST_FLAG", False) is False


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("true", True), ("TRUE", True), (" yes ", True), ("on", True),
     ("0", False), ("false", False), ("No", False), ("off", False), ("", False)],
)  # fmt: skip
def test_env_bool_accepts_known_words(monkeypatch, raw, expected):
    monkeypatch.setenv("LODE_TEST_FLAG", raw)
    assert env.env_bool("LODE_TEST_FLAG", not expected) is expected


@pytest.mark.parametrize("raw", ["maybe", "2", "yess", "t", "enabled", "-1"])
def test_env_bool_rejects_other_values(monkeypatch, raw):
    monkeypatch.setenv("LODE_TEST_FLAG", raw)
    with pytest.raises(ImproperlyConfigured) as info:
        env.env_bool("LODE_TEST_FLAG", False)
    assert "LODE_TEST_FLAG" in str(info.value)
    assert repr(raw) in str(info.value)


def test_env_int_default_when_unset_or_blank(monkeypatch):
    monkeypatch.delenv("LODE_TEST_INT", raising=False)
    assert env.env_int("LODE_TEST_INT", 7) == 7
    monkeypatch.setenv("LODE_TEST_INT", "  ")
    assert env.env_int("LODE_TEST_INT", 7) == 7


@pytest.mark.parametrize(("raw", "expected"), [("42", 42), (" 5 ", 5), ("0", 0), ("-3", -3)])
def test_env_int_parses(monkeypatch, raw, expected):
    monkeypatch.setenv("LODE_TEST_INT", raw)
    assert env.env_int("LODE_TEST_INT", 1) == expected


@pytest.mark.parametrize("raw", ["abc", "1.5", "1e3", "ten", "0x10", "12abc"])
def test_env_int_rejects_non_integers(monkeypatch, raw):
    monkeypatch.setenv("LODE_TEST_INT", raw)
    with pytest.raises(ImproperlyConfigured) as info:
        env.env_int("LODE_TEST_INT", 1)
    assert "LODE_TEST_INT" in str(info.value)


def test_env_int_enforces_minimum(monkeypatch):
    monkeypatch.setenv("LODE_TEST_INT", "10")
    assert env.env_int("LODE_TEST_INT", 1, minimum=10) == 10
    monkeypatch.setenv("LODE_TEST_INT", "9")
    with pytest.raises(ImproperlyConfigured) as info:
        env.env_int("LODE_TEST_INT", 1, minimum=10)
    assert "LODE_TEST_INT" in str(info.value)
    assert "10" in str(info.value)


def test_env_list(monkeypatch):
    monkeypatch.delenv("LODE_TEST_LIST", raising=False)
    assert env.env_list("LODE_TEST_LIST", ["a"]) == ["a"]
    monkeypatch.setenv("LODE_TEST_LIST", " x.example, ,y.example ,")
    assert env.env_list("LODE_TEST_LIST", ["a"]) == ["x.example", "y.example"]
    monkeypatch.setenv("LODE_TEST_LIST", "")
    assert env.env_list("LODE_TEST_LIST", ["a"]) == []


def test_env_choice(monkeypatch):
    choices = ("learned", "off")
    monkeypatch.delenv("LODE_TEST_CHOICE", raising=False)
    assert env.env_choice("LODE_TEST_CHOICE", "off", choices) == "off"
    monkeypatch.setenv("LODE_TEST_CHOICE", " learned ")
    assert env.env_choice("LODE_TEST_CHOICE", "off", choices) == "learned"
    monkeypatch.setenv("LODE_TEST_CHOICE", "sometimes")
    with pytest.raises(ImproperlyConfigured) as info:
        env.env_choice("LODE_TEST_CHOICE", "off", choices)
    assert "LODE_TEST_CHOICE" in str(info.value)


# --------------------------------------------------------------------------
# data_dir
# --------------------------------------------------------------------------


def test_data_dir_default_and_relative(monkeypatch, tmp_path):
    monkeypatch.delenv("LODE_DATA_DIR", raising=False)
    assert env.data_dir(tmp_path) == tmp_path / "var"
    assert (tmp_path / "var").is_dir()
    monkeypatch.setenv("LODE_DATA_DIR", "elsewhere/data")
    assert env.data_dir(tmp_path) == tmp_path / "elsewhere" / "data"
    assert (tmp_path / "elsewhere" / "data").is_dir()


def test_data_dir_absolute(monkeypatch, tmp_path):
    target = tmp_path / "abs"
    monkeypatch.setenv("LODE_DATA_DIR", str(target))
    assert env.data_dir(Path("/nonexistent-base")) == target
    assert target.is_dir()


def test_data_dir_that_cannot_be_created(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("LODE_DATA_DIR", str(blocker / "data"))
    with pytest.raises(ImproperlyConfigured) as info:
        env.data_dir(tmp_path)
    assert "LODE_DATA_DIR" in str(info.value)


# --------------------------------------------------------------------------
# database
# --------------------------------------------------------------------------


def test_database_default_is_sqlite_in_data_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    config = env.database(tmp_path)
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == str(tmp_path / "lode.sqlite3")
    assert "foreign_keys=ON" in config["OPTIONS"]["init_command"]
    # Kept for a minute per web thread, as on PostgreSQL (a new one per request cost CPU).
    assert config["CONN_MAX_AGE"] == 60
    assert f"mmap_size={env.SQLITE_MMAP_BYTES}" in config["OPTIONS"]["init_command"]


def test_database_blank_url_is_default(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", "   ")
    assert env.database(tmp_path)["NAME"] == str(tmp_path / "lode.sqlite3")


def test_database_sqlite_url(monkeypatch, tmp_path):
    path = tmp_path / "other.db"
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{path}")
    config = env.database(tmp_path)
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == str(path)


@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_database_postgres_url(monkeypatch, tmp_path, scheme):
    monkeypatch.setenv("DATABASE_URL", f"{scheme}://lode:s3cret@db.internal:5433/lodedb")
    config = env.database(tmp_path)
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert config["NAME"] == "lodedb"
    assert config["USER"] == "lode"
    assert config["PASSWORD"] == "s3cret"
    assert config["HOST"] == "db.internal"
    assert int(config["PORT"]) == 5433


def test_database_postgres_options(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", "postgres://lode@localhost/lodedb?sslmode=require")
    config = env.database(tmp_path)
    assert config["OPTIONS"]["sslmode"] == "require"


def test_pg_random_page_cost_default_and_values(monkeypatch):
    monkeypatch.delenv("LODE_PG_RANDOM_PAGE_COST", raising=False)
    assert env.pg_random_page_cost() == 1.1
    monkeypatch.setenv("LODE_PG_RANDOM_PAGE_COST", " 2 ")
    assert env.pg_random_page_cost() == 2.0
    monkeypatch.setenv("LODE_PG_RANDOM_PAGE_COST", "")  # the server's own, for PgBouncer
    assert env.pg_random_page_cost() is None


@pytest.mark.parametrize("raw", ["fast", "0", "-1", "nan", "inf", "1e9"])
def test_pg_random_page_cost_rejects_bad_values(monkeypatch, raw):
    monkeypatch.setenv("LODE_PG_RANDOM_PAGE_COST", raw)
    with pytest.raises(ImproperlyConfigured) as info:
        env.pg_random_page_cost()
    assert "LODE_PG_RANDOM_PAGE_COST" in str(info.value)


def test_the_page_cost_joins_the_urls_own_startup_options(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", "postgres://lode@localhost/lodedb?currentSchema=notes")
    options = env.database(tmp_path)["OPTIONS"]["options"]
    assert env.with_page_cost(options, 1.1) == "-c search_path=notes -c random_page_cost=1.1"
    assert env.with_page_cost("", 2.0) == "-c random_page_cost=2"
    assert env.with_page_cost("-c random_page_cost=4", 1.1) == "-c random_page_cost=4"


@pytest.mark.django_db
def test_postgresql_connections_start_with_the_page_cost():
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL planner setting")
    page_cost = env.pg_random_page_cost()
    if page_cost is None or "random_page_cost" in os.environ.get("DATABASE_URL", ""):
        pytest.skip("this environment leaves random_page_cost to the server or sets its own")
    with connection.cursor() as cursor:
        cursor.execute("SHOW random_page_cost")
        assert cursor.fetchone()[0] == f"{page_cost:g}"


def test_database_postgres_needs_a_name(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", "postgres://lode@localhost")
    with pytest.raises(ImproperlyConfigured) as info:
        env.database(tmp_path)
    assert "DATABASE_URL" in str(info.value)


@pytest.mark.parametrize(
    "url", ["mysql://x", "mysql://user:hunter2@db/lode", "oracle://u:p@h/db", "mssql://h/db"]
)
def test_database_rejects_unsupported_engines(monkeypatch, tmp_path, url):
    monkeypatch.setenv("DATABASE_URL", url)
    with pytest.raises(ImproperlyConfigured) as info:
        env.database(tmp_path)
    message = str(info.value)
    assert "DATABASE_URL" in message
    assert "sqlite://" in message
    assert "postgres://" in message
    assert "hunter2" not in message  # never echo a password


@pytest.mark.parametrize(
    "url", ["garbage", "not a url at all", "://", "http://example.com/db", "nope://u:hunter2@h/d"]
)
def test_database_rejects_garbage(monkeypatch, tmp_path, url):
    monkeypatch.setenv("DATABASE_URL", url)
    with pytest.raises(ImproperlyConfigured) as info:
        env.database(tmp_path)
    assert "DATABASE_URL" in str(info.value)
    assert "hunter2" not in str(info.value)


# --------------------------------------------------------------------------
# secret_key
# --------------------------------------------------------------------------


def test_secret_key_generated_once_with_private_mode(monkeypatch, tmp_path):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    key = env.secret_key(tmp_path)
    key_file = tmp_path / "secret_key"
    assert key_file.exists()
    assert len(key) >= 32
    assert key_file.read_text(encoding="utf-8").strip() == key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    mtime = key_file.stat().st_mtime_ns
    assert env.secret_key(tmp_path) == key  # reused, not regenerated
    assert key_file.stat().st_mtime_ns == mtime


def test_secret_keys_differ_between_data_folders(monkeypatch, tmp_path):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert env.secret_key(tmp_path / "a") != env.secret_key(tmp_path / "b")


def test_secret_key_from_environment(monkeypatch, tmp_path):
    value = "k" * 40
    monkeypatch.setenv("SECRET_KEY", value)
    assert env.secret_key(tmp_path) == value
    assert not (tmp_path / "secret_key").exists()


@pytest.mark.parametrize("value", ["tiny-key-1", "x" * 31])
def test_secret_key_too_short_is_rejected(monkeypatch, tmp_path, value):
    monkeypatch.setenv("SECRET_KEY", value)
    with pytest.raises(ImproperlyConfigured) as info:
        env.secret_key(tmp_path)
    assert "SECRET_KEY" in str(info.value)
    assert value not in str(info.value)  # never echo a secret
    assert not (tmp_path / "secret_key").exists()


def test_damaged_key_file_is_rejected(monkeypatch, tmp_path):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    (tmp_path / "secret_key").write_text("tiny")
    with pytest.raises(ImproperlyConfigured) as info:
        env.secret_key(tmp_path)
    assert "secret_key" in str(info.value)


# --------------------------------------------------------------------------
# manage.py check with a bad environment
# --------------------------------------------------------------------------


def _manage_check(tmp_path: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    child_env = dict(os.environ)
    for name in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "DEBUG", "SECRET_KEY"):
        child_env.pop(name, None)
    child_env["LODE_DATA_DIR"] = str(tmp_path)
    child_env.update(overrides)
    return subprocess.run(
        # The interpreter running pytest, wherever its environment lives.
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_manage_check_passes_with_a_good_environment(tmp_path):
    result = _manage_check(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize(
    ("name", "value"),
    [("DATABASE_URL", "mysql://x"), ("DEBUG", "maybe"), ("LODE_MAX_NOTE_BYTES", "lots")],
)
def test_manage_check_fails_naming_the_variable(tmp_path, name, value):
    result = _manage_check(tmp_path, **{name: value})
    assert result.returncode != 0
    assert name in result.stderr
    assert "ImproperlyConfigured" in result.stderr
