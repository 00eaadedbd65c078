"""`manage.py lode_trace show|replay ID`: read a stored answer trace, and re-run it.

    lode_trace show ID [--json]     the stored trace (question, decision, the trace JSON)
    lode_trace replay ID [--json]   re-run the deterministic stages and list differences

`replay` (`retrieval.answer.replay.replay`) re-runs parse, search with the stored mode and reranker,
the evidence pack with the stored budgets, the decision before answering, the gate over the
stored draft claims (the answerer is never called again) and the final decision, and prints
each difference against the stored trace. Exit status: 0 when nothing differs, 1 when
something does, 2 when there is no such trace. The code version is printed for context and
is not itself a difference (a new commit that changes nothing replays clean).
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from retrieval.answer.replay import replay
from retrieval.answer.trace import code_version
from retrieval.models import AskTrace

DIFFERS = 1
NOT_FOUND = 2


class Command(BaseCommand):
    help = "Show a stored answer trace, or replay its deterministic stages and report differences."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["show", "replay"])
        parser.add_argument("trace_id", type=int)
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Machine-readable output."
        )

    def handle(self, *args, action: str, trace_id: int, as_json: bool = False, **options) -> None:
        trace = AskTrace.objects.select_related("user").filter(pk=trace_id).first()
        if trace is None:
            raise CommandError(f"No answer trace {trace_id}.", returncode=NOT_FOUND)
        if action == "show":
            self._show(trace, as_json=as_json)
            return
        differences = replay(trace)
        if as_json:
            self.stdout.write(
                _dumps(
                    {
                        "trace_id": trace.pk,
                        "same": not differences,
                        "differences": differences,
                        "stored_code_version": trace.code_version,
                        "code_version": code_version(),
                    }
                )
            )
        else:
            self.stdout.write(
                f"trace {trace.pk}: {trace.question!r} ({trace.decision}, {trace.answerer})"
            )
            self.stdout.write(
                f"  code version: stored {trace.code_version or '?'}, now {code_version() or '?'}"
            )
            if differences:
                self.stdout.write(f"  {len(differences)} difference(s):")
                for line in differences:
                    self.stdout.write(f"    - {line}")
            else:
                self.stdout.write("  same: every deterministic stage reproduced the stored trace")
        if differences:
            raise SystemExit(DIFFERS)

    def _show(self, trace: AskTrace, *, as_json: bool) -> None:
        data = {
            "id": trace.pk,
            "user": trace.user.get_username(),
            "created_at": trace.created_at.isoformat(),
            "question": trace.question,
            "pinned_document_id": trace.pinned_document_id,
            "decision": trace.decision,
            "answerer": trace.answerer,
            "code_version": trace.code_version,
            "elapsed_ms": trace.elapsed_ms,
            "answer": trace.answer,
            "trace": trace.trace,
        }
        if as_json:
            self.stdout.write(_dumps(data))
            return
        self.stdout.write(f"trace {trace.pk} by {data['user']} at {data['created_at']}")
        self.stdout.write(f"  question: {trace.question}")
        self.stdout.write(f"  decision: {trace.decision}  answerer: {trace.answerer}")
        self.stdout.write(f"  code version: {trace.code_version or '?'}")
        self.stdout.write(_dumps(trace.trace))


def _dumps(data: object) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True, default=str)
