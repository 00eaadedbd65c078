"""Reading source files from disk: the rules the markdown import applies, shared with verified
evidence opening (which re-reads a version's file to check it still has the indexed bytes).

ADR 0005: never follow a symbolic link (it can point anywhere: outside the imported folder, at
a secret), and never read more than `LODE_MAX_NOTE_BYTES`.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from django.conf import settings


class SourceRefused(Exception):
    """A file lode will not read; the message is the reason shown to the user."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_source_bytes(path: Path) -> bytes:
    """The raw bytes of the regular file at `path`.

    Raises `SourceRefused` for a symbolic link, something that is not a regular file, or a
    file over `LODE_MAX_NOTE_BYTES`; `OSError` (e.g. `FileNotFoundError`) when it cannot be
    read. The file is opened with `O_NOFOLLOW` and checked through its descriptor, so a link
    swapped in after the first check is refused too, and at most limit + 1 bytes are read.
    """
    if path.is_symlink():
        raise SourceRefused("symbolic links are not followed")
    limit = settings.LODE_MAX_NOTE_BYTES
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if path.is_symlink():  # ELOOP: became a link between the two checks
            raise SourceRefused("symbolic links are not followed") from None
        raise exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SourceRefused("not a regular file")
        if info.st_size > limit:
            raise SourceRefused(f"{info.st_size:,} bytes is over the {limit:,}-byte note limit")
        data = handle.read(limit + 1)
    if len(data) > limit:  # grew since fstat()
        raise SourceRefused(f"{len(data):,} bytes is over the {limit:,}-byte note limit")
    return data
