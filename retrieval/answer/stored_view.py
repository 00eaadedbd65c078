"""A stored answer as one reader may see it now (DESIGN.md invariant 14: a stored answer shows
a claim only while its reader may see every document it cites).

`read_stored_answer` is what the permalink page, `GET /api/ask/<id>`, a re-run's comparison
and the admin show: the stored outcome (`display.outcome_from_trace`, nothing re-run) with
every piece that names a document the reader may not see now replaced or left out. Which
documents that is comes from `eligibility.citable_for_user`, checked on every read (a note
moved out of the space, deleted or in the trash; the reader gone from the space; a new member
who never was in the destination):

* a verified claim, the best match, a dropped claim, a closest passage or a conflicting value
  citing such a document becomes `eligibility.NO_LONGER_VISIBLE` with nothing of its text,
  quote, title, link, version or scores (`hidden` set); a conflicting value that carries a
  hidden claim's text is hidden with it;
* withheld documents, graph-expansion rows (the added document or the link it came by) and
  the pinned note are left out;
* notes and reasons that name a hidden document's title (“Title”) are left out, and an
  *ask for a clearer question* whose evidence holds a hidden document has its suggestions
  drawn again from the evidence the reader may see (`decision.clarifying_questions`), so no
  title or word of it survives there.

`stale` says whether the notes the answer cites changed since (`cited_versions_changed`: a
cited version that is no longer its document's head, or is gone), over what the reader may
see of it; the page then offers to ask again (DESIGN.md invariant 13).

`trace_for_reader` is the admin's trace: all of it, or nothing when it names any document
(evidence pack, search candidates, the answerer's draft, the gate, graph expansion, the pinned
note) the reader may not see: the model's request and response hold the evidence text as one
blob that cannot be cut per document.

The public page of a published answer applies its own rule (`spaces.public.verified_claims`
over `eligibility.citable_in_public_link`): its reader is anonymous.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from notes.models import Document, Version
from retrieval.answer.decision import clarifying_choices, clarifying_questions
from retrieval.answer.display import outcome_from_trace
from retrieval.answer.trace import Trace
from retrieval.answer.types import (
    AskOutcome,
    Claim,
    ClaimVerdict,
    ClosestPassage,
    Decision,
    EvidencePack,
    ShownClaim,
)
from retrieval.eligibility import NO_LONGER_VISIBLE, Citable, citable_for_user
from retrieval.models import AskTrace, Passage

# What a graph-expansion reason says in place of one naming a hidden document.
HIDDEN_REASON = "it names a note no longer visible to you"


@dataclass(frozen=True)
class StoredAnswer:
    """A stored answer as one reader may see it: the outcome, the graph expansion as the
    page shows it, the pinned note (None when there is none or the reader may not see it)
    and how many claims, passages and values were hidden."""

    outcome: AskOutcome
    expansion: dict[str, Any] | None
    pinned_document: Document | None
    hidden: int
    # Some version the answer cites (and the reader may see) is no longer its document's head.
    stale: bool = False


# --- which documents a stored answer names -------------------------------------------------


def _expansion_ids(expansion: Mapping[str, Any] | None) -> list[object]:
    if not expansion:
        return []
    ids: list[object] = list(expansion.get("seed_document_ids") or [])
    ids += expansion.get("linked_document_ids") or []
    for row in expansion.get("added") or []:
        ids.append(row.get("document_id") if isinstance(row, Mapping) else None)
        via = row.get("via") if isinstance(row, Mapping) else None
        if via:
            ids.append(via.get("seed_document_id"))
    return ids


def _named_ids(
    outcome: AskOutcome, trace: Trace, row: AskTrace
) -> tuple[list[object], list[object]]:
    """(version ids, document ids) that the stored outcome and its pack name."""
    versions: list[object] = []
    documents: list[object] = [row.pinned_document_id] if row.pinned_document_id else []
    for claim in [*outcome.claims, *([outcome.best_match] if outcome.best_match else [])]:
        versions += [s.version_id for s in claim.support]
        documents += [s.document_id for s in claim.support]
    for verdict in outcome.dropped:
        versions += [s.version_id for s in verdict.claim.support]
    for item in [*outcome.withheld, *outcome.closest, *(trace.pack.items if trace.pack else [])]:
        versions.append(item.version_id)
        documents.append(item.document_id)
    for conflict in outcome.conflicts:
        for value in conflict.get("values") or []:
            versions.append(value.get("version_id"))
            documents.append(value.get("document_id"))
    documents += [c.pinned_document_id for c in outcome.clarifying_choices if c.pinned_document_id]
    documents += _expansion_ids(trace.expansion)
    return versions, documents


# --- hiding what the reader may not see ----------------------------------------------------


def _claim(claim: ShownClaim, citable: Citable) -> ShownClaim:
    supports = claim.support
    if citable.shows(
        versions=[s.version_id for s in supports], documents=[s.document_id for s in supports]
    ):
        return claim
    return ShownClaim(text=NO_LONGER_VISIBLE, support=(), hidden=True)


def _dropped(verdict: ClaimVerdict, citable: Citable) -> ClaimVerdict:
    if citable.shows(versions=[s.version_id for s in verdict.claim.support]):
        return verdict
    return ClaimVerdict(
        claim=Claim(text=NO_LONGER_VISIBLE, support=()),
        passed=False,
        step=verdict.step,
        reason=NO_LONGER_VISIBLE,
        hidden=True,
    )


def _closest(passage: ClosestPassage, citable: Citable) -> ClosestPassage:
    if citable.shows(versions=[passage.version_id], documents=[passage.document_id]):
        return passage
    return ClosestPassage(
        passage_id=0,
        document_id=0,
        version_id=0,
        version_number=0,
        document_title="",
        kind="",
        trust_tier="",
        heading_path=(),
        snippet=NO_LONGER_VISIBLE,
        evidence_url="",
        hidden=True,
    )


def _conflict_value(
    value: Mapping[str, Any], citable: Citable, hidden_claims: set[str]
) -> dict[str, Any]:
    shows = citable.shows(versions=[value.get("version_id")], documents=[value.get("document_id")])
    if shows and value.get("claim") not in hidden_claims:
        return dict(value)
    return {
        "hidden": True,
        "value": "",
        "statement": NO_LONGER_VISIBLE,
        "origin": value.get("origin", ""),
        "trust_tier": "",
        "segments": [],
        "evidence_url": "",
    }


def _names_any(text: str, titles: Iterable[str]) -> bool:
    """Whether `text` names one of `titles` the way lode's messages quote a title (“…”)."""
    return any(f"\u201c{title}\u201d" in text for title in titles)


def _hidden_titles(outcome: AskOutcome, trace: Trace, row: AskTrace, citable: Citable) -> set[str]:
    """The titles, as the stored answer names them, of documents the reader may not see."""
    titles: set[str] = set()
    for claim in [*outcome.claims, *([outcome.best_match] if outcome.best_match else [])]:
        for s in claim.support:
            if not citable.shows(versions=[s.version_id], documents=[s.document_id]):
                titles.add(s.document_title)
    for item in [*outcome.withheld, *outcome.closest, *(trace.pack.items if trace.pack else [])]:
        if not citable.shows(versions=[item.version_id], documents=[item.document_id]):
            titles.add(item.document_title)
    for conflict in outcome.conflicts:
        for value in conflict.get("values") or []:
            if not citable.shows(documents=[value.get("document_id")]):
                titles.add(str(value.get("document_title") or ""))
    for added in (trace.expansion or {}).get("added") or []:
        via = added.get("via") or {}
        if not citable.shows(documents=[added.get("document_id")]):
            titles.add(str(added.get("document_title") or ""))
        if via and not citable.shows(documents=[via.get("seed_document_id")]):
            titles.add(str(via.get("seed_title") or ""))
    pinned = row.pinned_document
    if pinned is not None and not citable.shows(documents=[pinned.pk]):
        titles.add(pinned.title)
    titles.discard("")
    return titles


def _expansion(
    expansion: Mapping[str, Any] | None, citable: Citable, titles: set[str]
) -> dict[str, Any] | None:
    if expansion is None:
        return None
    shown = dict(expansion)
    shown["seed_document_ids"] = [
        i for i in expansion.get("seed_document_ids") or [] if citable.shows(documents=[i])
    ]
    shown["linked_document_ids"] = [
        i for i in expansion.get("linked_document_ids") or [] if citable.shows(documents=[i])
    ]
    shown["added"] = [
        row
        for row in expansion.get("added") or []
        if isinstance(row, Mapping) and citable.shows(documents=_expansion_ids({"added": [row]}))
    ]
    if _names_any(str(expansion.get("reason", "")), titles):
        shown["reason"] = HIDDEN_REASON
    shown["notes"] = [n for n in expansion.get("notes") or [] if not _names_any(str(n), titles)]
    return shown


def _clarifying(outcome: AskOutcome, trace: Trace, citable: Citable) -> tuple[list[str], list[Any]]:
    """The suggestions of an ask for a clearer question, drawn again from the evidence the
    reader may see when the stored evidence holds a document they may not (they are drawn
    from the top documents' titles and words); unchanged otherwise."""
    pack = trace.pack or EvidencePack()
    readable = [
        item
        for item in pack.items
        if citable.shows(versions=[item.version_id], documents=[item.document_id])
    ]
    if outcome.decision != Decision.ASK_CLARIFYING or len(readable) == len(pack.items):
        return outcome.clarifying_questions, outcome.clarifying_choices
    visible = replace(pack, items=readable)
    words = trace.pre_decision.content_words if trace.pre_decision else []
    questions = clarifying_questions(outcome.question, visible, words)
    choices = clarifying_choices(outcome.question, visible) if outcome.clarifying_choices else []
    return questions, choices


def read_stored_answer(row: AskTrace, *, user_id: int | None) -> StoredAnswer:
    """The stored answer `row` as `user_id` may see it now (the module docstring). The
    caller has already checked that the user may open the answer at all
    (`eligibility.visible_answers`)."""
    outcome = outcome_from_trace(row)
    trace = Trace.from_row(row)
    versions, documents = _named_ids(outcome, trace, row)
    citable = citable_for_user(user_id, version_ids=versions, document_ids=documents)
    titles = _hidden_titles(outcome, trace, row, citable)
    claims = [_claim(c, citable) for c in outcome.claims]
    best_match = _claim(outcome.best_match, citable) if outcome.best_match else None
    hidden_claims = {c.text for c, s in zip(outcome.claims, claims, strict=True) if s.hidden}
    dropped = [_dropped(v, citable) for v in outcome.dropped]
    closest = [_closest(p, citable) for p in outcome.closest]
    conflicts = [
        {
            **conflict,
            "values": [
                _conflict_value(v, citable, hidden_claims) for v in conflict.get("values") or []
            ],
        }
        for conflict in outcome.conflicts
    ]
    questions, choices = _clarifying(outcome, trace, citable)
    shown = replace(
        outcome,
        claims=claims,
        best_match=best_match,
        dropped=dropped,
        closest=closest,
        conflicts=conflicts,
        withheld=[
            item
            for item in outcome.withheld
            if citable.shows(versions=[item.version_id], documents=[item.document_id])
        ],
        clarifying_questions=questions,
        clarifying_choices=[
            c
            for c in choices
            if c.pinned_document_id is None or citable.shows(documents=[c.pinned_document_id])
        ],
        notes=[n for n in outcome.notes if not _names_any(n, titles)],
    )
    hidden = (
        sum(c.hidden for c in claims)
        + bool(best_match is not None and best_match.hidden)
        + sum(v.hidden for v in dropped)
        + sum(p.hidden for p in closest)
        + sum(bool(v.get("hidden")) for c in conflicts for v in c["values"])
    )
    pinned = row.pinned_document
    if pinned is not None and not citable.shows(documents=[pinned.pk]):
        pinned = None
    return StoredAnswer(
        outcome=shown,
        expansion=_expansion(trace.expansion, citable, titles),
        pinned_document=pinned,
        hidden=hidden,
        stale=cited_versions_changed(cited_version_ids(shown)),
    )


# --- whether the cited notes changed since ---------------------------------------------------


def cited_version_ids(outcome: AskOutcome) -> set[int]:
    """The versions `outcome` quotes and its reader may see: its claims', its best match's
    and its conflicting values' (hidden ones name nothing)."""
    claims = [*outcome.claims, *([outcome.best_match] if outcome.best_match else [])]
    ids = {s.version_id for claim in claims if not claim.hidden for s in claim.support}
    for conflict in outcome.conflicts:
        for value in conflict.get("values") or []:
            if not value.get("hidden") and isinstance(value.get("version_id"), int):
                ids.add(value["version_id"])
    return ids


def cited_versions_changed(version_ids: Collection[int]) -> bool:
    """Whether any of `version_ids` is no longer the head of its document, or is gone: one
    query, bounded by the ids an answer quotes (a stored answer holds a bounded number)."""
    if not version_ids:
        return False
    heads = dict(Version.objects.filter(pk__in=version_ids).values_list("pk", "document__head_id"))
    return any(heads.get(pk) != pk for pk in version_ids)


# --- the admin's trace -----------------------------------------------------------------------


def trace_for_reader(row: AskTrace, *, user_id: int | None) -> dict[str, Any] | None:
    """The stored trace JSON of `row` when every document it names is one `user_id` may see
    now, else None (the module docstring says why it is all or nothing). A search candidate
    whose passage row is gone names a document nobody can check, so it counts as hidden."""
    trace = Trace.from_row(row)
    versions: list[object] = []
    documents: list[object] = [trace.pinned_document_id] if trace.pinned_document_id else []
    for item in trace.pack.items if trace.pack else []:
        versions.append(item.version_id)
        documents.append(item.document_id)
    if trace.draft is not None:
        versions += trace.draft.sent_versions
        versions += [s.version_id for c in trace.draft.claims for s in c.support]
    versions += [s.version_id for v in trace.gate or [] for s in v.claim.support]
    if trace.pre_decision is not None:
        documents += [c.pinned_document_id for c in trace.pre_decision.choices]
    documents += _expansion_ids(trace.expansion)
    passage_ids = {
        c.get("passage_id") for c in (trace.search.candidates if trace.search else [])
    } | set(trace.withheld_passage_ids or [])
    passages = dict(
        Passage.objects.filter(pk__in=[p for p in passage_ids if isinstance(p, int)]).values_list(
            "pk", "document_id"
        )
    )
    documents += [passages.get(p) for p in passage_ids]  # None: gone, never shown
    citable = citable_for_user(user_id, version_ids=versions, document_ids=documents)
    if not citable.shows(versions=versions, documents=documents):
        return None
    return row.trace if isinstance(row.trace, dict) else {}
