"""The installed package holds every Django app: setuptools' package list in pyproject.toml
names each top-level package that INSTALLED_APPS or the URLconf import."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
NOT_SHIPPED = {"tests", "bench", "training"}


def shipped_patterns() -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return pyproject["tool"]["setuptools"]["packages"]["find"]["include"]


def test_every_top_level_package_of_the_project_is_shipped() -> None:
    packages = sorted(
        path.parent.name
        for path in ROOT.glob("*/__init__.py")
        if path.parent.name not in NOT_SHIPPED
    )
    assert "spaces" in packages
    patterns = shipped_patterns()
    missing = [p for p in packages if not any(fnmatch.fnmatch(p, pat) for pat in patterns)]
    assert missing == []


def test_every_installed_app_of_our_own_is_shipped() -> None:
    top_levels = {app.split(".")[0] for app in settings.INSTALLED_APPS}
    ours = {name for name in top_levels if (ROOT / name).is_dir()}
    assert ours >= {"notes", "externals", "retrieval", "spaces"}
    for app in ours:
        assert any(fnmatch.fnmatch(app, pat) for pat in shipped_patterns()), app
