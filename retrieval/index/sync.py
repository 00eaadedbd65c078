"""Background vector work: keep Chroma in step with the head passages.

Saving a version queues `embed_document` once the transaction commits
(`retrieval.index.passages`); `manage.py db_worker` (django-tasks-db) runs it. All of the work is
in `sync_vectors`, which derives what to do from canonical rows alone — head passages
without a `PassageVector` record get embedded, records of passages no longer at head get
their vectors deleted — so a task that dies half-way loses nothing: the next run (or the
sweep `db_worker` queues when it starts) picks up exactly what is left. Chroma upserts are
idempotent by passage id and records are written after the upsert, so nothing is ever
duplicated either.

Several workers (PostgreSQL): before embedding a window a run claims its passages
(`VectorClaim`, one row per passage, the primary key deciding who wins), re-reads which of
them still lack a vector, embeds those, records them and releases the claims. Another run
skips claimed passages, and at the end waits for them until their owner records them or its
claims expire (a SIGKILLed worker stops renewing them) — a command does; a task leaves them
to their holder, whose task the worker recovers if the holder dies — so no passage is
embedded by two live runs and none is left behind. SQLite runs one worker and skips the claims.

Windows are shared between spaces: each is taken round-robin across the spaces with pending
passages (`embed_order`), so a large import in one space delays another space's new note by
one window, not by the whole import.

Order follows ADR 0005's upsert-before-prune: new vectors are written before old ones are
deleted, and a failure while embedding leaves the previous vectors searchable.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from time import perf_counter

import numpy as np
from django.db import DatabaseError, connection, models, transaction
from django.db.models import F, Q, QuerySet
from django.tasks import task
from django.utils import timezone

from retrieval.index.edges import refresh_mentioning
from retrieval.index.embed_order import next_window
from retrieval.index.embeddings import (
    BATCH_SIZE,
    EmbedderLike,
    EmbeddingUnavailable,
    Manifest,
    current_manifest,
    get_embedder,
    input_sha256,
    passage_input,
)
from retrieval.index.vectors import (
    PAGE_SIZE,
    VectorStore,
    VectorStoreUnavailable,
    chunked,
    forget_unheaded_pending,
    head_passages,
    index_state,
    lock_index_state,
    mark_pending_again,
    open_vector_store,
    pending_count,
    pending_passages,
    rebuild_pending,
    stale_records,
    unmark_pending,
)
from retrieval.models import Passage, PassageVector, VectorClaim, VectorIndexState

logger = logging.getLogger("lode.tasks")

# Back-off for a task that found the model or Chroma unavailable; after the last one the
# work waits for the next save, the next worker start, or `lode_embed_pending`.
RETRY_DELAYS_SECONDS = (30, 120, 600, 3600)
# Batches embedded together, so length sorting spans them (MODELS.md: sorted is faster). A
# window is also what another space's new note may wait behind (`embed_order`): two batches
# keep that to seconds (bench/fair_embedding.py).
WINDOW_BATCHES = 2
# `lode_reindex_vectors` re-syncs this many times to catch passages saved meanwhile.
REINDEX_PASSES = 3

# Claims (see the module docstring). A worker renews the claims it is working on every
# `db_worker` heartbeat (5 s), so a claim of a live worker never expires and a SIGKILLed
# worker's claims lapse after `WORKER_CLAIM_TTL_SECONDS`. A process without a heartbeat (a
# management command) claims for longer, enough for one window on a slow machine.
WORKER_CLAIM_TTL_SECONDS = 30
COMMAND_CLAIM_TTL_SECONDS = 900
# How long a run waits, without progress, for passages another run has claimed: past one
# worker TTL, so a dead worker's claims are taken over; a live owner finishes them anyway.
CLAIM_WAIT_SECONDS = WORKER_CLAIM_TTL_SECONDS + 15
CLAIM_POLL_SECONDS = 0.5

Progress = Callable[[int], object]


@dataclass
class SyncReport:
    """What one `sync_vectors` run did; `embedded + reused` passages got a vector."""

    manifest_key: str
    pending: int = 0  # head passages without a vector when the run started
    embedded: int = 0  # distinct inputs sent through the model
    reused: int = 0  # passages whose vector was copied from an equal input's
    deleted: int = 0  # vectors removed because their passage left the head set
    restamped: int = 0  # vectors whose space metadata was brought up to date
    # Pending passages still claimed by another live run when this one stopped waiting;
    # that run records them (0 unless several workers overlap).
    left_to_others: int = 0
    seconds: float = 0.0
    # Documents whose passages this run wrote a vector for (their `related` edges are
    # recomputed afterwards, `retrieval/index/related.py`), and what that gave; derived
    # data, so a failure there is only reported (`related_error`), never raised.
    documents: list[int] = field(default_factory=list)
    related_edges: int = 0
    related_error: str = ""
    related_seconds: float = 0.0

    @property
    def written(self) -> int:
        return self.embedded + self.reused

    @property
    def passages_per_second(self) -> float:
        return self.written / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["documents"] = len(self.documents)  # a count: task results stay small
        return {**data, "passages_per_second": round(self.passages_per_second, 2)}


@dataclass
class ReindexReport:
    """What `reindex_vectors` did. `switched` only when the new collection was complete."""

    previous_key: str
    target_key: str
    switched: bool
    remaining: int
    syncs: list[SyncReport] = field(default_factory=list)


# --- one batch ---------------------------------------------------------------------------


def reusable_vectors(
    store: VectorStore, manifest_key: str, hashes: Iterable[str]
) -> dict[str, np.ndarray]:
    """Stored vectors for inputs already embedded under this manifest, by input hash.

    The old version's passages keep their vectors until the prune step, so an edit that
    leaves a paragraph (and the title) untouched finds its vector here.
    """
    sources = dict(
        PassageVector.objects.filter(manifest_key=manifest_key, input_sha256__in=set(hashes))
        .order_by("passage_id")
        .values_list("input_sha256", "passage_id")
    )
    if not sources:
        return {}
    stored = store.get_embeddings(sources.values())
    return {digest: stored[pk] for digest, pk in sources.items() if pk in stored}


def record_vectors(passages: list[Passage], hashes: list[str], manifest_key: str) -> None:
    """Write the canonical records; only ever called after the Chroma upsert succeeded.

    In one transaction with taking them out of the pending table, under the index state
    lock (`vectors.lock_index_state`): a crash between the two, or a manifest switch or a
    table rebuild reading the records meanwhile, would leave a row nobody removes.
    """
    now = timezone.now()
    records = [
        PassageVector(
            passage_id=passage.pk,
            manifest_key=manifest_key,
            text_sha256=passage.text_sha256,
            input_sha256=digest,
            embedded_at=now,
            space_id=passage.document.space_id,
        )
        for passage, digest in zip(passages, hashes, strict=True)
    ]
    with transaction.atomic():
        active = lock_index_state()
        PassageVector.objects.bulk_create(
            records,
            update_conflicts=True,
            unique_fields=["passage", "manifest_key"],
            update_fields=["text_sha256", "input_sha256", "embedded_at", "space_id"],
        )
        unmark_pending([passage.pk for passage in passages], manifest_key, active)


def unstamped_records(passage_ids: Iterable[int] | None = None) -> QuerySet[PassageVector]:
    """Vector records of live head passages whose stamped space is not their document's
    (a document moved between spaces, or a vector from before spaces existed)."""
    queryset = PassageVector.objects.filter(
        Q(space_id__isnull=True) | ~Q(space_id=F("passage__document__space_id")),
        passage_id__in=head_passages().values("pk"),
    )
    if passage_ids is not None:
        queryset = queryset.filter(passage_id__in=list(passage_ids))
    return queryset


def restamp_spaces(passage_ids: Iterable[int] | None = None) -> int:
    """Bring the vectors' `space` metadata in step with their documents' spaces; returns how
    many were re-stamped. Chroma first, then the record, so a crash in between repeats it.

    Until it runs, a moved document is missing from its new space's dense leg wherever
    Chroma's space filter is used (its vectors still name the old space; an audience that
    sees a large share of the documents is served without the filter, `VectorStore.query`)
    — never shown to its old one: the dense leg re-checks every hit's canonical space
    (`vectors.live_passage_ids`)."""
    rows = list(
        unstamped_records(passage_ids).values_list(
            "manifest_key", "passage_id", "passage__document__space_id"
        )
    )
    by_key: dict[str, dict[int, int]] = defaultdict(dict)
    for key, passage_id, space_id in rows:
        by_key[key][passage_id] = space_id
    for key, space_of in by_key.items():
        open_vector_store(key).set_spaces(space_of)
        by_space: dict[int, list[int]] = defaultdict(list)
        for passage_id, space_id in space_of.items():
            by_space[space_id].append(passage_id)
        for space_id, ids in by_space.items():
            for part in chunked(ids, PAGE_SIZE):
                PassageVector.objects.filter(manifest_key=key, passage_id__in=list(part)).update(
                    space_id=space_id
                )
    return len(rows)


def sync_window(
    passage_ids: list[int],
    *,
    manifest: Manifest,
    store: VectorStore,
    embedder: EmbedderLike,
    report: SyncReport,
    batch_size: int = BATCH_SIZE,
    progress: Progress | None = None,
) -> None:
    """Embed (or reuse) a window of pending passages, then upsert and record each batch.

    The window's new inputs go to the model together, so `embed_passages` can sort them by
    length across several batches of 32 (less padding, measurably faster); writes stay at
    `batch_size`, each upsert followed by its records, so a crash loses at most a window
    of embedding work and never leaves a recorded passage without its vector.
    """
    passages = list(
        head_passages()
        .filter(pk__in=passage_ids)
        .select_related("document", "version")
        .order_by("pk")
    )
    inputs = [passage_input(p, manifest.passage_template) for p in passages]
    hashes = [input_sha256(text) for text in inputs]
    vectors = reusable_vectors(store, manifest.key, hashes) if passages else {}
    # Each distinct new input goes through the model once, even if repeated in the window.
    missing = {digest: text for digest, text in zip(hashes, inputs, strict=True)}
    for digest in vectors:
        missing.pop(digest, None)
    if missing:
        fresh = embedder.embed_passages(list(missing.values()))
        vectors.update(zip(missing, fresh, strict=True))
    for start in range(0, len(passage_ids), batch_size):
        # Passages that left the head set since the pending list was read are skipped.
        wanted = set(passage_ids[start : start + batch_size])
        part = [i for i, passage in enumerate(passages) if passage.pk in wanted]
        if part:
            store.upsert([passages[i] for i in part], np.stack([vectors[hashes[i]] for i in part]))
            record_vectors([passages[i] for i in part], [hashes[i] for i in part], manifest.key)
        if progress is not None:
            progress(len(wanted))
    report.embedded += len(missing)
    report.reused += len(passages) - len(missing)
    seen = set(report.documents)
    report.documents.extend(sorted({p.document_id for p in passages} - seen))


def prune_vectors(passage_ids: list[int] | None = None) -> int:
    """Delete vectors (any manifest) of passages no longer at head; returns how many.

    Chroma first, then the record: a crash in between leaves a record whose deletion is
    simply repeated next time, never a vector nobody knows about.
    """
    by_key: dict[str, list[int]] = defaultdict(list)
    for key, pk in stale_records(passage_ids).values_list("manifest_key", "passage_id"):
        by_key[key].append(pk)
    deleted = 0
    for key, ids in by_key.items():
        open_vector_store(key).delete(ids)
        for part in chunked(ids, PAGE_SIZE):
            PassageVector.objects.filter(manifest_key=key, passage_id__in=list(part)).delete()
        # A passage restored to the head set since the stale list was read is pending again.
        mark_pending_again(ids)
        deleted += len(ids)
    forget_unheaded_pending()
    return deleted


# --- claims (several workers) ------------------------------------------------------------


@dataclass
class _Claimer:
    owner: str
    ttl_seconds: int
    # Tokens of the windows this process is embedding now; only these are renewed, so a
    # claim leaked by a failed release is never kept alive by a healthy worker.
    active: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


_claimer = _Claimer(
    owner=f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}",
    ttl_seconds=COMMAND_CLAIM_TTL_SECONDS,
)


def set_claim_owner(owner: str, *, ttl_seconds: int = WORKER_CLAIM_TTL_SECONDS) -> None:
    """`db_worker` names its claims after its worker id and renews them (short TTL)."""
    _claimer.owner = owner
    _claimer.ttl_seconds = ttl_seconds


def claims_enabled() -> bool:
    """Claims need row locks that skip locked rows, i.e. a database several workers share."""
    return bool(connection.features.has_select_for_update_skip_locked)


def claim_passages(passage_ids: list[int], token: str) -> list[int]:
    """Claim these passages for one window; returns the ids this token now holds.

    A new claim is an insert that the primary key lets only one run win (a concurrent
    insert of the same id waits for the other statement's transaction, then does nothing).
    A claim whose `expires_at` has passed is taken over first, in its own short
    transaction: `SKIP LOCKED` passes over one another run is taking over at this moment,
    and since that transaction never waits and the insert is one statement over ids in
    ascending order, two claiming runs cannot deadlock.
    """
    if not passage_ids:
        return []
    ids = sorted(passage_ids)
    now = timezone.now()
    expires = now + timedelta(seconds=_claimer.ttl_seconds)
    with transaction.atomic():
        expired = list(
            VectorClaim.objects.select_for_update(skip_locked=True)
            .filter(passage_id__in=ids, expires_at__lte=now)
            .values_list("passage_id", flat=True)
        )
        if expired:
            VectorClaim.objects.filter(passage_id__in=expired).update(
                owner=_claimer.owner, token=token, claimed_at=now, expires_at=expires
            )
    VectorClaim.objects.bulk_create(
        [
            VectorClaim(
                passage_id=pk,
                owner=_claimer.owner,
                token=token,
                claimed_at=now,
                expires_at=expires,
            )
            for pk in ids
        ],
        ignore_conflicts=True,
    )
    return sorted(
        VectorClaim.objects.filter(token=token, passage_id__in=ids).values_list(
            "passage_id", flat=True
        )
    )


def release_claims(token: str) -> None:
    with _claimer.lock:
        _claimer.active.discard(token)
    try:
        VectorClaim.objects.filter(token=token).delete()
    except DatabaseError:  # e.g. the server restarting; the claims lapse at expires_at
        logger.warning("could not release vector claims %s; they expire on their own", token)


def renew_claims() -> int:
    """Push back the expiry of the claims this process is working on (the heartbeat)."""
    with _claimer.lock:
        tokens = list(_claimer.active)
    if not tokens:
        return 0
    expires = timezone.now() + timedelta(seconds=_claimer.ttl_seconds)
    return VectorClaim.objects.filter(token__in=tokens).update(expires_at=expires)


def live_claims() -> models.QuerySet[VectorClaim]:
    return VectorClaim.objects.filter(expires_at__gt=timezone.now())


def unclaimed_pending_exists(manifest_key: str) -> bool:
    """Does any head passage lack a vector without a live claim on it? (the cheap sweep
    question: one anti-join, stopping at the first row)."""
    pending = pending_passages(manifest_key)
    if claims_enabled():
        pending = pending.exclude(pk__in=live_claims().values("passage_id"))
    return pending.exists()


def _embed_window(
    ids: list[int],
    *,
    claims: bool,
    manifest: Manifest,
    store: VectorStore,
    embedder: EmbedderLike,
    report: SyncReport,
    batch_size: int,
    progress: Progress | None,
) -> bool:
    """Embed one window of pending passages; returns whether this run held any of them.

    With claims (several workers) the window is claimed first and re-read after claiming:
    a run that held these a moment ago recorded its vectors before releasing, so what is
    recorded now needs nothing.
    """
    if not claims:
        sync_window(
            ids,
            manifest=manifest,
            store=store,
            embedder=embedder,
            report=report,
            batch_size=batch_size,
            progress=progress,
        )
        return True
    token = uuid.uuid4().hex
    with _claimer.lock:
        _claimer.active.add(token)
    try:
        held = claim_passages(ids, token)
        todo = sorted(pending_passages(manifest.key, held).values_list("pk", flat=True))
        if todo:
            sync_window(
                todo,
                manifest=manifest,
                store=store,
                embedder=embedder,
                report=report,
                batch_size=batch_size,
                progress=progress,
            )
        return bool(held)
    finally:
        release_claims(token)


def _sync_windows(
    scope: list[int] | None,
    *,
    fair: bool,
    manifest: Manifest,
    store: VectorStore,
    embedder: EmbedderLike,
    report: SyncReport,
    batch_size: int,
    window: int,
    progress: Progress | None,
    wait: bool,
) -> None:
    """`sync_vectors`' loop: pick a window, embed it, until `scope` (None: everything) has
    nothing pending that this run can take; then, with `wait`, wait for what other runs have
    claimed until they record it or their claims lapse (then take it over), else leave it
    to them.

    Each window is picked afresh, so passages saved meanwhile count too. With `fair` it is
    `embed_order.next_window` over every pending passage (round-robin across spaces, so a
    large backlog in one space delays another space's new note by one window); otherwise
    the lowest ids of `scope`.
    """
    claims = claims_enabled()
    stalled_since: float | None = None
    while True:
        candidates = pending_passages(manifest.key)
        mine = candidates if scope is None else pending_passages(manifest.key, scope)
        if claims:
            claimed = live_claims().values("passage_id")
            candidates = candidates.exclude(pk__in=claimed)
            mine = mine.exclude(pk__in=claimed)
        if fair:
            ids = next_window(candidates, window) if scope is None or mine.exists() else []
        else:
            ids = list(mine.order_by("pk").values_list("pk", flat=True)[:window])
        written = report.written
        if ids:
            held = _embed_window(
                ids,
                claims=claims,
                manifest=manifest,
                store=store,
                embedder=embedder,
                report=report,
                batch_size=batch_size,
                progress=progress,
            )
            if not claims and report.written == written:  # cannot happen; never loop on it
                logger.warning("a window of %d pending passages recorded nothing", len(ids))
                return
            if held:
                stalled_since = None
                continue
        left = pending_passages(manifest.key, scope).count()
        if not left:
            return
        stalled_since = stalled_since if stalled_since is not None else perf_counter()
        if not wait or perf_counter() - stalled_since > CLAIM_WAIT_SECONDS:
            report.left_to_others = left
            logger.info("%d passage(s) still claimed by another run; leaving them to it", left)
            return
        time.sleep(CLAIM_POLL_SECONDS)


# --- the sync ----------------------------------------------------------------------------


def sync_vectors(
    passage_ids: Iterable[int] | None = None,
    *,
    batch_size: int = BATCH_SIZE,
    progress: Progress | None = None,
    embedder: EmbedderLike | None = None,
    window: int | None = None,
    wait_for_others: bool = True,
    related: bool = True,
    fair: bool = False,
) -> SyncReport:
    """Bring the current manifest's collection in step with the head passages.

    `passage_ids` limits the run to those passages (a document's, from its task); None
    means everything. Pending passages are taken `window` at a time (default 2 batches),
    embedded in batches of `batch_size` sorted by length (equal inputs reuse a stored
    vector), then upserted and recorded batch by batch; afterwards vectors of passages
    that left the head set are deleted. `progress(n)` is called after each batch. The model
    and Chroma are only touched when there is work. Raises `EmbeddingUnavailable` or
    `VectorStoreUnavailable`; whatever was recorded before stays done.

    Windows are shared fairly between spaces (`embed_order`) when the run covers everything
    and, with `fair` (the worker's document tasks), also when it is limited to
    `passage_ids`: each window is then taken from every pending passage, until those of
    `passage_ids` are done, so one space's import never holds up another's new note.

    With several workers (claims), passages another run is embedding are skipped; with
    `wait_for_others` (commands, which promise a complete index) the run then waits for
    them, up to `CLAIM_WAIT_SECONDS` without progress. The worker's tasks do not wait: the
    holder records them, and if it dies its task is recovered and run again (`db_worker`).

    With `related`, the documents whose vectors this run wrote then get their `related`
    edges recomputed (`related.refresh_related_quietly`: never raises; a dead Chroma means
    no related edges, logged); `seconds` excludes that step (`related_seconds`).
    """
    started = perf_counter()
    manifest = embedder.manifest if embedder is not None else current_manifest()
    index_state()  # the first sync on a fresh install makes this manifest the active one
    scope = None if passage_ids is None else list(passage_ids)
    report = SyncReport(
        manifest_key=manifest.key, pending=pending_passages(manifest.key, scope).count()
    )
    if report.pending:
        _sync_windows(
            scope,
            fair=fair or scope is None,
            manifest=manifest,
            store=open_vector_store(manifest.key, manifest),
            embedder=embedder if embedder is not None else get_embedder(),
            report=report,
            batch_size=batch_size,
            window=window or batch_size * WINDOW_BATCHES,
            progress=progress,
            wait=wait_for_others,
        )
    report.deleted = prune_vectors(scope)
    report.restamped = restamp_spaces(scope)
    report.seconds = perf_counter() - started
    if related and report.documents:
        _refresh_related(report, manifest.key)
    return report


def _refresh_related(report: SyncReport, manifest_key: str) -> None:
    """Recompute the related edges of the documents this sync wrote vectors for; derived
    data, so nothing here may fail the sync (`refresh_related_quietly` never raises)."""
    from retrieval.index.related import refresh_related_quietly

    started = perf_counter()
    found = refresh_related_quietly(report.documents, manifest_key)
    report.related_edges = found.edges
    report.related_error = found.error
    report.related_seconds = perf_counter() - started


def reconcile_vectors(manifest_key: str) -> tuple[int, int]:
    """Repair drift between the records and Chroma; returns (records dropped, vectors dropped).

    A record whose vector is gone (the Chroma folder was deleted, a server was swapped) is
    dropped, so its passage becomes pending again. A vector with no record is deleted only
    when its passage is no longer at head: a head one may be a worker's upsert whose record
    is about to be written, and the next sync overwrites it anyway. Safe to run beside a
    worker.
    """
    store = open_vector_store(manifest_key)
    in_chroma = set(store.ids())
    recorded = set(
        PassageVector.objects.filter(manifest_key=manifest_key).values_list("passage_id", flat=True)
    )
    lost = sorted(recorded - in_chroma)
    for part in chunked(lost, PAGE_SIZE):
        PassageVector.objects.filter(manifest_key=manifest_key, passage_id__in=list(part)).delete()
    mark_pending_again(lost)
    unrecorded = in_chroma - recorded
    live = set(head_passages().filter(pk__in=unrecorded).values_list("pk", flat=True))
    orphans = sorted(unrecorded - live)
    store.delete(orphans)
    return len(lost), len(orphans)


def reindex_vectors(
    *,
    embedder: EmbedderLike | None = None,
    batch_size: int = BATCH_SIZE,
    progress: Progress | None = None,
    window: int | None = None,
) -> ReindexReport:
    """Build the current manifest's collection completely, then make it the active one.

    Queries keep reading the previous collection until every head passage has a vector
    under the new manifest; only then does the state row switch (one transaction), and the
    previous collections and their records are removed. An interrupted run leaves the old
    index active and resumes where it stopped.
    """
    model = embedder if embedder is not None else get_embedder()
    target = model.manifest
    previous = index_state().active_key
    if previous != target.key:
        VectorIndexState.objects.filter(pk=1).update(building_key=target.key)
    report = ReindexReport(
        previous_key=previous, target_key=target.key, switched=False, remaining=0
    )
    for _ in range(REINDEX_PASSES):
        report.syncs.append(
            sync_vectors(
                None, batch_size=batch_size, progress=progress, embedder=model, window=window
            )
        )
        report.remaining = pending_count(manifest_key=target.key)
        if report.remaining == 0:
            break
    if report.remaining or previous == target.key:
        return report
    with transaction.atomic():
        state = VectorIndexState.objects.select_for_update().get(pk=1)
        state.active_key = target.key
        state.active_manifest = target.as_metadata()
        state.building_key = ""
        state.switched_at = timezone.now()
        state.save()
        rebuild_pending(target.key)  # the note now counts against the new collection
    report.switched = True
    retire_collections(keep=target.key)
    return report


def retire_collections(*, keep: str) -> list[str]:
    """Drop every collection (and its records) except `keep`'s; returns the keys dropped."""
    keys = set(
        PassageVector.objects.exclude(manifest_key=keep)
        .values_list("manifest_key", flat=True)
        .distinct()
    )
    for key in sorted(keys):
        open_vector_store(key).drop()
        PassageVector.objects.filter(manifest_key=key).delete()
    return sorted(keys)


# --- tasks -------------------------------------------------------------------------------

# A database error (the server restarting) is retried like a missing model: queuing the
# retry may fail too while the server is down, and then the worker's sweep catches up.
RETRIED_ERRORS = (EmbeddingUnavailable, VectorStoreUnavailable, DatabaseError)


def document_passage_ids(document_id: int) -> list[int]:
    """A document's passages that need a vector or still have one."""
    return list(
        Passage.objects.filter(document_id=document_id)
        .filter(Q(is_head=True) | Q(vectors__isnull=False))
        .values_list("pk", flat=True)
        .distinct()
    )


def _retry_later(retry: Callable[[int], object], attempt: int) -> None:
    """Queue `retry(delay)` with the next back-off delay, if attempts remain."""
    if attempt >= len(RETRY_DELAYS_SECONDS):
        return
    try:
        retry(RETRY_DELAYS_SECONDS[attempt])
    except Exception:  # e.g. a backend without deferred tasks; the sweep catches up later
        logger.exception("could not queue a retry of the vector sync")


@task()
def embed_document(document_id: int, attempt: int = 0) -> dict[str, object]:
    """Embed a document's new head passages and delete its old ones' vectors."""
    try:
        return sync_vectors(
            document_passage_ids(document_id), wait_for_others=False, fair=True
        ).as_dict()
    except RETRIED_ERRORS as exc:
        logger.warning("vector sync of document %s failed: %s", document_id, exc)
        _retry_later(
            lambda delay: embed_document.using(
                run_after=timezone.now() + timedelta(seconds=delay)
            ).enqueue(document_id, attempt + 1),
            attempt,
        )
        raise


@task()
def sync_pending_vectors(attempt: int = 0) -> dict[str, object]:
    """Embed everything pending and prune everything stale (the sweep)."""
    try:
        return sync_vectors(None, wait_for_others=False).as_dict()
    except RETRIED_ERRORS as exc:
        logger.warning("vector sweep failed: %s", exc)
        _retry_later(
            lambda delay: sync_pending_vectors.using(
                run_after=timezone.now() + timedelta(seconds=delay)
            ).enqueue(attempt + 1),
            attempt,
        )
        raise


def enqueue_document_sync(document_id: int) -> None:
    """Queue `embed_document`; never raises, because the vector index is derived data
    (the sweep or `lode_embed_pending` catches up) and the note is already saved."""
    try:
        embed_document.enqueue(document_id)
    except Exception:
        logger.exception("could not queue the vector sync of document %s", document_id)


def enqueue_document_sync_on_commit(document_id: int) -> None:
    """Queue the document's vector sync once the current transaction commits.

    Before commit the worker could not see the new passages (and a rollback must not leave
    a task behind).
    """
    transaction.on_commit(lambda: enqueue_document_sync(document_id))


@task()
def scan_title_mentions(document_ids: list[int]) -> dict[str, object]:
    """Give the documents that mention these documents' titles their `mentions` edges
    (`edges.refresh_mentioning`): the scan a bulk import leaves to the worker."""
    return {"documents": len(document_ids), "edges": refresh_mentioning(document_ids)}


def enqueue_mention_scan(document_ids: list[int]) -> None:
    """Queue `scan_title_mentions`; never raises: the edges are derived data (health reports
    the missing mentions and `lode_index repair` adds them) and the notes are saved."""
    try:
        scan_title_mentions.enqueue(sorted(document_ids))
    except Exception:
        logger.exception(
            "could not queue the title-mention scan of %d documents", len(document_ids)
        )


def mention_scans_pending() -> int:
    """Title-mention scans queued or running: until they finish, mentions of the imported
    titles are expected to be missing from the graph (health says *pending*)."""
    from django_tasks_db.compat import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    return DBTaskResult.objects.filter(
        task_path=scan_title_mentions.module_path,
        status__in=[TaskResultStatus.READY, TaskResultStatus.RUNNING],
    ).count()


def enqueue_pending_sweep() -> bool:
    """Queue one `sync_pending_vectors` if there is vector work and none is queued yet.

    `db_worker` calls this as it starts, so work a killed worker left behind (its task row
    stays RUNNING forever) is picked up; the bulk index writer (`passages.index_new_heads`,
    behind `notes.services.notes_import`) queues it on commit instead of a task per document.
    Returns whether a sweep was queued.
    """
    from django_tasks_db.models import DBTaskResult

    queued = DBTaskResult.objects.ready().filter(task_path=sync_pending_vectors.module_path)
    if queued.exists():
        return False
    if not (
        pending_passages(current_manifest().key).exists()
        or stale_records().exists()
        or unstamped_records().exists()
    ):
        return False
    sync_pending_vectors.enqueue()
    return True
