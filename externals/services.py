"""Writes to sources: create (folder, URL), upload, webhook secret rotation; and the
staleness helpers every page that lists or cites a snapshot uses (issue 6, items 1 and 2).

Creating a source does not scan it: the caller scans (`externals.pipeline.scan_source`) or
queues a refresh (`externals.tasks.enqueue_refresh`), so a page can answer at once. An
upload is the exception: its bytes are stored and scanned in the same call, so the person
who uploaded sees the result (or the failure) immediately.
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.utils import timezone

from externals.models import (
    DEFAULT_STALE_AFTER_DAYS,
    Source,
    SourceItem,
    confirmed_before,
    stale_cutoff,
)
from externals.pipeline import folder_refusal, scan_source, upload_folder
from notes.models import TrustTier, Version

WEBHOOK_SECRET_BYTES = 32
SAFE_NAME_RE = re.compile(r"[^A-Za-z0-9._ -]+")


def _check_location(kind: str, location: str, owner: AbstractBaseUser) -> str:
    location = (location or "").strip()
    if kind == Source.Kind.FOLDER:
        # Precise reasons for staff; one "not allowed" message for everyone else, whatever
        # the reason, so nothing about the server's disk is revealed (pipeline.folder_refusal).
        refusal = folder_refusal(owner, location)
        if refusal:
            raise ValidationError(refusal)
        return os.path.normpath(location)
    if kind == Source.Kind.URL:
        parts = urlsplit(location)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValidationError("A URL source needs an http:// or https:// address.")
        return location
    if kind == Source.Kind.UPLOAD:
        return safe_filename(location)
    raise ValidationError(f"Unknown source kind {kind!r}.")


def safe_filename(filename: str) -> str:
    """The upload's own name without any folder part or unusual characters."""
    name = SAFE_NAME_RE.sub("_", Path((filename or "").replace("\\", "/")).name).strip(" .")
    if not name:
        raise ValidationError("The uploaded file needs a name.")
    return name[:200]


def source_create(
    *,
    owner: AbstractBaseUser,
    name: str,
    kind: str,
    location: str,
    trust_tier: str = TrustTier.EXTERNAL_CURRENT,
    no_egress: bool = False,
    stale_after_days: int = DEFAULT_STALE_AFTER_DAYS,
) -> Source:
    """Validate and save a source owned by `owner` (not scanned yet)."""
    source = Source(
        owner=owner,
        name=(name or "").strip(),
        kind=kind,
        location=_check_location(kind, location, owner),
        trust_tier=trust_tier,
        no_egress=no_egress,
        stale_after_days=stale_after_days,
    )
    source.full_clean()
    source.save()
    return source


def upload_create(
    *,
    owner: AbstractBaseUser,
    name: str,
    filename: str,
    data: bytes,
    trust_tier: str = TrustTier.EXTERNAL_CURRENT,
    no_egress: bool = False,
    stale_after_days: int = DEFAULT_STALE_AFTER_DAYS,
) -> Source:
    """Create an upload source, store its file under the data folder and scan it.

    The size cap is checked before anything is stored. The returned source's latest scan
    record says whether the file was ingested, skipped or failed.
    """
    limit = settings.LODE_SOURCE_MAX_FILE_BYTES
    if len(data) > limit:
        raise ValidationError(f"The file is {len(data):,} bytes; the limit is {limit:,} bytes.")
    source = source_create(
        owner=owner,
        name=name,
        kind=Source.Kind.UPLOAD,
        location=filename,
        trust_tier=trust_tier,
        no_egress=no_egress,
        stale_after_days=stale_after_days,
    )
    store_upload(source, data)
    scan_source(source, trigger="upload")
    return source


def store_upload(source: Source, data: bytes) -> Path:
    """Write the upload's bytes atomically (temp file + rename), replacing any earlier one."""
    folder = upload_folder(source)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.location
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".upload-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target


def rotate_webhook_secret(source: Source) -> str:
    """Give `source` a new webhook secret and return it; it is not shown again."""
    secret = secrets.token_urlsafe(WEBHOOK_SECRET_BYTES)
    source.webhook_secret = secret
    source.save(update_fields=["webhook_secret", "updated_at"])
    return secret


def snapshot_age(version: Version) -> timedelta:
    """How long ago the snapshot was fetched (`Version.created_at` is the fetch time)."""
    return max(timezone.now() - version.created_at, timedelta(0))


def is_stale(version: Version, source: Source, item: SourceItem | None = None) -> bool:
    """Whether the snapshot was last confirmed against its source more than the source's
    `stale_after_days` ago (`externals.models.confirmed_before`: the later of its fetch and,
    for the head snapshot, the last scan that found it unchanged). The same rule the refresh
    pipeline uses to give stale documents the "stale external snapshot" trust tier.

    Pass the document's `item` when the caller has it (pages listing many externals);
    otherwise it is looked up."""
    if item is None:
        item = SourceItem.objects.filter(source=source, document_id=version.document_id).first()
    verified_at = None
    if item is not None and item.document.head_id == version.pk:
        verified_at = item.verified_at  # a scan confirms the head only
    return confirmed_before(version.created_at, verified_at, stale_cutoff(source.stale_after_days))
