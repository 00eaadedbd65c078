"""The answer page and "ask about this note".

    GET  /ask?q=...[&pinned=ID]   the page with the question filled in; runs nothing
    POST /ask                     runs the ask (CSRF), stores its trace, then shows it
    GET  /ask/<trace_id>          the stored answer: the permalink, for the members of the
                                  space it was asked in (its asker alone when asked across
                                  all their spaces)

Why asking is a POST and not `GET /ask?q=`: an ask writes a trace row and may send evidence
to a remote model (an egress, logged). A GET that did that would run on every reload, link
prefetch or crawler visit, and a shared `?q=` link would silently re-ask, with possibly a
different answer, instead of showing the one that was shared. So the question URL only
pre-fills the form, and the URL that reproduces an answer is the permalink of its stored
trace: `/ask/<id>` renders that trace (`outcome_from_trace`) exactly as it was answered,
never re-running anything, showing each claim only while the viewer may see every document
it cites (`stored_view.read_stored_answer`). Without JavaScript the POST redirects (303) to
the permalink; with htmx it swaps the answer in and pushes the permalink into the address
bar. A permalink the viewer may not open (`eligibility.visible_answers`) is the no-access
page, exactly like a missing one.

Graph expansion: the *Follow links* box posts `follow_links=1` (always follow
links from the top hits); unticked, the graph discipline rule decides. The answer shows
whether links were followed, why, and which linked passages were added; a quote from one is
labelled "via link from X". Re-run keeps the choice.

"Re-run" posts the same question and pinned note again with `previous=<id>`; the new
answer's page links back to the previous permalink and lists what changed, so a stored
answer can be compared with a fresh one. A stored answer whose cited versions are no longer
their notes' current ones (`StoredAnswer.stale`) says so above the answer, with the same
re-run.

Three tiers lead the page (`types.Tier`): *Answer*, *Best match — check it* (a verified
sentence that did not pass the relevance check, shown with its passage and never as an
answer) and *Not in your notes* (the closest passages, and what the space's catalog holds
on the topic, `retrieval.meta.catalog.catalog_for_topic`). Scores, timings and the gate's
reasons are behind *Advanced*.

Thin: `AskForm` validates, `retrieval.answer.ask.ask()` does the work,
`retrieval.answer.display.outcome_from_trace()` rebuilds a stored answer and
`retrieval.answer.trace.Trace` reads what its trace recorded; this module only picks the
template and the redirect.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import push_url

from lode_site.errors import no_access
from lode_site.htmx import HtmxHttpRequest
from notes.models import Document
from retrieval.answer.ask import ask, pinnable
from retrieval.answer.display import outcome_from_trace
from retrieval.answer.stored_view import StoredAnswer, read_stored_answer
from retrieval.answer.tools import question_urls
from retrieval.answer.trace import Trace
from retrieval.answer.types import ABSTAIN_MESSAGE, AskOutcome, Decision, Tier
from retrieval.eligibility import audience_for, member_spaces, role_in, visible_answers
from retrieval.highlight import as_segments
from retrieval.links import permalink_path
from retrieval.meta.catalog import TopicCatalog, catalog_for_topic
from retrieval.models import AskTrace
from retrieval.search.pipeline import DEFAULT_MODE
from retrieval.trust import document_tier_labels
from retrieval.web.forms import AskForm
from spaces.current import current_space_id

TEMPLATE = "ask/ask.html"
RECENT = 10

# What each decision is called on the pages: words a person reads, never
# the enum names the trace and the API keep.
NOT_IN_NOTES_WORDS = "Not in your notes"
BEST_MATCH_WORDS = "Best match — check it"
DECISION_WORDS: dict[str, str] = {
    Decision.ANSWER: "Answered",
    Decision.ANSWER_WITH_CONFLICTS: "Answered — sources disagree",
    Decision.ABSTAIN_NO_EVIDENCE: NOT_IN_NOTES_WORDS,
    Decision.ASK_CLARIFYING: "Needs a clearer question",
}
FAILED_WORDS = "Not answered — the answerer failed"
STALE_NOTICE = "The notes cited here changed since this answer"


def decision_words(decision: str, *, error: str = "", tier: Tier | None = None) -> str:
    """The decision in words; a failed answerer is said as such whatever was recorded (an
    error is not an honest "your notes don't answer this"), and a best match as one."""
    if error:
        return FAILED_WORDS
    if tier == Tier.BEST_MATCH:
        return BEST_MATCH_WORDS
    return DECISION_WORDS.get(str(decision), "Not answered")


def outcome_words(outcome: AskOutcome) -> str:
    """`decision_words` of one answer."""
    return decision_words(outcome.decision, error=outcome.error, tier=outcome.tier)


@require_http_methods(["GET", "POST"])
def ask_page(request: HtmxHttpRequest) -> HttpResponse:
    if request.method == "POST":
        return _ask_submit(request)
    question = request.GET.get("q", "")
    pinned = _pinned_from_query(request.user, request.GET.get("pinned", ""))
    return render(
        request,
        TEMPLATE,
        {
            "question": question,
            "pinned_document": pinned,
            **_space_choices(request),
            "recent": [
                (trace, recent_words(trace))
                for trace in visible_answers(request.user.pk).filter(user=request.user)[:RECENT]
            ],
        },
    )


def _ask_submit(request: HtmxHttpRequest) -> HttpResponse:
    form = AskForm(request.POST, user=request.user)
    if not form.is_valid():
        # 200 like any Django form with errors (htmx swaps only 2xx responses).
        context = {
            "form": form,
            "question": request.POST.get("question", ""),
            "pinned_document": _pinned_from_query(
                request.user, request.POST.get("pinned_document_id", "")
            ),
            **_space_choices(request),
        }
        return render(request, _template(request, "form_errors"), context)
    data = form.cleaned_data
    outcome = ask(
        user=request.user,
        question=data["question"],
        pinned_document_id=data["pinned_document_id"],
        mode=data["mode"],
        space_id=data["space"],
        follow_links=follow_choice(request.POST.get("follow_links", "")),
        fetch_urls=[data["fetch_url"]] if data["fetch_url"] else [],
    )
    previous = data["previous"]
    url = permalink_path(outcome.trace_id, previous=previous)
    if not request.htmx:
        response = redirect(url)
        response.status_code = 303  # See Other: the browser GETs the permalink
        return response
    trace = AskTrace.objects.select_related("pinned_document", "space").get(
        pk=outcome.trace_id, user=request.user
    )
    response = render(
        request,
        _template(request, "answer"),
        answer_context(request, trace, outcome, previous_id=previous),
    )
    push_url(response, url)
    return response


@require_GET
def ask_permalink(request: HttpRequest, trace_id: int) -> HttpResponse:
    trace = visible_answers(request.user.pk).select_related("pinned_document", "space")
    trace = trace.filter(pk=trace_id).first()
    if trace is None:
        return no_access(request)
    stored = read_stored_answer(trace, user_id=request.user.pk)
    previous = _int_or_none(request.GET.get("previous", ""))
    context = answer_context(request, trace, stored.outcome, previous_id=previous, stored=stored)
    context.update(question=stored.outcome.question, pinned_document=stored.pinned_document)
    return render(request, TEMPLATE, context)


def answer_context(
    request: HttpRequest,
    trace: AskTrace,
    outcome: AskOutcome,
    *,
    previous_id: int | None,
    stored: StoredAnswer | None = None,
) -> dict[str, Any]:
    """What the answer partial shows for one stored answer: `stored` as the viewer may see it
    (the permalink), or `outcome` just asked (its asker sees all of it)."""
    previous = None
    differences: list[str] = []
    if previous_id and previous_id != trace.pk:
        previous = visible_answers(request.user.pk).filter(pk=previous_id).first()
        if previous is not None:
            earlier = read_stored_answer(previous, user_id=request.user.pk).outcome
            differences = answer_differences(earlier, outcome)
    return {
        "outcome": outcome,
        "decision_words": outcome_words(outcome),
        "closest": closest_to_show(outcome),
        "stale": stored.stale if stored is not None else False,
        "stale_notice": STALE_NOTICE,
        "catalog": topic_catalog(request, trace, outcome),
        "trace": trace,
        "abstain_message": ABSTAIN_MESSAGE,
        "answerer_offline": answerer_offline(trace),
        "mode": trace_mode(trace),
        "permalink_url": request.build_absolute_uri(permalink_path(trace.pk)),
        "permalink_audience": answer_audience(trace),
        # "Public read-only link" (spaces/_public_link_form.html): only for an answer asked
        # in one space (one asked across all the asker's spaces is private to them).
        "public_link_kind": "answer",
        "public_link_target_id": trace.pk,
        "public_link_space": trace.space,
        "public_link_role": role_in(request.user.pk, trace.space_id) if trace.space_id else None,
        "previous": previous,
        "differences": differences,
        "pinned_document": stored.pinned_document if stored else trace.pinned_document,
        "conflicts": shown_conflicts(outcome.conflicts),
        "tier_labels": document_tier_labels(request.user.pk, cited_document_ids(outcome)),
        "search_instead_url": search_instead_url(outcome.question, trace.space_id),
        "fetch_offer_url": fetch_offer_url(outcome),
        **expansion_context(trace, stored),
    }


def closest_to_show(outcome: AskOutcome) -> list[Any]:
    """The closest passages the page lists: with a best match, those other than the passages
    its quotes already show (the same verified-opening link)."""
    shown = {s.evidence_url for s in outcome.best_match.support} if outcome.best_match else set()
    return [
        p for p in outcome.closest if p.hidden or not p.evidence_url or p.evidence_url not in shown
    ]


def topic_catalog(
    request: HttpRequest, trace: AskTrace, outcome: AskOutcome
) -> TopicCatalog | None:
    """What the catalog of the answer's spaces holds on the question's topic, for an answer
    *Not in your notes* (`retrieval.meta.catalog.catalog_for_topic` over the viewer's audience
    in the space asked in and the question's content words); None for any other tier."""
    if outcome.tier != Tier.NOT_IN_NOTES:
        return None
    recorded = Trace.from_row(trace).pre_decision
    words = list(recorded.content_words) if recorded is not None else []
    if not words:
        return None
    return catalog_for_topic(audience_for(request.user.pk, space_id=trace.space_id), words)


def fetch_offer_url(outcome: AskOutcome) -> str:
    """The web address in the question to offer "Fetch this page and answer from it" for:
    the first one, when this answer was not already made from fetched pages."""
    if outcome.fetched_version_ids:
        return ""
    urls = question_urls(outcome.question)
    return urls[0] if urls else ""


def cited_document_ids(outcome: AskOutcome) -> set[int]:
    """The documents the answer page names a trust tier for: those its claims quote, its
    closest passages come from and its conflicting values cite."""
    claims = [*outcome.claims, *([outcome.best_match] if outcome.best_match else [])]
    ids = {s.document_id for claim in claims for s in claim.support}
    ids |= {p.document_id for p in outcome.closest}
    for conflict in outcome.conflicts:
        for value in conflict.get("values") or ():
            if isinstance(value, dict) and isinstance(value.get("document_id"), int):
                ids.add(value["document_id"])
    return ids


def expansion_context(trace: AskTrace, stored: StoredAnswer | None = None) -> dict[str, Any]:
    """Graph expansion as the answer page shows it, from the stored trace: the
    decision and what was added (`expansion`), the documents added (a quote from one is
    labelled "via link from X") and the user's *Follow links* choice, which Re-run keeps.
    With `stored`, only the rows naming documents the viewer may see."""
    recorded = Trace.from_row(trace)
    expansion = stored.expansion if stored is not None else recorded.expansion
    added = (expansion or {}).get("added") or []
    return {
        "expansion": expansion,
        "expansion_document_ids": [row.get("document_id") for row in added],
        "follow_links": recorded.settings.follow_links,
    }


def follow_choice(raw: str) -> bool | None:
    """The *Follow links* box of the ask form: "1" (ticked) always follows links, "0"
    never, absent lets the graph discipline rule decide (the same words as the search
    page's `follow`)."""
    value = raw.strip().lower()
    if value in ("1", "true", "on", "yes"):
        return True
    if value in ("0", "false", "off", "no"):
        return False
    return None


def answer_audience(trace: AskTrace) -> str:
    """Who can open a stored answer's permalink, in words."""
    space = trace.space
    if space is None:
        return (
            "Only you can open this answer: it was asked across all your spaces. Ask in one "
            "space to share an answer with its members."
        )
    if space.is_personal:
        return "Only you can open this answer: it was asked in your personal space."
    members = space.memberships.count()
    return (
        f"Members of {space.name} ({members} {'people' if members != 1 else 'person'}) can "
        "open this answer; it quotes only that space's documents."
    )


def _space_choices(request: HttpRequest) -> dict[str, Any]:
    """The ask form's space select: the user's spaces and the one chosen in the header."""
    current = current_space_id(request)
    return {
        "spaces": list(member_spaces(request.user.pk)),
        "space": str(current) if current is not None else "all",
    }


def recent_words(trace: AskTrace) -> str:
    """A stored answer's decision in words, read from what the answer recorded (a failed
    answerer included) by the one reader of stored answers."""
    return outcome_words(outcome_from_trace(trace))


def search_instead_url(question: str, space_id: int | None = None) -> str:
    """The search page for the question as typed: what an abstention or a clarification
    offers instead of an answer (the search shows every hit, ranked, without judging), over
    the space the question was asked in (all the viewer's spaces when it was asked in all)."""
    params = {"q": question, "space": str(space_id) if space_id else "all"}
    return f"{reverse('retrieval:search')}?{urlencode(params, quote_via=quote)}"


def shown_conflicts(conflicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The outcome's conflicts with each value's stored `segments` dicts as highlight
    Segments, the one shape the page renders highlighted text from. Copies: the outcome
    keeps what it stores."""
    return [
        {
            **conflict,
            "values": [
                {**value, "segments": as_segments(value.get("segments") or ())}
                for value in conflict.get("values", ())
            ],
        }
        for conflict in conflicts
    ]


def answerer_offline(trace: AskTrace) -> bool:
    """Whether the answer was produced on this machine (nothing sent to a model endpoint),
    from what the trace recorded about the answerer; unknown counts as not offline."""
    return Trace.from_row(trace).answerer_offline


def trace_mode(trace: AskTrace) -> str:
    """The search mode the stored ask used, so a re-run repeats it."""
    return str(Trace.from_row(trace).settings.mode or DEFAULT_MODE)


def answer_differences(previous: AskOutcome, current: AskOutcome) -> list[str]:
    """What a re-run changed, in words, judged on what the page shows: the decision, the
    answerer, the verified claims (text and cited versions), the best match and the dropped
    count. Empty when
    the two answers show the same thing."""
    out: list[str] = []
    was, now = outcome_words(previous), outcome_words(current)
    if was != now:
        out.append(f"Decision changed from “{was}” to “{now}”.")
    if previous.answerer != current.answerer:
        out.append(f"Answerer changed from {previous.answerer} to {current.answerer}.")
    before, after = _claim_keys(previous), _claim_keys(current)
    gone = [text for text, versions in before if (text, versions) not in after]
    new = [text for text, versions in after if (text, versions) not in before]
    if gone:
        out.append(f"{len(gone)} claim{'s' * (len(gone) != 1)} no longer shown: " + _quote(gone))
    if new:
        out.append(f"{len(new)} new claim{'s' * (len(new) != 1)}: " + _quote(new))
    was_best, now_best = _best_match_text(previous), _best_match_text(current)
    if was_best != now_best and (was_best or now_best):
        out.append(
            f"Best match changed from {_quote([was_best]) if was_best else 'none'} to "
            f"{_quote([now_best]) if now_best else 'none'}."
        )
    hidden = sum(c.hidden for c in previous.claims)
    if hidden:
        out.append(
            f"{hidden} earlier claim{'s' * (hidden != 1)} cited a note no longer visible to you."
        )
    if len(previous.dropped) != len(current.dropped):
        out.append(f"Dropped claims: {len(previous.dropped)} before, {len(current.dropped)} now.")
    if bool(previous.error) != bool(current.error):
        out.append(
            "The answerer failed this time." if current.error else "The answerer failed before."
        )
    return out


def _claim_keys(outcome: AskOutcome) -> list[tuple[str, tuple[int, ...]]]:
    """The shown claims by text and cited versions (hidden claims are counted apart)."""
    return [
        (c.text, tuple(sorted(s.version_id for s in c.support)))
        for c in outcome.claims
        if not c.hidden
    ]


def _best_match_text(outcome: AskOutcome) -> str:
    """The best match's text ("" without one, or when it is hidden from the viewer)."""
    best = outcome.best_match
    return best.text if best is not None and not best.hidden else ""


def _quote(texts: list[str]) -> str:
    return "; ".join(f"“{t}”" for t in texts[:5]) + (" …" if len(texts) > 5 else "")


def _template(request: HtmxHttpRequest, partial: str) -> str:
    return f"{TEMPLATE}#{partial}" if request.htmx else TEMPLATE


def _pinned_from_query(user: AbstractBaseUser, value: str) -> Document | None:
    """The document named by `value` in any of the user's spaces, or None (a bad id, or one
    outside their spaces, pins nothing)."""
    document_id = _int_or_none(value)
    return None if document_id is None else pinnable(audience_for(user.pk), document_id)


def _int_or_none(value: str) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None
