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


class Tier(StrEnum):
    """What the answer page leads with, in three honest tiers:

    * ANSWER — claims that passed every step of the gate (ANSWER, ANSWER_WITH_CONFLICTS);
    * BEST_MATCH — no claim passed, but a verified claim (verbatim, coupling or entailment
      held) dropped only at the relevance step is shown to be checked, never as an answer
      (`decision.best_match_verdict` chooses it);
    * NOT_IN_NOTES — nothing to show: the closest passages, and what the catalog holds.

    A question sent back for clarification and an answerer that failed have no tier."""

    ANSWER = "answer"
    BEST_MATCH = "best_match"
    NOT_IN_NOTES = "not_in_notes"


def tier_of(decision: str, *, error: str, has_best_match: bool) -> Tier | None:
    """The tier of an answer from what it recorded. An answer stored before tiers existed
    has no best match, so it reads as it was: answered → ANSWER, abstained → NOT_IN_NOTES."""
    if error:
        return None
    if decision in (Decision.ANSWER, Decision.ANSWER_WITH_CONFLICTS):
        return Tier.ANSWER
    if decision == Decision.ABSTAIN_NO_EVIDENCE:
        return Tier.BEST_MATCH if has_best_match else Tier.NOT_IN_NOTES
    return None


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
    # The passage's heading path without the entries that add no word to the document title
    # ("Failover", "Promote the replica"): the answerability decision and the extractive
    # answerer count it as the passage's text, and the closest passages show it.
    heading_path: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The item's JSON. `heading_path` is written only when there is one, so an item
        without headings (and every pack stored before the field existed) keeps its layout."""
        data = asdict(self)
        headings = data.pop("heading_path")
        if headings:
            data["heading_path"] = list(headings)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The item `as_dict` wrote; keys this version does not know are ignored."""
        names = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in names}
        values["heading_path"] = tuple(values.get("heading_path") or ())
        return cls(**values)


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
    ("verbatim", "coupling", "entailment", "relevance") and why, in words."""

    claim: Claim
    passed: bool
    step: str  # the last step run: "verbatim" | "coupling" | "entailment" | "relevance"
    reason: str = ""
    entailment_score: float | None = None
    entailment_scorer: str = ""
    # The relevance step's probability that the claim answers the question (None when the
    # claim never reached that step).
    relevance_score: float | None = None
    # Why the claim cannot answer by its shape (retrieval.answer.answer_shape), when that is
    # what dropped it at the relevance step; "" otherwise.
    shape_problem: str = ""
    # The section rule held at the relevance step (`relevance.section_rule.section_answers`:
    # a step of the section named for a procedure question), so the claim passed that step
    # whatever its score. A later half of the step (answer shape, an LLM judge) may still drop
    # it; the flag then says the rule held, and `passed`/`reason` say what dropped it.
    section_match: bool = False
    # Shown to a reader who may not see a document the claim cites: the claim and its
    # reason are replaced by `eligibility.NO_LONGER_VISIBLE` (never stored).
    hidden: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The verdict's JSON. `relevance_score`, `shape_problem`, `section_match` and
        `hidden` are written only when there is one, so verdicts stored before those steps
        keep their layout."""
        data: dict[str, Any] = {
            "claim": self.claim.as_dict(),
            "passed": self.passed,
            "step": self.step,
            "reason": self.reason,
            "entailment_score": self.entailment_score,
            "entailment_scorer": self.entailment_scorer,
        }
        if self.relevance_score is not None:
            data["relevance_score"] = self.relevance_score
        if self.shape_problem:
            data["shape_problem"] = self.shape_problem
        if self.section_match:
            data["section_match"] = True
        if self.hidden:
            data["hidden"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            claim=Claim.from_dict(data.get("claim", {})),
            passed=bool(data.get("passed")),
            step=data.get("step", ""),
            reason=data.get("reason", ""),
            entailment_score=data.get("entailment_score"),
            entailment_scorer=data.get("entailment_scorer", ""),
            relevance_score=data.get("relevance_score"),
            shape_problem=data.get("shape_problem", ""),
            section_match=bool(data.get("section_match", False)),
            hidden=bool(data.get("hidden", False)),
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
    # The headings above the span (the page shows them as a label over the quote), without
    # those that only repeat the document title; () when there are none.
    heading_path: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The support's JSON. `heading_path` is written only when there is one, so answers
        stored before the field existed read and write back unchanged."""
        data = asdict(self)
        data["segments"] = [{"text": t, "highlighted": h} for t, h in self.segments]
        headings = data.pop("heading_path")
        if headings:
            data["heading_path"] = list(headings)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        skip = ("segments", "heading_path")
        values = {f.name: data[f.name] for f in fields(cls) if f.name not in skip}
        segments = tuple((seg["text"], bool(seg["highlighted"])) for seg in data["segments"])
        headings = tuple(data.get("heading_path") or ())
        return cls(**values, segments=segments, heading_path=headings)

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
    """A verified claim as shown. `hidden`: its reader may not see a document it cites, so
    `text` is `eligibility.NO_LONGER_VISIBLE` and `support` is empty (never stored)."""

    text: str
    support: tuple[ShownSupport, ...]
    hidden: bool = False

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"text": self.text, "support": [s.as_dict() for s in self.support]}
        if self.hidden:
            data["hidden"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            text=data["text"],
            support=tuple(ShownSupport.from_dict(s) for s in data.get("support", [])),
            hidden=bool(data.get("hidden", False)),
        )


@dataclass(frozen=True)
class ClarifyingChoice:
    """An ASK_CLARIFYING suggestion the page offers as a button: `label` says what it does,
    `question` is the (rewritten) question asked when it is chosen, and
    `pinned_document_id`, when set, scopes it to that document ("ask about this note")."""

    label: str
    question: str
    pinned_document_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "question": self.question,
            "pinned_document_id": self.pinned_document_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        pinned = data.get("pinned_document_id")
        return cls(
            label=str(data.get("label", "")),
            question=str(data.get("question", "")),
            pinned_document_id=int(pinned) if pinned is not None else None,
        )


@dataclass(frozen=True)
class ClosestPassage:
    """A passage shown with an abstention: the evidence that came closest, which does *not*
    answer the question (the page says so). `snippet` is a short plain-text excerpt of the
    passage; `evidence_url` opens the passage re-verified ("" if it no longer exists).
    `hidden`: its reader may not see its document, so every id is 0, every text field empty
    but `snippet`, which is `eligibility.NO_LONGER_VISIBLE` (never stored)."""

    passage_id: int
    document_id: int
    version_id: int
    version_number: int
    document_title: str
    kind: str
    trust_tier: str
    heading_path: tuple[str, ...]
    snippet: str
    evidence_url: str
    hidden: bool = False

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["heading_path"] = list(self.heading_path)
        if not self.hidden:
            del data["hidden"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        skip = ("heading_path", "hidden")
        values = {f.name: data[f.name] for f in fields(cls) if f.name not in skip}
        return cls(
            **values,
            heading_path=tuple(data.get("heading_path") or ()),
            hidden=bool(data.get("hidden", False)),
        )

    @property
    def version_url(self) -> str:
        """The page of the version the passage belongs to."""
        return links.version_url(
            kind=self.kind, document_id=self.document_id, version_id=self.version_id
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
    # ASK_CLARIFYING: the suggestions as choices, each a rewritten question to ask.
    clarifying_choices: list[ClarifyingChoice] = field(default_factory=list)
    # ABSTAIN_NO_EVIDENCE: the passages that came closest (they do not answer the question).
    closest: list[ClosestPassage] = field(default_factory=list)
    # ANSWER_WITH_CONFLICTS: [{"subject", "values": [{"value", "trust_tier", "claim" …}]}]
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""  # the abstention / clarification / failure text shown to the user
    error: str = ""  # the answerer failed (nothing shown as verified)
    notes: list[str] = field(default_factory=list)  # degraded search, pinned note, …
    # Snapshots of pages fetched for this answer (by the user's request or a model's tool).
    fetched_version_ids: list[int] = field(default_factory=list)
    # ABSTAIN_NO_EVIDENCE: the verified claim shown as "Best match — check it" (`Tier`), or
    # None. It is also listed in `dropped`: it did not pass the gate.
    best_match: ShownClaim | None = None
    trace_id: int | None = None
    elapsed_ms: float = 0.0

    @property
    def tier(self) -> Tier | None:
        """What the page leads with (`Tier`), from the decision, the error and the best match."""
        return tier_of(
            str(self.decision), error=self.error, has_best_match=self.best_match is not None
        )

    def as_dict(self) -> dict[str, Any]:
        """The stored answer JSON. `clarifying_choices`, `closest` and `best_match` are
        written only when there are some, so answers stored before they existed keep their
        layout; `tier` is written for readers of the JSON (a reader derives it again)."""
        tier = self.tier
        data: dict[str, Any] = {
            "question": self.question,
            "decision": str(self.decision),
            "tier": str(tier) if tier is not None else None,
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
        if self.clarifying_choices:
            data["clarifying_choices"] = [c.as_dict() for c in self.clarifying_choices]
        if self.closest:
            data["closest"] = [c.as_dict() for c in self.closest]
        if self.fetched_version_ids:
            data["fetched_version_ids"] = list(self.fetched_version_ids)
        if self.best_match is not None:
            data["best_match"] = self.best_match.as_dict()
        return data
