"""Template filters of the answer page (templates/ask/ask.html).

They format data the stored answer already holds (ISO timestamps, trust tier values, pack
items); none of them marks anything safe, so note and model text stays auto-escaped.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

from retrieval.trust import PENALTY
from retrieval.trust import tier_label as trust_tier_label

register = template.Library()


@register.filter
def isodatetime(value: str | datetime | None) -> datetime | None:
    """An ISO-8601 string (how answers store `version_created_at`) as an aware datetime."""
    if isinstance(value, datetime):
        return value
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, timezone.utc)


@register.filter
def age(value: str | datetime | None) -> str:
    """How old a snapshot is, coarsely ("3 days", "2 hours"); "" when unknown."""
    moment = isodatetime(value)
    if moment is None:
        return ""
    return timesince(moment, timezone.now(), depth=1)


@register.filter
def tier_label(item: Any, labels: dict[int, str] | None = None) -> str:
    """The trust tier of a cited item (a support, closest passage or conflict value: a dict
    or an object with `document_id` and `trust_tier`) as the reader sees it: its entry in
    `labels` (`retrieval.trust.document_tier_labels`, "Your note" / "Note by carol"), else
    the tier's words naming nobody ("Note"). A bare tier value gets the latter too."""
    if isinstance(item, str):
        return trust_tier_label(item, mine=False)
    get = (
        item.get
        if isinstance(item, dict)
        else lambda name, default=None: getattr(item, name, default)
    )
    found = (labels or {}).get(get("document_id"))
    return found or trust_tier_label(str(get("trust_tier", "")), mine=False)


@register.filter
def by_trust(values: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Conflicting values, higher trust tier first (the order trust.py ranks by); stable,
    so values of one tier keep the order the answer stored."""
    worst = max(PENALTY.values()) + 1
    return sorted(values or (), key=lambda v: PENALTY.get(v.get("trust_tier", ""), worst))


@register.filter
def documents(items: Iterable[Any]) -> list[Any]:
    """Pack items reduced to one per document (withheld documents are listed once, not once
    per passage), in first-seen order. Works on PackItems and on their stored dicts."""
    seen: set[int] = set()
    out = []
    for item in items or ():
        document_id = item["document_id"] if isinstance(item, dict) else item.document_id
        if document_id not in seen:
            seen.add(document_id)
            out.append(item)
    return out
