"""The data that flows through `ask(q)` (DESIGN.md "The two pipelines"), in one place so every
stage module speaks the same types:

    search hits → EvidencePack (pack.py) → Decision (decision.py)
    → egress plan + log (egress.py, redaction.py) → Answerer (answerers.py, llm.py)
    → AnswerDraft of Claims → faithfulness gate (gate.py, entailment.py) → ClaimVerdicts
    → AskOutcome (ask.py; stored as an AskTrace whose trace JSON trace.py writes and reads)

Everything here is plain data: `as_dict` writes a type's JSON and `from_dict` reads it back,
so a trace can store it and `lode_trace replay` can compare it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any, Self

from retrieval import links
from retrieval.highlight import Segment, as_segments


class Decision(StrEnum):
    ANSWER = "ANSWER"
    ABSTAIN_NO_EVIDENCE = "ABSTAIN_NO_EVIDENCE"
    ASK_CLARIFYING = "ASK_CLARIFYING"
    ANSWER_WITH_CONFLICTS = "ANSWER_WITH_CONFLICTS"


ABSTAIN_MESSAGE = "Your notes don't answer this."


# --- the answer schema: all a model is asked for ------------------------------------------


@dataclass(frozen=True)
class Support:
    """A verbatim span of one stored version that a claim rests on."""

    version_id: int
    quoted_span: str


@dataclass(frozen=True)
class Claim:
    """One factual claim and the spans it rests on. No confidence: the gate decides."""

    text: str
    support: tuple[Support, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, "support": [asdict(s) for s in self.support]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The claim `as_dict` wrote (a missing text reads as empty: the gate then fails it)."""
        return cls(
            text=data.get("text", ""),
            support=tuple(
                Support(version_id=int(s["version_id"]), quoted_span=s["quoted_span"])
                for s in data.get("support", [])
            ),
        )


# The JSON schema answerers ask a model to fill (OpenAI `response_format` json_schema).
ANSWER_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["claims"],
    "properties": {
        "claims": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["text", "support"],
                "properties": {
                    "text": {"type": "string"},
                    "support": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["version_id", "quoted_span"],
                            "properties": {
                                "version_id": {"type": "integer"},
                                "quoted_span": {"type": "string"},
                            },
                        },
                    },
                },
            },
        }
    },
}


# --- the evidence pack -----------------------------------------------------------------------


@dataclass(frozen=True)
class PackItem:
    """One passage of evidence, pinned to its version, with its own range in that version.

    `parent_start`/`parent_end` is the block it belongs to (small-to-big context); several
    items may share one parent block, which egress sends once
    (`retrieval.answer.pack.egress_blocks`).
    """

    passage_id: int
    document_id: int
    version_id: int
    version_number: int
    document_title: str
    kind: str  # notes.Document.Kind value
    trust_tier: str  # notes.TrustTier value
    text: str
    start: int  # code points in the version body
    end: int
    start_line: int
    end_line: int
    parent_start: int
    parent_end: int
    version_created_at: str  # ISO-8601; the age of an external snapshot is shown from it
    no_egress: bool = False
    pinned: bool = False  # "ask about this note": pinned ahead of retrieval, uncapped
    rank: int = 0  # 1-based position in the search ranking (0 for pinned items)
    score: float = 0.0
    score_name: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The item `as_dict` wrote; keys this version does not know are ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


@dataclass
class EvidencePack:
    """The ordered evidence an answerer may use. Order is stable and documented in
    pack.py; `dropped` records what was left out and why (near-duplicate, budget)."""

    items: list[PackItem] = field(default_factory=list)
    max_items: int = 0
    max_chars: int = 0
    # [{"passage_id", "reason"}] — reason is "near-duplicate of <id>" or "over budget".
    dropped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def chars(self) -> int:
        return sum(len(item.text) for item in self.items)

    def as_dict(self) -> dict[str, Any]:
        return {
            "items": [item.as_dict() for item in self.items],
            "max_items": self.max_items,
            "max_chars": self.max_chars,
            "dropped": list(self.dropped),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            items=[PackItem.from_dict(item) for item in data.get("items", [])],
            max_items=data.get("max_items", 0),
            max_chars=data.get("max_chars", 0),
            dropped=list(data.get("dropped", [])),
        )


# --- what an answerer returns ------------------------------------------------------------------


@dataclass
class AnswerDraft:
    """An answerer's output before the gate. `error` set means the answerer failed (timeout,
    HTTP error, malformed or truncated JSON): nothing of it may be shown as verified.
    `request`/`response` are what went over the wire (redacted), for the trace."""

    answerer: str
    claims: list[Claim] = field(default_factory=list)
    error: str = ""
    request: dict[str, Any] | None = None
    response: dict[str, Any] | str | None = None
    # The versions the answerer was actually shown, {version_id: body}: the gate's
    # verbatim check resolves spans only against these (withheld content is absent).
    sent_versions: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClaimVerdict:
    """The gate's result for one claim: `passed`, and for a failure the step that failed it
    ("verbatim", "coupling", "entailment") and why, in words."""

    claim: Claim
    passed: bool
    step: str  # the last step run: "verbatim" | "coupling" | "entailment"
    reason: str = ""
    entailment_score: float | None = None
    entailment_scorer: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim.as_dict(),
            "passed": self.passed,
            "step": self.step,
            "reason": self.reason,
            "entailment_score": self.entailment_score,
            "entailment_scorer": self.entailment_scorer,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            claim=Claim.from_dict(data.get("claim", {})),
            passed=bool(data.get("passed")),
            step=data.get("step", ""),
            reason=data.get("reason", ""),
            entailment_score=data.get("entailment_score"),
            entailment_scorer=data.get("entailment_scorer", ""),
        )


# --- what the answer page and API show -------------------------------------------------------


@dataclass(frozen=True)
class ShownSupport:
    """A verified span as displayed: where it sits in its pinned version, the text around it
    as highlight segments ((text, highlighted) pairs, the span highlighted; rendered escaped
    inside <mark>), and the verified-opening link of the passage containing it."""

    version_id: int
    version_number: int
    document_id: int
    document_title: str
    kind: str
    trust_tier: str
    quoted_span: str
    start: int  # code points in the version body (where the span was found)
    end: int
    segments: tuple[tuple[str, bool], ...]
    evidence_url: str  # "" when no passage of the version contains the span
    version_created_at: str  # ISO-8601 (the age of an external is shown from it)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["segments"] = [{"text": t, "highlighted": h} for t, h in self.segments]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        values = {f.name: data[f.name] for f in fields(cls) if f.name != "segments"}
        segments = tuple((seg["text"], bool(seg["highlighted"])) for seg in data["segments"])
        return cls(**values, segments=segments)

    @property
    def display_segments(self) -> list[Segment]:
        """The segments as the pages render them (templates/partials.html#segments)."""
        return as_segments(self.segments)

    @property
    def version_url(self) -> str:
        """The page of the cited version: a note version or an external's snapshot."""
        return links.version_url(
            kind=self.kind, document_id=self.document_id, version_id=self.version_id
        )


@dataclass(frozen=True)
class ShownClaim:
    text: str
    support: tuple[ShownSupport, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, "support": [s.as_dict() for s in self.support]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            text=data["text"],
            support=tuple(ShownSupport.from_dict(s) for s in data.get("support", [])),
        )


@dataclass
class AskOutcome:
    """The result of one ask: the decision, the claims that survived the gate (each with its
    verified spans), what was dropped and why, what was withheld from egress, and the id of
    the stored trace (the permalink)."""

    question: str
    decision: Decision
    answerer: str
    claims: list[ShownClaim] = field(default_factory=list)
    dropped: list[ClaimVerdict] = field(default_factory=list)
    # Documents present in the evidence but withheld from cloud synthesis (no-egress).
    withheld: list[PackItem] = field(default_factory=list)
    clarifying_questions: list[str] = field(default_factory=list)
    # ANSWER_WITH_CONFLICTS: [{"subject", "values": [{"value", "trust_tier", "claim" …}]}]
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""  # the abstention / clarification / failure text shown to the user
    error: str = ""  # the answerer failed (nothing shown as verified)
    notes: list[str] = field(default_factory=list)  # degraded search, pinned note, …
    trace_id: int | None = None
    elapsed_ms: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "decision": str(self.decision),
            "answerer": self.answerer,
            "claims": [c.as_dict() for c in self.claims],
            "dropped": [v.as_dict() for v in self.dropped],
            "withheld": [
                {
                    "document_id": i.document_id,
                    "version_id": i.version_id,
                    "document_title": i.document_title,
                }
                for i in self.withheld
            ],
            "clarifying_questions": list(self.clarifying_questions),
            "conflicts": list(self.conflicts),
            "message": self.message,
            "error": self.error,
            "notes": list(self.notes),
            "trace_id": self.trace_id,
        }
