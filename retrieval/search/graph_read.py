"""Reading the graph: the one place edges become visible to someone.

Every reader of edges — backlinks on a page, graph expansion in search and ask, the
restricted graph query, the pictures — starts from `visible_edges(audience)`: eligibility
applies to both ends of every edge. The `from` end (a document, or for `contains` a
source) must be live and in one of the audience's spaces; the `to` end too, except for an
unresolved edge (no `to` document), which its linking document's readers see as
"unresolved".

An edge's trust tier (the trust gradient, DESIGN.md): a declared edge (`links_to`,
`contains`, `annotates`) carries the tier of the document it was read from; an inferred one
(`mentions`, `related`) is at the bottom, "inferred edge", whatever it connects.
"""

from __future__ import annotations

from django.db.models import F, Q, QuerySet

from notes.models import TrustTier
from retrieval.eligibility import Audience
from retrieval.models import INFERRED_EDGE_KINDS, Edge

DECLARED_KINDS = (Edge.Kind.LINKS_TO, Edge.Kind.CONTAINS, Edge.Kind.ANNOTATES)
INFERRED_KINDS = tuple(sorted(INFERRED_EDGE_KINDS))
ALL_KINDS = tuple(Edge.Kind.values)


def visible_edges(audience: Audience) -> QuerySet[Edge]:
    """The edges both of whose ends the audience may see (unresolved ones: whose `from`
    end it may see). Deleted documents hide their edges both ways, and so does a `from`
    version that is no longer its document's head."""
    spaces = audience.sorted_space_ids
    # An edge is read from its document's head; one whose version is no longer head (the
    # derivation removes those in the same transaction; this guards against drift) is not shown.
    from_document = Q(
        from_document__isnull=False,
        from_document__space_id__in=spaces,
        from_document__deleted_at__isnull=True,
        from_version_id=F("from_document__head_id"),
    )
    from_source = Q(from_document__isnull=True, from_source__space_id__in=spaces)
    to_end = Q(to_document__isnull=True) | Q(
        to_document__space_id__in=spaces, to_document__deleted_at__isnull=True
    )
    return Edge.objects.filter(from_document | from_source).filter(to_end)


def resolved_edges(audience: Audience) -> QuerySet[Edge]:
    """`visible_edges` that name a document at both ends (what traversal follows)."""
    return visible_edges(audience).filter(
        resolution=Edge.Resolution.RESOLVED, to_document__isnull=False
    )


def edge_tier(kind: str, from_tier: str | None) -> str:
    """The trust tier of an edge: inferred kinds are "inferred edge"; a declared edge has
    the tier of the document it was read from (a source's `contains` edge: the tier of the
    externals it mirrors, which is what `from_tier` should then be)."""
    if kind in INFERRED_EDGE_KINDS:
        return TrustTier.INFERRED
    return from_tier or TrustTier.EXTERNAL_CURRENT


def basis_of(edge: Edge) -> dict[str, object]:
    """An edge's basis as shown to people and in the API: the rule and its version, whether
    it is inferred, and where it was read (the passage and code-point span of a declared
    link, the similarity of a `related` edge, the rule's own details)."""
    basis: dict[str, object] = {
        "rule": edge.rule,
        "rule_version": edge.rule_version,
        "inferred": edge.kind in INFERRED_EDGE_KINDS,
    }
    if edge.from_version_id is not None:
        basis["version_id"] = edge.from_version_id
    if edge.passage_id is not None:
        basis["passage_id"] = edge.passage_id
    if edge.start is not None and edge.end is not None:
        basis["span"] = {"start": edge.start, "end": edge.end, "unit": "code points"}
    if edge.score is not None:
        basis["score"] = round(edge.score, 4)
    for key, value in (edge.basis or {}).items():
        basis.setdefault(key, value)
    return basis
