"""The ask trace: what one `ask()` decided at every stage, stored as `AskTrace.trace` (the
flight recorder, seeds/lighthouse-spec.md "Trace"; `lode_trace show|replay`).

`Trace` is the only code that knows the trace's JSON layout: `ask()` fills one in as the
stages run and stores `to_dict()`; the permalink (`display.outcome_from_trace`), `replay`, the
answer page and the command read rows back through `Trace.from_row`/`from_dict`. The layout
(schema 1) is the one lode has always stored, key for key, so rows already in a database
read back unchanged:

    schema_version, question, pinned_document_id,
    settings     {mode, rerank, entailment, max_items, max_chars, llm_model,
                  search_limit?, answerer?, answerer_remote?}
    plan?        RetrievalPlan.as_dict() (retrieval/plan/plan.py: rules_version, today,
                  intent, rule, fired, kind, shape, enough, legs, links, follow_links,
                  budget, narrowing, notes; refined_by, refined, refinement when a model
                  refined it)
    search?      {parsed, error, rerank, degraded, notes, lexical_candidates,
                  dense_candidates, elapsed_ms, candidates, fused, reranked}
    pack?        EvidencePack.as_dict()
    pre_decision?  PreDecision.as_dict()
    manifests?   {embedding, reranker, entailment}
    withheld_passage_ids?, model? {remote, request, response, error},
    draft?       {claims, sent_versions}, gate? [ClaimVerdict.as_dict()],
    decision?    {decision, reason, tier?},
    expansion?   {ran, rule, reason, follow_links, follow_inferred, seed_document_ids,
                  linked_document_ids, edges_followed, added [{passage_id, document_id,
                  via {seed_document_id, seed_title, seed_rank, edge_id, kind, direction,
                  inferred, tier, basis}}], elapsed_ms, notes}
    code_version, elapsed_ms

Some keys are written only when they hold something, so older traces write back unchanged:
`settings.follow_links` (only when the user chose), a pack item's `heading_path`, the
pre-decision's `choices` ({label, question, pinned_document_id}), a gate verdict's
`relevance_score`, `shape_problem` and `section_match`, and the decision's `tier`; absent, they
read as "expansion not recorded", "not scored", "no shape problem", "no section match" and
"no tier recorded".

A key marked `?` is absent when the ask stopped before that stage (a pinned note that is not
available stops before `search`; an answerer failure before `gate`), and replay reads that
absence as "not reached". Reading is forgiving — a missing key reads as its empty value — so a
partial or older row still opens.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Self

from django.conf import settings

from retrieval.answer.decision import PreDecision
from retrieval.answer.types import Claim, ClaimVerdict, EvidencePack
from retrieval.models import AskTrace
from retrieval.plan.plan import RetrievalPlan
from retrieval.search.fusion import LegHit
from retrieval.search.pipeline import Hit, SearchResult

TRACE_SCHEMA = 1


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


# --- the sections ------------------------------------------------------------------------------


@dataclass
class TraceSettings:
    """The settings the ask ran with. The last three are known only once search has run, so
    a trace that stopped earlier has none of them (None: the key is not stored)."""

    mode: str | None = None
    rerank: str | None = None
    entailment: str | None = None
    max_items: int | None = None
    max_chars: int | None = None
    llm_model: str | None = None
    search_limit: int | None = None
    answerer: str | None = None
    answerer_remote: bool | None = None
    # Graph expansion: the user's *Follow links* (True/False); None — the
    # discipline rule decided — is not stored, so older traces round-trip unchanged.
    follow_links: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        values = {
            "mode": self.mode,
            "rerank": self.rerank,
            "entailment": self.entailment,
            "max_items": self.max_items,
            "max_chars": self.max_chars,
            "llm_model": self.llm_model,
            "search_limit": self.search_limit,
            "answerer": self.answerer,
            "answerer_remote": self.answerer_remote,
            "follow_links": self.follow_links,
        }
        return {key: value for key, value in values.items() if value is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            mode=data.get("mode"),
            rerank=data.get("rerank"),
            entailment=data.get("entailment"),
            max_items=data.get("max_items"),
            max_chars=data.get("max_chars"),
            llm_model=data.get("llm_model"),
            search_limit=data.get("search_limit"),
            answerer=data.get("answerer"),
            answerer_remote=data.get("answerer_remote"),
            follow_links=data.get("follow_links"),
        )


def _leg(leg: LegHit | None) -> dict[str, Any] | None:
    if leg is None:
        return None
    return {"rank": leg.rank, "score": leg.score, "score_name": leg.score_name}


def candidate_dict(hit: Hit) -> dict[str, Any]:
    """One returned hit as the trace stores it: its legs' ranks and raw scores, RRF and fused
    score, exact matches and rerank score."""
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
    """The parsed query as the trace stores it (None when the question did not parse)."""
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


@dataclass
class TraceSearch:
    """The search stage: the parsed query; each leg's candidate count; for every hit search
    returned (up to `search_limit`), its lexical and dense rank and raw score, RRF and fused
    score, exact matches and rerank score (`candidates`); `fused`, those hits' passage ids in
    fused order (RRF + exact boosts, before rerank and trust rank); and `reranked`, the final
    order. The legs' full candidate lists (up to 256 each) are not stored: they would dwarf
    the rest of the trace, and the returned hits are what the pack is built from."""

    parsed: dict[str, Any] | None = None
    error: str = ""
    rerank: str | None = None
    degraded: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lexical_candidates: int = 0
    dense_candidates: int = 0
    elapsed_ms: float = 0.0
    candidates: list[dict[str, Any]] = field(default_factory=list)
    fused: list[int] = field(default_factory=list)
    reranked: list[int] = field(default_factory=list)

    @classmethod
    def from_result(cls, result: SearchResult) -> Self:
        fused = sorted(result.hits, key=lambda h: h.fused.sort_key())
        return cls(
            parsed=parsed_dict(result),
            error=result.error,
            rerank=result.rerank,
            degraded=list(result.degraded),
            notes=list(result.notes),
            lexical_candidates=result.lexical_candidates,
            dense_candidates=result.dense_candidates,
            elapsed_ms=round(result.elapsed_ms, 3),
            candidates=[candidate_dict(h) for h in result.hits],
            fused=[h.passage.pk for h in fused],
            reranked=[h.passage.pk for h in result.hits],
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "parsed": self.parsed,
            "error": self.error,
            "rerank": self.rerank,
            "degraded": list(self.degraded),
            "notes": list(self.notes),
            "lexical_candidates": self.lexical_candidates,
            "dense_candidates": self.dense_candidates,
            "elapsed_ms": self.elapsed_ms,
            "candidates": list(self.candidates),
            "fused": list(self.fused),
            "reranked": list(self.reranked),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            parsed=data.get("parsed"),
            error=data.get("error", ""),
            rerank=data.get("rerank"),
            degraded=list(data.get("degraded", [])),
            notes=list(data.get("notes", [])),
            lexical_candidates=data.get("lexical_candidates", 0),
            dense_candidates=data.get("dense_candidates", 0),
            elapsed_ms=data.get("elapsed_ms", 0.0),
            candidates=list(data.get("candidates", [])),
            fused=list(data.get("fused", [])),
            reranked=list(data.get("reranked", [])),
        )


@dataclass
class TraceManifests:
    """Which models the ask ran: the embedding manifest key ("" for lexical), the reranker,
    the entailment scorer ("not run" until claims reach the gate, "none" without one) and the
    relevance scorer with its threshold."""

    embedding: str = ""
    reranker: str = ""
    entailment: str = "not run"
    # The relevance scorer's version and the threshold in force ("" until claims reach the
    # gate; written only when set, so a trace stored before it round-trips unchanged).
    relevance: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = {
            "embedding": self.embedding,
            "reranker": self.reranker,
            "entailment": self.entailment,
        }
        if self.relevance:
            data["relevance"] = self.relevance
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            embedding=data.get("embedding", ""),
            reranker=data.get("reranker", ""),
            entailment=data.get("entailment", "not run"),
            relevance=data.get("relevance", ""),
        )


@dataclass
class TraceModel:
    """What went to and came back from the answerer (redacted), and its error if it failed."""

    remote: bool | None = None
    request: dict[str, Any] | None = None
    response: dict[str, Any] | str | None = None
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "remote": self.remote,
            "request": self.request,
            "response": self.response,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            remote=data.get("remote"),
            request=data.get("request"),
            response=data.get("response"),
            error=data.get("error", ""),
        )


@dataclass
class TraceDraft:
    """The answerer's claims before the gate, and the ids of the versions it was shown."""

    claims: list[Claim] = field(default_factory=list)
    sent_versions: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "claims": [c.as_dict() for c in self.claims],
            "sent_versions": list(self.sent_versions),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            claims=[Claim.from_dict(c) for c in data.get("claims", [])],
            sent_versions=[int(v) for v in data.get("sent_versions", [])],
        )


@dataclass
class TraceDecision:
    """The final decision and why, in words, and the answer's tier (`types.Tier`; "" when it
    has none, and in traces stored before tiers, which it is not written for)."""

    decision: str
    reason: str = ""
    tier: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = {"decision": self.decision, "reason": self.reason}
        if self.tier:
            data["tier"] = self.tier
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            decision=data.get("decision"), reason=data.get("reason", ""), tier=data.get("tier", "")
        )


# --- the trace ---------------------------------------------------------------------------------


@dataclass
class Trace:
    """One ask's trace. Sections left None were not reached and are not stored."""

    question: str = ""
    pinned_document_id: int | None = None
    settings: TraceSettings = field(default_factory=TraceSettings)
    # The retrieval plan made before search (absent from traces stored before plans, and
    # from an ask that stopped before planning: a pinned note that is not available).
    plan: RetrievalPlan | None = None
    search: TraceSearch | None = None
    pack: EvidencePack | None = None
    pre_decision: PreDecision | None = None
    manifests: TraceManifests | None = None
    withheld_passage_ids: list[int] | None = None
    model: TraceModel | None = None
    draft: TraceDraft | None = None
    gate: list[ClaimVerdict] | None = None
    decision: TraceDecision | None = None
    # Graph expansion: whether links were followed, the rule that decided, and
    # each passage added with its edge (`graph_expand.Expansion.as_dict`). Absent from
    # traces stored before it (and from an ask that stopped before search).
    expansion: dict[str, Any] | None = None
    # Tool calls made for this ask (`retrieval.answer.tools.ToolSession.trace`): each with
    # its redacted arguments, outcome and the snapshot it stored; replay reads those back.
    tools: list[dict[str, Any]] | None = None
    code_version: str = ""
    elapsed_ms: float = 0.0
    schema_version: int | None = TRACE_SCHEMA

    # --- what readers ask of a stored trace ---

    @property
    def answerer_offline(self) -> bool:
        """Whether the answer was produced on this machine (nothing sent to a model
        endpoint); unknown counts as not offline. Traces record it in the settings, and
        before that only in the model section."""
        remote = self.settings.answerer_remote
        if remote is None and self.model is not None:
            remote = self.model.remote
        return remote is False

    @property
    def reached_gate(self) -> bool:
        """Whether the stored run got past the answerer (a draft without an answerer error):
        only then are there gate verdicts to compare."""
        return self.draft is not None and not (self.model is not None and self.model.error)

    def expansion_via(self) -> dict[int, dict[str, Any]]:
        """{passage id: its `via` (the edge that led to it)} for each passage graph
        expansion added; empty for a trace without expansion."""
        added = (self.expansion or {}).get("added") or []
        return {
            int(row["passage_id"]): dict(row.get("via") or {})
            for row in added
            if isinstance(row, Mapping) and "passage_id" in row
        }

    def recorded_scores(self) -> dict[str, float]:
        """{claim text: entailment score} for every gate verdict that has one."""
        return {
            verdict.claim.text: verdict.entailment_score
            for verdict in self.gate or []
            if verdict.entailment_score is not None
        }

    # --- JSON ---

    def to_dict(self) -> dict[str, Any]:
        """The JSON stored in `AskTrace.trace` (the layout in the module docstring)."""
        data: dict[str, Any] = {
            "schema_version": self.schema_version,
            "question": self.question,
            "pinned_document_id": self.pinned_document_id,
            "settings": self.settings.to_dict(),
        }
        sections: dict[str, Any] = {
            "plan": self.plan.as_dict() if self.plan else None,
            "search": self.search.to_dict() if self.search else None,
            "pack": self.pack.as_dict() if self.pack else None,
            "pre_decision": self.pre_decision.as_dict() if self.pre_decision else None,
            "manifests": self.manifests.to_dict() if self.manifests else None,
            "withheld_passage_ids": self.withheld_passage_ids,
            "model": self.model.to_dict() if self.model else None,
            "draft": self.draft.to_dict() if self.draft else None,
            "gate": [v.as_dict() for v in self.gate] if self.gate is not None else None,
            "decision": self.decision.to_dict() if self.decision else None,
            "expansion": dict(self.expansion) if self.expansion is not None else None,
            "tools": list(self.tools) if self.tools is not None else None,
        }
        data.update({key: value for key, value in sections.items() if value is not None})
        data["code_version"] = self.code_version
        data["elapsed_ms"] = self.elapsed_ms
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """A stored trace; every section absent from `data` reads as not reached."""

        def section(key: str) -> Mapping[str, Any] | None:
            value = data.get(key)
            return value if isinstance(value, Mapping) else None

        search, pack, pre = section("search"), section("pack"), section("pre_decision")
        manifests, model, draft = section("manifests"), section("model"), section("draft")
        decision, gate = section("decision"), data.get("gate")
        expansion, plan = section("expansion"), section("plan")
        tools = data.get("tools")
        withheld = data.get("withheld_passage_ids")
        return cls(
            schema_version=data.get("schema_version"),
            question=data.get("question", ""),
            pinned_document_id=data.get("pinned_document_id"),
            settings=TraceSettings.from_dict(section("settings") or {}),
            plan=RetrievalPlan.from_dict(dict(plan)) if plan is not None else None,
            search=TraceSearch.from_dict(search) if search is not None else None,
            pack=EvidencePack.from_dict(pack) if pack is not None else None,
            pre_decision=PreDecision.from_dict(pre) if pre is not None else None,
            manifests=TraceManifests.from_dict(manifests) if manifests is not None else None,
            withheld_passage_ids=list(withheld) if withheld is not None else None,
            model=TraceModel.from_dict(model) if model is not None else None,
            draft=TraceDraft.from_dict(draft) if draft is not None else None,
            gate=[ClaimVerdict.from_dict(v) for v in gate] if gate is not None else None,
            decision=TraceDecision.from_dict(decision) if decision is not None else None,
            expansion=dict(expansion) if expansion is not None else None,
            tools=list(tools) if isinstance(tools, list) else None,
            code_version=data.get("code_version", ""),
            elapsed_ms=data.get("elapsed_ms", 0.0),
        )

    @classmethod
    def from_row(cls, row: AskTrace) -> Self:
        """The trace stored on `row` (a row without one reads as an empty trace)."""
        return cls.from_dict(row.trace if isinstance(row.trace, Mapping) else {})
