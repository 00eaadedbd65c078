"""What the answer page shows, built from verified claims or read back from a stored answer.

* `show_claims` — each claim that passed the gate, with every quoted span located in the
  version it cites (invariant 7): exactly, else after NFC + whitespace normalisation mapped
  back to the body's own offsets (`locate_span`); shown in context (`context_segments`) with
  the verified-opening link of the passage holding it. A passed claim none of whose spans can
  be located is dropped (fail closed).
* `conflicts_for` — the conflicts among the shown claims (and the pack's items on the same
  subjects, `decision.find_conflicts`), each value located and shown the same way.
* `outcome_from_trace` — a stored answer exactly as it was given (the permalink): the answer
  JSON (`AskOutcome.as_dict`) and the withheld documents from the trace (`trace.Trace`).
  Nothing is re-run or re-read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from notes.models import Version
from retrieval.answer.decision import claim_statements, evidence_statements, find_conflicts
from retrieval.answer.trace import Trace
from retrieval.answer.types import (
    AskOutcome,
    ClaimVerdict,
    Decision,
    EvidencePack,
    ShownClaim,
    ShownSupport,
)
from retrieval.links import evidence_url
from retrieval.models import AskTrace, Passage
from retrieval.text import nfc_collapsed, nfc_collapsed_with_offsets

# Code points of version text shown each side of a verified span (cut back to a paragraph
# break or a word boundary).
CONTEXT_CHARS = 160


# --- locating verified spans --------------------------------------------------------------------


def locate_span(span: str, body: str) -> tuple[int, int] | None:
    """Where `span` sits in `body`, in code points of `body`: exactly, else after NFC and
    whitespace normalisation of both (the gate's step 1), mapped back to the original
    offsets. None when it is not there (or is blank)."""
    if not span or not span.strip():
        return None
    at = body.find(span)
    if at >= 0:
        return at, at + len(span)
    needle = nfc_collapsed(span)
    haystack, starts, ends = nfc_collapsed_with_offsets(body)
    at = haystack.find(needle)
    if at < 0:
        return None
    return starts[at], ends[at + len(needle) - 1]


def context_segments(
    body: str, start: int, end: int, *, context: int = CONTEXT_CHARS
) -> tuple[tuple[str, bool], ...]:
    """The span `body[start:end]` highlighted, with up to `context` code points of text each
    side, cut back to a paragraph break (a blank line: the context stays in the span's
    paragraph, even a hard-wrapped one) or else a space (whole words). The segments
    concatenate to `body[a:b]` exactly (invariant 2's shape)."""
    a = max(0, start - context)
    paragraph = body.rfind("\n\n", a, start)
    if paragraph >= 0:
        a = paragraph + 2
    elif a > 0:
        space = body.find(" ", a, start)
        a = space + 1 if space >= 0 else a
    b = min(len(body), end + context)
    paragraph = body.find("\n\n", end, b)
    if paragraph >= 0:
        b = paragraph
    elif b < len(body):
        space = body.rfind(" ", end, b)
        b = space if space >= 0 else b
    pieces = ((body[a:start], False), (body[start:end], True), (body[end:b], False))
    return tuple((text, highlighted) for text, highlighted in pieces if text)


def _evidence_url_at(version_id: int, offset: int) -> str:
    """The verified-opening URL of the passage of `version_id` containing `offset`, or ""."""
    passage = (
        Passage.objects.filter(version_id=version_id, start__lte=offset, end__gt=offset)
        .select_related("version")
        .order_by("position")
        .first()
    )
    return evidence_url(passage) if passage is not None else ""


def _versions(user: AbstractBaseUser, ids: Sequence[int]) -> dict[int, Version]:
    """The user's versions among `ids` (with their documents)."""
    return {
        v.pk: v
        for v in Version.objects.filter(pk__in=set(ids), document__owner_id=user.pk).select_related(
            "document"
        )
    }


def shown_support(version: Version, quoted_span: str, start: int, end: int) -> ShownSupport:
    document = version.document
    return ShownSupport(
        version_id=version.pk,
        version_number=version.number,
        document_id=document.pk,
        document_title=document.title,
        kind=document.kind,
        trust_tier=document.trust_tier,
        quoted_span=quoted_span,
        start=start,
        end=end,
        segments=context_segments(version.body, start, end),
        evidence_url=_evidence_url_at(version.pk, start),
        version_created_at=version.created_at.isoformat() if version.created_at else "",
    )


def show_claims(
    verdicts: Sequence[ClaimVerdict], *, user: AbstractBaseUser
) -> tuple[list[ShownClaim], list[ClaimVerdict]]:
    """The passed claims as shown (each span located in its version), and the verdicts of
    passed claims that could not be shown (no span located: dropped, fail closed)."""
    passed = [v for v in verdicts if v.passed]
    versions = _versions(user, [s.version_id for v in passed for s in v.claim.support])
    shown: list[ShownClaim] = []
    unshown: list[ClaimVerdict] = []
    for verdict in passed:
        supports = []
        for support in verdict.claim.support:
            version = versions.get(support.version_id)
            where = locate_span(support.quoted_span, version.body) if version else None
            if version is None or where is None:
                continue
            supports.append(shown_support(version, support.quoted_span, *where))
        if supports:
            shown.append(ShownClaim(text=verdict.claim.text, support=tuple(supports)))
        else:
            unshown.append(
                ClaimVerdict(
                    claim=verdict.claim,
                    passed=False,
                    step=verdict.step,
                    reason="no quoted span could be located in its version for display",
                    entailment_score=verdict.entailment_score,
                    entailment_scorer=verdict.entailment_scorer,
                )
            )
    return shown, unshown


def conflicts_for(
    claims: list[ShownClaim], pack: EvidencePack, user: AbstractBaseUser
) -> list[dict[str, Any]]:
    """Conflicts among the shown claims (and the pack's items on the same subjects), each
    value with its statement highlighted in context and its verified-opening link."""
    found = find_conflicts(claim_statements(claims), evidence_statements(pack))
    if not found:
        return found
    versions = _versions(user, [v["version_id"] for c in found for v in c["values"]])
    for conflict in found:
        for value in conflict["values"]:
            version = versions.get(value["version_id"])
            start, end = value.get("start"), value.get("end")
            if version is None:
                value["segments"], value["evidence_url"] = [], ""
                continue
            if start is None or version.body[start:end] != value["statement"]:
                where = locate_span(value["statement"], version.body)
                start, end = where if where else (None, None)
            value["start"], value["end"] = start, end
            if start is None:
                value["segments"], value["evidence_url"] = [], ""
                continue
            value["segments"] = [
                {"text": t, "highlighted": h} for t, h in context_segments(version.body, start, end)
            ]
            value["evidence_url"] = _evidence_url_at(version.pk, start)
            value["version_number"] = version.number
            value["version_created_at"] = version.created_at.isoformat()
    return found


# --- permalinks ----------------------------------------------------------------------------------


def outcome_from_trace(row: AskTrace) -> AskOutcome:
    """The outcome exactly as stored (for permalinks): nothing is re-run or re-read. The
    withheld documents are the pack items the trace lists as withheld."""
    answer = row.answer or {}
    trace = Trace.from_row(row)
    pack_items = {item.passage_id: item for item in trace.pack.items} if trace.pack else {}
    withheld_ids = trace.withheld_passage_ids or []
    return AskOutcome(
        question=answer.get("question", row.question),
        decision=Decision(answer.get("decision", row.decision)),
        answerer=answer.get("answerer", row.answerer),
        claims=[ShownClaim.from_dict(c) for c in answer.get("claims", [])],
        dropped=[ClaimVerdict.from_dict(v) for v in answer.get("dropped", [])],
        withheld=[pack_items[pid] for pid in withheld_ids if pid in pack_items],
        clarifying_questions=list(answer.get("clarifying_questions", [])),
        conflicts=list(answer.get("conflicts", [])),
        message=answer.get("message", ""),
        error=answer.get("error", ""),
        notes=list(answer.get("notes", [])),
        trace_id=row.pk,
        elapsed_ms=row.elapsed_ms,
    )
