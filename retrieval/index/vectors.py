"""The vector leg's store: one Chroma collection per embedding manifest.

Chroma is a derived index (DESIGN.md): the canonical record of which passage has a vector
under which manifest is the `PassageVector` table, written only after a Chroma upsert
succeeded. Locations:

* default: an embedded `PersistentClient` at `settings.LODE_CHROMA_PATH` (`<data>/chroma`);
* `CHROMA_URL` set: an `HttpClient` to a Chroma server (`chroma run --path DIR --port N`).

Embeddings are always passed in; `documents=` or `query_texts=` would make Chroma fetch its
own model from the internet (MODELS.md).

Embedded mode and several processes. The web server reads and `db_worker` writes the same
folder, but a `PersistentClient` caches its HNSW index in memory: a reader never sees
another process's writes, and a writer holding a stale copy loses vectors (both measured
with chromadb 1.5.9). So every embedded-mode operation follows a small protocol: writers
hold an exclusive `flock` on `<path>/lode-write.lock` and bump a generation token file
after writing; readers hold a shared lock; either reopens its client when the token
changed since it last looked. With a Chroma server none of this is needed.

All Chroma and connection errors become `VectorStoreUnavailable` (a short user-facing
reason) so search can degrade to lexical and say why.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from notes.models import Document
from retrieval.index.embeddings import Manifest, current_manifest
from retrieval.index.lexical.base import live_head_spaces
from retrieval.models import Passage, PassageVector, PendingVector, VectorIndexState

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

logger = logging.getLogger("lode.vectors")

DEFAULT_LIMIT = 256  # ADR 0005: each retrieval channel reads at most 256 candidates
METADATA_KEYS = ("document", "version", "space", "kind", "trust", "created", "text_sha256")
GENERATION_FILE = "lode-generation"
LOCK_FILE = "lode-write.lock"
# Embedded mode: the longest a reader waits for a writer's batch (a batch takes milliseconds).
LOCK_TIMEOUT_SECONDS = 10.0
# After a server failed to answer, calls fail at once for this long instead of each one
# waiting for a timeout: a dead server must not make every search slow.
FAILURE_RETRY_SECONDS = 5.0
PAGE_SIZE = 1000  # ids per request when listing or deleting many vectors
# Largest eligible set the exact fallback of `VectorStore.query` scores in numpy (~15 MB).
EXACT_FALLBACK_MAX = 10_000
# Extra candidates a query fetches so that vectors of just-replaced passages (dropped after
# the fetch) do not leave the result short.
QUERY_MARGIN = 32
# An audience that sees at least this share of the live documents is served by a query
# without the space clause, fetched deeper by 1 / share and checked on the database, rather
# than by Chroma's metadata filter, whose cost grows with the vectors it admits: at 500k
# vectors, 873 ms for a quarter of them against 9 ms unfiltered (bench/README.md, "Dense
# leg, 500,000 synthetic vectors"). Below it, the deeper fetch would cost more than the
# filter.
UNFILTERED_SHARE = 0.2


class VectorStoreUnavailable(Exception):
    """The vector index cannot be used right now; `str()` is a short user-facing reason."""


@dataclass(frozen=True)
class VectorHit:
    """One dense-leg candidate. `cosine` is cosine similarity (1 - Chroma cosine distance)."""

    passage_id: int
    cosine: float


# --- pure helpers ------------------------------------------------------------------------


def collection_name(manifest_key: str) -> str:
    """`<prefix>_<manifest key>`: one collection per manifest, never two models mixed."""
    return f"{settings.LODE_CHROMA_COLLECTION_PREFIX}_{manifest_key}"


def eligibility_where(
    space_ids: Iterable[int], where: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Chroma `where` for the audience's spaces AND every extra filter, applied before the
    top-k cut (the filter carries the space, not the owner)."""
    ids = sorted({int(pk) for pk in space_ids})
    space: dict[str, Any] = {"$eq": ids[0]} if len(ids) == 1 else {"$in": ids}
    clauses: list[dict[str, Any]] = [{"space": space}]
    clauses.extend({key: value} for key, value in (where or {}).items())
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def vector_metadata(passage: Passage, manifest_key: str) -> dict[str, str | int]:
    """Chroma metadata of a passage's vector (`passage.document`/`.version` are read)."""
    return {
        "document": passage.document_id,
        "version": passage.version_id,
        "space": passage.document.space_id,
        "kind": passage.document.kind,
        "trust": passage.document.trust_tier,
        "created": int(passage.version.created_at.timestamp()),
        "text_sha256": passage.text_sha256,
        "manifest": manifest_key,
    }


def hits_from_result(
    ids: Sequence[str], distances: Sequence[float], *, exclude: set[int], limit: int
) -> list[VectorHit]:
    """Chroma's ids/distances as hits: best first, ties by passage id, `exclude` dropped."""
    hits = [
        VectorHit(passage_id=int(raw), cosine=1.0 - float(distance))
        for raw, distance in zip(ids, distances, strict=True)
        if int(raw) not in exclude
    ]
    hits.sort(key=lambda hit: (-hit.cosine, hit.passage_id))
    return hits[:limit]


def exact_distances(
    embeddings: Sequence[Sequence[float]] | np.ndarray, query: np.ndarray
) -> list[float]:
    """Cosine distances (1 - cosine similarity) of each vector to `query`, computed exactly."""
    if len(embeddings) == 0:
        return []
    matrix = np.asarray(embeddings, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query))
    cosines = (matrix @ query) / np.where(norms == 0, 1.0, norms)
    return [1.0 - float(c) for c in cosines]


def chunked(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# --- canonical records (ORM) -------------------------------------------------------------


def head_passages() -> QuerySet[Passage]:
    """Passages that should have a vector: head versions of live documents."""
    return Passage.objects.filter(is_head=True, document__deleted_at__isnull=True)


def pending_passages(
    manifest_key: str, passage_ids: Iterable[int] | None = None
) -> QuerySet[Passage]:
    """Head passages with no recorded vector under `manifest_key` (optionally within ids)."""
    queryset = head_passages().exclude(vectors__manifest_key=manifest_key)
    if passage_ids is not None:
        queryset = queryset.filter(pk__in=list(passage_ids))
    return queryset


def stale_records(passage_ids: Iterable[int] | None = None) -> QuerySet[PassageVector]:
    """Vector records (any manifest) whose passage is no longer a live head passage."""
    queryset = PassageVector.objects.exclude(passage_id__in=head_passages().values("pk"))
    if passage_ids is not None:
        queryset = queryset.filter(passage_id__in=list(passage_ids))
    return queryset


def live_passage_ids(
    passage_ids: Sequence[int], space_ids: Iterable[int] | None = None
) -> set[int]:
    """Which of these passages are live head passages (in one of `space_ids`, if given),
    read by primary key (`lexical.base.live_head_spaces`, the lexical top list's check too).

    A vector can outlive its passage's head status for a moment: the old version's vectors
    stay in Chroma until the worker's next sync deletes them; and a moved document's vectors
    carry its old space until the sync re-stamps them. The canonical space is checked here.
    """
    allowed = None if space_ids is None else set(space_ids)
    spaces = live_head_spaces(list(passage_ids))
    return {pk for pk, space in spaces.items() if allowed is None or space in allowed}


def sees_every_document(space_ids: Iterable[int]) -> bool:
    """True when every document is in one of `space_ids`, so no ineligible vector exists.

    Then the space clause in Chroma's `where` is a no-op — yet it is what makes a filtered
    HNSW query slow (measured at 8k vectors: ~33–63 ms filtered vs 2–3 ms unfiltered).

    Asked as "is there a document in a gap between these spaces' ids": ranges an index
    answers at once. `NOT IN` reads every document (2.8 ms against 0.5 ms at 36k documents,
    on every hybrid search).
    """
    ordered = sorted(set(space_ids))
    if not ordered:
        return not Document.objects.exists()
    gaps = Q(space_id__lt=ordered[0]) | Q(space_id__gt=ordered[-1])
    for low, high in itertools.pairwise(ordered):
        if high > low + 1:
            gaps |= Q(space_id__gt=low, space_id__lt=high)
    return not Document.objects.filter(gaps).exists()


def audience_share(space_ids: Iterable[int]) -> float:
    """The share of live documents that lie in `space_ids` (1.0 when there are none): how
    deep a query without the space clause must look to find as many of theirs."""
    spaces = sorted(set(space_ids))
    counts = Document.objects.filter(deleted_at__isnull=True).aggregate(
        total=Count("pk"), theirs=Count("pk", filter=Q(space_id__in=spaces))
    )
    return counts["theirs"] / counts["total"] if counts["total"] else 1.0


def index_state() -> VectorIndexState:
    """The index state row, created on first use with this code's manifest as active."""
    manifest = current_manifest()
    state, _ = VectorIndexState.objects.get_or_create(
        pk=1,
        defaults={
            "active_key": manifest.key,
            "active_manifest": manifest.as_metadata(),
            "switched_at": timezone.now(),
        },
    )
    return state


def active_manifest_key() -> str:
    """The manifest whose collection queries read."""
    return index_state().active_key


def pending_count(
    space_ids: Iterable[int] | None = None, *, manifest_key: str | None = None
) -> int:
    """Head passages of live documents (in `space_ids`, if given) without a vector under
    `manifest_key` (default: the active manifest), by the anti-join over every head passage:
    the truth the worker and the progress figures go by. Search's note counts the pending
    table instead (`pending_note_count`), whose cost does not grow with the corpus.
    """
    queryset = pending_passages(manifest_key or active_manifest_key())
    if space_ids is not None:
        queryset = queryset.filter(document__space_id__in=sorted(set(space_ids)))
    return queryset.count()


# --- the pending table (what the "not yet embedded" note counts) ------------------------

PENDING_BATCH = 900  # ids per statement: SQLite's bound-parameter limit, with room to spare


def read_index_state(*, lock: bool = False) -> tuple[str, str]:
    """(active, building) manifest keys, read without creating the state row; with no row
    the active key is the code's own (as `index_state()` would make it) and nothing is
    building. `lock=True` locks the row, when it exists, for the rest of the caller's
    transaction (see `lock_index_state`)."""
    rows = VectorIndexState.objects.filter(pk=1)
    if lock:
        rows = rows.select_for_update()
    row = rows.values_list("active_key", "building_key").first()
    return row if row is not None else (current_manifest().key, "")


def lock_index_state() -> str:
    """Lock the index state row for the rest of the caller's transaction; returns the active
    manifest key.

    Every write that decides from the vector records whether an existing passage is pending
    (marking it again, recording vectors, rebuilding the table, switching the manifest)
    takes this lock first, so on PostgreSQL none of them can read the records while another
    changes them and leave a row nobody removes. SQLite serialises writers anyway. Without a
    row nothing was ever recorded (the worker creates it before its first record), so there
    is nothing to race with and nothing is created here: a row inserted inside a note's
    transaction would make every concurrent writer queue on its primary key.
    """
    return read_index_state(lock=True)[0]


def _insert_pending(passage_ids: Sequence[int], key: str) -> int:
    marked = 0
    for part in chunked(passage_ids, PENDING_BATCH):
        todo = pending_passages(key, part).values_list("pk", flat=True)
        rows = [PendingVector(passage_id=pk) for pk in todo]
        PendingVector.objects.bulk_create(rows, ignore_conflicts=True)
        marked += len(rows)
    return marked


def mark_new_pending(passage_ids: Iterable[int]) -> int:
    """Mark passages the caller's transaction just created as head passages (a new head, a
    re-chunk): none can have a vector yet, and no worker sees them before the commit, so no
    lock is needed (a bulk import may hold its transaction for a while). Returns how many."""
    ids = sorted(set(passage_ids))
    return _insert_pending(ids, read_index_state()[0]) if ids else 0


def mark_pending_again(passage_ids: Iterable[int]) -> int:
    """Mark which of these existing passages are live head passages without a vector under
    the active manifest: after an undelete puts them back at head (a vector the worker had
    not yet pruned still counts), or after their records were dropped (prune, a lost vector
    folder, a repair). Takes the index state lock (`lock_index_state`). Returns how many."""
    ids = sorted(set(passage_ids))
    if not ids:
        return 0
    with transaction.atomic():
        return _insert_pending(ids, lock_index_state())


def unmark_pending(passage_ids: Iterable[int], manifest_key: str, active_key: str) -> None:
    """These passages now have a vector under `manifest_key`: no longer pending if it is the
    active manifest (a rebuild under another one changes nothing until it becomes active).
    The caller holds the index state lock, in the transaction that wrote the records."""
    if manifest_key != active_key:
        return
    for part in chunked(sorted(set(passage_ids)), PENDING_BATCH):
        PendingVector.objects.filter(passage_id__in=list(part)).delete()


def forget_unheaded_pending() -> int:
    """Drop the rows of passages that left the head set before they were embedded (an edit
    or a delete overtook the worker); returns how many. The count never reads them (it joins
    the head passages), so this only keeps the table the size of the backlog."""
    deleted, _ = PendingVector.objects.filter(passage__is_head=False).delete()
    return deleted


def rebuild_pending(manifest_key: str | None = None) -> int:
    """Rewrite the table from the anti-join under `manifest_key` (default: the active one);
    returns how many passages are pending. Run in the transaction that switches the active
    manifest, and by `lode_index repair`; holds the index state lock, so no worker records a
    vector between the read and the rewrite."""
    with transaction.atomic():
        active = lock_index_state()
        key = manifest_key or active
        ids = list(pending_passages(key).order_by("pk").values_list("pk", flat=True))
        PendingVector.objects.all().delete()
        PendingVector.objects.bulk_create(
            [PendingVector(passage_id=pk) for pk in ids],
            batch_size=PENDING_BATCH,
            ignore_conflicts=True,  # a new head's rows, committed meanwhile, are right too
        )
    return len(ids)


@dataclass(frozen=True)
class PendingDrift:
    """How the pending table differs from the anti-join: passages it misses (the note
    undercounts) and passages it holds that have a vector (the note overcounts)."""

    missing: int
    extra: int


def _drift_ids(key: str) -> tuple[set[int], set[int]]:
    truth = set(pending_passages(key).values_list("pk", flat=True))
    listed = set(
        PendingVector.objects.filter(
            passage__is_head=True, passage__document__deleted_at__isnull=True
        ).values_list("passage_id", flat=True)
    )
    return truth - listed, listed - truth


def pending_drift(manifest_key: str | None = None) -> PendingDrift:
    """Compare the table with the anti-join (database only: works while Chroma is down).

    The two are read by separate statements, and a worker recording vectors in between
    makes a passage look missing for a moment; so a drift found is read again, and only the
    passages drifting both times are reported.
    """
    key = active_manifest_key() if manifest_key is None else manifest_key
    missing, extra = _drift_ids(key)
    if missing or extra:
        again_missing, again_extra = _drift_ids(key)
        missing &= again_missing
        extra &= again_extra
    return PendingDrift(missing=len(missing), extra=len(extra))


def pending_note_count(space_ids: Iterable[int] | None = None, *, at_most: int) -> int:
    """Live head passages (in `space_ids`, if given) waiting for a vector under the active
    manifest, from the pending table; a result above `at_most` means "more than `at_most`".

    Exact after every write (the table is written in the same transactions as the passages
    and the vector records), so a passage saved a moment ago is counted. The usual backlog
    is small: its ids are read from the table alone, then those passages and their
    documents by primary key, eligibility checked in Python — statements whose cost follows
    the backlog, never the corpus. (Joined, or filtered by space in SQL, the planner may
    start from the space's documents and scan every passage: SQLite without statistics took
    3.5 s for 300 pending ids among 56k passages; bench/pending_note.py.) A backlog of
    `PENDING_BATCH` or more (a bulk import) is counted by the join, which stops at
    `at_most + 1` rows — soon, with that many pending.
    """
    allowed = None if space_ids is None else frozenset(space_ids)
    ids = list(PendingVector.objects.order_by("pk").values_list("pk", flat=True)[:PENDING_BATCH])
    if not ids:
        return 0
    if len(ids) < PENDING_BATCH:
        heads = list(
            Passage.objects.filter(pk__in=ids, is_head=True)
            .order_by()
            .values_list("document_id", flat=True)
        )
        documents = (
            Document.objects.filter(pk__in=set(heads))
            .order_by()
            .values_list("pk", "space_id", "deleted_at")
        )
        live = {
            pk
            for pk, space_id, deleted_at in documents
            if deleted_at is None and (allowed is None or space_id in allowed)
        }
        return min(sum(document_id in live for document_id in heads), at_most + 1)
    queryset = PendingVector.objects.filter(
        passage__is_head=True, passage__document__deleted_at__isnull=True
    )
    if allowed is not None:
        queryset = queryset.filter(passage__document__space_id__in=sorted(allowed))
    return queryset.order_by().values("pk")[: at_most + 1].count()


# --- Chroma connections ------------------------------------------------------------------


@contextlib.contextmanager
def _file_lock(path: Path, *, exclusive: bool, timeout: float) -> Iterator[None]:
    """A shared or exclusive `flock` on `path`, waiting at most `timeout` seconds."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, mode)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise VectorStoreUnavailable("vector index busy") from None
                time.sleep(0.005)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _http_settings(url: str) -> tuple[str, int, bool]:
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise VectorStoreUnavailable("CHROMA_URL is not an http(s) URL")
    ssl = parts.scheme == "https"
    try:
        port = parts.port or (443 if ssl else 80)
    except ValueError:
        raise VectorStoreUnavailable("CHROMA_URL has a bad port") from None
    return parts.hostname, port, ssl


def _timeout() -> Any:
    import httpx

    seconds = float(settings.LODE_CHROMA_TIMEOUT_SECONDS)
    return httpx.Timeout(seconds, connect=min(seconds, 2.0))


def _open_http_client(url: str) -> ClientAPI:
    """An `HttpClient` whose requests time out (chromadb's own client never does)."""
    import chromadb
    import httpx
    from chromadb.config import Settings

    host, port, ssl = _http_settings(url)
    # Probe first with a short timeout: creating the client already makes requests, with
    # no timeout, so a black-holed address would otherwise hang here for minutes.
    base = f"{'https' if ssl else 'http'}://{host}:{port}"
    try:
        httpx.get(f"{base}/api/v2/heartbeat", timeout=_timeout()).raise_for_status()
    except httpx.HTTPError as exc:
        raise VectorStoreUnavailable("vector server unreachable") from exc
    try:
        client = chromadb.HttpClient(
            host=host, port=port, ssl=ssl, settings=Settings(anonymized_telemetry=False)
        )
    except Exception as exc:  # e.g. another web app answering on that port
        raise VectorStoreUnavailable("vector server is not a Chroma server") from exc
    # chromadb 1.5.9 exposes no timeout setting; its httpx session is `_server._session`.
    session = getattr(getattr(client, "_server", None), "_session", None)
    if isinstance(session, httpx.Client):
        session.timeout = _timeout()
    else:
        logger.warning("could not set a timeout on the Chroma HTTP client; calls may hang")
    return client


def _open_persistent_client(path: Path) -> ClientAPI:
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


class _Connection:
    """One Chroma client for one location, shared by every store in this process."""

    def __init__(self, *, path: Path | None, url: str | None) -> None:
        self.path = path
        self.url = url
        self._lock = threading.RLock()  # one Chroma call at a time per process and location
        self._client: ClientAPI | None = None
        self._generation: str | None = None
        self._collections: dict[str, Collection] = {}
        self._failed_at = 0.0
        self._failure = ""

    # embedded-mode generation token ----------------------------------------------------
    def _read_generation(self) -> str:
        assert self.path is not None
        try:
            return (self.path / GENERATION_FILE).read_text(encoding="ascii")
        except FileNotFoundError:
            return ""

    def _bump_generation(self) -> str:
        assert self.path is not None
        token = secrets.token_hex(8)
        temp = self.path / f".{GENERATION_FILE}.{os.getpid()}"
        temp.write_text(token, encoding="ascii")
        os.replace(temp, self.path / GENERATION_FILE)
        return token

    def _close_client(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
        self._client = None
        self._collections.clear()

    def close(self) -> None:
        with self._lock:
            self._close_client()

    @contextlib.contextmanager
    def session(self, *, write: bool) -> Iterator[_Connection]:
        """Hold this location for one operation; its client is current inside."""
        with self._lock:
            if self.url is not None:
                if time.monotonic() - self._failed_at < FAILURE_RETRY_SECONDS:
                    raise VectorStoreUnavailable(self._failure)
                if self._client is None:
                    try:
                        self._client = _open_http_client(self.url)
                    except VectorStoreUnavailable as exc:
                        self.mark_failed(str(exc))
                        raise
                yield self
                return
            assert self.path is not None
            try:
                self.path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise VectorStoreUnavailable("vector index folder cannot be created") from exc
            with _file_lock(self.path / LOCK_FILE, exclusive=write, timeout=LOCK_TIMEOUT_SECONDS):
                token = self._read_generation()
                if self._client is None or token != self._generation:
                    # Another process wrote since this client loaded its index: reload.
                    self._close_client()
                    try:
                        self._client = _open_persistent_client(self.path)
                    except Exception as exc:
                        logger.exception("cannot open the Chroma folder %s", self.path)
                        raise VectorStoreUnavailable("vector index cannot be opened") from exc
                    self._generation = token
                try:
                    yield self
                finally:
                    if write:
                        self._generation = self._bump_generation()

    def collection(self, name: str, *, create: bool, metadata: dict[str, Any]) -> Collection | None:
        """The named collection (created if `create`), or None when it does not exist."""
        from chromadb.errors import NotFoundError

        assert self._client is not None
        cached = self._collections.get(name)
        if cached is not None:
            return cached
        if create:
            found = self._client.get_or_create_collection(
                name, embedding_function=None, metadata=metadata
            )
        else:
            try:
                found = self._client.get_collection(name, embedding_function=None)
            except NotFoundError:
                return None
        self._collections[name] = found
        return found

    def forget(self, name: str) -> None:
        self._collections.pop(name, None)

    def mark_failed(self, reason: str) -> None:
        """Fail fast for a while: the server did not answer."""
        self._failed_at, self._failure = time.monotonic(), reason


_connections: dict[tuple[str, str], _Connection] = {}
_connections_lock = threading.Lock()


def _connection() -> _Connection:
    """The process's connection to the configured location (one client per path or URL)."""
    url = settings.CHROMA_URL
    key = ("url", url) if url else ("path", str(Path(settings.LODE_CHROMA_PATH).resolve()))
    with _connections_lock:
        connection = _connections.get(key)
        if connection is None:
            if url:
                connection = _Connection(path=None, url=url)
            else:
                connection = _Connection(path=Path(key[1]), url=None)
            _connections[key] = connection
        return connection


def reset_vector_stores() -> None:
    """Close every client this process opened (tests; after moving the data folder)."""
    with _connections_lock:
        for connection in _connections.values():
            connection.close()
        _connections.clear()


def _is_transport_error(exc: BaseException) -> bool:
    try:
        import httpx
    except ImportError:  # pragma: no cover - chromadb depends on httpx
        return False
    return isinstance(exc, httpx.TransportError)


# --- the store ---------------------------------------------------------------------------


class VectorStore:
    """The collection of one manifest at the configured location."""

    def __init__(self, connection: _Connection, manifest_key: str, manifest: Manifest | None):
        self._connection = connection
        self.manifest_key = manifest_key
        self.name = collection_name(manifest_key)
        self._metadata: dict[str, Any] = {"hnsw:space": "cosine"}
        if manifest is not None:
            self._metadata.update(manifest.as_metadata())

    @contextlib.contextmanager
    def _use(self, action: str, *, write: bool, create: bool) -> Iterator[Collection | None]:
        """The collection for one operation; any failure becomes `VectorStoreUnavailable`."""
        connection = self._connection
        with connection.session(write=write):
            try:
                yield connection.collection(self.name, create=create, metadata=self._metadata)
            except VectorStoreUnavailable:
                raise
            except Exception as exc:
                # Chroma raises assorted types (its own errors, httpx, Rust panics as
                # exceptions); to search they all mean "no dense leg right now".
                connection.forget(self.name)
                logger.warning("Chroma %s on %s failed: %r", action, self.name, exc)
                if _is_transport_error(exc):
                    connection.mark_failed("vector server unreachable")
                    raise VectorStoreUnavailable("vector server unreachable") from exc
                raise VectorStoreUnavailable(f"vector index {action} failed") from exc

    def query(
        self,
        vector: np.ndarray,
        *,
        space_ids: Iterable[int],
        limit: int = DEFAULT_LIMIT,
        where: dict[str, Any] | None = None,
    ) -> list[VectorHit]:
        """The `limit` nearest passages of the documents in `space_ids`, best first.

        Eligibility (the spaces, plus every key of `where` — Chroma metadata filters on the
        keys in `METADATA_KEYS` — ANDed) is part of Chroma's search, so an ineligible
        passage never takes a top-k slot. An audience that sees every document, or a large
        share of them (`UNFILTERED_SHARE`), is served without the space clause instead,
        fetched deeper by the share, and its spaces are checked on the database: the
        canonical space, not the vector's stamp, so a moved document counts in its new
        space at once. Vectors of passages that are no longer at head (the sync has yet to
        delete them) are dropped after an over-fetch, and the search goes deeper if they
        left the result short, so they never take a slot either. When the HNSW search
        returns fewer than asked, the eligible set (up to `EXACT_FALLBACK_MAX` vectors) is
        scored exactly instead.
        """
        query = np.asarray(vector, dtype=np.float32)
        if query.ndim != 1:
            raise ValueError(f"a query vector must be 1-d, got shape {query.shape}")
        spaces = sorted({int(pk) for pk in space_ids})
        if limit <= 0 or not spaces:
            return []
        # An audience that sees every document (a single-user install) skips the no-op
        # space clause; one that sees a large share of them skips it too and looks deeper
        # (`UNFILTERED_SHARE`). The canonical check below drops (and searches past) any
        # vector that is not a live head passage in the audience's spaces, so nothing
        # ineligible can take a slot either way.
        clause = None if where is None else eligibility_where(spaces, where)
        wanted = limit + QUERY_MARGIN
        by_share = False  # unfiltered because the audience sees a large share
        if where is None and not sees_every_document(spaces):
            share = audience_share(spaces)
            if share >= UNFILTERED_SHARE:
                wanted, by_share = int(wanted / share) + QUERY_MARGIN, True
            else:
                clause = eligibility_where(spaces)
        while True:
            ids, distances, complete = self._nearest(query, clause, wanted)
            live = live_passage_ids([int(raw) for raw in ids], spaces)
            dead = {int(raw) for raw in ids} - live
            hits = hits_from_result(ids, distances, exclude=dead, limit=limit)
            if len(hits) == limit or complete:
                return hits
            if by_share:
                # Fewer of theirs than the share promised (the share counts documents: theirs
                # may have few vectors yet, or lie far from the query). Deeper unfiltered
                # looks could grow to the whole collection; Chroma's filter answers in one.
                clause, wanted, by_share = eligibility_where(spaces), limit + QUERY_MARGIN, False
                continue
            wanted *= 4  # more replaced passages than the margin: look deeper

    def _nearest(
        self, query: np.ndarray, clause: dict[str, Any] | None, wanted: int
    ) -> tuple[list[str], list[float], bool]:
        """Ids and cosine distances of the `wanted` nearest eligible vectors, and whether
        that is every eligible vector there is."""
        with self._use("query", write=False, create=False) as collection:
            if collection is None:
                return [], [], True
            result = collection.query(
                query_embeddings=[query], n_results=wanted, where=clause, include=["distances"]
            )
            ids, distances = list(result["ids"][0]), list(result["distances"][0])
            if len(ids) == wanted:
                return ids, distances, False
            # Unfiltered and short is every vector, unless the HNSW walk missed some: seen in
            # CI after a worker was killed mid-batch, 199 of 200 returned.
            if clause is None and len(ids) >= collection.count():
                return ids, distances, True
            # Fewer than asked: either few passages are eligible, or the HNSW walk never
            # reached some (chromadb 1.5.9 misses a lone eligible vector among many close
            # ineligible ones: measured). Score the eligible set exactly instead.
            found = collection.get(
                where=clause, include=["embeddings"], limit=EXACT_FALLBACK_MAX + 1
            )
        if len(found["ids"]) > EXACT_FALLBACK_MAX:
            logger.warning("%s: eligible set too large for the exact check", self.name)
            return ids, distances, True
        return list(found["ids"]), exact_distances(found["embeddings"], query), True

    def upsert(self, passages: Sequence[Passage], vectors: np.ndarray) -> None:
        """Write one vector per passage (id = passage id); idempotent by id."""
        if len(passages) != len(vectors):
            raise ValueError(f"{len(passages)} passages but {len(vectors)} vectors")
        if not passages:
            return
        with self._use("upsert", write=True, create=True) as collection:
            assert collection is not None
            collection.upsert(
                ids=[str(p.pk) for p in passages],
                embeddings=np.asarray(vectors, dtype=np.float32),
                metadatas=[vector_metadata(p, self.manifest_key) for p in passages],
            )

    def set_spaces(self, space_of: dict[int, int]) -> None:
        """Re-stamp the `space` metadata of these passages' vectors (a moved document, or a
        vector written before spaces existed); Chroma merges it into the rest. Passages
        whose vector is missing are skipped."""
        if not space_of:
            return
        with self._use("update", write=True, create=False) as collection:
            if collection is None:
                return
            for part in chunked(sorted(space_of), PAGE_SIZE):
                present = collection.get(ids=[str(pk) for pk in part], include=[])["ids"]
                if present:
                    collection.update(
                        ids=list(present),
                        metadatas=[{"space": int(space_of[int(raw)])} for raw in present],
                    )

    def delete(self, passage_ids: Iterable[int]) -> None:
        """Remove these passages' vectors (missing ones are ignored)."""
        ids = [str(pk) for pk in passage_ids]
        if not ids:
            return
        with self._use("delete", write=True, create=False) as collection:
            if collection is None:
                return
            for part in chunked(ids, PAGE_SIZE):
                collection.delete(ids=list(part))

    def count(self) -> int:
        with self._use("count", write=False, create=False) as collection:
            return 0 if collection is None else collection.count()

    def get_embeddings(self, passage_ids: Iterable[int]) -> dict[int, np.ndarray]:
        """Stored vectors by passage id; ids without a vector are absent."""
        ids = [str(pk) for pk in passage_ids]
        if not ids:
            return {}
        found: dict[int, np.ndarray] = {}
        with self._use("read", write=False, create=False) as collection:
            if collection is None:
                return {}
            for part in chunked(ids, PAGE_SIZE):
                result = collection.get(ids=list(part), include=["embeddings"])
                for raw, embedding in zip(result["ids"], result["embeddings"], strict=True):
                    found[int(raw)] = np.asarray(embedding, dtype=np.float32)
        return found

    def _get_all(self, include: list[str]) -> list[Any]:
        """Chroma `get` results covering every vector here, `PAGE_SIZE` per request."""
        pages: list[Any] = []
        with self._use("read", write=False, create=False) as collection:
            if collection is None:
                return []
            offset = 0
            while True:
                result = collection.get(include=include, limit=PAGE_SIZE, offset=offset)
                pages.append(result)
                if len(result["ids"]) < PAGE_SIZE:
                    return pages
                offset += PAGE_SIZE

    def ids(self) -> list[int]:
        """Every passage id with a vector here (for reconciliation and tests)."""
        return [int(raw) for page in self._get_all([]) for raw in page["ids"]]

    def metadatas(self) -> dict[int, dict[str, Any]]:
        """Every vector's metadata by passage id (the index health check compares it)."""
        return {
            int(raw): dict(meta or {})
            for page in self._get_all(["metadatas"])
            for raw, meta in zip(page["ids"], page["metadatas"], strict=True)
        }

    def drop(self) -> None:
        """Delete the whole collection (after a manifest switch made it unused)."""
        from chromadb.errors import NotFoundError

        with self._use("drop", write=True, create=False) as collection:
            if collection is None:
                return
            client = self._connection._client
            assert client is not None
            with contextlib.suppress(NotFoundError):
                client.delete_collection(self.name)
            self._connection.forget(self.name)


def open_vector_store(manifest_key: str, manifest: Manifest | None = None) -> VectorStore:
    """The store of any manifest's collection (sync and reindex write through this)."""
    return VectorStore(_connection(), manifest_key, manifest)


def get_vector_store() -> VectorStore:
    """The store queries use: the active manifest's collection.

    Raises `VectorStoreUnavailable` when the active index was built with a manifest other
    than the one this code embeds queries with (a rebuild is pending or in progress):
    comparing vectors of two models would be meaningless, so the dense leg sits out.
    """
    manifest = current_manifest()
    state = index_state()
    if state.active_key != manifest.key:
        raise VectorStoreUnavailable(
            "vector index is being rebuilt for a new embedding model (lode_reindex_vectors)"
        )
    return open_vector_store(manifest.key, manifest)
