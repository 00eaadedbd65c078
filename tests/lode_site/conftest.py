"""Fixtures of the tests that start lode as a child process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.factories import kill_leftovers


@pytest.fixture
def started() -> Iterator[dict]:
    """Tracks what a test started (`record["pids"]`) so that it is killed even when the test
    fails."""
    record: dict = {"pids": set()}
    yield record
    kill_leftovers(record["pids"])
