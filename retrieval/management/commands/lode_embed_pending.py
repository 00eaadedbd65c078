"""`manage.py lode_embed_pending`: embed every pending head passage now, in the foreground.

For bulk loads (`lode_load_beir` writes passages without queuing tasks), after restoring a
data folder, or instead of running `db_worker`. It first reconciles the records with Chroma
(so a deleted or swapped vector folder is refilled), then runs the same `sync_vectors` the
worker runs, with a progress bar and a summary line.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from retrieval.index.embeddings import BATCH_SIZE, EmbeddingUnavailable, current_manifest
from retrieval.index.sync import reconcile_vectors, sync_vectors
from retrieval.index.vectors import VectorStoreUnavailable, index_state, pending_count


class Command(BaseCommand):
    help = "Embed every head passage that has no vector yet (foreground, with progress)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        parser.add_argument(
            "--no-reconcile",
            action="store_true",
            help="skip the check of records against Chroma before embedding",
        )
        parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        try:
            manifest = current_manifest()
            active = index_state().active_key
            if not options["no_reconcile"]:
                lost, orphans = reconcile_vectors(manifest.key)
                if lost or orphans:
                    self.stdout.write(
                        f"reconciled: {lost} records had no vector (re-embedding them), "
                        f"{orphans} stray vectors deleted"
                    )
            total = pending_count(manifest_key=manifest.key)
            with tqdm(
                total=total, unit="passage", file=sys.stderr, disable=options["no_progress"]
            ) as bar:
                report = sync_vectors(None, batch_size=options["batch_size"], progress=bar.update)
        except (EmbeddingUnavailable, VectorStoreUnavailable) as exc:
            raise CommandError(f"vectors unavailable: {exc}") from exc
        self.stdout.write(
            f"embedded {report.written} passages ({report.embedded} through the model, "
            f"{report.reused} reused by text hash), deleted {report.deleted} stale vectors "
            f"in {report.seconds:.1f} s — {report.passages_per_second:.1f} passages/s "
            f"[manifest {report.manifest_key}]"
        )
        if active != manifest.key:
            self.stdout.write(
                f"note: queries still read manifest {active}; run lode_reindex_vectors to "
                "finish the new index and switch to it"
            )
