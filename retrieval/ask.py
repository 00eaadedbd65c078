"""The ask pipeline (DESIGN.md "The two pipelines"; issue 5 items 1, 5, 7, 9):

    search → EvidencePack (evidence_pack.py) → decision before answering (decision.py)
    → answerer (answerers.py; a remote one plans and logs egress itself)
    → faithfulness gate (gate.py) → verified spans located and shown in context
    → decision after the gate (abstain / conflicts / answer) → trace stored (AskTrace)

`ask()` always stores an AskTrace and returns its id in `outcome.trace_id`: the trace is the
flight recorder (seeds/lighthouse-spec.md "Trace"), the permalink, and what `replay()`
re-runs. `outcome_from_trace()` rebuilds the stored outcome for a permalink without running
anything.

Failure states, all stored like any other answer:
* the pinned note is not the user's live note → ABSTAIN_NO_EVIDENCE with `error` set; the
  wording is the same for someone else's note and a missing one (ids leak nothing);
* the question cannot be searched (a bad filter) → ASK_CLARIFYING with the parser's message;
* the answerer failed (timeout, HTTP error, malformed JSON, or it raised) →
  ABSTAIN_NO_EVIDENCE with `error` set and a message saying so: nothing is shown as verified.
  The decision stays ABSTAIN_NO_EVIDENCE (no claim survived), and `error` tells the page it
  was a failure, not an honest "your notes don't answer this".

With ANSWER_WITH_CONFLICTS the claims are ordered by trust tier (your notes first; stable
otherwise) and each conflict lists its values the same way: the higher tier leads.

A displayed claim shows only spans located in the version it cites (invariant 7): exactly,
else after NFC + whitespace normalisation mapped back to the body's own offsets. A surviving
claim none of whose spans can be located is dropped (fail closed).

`replay(trace)` re-runs the deterministic stages — parse, search with the stored mode and
reranker, pack with the stored budgets, the decision before answering, the gate over the
*stored* draft claims against the stored sent versions (never calling the answerer; an LLM
judge's stored scores are reused, a local cross-encoder is run again), and the final
decision — and returns each difference in words (empty: the same).
"""

from __future__ import annotations

import logging
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from notes.models import Document, Version
from retrieval.answer_types import (
    AnswerDraft,
    AskOutcome,
    Claim,
    ClaimVerdict,
    Decision,
    EvidencePack,
    PackItem,
    ShownClaim,
    ShownSupport,
    Support,
)
from retrieval.decision import (
    ANSWERER_FAILED,
    PreDecision,
    claim_statements,
    decide_after_gate,
    decide_before_answer,
    evidence_statements,
    find_conflicts,
    tier_order,
)
from retrieval.evidence_pack import build_pack
from retrieval.models import AskTrace, Passage
from retrieval.search import Hit, SearchResult, search

logger = logging.getLogger("lode.ask")

TRACE_SCHEMA = 1
# Code points of version text shown each side of a verified span (cut back to a paragraph
# break or a word boundary).
CONTEXT_CHARS = 160
PINNED_UNAVAILABLE = (
    "That note cannot be asked about: it does not exist, is not yours, or was deleted."
)
SEARCH_FAILED = "The question could not be searched: {error}"


# --- the deterministic front half ---------------------------------------------------------------


@dataclass
class Front:
    """What parse → search → pack → decision produced, the part `replay` re-runs."""

    result: SearchResult
    pack: EvidencePack
    pre: PreDecision
    search_limit: int


def search_limit(max_items: int) -> int:
    """How many hits to ask search for: twice the pack's item budget (room for dedup), ≥ 20."""
    return max(2 * max_items, 20)


def pinned_passages(document: Document) -> list[Passage]:
    """Every head passage of `document`, in document order (pinned, uncapped). The version
    body is not loaded with each passage (a 1 MB note has ~1,000 passages: that was a copy
    of the body per passage); answerers read bodies once per version."""
    return list(
        Passage.objects.filter(version_id=document.head_id, is_head=True)
        .select_related("document", "version")
        .defer("version__body")
        .order_by("position", "pk")
    )


def pinnable(user: AbstractBaseUser, document_id: int) -> Document | None:
    """The user's own live document with a head version, or None."""
    return (
        Document.objects.filter(pk=document_id, owner_id=user.pk, deleted_at__isnull=True)
        .exclude(head=None)
        .first()
    )


def front(
    *,
    user: AbstractBaseUser,
    question: str,
    pinned: Document | None,
    mode: str,
    rerank: str,
    max_items: int,
    max_chars: int,
) -> Front:
    limit = search_limit(max_items)
    result = search(user=user, query=question, mode=mode, rerank=rerank, limit=limit)
    passages = pinned_passages(pinned) if pinned is not None else []
    pack = build_pack(result.hits, pinned=passages, max_items=max_items, max_chars=max_chars)
    if result.error:
        pre = PreDecision(
            Decision.ASK_CLARIFYING,
            reason="query error",
            message=SEARCH_FAILED.format(error=result.error),
            clarifying_questions=[
                "Could you rephrase the question, or fix the filter the message names?"
            ],
        )
    else:
        pre = decide_before_answer(question, pack, parsed=result.parsed)
    return Front(result=result, pack=pack, pre=pre, search_limit=limit)


# --- locating verified spans --------------------------------------------------------------------


def _normalised_with_map(body: str) -> tuple[str, list[int], list[int]]:
    """`body` NFC-normalised with whitespace runs collapsed to one space, and for each output
    character the (start, end) offsets in `body` it came from. NFC is applied per base
    character and its combining marks, so every output character maps to a whole cluster."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i, n = 0, len(body)
    while i < n:
        if body[i].isspace():
            j = i
            while j < n and body[j].isspace():
                j += 1
            out.append(" ")
            starts.append(i)
            ends.append(j)
            i = j
            continue
        j = i + 1
        while j < n and unicodedata.combining(body[j]):
            j += 1
        for ch in unicodedata.normalize("NFC", body[i:j]):
            out.append(ch)
            starts.append(i)
            ends.append(j)
        i = j
    return "".join(out), starts, ends


def locate_span(span: str, body: str) -> tuple[int, int] | None:
    """Where `span` sits in `body`, in code points of `body`: exactly, else after NFC and
    whitespace normalisation of both (the gate's step 1), mapped back to the original
    offsets. None when it is not there (or is blank)."""
    if not span or not span.strip():
        return None
    at = body.find(span)
    if at >= 0:
        return at, at + len(span)
    needle = " ".join(unicodedata.normalize("NFC", span).split())
    haystack, starts, ends = _normalised_with_map(body)
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
    from retrieval.evidence import evidence_url

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


# --- the trace ---------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def code_version() -> str:
    """The git commit of the running code (read from .git, no subprocess), else the package
    version, else "". Never raises."""
    try:
        git = Path(settings.BASE_DIR) / ".git"
        if git.is_file():  # a worktree: "gitdir: <path>"
            pointer = git.read_text(encoding="utf-8").strip()
            if pointer.startswith("gitdir:"):
                git = (git.parent / pointer.removeprefix("gitdir:").strip()).resolve()
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref:"):
            return head[:40]
        ref = head.removeprefix("ref:").strip()
        ref_file = git / ref
        if ref_file.is_file():
            return ref_file.read_text(encoding="utf-8").strip()[:40]
        packed = git / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(encoding="utf-8").splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0][:40]
    except (OSError, ValueError, UnicodeDecodeError):
        pass
    try:
        from importlib.metadata import version

        return f"lode {version('lode')}"
    except Exception:  # any metadata problem: no version rather than a failed ask
        return ""


def _leg(leg: Any) -> dict[str, Any] | None:
    if leg is None:
        return None
    return {"rank": leg.rank, "score": leg.score, "score_name": leg.score_name}


def candidate_dict(hit: Hit) -> dict[str, Any]:
    return {
        "passage_id": hit.passage.pk,
        "rank": hit.rank,
        "lexical": _leg(hit.fused.lexical),
        "dense": _leg(hit.fused.dense),
        "rrf": hit.fused.rrf,
        "fused_score": hit.fused.fused_score,
        "exact_matches": list(hit.fused.exact_matches),
        "rerank_score": hit.rerank_score,
        "rerank_score_name": hit.rerank_score_name,
    }


def parsed_dict(result: SearchResult) -> dict[str, Any] | None:
    parsed = result.parsed
    if parsed is None:
        return None
    return {
        "raw": parsed.raw,
        "text": parsed.text,
        "terms": [list(g) for g in parsed.terms],
        "phrases": [list(g) for g in parsed.phrases],
        "excluded": [list(g) for g in parsed.excluded],
        "needles": list(parsed.needles),
        "filters": [str(f) for f in parsed.filters],
        "notes": list(parsed.notes),
    }


def search_trace(result: SearchResult) -> dict[str, Any]:
    """The search stage as the trace stores it: the parsed query; each leg's candidate count;
    for every hit search returned (up to `search_limit`), its lexical and dense rank and raw
    score, RRF and fused score, exact matches and rerank score; `fused`, those hits in fused
    order (RRF + exact boosts, before rerank and trust rank); and `reranked`, the final order.
    The legs' full candidate lists (up to 256 each) are not stored: they would dwarf the rest
    of the trace, and the returned hits are what the pack is built from."""
    fused = sorted(result.hits, key=lambda h: h.fused.sort_key())
    return {
        "parsed": parsed_dict(result),
        "error": result.error,
        "rerank": result.rerank,
        "degraded": list(result.degraded),
        "notes": list(result.notes),
        "lexical_candidates": result.lexical_candidates,
        "dense_candidates": result.dense_candidates,
        "elapsed_ms": round(result.elapsed_ms, 3),
        "candidates": [candidate_dict(h) for h in result.hits],
        "fused": [h.passage.pk for h in fused],
        "reranked": [h.passage.pk for h in result.hits],
    }


def _embedding_manifest(mode: str) -> str:
    if mode == "lexical":
        return ""
    try:
        from retrieval.vectors import active_manifest_key

        return active_manifest_key()
    except Exception as exc:  # a trace must never fail the ask
        logger.warning("no embedding manifest for the trace: %s", exc)
        return ""


def _scorer_name(scorer: Any) -> str:
    return getattr(scorer, "name", type(scorer).__name__) if scorer is not None else "none"


# --- ask ---------------------------------------------------------------------------------------


def _get_scorer(notes: list[str], user: Any) -> Any:
    from retrieval.entailment import EntailmentUnavailable, get_entailment_scorer

    try:
        scorer = get_entailment_scorer()
    except EntailmentUnavailable as exc:
        notes.append(f"Entailment check unavailable: {exc}.")
        return None
    if hasattr(scorer, "user"):
        scorer.user = user  # the LLM judge's egress rows name who asked
    return scorer


def _withheld(answerer: Any, pack: EvidencePack) -> list[PackItem]:
    if not getattr(answerer, "remote", False):
        return []
    from retrieval.egress import plan_egress

    return list(plan_egress(pack).withheld)


def ask(
    *,
    user: AbstractBaseUser,
    question: str,
    pinned_document_id: int | None = None,
    answerer: Any = None,
    mode: str = "hybrid",
) -> AskOutcome:
    """Answer `question` from the user's own notes, verified; always stores a trace.

    `answerer` defaults to `retrieval.answerers.get_answerer()` (a chat model when
    `LODE_LLM_BASE_URL` is set, else the offline extractive answerer).
    """
    started = time.perf_counter()
    max_items, max_chars = settings.LODE_ASK_MAX_ITEMS, settings.LODE_ASK_MAX_CHARS
    rerank = settings.LODE_RERANK
    trace: dict[str, Any] = {
        "schema_version": TRACE_SCHEMA,
        "question": question,
        "pinned_document_id": pinned_document_id,
        "settings": {
            "mode": mode,
            "rerank": rerank,
            "entailment": settings.LODE_ENTAILMENT,
            "max_items": max_items,
            "max_chars": max_chars,
            "llm_model": settings.LODE_LLM_MODEL,
        },
    }
    outcome = AskOutcome(question=question, decision=Decision.ABSTAIN_NO_EVIDENCE, answerer="")

    pinned = None
    if pinned_document_id is not None:
        pinned = pinnable(user, pinned_document_id)
        if pinned is None:
            outcome.error = outcome.message = PINNED_UNAVAILABLE
            trace["decision"] = {
                "decision": str(outcome.decision),
                "reason": "pinned note unavailable",
            }
            return _store(user, outcome, trace, pinned=None, started=started)
        outcome.notes.append(f"Asked about “{pinned.title}”: its passages come first.")

    stage = front(
        user=user,
        question=question,
        pinned=pinned,
        mode=mode,
        rerank=rerank,
        max_items=max_items,
        max_chars=max_chars,
    )
    outcome.notes.extend(stage.result.degraded)
    trace["settings"]["search_limit"] = stage.search_limit
    trace["search"] = search_trace(stage.result)
    trace["pack"] = stage.pack.as_dict()
    trace["pre_decision"] = stage.pre.as_dict()
    trace["manifests"] = {
        "embedding": _embedding_manifest(mode),
        "reranker": stage.result.rerank,
        "entailment": "not run",  # set when claims reach the gate
    }

    if answerer is None:
        from retrieval.answerers import get_answerer

        answerer = get_answerer()
    outcome.answerer = getattr(answerer, "name", type(answerer).__name__)
    remote = bool(getattr(answerer, "remote", False))
    trace["settings"]["answerer"] = outcome.answerer
    trace["settings"]["answerer_remote"] = remote

    if stage.pre.decision is not None:
        outcome.decision = stage.pre.decision
        outcome.message = stage.pre.message
        outcome.clarifying_questions = list(stage.pre.clarifying_questions)
        trace["decision"] = {"decision": str(outcome.decision), "reason": stage.pre.reason}
        trace["model"] = {"remote": remote, "request": None, "response": None, "error": ""}
        return _store(user, outcome, trace, pinned=pinned, started=started)

    outcome.withheld = _withheld(answerer, stage.pack)
    trace["withheld_passage_ids"] = [item.passage_id for item in outcome.withheld]
    try:
        draft = answerer.answer(question, stage.pack, user=user)
    except Exception as exc:  # an answerer bug must fail like an answerer error, not a 500
        logger.exception("answerer %s raised", outcome.answerer)
        draft = AnswerDraft(answerer=outcome.answerer, error=f"{type(exc).__name__}: {exc}")
    trace["model"] = {
        "remote": remote,
        "request": draft.request,
        "response": draft.response,
        "error": draft.error,
    }
    trace["draft"] = {
        "claims": [c.as_dict() for c in draft.claims],
        "sent_versions": sorted(draft.sent_versions),
    }
    if draft.error:
        outcome.error = draft.error
        outcome.message = ANSWERER_FAILED.format(error=draft.error)
        trace["decision"] = {"decision": str(outcome.decision), "reason": "answerer failed"}
        return _store(user, outcome, trace, pinned=pinned, started=started)

    from retrieval.gate import run_gate

    scorer = _get_scorer(outcome.notes, user) if draft.claims else None
    trace["manifests"]["entailment"] = _scorer_name(scorer)
    verdicts = run_gate(draft.claims, dict(draft.sent_versions), scorer=scorer)
    trace["gate"] = [v.as_dict() for v in verdicts]
    outcome.claims, unshown = show_claims(verdicts, user=user)
    outcome.dropped = [v for v in verdicts if not v.passed] + unshown
    outcome.conflicts = conflicts_for(outcome.claims, stage.pack, user) if outcome.claims else []
    decision, message = decide_after_gate(outcome.claims, outcome.conflicts)
    outcome.decision, outcome.message = decision, message
    if decision == Decision.ANSWER_WITH_CONFLICTS:
        # The higher trust tier leads: claims resting on your notes before externals (stable,
        # so the answerer's order holds within a tier).
        outcome.claims.sort(key=lambda c: min(tier_order(s.trust_tier) for s in c.support))
    trace["decision"] = {
        "decision": str(decision),
        "reason": f"{len(outcome.claims)} claim(s) shown, {len(outcome.dropped)} dropped, "
        f"{len(outcome.conflicts)} conflict(s)",
    }
    return _store(user, outcome, trace, pinned=pinned, started=started)


def _store(
    user: AbstractBaseUser,
    outcome: AskOutcome,
    trace: dict[str, Any],
    *,
    pinned: Document | None,
    started: float,
) -> AskOutcome:
    outcome.elapsed_ms = (time.perf_counter() - started) * 1000
    trace["code_version"] = code_version()
    trace["elapsed_ms"] = round(outcome.elapsed_ms, 3)
    row = AskTrace.objects.create(
        user=user,
        question=outcome.question,
        pinned_document=pinned,
        decision=str(outcome.decision),
        answerer=outcome.answerer,
        answer=outcome.as_dict(),
        trace=trace,
        code_version=trace["code_version"][:64],
        elapsed_ms=outcome.elapsed_ms,
    )
    outcome.trace_id = row.pk
    return outcome


# --- permalinks ----------------------------------------------------------------------------------


def _claim_from(data: dict[str, Any]) -> Claim:
    return Claim(
        text=data.get("text", ""),
        support=tuple(
            Support(version_id=int(s["version_id"]), quoted_span=s["quoted_span"])
            for s in data.get("support", [])
        ),
    )


def _verdict_from(data: dict[str, Any]) -> ClaimVerdict:
    return ClaimVerdict(
        claim=_claim_from(data.get("claim", {})),
        passed=bool(data.get("passed")),
        step=data.get("step", ""),
        reason=data.get("reason", ""),
        entailment_score=data.get("entailment_score"),
        entailment_scorer=data.get("entailment_scorer", ""),
    )


def _shown_claim_from(data: dict[str, Any]) -> ShownClaim:
    return ShownClaim(
        text=data["text"],
        support=tuple(
            ShownSupport(
                version_id=s["version_id"],
                version_number=s["version_number"],
                document_id=s["document_id"],
                document_title=s["document_title"],
                kind=s["kind"],
                trust_tier=s["trust_tier"],
                quoted_span=s["quoted_span"],
                start=s["start"],
                end=s["end"],
                segments=tuple((seg["text"], bool(seg["highlighted"])) for seg in s["segments"]),
                evidence_url=s["evidence_url"],
                version_created_at=s["version_created_at"],
            )
            for s in data.get("support", [])
        ),
    )


def outcome_from_trace(trace: AskTrace) -> AskOutcome:
    """The outcome exactly as stored (for permalinks): nothing is re-run or re-read."""
    answer = trace.answer or {}
    pack_items = {
        item["passage_id"]: item for item in (trace.trace or {}).get("pack", {}).get("items", [])
    }
    withheld_ids = (trace.trace or {}).get("withheld_passage_ids", [])
    return AskOutcome(
        question=answer.get("question", trace.question),
        decision=Decision(answer.get("decision", trace.decision)),
        answerer=answer.get("answerer", trace.answerer),
        claims=[_shown_claim_from(c) for c in answer.get("claims", [])],
        dropped=[_verdict_from(v) for v in answer.get("dropped", [])],
        withheld=[PackItem(**pack_items[pid]) for pid in withheld_ids if pid in pack_items],
        clarifying_questions=list(answer.get("clarifying_questions", [])),
        conflicts=list(answer.get("conflicts", [])),
        message=answer.get("message", ""),
        error=answer.get("error", ""),
        notes=list(answer.get("notes", [])),
        trace_id=trace.pk,
        elapsed_ms=trace.elapsed_ms,
    )


# --- replay --------------------------------------------------------------------------------------


class RecordedScorer:
    """An entailment scorer that answers with the scores a trace recorded, by claim text, so
    replaying an LLM-judged trace never calls the model again. A claim with no recorded
    score raises EntailmentUnavailable (the gate then fails it closed, and replay reports
    the changed verdict)."""

    def __init__(self, name: str, scores: dict[str, float]):
        self.name = name
        self._scores = scores

    def score(self, premise: str, hypothesis: str) -> float:
        from retrieval.entailment import EntailmentUnavailable
        from retrieval.gate import normalise

        for text, value in self._scores.items():
            if normalise(text) == hypothesis:
                return value
        raise EntailmentUnavailable("no score was recorded for this claim")


def _list_difference(name: str, before: Sequence[Any], after: Sequence[Any]) -> list[str]:
    if list(before) == list(after):
        return []
    for rank, (a, b) in enumerate(zip(before, after, strict=False), start=1):
        if a != b:
            return [f"{name} differs at rank {rank}: {a} → {b}"]
    return [f"{name} length differs: {len(before)} → {len(after)}"]


def _replay_scorer(stored: dict[str, Any]) -> Any:
    name = stored.get("settings", {}).get("entailment", "none")
    if name == "llm-judge":
        scores = {
            g["claim"]["text"]: g["entailment_score"]
            for g in stored.get("gate", [])
            if g.get("entailment_score") is not None
        }
        return RecordedScorer(stored.get("manifests", {}).get("entailment", name), scores)
    from retrieval.entailment import EntailmentUnavailable, get_entailment_scorer

    try:
        return get_entailment_scorer(name)
    except EntailmentUnavailable:
        return None


def replay(trace: AskTrace) -> list[str]:
    """Re-run the deterministic stages of a stored ask and list every difference, in words.
    Empty means the same pipeline decisions. Never calls an answerer or a remote judge."""
    stored = trace.trace or {}
    settings_used = stored.get("settings", {})
    differences: list[str] = []
    if stored.get("schema_version") != TRACE_SCHEMA:
        return [
            f"trace schema {stored.get('schema_version')} cannot be replayed "
            f"by schema {TRACE_SCHEMA}"
        ]
    user = trace.user
    pinned_id = stored.get("pinned_document_id")
    pinned = pinnable(user, pinned_id) if pinned_id is not None else None
    if "search" not in stored:  # the stored ask stopped before search: pinned note unavailable
        if pinned is not None:
            differences.append(f"pinned note {pinned_id} is now available")
        return differences
    if pinned_id is not None and pinned is None:
        differences.append(f"pinned note {pinned_id} is no longer available")
        return differences
    stage = front(
        user=user,
        question=trace.question,
        pinned=pinned,
        mode=settings_used.get("mode", "hybrid"),
        rerank=settings_used.get("rerank", settings.LODE_RERANK),
        max_items=settings_used.get("max_items", settings.LODE_ASK_MAX_ITEMS),
        max_chars=settings_used.get("max_chars", settings.LODE_ASK_MAX_CHARS),
    )
    now = search_trace(stage.result)
    before = stored["search"]
    if now["parsed"] != before.get("parsed"):
        differences.append(f"parsed query differs: {before.get('parsed')} → {now['parsed']}")
    if now["error"] != before.get("error", ""):
        differences.append(f"search error differs: {before.get('error')!r} → {now['error']!r}")
    if now["rerank"] != before.get("rerank"):
        differences.append(f"reranker differs: {before.get('rerank')} → {now['rerank']}")
    if now["degraded"] != before.get("degraded", []):
        differences.append(
            f"search degradation differs: {before.get('degraded')} → {now['degraded']}"
        )
    manifest = stored.get("manifests", {}).get("embedding", "")
    if manifest and _embedding_manifest(settings_used.get("mode", "hybrid")) not in ("", manifest):
        differences.append(
            f"embedding manifest differs: {manifest} → "
            f"{_embedding_manifest(settings_used.get('mode', 'hybrid'))}"
        )
    differences += _list_difference("fused list", before.get("fused", []), now["fused"])
    differences += _list_difference("reranked list", before.get("reranked", []), now["reranked"])

    pack_before = stored.get("pack", {})
    pack_now = stage.pack.as_dict()
    ids_before = [i["passage_id"] for i in pack_before.get("items", [])]
    ids_now = [i["passage_id"] for i in pack_now["items"]]
    if ids_before != ids_now:
        differences += ["pack differs: " + d for d in _list_difference("item", ids_before, ids_now)]
    elif pack_before.get("items") != pack_now["items"]:
        differences.append("pack differs: same passages, different item fields")
    if pack_before.get("dropped", []) != pack_now["dropped"]:
        differences.append(
            f"pack dropped list differs: {len(pack_before.get('dropped', []))} → "
            f"{len(pack_now['dropped'])} dropped"
        )
    pre_before = stored.get("pre_decision", {})
    pre_now = stage.pre.as_dict()
    if pre_before.get("decision") != pre_now["decision"]:
        differences.append(
            "decision before answering differs: "
            f"{pre_before.get('decision')} → {pre_now['decision']}"
        )
    elif pre_before.get("clarifying_questions", []) != pre_now["clarifying_questions"]:
        differences.append("clarifying questions differ")

    draft = stored.get("draft")
    if draft is None or stored.get("model", {}).get("error"):
        return differences  # the stored run never reached the gate: nothing more to compare
    claims = [_claim_from(c) for c in draft.get("claims", [])]
    version_ids = [int(v) for v in draft.get("sent_versions", [])]
    bodies = dict(
        Version.objects.filter(pk__in=version_ids, document__owner_id=user.pk).values_list(
            "pk", "body"
        )
    )
    missing = sorted(set(version_ids) - set(bodies))
    if missing:
        differences.append(f"sent versions no longer stored: {missing}")
    from retrieval.gate import run_gate

    scorer = _replay_scorer(stored) if claims else None
    verdicts = run_gate(claims, bodies, scorer=scorer)
    gate_before = stored.get("gate", [])
    for i, verdict in enumerate(verdicts, start=1):
        old = gate_before[i - 1] if i - 1 < len(gate_before) else None
        if old is None:
            differences.append(f"gate verdict for claim {i} is new")
            continue
        if (old.get("passed"), old.get("step")) != (verdict.passed, verdict.step):
            differences.append(
                f"gate verdict for claim {i} changed: "
                f"{_verdict_words(old.get('passed'), old.get('step'))} → "
                f"{_verdict_words(verdict.passed, verdict.step)} ({verdict.reason})"
            )
    if len(gate_before) > len(verdicts):
        differences.append(f"gate verdicts: {len(gate_before)} stored, {len(verdicts)} now")

    shown, _ = show_claims(verdicts, user=user)
    conflicts = conflicts_for(shown, stage.pack, user) if shown else []
    decision, _ = decide_after_gate(shown, conflicts)
    stored_decision = stored.get("decision", {}).get("decision")
    if stored_decision != str(decision):
        differences.append(f"final decision differs: {stored_decision} → {decision}")
    before_subjects = [c["subject"] for c in (trace.answer or {}).get("conflicts", [])]
    if before_subjects != [c["subject"] for c in conflicts]:
        differences.append(
            f"conflicts differ: {before_subjects} → {[c['subject'] for c in conflicts]}"
        )
    return differences


def _verdict_words(passed: Any, step: Any) -> str:
    return f"passed at {step}" if passed else f"dropped at {step}"
