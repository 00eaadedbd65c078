"""The meta-knowledge layer, kept with the index: each document's date and kind, the alias
dictionary mined from the notes, and the per-space catalog (`extract.py` reads them from
text; `store.py` keeps the rows in step with head versions; `aliases.py` expands queries;
`catalog.py` summarises what a reader's notes hold about a topic)."""

from retrieval.meta.store import document_dates, document_kinds

__all__ = ["document_dates", "document_kinds"]
