"""The URLs of the things lode shows: documents (notes and externals), their versions, evidence
passages, searches and stored answers — one helper per kind of thing.

Every URL is reversed by name from the URLconf, so this module imports no view and sits in
the vocabulary layer: the search pipeline, the answer layer and the pages all link through it.
A document's pages depend on its kind (a note has `/notes/…`, an external `/externals/…`), so
the document and version helpers take the kind and refuse one they do not know; a template
that linked every hit to the note view sent externals to a 404.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse

from notes.models import Document
from retrieval.models import Passage


def document_url(*, kind: str, document_id: int) -> str:
    """The page of the document's current version: the note, or the external's head
    snapshot."""
    if kind == Document.Kind.NOTE:
        return reverse("notes:detail", kwargs={"note_id": document_id})
    if kind == Document.Kind.EXTERNAL:
        return reverse("externals:external", kwargs={"document_id": document_id})
    raise ValueError(f"no page for documents of kind {kind!r}")


def version_url(*, kind: str, document_id: int, version_id: int) -> str:
    """The page of one stored version (the full text): a note version or an external's
    snapshot."""
    if kind == Document.Kind.NOTE:
        return reverse("notes:version", kwargs={"note_id": document_id, "version_id": version_id})
    if kind == Document.Kind.EXTERNAL:
        return reverse(
            "externals:snapshot", kwargs={"document_id": document_id, "version_id": version_id}
        )
    raise ValueError(f"no page for versions of documents of kind {kind!r}")


def evidence_url(passage: Passage) -> str:
    """The evidence page URL for `passage`, pinned to its version's content SHA-256.

    Reads `passage.version.sha256`; select_related("version") avoids a query per hit.
    """
    return reverse(
        "evidence",
        kwargs={
            "document_id": passage.document_id,
            "version_id": passage.version_id,
            "passage_id": passage.pk,
            "sha256": passage.version.sha256,
        },
    )


def search_path(
    *,
    query: str,
    mode: str,
    rerank: str,
    weaker: bool = False,
    advanced: bool = False,
    space: str = "",
) -> str:
    """The search page's path and query string for these parameters; empty query → bare page
    (`?adv=1` alone when `advanced`). `weaker=1` (show meaning-only hits below the similarity
    floor) and `adv=1` (show scores, ranks and offsets) only when asked for, so links made
    before they existed keep their meaning. `space` ("all" or a space id, issue 15) is
    spelled out whenever given, so a shared link searches the space it was made in whoever
    opens it, not whatever space the opener last chose."""
    path = reverse("retrieval:search")
    if not query.strip():
        return f"{path}?adv=1" if advanced else path
    params = {"q": query, "mode": mode, "rerank": rerank}
    if space:
        params["space"] = space
    if weaker:
        params["weaker"] = "1"
    if advanced:
        params["adv"] = "1"
    return f"{path}?{urlencode(params)}"


def permalink_path(trace_id: int | None, *, previous: int | None = None) -> str:
    """The stored answer's URL; with `previous`, the page also compares with that answer."""
    path = reverse("ask-permalink", args=[trace_id])
    return f"{path}?{urlencode({'previous': previous})}" if previous else path
