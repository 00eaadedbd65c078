"""`manage.py lode_load_beir DIR [--user NAME] [--limit N] [--source NAME]`: load a BEIR
corpus as notes.

One note per `DIR/corpus.jsonl` record: body `# {title}\\n\\n{text}`, title the record's title
(or its `_id` when empty), `external_key` `beir:{_id}` so evaluation can map hits back and a
re-run is idempotent (unchanged records are skipped, changed ones get a new version).
Every note's `source_name` is the data set's name, DIR's folder name unless `--source` names
it (`data/scifact` → `scifact`), so `source:scifact` filters a search to it; a re-run sets it
on notes loaded before it existed, writing no version.

Records are written `BATCH_SIZE` to a transaction through `notes.services.notes_import`, the
bulk form of the note services: new notes as the same rows `note_create` writes (version
rows built by the same code, passages by the index's `index_new_heads`), a handful of
queries per batch instead of several per note; what gets indexed is identical, only the
number of round trips differs. Vectors are derived later by the worker, as for notes saved
on the page: one sweep of pending passages is queued instead of one task per note.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from notes import services
from notes.management.commands.lode_import_markdown import (
    MAX_SOURCE_CHARS,
    ImportStats,
    add_import_arguments,
    clip_title,
    ensure_user,
    report,
    source_option,
    space_option,
)

KEY_PREFIX = "beir:"
CORPUS_FILE = "corpus.jsonl"
# Documents per transaction: big enough that commit cost is amortised, small enough that a
# failure loses little and the SQLite write lock is released often.
BATCH_SIZE = 500


def beir_key(doc_id: str) -> str:
    return KEY_PREFIX + doc_id


def note_from_beir(doc_id: str, title: str, text: str) -> services.NoteImport:
    """The note for one BEIR document: the title as a level-1 heading above the text."""
    title = (title or "").strip()
    body = f"# {title}\n\n{text}" if title else text
    return services.NoteImport(
        external_key=beir_key(doc_id), title=clip_title(title or doc_id), body=body
    )


def read_corpus(path: Path, skipped: list[tuple[str, str]]) -> Iterator[services.NoteImport]:
    """Records of a BEIR `corpus.jsonl`; bad lines are added to `skipped` and passed over."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            name = f"line {number}"
            try:
                row = json.loads(line)
                doc_id = str(row["_id"])
                name = beir_key(doc_id)
                record = note_from_beir(doc_id, str(row.get("title") or ""), str(row["text"]))
                services.validate_content(title=record.title, body=record.body)
            except (ValueError, KeyError, TypeError) as exc:
                skipped.append((name, f"not a BEIR corpus record ({exc})"))
                continue
            except ValidationError as exc:
                skipped.append((name, " ".join(exc.messages)))
                continue
            yield record


def write_batch(
    owner: AbstractBaseUser,
    records: list[services.NoteImport],
    stats: ImportStats,
    source_name: str = "",
    space: int | None = None,
) -> None:
    """Upsert one batch in one transaction (`services.notes_import`) and count the result;
    new notes go to the space with id `space` (None: the owner's personal space)."""
    for imported in services.notes_import(
        owner=owner, notes=records, source_name=source_name, space=space
    ):
        stats.add(imported)


def data_set_name(corpus_dir: Path) -> str:
    """The data set's name: its folder's name (`data/scifact/` → `scifact`)."""
    return corpus_dir.resolve().name[:MAX_SOURCE_CHARS]


def count_lines(path: Path) -> int:
    """Lines in `path`, for the progress bar's total (a fast binary scan)."""
    with path.open("rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def load_beir(
    corpus_dir: Path,
    *,
    owner: AbstractBaseUser,
    limit: int | None = None,
    progress: bool = True,
    batch_size: int = BATCH_SIZE,
    source_name: str | None = None,
    space: int | None = None,
) -> ImportStats:
    """Load `corpus_dir/corpus.jsonl` (its first `limit` records) as notes of `owner`, new
    ones in the space with id `space` (None: the owner's personal space). `source_name`
    defaults to the data set's folder name."""
    started = time.perf_counter()
    if source_name is None:
        source_name = data_set_name(Path(corpus_dir))
    path = Path(corpus_dir) / CORPUS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    stats = ImportStats()
    seen: set[str] = set()
    total = count_lines(path) if progress else None
    if limit is not None and total is not None:
        total = min(total, limit)
    records = read_corpus(path, stats.skipped)
    if limit is not None:
        records = islice(records, limit)
    with tqdm(total=total, unit="doc", file=sys.stderr, disable=not progress) as bar:
        while batch := list(islice(records, batch_size)):
            unique = []
            for record in batch:
                if record.external_key in seen:
                    stats.skipped.append((record.external_key, "duplicate _id in the corpus"))
                else:
                    seen.add(record.external_key)
                    unique.append(record)
            write_batch(owner, unique, stats, source_name, space)
            bar.update(len(batch))
    stats.seconds = time.perf_counter() - started
    return stats


class Command(BaseCommand):
    help = "Load a BEIR corpus (DIR/corpus.jsonl) as notes, one per document; re-running updates."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", type=Path, help="BEIR dataset folder holding corpus.jsonl")
        parser.add_argument("--limit", type=int, default=None, help="load the first N records")
        add_import_arguments(parser)

    def handle(self, *args: object, **options: object) -> None:
        corpus_dir = Path(options["dir"])
        if not (corpus_dir / CORPUS_FILE).is_file():
            raise CommandError(f"{corpus_dir / CORPUS_FILE} does not exist")
        limit = options["limit"]
        if limit is not None and limit < 0:
            raise CommandError("--limit must not be negative")
        source = source_option(options["source"])
        owner = ensure_user(str(options["user"]))
        space = space_option(options["space"], owner)
        stats = load_beir(
            corpus_dir,
            owner=owner,
            space=space,
            limit=limit,
            progress=not options["no_progress"],
            source_name=source,
        )
        report(self, stats)
