"""Egress control: what may leave the machine, and the log row written before it does
(DESIGN.md invariant 8; seeds/lode-retrieval.md, the no-egress and
`egress_log` paragraphs).

Two steps, used by every remote caller (the chat answerer, the LLM judge, later tools):

1. `plan_egress(pack, question=…)` is the egress decision, made once per ask by the
   orchestrator (`retrieval.answer.ask`) and handed to whoever sends. It splits the evidence
   pack into what may be sent and what is withheld: an item is withheld when its document is
   no-egress — read again from the database, not only from the flag copied onto the pack
   item, so a pack built before the flag was set (or by code that forgot to copy it) still
   cannot leak. Withheld items stay visible to the user as "present, withheld from cloud
   synthesis"; they are never silently lost. For what may be sent, the plan holds the
   outgoing content redacted once (`retrieval.answer.redaction`): the question, and each
   parent block (`retrieval.answer.pack.egress_blocks`, sent once however many passages lie
   in it) with its document's title. `EgressPlan.clears` says whether a claim's cited
   versions may reach a remote judge.
2. `log_egress(...)` writes the `EgressLog` row — time, user, destination host[:port],
   purpose, the documents/versions and characters sent, the redaction and withheld counts, the
   SHA-256 of the exact request body — and it must be *committed* before the caller sends
   the request, so a crash or hang mid-request still leaves the record. A row written inside
   an open transaction is not committed until that transaction ends (possibly never, if it
   rolls back), so `log_egress` refuses to run inside one (`EgressLogError`) rather than
   write a row that might vanish; the caller then does not send. Test-case transactions
   (pytest-django's `db`) are the one exception, since tests cannot run otherwise.

The chat client (`retrieval.answer.llm.ChatClient`) calls step 2 before every attempt and runs
redaction again as an idempotent backstop (it finds nothing in planned content).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import DEFAULT_DB_ALIAS, transaction

from retrieval.answer.pack import EgressBlock, egress_blocks, version_bodies
from retrieval.answer.redaction import redact
from retrieval.answer.types import EvidencePack, PackItem
from retrieval.models import EgressLog

WITHHELD_LABEL = "present, withheld from cloud synthesis"


class EgressLogError(RuntimeError):
    """The egress row could not be committed before sending; the request must not be sent."""


@dataclass(frozen=True)
class OutgoingBlock:
    """One parent block as it leaves the machine: its text and its document's title, both
    redacted, and the pack items inside it (each keeps its own range, which citations pin)."""

    block: EgressBlock
    text: str
    title: str
    items: tuple[PackItem, ...]


@dataclass
class EgressPlan:
    """The pack split at the egress boundary, both halves in pack order, and the outgoing
    content of the sendable half redacted once: the question, each parent block and title.
    `bodies` holds the full stored bodies of the sendable versions (the gate verifies quotes
    against them; they are never sent whole)."""

    sendable: list[PackItem] = field(default_factory=list)
    withheld: list[PackItem] = field(default_factory=list)
    # Cleared for egress but not needed: (item, reason) — below the relevance floor or past
    # the character budget. Never sent; the egress row lists only `sendable`.
    not_sent: list[tuple[PackItem, str]] = field(default_factory=list)
    question: str = ""
    blocks: list[OutgoingBlock] = field(default_factory=list)
    bodies: dict[int, str] = field(default_factory=dict)
    redaction_count: int = 0

    def item_chars(self) -> dict[int, int]:
        """{version_id: characters of evidence sent}, as the egress row records them."""
        chars: dict[int, int] = {}
        for outgoing in self.blocks:
            version_id = outgoing.block.version_id
            chars[version_id] = chars.get(version_id, 0) + len(outgoing.text)
        return chars

    def sent_versions(self) -> dict[int, str]:
        """{version_id: full stored body} of every version at least one block of which is
        sent: what an answer from this plan may be verified against."""
        sent = {outgoing.block.version_id for outgoing in self.blocks}
        return {vid: body for vid, body in self.bodies.items() if vid in sent}

    def clears(self, version_ids: Iterable[int]) -> bool:
        """Whether the content of every one of `version_ids` may leave the machine: each is
        the version of a sendable item (withholding is per document, so a version is either
        wholly cleared or wholly withheld)."""
        cleared = {item.version_id for item in self.sendable}
        return all(version_id in cleared for version_id in version_ids)

    def withheld_documents(self) -> list[dict[str, Any]]:
        """One entry per withheld document (first item's title), for pages and traces."""
        seen: dict[int, dict[str, Any]] = {}
        for item in self.withheld:
            seen.setdefault(
                item.document_id,
                {
                    "document_id": item.document_id,
                    "version_id": item.version_id,
                    "document_title": item.document_title,
                    "label": WITHHELD_LABEL,
                },
            )
        return list(seen.values())


def no_egress_document_ids(document_ids: Iterable[int]) -> set[int]:
    """The ids among `document_ids` that must not leave the machine, read from the database:
    the document is no-egress itself (or through its source), or its space is (a space
    admin's setting covers every document in it)."""
    from django.db.models import Q

    from notes.models import Document

    ids = set(document_ids)
    if not ids:
        return set()
    blocked = Document.objects.filter(Q(no_egress=True) | Q(space__no_egress=True), pk__in=ids)
    return set(blocked.values_list("pk", flat=True))


BELOW_FLOOR = "below the relevance floor"
OVER_BUDGET = "over the egress budget"


def plan_egress(
    pack: EvidencePack,
    *,
    question: str = "",
    relevance: Mapping[int, float] | None = None,
    floor: float = 0.0,
    max_chars: int | None = None,
) -> EgressPlan:
    """Split `pack` into sendable, withheld and not-needed items, and redact what is sent:
    `question` and the parent blocks of the sendable items with their documents' titles. An
    item is withheld when its document is no-egress, by the item's own flag *or* the document
    row (either one is enough: the fail-closed direction). With `relevance` ({passage_id:
    score}), an item scoring below `floor` (or missing from it) is not sent, and the rest go
    best first while their parent blocks fit `max_chars`; without it every cleared item goes,
    in pack order (callers that have no scorer, e.g. the judge's own plan for a local answer)."""
    blocked = no_egress_document_ids(item.document_id for item in pack.items)
    plan = EgressPlan()
    cleared: list[PackItem] = []
    for item in pack.items:
        if item.no_egress or item.document_id in blocked:
            plan.withheld.append(item)
        else:
            cleared.append(item)
    plan.question, plan.redaction_count = redact(question)
    bodies = version_bodies(item.version_id for item in cleared)
    plan.sendable = _needed(cleared, bodies, plan, relevance, floor, max_chars)
    plan.bodies = {vid: body for vid, body in bodies.items() if vid in _versions(plan.sendable)}
    by_passage = {item.passage_id: item for item in plan.sendable}
    for block in egress_blocks(plan.sendable, plan.bodies):
        items = tuple(by_passage[passage_id] for passage_id in block.passage_ids)
        if max_chars is not None:
            block = capped_block(block, items, plan.bodies, max_chars)
        text, text_redactions = redact(block.text)
        title, title_redactions = redact(items[0].document_title)
        plan.redaction_count += text_redactions + title_redactions
        plan.blocks.append(OutgoingBlock(block=block, text=text, title=title, items=items))
    return plan


def capped_block(
    block: EgressBlock, items: Sequence[PackItem], bodies: Mapping[int, str], max_chars: int
) -> EgressBlock:
    """`block`, or when it is longer than `max_chars`, the part of it around its `items`: from
    the first item's start, at most `max_chars` long, widened back towards the block's start
    when the items are shorter (a whole heading section of a large note never goes out for
    one passage in it)."""
    if len(block.text) <= max_chars:
        return block
    body = bodies.get(block.version_id, "")
    inside = [i for i in items if block.start <= i.start < block.end] or list(items)
    start = max(block.start, min(i.start for i in inside))
    end = min(block.end, max(i.end for i in inside), start + max_chars)
    start = max(block.start, end - max_chars) if end - start < max_chars else start
    text = body[start:end] if 0 <= start < end <= len(body) else block.text[:max_chars]
    return EgressBlock(
        version_id=block.version_id,
        document_id=block.document_id,
        start=start,
        end=start + len(text),
        text=text,
        passage_ids=list(block.passage_ids),
    )


def _versions(items: Iterable[PackItem]) -> set[int]:
    return {item.version_id for item in items}


def _needed(
    cleared: list[PackItem],
    bodies: Mapping[int, str],
    plan: EgressPlan,
    relevance: Mapping[int, float] | None,
    floor: float,
    max_chars: int | None,
) -> list[PackItem]:
    """The cleared items worth sending, in pack order; the others go to `plan.not_sent`."""
    if relevance is None:
        return cleared
    above: list[PackItem] = []
    for item in cleared:
        score = relevance.get(item.passage_id)
        if score is None or not math.isfinite(score) or score < floor:
            plan.not_sent.append((item, BELOW_FLOOR))
        else:
            above.append(item)
    if max_chars is None:
        return above
    kept: set[int] = set()
    blocks_sent: set[tuple[int, int, int]] = set()
    used = 0
    for item in sorted(above, key=lambda i: -relevance[i.passage_id]):
        # The block this item would send (egress_blocks sends each parent block once, cut to
        # the budget around its items when it is larger: `capped_block`).
        block = capped_block(egress_blocks([item], bodies)[0], [item], bodies, max_chars)
        key = (block.version_id, block.start, block.end)
        cost = 0 if key in blocks_sent else len(block.text)
        if kept and used + cost > max_chars:
            plan.not_sent.append((item, OVER_BUDGET))
            continue
        kept.add(item.passage_id)
        blocks_sent.add(key)
        used += cost
    return [item for item in above if item.passage_id in kept]


def destination_host(url: str) -> str:
    """host[:port] of `url`, without any user:password@ part (never logged)."""
    netloc = urlsplit(url).netloc
    return netloc.rsplit("@", 1)[-1].lower()


def request_sha256(body: bytes) -> str:
    """The SHA-256 of the exact request body bytes, as stored on the egress row."""
    return hashlib.sha256(body).hexdigest()


def egress_items(
    items: Iterable[PackItem], item_chars: Mapping[int, int] | None = None
) -> list[dict[str, int]]:
    """[{document_id, version_id, chars}] per version, in first-appearance order. `chars` is
    `item_chars[version_id]` when the caller knows what it actually sent for that version (the
    chat answerer sends parent blocks, not passages); otherwise the items' text lengths."""
    rows: dict[int, dict[str, int]] = {}
    for item in items:
        row = rows.setdefault(
            item.version_id,
            {"document_id": item.document_id, "version_id": item.version_id, "chars": 0},
        )
        if item_chars is None:
            row["chars"] += len(item.text)
    if item_chars is not None:
        for version_id, row in rows.items():
            row["chars"] = int(item_chars.get(version_id, 0))
    return list(rows.values())


def _inside_transaction(using: str) -> bool:
    """Whether a row written now would wait for an enclosing transaction to commit. A test
    case's own wrapping transaction does not count (Django marks it `_from_testcase`)."""
    connection = transaction.get_connection(using)
    if not connection.in_atomic_block:
        return False
    return any(not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks)


def log_egress(
    *,
    user: AbstractBaseUser | AnonymousUser | None,
    destination_url: str,
    purpose: str,
    items: list[PackItem],
    chars_sent: int,
    redaction_count: int,
    withheld_count: int,
    request_body: bytes,
    item_chars: Mapping[int, int] | None = None,
    carried: Sequence[Mapping[str, int]] = (),
    using: str = DEFAULT_DB_ALIAS,
) -> EgressLog:
    """Write and commit the egress row for one request about to be sent to `destination_url`.

    Call it immediately before each send; raises EgressLogError (and writes nothing) when
    called inside an open transaction, because the row would not be committed first.
    `user` may be None or anonymous (stored as no user). `carried` lists further
    {document_id, version_id, chars} rows the request carries outside a pack (tool results).
    """
    if purpose not in EgressLog.Purpose.values:
        raise ValueError(f"unknown egress purpose {purpose!r}")
    if _inside_transaction(using):
        raise EgressLogError(
            "egress log row cannot be committed inside an open transaction; "
            "call the remote answerer outside transaction.atomic()"
        )
    is_user = user is not None and getattr(user, "is_authenticated", False)
    return EgressLog.objects.using(using).create(
        user=user if is_user else None,
        destination_host=destination_host(destination_url)[:255],
        purpose=purpose,
        items=egress_items(items, item_chars) + [dict(row) for row in carried],
        chars_sent=max(0, int(chars_sent)),
        redaction_count=max(0, int(redaction_count)),
        withheld_count=max(0, int(withheld_count)),
        request_sha256=request_sha256(request_body),
    )
