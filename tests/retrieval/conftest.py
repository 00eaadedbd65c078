"""Fixtures the retrieval tests share."""

from __future__ import annotations

import pytest


@pytest.fixture
def offline(settings) -> None:
    """No language model configured: only the offline rules answer."""
    settings.LODE_LLM_BASE_URL = ""
