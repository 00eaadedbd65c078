"""Which server folders a folder source may read.

A folder source reads the server's disk, so where it may read is the operator's decision,
made in one setting: `LODE_SOURCE_FOLDER_ROOTS` (parsed at start-up by
`lode_site.env.folder_roots`). Every account, staff and superusers included, may mirror only
a folder inside one of those roots, and never one that is, lies inside or holds lode's own
folders (its data folder with the uploads, database, secret key and first-login state; the
project's code; its Python environment), even when a root holds them. Paths are compared
resolved (`os.path.realpath`), so `..` and symbolic links cannot climb out of a root or
into lode's folders.

The rule is checked when a source is added (form, service) and again before every scan
(`externals.pipeline`), the API's refresh and "Scan now", so a root taken out of the setting
stops its sources' scans with the reason on the source page; their externals stay
searchable.

A path outside the roots gets one message naming the roots, whoever asks. Inside the roots,
staff are told precisely what is wrong (missing, not a folder, a link, unreadable, lode's
own folder); every other account gets that same one message for all of them, so the form
cannot be used to probe what exists on the server's disk.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from externals.models import Source

ROOTS_SETTING = "LODE_SOURCE_FOLDER_ROOTS"


def allowed_roots() -> list[str]:
    """The configured roots, as the operator wrote them (absolute paths)."""
    return list(settings.LODE_SOURCE_FOLDER_ROOTS)


def _real(path: str | Path) -> Path:
    return Path(os.path.realpath(path))


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def inside_allowed_roots(location: str) -> bool:
    """Whether `location`, resolved, is one of the roots or lies inside one."""
    real = _real(location)
    return any(_inside(real, _real(root)) for root in allowed_roots())


def lode_folders() -> list[tuple[Path, str]]:
    """lode's own folders and files (resolved), each with what it is, most specific first:
    no folder source may read them."""
    data = Path(settings.DATA_DIR)
    own = [
        (data / "uploads", "lode's uploads folder"),
        (data, "lode's data folder"),
        (Path(settings.BASE_DIR), "lode's code (the project folder)"),
        (Path(sys.prefix), "lode's Python environment"),
    ]
    database = settings.DATABASES["default"]
    if database.get("ENGINE", "").endswith("sqlite3") and database.get("NAME"):
        own.append((Path(str(database["NAME"])), "lode's database"))
    return [(_real(path), what) for path, what in own]


def lode_folder_overlap(location: str) -> str:
    """How `location` (resolved) meets lode's own folders — "is …", "is inside …" or
    "holds …" — or "" when it does not."""
    real = _real(location)
    own = lode_folders()
    for folder, what in own:
        if real == folder:
            return f"is {what}"
        if folder in real.parents:
            return f"is inside {what}"
    held = [(folder, what) for folder, what in own if real in folder.parents]
    if held:  # the outermost: the data folder rather than the uploads inside it
        return f"holds {min(held, key=lambda pair: len(pair[0].parts))[1]}"
    return ""


def folder_not_allowed_message() -> str:
    """The one message for a folder outside the roots (anyone) and for any other refusal
    of a non-staff account, naming the roots the operator allows."""
    roots = allowed_roots()
    if not roots:
        return (
            "This server mirrors no server folders: its operator has not set any folder "
            f"roots ({ROOTS_SETTING})."
        )
    return (
        "This folder cannot be mirrored. Server folders can be mirrored only from inside: "
        f"{', '.join(roots)} (an existing folder the server can read; the server's operator "
        f"sets these folders with {ROOTS_SETTING})."
    )


def folder_refusal(owner: AbstractBaseUser, location: str) -> str:
    """Why `owner` may not mirror the server folder `location`, or "".

    The path must be absolute (said as such: that is about the input, not the disk). A path
    outside the roots gets `folder_not_allowed_message()`; inside them staff hear exactly
    what is wrong and everyone else gets that same message."""
    if not Path(location).is_absolute():
        return "Give an absolute path (starting with /)."
    if not inside_allowed_roots(location):
        return folder_not_allowed_message()
    staff = bool(getattr(owner, "is_staff", False))
    problem = _folder_problem(Path(location))
    if problem:
        return problem if staff else folder_not_allowed_message()
    return ""


def _folder_problem(path: Path) -> str:
    """What is wrong with `path` (inside a root) as a folder to mirror, precisely, or ""."""
    overlap = lode_folder_overlap(str(path))
    if overlap:
        return f"{path} {overlap}; lode never mirrors its own data or code."
    if path.is_symlink():
        return f"{path} is a symbolic link; links are not followed."
    if not path.exists():
        return f"No folder exists at {path}."
    if not path.is_dir():
        return f"{path} is a file, not a folder."
    if not os.access(path, os.R_OK | os.X_OK):
        return f"The server cannot read the folder {path}."
    return ""


def source_scan_refusal(source: Source) -> str:
    """Why a folder source may not be scanned now (the folder or the roots may have
    changed since it was added), or "" — also "" for other kinds of source."""
    if source.kind != Source.Kind.FOLDER:
        return ""
    return folder_refusal(source.owner, source.location)
