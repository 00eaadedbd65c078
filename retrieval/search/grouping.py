"""Search hits grouped by document: a document's best passage stands for it, and its
further passages follow under it ("3 more in this note"), so one long note cannot fill a
page.

Pure: the ranking is kept. Groups are ordered by their best passage's position in the
ranked hits, and the passages of a group keep their ranked order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.search.pipeline import Hit

# Passages a grouped page searches for each document it shows: enough that the notes after a
# long one still reach the page, few enough to highlight and bound quickly.
PASSAGES_PER_GROUP = 4


@dataclass(frozen=True)
class HitGroup:
    """One document's hits: `best` (its highest-ranked) and `more` (the rest, in rank
    order)."""

    best: Hit
    more: tuple[Hit, ...] = ()

    @property
    def document_id(self) -> int:
        return self.best.passage.document_id


def group_by_document(hits: Sequence[Hit], *, max_groups: int | None = None) -> list[HitGroup]:
    """`hits` (ranked) as one group per document, in the order of each document's first
    hit; at most `max_groups` groups (the later documents' hits are left out)."""
    order: list[int] = []
    members: dict[int, list[Hit]] = {}
    for hit in hits:
        document_id = hit.passage.document_id
        if document_id not in members:
            if max_groups is not None and len(order) >= max_groups:
                continue
            order.append(document_id)
            members[document_id] = []
        members[document_id].append(hit)
    return [HitGroup(best=members[d][0], more=tuple(members[d][1:])) for d in order]
