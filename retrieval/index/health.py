"""Index health and repair: do the derived indexes still say what the canonical rows say?

DESIGN.md invariant 1 and ../shared/seeds/loom-chain-of-custody.md ("Give canonical records
and indexes different authority", "Check a derivative with an independent reconstruction").
Passages are canonical; the lexical index (FTS5, or tsvector + GIN) and the vector index
(Chroma) are derived from them and never trusted blindly:

* `index_health()` compares each derived index with the canonical head passages: row counts,
  the engine's own integrity check, and an independent reconstruction (the lexical backend's
  `index_health`); for vectors, passages without one, vectors made from other text or under
  another manifest, and orphans. A canonical digest over ordered (passage id, text SHA-256)
  pins what the check was made against.
* `repair_indexes()` rebuilds the lexical index in one transaction, re-embeds wrong or
  missing vectors and deletes orphans (the vector sync's own functions), checks health again,
  and raises `CanonicalChanged` if the canonical digest moved: repairing a derivative must
  never rewrite evidence.
* The graph's edges are derived from head versions too: `edge_health.py`
  re-derives every document's edges and compares them with the stored ones, checks the
  `related` edges' ends and basis, and `repair` re-derives what drifted
  (`edge_health.repair_edges`), after the vectors, so related edges can be recomputed.
* The meta rows (each document's date, kind, top terms and aliases) are derived from head
  versions too: `retrieval.meta.health` re-derives and compares them, and `repair` rewrites
  the documents found missing, stale or altered.
* One canonical finding *is* repaired: head passages longer than `LODE_CHUNK_MAX_CHARS`
  (chunked before the character bound existed). Passages are derived from a version's
  body by the chunker, so repair first re-chunks those head versions
  (`retrieval.index.passages.rechunk_oversized`: old passages retired, never deleted, so every
  link to them still verifies; no version changes) and takes the canonical digest after
  that step as the one the rest of the repair must leave unchanged.

The report is a consistency check of these structures, not a signed attestation. This
module is vendor-neutral; database-specific SQL lives in `retrieval/index/lexical/<vendor>.py`.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from time import perf_counter
from typing import Any

from django.conf import settings
from django.db import transaction

from retrieval.index import lexical
from retrieval.index.edge_health import EdgeHealth, EdgeRepair, edge_health, repair_edges
from retrieval.index.embeddings import (
    EmbedderLike,
    EmbeddingUnavailable,
    current_manifest,
    get_embedder,
)
from retrieval.index.lexical import LexicalHealth
from retrieval.index.passages import RechunkReport, rechunk_oversized, sha256_text
from retrieval.index.sync import (
    reconcile_vectors,
    reindex_vectors,
    retire_collections,
    sync_vectors,
)
from retrieval.index.vectors import (
    PAGE_SIZE,
    VectorStoreUnavailable,
    chunked,
    head_passages,
    mark_pending_again,
    open_vector_store,
    pending_drift,
    read_index_state,
    rebuild_pending,
    stale_records,
)
from retrieval.index.worker_health import WorkerHealth, forget_gone_workers, worker_health
from retrieval.meta.health import MetaHealth, MetaRepair, meta_health, repair_meta
from retrieval.models import Passage, PassageVector

# Passage ids listed per vector finding in a report (the counts are always complete).
EXAMPLES = 10


# --- the report --------------------------------------------------------------------------


@dataclass(frozen=True)
class CanonicalHealth:
    """The canonical head passages every derived index must agree with."""

    head_passages: int
    # SHA-256 over one "id text_sha256" line per head passage, by id: equal before and
    # after a repair proves the repair changed no canonical passage.
    digest: str
    # Head passages whose text no longer hashes to their stored SHA-256: canonical damage,
    # which rebuilding an index cannot fix (reported, never "repaired").
    hash_mismatches: int
    # Head passages longer than the chunker's character bound (`max_chars`): made before
    # the bound existed (or under a larger one); `repair` re-chunks their versions.
    oversized: int = 0
    max_chars: int = 0

    @property
    def problems(self) -> list[str]:
        problems: list[str] = []
        if self.hash_mismatches:
            problems.append(
                f"{self.hash_mismatches} head passages no longer match their stored SHA-256 "
                "(canonical damage; repair rebuilds indexes and cannot fix this)"
            )
        if self.oversized:
            problems.append(
                f"{self.oversized} head passages are longer than {self.max_chars} characters "
                "(LODE_CHUNK_MAX_CHARS; chunked under an older bound): `lode_index repair` "
                "re-chunks their versions"
            )
        return problems


@dataclass(frozen=True)
class VectorHealth:
    """The vector index (Chroma and its `PassageVector` records) against the head passages
    of live documents, for the collection queries read (the active manifest)."""

    checked: bool  # False when skipped (`--skip-vectors`)
    available: bool = True
    reason: str = ""  # why the vector index could not be checked
    manifest_key: str = ""  # the collection queries read
    code_manifest_key: str = ""  # the manifest this code embeds queries with
    head_passages: int = 0  # passages that need a vector
    vectors: int = 0  # vectors in the active collection
    records: int = 0  # `PassageVector` rows under the active manifest
    missing: int = 0  # head passages lacking a vector or its record
    stale: int = 0  # vectors or records whose text hash or manifest does not match
    # Vectors whose `space` metadata is not their document's space (the dense leg filters
    # on it): a moved document or a vector from before spaces, until the sync re-stamps it.
    misplaced: int = 0
    orphan_vectors: int = 0  # vectors of no live head passage
    orphan_records: int = 0  # records (any manifest) of passages no longer live heads
    retired_records: int = 0  # records under a manifest neither active nor being built
    # The pending table (search's "not yet embedded" note) against the records: passages
    # without a record it does not hold (the note undercounts), and rows of passages that
    # have one (it overcounts).
    pending_unlisted: int = 0
    pending_listed_done: int = 0
    examples: dict[str, list[int]] = field(default_factory=dict)  # a few ids per finding

    @property
    def problems(self) -> list[str]:
        if not self.checked:
            return []
        pending = [
            (
                self.pending_unlisted,
                "passages without a vector are missing from the pending table (search's "
                '"not yet embedded" note undercounts; `lode_index repair` rebuilds it)',
            ),
            (
                self.pending_listed_done,
                "passages with a vector are still in the pending table (search's \"not yet "
                'embedded" note overcounts; `lode_index repair` rebuilds it)',
            ),
        ]
        if not self.available:
            return [
                f"the vector index cannot be checked: {self.reason}",
                *(f"{count} {what}" for count, what in pending if count),
            ]
        problems: list[str] = []
        if self.manifest_key != self.code_manifest_key:
            problems.append(
                f"queries read vectors made under manifest {self.manifest_key} but this code "
                f"embeds with {self.code_manifest_key}; the vector index needs a rebuild"
            )
        counts = [
            (
                self.missing,
                "head passages have no vector (not yet embedded: right after a save the "
                "worker may still be catching up; `lode_index repair` embeds them now)",
            ),
            (self.stale, "vectors were made from other text or under another manifest"),
            (
                self.misplaced,
                "vectors name another space than their document's (a moved document or a "
                "vector from before spaces; the worker's sync or `lode_index repair` re-stamps "
                "them)",
            ),
            (self.orphan_vectors, "vectors belong to no live head passage"),
            (self.orphan_records, "vector records belong to passages no longer at head"),
            (self.retired_records, "vector records belong to a manifest no longer in use"),
            *pending,
        ]
        problems.extend(f"{count} {what}" for count, what in counts if count)
        return problems


@dataclass(frozen=True)
class HealthReport:
    """Every check of the derived indexes against the canonical passages.

    `healthy` holds only when every check passed; `problems` says what failed in plain
    words. `pending` names queued work that will bring an index in step (a bulk import's
    title-mention scan): not a problem, but not in step yet either — `verdict` says
    *pending* then. Equal reports (timing aside) mean the same findings and digests.
    """

    canonical: CanonicalHealth
    lexical: LexicalHealth
    vectors: VectorHealth
    edges: EdgeHealth = field(default_factory=lambda: EdgeHealth(checked=False))
    workers: WorkerHealth = field(default_factory=WorkerHealth)
    meta: MetaHealth = field(default_factory=lambda: MetaHealth(checked=False))
    seconds: float = field(default=0.0, compare=False)

    @property
    def problems(self) -> list[str]:
        return [
            *self.canonical.problems,
            *self.lexical.problems,
            *self.vectors.problems,
            *self.edges.problems,
            *self.workers.problems,
            *self.meta.problems,
        ]

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def pending(self) -> list[str]:
        return [*self.edges.pending]

    @property
    def verdict(self) -> str:
        """`UNHEALTHY` when a check failed, else `pending` while queued work is
        outstanding, else `healthy`."""
        if self.problems:
            return "UNHEALTHY"
        return "pending" if self.pending else "healthy"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the verdict and problems first, then every check's figures."""
        return {
            "healthy": self.healthy,
            "verdict": self.verdict,
            "problems": self.problems,
            "pending": self.pending,
            **asdict(self),
        }


# --- the checks --------------------------------------------------------------------------


def canonical_health() -> CanonicalHealth:
    """Count and digest the head passages, re-hashing and measuring each one's text on the
    way."""
    max_chars = settings.LODE_CHUNK_MAX_CHARS
    digest = hashlib.sha256()
    count = mismatched = oversized = 0
    rows = (
        Passage.objects.filter(is_head=True).order_by("pk").values_list("pk", "text_sha256", "text")
    )
    for pk, text_sha256, text in rows.iterator(chunk_size=2000):
        count += 1
        digest.update(f"{pk} {text_sha256}\n".encode())
        if sha256_text(text) != text_sha256:
            mismatched += 1
        if len(text) > max_chars:
            oversized += 1
    return CanonicalHealth(
        head_passages=count,
        digest=digest.hexdigest(),
        hash_mismatches=mismatched,
        oversized=oversized,
        max_chars=max_chars,
    )


@dataclass(frozen=True)
class _VectorFindings:
    live: dict[int, str]  # live head passage id -> text_sha256
    records: dict[int, str]  # recorded passage id -> text_sha256 at embedding time
    vectors: dict[int, dict[str, Any]]  # Chroma id -> metadata
    missing: list[int]
    stale: list[int]
    orphans: list[int]
    misplaced: list[int]


def _vector_findings(manifest_key: str) -> _VectorFindings:
    """Compare one manifest's collection and records with the live head passages.

    Raises `VectorStoreUnavailable`. Chroma is read first: the sync upserts before it
    records, so a passage embedded meanwhile shows up as missing, never as an orphan.
    """
    vectors = open_vector_store(manifest_key).metadatas()
    rows = list(head_passages().values_list("pk", "text_sha256", "document__space_id"))
    live = {pk: text_sha256 for pk, text_sha256, _ in rows}
    misplaced = sorted(
        pk for pk, _, space in rows if pk in vectors and vectors[pk].get("space") != space
    )
    records = dict(
        PassageVector.objects.filter(manifest_key=manifest_key).values_list(
            "passage_id", "text_sha256"
        )
    )
    missing = sorted(pk for pk in live if pk not in records or pk not in vectors)
    stale = sorted(
        pk
        for pk, text_sha256 in live.items()
        if pk in records
        and pk in vectors
        and (
            records[pk] != text_sha256
            or vectors[pk].get("text_sha256") != text_sha256
            or vectors[pk].get("manifest") != manifest_key
        )
    )
    orphans = sorted(set(vectors) - set(live))
    return _VectorFindings(live, records, vectors, missing, stale, orphans, misplaced)


def vector_health() -> VectorHealth:
    """Check the active collection; an unreachable Chroma or a missing model package is
    reported (unhealthy, with the reason), never raised. The pending table is compared with
    the records even then: that needs only the database."""
    active, building = read_index_state()
    drift = pending_drift(active)
    try:
        code_key = current_manifest().key
        found = _vector_findings(active)
    except (EmbeddingUnavailable, VectorStoreUnavailable) as exc:
        return VectorHealth(
            checked=True,
            available=False,
            reason=str(exc),
            pending_unlisted=drift.missing,
            pending_listed_done=drift.extra,
        )
    in_use = {active, building} - {""}
    named = {
        "missing": found.missing,
        "stale": found.stale,
        "misplaced": found.misplaced,
        "orphan_vectors": found.orphans,
    }
    return VectorHealth(
        checked=True,
        manifest_key=active,
        code_manifest_key=code_key,
        head_passages=len(found.live),
        vectors=len(found.vectors),
        records=len(found.records),
        missing=len(found.missing),
        stale=len(found.stale),
        misplaced=len(found.misplaced),
        orphan_vectors=len(found.orphans),
        orphan_records=stale_records().count(),
        retired_records=PassageVector.objects.exclude(manifest_key__in=in_use).count(),
        pending_unlisted=drift.missing,
        pending_listed_done=drift.extra,
        examples={name: ids[:EXAMPLES] for name, ids in named.items() if ids},
    )


def index_health(*, vectors: bool = True, edges: bool = True, meta: bool = True) -> HealthReport:
    """Check every derived index against the canonical passages and versions (read-only);
    the meta rows (`retrieval.meta.health`) too unless `meta` is False."""
    started = perf_counter()
    canonical = canonical_health()
    lexical_health = lexical.backend().index_health()
    vector_report = vector_health() if vectors else VectorHealth(checked=False)
    edge_report = edge_health() if edges else EdgeHealth(checked=False)
    return HealthReport(
        canonical=canonical,
        lexical=lexical_health,
        vectors=vector_report,
        edges=edge_report,
        workers=worker_health(),
        meta=meta_health() if meta else MetaHealth(checked=False),
        seconds=perf_counter() - started,
    )


# --- repair ------------------------------------------------------------------------------


class CanonicalChanged(Exception):
    """The canonical digest differs after a repair. The repair itself writes no canonical
    value, so a passage was written meanwhile (or something is badly wrong): look before
    trusting either report."""

    def __init__(self, report: RepairReport) -> None:
        super().__init__(
            "the canonical digest changed during the repair: "
            f"{report.baseline_digest} before, {report.after.canonical.digest} after"
        )
        self.report = report


@dataclass(frozen=True)
class VectorRepair:
    """What `repair_vectors` did; `error` says why it stopped (model or Chroma unavailable)."""

    attempted: bool
    error: str = ""
    reindexed: bool = False  # the whole index was rebuilt for the code's manifest
    dropped: int = 0  # wrong vectors (with their records) dropped, then re-embedded
    records_lost: int = 0  # records whose vector was gone, re-embedded
    orphans_deleted: int = 0  # unrecorded vectors of no live head passage
    embedded: int = 0  # passages given a vector (through the model or reused by hash)
    pruned: int = 0  # recorded vectors of passages no longer at head
    retired: list[str] = field(default_factory=list)  # manifests whose collection was dropped


@dataclass(frozen=True)
class RepairReport:
    """Health before and after a repair, and what the repair did."""

    before: HealthReport
    after: HealthReport
    lexical_seconds: float
    vectors: VectorRepair
    # Versions re-chunked because a head passage exceeded the character bound; when any
    # were, `baseline_digest` is the canonical digest right after that step.
    rechunked: RechunkReport = field(default_factory=RechunkReport)
    baseline_digest: str = ""
    edges: EdgeRepair = field(default_factory=lambda: EdgeRepair(attempted=False))
    gone_workers: int = 0  # stale heartbeat rows deleted (no running task named them)
    pending: int = 0  # passages awaiting a vector, per the rebuilt pending table
    meta: MetaRepair = field(default_factory=lambda: MetaRepair(attempted=False))

    def __post_init__(self) -> None:
        if not self.baseline_digest:
            object.__setattr__(self, "baseline_digest", self.before.canonical.digest)

    @property
    def canonical_unchanged(self) -> bool:
        """The index rebuilds left every canonical passage as it was (after re-chunking)."""
        return self.baseline_digest == self.after.canonical.digest

    def as_dict(self) -> dict[str, Any]:
        return {
            "healthy": self.after.healthy,
            "canonical_unchanged": self.canonical_unchanged,
            "rechunked": asdict(self.rechunked),
            "before": self.before.as_dict(),
            "after": self.after.as_dict(),
            "lexical_seconds": self.lexical_seconds,
            "vectors": asdict(self.vectors),
            "edges": asdict(self.edges),
            "gone_workers": self.gone_workers,
            "pending": self.pending,
            "meta": asdict(self.meta),
        }


def repair_lexical_index() -> None:
    """Rebuild the lexical index from the canonical passages in one transaction."""
    with transaction.atomic():
        lexical.backend().rebuild()


def repair_vectors(*, embedder: EmbedderLike | None = None) -> VectorRepair:
    """Re-embed wrong or missing vectors and delete orphans, with the sync's own functions.

    A manifest other than the code's means the whole index is rebuilt (`reindex_vectors`,
    which switches only when complete). Then vectors made from other text or under another
    manifest are dropped with their records, records without a vector are dropped and
    stray vectors deleted (`reconcile_vectors`), every head passage without a vector is
    embedded and vectors of passages no longer at head are deleted (`sync_vectors`), and
    collections of unused manifests are dropped unless a rebuild is in progress.
    """
    try:
        model = embedder if embedder is not None else get_embedder()
        key = model.manifest.key
        reindexed = False
        if read_index_state()[0] != key:
            reindexed = reindex_vectors(embedder=model).switched
        findings = _vector_findings(key)
        wrong = findings.stale
        # Forget what space these vectors were stamped with, so the sync re-stamps them.
        for part in chunked(findings.misplaced, PAGE_SIZE):
            PassageVector.objects.filter(manifest_key=key, passage_id__in=list(part)).update(
                space_id=None
            )
        open_vector_store(key, model.manifest).delete(wrong)
        for part in chunked(wrong, PAGE_SIZE):
            PassageVector.objects.filter(manifest_key=key, passage_id__in=list(part)).delete()
        mark_pending_again(wrong)
        lost, orphans = reconcile_vectors(key)
        sync = sync_vectors(None, embedder=model)
        active, building = read_index_state()
        retired = retire_collections(keep=active) if building in ("", active) else []
    except (EmbeddingUnavailable, VectorStoreUnavailable) as exc:
        return VectorRepair(attempted=True, error=str(exc))
    return VectorRepair(
        attempted=True,
        reindexed=reindexed,
        dropped=len(wrong),
        records_lost=lost,
        orphans_deleted=orphans,
        embedded=sync.written,
        pruned=sync.deleted,
        retired=retired,
    )


def repair_indexes(
    *,
    vectors: bool = True,
    embedder: EmbedderLike | None = None,
    edges: bool = True,
    meta: bool = True,
) -> RepairReport:
    """Check, re-chunk over-long head passages, rebuild what is derived, check again; the
    canonical digest must not move after the re-chunking step.

    Edges are repaired last: re-chunking makes new head passages (edges name passages) and
    the vector repair may recompute related edges; `related` edges are recomputed from the
    vector index only when `vectors` (no Chroma needed otherwise).

    The lexical rebuild runs every time (idempotent, one transaction), not only when the
    check found drift: no check sees everything. Raises `CanonicalChanged` when the
    canonical digest differs afterwards.
    """
    before = index_health(vectors=vectors, edges=edges, meta=meta)
    rechunked = rechunk_oversized() if before.canonical.oversized else RechunkReport()
    baseline = canonical_health().digest if rechunked.documents else before.canonical.digest
    started = perf_counter()
    repair_lexical_index()
    lexical_seconds = perf_counter() - started
    vector_repair = repair_vectors(embedder=embedder) if vectors else VectorRepair(attempted=False)
    edge_repair = repair_edges(related=vectors) if edges else EdgeRepair(attempted=False)
    gone_workers = forget_gone_workers()
    meta_repair = repair_meta() if meta else MetaRepair(attempted=False)
    pending = rebuild_pending()  # needs only the database: rebuilt even when Chroma is down
    report = RepairReport(
        before=before,
        after=index_health(vectors=vectors, edges=edges, meta=meta),
        lexical_seconds=lexical_seconds,
        vectors=vector_repair,
        rechunked=rechunked,
        baseline_digest=baseline,
        edges=edge_repair,
        gone_workers=gone_workers,
        pending=pending,
        meta=meta_repair,
    )
    if not report.canonical_unchanged:
        raise CanonicalChanged(report)
    return report
