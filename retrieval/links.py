"""The URLs of the things lode shows: documents (notes and externals), their versions, evidence
passages, searches and stored answers — one helper per kind of thing.

Every URL is reversed by name from the URLconf, so this module imports no view and sits in
the vocabulary layer: the search pipeline, the answer layer and the pages all link through it.
A document's pages depend on its kind (a note has `/notes/…`, an external `/externals/…`), so
the document and version helpers take the kind and refuse one they do not know; a template
that linked every hit to the note view sent externals to a 404.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from urllib.parse import urlencode

from django.urls import get_script_prefix, get_urlconf, reverse

from lode_site.ids import MAX_ID
from notes.models import Document
from retrieval.models import Passage

# Stand-ins reversed once per URL name: the largest ids (19 digits, within MAX_ID, so `<id:…>`
# accepts them) and a hex string for `<str:…>`. None can occur in a pattern's own text.
_ID_STAND_INS = tuple(str(MAX_ID - 9 + n) for n in range(9))
_HEX_STAND_INS = tuple(f"{'f' * 62}0{n}" for n in range(9))
_HEX = re.compile(r"[0-9a-f]{1,128}")


@cache
def _url_parts(
    name: str, keys: tuple[str, ...], prefix: str, urlconf: str | None
) -> tuple[str, ...]:
    """The URL of `name` cut around its arguments: literal parts, to be interleaved with the
    argument values in `keys` order. Reversed once per (name, script prefix, URLconf)."""
    stand_ins = {
        key: _ID_STAND_INS[i] if key != "sha256" else _HEX_STAND_INS[i]
        for i, key in enumerate(keys)
    }
    url = reverse(name, urlconf=urlconf, kwargs=stand_ins)
    parts = []
    for key in keys:
        before, found, url = url.partition(stand_ins[key])
        if not found:
            raise ValueError(f"{name}: argument {key} not found once in its reversed URL")
        parts.append(before)
    parts.append(url)
    return tuple(parts)


def _reverse_ids(name: str, kwargs: Mapping[str, int | str]) -> str:
    """`reverse(name, kwargs=kwargs)` for URLs whose arguments are database ids and lowercase
    hex digests (`sha256`), without walking the resolver for each call.

    Why: a search page links every hit twice (its version and its evidence), and Django's
    `reverse()` costs ~37 µs a call — ~1.5 ms of CPU for a page of 20 hits (bench/README.md).
    The URL is reversed once with stand-in values and cut around them; each call then only
    joins strings. A value the stand-ins cannot stand for (not an id in range, not hex) goes
    through `reverse()` itself, which raises as it always did.
    """
    values = []
    for key, value in kwargs.items():
        if key == "sha256":
            if not (isinstance(value, str) and _HEX.fullmatch(value)):
                return reverse(name, kwargs=kwargs)
            values.append(value)
        elif isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_ID:
            values.append(str(value))
        else:
            return reverse(name, kwargs=kwargs)
    parts = _url_parts(name, tuple(kwargs), get_script_prefix(), get_urlconf())
    joined = [parts[0]]
    for value, part in zip(values, parts[1:], strict=True):
        joined += (value, part)
    return "".join(joined)


def document_url(*, kind: str, document_id: int) -> str:
    """The page of the document's current version: the note, or the external's head
    snapshot."""
    if kind == Document.Kind.NOTE:
        return _reverse_ids("notes:detail", {"note_id": document_id})
    if kind == Document.Kind.EXTERNAL:
        return _reverse_ids("externals:external", {"document_id": document_id})
    raise ValueError(f"no page for documents of kind {kind!r}")


def version_url(*, kind: str, document_id: int, version_id: int) -> str:
    """The page of one stored version (the full text): a note version or an external's
    snapshot."""
    if kind == Document.Kind.NOTE:
        return _reverse_ids("notes:version", {"note_id": document_id, "version_id": version_id})
    if kind == Document.Kind.EXTERNAL:
        return _reverse_ids(
            "externals:snapshot", {"document_id": document_id, "version_id": version_id}
        )
    raise ValueError(f"no page for versions of documents of kind {kind!r}")


def evidence_url(passage: Passage) -> str:
    """The evidence page URL for `passage`, pinned to its version's content SHA-256.

    Reads `passage.version.sha256`; select_related("version") avoids a query per hit.
    """
    return _reverse_ids(
        "evidence",
        {
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
    before they existed keep their meaning. `space` ("all" or a space id) is
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
