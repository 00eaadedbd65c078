"""Health and repair of the graph's edges: does the stored edge set still say what
the head versions say?

Edges are a derived index, like the lexical and vector indexes (`health.py`), and are
checked the same way — by an independent reconstruction, never trusted blindly:

* Declared and rule-inferred edges (`links_to`, `contains`, `annotates`, `mentions`):
  `edges.derive_edges(document)` is recomputed for every document and compared, origin by
  origin, with the stored edges by `edges.edge_signature` (every field that makes an edge
  that edge: ends, versions, resolution, target, rule and its version, passage and span).
  A stored edge the derivation does not give is *extra* (an orphan of a deleted document,
  an edge pinned to an old version, a bogus row); a derived edge not stored is *missing*; a
  missing and an extra one read at the same place (same kind, `from` end, rule and span)
  are counted once, as *altered* (the link resolves elsewhere now, or a row was edited).
* `related` edges (embedding similarity, `related.py`) cannot be re-derived without the
  vectors, so they are checked for validity: both ends live, in one space, the `from`
  version the document's head, origin = `from`, no self-edge, no duplicate (*invalid*); and
  for their basis: made under the active manifest, the current threshold and rule version
  (*stale*).
* A bulk import leaves the scan for older notes that mention its titles to the worker
  (`sync.scan_title_mentions`). While such a scan is queued or running, missing `mentions`
  edges are what it is about to add: they are reported as *pending*, not as a problem.

`repair_edges` re-derives the documents that differ (`edges.refresh_edges(ids,
reverse=False, changed=False)`: the documents did not change, only their derived rows),
deletes invalid `related` edges, and recomputes the related edges of their documents and
of stale ones from the vector index when allowed (a dead Chroma: they stay as they are and
health keeps saying so). Everything runs `BATCH` documents (or `RELATED_BATCH` edges) at a
time, so 100k edges never load at once. Canonical rows are never written.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

from django.conf import settings

from notes.models import Document
from retrieval.index import edges as edge_index
from retrieval.index.embeddings import EmbeddingUnavailable, current_manifest
from retrieval.index.related import (
    RELATED_RULE,
    RELATED_RULE_VERSION,
    refresh_related,
)
from retrieval.index.sync import mention_scans_pending
from retrieval.index.vectors import VectorStoreUnavailable, chunked
from retrieval.models import Edge, VectorIndexState

logger = logging.getLogger("lode.graph")

BATCH = 500  # documents derived and compared per step (1000 measured ~10% faster than 200)
RELATED_BATCH = 5000  # related edges checked per step
EXAMPLES = 5  # examples listed per finding (the counts are always complete)

# Where a link was read: a missing and an extra edge that share this were the same link.
_PLACE = ("kind", "from_document_id", "from_source_id", "rule", "start", "end")
_PLACE_AT = tuple(edge_index.EDGE_FIELDS.index(name) for name in _PLACE)
_KIND_AT = edge_index.EDGE_FIELDS.index("kind")


# --- the report --------------------------------------------------------------------------


@dataclass(frozen=True)
class EdgeHealth:
    """The stored edges against a fresh derivation from the head versions."""

    checked: bool  # False when skipped (`--skip-edges`)
    documents: int = 0  # documents derived (every document, deleted ones give no edges)
    expected: int = 0  # edges the derivation gives (all kinds but `related`)
    stored: int = 0  # stored edges of those kinds
    missing: int = 0  # derived, not stored
    missing_mentions: int = 0  # of `missing`, `mentions` edges (a title mentioned in text)
    mention_scans: int = 0  # title-mention scans queued or running (they add such edges)
    extra: int = 0  # stored, not derived (orphans, old versions, bogus rows)
    altered: int = 0  # stored at the same place as a derived one, but different
    drifted_documents: int = 0  # documents whose stored edges differ from the derivation
    related: int = 0  # stored `related` edges
    related_invalid: int = 0  # a dead or other-space end, an old version, self, duplicate
    related_stale: int = 0  # made under another model, threshold or rule version
    # A few of each finding: described edges for missing/extra/altered, document ids for
    # drifted documents, edge ids for related ones.
    examples: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def awaited(self) -> int:
        """Missing edges a queued or running title-mention scan is about to add."""
        return self.missing_mentions if self.mention_scans else 0

    @property
    def pending(self) -> list[str]:
        """Work the worker has queued that will bring the graph in step (not a problem)."""
        if not self.checked or not self.mention_scans:
            return []
        scans = self.mention_scans
        edges = self.awaited
        said = f"{scans} title-mention scan{'s are' if scans > 1 else ' is'} queued or running"
        if edges:
            said += f"; {edges} mention edge{'s wait' if edges > 1 else ' waits'} for "
            said += "them" if scans > 1 else "it"
        return [said]

    @property
    def problems(self) -> list[str]:
        if not self.checked:
            return []
        unexpected = self.missing - self.awaited
        counts = [
            (unexpected, "edges the head versions give are missing from the graph"),
            (
                self.extra,
                "stored edges are not what any head version gives (orphans, edges of old "
                "versions or bogus rows)",
            ),
            (self.altered, "stored edges differ from what their link gives now"),
            (
                self.related_invalid,
                "related edges join a deleted, moved or other-space document, or an old version",
            ),
            (
                self.related_stale,
                "related edges were computed under another embedding model, threshold or rule "
                "version (`lode_index repair` recomputes them when the vector index is up)",
            ),
        ]
        problems = [f"{count} {what}" for count, what in counts if count]
        if self.drifted_documents and (unexpected or self.extra or self.altered):
            problems.append(
                f"{self.drifted_documents} documents have drifted edges; "
                "`lode_index repair` re-derives them"
            )
        return problems


@dataclass
class _Findings:
    """What `check_edges` found, with the ids `repair_edges` needs."""

    health: EdgeHealth
    drifted: list[int] = field(default_factory=list)  # origin ids to re-derive
    invalid: list[int] = field(default_factory=list)  # related edge ids to delete
    recompute: list[int] = field(default_factory=list)  # origins whose related to recompute


@dataclass(frozen=True)
class EdgeRepair:
    """What `repair_edges` did."""

    attempted: bool
    rederived: int = 0  # documents whose edges were re-derived
    written: int = 0  # edges those documents have now
    related_removed: int = 0  # invalid related edges deleted
    related_recomputed: int = 0  # documents whose related edges were recomputed
    related_error: str = ""  # why related edges could not be recomputed
    seconds: float = field(default=0.0, compare=False)


# --- checking ----------------------------------------------------------------------------


def _documents() -> Iterator[list[Document]]:
    """Every document, `BATCH` at a time by id (deleted ones too: their stored edges are
    orphans the derivation does not give)."""
    last = 0
    while True:
        batch = list(Document.objects.filter(pk__gt=last).order_by("pk")[:BATCH])
        if not batch:
            return
        yield batch
        last = batch[-1].pk


def _describe(signature: tuple) -> str:
    fields = dict(zip(edge_index.EDGE_FIELDS, signature, strict=True))
    start = fields["from_document_id"] or f"source {fields['from_source_id']}"
    end = fields["to_document_id"] or f"{fields['resolution']} {fields['target']!r}"
    span = "" if fields["start"] is None else f" @{fields['start']}–{fields['end']}"
    return f"{start} {fields['kind']} {end} ({fields['rule']}{span})"


def _derive(documents: list[Document]) -> dict[int, Counter]:
    """The signatures of the edges each document's head version gives now, by origin: with
    `edges.derive_many` (the reads done once per batch) when it exists, else one by one."""
    many = getattr(edge_index, "derive_many", None)
    if many is not None:
        derived = many(documents)
    else:
        derived = [edge for document in documents for edge in edge_index.derive_edges(document)]
    by_origin: dict[int, Counter] = defaultdict(Counter)
    for edge in derived:
        by_origin[edge.origin_id][edge_index.edge_signature(edge)] += 1
    return by_origin


def _compare_batch(
    documents: list[Document], totals: Counter, examples: dict, drifted: list[int]
) -> None:
    ids = [d.pk for d in documents]
    stored: dict[int, Counter] = defaultdict(Counter)
    rows = (
        Edge.objects.filter(origin_id__in=ids)
        .exclude(kind=Edge.Kind.RELATED)
        .values_list("origin_id", *edge_index.EDGE_FIELDS)
    )
    for origin_id, *signature in rows.iterator(chunk_size=2000):
        stored[origin_id][tuple(signature)] += 1
    derived_by_origin = _derive(documents)
    for document in documents:
        derived = derived_by_origin.get(document.pk, Counter())
        have = stored.get(document.pk, Counter())
        totals["documents"] += 1
        totals["expected"] += sum(derived.values())
        totals["stored"] += sum(have.values())
        if derived == have:
            continue
        missing, extra = derived - have, have - derived
        by_place: dict[tuple, list[tuple]] = defaultdict(list)
        for signature in extra.elements():
            by_place[tuple(signature[i] for i in _PLACE_AT)].append(signature)
        altered = 0
        for signature in list(missing.elements()):
            place = tuple(signature[i] for i in _PLACE_AT)
            if by_place.get(place):
                old = by_place[place].pop()
                missing[signature] -= 1
                extra[old] -= 1
                altered += 1
                _example(examples, "altered", f"{_describe(old)} → {_describe(signature)}")
        missing, extra = +missing, +extra
        for signature in missing.elements():
            _example(examples, "missing", _describe(signature))
        for signature in extra.elements():
            _example(examples, "extra", _describe(signature))
        totals["missing"] += sum(missing.values())
        totals["missing_mentions"] += sum(
            n for signature, n in missing.items() if signature[_KIND_AT] == Edge.Kind.MENTIONS
        )
        totals["extra"] += sum(extra.values())
        totals["altered"] += altered
        drifted.append(document.pk)
        _example(examples, "drifted_documents", document.pk)


def _example(examples: dict[str, list[Any]], name: str, value: Any) -> None:
    found = examples.setdefault(name, [])
    if len(found) < EXAMPLES:
        found.append(value)


def _related_basis() -> dict[str, Any]:
    """What a current related edge's basis says: the active manifest and the threshold."""
    active = VectorIndexState.objects.filter(pk=1).values_list("active_key", flat=True).first()
    if not active:
        try:
            active = current_manifest().key
        except EmbeddingUnavailable:
            active = ""
    return {"manifest": active, "threshold": float(settings.LODE_RELATED_THRESHOLD)}


def _check_related(totals: Counter, examples: dict, findings: _Findings) -> None:
    """Validity and basis of every `related` edge, `RELATED_BATCH` at a time."""
    current = _related_basis()
    seen: set[tuple[int, int]] = set()
    recompute: set[int] = set()
    last = 0
    while True:
        rows = list(
            Edge.objects.filter(kind=Edge.Kind.RELATED, pk__gt=last)
            .order_by("pk")
            .values_list(
                "pk",
                "origin_id",
                "from_document_id",
                "from_version_id",
                "to_document_id",
                "rule",
                "rule_version",
                "basis",
                "from_document__deleted_at",
                "from_document__head_id",
                "from_document__space_id",
                "to_document__deleted_at",
                "to_document__head_id",
                "to_document__space_id",
            )[:RELATED_BATCH]
        )
        if not rows:
            break
        last = rows[-1][0]
        for row in rows:
            (pk, origin, source, version, target, rule, rule_version, basis) = row[:8]
            (source_deleted, source_head, source_space) = row[8:11]
            (target_deleted, target_head, target_space) = row[11:]
            totals["related"] += 1
            invalid = (
                source is None
                or target is None
                or origin != source
                or source == target
                or source_deleted is not None
                or source_head is None
                or version != source_head
                or target_deleted is not None
                or target_head is None
                or target_space != source_space
                or (source, target) in seen
            )
            seen.add((source, target))
            if invalid:
                totals["related_invalid"] += 1
                findings.invalid.append(pk)
                recompute.add(origin)
                _example(examples, "related_invalid", pk)
                continue
            basis = basis or {}
            if (
                rule != RELATED_RULE
                or rule_version != RELATED_RULE_VERSION
                or (current["manifest"] and basis.get("manifest") != current["manifest"])
                or basis.get("threshold") != current["threshold"]
            ):
                totals["related_stale"] += 1
                recompute.add(origin)
                _example(examples, "related_stale", pk)
    findings.recompute = sorted(recompute)


def check_edges() -> _Findings:
    """Recompute the edge set from the head versions and compare (read-only)."""
    totals: Counter = Counter()
    examples: dict[str, list[Any]] = {}
    findings = _Findings(health=EdgeHealth(checked=True))
    # Read before the comparison: a scan that finishes during it has added its edges.
    scans = mention_scans_pending()
    for documents in _documents():
        _compare_batch(documents, totals, examples, findings.drifted)
    _check_related(totals, examples, findings)
    findings.health = EdgeHealth(
        checked=True,
        documents=totals["documents"],
        expected=totals["expected"],
        stored=totals["stored"],
        missing=totals["missing"],
        missing_mentions=totals["missing_mentions"],
        mention_scans=scans,
        extra=totals["extra"],
        altered=totals["altered"],
        drifted_documents=len(findings.drifted),
        related=totals["related"],
        related_invalid=totals["related_invalid"],
        related_stale=totals["related_stale"],
        examples=examples,
    )
    return findings


def edge_health() -> EdgeHealth:
    return check_edges().health


# --- repair ------------------------------------------------------------------------------


def repair_edges(*, related: bool = True) -> EdgeRepair:
    """Re-derive the documents whose edges drifted, delete invalid related edges and — with
    `related` (the vector index may be used) — recompute the related edges of their live
    documents and of stale ones. Never writes a canonical row."""
    started = perf_counter()
    findings = check_edges()
    written = 0
    for part in chunked(findings.drifted, BATCH):
        written += edge_index.refresh_edges(list(part), reverse=False, changed=False)
    removed = 0
    for part in chunked(findings.invalid, 1000):
        removed += Edge.objects.filter(pk__in=list(part), kind=Edge.Kind.RELATED).delete()[0]
    recomputed, error = 0, ""
    if related and findings.recompute:
        live = list(
            Document.objects.filter(
                pk__in=findings.recompute, deleted_at__isnull=True, head__isnull=False
            ).values_list("pk", flat=True)
        )
        try:
            recomputed = refresh_related(live).documents
        except (VectorStoreUnavailable, EmbeddingUnavailable) as exc:
            error = str(exc)
            logger.warning("related edges not recomputed: %s", exc)
    elif findings.recompute:
        error = "not recomputed (--skip-vectors)"
    return EdgeRepair(
        attempted=True,
        rederived=len(findings.drifted),
        written=written,
        related_removed=removed,
        related_recomputed=recomputed,
        related_error=error,
        seconds=perf_counter() - started,
    )
