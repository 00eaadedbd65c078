"""Passages and their indexes, search, verified evidence and cited answers.

Packages by layer, lowest first (docs/architecture.md; tests/test_architecture.py checks it):
the vocabulary modules here (`text`, `query`, `eligibility`, `highlight`, `trust`, `links`)
→ `index/` → `search/` → `answer/` → `web/`. A module imports only from its own layer and
the layers below it, never upward, and there are no import cycles.
"""
