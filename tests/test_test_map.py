"""The test map of docs/architecture.md matches the tests folder, and the folder keeps its shape.

The map's table names every folder under tests/ that holds test files (one row each) and,
in the row of `tests/` itself, every test file at the top; a new folder or a new top-level
test file fails here until the map says where it belongs. Every test folder is a package,
and no test module imports another (shared helpers live in tests/factories.py and fixtures
in conftest.py). Pure: reads files, runs nothing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.factories import REPO_ROOT

TESTS = REPO_ROOT / "tests"
ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| `(tests/[\w/]*)` \| (.+) \|$")


def map_rows() -> dict[str, str]:
    """The test map's rows: folder (as written, `tests/…/`) → what its tests check."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("\n## Tests\n", 1)[1].split("\n## ", 1)[0]
    return {match[1]: match[2] for match in map(ROW.match, section.splitlines()) if match}


def all_test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def folders_with_tests() -> set[str]:
    return {f"{path.parent.relative_to(REPO_ROOT).as_posix()}/" for path in all_test_files()}


def test_the_map_has_a_row_for_each_folder_that_holds_tests() -> None:
    rows = map_rows()
    assert "tests/" in rows
    assert set(rows) == folders_with_tests(), (
        f"map rows without tests: {sorted(set(rows) - folders_with_tests())}; "
        f"folders missing from the map: {sorted(folders_with_tests() - set(rows))}"
    )


def test_the_top_row_names_every_test_file_at_the_top() -> None:
    named = set(re.findall(r"`(test_\w+)`", map_rows()["tests/"]))
    at_top = {path.stem for path in TESTS.glob("test_*.py")}
    assert named == at_top, (
        f"named but absent: {sorted(named - at_top)}; "
        f"at the top of tests/ but not named (place them in a folder, or name them): "
        f"{sorted(at_top - named)}"
    )


def test_every_test_folder_is_a_package() -> None:
    for folder in folders_with_tests():
        assert (REPO_ROOT / folder / "__init__.py").is_file(), folder


def test_no_test_module_imports_another() -> None:
    found = []
    for path in [*all_test_files(), *TESTS.rglob("conftest.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_"):
                    found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {name}")
    assert not found, "import shared helpers from tests/factories.py:\n" + "\n".join(found)
