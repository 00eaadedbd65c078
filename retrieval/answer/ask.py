"""The ask pipeline, orchestrated (DESIGN.md "The two pipelines"):

    search → EvidencePack (pack.py) → decision before answering (decision.py)
    → egress plan, once (egress.py: what may leave, redacted) → answerer (answerers.py)
    → faithfulness gate (gate.py, entailment.py) → verified spans shown in context
    (display.py) → decision after the gate (abstain / conflicts / answer)
    → trace stored (trace.py, an AskTrace row)

`ask()` always stores an AskTrace and returns its id in `outcome.trace_id`: the trace is the
flight recorder (seeds/lighthouse-spec.md "Trace"), the permalink, and what
`replay.replay()` re-runs. `display.outcome_from_trace()` rebuilds the stored outcome for a
permalink without running anything.

Egress is decided here, once per ask: when the answerer is remote, `plan_egress` splits the
pack (no-egress documents withheld and listed on the answer) and redacts what may be sent;
the answerer gets that plan and sends only it. A remote entailment judge gets the same plan
(made at the gate if the answerer was local): it is only asked about claims whose cited
versions the plan cleared; any other claim needing entailment is dropped, fail closed.

Failure states, all stored like any other answer:
* the pinned note is not the user's live note → ABSTAIN_NO_EVIDENCE with `error` set; the
  wording is the same for someone else's note and a missing one (ids leak nothing);
* the question cannot be searched (a bad filter) → ASK_CLARIFYING with the parser's message
  and, as its one choice, the question without its filters;
* the answerer failed (timeout, HTTP error, malformed JSON, or it raised) →
  ABSTAIN_NO_EVIDENCE with `error` set and a message saying so: nothing is shown as verified.
  The decision stays ABSTAIN_NO_EVIDENCE (no claim survived), and `error` tells the page it
  was a failure, not an honest "your notes don't answer this".

Every ABSTAIN_NO_EVIDENCE after a search (before answering, after the gate, or an answerer
failure) stores the closest passages on the outcome (`decision.closest_items`,
`display.closest_passages`), so the page and the permalink show them, labelled as not
answering; ASK_CLARIFYING stores its suggestions as choices (`outcome.clarifying_choices`).

With ANSWER_WITH_CONFLICTS the claims are ordered by trust tier (your notes first; stable
otherwise; `retrieval.trust.tier_order`) and each conflict lists its values the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.utils import timezone

from notes.models import Document
from retrieval.answer.answer_shape import SHAPE_RULES_VERSION, shape_problem
from retrieval.answer.answerers import Answerer, get_answerer
from retrieval.answer.decision import (
    ANSWERER_FAILED,
    PreDecision,
    closest_items,
    decide_after_gate,
    decide_before_answer,
    query_error_choices,
)
from retrieval.answer.display import (
    add_best_match,
    closest_passages,
    conflicts_for,
    show_claims,
)
from retrieval.answer.egress import EgressPlan, plan_egress
from retrieval.answer.entailment import (
    EntailmentScorer,
    EntailmentUnavailable,
    get_entailment_scorer,
)
from retrieval.answer.gate import (
    check_claim,
    judged_not_an_answer,
    relevance_judge_failed,
    relevance_unavailable,
    relevance_verdict,
    shape_verdict,
    version_labels,
)
from retrieval.answer.llm import ChatClient
from retrieval.answer.pack import build_pack
from retrieval.answer.plan_refine import refined_plan
from retrieval.answer.relevance.candidate import Candidate, candidate_for
from retrieval.answer.relevance.egress_floor import egress_floor, item_relevance
from retrieval.answer.relevance.model import FALLBACK_MODEL, RelevanceUnavailable, load_model
from retrieval.answer.relevance.rarity import passage_idf
from retrieval.answer.relevance.scoring import score_pairs, threshold_of
from retrieval.answer.relevance.section_rule import SECTION_RULE_VERSION, section_answers
from retrieval.answer.tools import ToolSession, fetched_passages, gather
from retrieval.answer.trace import (
    Trace,
    TraceDecision,
    TraceDraft,
    TraceManifests,
    TraceModel,
    TraceSearch,
    TraceSettings,
    code_version,
)
from retrieval.answer.types import (
    AnswerDraft,
    AskOutcome,
    Claim,
    ClaimVerdict,
    Decision,
    EvidencePack,
    PackItem,
)
from retrieval.eligibility import Audience, audience_documents, audience_for
from retrieval.models import AskTrace, Passage
from retrieval.plan.enough import enough_for
from retrieval.plan.narrowing import without_narrowing_words
from retrieval.plan.plan import RetrievalPlan, plan_for
from retrieval.plan.plan import search_hits as plan_search_hits
from retrieval.plan.question import question_profile
from retrieval.search.pipeline import MAX_LIMIT, SearchResult, search
from retrieval.text.normalise import nfc_collapsed
from retrieval.trust import tier_order

logger = logging.getLogger("lode.ask")

PINNED_UNAVAILABLE = (
    "That note cannot be asked about: it does not exist, is not yours, or was deleted."
)
SEARCH_FAILED = "The question could not be searched: {error}"
WITHHELD_FROM_JUDGE = "the claim cites a document withheld from cloud synthesis"


# --- the deterministic front half ---------------------------------------------------------------


@dataclass
class Front:
    """What parse → search → pack → decision produced, the part `replay` re-runs."""

    result: SearchResult
    pack: EvidencePack
    pre: PreDecision
    search_limit: int
    # The question as the evidence is checked against it: without the words an applied
    # narrowing consumed ("in May 2024", "#ops"; `without_narrowing_words`), since the
    # narrowed documents meet them. The question itself when nothing was narrowed.
    focus: str = ""


def search_limit(max_items: int) -> int:
    """How many hits to ask search for without a plan: twice the pack's item budget (room for
    dedup), ≥ 20 (`retrieval.plan.plan.search_hits`)."""
    return plan_search_hits(max_items)


# How many more hits search is asked for when a plan narrows: the narrowed documents' passages
# must be found among them before the cut.
NARROWED_WIDER = 4


def narrowed_hits(result: SearchResult, plan: RetrievalPlan, limit: int) -> None:
    """Keep in `result` only the hits from the documents `plan` narrows to (the direct hits cut
    to `limit`, the passages links added kept), ranks renumbered. When none of them is there,
    the hits stay as search found them (cut to `limit`) and the plan says it fell back."""
    narrowing = plan.narrowing
    allowed = narrowing.document_ids or frozenset()
    direct = [h for h in result.hits if h.via is None]
    linked = [h for h in result.hits if h.via is not None]
    kept = [h for h in direct if h.passage.document_id in allowed]
    if kept:
        narrowing.applied = True
        direct = kept[:limit]
        linked = [h for h in linked if h.passage.document_id in allowed]
    else:
        narrowing.applied = False
        note = "None of the passages found is in the narrowed notes: answered without narrowing."
        narrowing.fallback = f"{narrowing.fallback} {note}".strip()
        direct = direct[:limit]
    result.hits = [replace(hit, rank=i) for i, hit in enumerate(direct + linked, start=1)]


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


def pinnable_documents(audience: Audience) -> QuerySet[Document]:
    """The documents that may be pinned for "ask about this note": live documents with a head
    version (the head's passages are what gets pinned) in the audience's spaces. The one
    rule, used by the ask form, the answer page and `ask()` itself."""
    return audience_documents(audience).filter(deleted_at__isnull=True).exclude(head=None)


def pinnable(audience: Audience, document_id: int) -> Document | None:
    """The pinnable document `document_id`, or None (missing, in a space outside the
    audience, deleted: all read the same, so ids leak nothing)."""
    return pinnable_documents(audience).filter(pk=document_id).first()


def front(
    *,
    user: AbstractBaseUser,
    audience: Audience,
    question: str,
    pinned: Document | None,
    mode: str,
    rerank: str,
    max_items: int,
    max_chars: int,
    follow_links: bool | None = None,
    fetched: Sequence[Passage] = (),
    plan: RetrievalPlan | None = None,
) -> Front:
    """Parse and search `question`, pack the evidence (the pinned note's passages first) and
    decide whether to answer at all: the deterministic stages, run again by replay.

    `follow_links` is search's (None: the graph discipline rule decides): passages graph
    expansion adds are hits like the others, so they enter the pack in their trust-ranked
    place and the answerer may quote them; the gate verifies those quotes like any other.

    With a `plan`, its search budget, its links decision and its narrowing apply (the hits
    kept to the narrowed documents, `narrowed_hits`); without one (a trace stored before
    plans), the defaults and `follow_links`."""
    limit = plan.budget.search_hits if plan is not None else search_limit(max_items)
    if plan is not None:
        follow_links = plan.search_follow_links
    narrowing = plan is not None and plan.narrowing.active
    result = search(
        user=user,
        audience=audience,
        query=question,
        mode=mode,
        rerank=rerank,
        limit=min(limit * NARROWED_WIDER, MAX_LIMIT) if narrowing else limit,
        follow_links=follow_links,
    )
    if plan is not None and narrowing and not result.error:
        narrowed_hits(result, plan, limit)
    focus = without_narrowing_words(question, plan.narrowing) if plan else question
    passages = pinned_passages(pinned) if pinned is not None else []
    # Pages fetched for this ask (snapshots already stored) are evidence like a pinned note.
    passages += list(fetched)
    pack = build_pack(result.hits, pinned=passages, max_items=max_items, max_chars=max_chars)
    if result.error:
        # Nothing was searched, so there are no passages to offer: only the question without
        # the filter that failed (kept on the pinned note, if one was pinned).
        pinned_id = pinned.pk if pinned is not None else None
        pre = PreDecision(
            Decision.ASK_CLARIFYING,
            reason="query error",
            message=SEARCH_FAILED.format(error=result.error),
            clarifying_questions=[
                "Could you rephrase the question, or fix the filter the message names?"
            ],
            choices=[
                replace(choice, pinned_document_id=pinned_id)
                for choice in query_error_choices(question)
            ],
        )
    else:
        pre = decide_before_answer(focus, pack, parsed=result.parsed)
    return Front(result=result, pack=pack, pre=pre, search_limit=limit, focus=focus)


def embedding_manifest(mode: str) -> str:
    """The active embedding manifest key, "" for a lexical ask (or when there is none)."""
    if mode == "lexical":
        return ""
    try:
        from retrieval.index.vectors import active_manifest_key  # loads the vector store

        return active_manifest_key()
    except Exception as exc:  # a trace must never fail the ask
        logger.warning("no embedding manifest for the trace: %s", exc)
        return ""


# --- the gate, behind the egress plan -----------------------------------------------------------


class WithheldFromJudge:
    """Stands in for a remote judge on a claim citing a version the egress plan withheld:
    the premise would be withheld text, so it is never sent and the claim fails closed."""

    remote = False

    def __init__(self, name: str):
        self.name = name

    def score(self, premise: str, hypothesis: str) -> float:
        raise EntailmentUnavailable(WITHHELD_FROM_JUDGE)


def entailment_scorer(notes: list[str], user: AbstractBaseUser) -> EntailmentScorer | None:
    """The configured scorer (a remote one's egress rows name `user`), or None with a note
    saying why when it cannot even be built."""
    try:
        return get_entailment_scorer(user=user)
    except EntailmentUnavailable as exc:
        notes.append(f"Entailment check unavailable: {exc}.")
        return None


def scorer_name(scorer: EntailmentScorer | None) -> str:
    return scorer.name if scorer is not None else "none"


def gate_claims(
    claims: list[Claim],
    sent_versions: dict[int, str],
    *,
    scorer: EntailmentScorer | None,
    egress: EgressPlan | None,
    question: str,
    pack: EvidencePack,
    audience: Audience,
    notes: list[str],
) -> list[ClaimVerdict]:
    """The gate over `claims`, one verdict each, in order: the faithfulness checks (verbatim,
    coupling, entailment), then relevance for the claims that passed them (`relevance_step`).
    A remote scorer is only given a claim whose cited versions `egress` cleared (no plan
    clears nothing). Notes for the answer page (a degraded relevance check) go to `notes`."""
    verdicts = []
    labels = version_labels(pack.items)
    for claim in claims:
        use = scorer
        cited = [support.version_id for support in claim.support]
        if scorer is not None and scorer.remote and (egress is None or not egress.clears(cited)):
            use = WithheldFromJudge(scorer.name)
        _cite(use, claim, pack)
        verdicts.append(check_claim(claim, sent_versions, scorer=use, labels=labels))
    judge = scorer if isinstance(scorer, RelevanceJudge) else None
    return relevance_step(
        verdicts,
        question=question,
        pack=pack,
        sent_versions=sent_versions,
        audience=audience,
        judge=judge,
        egress=egress,
        notes=notes,
    )


@runtime_checkable
class RelevanceJudge(Protocol):
    """An entailment scorer that can also say whether a claim answers a question (the LLM
    judge; replay's recorded stand-in). `remote` ones see only egress-cleared claims."""

    name: str
    remote: bool

    def answers_question(self, question: str, claim: str) -> bool: ...


def claim_candidate(claim: Claim, pack: EvidencePack, sent_versions: dict[int, str]) -> Candidate:
    """The relevance scorer's view of a claim: its text, and the title, heading path and
    search rank of the pack item its first locatable quote sits in (pinned items rank 0; a
    quote outside every item ranks after the whole pack)."""
    best: tuple[tuple[int, int], PackItem] | None = None
    for support in claim.support:
        body = sent_versions.get(support.version_id, "")
        at = body.find(support.quoted_span) if support.quoted_span else -1
        for item in pack.items:
            if item.version_id != support.version_id:
                continue
            inside = at >= 0 and item.start <= at < item.end
            key = (0 if inside else 1, item.rank)
            if best is None or key < best[0]:
                best = (key, item)
    if best is None:
        return Candidate(text=claim.text, rank=len(pack.items) + 1)
    return candidate_for(claim.text, best[1])


def relevance_step(
    verdicts: list[ClaimVerdict],
    *,
    question: str,
    pack: EvidencePack,
    sent_versions: dict[int, str],
    audience: Audience,
    judge: RelevanceJudge | None,
    egress: EgressPlan | None,
    notes: list[str],
) -> list[ClaimVerdict]:
    """Step 4 of the gate over the verdicts that passed 1–3: one batched relevance scoring
    (`retrieval.answer.relevance.score_pairs`, words weighed by their rarity in the
    passages of the audience's spaces), each claim kept or dropped by
    `gate.relevance_verdict`; then, with an LLM judge, the judge asked about each claim
    still standing whose cited versions `egress` cleared (a claim from a withheld version
    is decided by the local scorer alone: its text must not leave). Unreadable weights drop
    every such claim (fail closed); a dead embedding model switches to the model fitted
    without it and says so in `notes`."""
    passing = [i for i, verdict in enumerate(verdicts) if verdict.passed]
    if not passing:
        return verdicts
    out = list(verdicts)
    try:
        model = load_model()
    except RelevanceUnavailable as exc:
        notes.append(f"The relevance check is unavailable ({exc}): no claim could be shown.")
        for i in passing:
            out[i] = relevance_unavailable(out[i], str(exc))
        return out
    profile = question_profile(question)
    idf = passage_idf(audience, profile)
    candidates = [claim_candidate(out[i].claim, pack, sent_versions) for i in passing]
    scored = score_pairs(question, candidates, idf=idf, model=model)
    if scored.note:
        notes.append(scored.note)
    label = scored.model if scored.model == FALLBACK_MODEL else ""
    for i, score, candidate in zip(passing, scored.scores, candidates, strict=True):
        out[i] = relevance_verdict(
            out[i],
            score,
            scored.threshold,
            model=label,
            section_match=section_answers(profile, candidate),
        )
        out[i] = shape_verdict(out[i], shape_problem(question, candidate, profile))
    if judge is not None:
        for i in passing:
            out[i] = _judge_relevance(out[i], question, judge, egress, pack)
    return out


def _cite(scorer: object, claim: Claim, pack: EvidencePack) -> None:
    """Tell a judge that logs egress (`LLMJudge.citing`) which versions the requests about
    `claim` quote from: one pack item per cited version, with the characters of its quoted
    spans (what the premise carries), so the egress row lists exactly what went."""
    citing = getattr(scorer, "citing", None)
    if citing is None:
        return
    chars: dict[int, int] = {}
    for support in claim.support:
        chars[support.version_id] = chars.get(support.version_id, 0) + len(
            nfc_collapsed(support.quoted_span)
        )
    items = {}
    for item in pack.items:
        if item.version_id in chars:
            items.setdefault(item.version_id, item)
    citing(list(items.values()), chars)


def _judge_relevance(
    verdict: ClaimVerdict,
    question: str,
    judge: RelevanceJudge,
    egress: EgressPlan | None,
    pack: EvidencePack,
) -> ClaimVerdict:
    if not verdict.passed:
        return verdict
    cited = [support.version_id for support in verdict.claim.support]
    if judge.remote and (egress is None or not egress.clears(cited)):
        return verdict
    _cite(judge, verdict.claim, pack)
    try:
        answers = judge.answers_question(question, nfc_collapsed(verdict.claim.text))
    except EntailmentUnavailable as exc:
        return relevance_judge_failed(verdict, judge.name, str(exc))
    except Exception as exc:  # fail closed on anything a backend throws
        logger.warning("relevance judge %s failed: %r", judge.name, exc)
        return relevance_judge_failed(verdict, judge.name, type(exc).__name__)
    return verdict if answers else judged_not_an_answer(verdict, judge.name)


# --- ask ---------------------------------------------------------------------------------------


def ask(
    *,
    user: AbstractBaseUser,
    question: str,
    pinned_document_id: int | None = None,
    answerer: Answerer | None = None,
    mode: str = "hybrid",
    space_id: int | None = None,
    follow_links: bool | None = None,
    fetch_urls: Sequence[str] = (),
) -> AskOutcome:
    """Answer `question` from the documents of the user's spaces, verified; always stores a
    trace. With `space_id` only that space's documents are evidence (a shared answer never
    quotes the asker's private notes) and the stored answer belongs to the space, so its
    members may open it; raises `eligibility.NoAccess` when the user is not a member.

    `answerer` defaults to `retrieval.answer.answerers.get_answerer()` (a chat model when
    `LODE_LLM_BASE_URL` is set, else the offline extractive answerer).

    `follow_links`: None lets the graph discipline rule decide whether search
    follows links from the top hits; True always, False never. The trace records the
    choice and what expansion added (`Trace.expansion`).

    `fetch_urls` are pages the user asked to answer from; with `LODE_ASK_TOOLS` a chat
    answerer may also call tools (`retrieval.answer.tools`). Either way each page is stored
    as a snapshot before search, and its passages join the pack like a pinned note's.
    """
    started = time.perf_counter()
    # A page the user asked to answer from is evidence, not words to search for.
    for url in fetch_urls:
        question = " ".join(question.replace(url, " ").split()) or question
    audience = audience_for(user.pk, space_id=space_id)
    max_items, max_chars = settings.LODE_ASK_MAX_ITEMS, settings.LODE_ASK_MAX_CHARS
    rerank = settings.LODE_RERANK
    trace = Trace(
        question=question,
        pinned_document_id=pinned_document_id,
        settings=TraceSettings(
            mode=mode,
            rerank=rerank,
            entailment=settings.LODE_ENTAILMENT,
            max_items=max_items,
            max_chars=max_chars,
            llm_model=settings.LODE_LLM_MODEL,
            follow_links=follow_links,
        ),
    )
    outcome = AskOutcome(question=question, decision=Decision.ABSTAIN_NO_EVIDENCE, answerer="")
    store = _Store(
        user=user,
        audience=audience,
        space_id=space_id,
        outcome=outcome,
        trace=trace,
        started=started,
    )

    if pinned_document_id is not None:
        store.pinned = pinnable(audience, pinned_document_id)
        if store.pinned is None:
            outcome.error = outcome.message = PINNED_UNAVAILABLE
            return store.save("pinned note unavailable")
        outcome.notes.append(f"Asked about “{store.pinned.title}”: its passages come first.")

    answerer = answerer if answerer is not None else get_answerer()
    plan = make_plan(
        question,
        audience=audience,
        user=user,
        answerer=answerer,
        mode=mode,
        follow_links=follow_links,
        max_items=max_items,
        max_chars=max_chars,
    )
    trace.plan = plan
    fetched = _fetch_for_ask(user, audience, question, answerer, fetch_urls, trace, outcome)
    stage = front(
        user=user,
        audience=audience,
        question=question,
        pinned=store.pinned,
        fetched=fetched,
        mode=mode,
        rerank=rerank,
        max_items=max_items,
        max_chars=max_chars,
        follow_links=follow_links,
        plan=plan,
    )
    outcome.notes.extend(stage.result.degraded)
    if plan.narrowing.fallback:
        outcome.notes.append(plan.narrowing.fallback)
    store.pack, store.words = stage.pack, list(stage.pre.content_words)
    manifests = _record_front(trace, stage, mode)

    answerer = answerer if answerer is not None else get_answerer()
    outcome.answerer = answerer.name
    trace.settings.answerer, trace.settings.answerer_remote = answerer.name, answerer.remote
    if stage.pre.decision is not None:
        outcome.decision = stage.pre.decision
        outcome.message = stage.pre.message
        outcome.clarifying_questions = list(stage.pre.clarifying_questions)
        outcome.clarifying_choices = list(stage.pre.choices)
        trace.model = TraceModel(remote=answerer.remote)
        return store.save(stage.pre.reason)

    egress = (
        needed_egress(stage.pack, question, audience, outcome.notes) if answerer.remote else None
    )
    outcome.withheld = list(egress.withheld) if egress is not None else []
    trace.withheld_passage_ids = [item.passage_id for item in outcome.withheld]
    # A local answerer weighs words, so it reads the question as the evidence is checked
    # (`Front.focus`); a model reads "in May 2024" for what it is and gets the question.
    asked = question if answerer.remote else stage.focus
    draft = _draft(answerer, asked, stage.pack, user=user, egress=egress)
    trace.model = TraceModel(
        remote=answerer.remote, request=draft.request, response=draft.response, error=draft.error
    )
    trace.draft = TraceDraft(claims=list(draft.claims), sent_versions=sorted(draft.sent_versions))
    if draft.error:
        outcome.error = draft.error
        outcome.message = ANSWERER_FAILED.format(error=draft.error)
        return store.save("answerer failed")

    scorer = entailment_scorer(outcome.notes, user) if draft.claims else None
    if scorer is not None and scorer.remote and egress is None:
        egress = plan_egress(stage.pack, question=question)  # the judge's plan: made once
    manifests.entailment = scorer_name(scorer)
    manifests.relevance = relevance_manifest() if draft.claims else ""
    verdicts = gate_claims(
        draft.claims,
        dict(draft.sent_versions),
        scorer=scorer,
        egress=egress,
        question=stage.focus,
        pack=stage.pack,
        audience=audience,
        notes=outcome.notes,
    )
    trace.gate = verdicts
    _show(outcome, verdicts, stage.pack, audience)
    if outcome.claims:
        shown = [(c.text, {s.document_id for s in c.support}) for c in outcome.claims]
        plan.enough_met, plan.enough_why = enough_for(plan.intent, shown)
    return store.save(
        f"{len(outcome.claims)} claim(s) shown, {len(outcome.dropped)} dropped, "
        f"{len(outcome.conflicts)} conflict(s)"
    )


def make_plan(
    question: str,
    *,
    audience: Audience,
    user: AbstractBaseUser,
    answerer: Answerer,
    mode: str,
    follow_links: bool | None,
    max_items: int,
    max_chars: int,
) -> RetrievalPlan:
    """The retrieval plan for `question`: the rules' (`retrieval.plan`), read against the
    site's local date, then refined by the chat model when the answerer is one and
    `LODE_PLAN_REFINE` is on."""
    plan = plan_for(
        question,
        audience,
        today=timezone.localdate(),
        mode=mode,
        follow_links=follow_links,
        max_items=max_items,
        max_chars=max_chars,
        seconds=settings.LODE_ASK_BUDGET_SECONDS,
    )
    client = getattr(answerer, "client", None)
    refine = settings.LODE_PLAN_REFINE and answerer.remote and isinstance(client, ChatClient)
    if refine and client.configured:
        plan = refined_plan(plan, question, client=client, user=user, audience=audience)
    return plan


def _fetch_for_ask(
    user: AbstractBaseUser,
    audience: Audience,
    question: str,
    answerer: Answerer,
    fetch_urls: Sequence[str],
    trace: Trace,
    outcome: AskOutcome,
) -> list[Passage]:
    """Run the ask's tool calls — the user's `fetch_urls`, then the chat model's own when
    `LODE_ASK_TOOLS` is on — recording them in the trace; the stored snapshots' passages."""
    client = getattr(answerer, "client", None)
    model_tools = settings.LODE_ASK_TOOLS and answerer.remote and isinstance(client, ChatClient)
    if not fetch_urls and not model_tools:
        return []
    session = ToolSession(user)
    for url in fetch_urls:
        session.run("fetch_url", {"url": url})
    if model_tools:
        outcome.notes.extend(gather(client, question, session))
    trace.tools = session.trace()
    outcome.notes.extend(
        f"Not fetched: {call.reason}" for call in session.calls if call.outcome == "refused"
    )
    outcome.fetched_version_ids = session.snapshot_ids
    return fetched_passages(session.snapshot_ids, audience)


def relevance_manifest() -> str:
    """The relevance scorer's version and the threshold in force, for the trace ("" when the
    weights cannot be read: the gate then says why for each claim)."""
    try:
        model = load_model()
    except RelevanceUnavailable:
        return ""
    return (
        f"{model.version} threshold {threshold_of(model.full):.4g} shape {SHAPE_RULES_VERSION}"
        f" sections {SECTION_RULE_VERSION}"
    )


def needed_egress(
    pack: EvidencePack, question: str, audience: Audience, notes: list[str]
) -> EgressPlan:
    """The egress plan for a remote answerer: only pack items whose relevance reaches the
    floor, best first within `LODE_EGRESS_MAX_CHARS` (`plan_egress`). Weights that cannot be
    read send nothing (fail closed) and say so in `notes`; what was not sent is said too."""
    try:
        scores = item_relevance(question, pack.items, audience=audience)
        floor = egress_floor()
    except RelevanceUnavailable as exc:
        notes.append(f"Nothing was sent to the model: the relevance check is unavailable ({exc}).")
        scores, floor = {}, 1.0
    plan = plan_egress(
        pack,
        question=question,
        relevance=scores,
        floor=floor,
        max_chars=settings.LODE_EGRESS_MAX_CHARS,
    )
    if plan.not_sent:
        documents = {item.document_id for item, _ in plan.not_sent} - {
            item.document_id for item in plan.sendable
        }
        notes.append(
            f"{len(plan.not_sent)} passage(s) were not sent to the model (below the relevance "
            f"floor or over the egress budget); {len(documents)} document(s) not sent at all."
        )
    return plan


def _record_front(trace: Trace, stage: Front, mode: str) -> TraceManifests:
    """Record the front half in `trace`; the manifests are returned for the gate to finish."""
    trace.settings.search_limit = stage.search_limit
    trace.search = TraceSearch.from_result(stage.result)
    if stage.result.expansion is not None:
        trace.expansion = stage.result.expansion.as_dict()
    # A snapshot, not the live pack: the answerer is handed `stage.pack` and may change it,
    # and the trace must keep the pack as built (replay compares it, the permalink reads
    # the withheld items from it).
    trace.pack = EvidencePack.from_dict(stage.pack.as_dict())
    trace.pre_decision = stage.pre
    trace.manifests = TraceManifests(
        embedding=embedding_manifest(mode), reranker=stage.result.rerank
    )
    return trace.manifests


def _draft(
    answerer: Answerer,
    question: str,
    pack: EvidencePack,
    *,
    user: AbstractBaseUser,
    egress: EgressPlan | None,
) -> AnswerDraft:
    """The answerer's draft; an answerer that raises fails like one that reports an error."""
    try:
        return answerer.answer(question, pack, user=user, egress=egress)
    except Exception as exc:  # an answerer bug must fail like an answerer error, not a 500
        logger.exception("answerer %s raised", answerer.name)
        return AnswerDraft(answerer=answerer.name, error=f"{type(exc).__name__}: {exc}")


def _show(
    outcome: AskOutcome, verdicts: list[ClaimVerdict], pack: EvidencePack, audience: Audience
) -> None:
    """Fill in what the page shows from the gate's verdicts, and the final decision."""
    outcome.claims, unshown = show_claims(verdicts, audience=audience)
    outcome.dropped = [v for v in verdicts if not v.passed] + unshown
    outcome.conflicts = conflicts_for(outcome.claims, pack, audience) if outcome.claims else []
    outcome.decision, outcome.message = decide_after_gate(outcome.claims, outcome.conflicts)
    add_best_match(outcome, verdicts, audience=audience)
    if outcome.decision == Decision.ANSWER_WITH_CONFLICTS:
        # The higher trust tier leads: claims resting on your notes before externals (stable,
        # so the answerer's order holds within a tier).
        outcome.claims.sort(key=lambda c: min(tier_order(s.trust_tier) for s in c.support))


@dataclass
class _Store:
    """Where an ask ends, whichever stage it stopped at: the outcome and trace stored."""

    user: AbstractBaseUser
    audience: Audience
    # The space asked in (None: across all the user's spaces, private to them).
    space_id: int | None
    outcome: AskOutcome
    trace: Trace
    started: float
    pinned: Document | None = None
    # The evidence pack and the question's content words, once search has run: an
    # abstention shows the closest passages from them.
    pack: EvidencePack | None = None
    words: list[str] = field(default_factory=list)

    def save(self, reason: str) -> AskOutcome:
        """Store the trace with the final decision and `reason`; the outcome gets its id.
        Every abstention after a search (early, after the gate, or an answerer failure)
        carries the closest passages, so the answer page and its permalink show them."""
        outcome, trace = self.outcome, self.trace
        if outcome.decision == Decision.ABSTAIN_NO_EVIDENCE and self.pack is not None:
            outcome.closest = closest_passages(
                closest_items(self.pack, self.words), self.words, audience=self.audience
            )
        outcome.elapsed_ms = (time.perf_counter() - self.started) * 1000
        trace.decision = TraceDecision(
            decision=str(outcome.decision), reason=reason, tier=str(outcome.tier or "")
        )
        trace.code_version = code_version()
        trace.elapsed_ms = round(outcome.elapsed_ms, 3)
        row = AskTrace.objects.create(
            user=self.user,
            space_id=self.space_id,
            question=outcome.question,
            pinned_document=self.pinned,
            decision=str(outcome.decision),
            answerer=outcome.answerer,
            answer=outcome.as_dict(),
            trace=trace.to_dict(),
            code_version=trace.code_version[:64],
            elapsed_ms=outcome.elapsed_ms,
        )
        outcome.trace_id = row.pk
        return outcome
