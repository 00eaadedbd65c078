"""`manage.py lode_eval_gate`: accept rates of the faithfulness gate, step by step and per
entailment backend, on SciFact claims quoting their own rationale sentences (the logic lives
in retrieval/answer/gate_eval.py; this command only parses arguments and prints)."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from retrieval.answer.entailment import ENTAILMENT_CHOICES
from retrieval.answer.gate_eval import evaluate, format_report


class Command(BaseCommand):
    help = (
        "Run the faithfulness gate over SciFact SUPPORT and CONTRADICT claims quoting their "
        "rationale sentences; print accept rates per gate step and per entailment backend."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--claims", type=Path, required=True, help="claims_train.jsonl")
        parser.add_argument("--corpus", type=Path, required=True, help="corpus.jsonl")
        parser.add_argument("--json", type=Path, default=None, help="write the report here")
        parser.add_argument(
            "--entailment",
            default=",".join(ENTAILMENT_CHOICES),
            help="comma-separated backends, first is the headline "
            f"(default {','.join(ENTAILMENT_CHOICES)}); one that cannot run is skipped with why",
        )
        parser.add_argument(
            "--limit", type=int, default=None, help="only the first N claims that have evidence"
        )

    def handle(self, *args: object, **options: object) -> None:
        claims, corpus = Path(options["claims"]), Path(options["corpus"])
        for path in (claims, corpus):
            if not path.is_file():
                raise CommandError(f"{path} does not exist")
        backends = [b.strip() for b in str(options["entailment"]).split(",") if b.strip()]
        unknown = [b for b in backends if b not in ENTAILMENT_CHOICES]
        if unknown or not backends:
            raise CommandError(
                f"--entailment takes a comma-separated list of {', '.join(ENTAILMENT_CHOICES)}"
            )
        backends = list(dict.fromkeys(backends))
        limit = options["limit"]
        if limit is not None and int(limit) < 1:
            raise CommandError("--limit must be at least 1")
        try:
            report = evaluate(claims, corpus, backends, limit=limit)
        except (ValueError, KeyError) as exc:
            raise CommandError(f"cannot read the claims or corpus: {exc}") from exc
        for line in format_report(report):
            self.stdout.write(line)
        if options["json"]:
            out = Path(options["json"])
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", "utf-8")
            self.stdout.write(f"wrote {out}")
