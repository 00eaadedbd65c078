"""Replay a stored ask (`manage.py lode_trace replay ID`): re-run its deterministic stages
from the trace and say, in words, everything that came out differently.

Re-run: the retrieval plan (made again from the stored question, read against the stored
plan's date, with a model's stored refinement applied again, never the model), parse, search
with the stored mode and reranker, the evidence pack with the stored
budgets, the decision before answering, the gate over the *stored* draft claims against the
stored sent versions (the answerer is never called again; an LLM judge's recorded scores are
reused through `RecordedScorer`, a local cross-encoder is run again) followed by the relevance
step (`ask.relevance_step`: the local scorer run again, an LLM judge's recorded "no"s reused
through `RecordedRelevanceJudge`), and the final decision.
An empty list means the same pipeline decisions. Each stage's comparison is its own small
function below, in pipeline order.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from notes.models import Document, Version
from retrieval.answer.ask import (
    Front,
    embedding_manifest,
    front,
    pinnable,
    relevance_manifest,
    relevance_step,
)
from retrieval.answer.decision import decide_after_gate
from retrieval.answer.display import conflicts_for, outcome_from_trace, show_claims
from retrieval.answer.entailment import (
    EntailmentScorer,
    EntailmentUnavailable,
    get_entailment_scorer,
)
from retrieval.answer.gate import (
    JUDGE_SAYS_NOT_AN_ANSWER,
    STEP_RELEVANCE,
    run_gate,
    version_labels,
)
from retrieval.answer.plan_refine import with_refinement
from retrieval.answer.tools import fetched_passages
from retrieval.answer.trace import TRACE_SCHEMA, Trace, TraceSearch
from retrieval.answer.types import ClaimVerdict, EvidencePack
from retrieval.eligibility import Audience, audience_for
from retrieval.models import AskTrace
from retrieval.plan.plan import RetrievalPlan, plan_for
from retrieval.plan.words import plan_differences
from retrieval.text.normalise import nfc_collapsed


class RecordedScorer:
    """An entailment scorer that answers with the scores a trace recorded, by claim text, so
    replaying an LLM-judged trace never calls the model again. A claim with no recorded
    score raises EntailmentUnavailable (the gate then fails it closed, and replay reports
    the changed verdict)."""

    remote = False

    def __init__(self, name: str, scores: dict[str, float]):
        self.name = name
        self._scores = scores

    def score(self, premise: str, hypothesis: str) -> float:
        for text, value in self._scores.items():
            if nfc_collapsed(text) == hypothesis:  # the gate's hypothesis form
                return value
        raise EntailmentUnavailable("no score was recorded for this claim")


class RecordedRelevanceJudge:
    """The LLM judge's relevance answers as the trace recorded them: "no" for a claim the
    stored gate dropped on the judge's word, "yes" otherwise (never the model again)."""

    remote = False

    def __init__(self, name: str, stored: list[ClaimVerdict]):
        self.name = name
        self._said_no = {
            nfc_collapsed(v.claim.text)
            for v in stored
            if v.step == STEP_RELEVANCE and v.reason.startswith(JUDGE_SAYS_NOT_AN_ANSWER)
        }

    def answers_question(self, question: str, claim: str) -> bool:
        return claim not in self._said_no


def _replay_relevance_judge(trace: Trace) -> RecordedRelevanceJudge | None:
    name = trace.settings.entailment if trace.settings.entailment is not None else "none"
    if name != "llm-judge":
        return None
    return RecordedRelevanceJudge(name, trace.gate or [])


def replay(row: AskTrace) -> list[str]:
    """Re-run the deterministic stages of a stored ask and list every difference, in words.
    Empty means the same pipeline decisions. Never calls an answerer or a remote judge."""
    trace = Trace.from_row(row)
    if trace.schema_version != TRACE_SCHEMA:
        return [f"trace schema {trace.schema_version} cannot be replayed by schema {TRACE_SCHEMA}"]
    pinned, stop = _pinned_now(trace_audience(row), trace)
    if stop is not None:
        return stop
    plan = _plan_again(row, trace)
    stage = _front_again(row, trace, pinned, plan)
    differences = []
    if trace.plan is not None and plan is not None:
        differences += plan_differences(trace.plan, plan)
    differences += _search_differences(trace, stage)
    differences += _pack_differences(trace.pack or EvidencePack(), stage.pack)
    differences += _pre_decision_differences(trace, stage)
    if not trace.reached_gate:
        return differences  # the stored run never reached the gate: nothing more to compare
    return differences + _gate_differences(row, trace, stage)


def trace_audience(row: AskTrace) -> Audience:
    """Whose documents a stored ask may be replayed over: its space's, or (asked across all
    the asker's spaces) those of every space the asker belongs to now."""
    if row.space_id is not None:
        return Audience(user_id=row.user_id, space_ids=frozenset({row.space_id}))
    return audience_for(row.user_id)


def _pinned_now(audience: Audience, trace: Trace) -> tuple[Document | None, list[str] | None]:
    """The pinned document as it is now, and — when replay must stop here — its findings: a
    stored ask that stopped before search (its pinned note was unavailable) only compares
    that availability; a pinned note that is gone now cannot be searched again."""
    pinned_id = trace.pinned_document_id
    pinned = pinnable(audience, pinned_id) if pinned_id is not None else None
    if trace.search is None:
        return pinned, [f"pinned note {pinned_id} is now available"] if pinned else []
    if pinned_id is not None and pinned is None:
        return None, [f"pinned note {pinned_id} is no longer available"]
    return pinned, None


def _plan_again(row: AskTrace, trace: Trace) -> RetrievalPlan | None:
    """The plan made again for the stored question, as of the stored plan's date, with the
    stored settings and the model's stored refinement; None for a trace without a plan."""
    stored = trace.plan
    if stored is None:
        return None
    used = trace.settings
    audience = trace_audience(row)
    plan = plan_for(
        row.question,
        audience,
        today=stored.today,
        mode=_mode(trace),
        follow_links=used.follow_links,
        max_items=used.max_items if used.max_items is not None else settings.LODE_ASK_MAX_ITEMS,
        max_chars=used.max_chars if used.max_chars is not None else settings.LODE_ASK_MAX_CHARS,
        seconds=stored.budget.seconds,
    )
    if stored.refinement is not None:
        plan = with_refinement(
            plan, stored.refinement, row.question, model=stored.refined_by, audience=audience
        )
    return plan


def _front_again(
    row: AskTrace, trace: Trace, pinned: Document | None, plan: RetrievalPlan | None
) -> Front:
    """The front half re-run with the stored settings (this server's defaults for any the
    trace does not record) and the plan made again."""
    used = trace.settings
    return front(
        plan=plan,
        user=row.user,
        audience=trace_audience(row),
        question=row.question,
        pinned=pinned,
        mode=_mode(trace),
        rerank=used.rerank if used.rerank is not None else settings.LODE_RERANK,
        max_items=used.max_items if used.max_items is not None else settings.LODE_ASK_MAX_ITEMS,
        max_chars=used.max_chars if used.max_chars is not None else settings.LODE_ASK_MAX_CHARS,
        # The user's Follow links choice, when they made one (None: the rule decides again).
        follow_links=used.follow_links,
        # Pages fetched for the ask: their stored snapshots, never fetched again.
        fetched=fetched_passages(
            [call["snapshot_id"] for call in trace.tools or [] if call.get("snapshot_id")],
            trace_audience(row),
        ),
    )


def _mode(trace: Trace) -> str:
    return trace.settings.mode if trace.settings.mode is not None else "hybrid"


def _search_differences(trace: Trace, stage: Front) -> list[str]:
    before = trace.search or TraceSearch()
    now = TraceSearch.from_result(stage.result)
    out: list[str] = []
    if now.parsed != before.parsed:
        out.append(f"parsed query differs: {before.parsed} → {now.parsed}")
    if now.error != before.error:
        out.append(f"search error differs: {before.error!r} → {now.error!r}")
    if now.rerank != before.rerank:
        out.append(f"reranker differs: {before.rerank} → {now.rerank}")
    if now.degraded != before.degraded:
        out.append(f"search degradation differs: {before.degraded} → {now.degraded}")
    out += _manifest_differences(trace)
    out += _list_difference("fused list", before.fused, now.fused)
    out += _list_difference("reranked list", before.reranked, now.reranked)
    return out


def _manifest_differences(trace: Trace) -> list[str]:
    """The embedding model, when the stored ask recorded one and one is active now; the
    relevance scorer and threshold, when the stored ask recorded them (a difference explains
    a relevance verdict that changed on replay)."""
    out: list[str] = []
    stored = trace.manifests.embedding if trace.manifests else ""
    now = embedding_manifest(_mode(trace)) if stored else ""
    if stored and now not in ("", stored):
        out.append(f"embedding manifest differs: {stored} → {now}")
    stored_relevance = trace.manifests.relevance if trace.manifests else ""
    now_relevance = relevance_manifest() if stored_relevance else ""
    if stored_relevance and now_relevance != stored_relevance:
        out.append(f"relevance scorer differs: {stored_relevance} → {now_relevance or 'none'}")
    return out


def _pack_differences(before: EvidencePack, now: EvidencePack) -> list[str]:
    ids_before = [item.passage_id for item in before.items]
    ids_now = [item.passage_id for item in now.items]
    out: list[str] = []
    if ids_before != ids_now:
        out += ["pack differs: " + d for d in _list_difference("item", ids_before, ids_now)]
    elif before.items != now.items:
        out.append("pack differs: same passages, different item fields")
    if before.dropped != now.dropped:
        out.append(f"pack dropped list differs: {len(before.dropped)} → {len(now.dropped)} dropped")
    return out


def _pre_decision_differences(trace: Trace, stage: Front) -> list[str]:
    before = trace.pre_decision
    decision_before = str(before.decision) if before and before.decision else None
    decision_now = str(stage.pre.decision) if stage.pre.decision else None
    if decision_before != decision_now:
        return [f"decision before answering differs: {decision_before} → {decision_now}"]
    questions_before = before.clarifying_questions if before else []
    if questions_before != stage.pre.clarifying_questions:
        return ["clarifying questions differ"]
    return []


def _gate_differences(row: AskTrace, trace: Trace, stage: Front) -> list[str]:
    """The gate over the stored draft claims against the stored sent versions, then what it
    changes downstream: the final decision and the conflicts."""
    assert trace.draft is not None  # reached_gate
    claims = trace.draft.claims
    version_ids = trace.draft.sent_versions
    audience = trace_audience(row)
    bodies = dict(
        Version.objects.filter(
            pk__in=version_ids, document__space_id__in=audience.sorted_space_ids
        ).values_list("pk", "body")
    )
    out: list[str] = []
    missing = sorted(set(version_ids) - set(bodies))
    if missing:
        out.append(f"sent versions no longer stored: {missing}")
    pack = trace.pack if trace.pack is not None else stage.pack
    verdicts = run_gate(
        claims,
        bodies,
        scorer=_replay_scorer(trace) if claims else None,
        labels=version_labels(pack.items),
    )
    verdicts = relevance_step(
        verdicts,
        question=stage.focus or row.question,
        pack=pack,
        sent_versions=bodies,
        audience=audience,
        judge=_replay_relevance_judge(trace),
        egress=None,
        notes=[],
    )
    out += _verdict_differences(trace.gate or [], verdicts)

    shown, _ = show_claims(verdicts, audience=audience)
    conflicts = conflicts_for(shown, stage.pack, audience) if shown else []
    decision, _ = decide_after_gate(shown, conflicts)
    stored_decision = trace.decision.decision if trace.decision else None
    if stored_decision != str(decision):
        out.append(f"final decision differs: {stored_decision} → {decision}")
    subjects_before = [c["subject"] for c in outcome_from_trace(row).conflicts]
    subjects_now = [c["subject"] for c in conflicts]
    if subjects_before != subjects_now:
        out.append(f"conflicts differ: {subjects_before} → {subjects_now}")
    return out


def _verdict_differences(before: list[ClaimVerdict], now: list[ClaimVerdict]) -> list[str]:
    out: list[str] = []
    for i, verdict in enumerate(now, start=1):
        old = before[i - 1] if i - 1 < len(before) else None
        if old is None:
            out.append(f"gate verdict for claim {i} is new")
        elif (old.passed, old.step) != (verdict.passed, verdict.step):
            out.append(
                f"gate verdict for claim {i} changed: {_verdict_words(old)} → "
                f"{_verdict_words(verdict)} ({verdict.reason})"
            )
        elif old.shape_problem != verdict.shape_problem:
            out.append(
                f"gate verdict for claim {i}: answer shape "
                f"{old.shape_problem or 'none'!r} → {verdict.shape_problem or 'none'!r}"
            )
        elif old.section_match != verdict.section_match:
            out.append(
                f"gate verdict for claim {i}: section rule "
                f"{'held' if old.section_match else 'did not hold'} → "
                f"{'holds' if verdict.section_match else 'does not hold'}"
            )
    if len(before) > len(now):
        out.append(f"gate verdicts: {len(before)} stored, {len(now)} now")
    return out


def _replay_scorer(trace: Trace) -> EntailmentScorer | None:
    """The scorer the stored ask used: an LLM judge's recorded scores (never the model
    again), else the configured local backend run afresh (None if it cannot be built)."""
    name = trace.settings.entailment if trace.settings.entailment is not None else "none"
    if name == "llm-judge":
        recorded_as = trace.manifests.entailment if trace.manifests else name
        return RecordedScorer(recorded_as, trace.recorded_scores())
    try:
        return get_entailment_scorer(name)
    except EntailmentUnavailable:
        return None


def _list_difference(name: str, before: Sequence[object], after: Sequence[object]) -> list[str]:
    if list(before) == list(after):
        return []
    for rank, (a, b) in enumerate(zip(before, after, strict=False), start=1):
        if a != b:
            return [f"{name} differs at rank {rank}: {a} → {b}"]
    return [f"{name} length differs: {len(before)} → {len(after)}"]


def _verdict_words(verdict: ClaimVerdict) -> str:
    return f"passed at {verdict.step}" if verdict.passed else f"dropped at {verdict.step}"
