"""What is scored against a question: a claim or candidate sentence with its document title,
heading path and search rank."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Candidate:
    """One claim or candidate sentence to score against a question: its text, its document's
    title, its passage's heading path ("" when none; entries joined with " > " or any
    separator) and the pack item's 1-based search rank (0 = pinned, read as the best)."""

    text: str
    title: str = ""
    heading_path: str = ""
    rank: int = 0


def candidate_for(text: str, item: Any) -> Candidate:
    """`text` scored as coming from pack item `item`: its document title, heading path and
    search rank (the one way the answerer, the gate and egress describe a candidate)."""
    return Candidate(
        text=text,
        title=item.document_title,
        heading_path=" > ".join(item.heading_path),
        rank=item.rank,
    )
