"""Writes to sources: create (folder, URL), upload, webhook secret rotation; and the
staleness helpers every page that lists or cites a snapshot uses.

Creating a source does not scan it: the caller scans (`externals.pipeline.scan_source`) or
queues a refresh (`externals.tasks.enqueue_refresh`), so a page can answer at once. An
upload is the exception: its bytes are stored and scanned in the same call, so the person
who uploaded sees the result (or the failure) immediately.

A source belongs to a space: its externals, snapshots and annotations are read by
the space's members. Adding one needs the role editor in that space (checked here as well as
in the views); the space's admins manage it afterwards (the views check that).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from externals.folders import folder_refusal
from externals.models import (
    DEFAULT_STALE_AFTER_DAYS,
    Annotation,
    DiscoveredVia,
    Source,
    SourceItem,
    confirmed_before,
    stale_cutoff,
)
from externals.pipeline import (
    claim_scan,
    scan_source,
    sync_source_flags,
    upload_folder,
)
from notes.models import Document, TrustTier, Version
from retrieval.eligibility import can
from retrieval.index.passages import unindex_document
from spaces.models import Role, Space, personal_space_id

WEBHOOK_SECRET_BYTES = 32
# The stale age a person may set (the add and edit forms and `source_update` agree): at
# least a day, so a snapshot is never stale the moment it is fetched; at most ten years.
MIN_STALE_AFTER_DAYS = 1
MAX_STALE_AFTER_DAYS = 3650
# Tiers a source may carry: externals corroborate, they never outrank your own notes, and
# "inferred" belongs to edges the index guesses, not to text someone wrote.
SOURCE_TIER_VALUES = (
    TrustTier.EXTERNAL_CURRENT.value,
    TrustTier.EXTERNAL_STALE.value,
)
SAFE_NAME_RE = re.compile(r"[^A-Za-z0-9._ -]+")


def _check_location(kind: str, location: str, owner: AbstractBaseUser) -> str:
    location = (location or "").strip()
    if kind == Source.Kind.FOLDER:
        # Only inside the operator's roots, never lode's own folders; precise reasons for
        # staff, one "not allowed" message for everyone else (externals.folders).
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


def source_space_id(owner: AbstractBaseUser, space: Space | int | None) -> int:
    """The id of the space a new source of `owner`'s goes to: `space` (a space or its id),
    where `owner` must be an editor or admin (`PermissionDenied` otherwise, also for a
    space they are not in), or their personal space when None."""
    if space is None:
        return personal_space_id(owner.pk)
    space_id = space if isinstance(space, int) else space.pk
    if not can(owner.pk, space_id, Role.EDITOR):
        raise PermissionDenied("You cannot add sources to this space.")
    return space_id


def source_create(
    *,
    owner: AbstractBaseUser,
    name: str,
    kind: str,
    location: str,
    trust_tier: str = TrustTier.EXTERNAL_CURRENT,
    no_egress: bool = False,
    stale_after_days: int = DEFAULT_STALE_AFTER_DAYS,
    space: Space | int | None = None,
) -> Source:
    """Validate and save a source owned by `owner` (not scanned yet) in `space` (None: the
    owner's personal space; otherwise the owner must be an editor there)."""
    source = Source(
        owner=owner,
        space_id=source_space_id(owner, space),
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


def ask_source_for(owner: AbstractBaseUser, url: str) -> Source:
    """The web source (in `owner`'s personal space, marked `discovered_via = "ask"`) that
    holds the snapshots of `url` fetched while answering `owner`'s questions; made on first
    use, so an identical refetch lands on the same item and snapshot."""
    url = url[: Source._meta.get_field("location").max_length]
    found = Source.objects.filter(
        owner=owner, kind=Source.Kind.URL, location=url, discovered_via=DiscoveredVia.ASK
    ).first()
    if found is not None:
        return found
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:12]
    name = f"{urlsplit(url).netloc[:150]} page {digest}"
    try:
        with transaction.atomic():
            return Source.objects.create(
                owner=owner,
                space_id=personal_space_id(owner.pk),
                name=name,
                kind=Source.Kind.URL,
                location=url,
                discovered_via=DiscoveredVia.ASK,
            )
    except IntegrityError:  # a concurrent ask made it first
        return Source.objects.get(owner=owner, name=name)


def upload_create(
    *,
    owner: AbstractBaseUser,
    name: str,
    filename: str,
    data: bytes,
    trust_tier: str = TrustTier.EXTERNAL_CURRENT,
    no_egress: bool = False,
    stale_after_days: int = DEFAULT_STALE_AFTER_DAYS,
    space: Space | int | None = None,
) -> Source:
    """Create an upload source (in `space`, as `source_create`), store its file under the
    data folder and scan it.

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
        space=space,
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


def source_update(
    *,
    source: Source,
    name: str,
    trust_tier: str,
    no_egress: bool,
    stale_after_days: int,
    enabled: bool,
) -> Source:
    """Change a source's settings and copy them onto its externals at once, as the admin
    does (`externals.admin.SourceAdmin.save_model`): no-egress in particular must not wait
    for the next scan. Raises `ValidationError` for a taken name, a tier a source may not
    carry or a stale age outside 1–3650 days."""
    name = (name or "").strip()
    errors: dict[str, str] = {}
    if not name:
        errors["name"] = "A source needs a name."
    elif Source.objects.filter(owner_id=source.owner_id, name=name).exclude(pk=source.pk).exists():
        errors["name"] = f"You already have a source named “{name}”."
    if trust_tier not in SOURCE_TIER_VALUES:
        errors["trust_tier"] = "Choose a trust tier for externals."
    if not MIN_STALE_AFTER_DAYS <= stale_after_days <= MAX_STALE_AFTER_DAYS:
        errors["stale_after_days"] = (
            f"Between {MIN_STALE_AFTER_DAYS} and {MAX_STALE_AFTER_DAYS:,} days."
        )
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        locked = Source.objects.select_for_update().get(pk=source.pk)
        locked.name = name
        locked.trust_tier = trust_tier
        locked.no_egress = no_egress
        locked.stale_after_days = stale_after_days
        locked.enabled = enabled
        locked.full_clean()
        locked.save()
        sync_source_flags(locked)
    return locked


def source_set_enabled(*, source: Source, enabled: bool) -> Source:
    """Disable (reconcile, webhooks and "scan now" skip it; its externals stay searchable)
    or enable a source."""
    Source.objects.filter(pk=source.pk).update(enabled=enabled, updated_at=timezone.now())
    source.enabled = enabled
    return source


@dataclass(frozen=True)
class SourceDeletion:
    """What deleting a source does, counted before (confirmation page) and after."""

    externals: int  # live externals that leave search (soft-deleted, like a pruned file)
    snapshots: int  # snapshots of this source's externals: kept, still viewable
    annotations: int  # the user's annotations on them: kept, with their notes
    scans: int  # scan records: deleted
    deliveries: int  # webhook deliveries: deleted


def source_deletion(source: Source) -> SourceDeletion:
    """Count what `source_delete` would change (the confirmation page spells it out)."""
    documents = Document.objects.filter(source_items__source=source)
    return SourceDeletion(
        externals=documents.filter(deleted_at__isnull=True).distinct().count(),
        snapshots=Version.objects.filter(document__in=documents).count(),
        annotations=Annotation.objects.filter(
            document__in=documents, note_document__deleted_at__isnull=True
        ).count(),
        scans=source.scans.count(),
        deliveries=source.deliveries.count(),
    )


def source_delete(*, source: Source) -> SourceDeletion:
    """Delete a source: its externals leave search the way a pruned file's do (soft-deleted,
    unindexed), so their snapshots stay as history — past answers' evidence still opens and
    annotations keep the snapshot they sit on (snapshots are never deleted under one). The
    source itself, its fingerprints, scan records and webhook deliveries are deleted, and
    an upload's stored file removed. Refused (`ValidationError`) while a scan holds it."""
    # Hold the source as a scan would, so no scan starts (or is running) while it goes.
    claim = claim_scan(source)
    if claim is None:
        raise ValidationError("A scan of this source is running; delete it once it finishes.")
    try:
        counts, stored = _source_delete_claimed(source)
    except BaseException:
        claim.release()
        raise
    if stored is not None:
        # After the commit: a failed delete must not lose the file its externals came from.
        shutil.rmtree(stored, ignore_errors=True)
    return counts


def _source_delete_claimed(source: Source) -> tuple[SourceDeletion, Path | None]:
    with transaction.atomic():
        locked = Source.objects.select_for_update().get(pk=source.pk)
        counts = source_deletion(locked)
        # Ids first: PostgreSQL refuses FOR UPDATE together with the DISTINCT a join needs.
        ids = set(
            SourceItem.objects.filter(source=locked, document__deleted_at__isnull=True).values_list(
                "document_id", flat=True
            )
        )
        now = timezone.now()
        for document in Document.objects.select_for_update().filter(pk__in=ids).order_by("pk"):
            document.deleted_at = now
            document.save(update_fields=["deleted_at", "updated_at"])
            unindex_document(document)
        stored = upload_folder(locked) if locked.kind == Source.Kind.UPLOAD else None
        locked.delete()  # cascades: items, scan records, webhook deliveries
    return counts, stored


@dataclass(frozen=True)
class Original:
    """Where an external came from, for its page: `href` is set only for an http(s) URL
    (anything else, e.g. `javascript:`, is shown as text), `text` is always shown."""

    text: str
    href: str = ""


def external_original(source: Source | None, item: SourceItem | None) -> Original | None:
    """The original file path or URL of an external, or None when its source is gone."""
    if source is None or item is None:
        return None
    if source.kind == Source.Kind.FOLDER:
        return Original(text=os.path.join(source.location, item.path))
    if source.kind == Source.Kind.UPLOAD:
        return Original(text=f"uploaded file {item.path}")  # one source may hold several
    parts = urlsplit(item.path)
    if parts.scheme.lower() in ("http", "https") and parts.hostname:
        return Original(text=item.path, href=item.path)
    return Original(text=item.path)


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
