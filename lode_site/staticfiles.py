"""How static files are stored and named in production: whitenoise's compressed, hashed copies.

`collectstatic` (which `bootstrap run` always runs) writes every file under a name carrying
its content hash, plus gzip/Brotli copies, and a manifest; `{% static %}` then gives the
hashed name, which whitenoise serves with a far-future `Cache-Control: immutable` header —
a changed file gets a new name, so a browser never keeps a stale stylesheet.
"""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class LodeStaticFilesStorage(CompressedManifestStaticFilesStorage):
    """The manifest storage, falling back to the plain name for a file it has no hash for.

    Django's manifest storage raises `ValueError` in `{% static %}` for any file missing from
    the manifest (or when `collectstatic` never ran), turning every page into a 500. The test
    suite, the benches and a server started without `collectstatic` render pages with the
    production settings, and a missing stylesheet must not take the page down with it: the
    plain name is served if it was collected and is a 404 otherwise — what lode did before.
    `collectstatic` itself stays strict: a stylesheet naming a missing file fails it.
    """

    manifest_strict = False

    def stored_name(self, name: str) -> str:
        try:
            return super().stored_name(name)
        except ValueError:  # not collected (no manifest entry and no file to hash)
            return name
