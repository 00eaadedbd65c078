"""Egress control: what may leave the machine, and the log row written before it does
(issue 5 item 6; DESIGN.md invariant 8; seeds/lode-retrieval.md, the no-egress and
`egress_log` paragraphs).

Two steps, used by every remote caller (the chat answerer, the LLM judge, later tools):

1. `plan_egress(pack)` splits an evidence pack into what may be sent and what is withheld.
   An item is withheld when its document is no-egress — read again from the database, not
   only from the flag copied onto the pack item, so a pack built before the flag was set (or
   by code that forgot to copy it) still cannot leak. Withheld items stay visible to the
   user as "present, withheld from cloud synthesis"; they are never silently lost.
2. `log_egress(...)` writes the `EgressLog` row — time, user, destination host[:port],
   purpose, the documents/versions and characters sent, the redaction and withheld counts, the
   SHA-256 of the exact request body — and it must be *committed* before the caller sends
   the request, so a crash or hang mid-request still leaves the record. A row written inside
   an open transaction is not committed until that transaction ends (possibly never, if it
   rolls back), so `log_egress` refuses to run inside one (`EgressLogError`) rather than
   write a row that might vanish; the caller then does not send. Test-case transactions
   (pytest-django's `db`) are the one exception, since tests cannot run otherwise.

Redaction of secrets happens in `retrieval.redaction`; the egress blocks (each parent block
sent once) are built by `retrieval.evidence_pack.egress_blocks`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.db import DEFAULT_DB_ALIAS, transaction

from retrieval.answer_types import EvidencePack, PackItem
from retrieval.models import EgressLog

WITHHELD_LABEL = "present, withheld from cloud synthesis"


class EgressLogError(RuntimeError):
    """The egress row could not be committed before sending; the request must not be sent."""


@dataclass
class EgressPlan:
    """The pack split at the egress boundary, both halves in pack order."""

    sendable: list[PackItem] = field(default_factory=list)
    withheld: list[PackItem] = field(default_factory=list)

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
    """The ids among `document_ids` whose document is no-egress, read from the database."""
    from notes.models import Document

    ids = set(document_ids)
    if not ids:
        return set()
    return set(Document.objects.filter(pk__in=ids, no_egress=True).values_list("pk", flat=True))


def plan_egress(pack: EvidencePack) -> EgressPlan:
    """Split `pack` into sendable and withheld items. An item is withheld when its document is
    no-egress, by the item's own flag *or* the document row (either one is enough: the
    fail-closed direction)."""
    blocked = no_egress_document_ids(item.document_id for item in pack.items)
    plan = EgressPlan()
    for item in pack.items:
        if item.no_egress or item.document_id in blocked:
            plan.withheld.append(item)
        else:
            plan.sendable.append(item)
    return plan


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
    user: Any,
    destination_url: str,
    purpose: str,
    items: list[PackItem],
    chars_sent: int,
    redaction_count: int,
    withheld_count: int,
    request_body: bytes,
    item_chars: Mapping[int, int] | None = None,
    using: str = DEFAULT_DB_ALIAS,
) -> EgressLog:
    """Write and commit the egress row for one request about to be sent to `destination_url`.

    Call it immediately before each send; raises EgressLogError (and writes nothing) when
    called inside an open transaction, because the row would not be committed first.
    `user` may be None or anonymous (stored as no user).
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
        items=egress_items(items, item_chars),
        chars_sent=max(0, int(chars_sent)),
        redaction_count=max(0, int(redaction_count)),
        withheld_count=max(0, int(withheld_count)),
        request_sha256=request_sha256(request_body),
    )
