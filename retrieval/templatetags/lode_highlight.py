"""The one way highlighted text becomes HTML (`templates/partials.html#segments`).

Highlight segments (DESIGN.md invariant 2: pieces that concatenate to exactly the stored
text, some marked) are written here rather than by a template loop: a search page holds
twenty passages of dozens of segments each, and the template engine's per-iteration cost
made that loop the largest part of rendering the page (`bench/request_cpu.py`). The output is
what the loop wrote: each piece escaped (`django.utils.html.escape`, what auto-escaping
applies to a plain string), highlighted ones inside `<mark>`, nothing else added.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


def _field(segment: Any, name: str) -> Any:
    # Segments come as objects (`retrieval.highlight.Segment`, shown supports) or, from a
    # stored answer, as dicts: the template loop read both.
    return segment[name] if isinstance(segment, dict) else getattr(segment, name)


@register.filter
def marked_segments(segments: Iterable[Any] | None) -> SafeString:
    """`segments` as HTML: every piece escaped, highlighted pieces inside `<mark>`."""
    parts: list[str] = []
    for segment in segments or ():
        text = escape(str(_field(segment, "text")))
        parts.append(f"<mark>{text}</mark>" if _field(segment, "highlighted") else text)
    return mark_safe("".join(parts))  # every piece of user text above went through escape()
