"""`manage.py lode_reindex_vectors`: rebuild the vector index for the current manifest.

Needed when the embedding manifest changes (another model, dimension or template). The new
manifest's collection is filled completely while queries keep reading the old one; only
then does the index switch, and the old collection is dropped. Interrupted, it leaves the
old index active; run it again to resume.

Progress shows in the shell (tqdm on stderr) and on the admin page "Job progress" (a
`lode_site.models.JobProgress` row of passages done out of passages pending at the start),
finished at the end or failed with the error.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from lode_site.models import JobProgress, job_progress
from retrieval.index.embeddings import BATCH_SIZE, EmbeddingUnavailable, get_embedder
from retrieval.index.sync import reindex_vectors
from retrieval.index.vectors import VectorStoreUnavailable, pending_count


class Command(BaseCommand):
    help = "Build the vector index for the current embedding manifest and switch to it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        summary = f"batch size {options['batch_size']}"
        with job_progress(kind=JobProgress.Kind.REINDEX_VECTORS, summary=summary) as job:
            self.reindex(job, batch_size=options["batch_size"], bar=not options["no_progress"])

    def reindex(self, job: JobProgress, *, batch_size: int, bar: bool) -> None:
        """The command's work, inside its job row (a `CommandError` here marks it failed)."""
        try:
            embedder = get_embedder()
            total = pending_count(manifest_key=embedder.manifest.key)
            job.report(0, total)
            with tqdm(total=total, unit="passage", file=sys.stderr, disable=not bar) as shell:

                def progress(count: int) -> None:
                    shell.update(count)
                    job.advance(count)

                report = reindex_vectors(
                    embedder=embedder, batch_size=batch_size, progress=progress
                )
        except (EmbeddingUnavailable, VectorStoreUnavailable) as exc:
            raise CommandError(
                f"vectors unavailable: {exc}; the previous index stays active"
            ) from exc
        written = sum(sync.written for sync in report.syncs)
        if report.switched:
            self.stdout.write(
                f"switched the vector index from manifest {report.previous_key} to "
                f"{report.target_key} ({written} passages embedded or reused)"
            )
        elif report.previous_key == report.target_key:
            self.stdout.write(
                f"the index already uses manifest {report.target_key}; "
                f"synced {written} pending passages"
            )
        else:
            raise CommandError(
                f"{report.remaining} passages are still without a vector under "
                f"{report.target_key}; queries keep using {report.previous_key}. Run again."
            )
