"""Fixtures the externals tests share: alice's source and a mirrored external with two
snapshots, the older one three days old. A test module that needs another kind of source
defines its own `source` fixture, which takes precedence."""

from __future__ import annotations

from datetime import timedelta

import pytest

from externals.models import Source
from notes.models import Document
from tests.factories import make_source, make_source_external


@pytest.fixture
def source(alice) -> Source:
    return make_source(alice)


@pytest.fixture
def external(source) -> Document:
    return make_source_external(
        source,
        bodies=("First snapshot: rotate certs.\n", "Second snapshot: rotate certs weekly.\n"),
        age=timedelta(days=3),
    )
