"""`manage.py lode_graph build [--if-never-built]`: derive the graph's edges of every live
document.

Saving a version keeps its edges current; this is for an install that existed before the
graph (the bootstrap runs it with `--if-never-built` after `migrate`) and for rebuilding
after a rule changed. `lode_index health` compares the stored edges with a fresh derivation
and `lode_index repair` rewrites only what differs.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from retrieval.index.edges import build_all_edges


class Command(BaseCommand):
    help = "Derive the graph's edges of every live document."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["build"])
        parser.add_argument(
            "--if-never-built",
            action="store_true",
            help="Do nothing when the graph has been built before (for start-up scripts).",
        )

    def handle(self, *args, **options) -> None:
        written = build_all_edges(only_if_never_built=options["if_never_built"])
        if written is None:
            self.stdout.write("graph already built; nothing to do")
        else:
            self.stdout.write(f"graph built: {written} edges")
