"""Comments, docstrings and docs say what the code does, not which ticket it came from.

The issue trackers such references point at are not in the repository, so a reader cannot
follow them; the history belongs in CHANGELOG.md. Migrations, the changelog and
test data (corpora and fixtures) are left out: they record history or quote text verbatim.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Product code, docs and config, as paths relative to the repository root.
PRODUCT_FOLDERS = (
    "lode_site",
    "notes",
    "externals",
    "spaces",
    "retrieval",
    "templates",
    "static",
    "docs",
    ".ci",
)
PRODUCT_FILES = ("pyproject.toml",)
TEXT_SUFFIXES = {
    ".py", ".md", ".html", ".js", ".css", ".toml", ".yml", ".yaml", ".txt", ".sh", ".cfg",
    ".ini", "",
}
EXCLUDED_PARTS = {"migrations", "__pycache__", "fixtures"}

HISTORY_REFERENCE = re.compile(r"\bissue #?\d+|\bitem \d+", re.IGNORECASE)


def _text_files(folder: Path) -> list[Path]:
    if folder.is_file():
        return [folder]
    return sorted(
        path
        for path in folder.rglob("*")
        if path.is_file()
        and path.suffix in TEXT_SUFFIXES
        and not EXCLUDED_PARTS.intersection(path.relative_to(ROOT).parts)
    )


def product_files() -> list[Path]:
    files: list[Path] = []
    for name in PRODUCT_FOLDERS + PRODUCT_FILES:
        path = ROOT / name
        if path.exists():
            files.extend(_text_files(path))
    files.extend(sorted((ROOT / "bench").glob("*.py")))
    # The bench's own documentation; the corpora's notes are data (a meeting's "item 3").
    files.extend(sorted((ROOT / "bench").rglob("README.md")))
    return files


def files_of_the_tests() -> list[Path]:
    return _text_files(ROOT / "tests")


def history_references(files: list[Path]) -> list[str]:
    """Every line that cites an issue or an item, as `path:line: text`."""
    found: list[str] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if HISTORY_REFERENCE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    return found


def test_the_pattern_catches_issue_and_item_references() -> None:
    for text in ("see issue 12", "(Issue 15, item 4)", "fixed in issue #7", "ITEM 3"):
        assert HISTORY_REFERENCE.search(text), text
    for text in ("tissue 12", "an issue with 12 notes", "items 3", "the first item"):
        assert not HISTORY_REFERENCE.search(text), text


def test_product_code_and_docs_cite_no_issues_or_items() -> None:
    files = product_files()
    assert any(path.name == "settings.py" for path in files)
    found = history_references(files)
    assert not found, "history belongs in CHANGELOG.md:\n" + "\n".join(found)


def test_readme_cites_no_issues_or_items() -> None:
    found = history_references([ROOT / "README.md"])
    assert not found, "history belongs in CHANGELOG.md:\n" + "\n".join(found)


def test_tests_cite_no_issues_or_items() -> None:
    found = history_references(
        [path for path in files_of_the_tests() if path.name != Path(__file__).name]
    )
    assert not found, "history belongs in CHANGELOG.md:\n" + "\n".join(found)
