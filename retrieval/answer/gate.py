"""The faithfulness gate: verify every claim an answerer returns before anything is shown
(seeds/lode-retrieval.md "Faithfulness: verify citations, don't just require them"; DESIGN.md
invariant 7). Pure functions over plain data — no database, no network; the only thing that
may run a model is the injected entailment scorer.

Steps, in order, for each claim:

1. **Verbatim span.** Every `quoted_span` must occur in the body of the version it cites,
   exactly or after normalisation (Unicode NFC, every whitespace run → one space, ends
   trimmed; both sides). The version must be one the answerer was actually shown
   (`sent_versions`): a span from a withheld or never-sent version fails like a fabricated
   quote. A claim with no support, or an empty/whitespace span, fails.
2. **Extractive coupling** (the fast path). The claim's payload — its case-folded letter/digit
   runs (`[^\\W_]+`) minus articles and forms of "to be" — must lie inside ONE span's tokens,
   in the claim's order, and that span must carry no negation cue the claim lacks. A claim
   that couples is verified outright; one that does not (a paraphrase, a payload split
   across spans, a negated span) is not dropped here but handed to step 3.
3. **Entailment.** The claim's cited spans, joined with a space, are the premise and the claim
   text the hypothesis; accepted strictly above `ENTAILMENT_THRESHOLD`. No scorer → dropped
   (fail closed); a scorer that cannot run → dropped with its reason.
4. **Relevance**, run by `retrieval.answer.ask.gate_claims` over the claims that passed 1–3,
   all at once: `retrieval.answer.relevance` scores each question × claim
   pair and `relevance_verdict` (below, pure) drops a claim scoring below the fitted threshold
   with the reason "does not answer the question"; with an LLM judge configured the judge is
   also asked "does this claim answer the question?" and a "no" drops it the same way
   (`judged_not_an_answer`). A verbatim, entailed quote can still be beside the point.
5. Every failure is a `ClaimVerdict(passed=False, step, reason)`, in plain words; callers drop
   those claims and abstain when none survive. A reason names a version as its pages do —
   by its number within its document (`version_labels`: "version 2 of “Runbook”"), never
   by its database id, which only URLs and the API's fields carry.

`couples` states step 2's known limits and the tightenings measured on SciFact.
"""

from __future__ import annotations

import logging
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import replace

from retrieval.answer.entailment import (
    ENTAILMENT_THRESHOLD,
    EntailmentScorer,
    EntailmentUnavailable,
)
from retrieval.answer.types import Claim, ClaimVerdict, PackItem, Support
from retrieval.text.negation import negation_cue_counts
from retrieval.text.normalise import nfc_collapsed
from retrieval.text.tokens import COMPOUND_RE, NUMBER_RE, UNICODE_HYPHENS_RE, WORD_RE, nfc_tokens
from retrieval.words.stopwords import GLUE_WORDS

logger = logging.getLogger("lode.gate")

STEP_VERBATIM = "verbatim"
STEP_COUPLING = "coupling"
STEP_ENTAILMENT = "entailment"
STEP_RELEVANCE = "relevance"

NO_ENTAILMENT_REASON = "needs entailment and no entailment model is configured"
NOT_AN_ANSWER = "does not answer the question"
# How a drop by the LLM judge's relevance question begins (replay reads recorded "no"s by it).
JUDGE_SAYS_NOT_AN_ANSWER = f"{NOT_AN_ANSWER}: the LLM judge"

# The gate's words, glue words, negation cues and normal form live in retrieval.text, so the
# answerer that picks a quote and the gate that checks it cut text the same way.


# --- pure helpers -----------------------------------------------------------------------------


def payload_sequence(text: str) -> list[str]:
    """The claim's load-bearing words in order: its tokens minus articles and forms of "to
    be"."""
    return [t for t in nfc_tokens(text) if t not in GLUE_WORDS]


def payload_tokens(text: str) -> frozenset[str]:
    """The claim's load-bearing words (`payload_sequence` as a set)."""
    return frozenset(payload_sequence(text))


def in_order(needles: list[str], haystack: list[str]) -> bool:
    """Whether `needles` occur in `haystack` in this order (a subsequence, gaps allowed)."""
    remaining = iter(haystack)
    return all(any(word == needle for word in remaining) for needle in needles)


def numbers(text: str) -> frozenset[str]:
    """Numbers in `text`, read whole with their separators ("1.8", not "1" and "8")."""
    return frozenset(NUMBER_RE.findall(unicodedata.normalize("NFC", text)))


def compound_words(text: str) -> frozenset[str]:
    """Hyphenated compounds in `text`, case-folded, hyphens written as ASCII ("ucp1-dependent")."""
    nfc = unicodedata.normalize("NFC", text)
    return frozenset(
        UNICODE_HYPHENS_RE.sub("-", m.group(0)).casefold() for m in COMPOUND_RE.finditer(nfc)
    )


def span_occurs(span: str, body: str) -> bool:
    """Whether `span` occurs in `body`, exactly or after NFC + whitespace normalisation of
    both. An empty or whitespace-only span never occurs (it would verify anything)."""
    needle = nfc_collapsed(span)
    if not needle:
        return False
    return span in body or needle in nfc_collapsed(body)


def _is_word_char(char: str) -> bool:
    return bool(WORD_RE.fullmatch(char))


def span_sequence(span: str, body: str) -> list[str]:
    """The span's tokens as evidence, in order: its tokens, minus an edge token that some
    occurrence of the span in `body` cuts in half (the span starts or ends inside a word of
    the body). Dropping a token only makes coupling stricter."""
    needle = nfc_collapsed(span)
    toks = nfc_tokens(needle)
    if not toks:
        return []
    haystack = nfc_collapsed(body)
    cut_start = cut_end = False
    found = False
    start = haystack.find(needle)
    while start != -1:
        found = True
        end = start + len(needle)
        if start > 0 and _is_word_char(haystack[start - 1]):
            cut_start = True
        if end < len(haystack) and _is_word_char(haystack[end]):
            cut_end = True
        start = haystack.find(needle, start + 1)
    if not found:
        # Only an exact match that normalisation splits (a span ending inside a decomposed
        # character): trust neither edge.
        cut_start = cut_end = True
    cut_start = cut_start and _is_word_char(needle[0])
    cut_end = cut_end and _is_word_char(needle[-1])
    kept = toks[:]
    if cut_end and kept:
        kept.pop()
    if cut_start and kept:
        kept.pop(0)
    return kept


def span_tokens(span: str, body: str) -> frozenset[str]:
    """`span_sequence` as a set (a token the edge cut may still occur whole elsewhere)."""
    return frozenset(span_sequence(span, body))


def couples(claim_text: str, spans: Iterable[tuple[str, str]]) -> tuple[bool, str]:
    """Step 2 over (span, body) pairs: (coupled, why in words).

    Known, accepted exposure (seed decision lode-1qxy, pinned by a canary test): `[^\\W_]+`
    splits hyphenated compounds, so "the policy is allkeys-lru" couples with "maxmemory-policy
    allkeys-lru", and "DNS" couples with "DNS-01" — a claim naming a *fragment* of a span's
    compound. The negation-cue check (seed decision lode-w2y7) is lexical, not a polarity
    parser: affixal negation ("unchanged"), hedges ("fails to", "hardly") and negation scope are
    not seen. Containment cannot see *which* occurrence of a word the claim means: in a long
    span holding a word twice, a claim may still pair it with the wrong neighbour (ordering,
    below, narrows this).

    Tightenings beyond the seed, each measured on SciFact (`manage.py lode_eval_gate`, and
    perturbed rationale sentences) and each only ever demoting a claim to step 3 — the
    fail-closed direction; none touches the tokenizer, so the lode-1qxy canary still holds:

    * a token a span cuts in half at either edge (the span "dose of 25" quoted from "dose of 250
      mg") is not counted among that span's tokens: a truncated quote cannot couple a drifted
      number (the span still passes step 1 — it does occur);
    * every hyphenated compound *of the claim* must occur whole in the span: "UCP1-dependent"
      does not couple with "UCP1-independent … ATP-dependent" (a real SciFact CONTRADICT false
      accept);
    * every number of the claim, read whole with its decimal/thousands separators, must occur
      whole in the span: "1.8 mg" does not couple with "0.8 mg … 1 to 4";
    * negation cues are compared by count, not presence: a claim that drops one of a span's two
      "not"s does not couple;
    * the payload must occur in the span *in the claim's order* (a subsequence, gaps allowed),
      not merely as a set: set containment let a claim swap "decreased"/"increased" between two
      clauses of one long sentence, or move a number to where another occurrence sits. Cost: a
      claim restating a span's words in another order goes to step 3 (on SciFact SUPPORT
      rationales, coupling fell from 4 to 3 of 616: claim 222 reorders its sentence).

    Measured with `lode_eval_gate`'s coupling stress (bench/README.md): of SciFact rationale
    sentences edited to be false, the seed's rule alone coupled 46 of 294 one-off number drifts,
    15 of 198 antonym swaps, 4 of 70 removed negations and 2 of 40 "X-independent" →
    "X-dependent"; with these checks, none — while every unedited sentence still couples.
    """
    payload = payload_tokens(claim_text)
    if not payload:
        return False, "the claim has no words to check against a span"
    claim_cues = negation_cue_counts(claim_text)
    claim_compounds = compound_words(claim_text)
    claim_numbers = numbers(claim_text)
    reasons = []
    sequence = payload_sequence(claim_text)
    for i, (span, body) in enumerate(spans, start=1):
        span_words = span_sequence(span, body)
        missing = payload - set(span_words)
        if missing:
            reasons.append(f"span {i} lacks {', '.join(sorted(missing))}")
            continue
        if not in_order(sequence, span_words):
            reasons.append(f"span {i} has the claim's words, but not in the claim's order")
            continue
        split = claim_compounds - compound_words(span)
        if split:
            reasons.append(f"span {i} lacks the compound {', '.join(sorted(split))}")
            continue
        drifted = claim_numbers - numbers(span)
        if drifted:
            reasons.append(f"span {i} lacks the number {', '.join(sorted(drifted))}")
            continue
        extra_cues = negation_cue_counts(span) - claim_cues
        if extra_cues:
            cues = ", ".join(sorted(extra_cues))
            reasons.append(f"span {i} carries negation the claim lacks ({cues})")
            continue
        return True, f"every payload word of the claim is in span {i}"
    return False, "no single quoted span contains the claim: " + "; ".join(reasons)


# --- naming versions in reasons ---------------------------------------------------------------


def version_labels(items: Iterable[PackItem]) -> dict[int, str]:
    """{version id: how a reason names it} for the versions of the pack `items`: its number
    within its document, as the note, history and evidence pages number it, and the
    document's title ("version 2 of “Runbook”")."""
    return {
        item.version_id: f"version {item.version_number} of \u201c{item.document_title}\u201d"
        for item in items
    }


def _not_shown(i: int, label: str | None) -> str:
    if label is None:  # not in the pack: a version id the answerer made up, or another's
        return f"quoted span {i} cites a version that was not shown to the answerer"
    return f"quoted span {i} cites {label}, which was not shown to the answerer"


def _not_in(i: int, label: str | None) -> str:
    return f"quoted span {i} does not occur in {label or 'the version it cites'}"


# Step 1's reasons in older traces, which name the version by its database id.
_ID_REASON_RE = re.compile(
    r"^quoted span (?P<i>\d+) (?:cites version (?P<cited>\d+), which was not shown to the "
    r"answerer|does not occur in version (?P<absent>\d+))$"
)


def relabel_reason(reason: str, labels: Mapping[int, str]) -> str:
    """A step-1 reason of an older trace (which names the version by its database id) in
    today's words, the version named by `labels`; any other reason unchanged. Versions
    are immutable, so the id and the label name the same text: nothing stored is re-judged."""
    match = _ID_REASON_RE.match(reason)
    if match is None:
        return reason
    i = int(match["i"])
    if match["cited"] is not None:
        return _not_shown(i, labels.get(int(match["cited"])))
    return _not_in(i, labels.get(int(match["absent"])))


def _verbatim_failure(
    support: tuple[Support, ...], sent_versions: Mapping[int, str], labels: Mapping[int, str]
) -> str:
    """Step 1: "" when every span verifies, else the first failure in words."""
    if not support:
        return "the claim cites no evidence"
    for i, item in enumerate(support, start=1):
        if not item.quoted_span or not item.quoted_span.strip():
            return f"quoted span {i} is empty"
        body = sent_versions.get(item.version_id)
        if body is None:
            return _not_shown(i, labels.get(item.version_id))
        if not span_occurs(item.quoted_span, body):
            return _not_in(i, labels.get(item.version_id))
    return ""


# --- the gate ---------------------------------------------------------------------------------


def check_claim(
    claim: Claim,
    sent_versions: Mapping[int, str],
    *,
    scorer: EntailmentScorer | None,
    labels: Mapping[int, str] | None = None,
) -> ClaimVerdict:
    """One claim through steps 1–3. EntailmentUnavailable is taken per claim (a scorer may
    be unable to score one claim and able to score the next, e.g. one replaying recorded
    scores), so a failure is never carried over to the other claims. `labels` name the
    versions in reasons (`version_labels`); one without a label is "the version it cites"."""
    if not claim.text or not claim.text.strip():
        failure = "the claim has no text"
    else:
        failure = _verbatim_failure(claim.support, sent_versions, labels or {})
    if failure:
        return ClaimVerdict(claim=claim, passed=False, step=STEP_VERBATIM, reason=failure)

    pairs = [(s.quoted_span, sent_versions[s.version_id]) for s in claim.support]
    coupled, why = couples(claim.text, pairs)
    if coupled:
        return ClaimVerdict(claim=claim, passed=True, step=STEP_COUPLING, reason=why)

    if scorer is None:
        return _dropped(claim, NO_ENTAILMENT_REASON)
    name = scorer.name
    premise = " ".join(nfc_collapsed(s.quoted_span) for s in claim.support)
    try:
        score = float(scorer.score(premise, nfc_collapsed(claim.text)))
    except EntailmentUnavailable as exc:
        reason = f"needs entailment and the entailment model is unavailable: {exc}"
        return _dropped(claim, reason, scorer_name=name)
    except Exception as exc:  # fail closed on anything a backend throws
        logger.warning("entailment scorer %s failed: %r", name, exc)
        reason = f"needs entailment and the entailment check failed ({type(exc).__name__})"
        return _dropped(claim, reason, scorer_name=name)
    if not math.isfinite(score):
        reason = "needs entailment and the entailment model returned no usable score"
        return _dropped(claim, reason, scorer_name=name)
    if score > ENTAILMENT_THRESHOLD:
        reason = f"the cited spans entail the claim ({name} {score:.3f} > {ENTAILMENT_THRESHOLD})"
        return ClaimVerdict(
            claim=claim,
            passed=True,
            step=STEP_ENTAILMENT,
            reason=reason,
            entailment_score=score,
            entailment_scorer=name,
        )
    reason = (
        f"the cited spans do not entail the claim "
        f"({name} {score:.3f} ≤ threshold {ENTAILMENT_THRESHOLD})"
    )
    return _dropped(claim, reason, scorer_name=name, score=score)


def _dropped(
    claim: Claim, reason: str, *, scorer_name: str = "", score: float | None = None
) -> ClaimVerdict:
    return ClaimVerdict(
        claim=claim,
        passed=False,
        step=STEP_ENTAILMENT,
        reason=reason,
        entailment_score=score,
        entailment_scorer=scorer_name,
    )


def run_gate(
    claims: list[Claim],
    sent_versions: dict[int, str],
    *,
    scorer: EntailmentScorer | None,
    labels: Mapping[int, str] | None = None,
) -> list[ClaimVerdict]:
    """One verdict per claim, in order. `sent_versions` is {version_id: body} of the versions
    the answerer was shown; nothing else can verify a span. `labels` as for `check_claim`."""
    return [check_claim(claim, sent_versions, scorer=scorer, labels=labels) for claim in claims]


# --- step 4: relevance (scored by retrieval.answer.relevance, decided here) ----------------------


def relevance_verdict(
    verdict: ClaimVerdict,
    score: float,
    threshold: float,
    *,
    model: str = "",
    section_match: bool = False,
) -> ClaimVerdict:
    """Step 4 for one verdict, pure: a claim that passed the faithfulness checks keeps passing
    when its relevance `score` reaches `threshold`, or when it is a step of the section named
    for a procedure question (`section_match`, see `relevance.section_answers`), and is
    dropped at step "relevance" with the reason "does not answer the question" (the score and
    threshold in words) when neither holds. The score is recorded either way; a non-finite
    score drops the claim (fail closed), a section match or not. A verdict that already
    failed is returned unchanged (it was never scored)."""
    if not verdict.passed:
        return verdict
    which = f" ({model} model)" if model else ""
    if not math.isfinite(score):
        reason = f"{NOT_AN_ANSWER}: the relevance check gave no usable score{which}"
        return replace(verdict, passed=False, step=STEP_RELEVANCE, reason=reason)
    if score >= threshold or section_match:
        # `section_match` is recorded whenever the rule holds, so an offline replay at another
        # threshold (bench/relevance_threshold.py) knows the claim passes whatever its score.
        return replace(verdict, relevance_score=score, section_match=section_match)
    reason = (
        f"{NOT_AN_ANSWER}: its relevance score {score:.2f} is below the threshold "
        f"{threshold:.2f}{which}"
    )
    return replace(verdict, passed=False, step=STEP_RELEVANCE, reason=reason, relevance_score=score)


def shape_verdict(verdict: ClaimVerdict, problem: str) -> ClaimVerdict:
    """Step 4's second half, pure: a claim that reached the relevance threshold is still
    dropped at step "relevance" when `retrieval.answer.answer_shape` found it cannot answer
    by its shape (`problem`, in words: "the question asks who, and it names no one"). An
    empty `problem`, or a verdict that already failed, is returned unchanged."""
    if not verdict.passed or not problem:
        return verdict
    reason = f"{NOT_AN_ANSWER}: {problem}"
    return replace(verdict, passed=False, step=STEP_RELEVANCE, reason=reason, shape_problem=problem)


def relevance_unavailable(verdict: ClaimVerdict, why: str) -> ClaimVerdict:
    """Step 4 when the relevance model cannot run at all: the claim is dropped (fail closed)."""
    if not verdict.passed:
        return verdict
    reason = f"could not check that it answers the question: {why}"
    return replace(verdict, passed=False, step=STEP_RELEVANCE, reason=reason)


def judged_not_an_answer(verdict: ClaimVerdict, judge: str) -> ClaimVerdict:
    """The LLM judge said the claim does not answer the question: dropped at step 4."""
    reason = f"{JUDGE_SAYS_NOT_AN_ANSWER} ({judge}) says it does not"
    return replace(verdict, passed=False, step=STEP_RELEVANCE, reason=reason)


def relevance_judge_failed(verdict: ClaimVerdict, judge: str, why: str) -> ClaimVerdict:
    """The LLM judge was asked whether the claim answers the question and could not say:
    dropped at step 4, fail closed like an entailment judge that cannot run."""
    reason = f"could not check that it answers the question: the LLM judge ({judge}) failed: {why}"
    return replace(verdict, passed=False, step=STEP_RELEVANCE, reason=reason)
