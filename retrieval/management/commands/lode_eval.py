"""`manage.py lode_eval`: score lode's search on a BEIR dataset (nDCG@10, Recall@100, MRR@10).

Loads the corpus for the evaluation user first when that user has none (through the same
loader as `lode_load_beir`), then runs every judged query through the search service.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import BaseCommand, CommandError, CommandParser

from notes.management.commands.lode_import_markdown import DEFAULT_USER, ensure_user, report
from notes.management.commands.lode_load_beir import CORPUS_FILE, load_beir
from retrieval.search import evaluation


class Command(BaseCommand):
    help = "Evaluate search on a BEIR dataset and print nDCG@10, Recall@100, MRR@10, latency."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--corpus-dir", type=Path, required=True, help="holds corpus.jsonl")
        parser.add_argument("--queries", type=Path, required=True, help="BEIR queries.jsonl")
        parser.add_argument("--qrels", type=Path, required=True, help="BEIR qrels .tsv")
        # Read at run time from retrieval.search.pipeline (MODES and EVAL_MODES), so modes added
        # there
        # later are accepted here without a change.
        parser.add_argument(
            "--mode",
            default="lexical",
            choices=tuple(evaluation.eval_modes()),
            help="what to measure",
        )
        parser.add_argument("--json", type=Path, default=None, help="write the report here")
        parser.add_argument(
            "--user", default=DEFAULT_USER, help=f"whose notes to search (default {DEFAULT_USER})"
        )
        parser.add_argument(
            "--limit-queries", type=int, default=None, help="evaluate the first N judged queries"
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        parser.add_argument(
            "--ann-check",
            action="store_true",
            help="also report recall@10 of Chroma against exact cosine search over the same "
            "stored vectors, with and without an extra metadata filter",
        )

    def handle(self, *args: object, **options: object) -> None:
        mode, corpus_dir, limit = self._checked_options(options)
        user = ensure_user(str(options["user"]))
        if not evaluation.has_beir_corpus(user):
            self.stderr.write(f"Loading {corpus_dir / CORPUS_FILE} for {user.get_username()}")
            report(self, load_beir(corpus_dir, owner=user, progress=not options["no_progress"]))

        qrels = evaluation.load_qrels(options["qrels"])
        queries = _judged_queries(evaluation.load_queries(options["queries"]), qrels, limit)
        result = evaluation.evaluate(user, queries, qrels, mode)
        self._print_result(result, user.get_username())
        report_json = result.as_json()
        if options["ann_check"]:
            report_json["ann_check"] = self._ann_check(user, queries)
        if options["json"] is not None:
            out = Path(options["json"])
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report_json, indent=2) + "\n", encoding="utf-8")

    def _checked_options(self, options: dict[str, object]) -> tuple[str, Path, int | None]:
        """(mode, corpus folder, query limit), or CommandError for a bad mode, a missing
        input file or a limit below 1."""
        mode = str(options["mode"])
        modes = evaluation.eval_modes()
        # call_command(mode=...) bypasses argparse's `choices`; check again here.
        if mode not in modes:
            raise CommandError(f"Unknown mode {mode!r}; choose one of: {', '.join(modes)}")
        corpus_dir = Path(options["corpus_dir"])
        for path in (corpus_dir / CORPUS_FILE, options["queries"], options["qrels"]):
            if not Path(path).is_file():
                raise CommandError(f"{path} does not exist")
        limit = options["limit_queries"]
        if limit is not None and limit < 1:
            raise CommandError("--limit-queries must be at least 1")
        return mode, corpus_dir, limit

    def _print_result(self, result: evaluation.EvalResult, username: str) -> None:
        self.stdout.write(
            f"mode {result.mode}, {result.queries} queries, user {username}\n"
            f"nDCG@10     {result.ndcg_at_10:.4f}\n"
            f"Recall@100  {result.recall_at_100:.4f}\n"
            f"MRR@10      {result.mrr_at_10:.4f}\n"
            f"latency ms  p50 {result.latency_p50_ms:.2f}  p95 {result.latency_p95_ms:.2f}"
        )
        if result.errors:
            self.stderr.write(f"{result.errors} queries were refused by the search service")
        if result.degraded:
            # e.g. hybrid with passages not yet embedded: the figures are not the mode's own.
            self.stderr.write(
                f"{result.degraded} of {result.queries} queries ran degraded "
                "(see `manage.py lode_embed_pending`)"
            )

    def _ann_check(self, user: AbstractBaseUser, queries: dict[str, str]) -> dict[str, object]:
        """Print and return ANN recall against exact cosine over the same stored vectors."""
        from retrieval.index.ann_check import ann_recall

        ann = ann_recall(user, queries.values())
        self.stdout.write(
            f"ANN recall@{ann.k} vs exact cosine ({ann.queries} queries, {ann.vectors} "
            f"vectors): owner filter only {ann.unfiltered:.4f}, "
            f"extra filter ({ann.filtered_vectors} vectors) {ann.filtered:.4f}"
        )
        return ann.as_json()


def _judged_queries(
    queries: dict[str, str], qrels: evaluation.Qrels, limit: int | None
) -> dict[str, str]:
    """The queries that have judgements, in file order, the first `limit` of them;
    CommandError when none is left."""
    judged = {qid: text for qid, text in queries.items() if qid in qrels}
    if limit is not None:
        judged = dict(list(judged.items())[:limit])
    if not judged:
        raise CommandError("No query has judgements in the qrels file.")
    return judged
