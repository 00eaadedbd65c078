"""The linked test corpus (`bench/data/linked_corpus/`) and its question sets
(`bench/data/linked_questions/`) are what `bench/make_linked_corpus.py` says they are.

Pure: no database, no network. Checked: the generator re-run into a temporary folder writes
byte-identical files; at least 300 notes, each opening with a level-1 heading (the title
`lode_import_markdown` takes and wiki links name); every question set parses with its fields
and sizes; every answer occurs verbatim in its file; a multi-hop answer is in none of the
earlier notes of its path; every step of a path is a real link (a wiki link by a title no
other note has, or a relative Markdown link) in the checked-in files; tune and holdout are
balanced within ±10 %, and within each hop count; the deliberate missing-page links and the
ambiguous title exist.
"""

from __future__ import annotations

import itertools
import json
import posixpath
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "bench" / "make_linked_corpus.py"
CORPUS = ROOT / "bench" / "data" / "linked_corpus"
QUESTIONS = ROOT / "bench" / "data" / "linked_questions"
SETS = {"multi_hop": 48, "single_hop": 48, "unanswerable": 30}
WIKI = re.compile(r"\[\[([^\]|]+)(?:\|[^\]]*)?\]\]")
MARKDOWN = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+\.md)\)")
HEADING = re.compile(r"\A# (.+)\n")


def corpus_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}  # fmt: skip


def notes() -> dict[str, str]:
    return {path: data.decode("utf-8") for path, data in corpus_files(CORPUS).items()}


def titles(texts: dict[str, str]) -> dict[str, list[str]]:
    """Title -> paths of the notes with that title (the first line's `# ` heading)."""
    found: dict[str, list[str]] = {}
    for path, text in texts.items():
        match = HEADING.match(text)
        assert match, f"{path} does not open with a level-1 heading"
        found.setdefault(match.group(1).strip(), []).append(path)
    return found


def links(path: str, text: str, by_title: dict[str, list[str]]) -> set[str]:
    """The notes `path` links to: wiki links whose title names exactly one note, and relative
    Markdown links resolved against the note's folder."""
    targets = set()
    for title in WIKI.findall(text):
        if len(by_title.get(title.strip(), [])) == 1:
            targets.add(by_title[title.strip()][0])
    for href in MARKDOWN.findall(text):
        targets.add(posixpath.normpath(posixpath.join(posixpath.dirname(path), href)))
    return targets


def load(name: str) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate((QUESTIONS / f"{name}.jsonl").read_text("utf-8").splitlines()):
        row = json.loads(line)
        assert isinstance(row, dict), f"{name}.jsonl line {number + 1}"
        rows.append(row)
    return rows


def test_generator_is_deterministic(tmp_path: Path) -> None:
    corpus, questions = tmp_path / "corpus", tmp_path / "questions"
    subprocess.run(
        [sys.executable, str(GENERATOR), "--corpus", str(corpus), "--questions", str(questions)],
        check=True,
        capture_output=True,
    )
    assert corpus_files(corpus) == corpus_files(CORPUS)
    for name in SETS:
        written = (questions / f"{name}.jsonl").read_bytes()
        assert written == (QUESTIONS / f"{name}.jsonl").read_bytes(), name


def test_corpus_size_titles_and_lengths() -> None:
    texts = notes()
    assert len(texts) >= 300
    assert all(path.endswith(".md") for path in texts)
    folders = Counter(path.split("/")[0] for path in texts)
    assert {"runbooks", "design", "meetings", "services", "teams", "incidents", "glossary"} <= set(
        folders
    )
    for path, text in texts.items():
        assert 80 <= len(text.split()) <= 400, path
    by_title = titles(texts)
    duplicated = {title for title, paths in by_title.items() if len(paths) > 1}
    assert duplicated == {"Deploy Checklist"}


def test_links_of_every_kind_and_the_deliberate_defects() -> None:
    texts = notes()
    by_title = titles(texts)
    wiki = Counter()
    aliased = markdown = 0
    for path, text in texts.items():
        for title in WIKI.findall(text):
            wiki[title.strip()] += 1
        aliased += len(re.findall(r"\[\[[^\]|]+\|[^\]]+\]\]", text))
        for href in MARKDOWN.findall(text):
            markdown += 1
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), href))
            assert target in texts, f"{path} links to missing file {href}"
    assert sum(wiki.values()) >= 300 and aliased >= 100 and markdown >= 200
    missing = {title for title in wiki if title not in by_title}
    assert {"Payments Gateway Runbook", "Capacity Model 2027", "Legacy Wiki Home"} <= missing
    assert wiki["Deploy Checklist"] >= 2  # links to the ambiguous title
    # Unlinked mentions: a note names another note's exact title without linking it.
    mentions = 0
    for path, text in texts.items():
        linked = links(path, text, by_title)
        plain = WIKI.sub("", MARKDOWN.sub("", text))
        for title, paths in by_title.items():
            if paths[0] != path and paths[0] not in linked and len(title) > 8 and title in plain:
                mentions += 1
    assert mentions >= 50


@pytest.mark.parametrize("name", sorted(SETS))
def test_question_set_shape_and_split(name: str) -> None:
    rows = load(name)
    assert len(rows) >= SETS[name]
    ids = [row["id"] for row in rows]
    assert len(set(ids)) == len(ids)
    for index, row in enumerate(rows):
        assert row["split"] == ("tune" if index % 2 == 0 else "holdout"), row["id"]
        assert isinstance(row["question"], str) and row["question"].strip()
    groups: dict[object, Counter] = {}
    for row in rows:
        groups.setdefault(row.get("hops"), Counter())[row["split"]] += 1
    for counts in [sum(groups.values(), Counter()), *groups.values()]:
        total = counts["tune"] + counts["holdout"]
        assert abs(counts["tune"] - counts["holdout"]) <= max(1, 0.1 * total), counts


def test_answers_sit_where_the_rows_say() -> None:
    texts = notes()
    by_title = titles(texts)
    multi = load("multi_hop")
    assert sum(1 for row in multi if row["hops"] == 2) >= 12
    assert sum(1 for row in multi if row["hops"] == 1) >= 36
    for row in [*multi, *load("single_hop")]:
        path = row["path"]
        assert row["hops"] == len(path) - 1, row["id"]
        assert path[0] == row["start"] and path[-1] == row["file"], row["id"]
        assert row["answer"] in texts[row["file"]], row["id"]
        for before in path[:-1]:  # the answer is only where the last hop lands
            assert row["answer"] not in texts[before], (row["id"], before)
        for here, there in itertools.pairwise(path):
            assert there in links(here, texts[here], by_title), (row["id"], here, there)
    assert all(row["hops"] == 0 for row in load("single_hop"))


def test_unanswerable_rows_are_near_real_notes() -> None:
    texts = notes()
    for row in load("unanswerable"):
        assert row["near"] in texts, row["id"]
        assert row["why"].strip(), row["id"]
