"""The one safe file reader (`notes.sources.read_source_file`) and both of its users' wording:
the markdown import / verified opening (`read_source_bytes`, the note limit) and the source
scans (`externals.pipeline.read_file`, the source cap). Every refusal is checked through
both, so neither can quietly lose a protection the other keeps.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from externals import pipeline
from notes import sources

LIMIT = 2048


@pytest.fixture(autouse=True)
def _small_limits(settings) -> None:
    settings.LODE_MAX_NOTE_BYTES = LIMIT
    settings.LODE_SOURCE_MAX_FILE_BYTES = LIMIT


@contextmanager
def deadline(seconds: int = 5) -> Iterator[None]:
    """Fail instead of hanging: a reader that waits on a FIFO would block forever."""

    def timed_out(signum: int, frame: object) -> None:
        raise AssertionError(f"the read blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, timed_out)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def refusal_of_both(path: Path) -> tuple[str, str]:
    """What the note reader and the source reader say about `path` (both must refuse)."""
    with pytest.raises(sources.SourceRefused) as note_refusal:
        sources.read_source_bytes(path)
    with pytest.raises(pipeline.ItemFailed) as scan_refusal:
        pipeline.read_file(path)
    return str(note_refusal.value), str(scan_refusal.value)


def test_a_regular_file_is_read_with_its_mtime_and_fingerprint(tmp_path):
    path = tmp_path / "a.md"
    path.write_bytes(b"x" * LIMIT)  # exactly the limit is allowed
    found = sources.read_source_file(path)
    assert found.data == b"x" * LIMIT
    assert found.mtime_ns == path.stat().st_mtime_ns
    assert found.sha256 == sources.sha256_bytes(b"x" * LIMIT)
    data, fingerprint = pipeline.read_file(path)
    assert data == found.data
    assert fingerprint == pipeline.Fingerprint(LIMIT, found.mtime_ns, found.sha256)


def test_a_symbolic_link_is_refused(tmp_path):
    target = tmp_path / "target.md"
    target.write_text("secret")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    assert refusal_of_both(link) == (
        "symbolic links are not followed",
        "symbolic links are not followed",
    )


class LinkAppearsLater(type(Path())):
    """A path whose first `is_symlink()` answers False: a link swapped in after the check."""

    checked = False

    def is_symlink(self) -> bool:
        if not LinkAppearsLater.checked:
            LinkAppearsLater.checked = True
            return False
        return super().is_symlink()


def test_a_link_swapped_in_after_the_check_is_refused_by_o_nofollow(tmp_path):
    target = tmp_path / "target.md"
    target.write_text("secret")
    (tmp_path / "link.md").symlink_to(target)
    for read in (sources.read_source_bytes, pipeline.read_file):
        LinkAppearsLater.checked = False
        with pytest.raises((sources.SourceRefused, pipeline.ItemFailed), match="symbolic link"):
            read(LinkAppearsLater(tmp_path / "link.md"))
        assert LinkAppearsLater.checked  # the pre-check was passed; the kernel refused


@pytest.mark.parametrize("kind", ["folder", "device", "fifo"])
def test_anything_but_a_regular_file_is_refused_without_blocking(tmp_path, kind):
    if kind == "folder":
        path = tmp_path / "folder.md"
        path.mkdir()
    elif kind == "device":
        path = Path(os.devnull)
    else:
        path = tmp_path / "pipe.md"
        os.mkfifo(path)  # no writer: a plain blocking open would wait forever
    with deadline():
        assert refusal_of_both(path) == ("not a regular file", "not a regular file")


def test_a_file_over_the_limit_is_refused_before_reading(tmp_path):
    path = tmp_path / "big.md"
    path.write_bytes(b"x" * (LIMIT + 1))
    with pytest.raises(sources.SourceTooLarge) as refused:
        sources.read_source_file(path)
    assert (refused.value.size, refused.value.limit, refused.value.grew) == (
        LIMIT + 1,
        LIMIT,
        False,
    )
    assert refusal_of_both(path) == (
        "2,049 bytes is over the 2,048-byte note limit",
        "2,049 bytes is over the 2,048-byte cap",
    )


def test_each_caller_applies_its_own_limit(tmp_path, settings):
    path = tmp_path / "mid.md"
    path.write_bytes(b"x" * 3000)
    settings.LODE_SOURCE_MAX_FILE_BYTES = 4096
    assert len(pipeline.read_file(path)[0]) == 3000
    with pytest.raises(sources.SourceTooLarge):
        sources.read_source_bytes(path)


def test_a_file_that_grows_while_read_is_refused(tmp_path, monkeypatch):
    """`fstat` said it fit; the read finds more (it is appended to meanwhile): at most
    limit + 1 bytes are read, and refused."""
    path = tmp_path / "growing.md"
    path.write_bytes(b"x" * (LIMIT * 3))
    real_fstat = os.fstat

    def fstat_before_the_growth(fd: int) -> SimpleNamespace:
        info = real_fstat(fd)
        return SimpleNamespace(st_mode=info.st_mode, st_size=10, st_mtime_ns=info.st_mtime_ns)

    monkeypatch.setattr(sources.os, "fstat", fstat_before_the_growth)
    with pytest.raises(sources.SourceTooLarge) as refused:
        sources.read_source_file(path)
    assert (refused.value.size, refused.value.grew) == (LIMIT + 1, True)
    assert refusal_of_both(path) == (
        "2,049 bytes is over the 2,048-byte note limit",
        "over the 2,048-byte cap (grew while read)",
    )


def test_a_missing_file_is_an_os_error_for_notes_and_a_failure_for_scans(tmp_path):
    missing = tmp_path / "gone.md"
    with pytest.raises(FileNotFoundError):
        sources.read_source_bytes(missing)
    with pytest.raises(pipeline.ItemFailed, match="cannot open: No such file"):
        pipeline.read_file(missing)
    assert pipeline.refingerprint(missing) is None
