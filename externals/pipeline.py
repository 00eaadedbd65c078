"""One pipeline for first ingest and refresh of a source
(seeds/adr-0005-source-lifecycle-hybrid-retrieval.md).

For every file (folder, upload) or page (URL) the scan records SHA-256, byte size, path and
mtime. Unchanged input (same SHA-256 as last ingested) is skipped. Changed input is
extracted, the file's fingerprint (size, mtime, SHA-256) is checked again afterwards, and
only if it still matches is a new snapshot written: a `notes.Version` of the external's
document through `notes.services.version_create`, whose passages are inserted before the
old head's leave the head set (upsert-before-prune), in one transaction per document. So a
killed scan leaves every document either at its old snapshot or its new one, never empty.

Failures (decode errors, input over `LODE_SOURCE_MAX_FILE_BYTES`, extractor crashes, input
changed while it was read) write nothing for that item: its previous snapshot stays
searchable, and the failure goes on the scan record and the item's `last_error`. Items
missing from a scan are pruned (document soft-deleted) only when that scan is `ok`; a
partial or failed scan prunes nothing. Pruning is scoped to the source's own items, so it
never reaches outside the scanned root.

Empty text (ADR 0005: "Empty verified text clears its source"): a file whose verified text
is empty gets an empty snapshot, which has no passages, so its earlier text leaves search
while staying in history. A new file that is empty is skipped ("empty"), no document made.

Embedding is not part of the scan: `version_create` queues the vector sync after commit and
the worker embeds; a failed embed keeps the lexical passages and the previous vectors.

One scan per source at a time: before anything else a scan claims its
source with a conditional UPDATE (`Source.scanning_since` from NULL, or from a claim older
than `SCAN_CLAIM_STALE_AFTER`, to now) — one statement, atomic on SQLite and PostgreSQL
alike, so of two scans racing exactly one gets the row. The other waits (`wait_seconds`) or
raises `ScanAlreadyRunning` at once, writing nothing. A running scan refreshes its claim
every `SCAN_HEARTBEAT` so a long scan is never taken over, and a killed one's claim expires;
every snapshot write and every prune starts its transaction by refreshing the claim, so a
scan whose claim was taken over (say, during a long extraction) writes nothing more
(`ScanClaimLost`, the scan fails).
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import time
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from externals import extract as extractors
from externals.annotations import migrate_annotations
from externals.fetch import Fetched, FetchError, fetch_url
from externals.folders import source_scan_refusal
from externals.models import Annotation, ScanRecord, Source, SourceItem, stale_cutoff
from notes.models import Document, TrustTier, Version
from notes.services import version_create
from notes.sources import SourceRefused, SourceTooLarge, read_source_file
from retrieval.index.edges import refresh_edges
from retrieval.index.passages import logical_id, unindex_document
from retrieval.models import Passage
from spaces.models import Space

logger = logging.getLogger("lode.externals")

CHANGED_DURING_EXTRACTION = "changed during extraction, retry later"
# A running scan's counters are saved every this many items, or when this many seconds
# have passed since the last save, whichever comes first (progress for polling pages): one
# UPDATE of the scan row, outside any transaction, so other connections see it at once.
PROGRESS_EVERY = 50
PROGRESS_SECONDS = 1.0
COUNTERS = (
    "items_seen",
    "items_new",
    "items_changed",
    "items_unchanged",
    "items_pruned",
    "items_failed",
    "items_rejected",
    "items_skipped",
)

# A claim not refreshed for this long belongs to a scan that died: another may take over.
SCAN_CLAIM_STALE_AFTER = timedelta(minutes=10)
# How often a running scan refreshes its claim (at most; checked between items).
SCAN_HEARTBEAT = timedelta(seconds=60)
# How often a scan waiting for another one re-tries its claim.
SCAN_WAIT_POLL_SECONDS = 0.25

# Known secret files (ADR 0005: a list of names, not secret detection).
SECRET_FILE_PATTERNS = (
    ".env",
    ".env.*",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*.pem",
    "*.key",
    ".npmrc",
    ".pypirc",
    "credentials.json",
    ".netrc",
    "*.p12",
    "*.pfx",
    ".pgpass",
    ".htpasswd",
)
# Directories never descended into, listed once as rejected.
SECRET_DIR_NAMES = frozenset({".git", ".hg", ".svn", ".ssh", ".gnupg", ".aws"})


def is_secret_name(name: str) -> bool:
    lowered = name.lower()
    return any(fnmatch.fnmatchcase(lowered, pattern) for pattern in SECRET_FILE_PATTERNS)


def external_key(source: Source, item_path: str) -> str:
    """The document key of one item: unique per owner, stable across scans."""
    return f"source:{source.pk}:{item_path}"[:500]


class ItemFailed(Exception):
    """This item could not be ingested now; its previous snapshot is kept."""


class ScanAlreadyRunning(Exception):
    """Another scan holds this source; nothing was scanned or recorded."""

    def __init__(self, source: Source, since: datetime | None) -> None:
        self.source = source
        self.since = since
        when = f" (since {since:%Y-%m-%d %H:%M:%S} UTC)" if since else ""
        super().__init__(f"A scan of source “{source.name}” is already running{when}.")


class ScanClaimLost(Exception):
    """This scan's claim expired and another scan took the source over."""


# --- one scan per source --------------------------------------------------------------------


@dataclass
class ScanClaim:
    """A scan's hold on its source: the `scanning_since` value it wrote last."""

    source_id: int
    at: datetime

    def refresh(self) -> bool:
        """Move the claim to now; False if it was taken over (the value is not ours)."""
        now = timezone.now()
        kept = Source.objects.filter(pk=self.source_id, scanning_since=self.at).update(
            scanning_since=now
        )
        if kept:
            self.at = now
        return bool(kept)

    def release(self) -> None:
        """Give the source back, unless the claim was taken over meanwhile."""
        Source.objects.filter(pk=self.source_id, scanning_since=self.at).update(scanning_since=None)


def claim_scan(source: Source) -> ScanClaim | None:
    """Claim `source` for one scan, or None when another scan holds it. One conditional
    UPDATE, so of concurrent claimers exactly one succeeds, on SQLite and PostgreSQL."""
    from django.db.models import Q

    now = timezone.now()
    free = Q(scanning_since__isnull=True) | Q(scanning_since__lt=now - SCAN_CLAIM_STALE_AFTER)
    claimed = Source.objects.filter(free, pk=source.pk).update(scanning_since=now)
    return ScanClaim(source.pk, now) if claimed else None


def scan_running_since(source: Source) -> datetime | None:
    """When the scan holding `source` claimed it, or None (stale claims count as free)."""
    since = Source.objects.filter(pk=source.pk).values_list("scanning_since", flat=True).first()
    if since is None or since < timezone.now() - SCAN_CLAIM_STALE_AFTER:
        return None
    return since


def _claim_or_wait(source: Source, wait_seconds: float) -> ScanClaim:
    give_up = time.monotonic() + wait_seconds
    while True:
        claim = claim_scan(source)
        if claim is not None:
            return claim
        if time.monotonic() >= give_up:
            raise ScanAlreadyRunning(source, scan_running_since(source))
        time.sleep(SCAN_WAIT_POLL_SECONDS)


@dataclass(frozen=True)
class Fingerprint:
    size: int
    mtime_ns: int | None
    sha256: str


@dataclass
class RawItem:
    """Input bytes of one item and where they came from."""

    path: str  # relative to the root (folders, uploads) or the URL
    data: bytes
    fingerprint: Fingerprint
    content_type: str = ""
    absolute_path: str = ""  # blank for URLs: the snapshot is then the only copy
    title: str = ""
    filename: str = ""  # the name the extractor goes by; `path` when blank


# --- reading ------------------------------------------------------------------------------


def read_file(path: Path) -> tuple[bytes, Fingerprint]:
    """Bytes and fingerprint of a regular file, never following a link, at most the cap.

    The reading rules are `notes.sources.read_source_file`'s (shared with the markdown import
    and verified opening); this adds the source cap and says why as the scan records it.
    Raises `ItemFailed` when it is over `LODE_SOURCE_MAX_FILE_BYTES`, refused or unreadable.
    """
    try:
        found = read_source_file(path, limit=settings.LODE_SOURCE_MAX_FILE_BYTES)
    except SourceTooLarge as exc:
        if exc.grew:
            raise ItemFailed(f"over the {exc.limit:,}-byte cap (grew while read)") from None
        raise ItemFailed(f"{exc.size:,} bytes is over the {exc.limit:,}-byte cap") from None
    except SourceRefused as exc:
        raise ItemFailed(str(exc)) from None
    except OSError as exc:
        raise ItemFailed(f"cannot open: {exc.strerror or exc}") from None
    data = found.data
    return data, Fingerprint(len(data), found.mtime_ns, found.sha256)


def refingerprint(path: Path) -> Fingerprint | None:
    """The file's fingerprint now, or None if it is gone or unreadable."""
    try:
        _, fingerprint = read_file(path)
    except ItemFailed:
        return None
    return fingerprint


# --- the scan -----------------------------------------------------------------------------


class _Scan:
    """State of one running scan; `scan_source` is the entry point."""

    def __init__(self, source: Source, record: ScanRecord, claim: ScanClaim) -> None:
        self.source = source
        self.record = record
        self.claim = claim
        self.verified: list[int] = []  # items found unchanged (confirmed at the end)
        self.items = {
            item.path: item
            for item in SourceItem.objects.filter(source=source).select_related("document")
        }
        self.seen: set[str] = set()
        self.saved_at = time.monotonic()
        self._space_no_egress: dict[int, bool] = {}

    def withheld(self, space_id: int) -> bool:
        """The no-egress flag for a document of this source in space `space_id`: the
        source's own, or its space's (read once per scan and space)."""
        if space_id not in self._space_no_egress:
            self._space_no_egress[space_id] = space_no_egress(space_id)
        return self.source.no_egress or self._space_no_egress[space_id]

    # bookkeeping

    def found(self, count: int) -> None:
        """Record how many items this scan is about to read, and save it at once: the
        total is what makes a progress bar out of the counters."""
        self.record.items_found = count
        self.save_progress()

    def progress(self) -> None:
        """Save the counters now and then, so a page polling the running scan sees progress;
        keep the claim on the source fresh."""
        due = time.monotonic() - self.saved_at >= PROGRESS_SECONDS
        if due or self.record.items_seen % PROGRESS_EVERY == 0:
            self.save_progress()
        self.heartbeat()

    def save_progress(self) -> None:
        self.record.save(
            update_fields=[*COUNTERS, "items_found", "failures", "rejected", "skipped"]
        )
        self.saved_at = time.monotonic()

    def heartbeat(self) -> None:
        """Refresh the claim (at most every `SCAN_HEARTBEAT`) while reading, so a long scan
        is never taken over; if it was taken over, stop."""
        if timezone.now() - self.claim.at < SCAN_HEARTBEAT:
            return
        self.keep_claim()

    def keep_claim(self) -> None:
        """Refresh the claim now, or raise `ScanClaimLost`. Called inside each write's (and
        prune's) transaction, as its first statement: an extraction can take longer than
        the claim lives, and the heartbeat before it proves nothing about the moment of
        writing. Being an UPDATE, it also locks the source row (PostgreSQL) or the database
        (SQLite) until the write commits, so no other scan can claim in between."""
        if not self.claim.refresh():
            raise ScanClaimLost("another scan took this source over; stopped")

    @contextmanager
    def claimed_transaction(self) -> Iterator[None]:
        """A transaction that starts by refreshing the claim. If it rolls back, so does the
        claim's new time in the database, so the time the scan remembers is put back too."""
        previous = self.claim.at
        try:
            with transaction.atomic():
                self.keep_claim()
                yield
        except BaseException:
            self.claim.at = previous
            raise

    def fail(self, path: str, reason: str) -> None:
        self.seen.add(path)  # a failed item is not missing: never prune it
        self.record.items_failed += 1
        self.record.failures.append({"path": path, "reason": reason})
        item = self.items.get(path)
        if item is not None:
            SourceItem.objects.filter(pk=item.pk).update(
                last_error=reason[:2000], last_scan=self.record
            )

    def reject(self, path: str, reason: str) -> None:
        self.record.items_rejected += 1
        self.record.rejected.append({"path": path, "reason": reason})

    def skip(self, path: str, reason: str) -> None:
        self.record.items_skipped += 1
        self.record.skipped.append({"path": path, "reason": reason})

    # one item

    def unchanged(self, raw: RawItem) -> bool:
        """Same bytes as last ingested (by SHA-256, not mtime: ADR 0005) and still live.

        A failure recorded since (the file went bad, then came back) is cleared: the head
        already holds exactly these bytes' snapshot.
        """
        item = self.items.get(raw.path)
        if item is None or item.sha256 != raw.fingerprint.sha256:
            return False
        if item.document.deleted_at is not None or item.document.head_id is None:
            return False
        if (
            item.mtime_ns != raw.fingerprint.mtime_ns
            or item.byte_size != raw.fingerprint.size
            or item.last_error
        ):
            SourceItem.objects.filter(pk=item.pk).update(
                mtime_ns=raw.fingerprint.mtime_ns,
                byte_size=raw.fingerprint.size,
                last_error="",
                last_scan=self.record,
            )
        self.verified.append(item.pk)
        return True

    def ingest(self, raw: RawItem, *, recheck: Path | None) -> None:
        """Extract one item and write its snapshot if it changed."""
        self.record.items_seen += 1
        self.seen.add(raw.path)
        self.progress()
        if self.unchanged(raw):
            self.record.items_unchanged += 1
            return
        try:
            extracted = extractors.extract(
                raw.data, filename=raw.filename or raw.path, content_type=raw.content_type
            )
        except extractors.SkipItem as exc:
            self.seen.discard(raw.path)  # not indexable any more: pruned by a good scan
            self.skip(raw.path, exc.reason)
            return
        except extractors.ExtractionError as exc:
            self.fail(raw.path, str(exc))
            return
        except Exception as exc:  # an extractor crash must not end the scan
            logger.exception("extractor crashed on %s", raw.path)
            self.fail(raw.path, f"extractor crashed: {type(exc).__name__}: {exc}")
            return
        if recheck is not None and refingerprint(recheck) != raw.fingerprint:
            self.fail(raw.path, CHANGED_DURING_EXTRACTION)
            return
        is_new = raw.path not in self.items
        if is_new and not extracted.text.strip():
            self.seen.discard(raw.path)
            self.skip(raw.path, "empty (no text)")
            return
        self.write(raw, extracted)
        if is_new:
            self.record.items_new += 1
        else:
            self.record.items_changed += 1

    def write(self, raw: RawItem, extracted: extractors.Extracted) -> None:
        """The new snapshot, its passages (page, logical id), its annotations carried over
        and the item's fingerprint, in one transaction: all of it or none of it."""
        source = self.source
        title = (extracted.title or raw.title or raw.path)[:500]
        key = external_key(source, raw.path)
        with self.claimed_transaction():
            document = self._document(key, title)
            version = version_create(
                document=document,
                title=title,
                body=extracted.text,
                user=None,
                extractor_name=extracted.extractor_name,
                extractor_version=extracted.extractor_version,
                source_path=raw.absolute_path,
                source_sha256=raw.fingerprint.sha256 if raw.absolute_path else "",
            )
            label_passages(version, source=source, item_path=raw.path, pages=extracted.pages)
            # Annotations follow their quote into the new snapshot (or are marked orphaned)
            # in the same transaction that makes it the head.
            migrate_annotations(document, version)
            item, _ = SourceItem.objects.update_or_create(
                source=source,
                path=raw.path,
                defaults={
                    "document": document,
                    "sha256": raw.fingerprint.sha256,
                    "byte_size": raw.fingerprint.size,
                    "mtime_ns": raw.fingerprint.mtime_ns,
                    "last_scan": self.record,
                    "last_error": "",
                    "verified_at": timezone.now(),
                },
            )
            # Now that the item names its document: the source contains it, links between
            # the source's files resolve, and annotations point at the new snapshot.
            refresh_edges(
                [
                    document.pk,
                    *Annotation.objects.filter(document=document).values_list(
                        "note_document_id", flat=True
                    ),
                ]
            )
        self.items[raw.path] = item

    def _document(self, key: str, title: str) -> Document:
        """The item's external document, locked; created (in the source's space),
        or revived if it was pruned. A document moved to another space since stays there:
        a move is an explicit action a scan does not undo. Its no-egress column is the
        source's flag or its space's, which is what the egress planner reads."""
        source = self.source
        fields = {
            "kind": Document.Kind.EXTERNAL,
            "title": title,
            "trust_tier": source.trust_tier,
            "source_name": source.name,
        }
        document = (
            Document.objects.select_for_update()
            .filter(owner_id=source.owner_id, external_key=key)
            .first()
        )
        if document is None:
            try:
                with transaction.atomic():
                    return Document.objects.create(
                        owner_id=source.owner_id,
                        space_id=source.space_id,
                        external_key=key,
                        no_egress=self.withheld(source.space_id),
                        **fields,
                    )
            except IntegrityError:  # a concurrent scan created it first
                document = Document.objects.select_for_update().get(
                    owner_id=source.owner_id, external_key=key
                )
        for name, value in fields.items():
            setattr(document, name, value)
        document.no_egress = self.withheld(document.space_id)
        document.deleted_at = None
        document.save()
        return document

    # pruning

    def prune(self) -> None:
        """Soft-delete the documents of items this (successful) scan did not see."""
        for path, item in sorted(self.items.items()):
            if path in self.seen:
                continue
            with self.claimed_transaction():
                document = Document.objects.select_for_update().get(pk=item.document_id)
                if document.deleted_at is None:
                    document.deleted_at = timezone.now()
                    document.save(update_fields=["deleted_at", "updated_at"])
                    unindex_document(document)
                SourceItem.objects.filter(pk=item.pk).delete()
            self.record.items_pruned += 1


def label_passages(
    version: Version, *, source: Source, item_path: str, pages: list[tuple[int, int]] | None
) -> None:
    """Fill `logical_id` (and `page` for PDFs) on the passages `version_create` just wrote."""
    passages = list(Passage.objects.filter(version=version).order_by("position"))
    starts = [start for _, start in pages] if pages else []
    for passage in passages:
        passage.logical_id = logical_id(source.pk, item_path, passage.position, passage.text_sha256)
        if pages:
            passage.page = pages[max(bisect_right(starts, passage.start) - 1, 0)][0]
    fields = ["logical_id", "page"] if pages else ["logical_id"]
    Passage.objects.bulk_update(passages, fields, batch_size=500)


def _walk_folder(scan: _Scan, root: Path) -> None:
    """Ingest every file under `root`, rejecting secrets and links that leave the root.

    The folder is listed first (names only, cheap) so the scan knows its total before it
    reads anything; then each file is read and ingested in order."""
    files = _folder_files(scan, root)
    scan.found(len(files))
    for full, rel in files:
        _ingest_file(scan, full, rel)


def _folder_files(scan: _Scan, root: Path) -> list[tuple[Path, str]]:
    """The files under `root` to read (absolute, relative), in walk order; secrets and
    links are rejected or skipped here and never listed."""
    files: list[tuple[Path, str]] = []
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(directory)
        keep: list[str] = []
        for name in sorted(dirnames):
            rel = (here / name).relative_to(root).as_posix()
            full = here / name
            if name in SECRET_DIR_NAMES:
                scan.reject(rel + "/", "secret or version-control folder")
            elif full.is_symlink():
                _symlink(scan, root, full, rel + "/")
            else:
                keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            full = here / name
            rel = full.relative_to(root).as_posix()
            if full.is_symlink():
                _symlink(scan, root, full, rel)
            elif is_secret_name(name):
                scan.reject(rel, "known secret file name")
            else:
                files.append((full, rel))
    return files


def _symlink(scan: _Scan, root: Path, full: Path, rel: str) -> None:
    """Links are never followed: one leaving the root is rejected; one inside is skipped
    (its target is scanned at its own path)."""
    target = Path(os.path.realpath(full))
    if target != root and root not in target.parents:
        scan.reject(rel, "symbolic link resolving outside the folder")
    else:
        scan.skip(rel, "symbolic link (its target inside the folder is scanned directly)")


def _ingest_file(scan: _Scan, full: Path, rel: str) -> None:
    try:
        data, fingerprint = read_file(full)
    except ItemFailed as exc:
        scan.record.items_seen += 1
        scan.fail(rel, str(exc))
        scan.progress()
        return
    raw = RawItem(rel, data, fingerprint, absolute_path=str(full), title=rel)
    scan.ingest(raw, recheck=full)


def _scan_url(scan: _Scan, url: str, fetched: Fetched | None) -> None:
    scan.found(1)
    try:
        fetched = fetched if fetched is not None else fetch_url(url)
    except FetchError as exc:
        scan.record.items_seen += 1
        scan.fail(url, str(exc))
        raise
    fingerprint = Fingerprint(len(fetched.data), None, hashlib.sha256(fetched.data).hexdigest())
    # The content type picks the extractor; the name only matters if the type is missing.
    name = fetched.final_url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    raw = RawItem(
        url,
        fetched.data,
        fingerprint,
        content_type=fetched.content_type,
        title=url,
        filename=name if "." in name else "index.html",
    )
    scan.ingest(raw, recheck=None)


def upload_folder(source: Source) -> Path:
    """Where an upload source's one file is stored (under the data folder)."""
    return Path(settings.DATA_DIR) / "uploads" / str(source.pk)


def interrupt_stale_scans(source: Source) -> int:
    """Mark scans left `running` by a killed process as failed; returns how many."""
    return ScanRecord.objects.filter(source=source, status=ScanRecord.Status.RUNNING).update(
        status=ScanRecord.Status.FAILED,
        finished_at=timezone.now(),
        error="interrupted: the scanning process stopped before finishing",
    )


def space_no_egress(space_id: int) -> bool:
    """Whether the space's admin withheld all its documents from egress."""
    return Space.objects.filter(pk=space_id, no_egress=True).exists()


def sync_source_flags(source: Source) -> int:
    """Copy the source's trust tier, no-egress flag and name onto its documents (they may
    have been edited in the admin since the last scan); returns documents changed. A
    document in a no-egress space stays withheld whatever the source says."""
    from django.db.models import Q

    closed = Q(space_id__in=Space.objects.filter(no_egress=True).values("pk"))
    documents = Document.objects.filter(source_items__source=source)
    changed = 0
    for where, withheld in ((closed, True), (~closed, source.no_egress)):
        changed += (
            documents.filter(where)
            .filter(
                ~Q(trust_tier=source.trust_tier)
                | ~Q(no_egress=withheld)
                | ~Q(source_name=source.name)
            )
            .update(trust_tier=source.trust_tier, no_egress=withheld, source_name=source.name)
        )
    refresh_staleness(source)  # the tier just copied, aged again
    return changed


def scan_source(
    source: Source,
    *,
    trigger: str = "manual",
    wait_seconds: float = 0,
    fetched: Fetched | None = None,
) -> ScanRecord:
    """Scan `source` once (first ingest or refresh) and return its finished scan record.
    A URL source's page already `fetched` by the caller (an ask's tool call, which counts
    and logs its own fetches) is ingested as it is instead of being fetched again.

    Never raises for a problem with the source's content: everything is recorded on the
    scan record (status ok / partial / failed, counters, failures, rejected, skipped).
    Raises `ScanAlreadyRunning` (nothing recorded) when another scan holds the source and
    does not let go within `wait_seconds`.
    """
    claim = _claim_or_wait(source, wait_seconds)
    try:
        return _scan_claimed(source, trigger, claim, fetched)
    finally:
        claim.release()


def _scan_claimed(
    source: Source, trigger: str, claim: ScanClaim, fetched: Fetched | None = None
) -> ScanRecord:
    # Holding the claim, any scan still "running" was left by a process that died.
    interrupt_stale_scans(source)
    sync_source_flags(source)
    record = ScanRecord.objects.create(source=source, trigger=trigger[:16])
    scan = _Scan(source, record, claim)
    try:
        if source.kind == Source.Kind.URL:
            _scan_url(scan, source.location, fetched)
        else:
            _walk_folder(scan, Path(os.path.realpath(_folder_root(source))))
    except (ItemFailed, FetchError, OSError, ScanClaimLost) as exc:
        record.status = ScanRecord.Status.FAILED
        record.error = str(exc)
    except Exception as exc:  # recorded, then re-raised: a bug must not look like success
        record.status = ScanRecord.Status.FAILED
        record.error = f"scan crashed: {type(exc).__name__}: {exc}"
        _finish(record)
        raise
    if record.status != ScanRecord.Status.FAILED:
        _settle_status(record, scan)
    if record.items_new + record.items_changed:
        _note_embedding_problem(record)
    _finish(record)
    confirm_unchanged(scan.verified)
    refresh_staleness(source)
    return record


def _folder_root(source: Source) -> Path:
    """The folder a folder or upload source scans; ItemFailed when it may not be scanned."""
    if source.kind == Source.Kind.UPLOAD:
        root = upload_folder(source)
        if root.is_symlink() or not root.is_dir():
            raise ItemFailed("the uploaded file's folder is missing")
        return root
    # Re-checked on every scan: the folder or the allowed roots may have changed since the
    # source was added (externals.folders; non-staff owners get one message for all).
    refusal = source_scan_refusal(source)
    if refusal:
        raise ItemFailed(refusal)
    return Path(source.location)


def _settle_status(record: ScanRecord, scan: _Scan) -> None:
    """The status of a scan that ran to the end: ok (and prune what disappeared) when no
    item failed, failed when every item did, partial otherwise."""
    if record.items_failed == 0:
        record.status = ScanRecord.Status.OK
        try:
            scan.prune()
        except ScanClaimLost as exc:  # what was pruned before it is kept pruned
            record.status = ScanRecord.Status.FAILED
            record.error = str(exc)
    elif record.items_failed >= record.items_seen:
        record.status = ScanRecord.Status.FAILED
        record.error = "every item failed"
    else:
        record.status = ScanRecord.Status.PARTIAL


def _note_embedding_problem(record: ScanRecord) -> None:
    """Record on the scan why its new snapshots cannot be embedded now, if they cannot.

    Not an item failure (nothing is lost and pruning stays allowed): the new snapshots are
    already searchable by keywords; their vectors wait for the worker."""
    problem = embedding_problem()
    if problem:
        record.failures.append(
            {
                "path": "(embedding)",
                "reason": f"embedding unavailable: {problem}. The new snapshots are "
                "searchable by keywords now and by meaning once the worker can embed them.",
            }
        )


def embedding_problem() -> str:
    """Why the new snapshots cannot be embedded now (model or vector store unavailable), or
    "" — embedding itself runs in the background worker, so a scan can only report it."""
    from retrieval.index.embeddings import EmbeddingUnavailable, get_embedder
    from retrieval.index.vectors import VectorStoreUnavailable, get_vector_store

    try:
        get_embedder()
        get_vector_store().count()
    except (EmbeddingUnavailable, VectorStoreUnavailable) as exc:
        return str(exc)
    return ""


def confirm_unchanged(item_ids: list[int]) -> None:
    """Stamp the items a scan found unchanged as verified now (one UPDATE per 500)."""
    now = timezone.now()
    for start in range(0, len(item_ids), 500):
        SourceItem.objects.filter(pk__in=item_ids[start : start + 500]).update(verified_at=now)


def refresh_staleness(source: Source) -> int:
    """Rank and label the source's externals by age: a document whose head snapshot was
    last confirmed more than `stale_after_days` ago (`SourceItemQuerySet.confirmed_before`,
    the rule the pages' badge uses too) gets the trust tier "stale external snapshot"
    (below current externals in the trust gradient); a re-confirmed one goes back to
    "external snapshot". Only for sources of the external tier (a source set to another tier
    keeps it). Returns how many documents changed tier."""
    current, stale = TrustTier.EXTERNAL_CURRENT, TrustTier.EXTERNAL_STALE
    if source.trust_tier != current:
        return 0
    stale_ids = set(
        SourceItem.objects.filter(source=source)
        .confirmed_before(stale_cutoff(source.stale_after_days))
        .values_list("document_id", flat=True)
    )
    changed = (
        Document.objects.filter(pk__in=stale_ids).exclude(trust_tier=stale).update(trust_tier=stale)
    )
    changed += (
        Document.objects.filter(source_items__source=source, trust_tier=stale)
        .exclude(pk__in=stale_ids)
        .update(trust_tier=current)
    )
    return changed


def _finish(record: ScanRecord) -> None:
    record.finished_at = timezone.now()
    record.save()
