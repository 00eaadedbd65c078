"""Fixtures the index tests share."""

from __future__ import annotations

import pytest

from retrieval.index.embeddings import Embedder, get_embedder


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    """The real embedding model (MODELS.md), loaded once per module."""
    return get_embedder()
