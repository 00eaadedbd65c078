"""Reading source files from disk safely: the one reader behind the markdown import, the
external sources' scans (`externals.pipeline`) and verified evidence opening (which re-reads
a version's file to check it still has the indexed bytes).

ADR 0005: never follow a symbolic link (it can point anywhere: outside the imported folder, at
a secret), read only regular files, and never read more than the caller's byte limit
(`LODE_MAX_NOTE_BYTES` for notes, `LODE_SOURCE_MAX_FILE_BYTES` for sources).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

# O_NOFOLLOW: a link swapped in after any check is refused by the kernel (ELOOP).
# O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever; with it the
# open returns at once and the regular-file check below refuses it. It changes nothing for
# reading a regular file.
OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
SYMLINK_REFUSED = "symbolic links are not followed"
NOT_REGULAR_REFUSED = "not a regular file"


class SourceRefused(Exception):
    """A file lode will not read; the message is the reason shown to the user."""


class SourceTooLarge(SourceRefused):
    """The file is over the caller's byte limit. `size` is its size as `fstat` saw it, or,
    when it `grew` past the limit while being read, the bytes read (limit + 1). The message
    speaks of the note limit; callers with another limit word it themselves."""

    def __init__(self, *, size: int, limit: int, grew: bool) -> None:
        self.size = size
        self.limit = limit
        self.grew = grew
        super().__init__(f"{size:,} bytes is over the {limit:,}-byte note limit")


@dataclass(frozen=True, slots=True)
class SourceFile:
    """The bytes of one regular file and its modification time, both from one open."""

    data: bytes
    mtime_ns: int

    @property
    def sha256(self) -> str:
        return sha256_bytes(self.data)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_source_file(path: Path, *, limit: int | None = None) -> SourceFile:
    """The bytes and mtime of the regular file at `path`, at most `limit` bytes
    (`LODE_MAX_NOTE_BYTES` when not given).

    Raises `SourceRefused` for a symbolic link (checked before opening and again by the
    kernel through `O_NOFOLLOW`, so a link swapped in between is refused too), for anything
    that is not a regular file (checked through the open descriptor: a FIFO, device, socket
    or folder), and `SourceTooLarge` for a file over the limit, whether `fstat` says so or
    it grows past it while read (at most limit + 1 bytes are ever read). `OSError` (e.g.
    `FileNotFoundError`, `PermissionError`) when it cannot be opened or read.
    """
    if limit is None:
        limit = settings.LODE_MAX_NOTE_BYTES
    if path.is_symlink():
        raise SourceRefused(SYMLINK_REFUSED)
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError:
        if path.is_symlink():  # ELOOP: became a link between the two checks
            raise SourceRefused(SYMLINK_REFUSED) from None
        raise
    try:
        # Checked on the descriptor, before any file object is made of it (that would fail
        # differently for a folder), so what is checked is exactly what is read.
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SourceRefused(NOT_REGULAR_REFUSED)
        if info.st_size > limit:
            raise SourceTooLarge(size=info.st_size, limit=limit, grew=False)
        with open(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew since fstat()
        raise SourceTooLarge(size=len(data), limit=limit, grew=True)
    return SourceFile(data=data, mtime_ns=info.st_mtime_ns)


def read_source_bytes(path: Path) -> bytes:
    """The raw bytes of a note's source file under the note limit; see `read_source_file`
    for what is refused and raised."""
    return read_source_file(path).data
