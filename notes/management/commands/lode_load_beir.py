"""`manage.py lode_load_beir DIR [--user NAME] [--limit N] [--source NAME]`: load a BEIR
corpus as notes.

One note per `DIR/corpus.jsonl` record: body `# {title}\\n\\n{text}`, title the record's title
(or its `_id` when empty), `external_key` `beir:{_id}` so evaluation can map hits back and a
re-run is idempotent (unchanged records are skipped, changed ones get a new version).
Every note's `source_name` is the data set's name, DIR's folder name unless `--source` names
it (`data/scifact` → `scifact`), so `source:scifact` filters a search to it; a re-run sets it
on notes loaded before it existed, writing no version.

This is the bulk path: records are written `BATCH_SIZE` to a transaction with `bulk_create`,
a handful of queries per batch instead of several per note. It still builds passages with the
same `retrieval.indexing.passages_for_version` (same chunker, same title text) as the note
page does, so what gets indexed is identical; only the number of round trips differs.
Vectors are derived later by the worker, as for notes saved on the page: one sweep task is
queued at the end instead of one task per note.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from tqdm import tqdm

from notes import services
from notes.management.commands.lode_import_markdown import (
    DEFAULT_USER,
    MAX_SOURCE_CHARS,
    ImportStats,
    Skip,
    clip_title,
    ensure_user,
    report,
    update_existing,
)
from notes.models import Document, DocumentTag, Tag, TrustTier, Version
from retrieval.indexing import passages_for_version
from retrieval.models import Passage
from retrieval.tasks import enqueue_pending_sweep

KEY_PREFIX = "beir:"
CORPUS_FILE = "corpus.jsonl"
# Documents per transaction: big enough that commit cost is amortised, small enough that a
# failure loses little and the SQLite write lock is released often.
BATCH_SIZE = 500


@dataclass(frozen=True, slots=True)
class Record:
    """One corpus record, already shaped as a note."""

    key: str
    title: str
    body: str


def beir_key(doc_id: str) -> str:
    return KEY_PREFIX + doc_id


def note_from_beir(doc_id: str, title: str, text: str) -> Record:
    """The note for one BEIR document: the title as a level-1 heading above the text."""
    title = (title or "").strip()
    body = f"# {title}\n\n{text}" if title else text
    return Record(key=beir_key(doc_id), title=clip_title(title or doc_id), body=body)


def read_corpus(path: Path, skipped: list[tuple[str, str]]) -> Iterator[Record]:
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


def _tag_rows(
    owner: AbstractBaseUser, documents: list[Document], bodies: list[str]
) -> list[DocumentTag]:
    """`#hashtag` tags for new notes, as `services.note_create` would set them."""
    wanted = {doc.pk: services.hashtags(body) for doc, body in zip(documents, bodies, strict=True)}
    names = {name for found in wanted.values() for name in found}
    if not names:
        return []
    tags = {t.name: t for t in Tag.objects.filter(owner=owner, name__in=names)}
    missing = [Tag(owner=owner, name=name) for name in sorted(names - tags.keys())]
    for tag in Tag.objects.bulk_create(missing):
        tags[tag.name] = tag
    return [
        DocumentTag(document_id=pk, tag=tags[name], from_body=True)
        for pk, found in wanted.items()
        for name in found
    ]


def _create_batch(owner: AbstractBaseUser, records: list[Record], source_name: str = "") -> int:
    """Create notes for `records` (none exist yet) in bulk; returns passages written.

    Mirrors `services.note_create` + `version_create` + `index_new_head` for a brand-new
    document, where there is no previous head to unindex.
    """
    documents = Document.objects.bulk_create(
        [
            Document(
                owner=owner,
                kind=Document.Kind.NOTE,
                title=record.title,
                trust_tier=TrustTier.NOTE,
                external_key=record.key,
                source_name=source_name,
            )
            for record in records
        ]
    )
    versions = []
    for document, record in zip(documents, records, strict=True):
        data = record.body.encode("utf-8")
        versions.append(
            Version(
                document=document,
                number=1,
                title=record.title,
                body=record.body,
                sha256=hashlib.sha256(data).hexdigest(),
                byte_size=len(data),
                extractor_name=services.NOTE_EXTRACTOR,
                extractor_version=services.NOTE_EXTRACTOR_VERSION,
                created_by=owner,
            )
        )
    Version.objects.bulk_create(versions)
    for document, version in zip(documents, versions, strict=True):
        document.head = version
    Document.objects.bulk_update(documents, ["head"])
    passages = [p for version in versions for p in passages_for_version(version, is_head=True)]
    Passage.objects.bulk_create(passages, batch_size=BATCH_SIZE)
    DocumentTag.objects.bulk_create(_tag_rows(owner, documents, [r.body for r in records]))
    return len(passages)


def write_batch(
    owner: AbstractBaseUser, records: list[Record], stats: ImportStats, source_name: str = ""
) -> None:
    """Upsert one batch in one transaction: bulk-create the new, version the changed, and
    set `source_name` (when given) on existing notes that lack it, in one UPDATE."""
    with transaction.atomic():
        # Lock the batch's existing notes up front, as `update_existing` would one by one.
        existing = {
            doc.external_key: doc
            for doc in Document.objects.select_for_update(of=("self",))
            .select_related("head")
            .filter(owner=owner, external_key__in=[r.key for r in records])
        }
        if source_name:
            Document.objects.filter(
                pk__in=[doc.pk for doc in existing.values() if doc.source_name != source_name]
            ).update(source_name=source_name)
        new = [r for r in records if r.key not in existing]
        if new:
            stats.passages += _create_batch(owner, new, source_name)
            stats.created += len(new)
        for record in records:
            document = existing.get(record.key)
            if document is None:
                continue
            head = document.head
            if (
                document.deleted_at is None
                and head
                and (head.title, head.body)
                == (
                    record.title,
                    record.body,
                )
            ):
                stats.unchanged += 1  # the common re-run case: no further query
                continue
            try:
                outcome, passages = update_existing(
                    document, owner=owner, title=record.title, body=record.body
                )
            except Skip as exc:
                stats.skipped.append((record.key, str(exc)))
            else:
                stats.count(outcome, passages)


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
) -> ImportStats:
    """Load `corpus_dir/corpus.jsonl` (its first `limit` records) as notes of `owner`.
    `source_name` defaults to the data set's folder name."""
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
                if record.key in seen:
                    stats.skipped.append((record.key, "duplicate _id in the corpus"))
                else:
                    seen.add(record.key)
                    unique.append(record)
            write_batch(owner, unique, stats, source_name)
            bar.update(len(batch))
    if stats.created:
        # The page path queues each saved note's embedding (`index_new_head`); the bulk path
        # skips that per-note call, so queue one sweep of every pending passage instead.
        enqueue_pending_sweep()
    stats.seconds = time.perf_counter() - started
    return stats


class Command(BaseCommand):
    help = "Load a BEIR corpus (DIR/corpus.jsonl) as notes, one per document; re-running updates."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", type=Path, help="BEIR dataset folder holding corpus.jsonl")
        parser.add_argument(
            "--user", default=DEFAULT_USER, help=f"owner of the notes (default {DEFAULT_USER})"
        )
        parser.add_argument("--limit", type=int, default=None, help="load the first N records")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        parser.add_argument(
            "--source",
            default=None,
            help="source name for the `source:` search filter (default: DIR's folder name)",
        )

    def handle(self, *args: object, **options: object) -> None:
        corpus_dir = Path(options["dir"])
        if not (corpus_dir / CORPUS_FILE).is_file():
            raise CommandError(f"{corpus_dir / CORPUS_FILE} does not exist")
        limit = options["limit"]
        if limit is not None and limit < 0:
            raise CommandError("--limit must not be negative")
        source = options["source"]
        if source is not None:
            source = str(source).strip()
            if not source or len(source) > MAX_SOURCE_CHARS:
                raise CommandError(f"--source needs 1 to {MAX_SOURCE_CHARS} characters")
        owner = ensure_user(str(options["user"]))
        stats = load_beir(
            corpus_dir,
            owner=owner,
            limit=limit,
            progress=not options["no_progress"],
            source_name=source,
        )
        report(self, stats)
