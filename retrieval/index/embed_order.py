"""Which pending passages the worker embeds next: a fair share for every space.

The worker embeds a window of passages at a time (`sync.sync_vectors`). Taken in id order, a
large import in one space (thousands of passages) would keep every other space's new notes
out of meaning search until all of it was embedded — minutes. Instead each window is taken
round-robin across the spaces with pending passages, oldest first within each space: one
passage of each space in turn, the spaces in the order of their oldest pending passage. A
one-paragraph note saved in another space during an import is in the next window.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber

from retrieval.models import Passage


def round_robin(rows: Iterable[tuple[int, int]], size: int) -> list[int]:
    """Up to `size` passage ids from (passage id, space id) rows: the oldest (lowest id) of
    each space, then the second of each, and so on; within a turn the spaces go in the order
    of their oldest passage. Deterministic for any order of `rows`."""
    by_space: dict[int, list[int]] = defaultdict(list)
    for passage_id, space_id in rows:
        by_space[space_id].append(passage_id)
    queues = sorted((sorted(ids) for ids in by_space.values()), key=lambda ids: ids[0])
    picked: list[int] = []
    turn = 0
    while len(picked) < size and queues:
        queues = [ids for ids in queues if turn < len(ids)]
        for ids in queues:
            if len(picked) == size:
                break
            picked.append(ids[turn])
        turn += 1
    return picked


def next_window(pending: QuerySet[Passage], size: int) -> list[int]:
    """The next `size` passages to embed from `pending` (head passages without a vector),
    shared fairly between spaces (`round_robin`).

    One statement: the database numbers each space's pending passages by id and returns at
    most `size` of each, so what is read is bounded by `size` × spaces with a backlog,
    whatever the backlog's size.
    """
    ranked = (
        pending.order_by()
        .annotate(
            turn=Window(
                RowNumber(),
                partition_by=[F("document__space_id")],
                order_by=F("pk").asc(),
            )
        )
        .filter(turn__lte=size)
        .values_list("pk", "document__space_id")
    )
    return round_robin(ranked, size)
