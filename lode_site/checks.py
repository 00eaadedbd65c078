"""System checks for what lode needs from its environment."""

from __future__ import annotations

import sqlite3
import tempfile

from django.conf import settings
from django.core.checks import Error, register


@register()
def data_folder_writable(app_configs, **kwargs) -> list[Error]:
    folder = settings.DATA_DIR
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as exc:
        return [
            Error(
                f"The data folder {folder} is not writable: {exc}",
                id="lode.E001",
                hint="Set LODE_DATA_DIR to a writable folder.",
            )
        ]
    return []


@register(deploy=False)
def sqlite_has_fts5(app_configs, **kwargs) -> list[Error]:
    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
        return []
    try:
        conn = sqlite3.connect(":memory:")
        conn.execute(
            "CREATE VIRTUAL TABLE t USING fts5(a, tokenize='porter unicode61 remove_diacritics 2')"
        )
        conn.close()
    except sqlite3.Error as exc:
        return [
            Error(
                f"This Python's SQLite ({sqlite3.sqlite_version}) lacks FTS5: {exc}",
                id="lode.E002",
                hint="Use a Python built against SQLite with FTS5 enabled.",
            )
        ]
    return []
