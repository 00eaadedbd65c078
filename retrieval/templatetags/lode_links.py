"""Template filters for links to documents and stored answers, through retrieval/links.py
(the one place that knows which page each kind of document has), so a template never picks
a document's or an answer's URL name itself.
"""

from __future__ import annotations

from django import template

from notes.models import Document
from retrieval import links

register = template.Library()


@register.filter
def document_url(document: Document) -> str:
    """The page of `document`'s current version: a note, or an external's head snapshot."""
    return links.document_url(kind=document.kind, document_id=document.pk)


@register.filter
def answer_url(trace_id: int) -> str:
    """The permalink of the stored answer `trace_id` (an `AskTrace` id)."""
    return links.permalink_path(trace_id)
