"""The README is a user's guide: short, every link it (and each page of docs/) gives leads
to a file, and every command it names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 150
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
COMMAND = re.compile(r"manage\.py (\w+)")
MARKDOWN = [README, *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_fits_its_length() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda page: page.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a web address or an anchor on the same page
        path = (page.parent / target.split("#")[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"{page.name} links to missing files: {broken}"


def test_every_command_the_readme_names_exists() -> None:
    named = set(COMMAND.findall(README.read_text(encoding="utf-8")))
    assert "lode_backup" in named and "lode_import_markdown" in named
    assert not named - set(get_commands()), named - set(get_commands())


def test_the_readme_gives_the_test_command_ci_runs() -> None:
    command = "python3 -m lode_site.bootstrap test"
    assert command in README.read_text(encoding="utf-8")
    assert "lode_site.bootstrap test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.django_db
def test_the_pages_the_readme_sends_people_to_open(alice_client) -> None:
    text = README.read_text(encoding="utf-8")
    pages = ["/spaces/", "/sources/", "/ask", "/search/help", "/accounts/password_change/"]
    for page in pages:
        assert f"`{page}`" in text, page
        assert alice_client.get(page).status_code == 200, page
