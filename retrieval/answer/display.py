"""What the answer page shows, built from verified claims or read back from a stored answer.

* `show_claims` — each claim that passed the gate, with every quoted span located in the
  version it cites (invariant 7): exactly, else after NFC + whitespace normalisation mapped
  back to the body's own offsets (`locate_span`); shown in the context a person reads
  (`quote_segments`: the span exactly as stored, the Markdown around it as text, its headings
  as a label) with the verified-opening link of the passage holding it. A passed claim none of
  whose spans can be located is dropped (fail closed).
* `conflicts_for` — the conflicts among the shown claims (and the pack's items on the same
  subjects, `decision.find_conflicts`), each value located and shown the same way.
* `show_best_match` — with no verified answer, the claim shown as *Best match — check it*
  (`decision.best_match_candidates` chooses it), located and shown like a claim.
* `closest_passages` — what an abstention shows instead of an answer: the pack items that
  came closest (`decision.closest_items`), each with a short plain-text snippet
  (`passage_snippet`) and its verified-opening link. They are labelled as *not* answering.
* `outcome_from_trace` — a stored answer exactly as it was given (the permalink): the answer
  JSON (`AskOutcome.as_dict`) and the withheld documents from the trace (`trace.Trace`).
  Nothing is re-run or re-read. A page or endpoint shows it to a reader only through
  `stored_view.read_stored_answer`, which hides what cites a document the reader may not see.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from django.conf import settings

from notes.models import Version
from retrieval.answer.decision import (
    BEST_MATCH_FLOOR,
    best_match_candidates,
    claim_statements,
    evidence_statements,
    find_conflicts,
)
from retrieval.answer.gate import relabel_reason, version_labels
from retrieval.answer.trace import Trace
from retrieval.answer.types import (
    AskOutcome,
    ClaimVerdict,
    ClarifyingChoice,
    ClosestPassage,
    Decision,
    EvidencePack,
    PackItem,
    ShownClaim,
    ShownSupport,
)
from retrieval.eligibility import Audience
from retrieval.links import evidence_url
from retrieval.models import AskTrace, Passage
from retrieval.text.markdown import quotable_blocks
from retrieval.text.normalise import nfc_collapsed, nfc_collapsed_with_offsets
from retrieval.text.stemming import fold
from retrieval.text.tokens import LINE_BREAK_RE, TOKEN_RE

# What an answer whose tier is `Tier.BEST_MATCH` says: a sentence to check, not an answer.
BEST_MATCH_MESSAGE = (
    "No sentence of your notes was confirmed as the answer. The closest verified sentence is "
    "shown with its passage: check it."
)

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


def _context_range(
    body: str, start: int, end: int, context: int, bounds: tuple[int, int] | None
) -> tuple[int, int]:
    """[a, b) around the span: up to `context` code points each side, cut back to a space
    (whole words) and never past `bounds` (the span's Markdown block) or, without bounds, a
    paragraph break (a blank line)."""
    low, high = bounds if bounds is not None else (0, len(body))
    a = max(low, start - context)
    paragraph = body.rfind("\n\n", a, start) if bounds is None else -1
    if paragraph >= 0:
        a = paragraph + 2
    elif a > low:
        space = body.find(" ", a, start)
        a = space + 1 if space >= 0 else a
    b = min(high, end + context)
    paragraph = body.find("\n\n", end, b) if bounds is None else -1
    if paragraph >= 0:
        b = paragraph
    elif b < high:
        space = body.rfind(" ", end, b)
        b = space if space >= 0 else b
    return a, b


def context_segments(
    body: str, start: int, end: int, *, context: int = CONTEXT_CHARS
) -> tuple[tuple[str, bool], ...]:
    """The span `body[start:end]` highlighted, with up to `context` code points of text each
    side, cut back to a paragraph break (a blank line: the context stays in the span's
    paragraph, even a hard-wrapped one) or else a space (whole words). The segments
    concatenate to `body[a:b]` exactly (invariant 2's shape). The raw form: the answer page
    shows `quote_segments`."""
    a, b = _context_range(body, start, end, context, None)
    pieces = ((body[a:start], False), (body[start:end], True), (body[end:b], False))
    return tuple((text, highlighted) for text, highlighted in pieces if text)


# --- quotes as a person reads them -------------------------------------------------------------
#
# A quote's context is shown as text, not as Markdown source: no "##", no fences, no "- "
# markers, no "**". Chosen over rendering the context through the sanitiser
# (notes/rendering.py): rendered HTML cannot carry a <mark> at arbitrary code-point offsets
# (a span may start inside an emphasis, a link or a list item), so the exact-span highlight
# would not survive. Instead the context is cut to the span's Markdown block (the list item,
# table row, block-quote or plain paragraph holding it: `retrieval.text.quotable_blocks`, the
# blocks the extractive answerer quotes from), its markup is removed from the text *outside*
# the verified span only, and the headings above it are shown as a label (ShownSupport's
# `heading_path`). The highlighted span stays exactly the stored characters, so what the gate
# verified is what is marked; the "Open verified evidence" link shows the raw passage.

# How far each side of a span is read to find its Markdown block when no passage holds it.
STRUCTURE_WINDOW = 4000
# Markup at the start of a context line: indentation, block-quote markers, a heading's marks or
# a list marker with its task box, and a table row's leading "|".
_LINE_MARKUP_RE = re.compile(
    r"[ \t]*(?:>[ \t]?)*[ \t]*"
    r"(?:#{1,6}[ \t]+|(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?)?\|?[ \t]*"
)
# An ATX heading's optional closing marks ("## Title ##").
_CLOSING_HASHES_RE = re.compile(r"[ \t]+#+[ \t]*$")
# A table row's inner cell separator (not an escaped "\|"), with the blanks around it:
# shown as " · " so the cells read as a list, not as Markdown pipes.
_CELL_SEPARATOR_RE = re.compile(r"[ \t]*(?<!\\)\|[ \t]*")
# A code fence line ("```python", "~~~").
_FENCE_RE = re.compile(r"[ \t]*(?:`{3,}|~{3,})")
# Characters of a line that is only markup: a thematic break or a table's delimiter row.
_RULE_CHARACTERS = frozenset("-*_|: \t")
# Inline markup: a link or image shows its text, an autolink its address; emphasis asterisks
# (not "2 * 3", not an escaped "\*"), strikethrough and code backticks are dropped; a
# backslash escape shows the character. Underscores stay: in notes they are mostly identifiers
# ("max_connections"), rarely emphasis.
_LINK_RE = re.compile(r"!?\[([^\[\]\n]{0,500})\]\([^()\n]{0,2000}\)")
_AUTOLINK_RE = re.compile(r"<((?:https?|mailto):[^<>\s]{1,2000})>")
_INLINE_MARKS_RE = re.compile(
    r"(?<![\w*\\])\*{1,3}(?=[^\s*])|(?<=[^\s*\\])\*{1,3}(?![\w*])|~~|(?<!\\)`+"
)
_ESCAPED_RE = re.compile(r"\\([!-/:-@\[-`{-~])")


def readable_text(text: str, *, at_line_start: bool) -> str:
    """`text` (context outside a verified span) with its Markdown markup removed: each line's
    leading markup (the first line's only when `at_line_start`), fence, rule and delimiter
    lines, a table row's pipes (inner ones read " · "), then inline markup. Shown escaped,
    like all note text."""
    lines: list[str] = []
    position, first = 0, True
    breaks = [*LINE_BREAK_RE.finditer(text), None]
    for found in breaks:
        line = text[position : found.start() if found else len(text)]
        separator = found.group(0) if found else ""
        position = found.end() if found else len(text)
        if not first or at_line_start:
            stripped = line.strip()
            if _FENCE_RE.match(line) or (
                len(stripped) >= 3 and set(stripped) <= _RULE_CHARACTERS and "-" in stripped
            ):
                first = False
                continue  # a line that is only markup
            if stripped.startswith("|"):
                line = line.rstrip().rstrip("|")
            elif stripped.startswith("#"):
                line = _CLOSING_HASHES_RE.sub("", line)
            prefix = _LINE_MARKUP_RE.match(line)
            line = line[prefix.end() :] if prefix else line
            if stripped.startswith("|"):
                line = _CELL_SEPARATOR_RE.sub(" · ", line.rstrip())
        first = False
        lines.append(line + separator)
    return without_inline_markup("".join(lines))


def without_inline_markup(plain: str) -> str:
    """`plain` with links and images shown as their text, autolinks as their address,
    emphasis, strikethrough and code marks dropped and backslash escapes resolved."""
    # Each pattern runs only when the character every match of it holds is there: most text
    # has no markup, and the emphasis pattern's look-behinds, tried at every position, cost
    # ~80 µs per passage (a search page readies twenty; bench/request_cpu.py).
    if "[" in plain:
        plain = _LINK_RE.sub(r"\1", plain)
    if "<" in plain:
        plain = _AUTOLINK_RE.sub(r"\1", plain)
    if "*" in plain or "~" in plain or "`" in plain:
        plain = _INLINE_MARKS_RE.sub("", plain)
    if "\\" in plain:
        plain = _ESCAPED_RE.sub(r"\1", plain)
    return plain


def _block_bounds(body: str, start: int, end: int, low: int, high: int) -> tuple[int, int] | None:
    """The Markdown block of body[low:high] the span [start, end) starts in (the first
    quotable block it overlaps), widened to the whole span; None when the span lies outside
    every quotable block (a heading or code a model quoted)."""
    for block in quotable_blocks(body[low:high]):
        a, b = low + block.start, low + block.end
        if a < end and b > start:
            return min(a, start), max(b, end)
    return None


def add_best_match(
    outcome: AskOutcome, verdicts: Sequence[ClaimVerdict], *, audience: Audience
) -> None:
    """After the gate: an outcome with no shown claim and no failure gets its best match
    (`show_best_match`), if there is one, and the message that says what it is."""
    if outcome.claims or outcome.error:
        return
    outcome.best_match = show_best_match(verdicts, audience=audience)
    if outcome.best_match is not None:
        outcome.message = BEST_MATCH_MESSAGE


def quote_segments(
    body: str, start: int, end: int, passage: Passage | None, *, context: int = CONTEXT_CHARS
) -> tuple[tuple[str, bool], ...]:
    """The verified span `body[start:end]` highlighted, exactly as stored, in the context a
    person reads: at most `context` code points each side, within the span's Markdown block
    (read from `passage`, the passage holding the span's start, which begins outside any
    code block; else from `STRUCTURE_WINDOW` around the span), with the markup outside the
    span removed (`readable_text`). A span outside every block gets its paragraph as context."""
    if passage is not None and passage.start <= start:
        low, high = passage.start, min(len(body), max(passage.end, end))
    else:
        low, high = max(0, start - STRUCTURE_WINDOW), min(len(body), end + STRUCTURE_WINDOW)
    line = body.rfind("\n", 0, low) + 1
    if low - line <= STRUCTURE_WINDOW:
        low = line  # parse from the line's start, so a list marker or ">" reads as markup
    bounds = _block_bounds(body, start, end, low, high)
    a, b = _context_range(body, start, end, context, bounds)
    before = readable_text(body[a:start], at_line_start=a == 0 or body[a - 1] in "\r\n")
    after = readable_text(body[end:b], at_line_start=False)
    pieces = ((before, False), (body[start:end], True), (after, False))
    return tuple((text, highlighted) for text, highlighted in pieces if text)


def _passage_at(version_id: int, offset: int) -> Passage | None:
    """The passage of `version_id` containing `offset` (the first by position), or None."""
    return (
        Passage.objects.filter(version_id=version_id, start__lte=offset, end__gt=offset)
        .select_related("version")
        .order_by("position")
        .first()
    )


def heading_label(passage: Passage | None, title: str) -> tuple[str, ...]:
    """The passage's heading path without the headings that only repeat the document title
    (a note's "# Title" line, a SciFact abstract's title): the label shown over a quote."""
    if passage is None:
        return ()
    same = " ".join(title.casefold().split())
    return tuple(
        heading
        for heading in passage.heading_path or ()
        if isinstance(heading, str) and heading.strip()
        if " ".join(heading.casefold().split()) != same
    )


def _versions(audience: Audience, ids: Sequence[int]) -> dict[int, Version]:
    """The versions among `ids` of documents in the audience's spaces (with documents)."""
    return {
        v.pk: v
        for v in Version.objects.filter(
            pk__in=set(ids), document__space_id__in=audience.sorted_space_ids
        ).select_related("document")
    }


def shown_support(version: Version, quoted_span: str, start: int, end: int) -> ShownSupport:
    """A verified span as the answer page shows it (`quote_segments`), with the heading label
    and the verified-opening link of the passage holding its start."""
    document = version.document
    passage = _passage_at(version.pk, start)
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
        segments=quote_segments(version.body, start, end, passage),
        evidence_url=evidence_url(passage) if passage is not None else "",
        version_created_at=version.created_at.isoformat() if version.created_at else "",
        heading_path=heading_label(passage, document.title),
    )


def _shown_claim(verdict: ClaimVerdict, versions: dict[int, Version]) -> ShownClaim | None:
    """`verdict`'s claim with each of its quoted spans located in its version, or None when
    no span can be located (such a claim is never shown: fail closed)."""
    supports = []
    for support in verdict.claim.support:
        version = versions.get(support.version_id)
        where = locate_span(support.quoted_span, version.body) if version else None
        if version is None or where is None:
            continue
        supports.append(shown_support(version, support.quoted_span, *where))
    return ShownClaim(text=verdict.claim.text, support=tuple(supports)) if supports else None


def show_claims(
    verdicts: Sequence[ClaimVerdict], *, audience: Audience
) -> tuple[list[ShownClaim], list[ClaimVerdict]]:
    """The passed claims as shown (each span located in its version), and the verdicts of
    passed claims that could not be shown (no span located: dropped, fail closed)."""
    passed = [v for v in verdicts if v.passed]
    versions = _versions(audience, [s.version_id for v in passed for s in v.claim.support])
    shown: list[ShownClaim] = []
    unshown: list[ClaimVerdict] = []
    for verdict in passed:
        claim = _shown_claim(verdict, versions)
        if claim is not None:
            shown.append(claim)
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


def best_match_floor() -> float:
    """The floor in force: `LODE_BEST_MATCH_FLOOR`, else `decision.BEST_MATCH_FLOOR`."""
    override = getattr(settings, "LODE_BEST_MATCH_FLOOR", None)
    return BEST_MATCH_FLOOR if override is None else float(override)


def show_best_match(
    verdicts: Sequence[ClaimVerdict], *, audience: Audience, floor: float | None = None
) -> ShownClaim | None:
    """The claim an ask without a verified answer shows as *Best match — check it*: the
    first of `decision.best_match_candidates` whose spans can be located, shown like an
    answer's claim (its quote in context, its passage's link), or None."""
    candidates = best_match_candidates(verdicts, best_match_floor() if floor is None else floor)
    if not candidates:
        return None
    versions = _versions(audience, [s.version_id for v in candidates for s in v.claim.support])
    for verdict in candidates:
        claim = _shown_claim(verdict, versions)
        if claim is not None:
            return claim
    return None


def conflicts_for(
    claims: list[ShownClaim], pack: EvidencePack, audience: Audience
) -> list[dict[str, Any]]:
    """Conflicts among the shown claims (and the pack's items on the same subjects), each
    value with its statement highlighted in context and its verified-opening link."""
    found = find_conflicts(claim_statements(claims), evidence_statements(pack))
    if not found:
        return found
    versions = _versions(audience, [v["version_id"] for c in found for v in c["values"]])
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
            passage = _passage_at(version.pk, start)
            value["segments"] = [
                {"text": t, "highlighted": h}
                for t, h in quote_segments(version.body, start, end, passage)
            ]
            value["evidence_url"] = evidence_url(passage) if passage is not None else ""
            value["version_number"] = version.number
            value["version_created_at"] = version.created_at.isoformat()
    return found


# --- closest passages (abstentions) -------------------------------------------------------------

# Characters of passage text a closest passage shows, and how many of them may come before
# the first question word it holds.
SNIPPET_CHARS = 240
SNIPPET_LEAD = 60
# A Markdown heading line: left out of a snippet, whose heading path is shown beside it.
HEADING_LINE_RE = re.compile(r"^[ \t]{0,3}#{1,6}(?:[ \t].*)?$", re.MULTILINE)


def _joined_lines(text: str) -> str:
    """`text`'s non-empty lines on one line, whitespace collapsed: a line that ends a sentence
    is followed by a space, any other (a list item, a table row, a label) by " · ", so two list
    items never read as one sentence."""
    lines = [" ".join(line.split()) for line in LINE_BREAK_RE.split(text)]
    joined = ""
    for line in filter(None, lines):
        if joined:
            joined += " " if joined[-1] in ".!?:;" else " · "
        joined += line
    return joined


def passage_snippet(text: str, words: Sequence[str], *, limit: int = SNIPPET_CHARS) -> str:
    """A short plain-text excerpt of a passage: its heading lines left out (unless that is
    all it has) and its Markdown made readable (`readable_text`, as quote context is), whitespace
    collapsed, starting shortly before the first of the question's `words` it holds
    (stemmed, as the index matches them; else at the start), cut at word boundaries with "…"
    where cut. Shown escaped, like all note text."""
    body = HEADING_LINE_RE.sub("", text)
    plain = _joined_lines(readable_text(body if body.strip() else text, at_line_start=True))
    wanted = {fold(word) for word in words}
    first = next((m.start() for m in TOKEN_RE.finditer(plain) if fold(m.group(0)) in wanted), 0)
    start = max(0, first - SNIPPET_LEAD)
    if start:
        space = plain.find(" ", start, first)
        start = space + 1 if space >= 0 else first
    end = start + limit
    if end < len(plain):
        space = plain.rfind(" ", start, end)
        end = space if space > start else end
    excerpt = plain[start:end].strip()
    return ("…" if start else "") + excerpt + ("…" if end < len(plain) else "")


def closest_passages(
    items: Sequence[PackItem], words: Sequence[str], *, audience: Audience
) -> list[ClosestPassage]:
    """`items` (the closest pack items, `decision.closest_items`) as an abstention shows
    them. The evidence link is built from the passage row in the audience's spaces (its
    version's hash);
    an item whose passage is gone keeps its snippet with no link."""
    rows = {
        p.pk: p
        for p in Passage.objects.filter(
            pk__in=[item.passage_id for item in items],
            document__space_id__in=audience.sorted_space_ids,
        ).select_related("version")
    }
    return [
        ClosestPassage(
            passage_id=item.passage_id,
            document_id=item.document_id,
            version_id=item.version_id,
            version_number=item.version_number,
            document_title=item.document_title,
            kind=item.kind,
            trust_tier=item.trust_tier,
            heading_path=item.heading_path,
            snippet=passage_snippet(item.text, words),
            evidence_url=evidence_url(rows[item.passage_id]) if item.passage_id in rows else "",
        )
        for item in items
    ]


# --- permalinks ----------------------------------------------------------------------------------


def outcome_from_trace(row: AskTrace) -> AskOutcome:
    """The outcome exactly as stored (for permalinks): nothing is re-run or re-read. The
    withheld documents are the pack items the trace lists as withheld. A dropped claim's
    reason in an older trace may name its version by database id; it is shown naming the
    version by its number, from the stored pack (`gate.relabel_reason`)."""
    answer = row.answer or {}
    trace = Trace.from_row(row)
    pack_items = {item.passage_id: item for item in trace.pack.items} if trace.pack else {}
    labels = version_labels(pack_items.values())
    dropped = [ClaimVerdict.from_dict(v) for v in answer.get("dropped", [])]
    withheld_ids = trace.withheld_passage_ids or []
    best = answer.get("best_match")
    return AskOutcome(
        question=answer.get("question", row.question),
        decision=Decision(answer.get("decision", row.decision)),
        answerer=answer.get("answerer", row.answerer),
        claims=[ShownClaim.from_dict(c) for c in answer.get("claims", [])],
        dropped=[replace(v, reason=relabel_reason(v.reason, labels)) for v in dropped],
        withheld=[pack_items[pid] for pid in withheld_ids if pid in pack_items],
        clarifying_questions=list(answer.get("clarifying_questions", [])),
        clarifying_choices=[
            ClarifyingChoice.from_dict(c) for c in answer.get("clarifying_choices", [])
        ],
        closest=[ClosestPassage.from_dict(c) for c in answer.get("closest", [])],
        conflicts=list(answer.get("conflicts", [])),
        message=answer.get("message", ""),
        error=answer.get("error", ""),
        notes=list(answer.get("notes", [])),
        fetched_version_ids=list(answer.get("fetched_version_ids", [])),
        best_match=ShownClaim.from_dict(best) if isinstance(best, dict) else None,
        trace_id=row.pk,
        elapsed_ms=row.elapsed_ms,
    )
