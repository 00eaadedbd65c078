"""Turn a version into passages and keep `is_head` true for head-version passages only.

Called inside the transaction that writes the version, so the lexical index (maintained by
the database from these rows) is current the moment the transaction commits.

Passages are derived from a version's body by the chunker under the bounds in settings.
When the bounds tighten (say `LODE_CHUNK_MAX_CHARS` is lowered), `rechunk_oversized()`
re-derives the passages of head versions holding a passage longer than the character bound
(`manage.py lode_index repair` runs it; `lode_index health` reports such passages). The old
passages are retired (`is_head=False`), never deleted or edited in text, so every evidence
link to them still verifies against the unchanged version.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import F, Max
from django.db.models.functions import Length

from notes.models import Document, Version, title_key
from retrieval.index.chunking import chunk_markdown
from retrieval.index.edges import refresh_edges
from retrieval.index.sync import (
    enqueue_document_sync_on_commit,
    enqueue_mention_scan,
    enqueue_pending_sweep,
)
from retrieval.index.vectors import mark_new_pending
from retrieval.meta.store import refresh_meta
from retrieval.models import Passage


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def title_text(title: str, heading_path: tuple[str, ...]) -> str:
    """The version title plus heading-path entries that do not just repeat it."""
    parts = [title.strip()] if title.strip() else []
    for heading in heading_path:
        if heading and heading.casefold() not in (p.casefold() for p in parts):
            parts.append(heading)
    return " \u203a ".join(parts)


def passages_for_version(version: Version, *, is_head: bool) -> list[Passage]:
    """Unsaved `Passage` rows for every chunk of `version.body`."""
    chunks = chunk_markdown(
        version.body,
        max_words=settings.LODE_CHUNK_MAX_WORDS,
        overlap_words=settings.LODE_CHUNK_OVERLAP_WORDS,
        max_chars=settings.LODE_CHUNK_MAX_CHARS,
    )
    return [
        Passage(
            version=version,
            document_id=version.document_id,
            is_head=is_head,
            position=chunk.position,
            block_kind=chunk.block_kind,
            heading_path=list(chunk.heading_path),
            title_text=title_text(version.title, chunk.heading_path),
            start=chunk.start,
            end=chunk.end,
            start_line=chunk.start_line,
            end_line=chunk.end_line,
            parent_start=chunk.parent_start,
            parent_end=chunk.parent_end,
            text=chunk.text,
            text_sha256=sha256_text(chunk.text),
        )
        for chunk in chunks
    ]


def index_new_head(document: Document, version: Version) -> int:
    """Make `version` the indexed head of `document`; returns the number of new passages.

    Passages of the new head are written before the old head's are unindexed
    (upsert-before-prune), all within the caller's transaction.
    """
    [written] = _write_heads([version])
    # The graph's edges follow the head in the same transaction. Other documents' edges
    # depend on this one's title (wiki links, mentions), not on its text: they are
    # re-derived only for a new document or a new title (links that named the old one too).
    parent = Version.objects.filter(pk=version.parent_id).values_list("title", flat=True).first()
    old_key = title_key(parent) if parent is not None else None
    renamed = old_key is None or old_key != title_key(version.title)
    refresh_edges([document.pk], reverse=renamed, old_keys=[old_key] if old_key else [])
    # Vectors are derived asynchronously: the worker embeds the new head after commit.
    enqueue_document_sync_on_commit(document.pk)
    return written


def index_new_heads(versions: Sequence[Version]) -> list[int]:
    """`index_new_head` for many documents at once (bulk loaders): each version becomes its
    document's indexed head; returns the passages written per version, in order.

    The same passages in the same order, written in a few statements instead of several per
    document. Vectors: one sweep of all pending passages is queued on commit instead of a
    task per document (`enqueue_pending_sweep` queues at most one).
    """
    written = _write_heads(versions)
    # Edges for all of them at once; other documents' text is not scanned for their titles
    # here (one scan per document would dominate an import): the worker does it, queued on
    # commit, and health says *pending* until it has.
    document_ids = [version.document_id for version in versions]
    refresh_edges(document_ids, scan_mentions=False)
    transaction.on_commit(enqueue_pending_sweep)
    if document_ids:
        transaction.on_commit(lambda: enqueue_mention_scan(document_ids))
    return written


def _write_heads(versions: Sequence[Version]) -> list[int]:
    """Write each version's passages as head passages, then take every other passage of
    those documents out of the head set (upsert-before-prune)."""
    per_version = [passages_for_version(version, is_head=True) for version in versions]
    written = [p for passages in per_version for p in passages]
    Passage.objects.bulk_create(written, batch_size=500)
    mark_new_pending(p.pk for p in written)  # the "not yet embedded" note counts them at once
    Passage.objects.filter(
        document_id__in=[version.document_id for version in versions], is_head=True
    ).exclude(version_id__in=[version.pk for version in versions]).update(is_head=False)
    refresh_meta(versions)  # the documents' date, kind, terms and aliases follow their head
    return [len(passages) for passages in per_version]


def unindex_document(document: Document) -> None:
    """Remove every passage of `document` from the head set (soft delete)."""
    Passage.objects.filter(document=document, is_head=True).update(is_head=False)
    refresh_edges([document.pk])  # its edges leave the graph; links to it become missing
    enqueue_document_sync_on_commit(document.pk)  # the worker deletes its vectors


# --- re-chunking passages made under older bounds ----------------------------------------


def oversized_head_passages() -> int:
    """How many head passages are longer than `LODE_CHUNK_MAX_CHARS` (chunked before the
    character bound existed, or under a larger one)."""
    return (
        Passage.objects.filter(is_head=True)
        .alias(chars=Length("text"))
        .filter(chars__gt=settings.LODE_CHUNK_MAX_CHARS)
        .count()
    )


@dataclass(frozen=True)
class RechunkReport:
    """What `rechunk_oversized` did."""

    documents: int = 0  # head versions re-chunked (one per document)
    retired: int = 0  # old head passages now `is_head=False`
    written: int = 0  # new head passages


def rechunk_oversized() -> RechunkReport:
    """Re-chunk every live head version that holds a passage longer than the character
    bound, one document per transaction; returns what changed."""
    document_ids = sorted(
        set(
            Passage.objects.filter(is_head=True, document__deleted_at__isnull=True)
            .alias(chars=Length("text"))
            .filter(chars__gt=settings.LODE_CHUNK_MAX_CHARS)
            .values_list("document_id", flat=True)
        )
    )
    documents = retired = written = 0
    for document_id in document_ids:
        old, new = rechunk_head(document_id)
        if new:
            documents += 1
            retired += old
            written += new
    return RechunkReport(documents=documents, retired=retired, written=written)


def rechunk_head(document_id: int) -> tuple[int, int]:
    """Re-derive the head version's passages of one document under the current bounds.

    Returns (passages retired, passages written); (0, 0) when the document is gone, deleted,
    or its head passages already are what the chunker makes now. One transaction with the
    document row locked, so a concurrent save cannot interleave and no reader sees a head
    version without passages. The old passages leave the head set first (so the lexical
    index's triggers drop them once, not on every later update) and move past every
    position the version uses (the only column changed besides `is_head`; no link or hash
    includes it); the new ones take positions 0..n-1.
    """
    with transaction.atomic():
        document = (
            Document.objects.select_for_update()
            .filter(pk=document_id, deleted_at__isnull=True)
            .exclude(head=None)
            .first()
        )
        if document is None:
            return 0, 0
        version = Version.objects.get(pk=document.head_id)
        old = list(Passage.objects.filter(version=version, is_head=True).order_by("start", "pk"))
        new = passages_for_version(version, is_head=True)
        if [(p.start, p.end) for p in old] == [(p.start, p.end) for p in new]:
            return 0, 0
        Passage.objects.filter(version=version, is_head=True).update(is_head=False)
        top = Passage.objects.filter(version=version).aggregate(top=Max("position"))["top"]
        # Larger than every position in use, so no row ever collides mid-statement.
        shift = max((top or 0) + 1, len(new))
        Passage.objects.filter(version=version).update(position=F("position") + shift)
        if document.kind == Document.Kind.EXTERNAL:
            _carry_external_labels(document, old, new)
        Passage.objects.bulk_create(new, batch_size=500)
        mark_new_pending(p.pk for p in new)
        # Edges name the passage holding their span: re-derive them over the new passages.
        refresh_edges([document.pk], reverse=False, changed=False)
        enqueue_document_sync_on_commit(document.pk)  # vectors follow the new head passages
    return len(old), len(new)


def _carry_external_labels(document: Document, old: list[Passage], new: list[Passage]) -> None:
    """Give the new passages of an external snapshot what the ingest pipeline gives them:
    the logical id (source, item path, position, text hash) and, for PDFs, the page.

    The page offsets of a PDF are not stored, so each new passage takes the page of the old
    passage its start fell in (the page that old passage started on).
    """
    from externals.models import SourceItem

    item = SourceItem.objects.filter(document=document).first()
    starts = [p.start for p in old]
    for passage in new:
        if item is not None:
            passage.logical_id = logical_id(
                item.source_id, item.path, passage.position, passage.text_sha256
            )
        if old:
            passage.page = old[max(bisect_right(starts, passage.start) - 1, 0)].page


# Versioned so a change of what the id covers is a new scheme, never a silent collision.
LOGICAL_ID_SCHEME = "lode-external-passage:v1"


def logical_id(source_id: int, item_path: str, position: int, text_sha256: str) -> str:
    """The public id of an external passage: SHA-256 over the passage's full-content hash,
    the source, the item's path and the position (ADR 0005), so passages sharing a prefix,
    or identical passages at two positions or in two files, never share an id."""
    key = "\x00".join((LOGICAL_ID_SCHEME, str(source_id), item_path, str(position), text_sha256))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()
