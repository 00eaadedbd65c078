"""Turn a version into passages and keep `is_head` true for head-version passages only.

Called inside the transaction that writes the version, so the lexical index (maintained by
the database from these rows) is current the moment the transaction commits.
"""

from __future__ import annotations

import hashlib

from django.conf import settings

from notes.models import Document, Version
from retrieval.chunking import chunk_markdown
from retrieval.models import Passage
from retrieval.tasks import enqueue_document_sync_on_commit


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
    passages = passages_for_version(version, is_head=True)
    Passage.objects.bulk_create(passages, batch_size=500)
    Passage.objects.filter(document=document, is_head=True).exclude(version=version).update(
        is_head=False
    )
    # Vectors are derived asynchronously: the worker embeds the new head after commit.
    enqueue_document_sync_on_commit(document.pk)
    return len(passages)


def unindex_document(document: Document) -> None:
    """Remove every passage of `document` from the head set (soft delete)."""
    Passage.objects.filter(document=document, is_head=True).update(is_head=False)
    enqueue_document_sync_on_commit(document.pk)  # the worker deletes its vectors
