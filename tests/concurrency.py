"""Running the same work from several threads at once, for race tests (one database
connection per thread, as concurrent requests or workers would have)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection

# Row locks between concurrent connections are PostgreSQL's; SQLite has one writer and the
# in-memory test database raises "table is locked" between threads.
postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="row locks between concurrent connections are PostgreSQL's (SQLite has one writer)",
)


def race(calls: list[Callable[[], object]], *, timeout: float = 300) -> list[object]:
    """Run each zero-argument callable in its own thread, all released at once; each thread
    uses (and closes) its own database connection. Returns results or exceptions, in order."""
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)

    def run(index: int, call: Callable[[], object]) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = call()
        except Exception as exc:
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not any(thread.is_alive() for thread in threads)
    return results
