"""The import-linter contracts of pyproject.toml (the layer rule of docs/architecture.md and
"the product never imports training") hold on the source, and a planted violation breaks them.

`lint-imports` runs as a subprocess from the directory holding pyproject.toml: it puts that
directory first on `sys.path`, so a copy of the packages in a temporary directory is what it
reads there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("lode_site", "notes", "externals", "retrieval", "spaces", "training")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_import_contracts_hold() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def copy_of_the_source(destination: Path) -> Path:
    """The project's packages (Python files only) and pyproject.toml, copied."""
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package,
            destination / package,
            ignore=lambda folder, names: [
                name
                for name in names
                if not name.endswith(".py") and not (Path(folder) / name).is_dir()
            ],
        )
    shutil.copy(ROOT / "pyproject.toml", destination / "pyproject.toml")
    return destination


@pytest.mark.parametrize(
    ("module", "planted", "reported"),
    [
        (
            "retrieval/query.py",
            "\n\ndef planted():\n    from retrieval.search.pipeline import search\n",
            "retrieval.query is not allowed to import retrieval.search",
        ),
        (
            "notes/models.py",
            "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
            "    from notes.views import DocumentForm\n",
            "notes.models is not allowed to import notes.views",
        ),
        (
            "retrieval/index/chunking.py",
            "\n\ndef planted():\n    from externals import pipeline\n",
            "retrieval.index is not allowed to import externals.pipeline",
        ),
        (
            "spaces/services.py",
            "\n\ndef planted():\n    import training.fit_relevance\n",
            "The product never imports training (it is not installed with lode) BROKEN",
        ),
    ],
    ids=["inside-a-function", "under-type-checking", "across-apps", "product-imports-training"],
)
def test_a_planted_import_breaks_a_contract(
    tmp_path: Path, module: str, planted: str, reported: str
) -> None:
    """An upward import (inside a function, under `if TYPE_CHECKING:`, from one app into
    another) or a product module importing training fails `lint-imports`, naming it."""
    source = copy_of_the_source(tmp_path)
    target = source / module
    target.write_text(target.read_text("utf-8") + planted, "utf-8")
    result = lint_imports(source)
    assert result.returncode == 1, result.stdout + result.stderr
    assert reported in result.stdout, result.stdout
