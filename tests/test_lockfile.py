"""The hash-pinned locks in requirements/ agree with pyproject.toml, pin every file by hash,
and are what both README commands install (`--require-hashes`)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from lode_site import bootstrap

ROOT = Path(__file__).resolve().parent.parent
ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_entries(path: Path) -> dict[str, tuple[str, list[str]]]:
    """name → (version, hashes) for every requirement in a pip requirements lock."""
    entries: dict[str, tuple[str, list[str]]] = {}
    current: str | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        match = ENTRY.match(line)
        if match:
            current = normalise(match.group(1))
            assert current not in entries, f"{path.name}: {current} pinned twice"
            entries[current] = (match.group(2), [])
            continue
        stripped = line.strip()
        if stripped.startswith("--hash=sha256:"):
            assert current is not None, f"{path.name}: a hash before any requirement"
            digest = stripped.removeprefix("--hash=sha256:").rstrip(" \\")
            assert re.fullmatch(r"[0-9a-f]{64}", digest), f"{path.name}: bad hash {digest}"
            entries[current][1].append(digest)
        elif stripped and not stripped.startswith("#"):
            pytest.fail(f"{path.name}: unexpected line {line!r}")
    return entries


def pyproject_pins(*, dev: bool) -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    if dev:
        requirements += project["optional-dependencies"]["dev"]
        requirements += project["optional-dependencies"]["training"]
    pins: dict[str, str] = {}
    for requirement in requirements:
        if requirement.startswith("lode["):
            continue  # the dev extra includes lode's own training extra, pinned above
        match = ENTRY.match(requirement)
        assert match, f"pyproject.toml: {requirement!r} is not pinned with =="
        pins[normalise(match.group(1))] = match.group(2)
    return pins


@pytest.mark.parametrize(("lock", "dev"), [(bootstrap.RUN_LOCK, False), (bootstrap.DEV_LOCK, True)])
def test_lock_pins_every_pyproject_requirement_at_its_version(lock: Path, dev: bool) -> None:
    entries = lock_entries(lock)
    for name, version in pyproject_pins(dev=dev).items():
        assert name in entries, f"{lock.name} lacks {name}: run python3 -m lode_site.bootstrap lock"
        assert entries[name][0] == version, f"{lock.name}: {name} {entries[name][0]} ≠ {version}"


@pytest.mark.parametrize("lock", [bootstrap.RUN_LOCK, bootstrap.DEV_LOCK])
def test_every_locked_requirement_carries_hashes(lock: Path) -> None:
    entries = lock_entries(lock)
    assert len(entries) > 50  # the whole transitive closure, not just the direct pins
    unhashed = [name for name, (_, hashes) in entries.items() if not hashes]
    assert unhashed == []


def test_run_lock_is_the_dev_lock_without_the_dev_tools() -> None:
    """`run` after `test` must install nothing: every runtime pin equals the dev pin."""
    run, dev = lock_entries(bootstrap.RUN_LOCK), lock_entries(bootstrap.DEV_LOCK)
    differing = {
        n: (v, dev.get(n, ("absent",))[0]) for n, (v, _) in run.items() if dev.get(n, ("",))[0] != v
    }
    assert differing == {}
    assert "pytest" not in run and "pytest" in dev


def test_the_build_backend_is_locked_within_build_system_requires() -> None:
    build = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]
    assert build["requires"] == ["setuptools>=69"]
    for lock in (bootstrap.RUN_LOCK, bootstrap.DEV_LOCK):
        version = lock_entries(lock)["setuptools"][0]
        assert int(version.split(".")[0]) >= 69


def test_install_requires_hashes_and_builds_lode_with_the_locked_backend() -> None:
    first, second = bootstrap.install_commands(bootstrap.RUN_LOCK)
    assert first[-4:] == ["install", "--require-hashes", "-r", str(bootstrap.RUN_LOCK)]
    assert second[-5:] == ["install", "--no-deps", "--no-build-isolation", "-e", "."]
    # Nothing else is installed unhashed (the old `pip install --upgrade pip` is gone).
    assert len(bootstrap.install_commands(bootstrap.DEV_LOCK)) == 2


def test_a_changed_lock_triggers_a_reinstall(tmp_path: Path) -> None:
    lock = tmp_path / "lock.txt"
    lock.write_text(bootstrap.RUN_LOCK.read_text(encoding="utf-8"), encoding="utf-8")
    before = bootstrap.install_digest(lock)
    assert bootstrap.install_digest(lock) == before
    lock.write_text(lock.read_text(encoding="utf-8").replace("==", "== ", 1), encoding="utf-8")
    assert bootstrap.install_digest(lock) != before


def test_lock_regenerates_both_files_the_run_lock_within_the_dev_lock() -> None:
    dev, run = bootstrap.lock_commands(upgrade=False)
    for command in (dev, run):
        assert command[1:4] == ["pip", "compile", "pyproject.toml"]
        assert "--generate-hashes" in command and "--universal" in command
        assert "--upgrade" not in command  # versions already locked are kept
        assert command[command.index("--python-version") + 1] == "3.12"
    assert dev[-2:] == ["-o", "requirements/dev-lock.txt"] and "--extra" in dev
    assert run[-2:] == ["-o", "requirements/lock.txt"]
    assert run[run.index("-c") + 1] == "requirements/dev-lock.txt"
    assert "--upgrade" in bootstrap.lock_commands(upgrade=True)[0]
