"""`manage.py lode_index health|repair`: check the derived indexes, and rebuild them.

    lode_index health [--json] [--skip-vectors] [--skip-edges] [--skip-meta]
    lode_index repair [--json] [--skip-vectors] [--skip-edges] [--skip-meta]

`health` compares the lexical and vector indexes with the canonical passages
(`retrieval.index.health.index_health`) and exits 1 when anything is unhealthy, so schedulers and
CI can act on it. `repair` re-chunks head versions holding a passage longer than
`LODE_CHUNK_MAX_CHARS` (old passages retired, not deleted), rebuilds the lexical index in
one transaction, re-embeds wrong or missing vectors and deletes orphans, and prints health
before and after; it exits 1 when problems remain and 3 when the canonical digest changed
after the re-chunking step (it never should). `--skip-vectors`
leaves the vector index alone (no model or Chroma needed).

Both also check the graph's edges (`retrieval.index.edge_health`): every
document's edges re-derived from its head version and compared with the stored ones
(missing, extra, altered), and `related` edges checked for live ends and a current basis;
`repair` re-derives the documents that drifted, deletes invalid related edges and (unless
`--skip-vectors`) recomputes related edges from the vector index. `--skip-edges` leaves the
graph out.

Both check the meta rows too (`retrieval.meta.health`): each live document's date, kind,
top terms and aliases re-derived from its head version and compared with its rows (missing,
stale, altered); `repair` rewrites those. `--skip-meta` leaves them out.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from retrieval.index.edge_health import EdgeHealth, EdgeRepair
from retrieval.index.health import (
    CanonicalChanged,
    HealthReport,
    RepairReport,
    VectorRepair,
    index_health,
    repair_indexes,
)
from retrieval.meta.health import MetaHealth, MetaRepair

UNHEALTHY = 1
CANONICAL_CHANGED = 3


def _short(digest: str) -> str:
    return digest[:16] if digest else "(unreadable)"


def health_lines(report: HealthReport, title: str = "index health") -> list[str]:
    """A readable report: the verdict, each index's figures, then the problems."""
    canonical, lex, vec = report.canonical, report.lexical, report.vectors
    lines = [
        f"{title}: {report.verdict} ({report.seconds:.2f} s)",
        f"  canonical  {canonical.head_passages} head passages, digest {_short(canonical.digest)}"
        f"; {canonical.oversized} longer than {canonical.max_chars} characters",
        f"  lexical    {lex.engine}: {lex.indexed_rows} rows indexed for "
        f"{lex.canonical_rows} head passages; integrity check: {lex.integrity}",
        f"             rebuilt from canonical text: {lex.expected_entries} entries, digest "
        f"{_short(lex.expected_digest)}; index: {lex.actual_entries} entries, digest "
        f"{_short(lex.actual_digest)}; {lex.mismatches} {lex.mismatch_unit} disagree",
    ]
    if not vec.checked:
        lines.append("  vectors    not checked (--skip-vectors)")
    elif not vec.available:
        lines.append(f"  vectors    unavailable: {vec.reason}")
    else:
        lines += [
            f"  vectors    manifest {vec.manifest_key} (code: {vec.code_manifest_key}): "
            f"{vec.vectors} vectors, {vec.records} records for {vec.head_passages} head passages",
            f"             missing {vec.missing}, stale {vec.stale}, orphan vectors "
            f"{vec.orphan_vectors}, orphan records {vec.orphan_records}, "
            f"retired records {vec.retired_records}",
        ]
        lines += [f"             {name}: e.g. {ids}" for name, ids in vec.examples.items()]
    lines += edge_lines(report.edges)
    lines += meta_lines(report.meta)
    workers = report.workers
    lines.append(
        f"  workers    {workers.alive} alive, {workers.stale} stale; "
        f"{workers.expired_claims} expired vector claims (taken over by the next sync)"
    )
    if report.problems:
        lines.append("  problems")
        lines += [f"    - {problem}" for problem in report.problems]
    if report.pending:
        lines.append("  pending (the worker brings these in step)")
        lines += [f"    - {item}" for item in report.pending]
    return lines


def edge_lines(edges: EdgeHealth) -> list[str]:
    """The graph's figures in a health report."""
    if not edges.checked:
        return ["  edges      not checked (--skip-edges)"]
    lines = [
        f"  edges      {edges.stored} stored for {edges.documents} documents; re-derived from "
        f"head versions: {edges.expected}",
        f"             missing {edges.missing}, extra {edges.extra}, altered {edges.altered}, "
        f"documents drifted {edges.drifted_documents}",
        f"             related {edges.related}: invalid {edges.related_invalid}, "
        f"stale {edges.related_stale}",
    ]
    lines += [f"             {name}: e.g. {values}" for name, values in edges.examples.items()]
    return lines


def meta_lines(meta: MetaHealth) -> list[str]:
    """The meta rows' figures in a health report."""
    if not meta.checked:
        return ["  meta       not checked (--skip-meta)"]
    lines = [
        f"  meta       {meta.rows} rows for {meta.documents} documents; missing {meta.missing}, "
        f"stale {meta.stale}, altered {meta.altered}"
    ]
    lines += [f"             {name}: e.g. {ids}" for name, ids in meta.examples.items()]
    return lines


def meta_repair_lines(repair: MetaRepair) -> list[str]:
    if not repair.attempted:
        return ["meta: not repaired (--skip-meta)"]
    plural = "" if repair.rewritten == 1 else "s"
    return [f"meta: re-derived the rows of {repair.rewritten} document{plural}"]


def edge_repair_lines(repair: EdgeRepair) -> list[str]:
    if not repair.attempted:
        return ["edges: not repaired (--skip-edges)"]
    related = (
        f"recomputed related edges of {repair.related_recomputed} documents"
        if not repair.related_error
        else f"related edges not recomputed: {repair.related_error}"
    )
    return [
        f"edges: re-derived {repair.rederived} documents ({repair.written} edges), removed "
        f"{repair.related_removed} invalid related edges; {related} ({repair.seconds:.2f} s)"
    ]


def repair_lines(repair: VectorRepair) -> list[str]:
    if not repair.attempted:
        return ["vectors: not repaired (--skip-vectors)"]
    if repair.error:
        return [f"vectors: repair stopped: {repair.error}"]
    return [
        f"vectors: {'rebuilt for the new manifest; ' if repair.reindexed else ''}"
        f"dropped {repair.dropped} wrong, {repair.records_lost} records without a vector, "
        f"deleted {repair.orphans_deleted} stray vectors; embedded {repair.embedded}, "
        f"pruned {repair.pruned}; retired collections: {', '.join(repair.retired) or 'none'}"
    ]


class Command(BaseCommand):
    help = (
        "Check the lexical and vector indexes and the graph's edges against the canonical "
        "passages and versions, or rebuild them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        for name, text in (
            ("health", "report drift; exit 1 when anything is unhealthy"),
            ("repair", "rebuild the derived indexes; print health before and after"),
        ):
            sub = actions.add_parser(name, help=text)
            sub.add_argument("--json", action="store_true", help="print JSON")
            sub.add_argument(
                "--skip-vectors", action="store_true", help="leave the vector index out"
            )
            sub.add_argument("--skip-edges", action="store_true", help="leave the graph out")
            sub.add_argument(
                "--skip-meta", action="store_true", help="leave the meta rows (dates, kinds) out"
            )

    def handle(self, *args: Any, **options: Any) -> None:
        vectors = not options["skip_vectors"]
        edges = not options["skip_edges"]
        meta = not options["skip_meta"]
        if options["action"] == "health":
            report = index_health(vectors=vectors, edges=edges, meta=meta)
            self._print(report.as_dict(), health_lines(report), options["json"])
            if not report.healthy:
                raise CommandError("the indexes are unhealthy", returncode=UNHEALTHY)
            return
        try:
            repaired = repair_indexes(vectors=vectors, edges=edges, meta=meta)
        except CanonicalChanged as exc:
            self._print_repair(exc.report, options["json"])
            raise CommandError(str(exc), returncode=CANONICAL_CHANGED) from exc
        self._print_repair(repaired, options["json"])
        if not repaired.after.healthy:
            raise CommandError("problems remain after the repair", returncode=UNHEALTHY)

    def _print_repair(self, report: RepairReport, as_json: bool) -> None:
        lines = [
            *health_lines(report.before, "before"),
            f"re-chunked: {report.rechunked.documents} head versions "
            f"({report.rechunked.retired} passages retired, {report.rechunked.written} written)",
            f"lexical: rebuilt in one transaction in {report.lexical_seconds:.2f} s",
            *repair_lines(report.vectors),
            *edge_repair_lines(report.edges),
            *meta_repair_lines(report.meta),
            f"workers: {report.gone_workers} stale heartbeat rows of gone workers deleted",
            *health_lines(report.after, "after"),
            "canonical digest unchanged"
            if report.canonical_unchanged
            else "CANONICAL DIGEST CHANGED",
        ]
        self._print(report.as_dict(), lines, as_json)

    def _print(self, data: dict[str, Any], lines: list[str], as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(data, indent=2))
        else:
            self.stdout.write("\n".join(lines))
