"""Sources and their scan records (seeds/adr-0005-source-lifecycle-hybrid-retrieval.md).

A mirrored external is an ordinary `notes.Document` of kind `external`; each snapshot is an
immutable `notes.Version` of it (content-addressed by `Version.sha256`, fetch time
`Version.created_at`, extractor name and version recorded), so search, highlights, verified
opening and the gate treat snapshots exactly like note versions. The document's head is its
latest good snapshot. This module adds what is specific to mirroring: where content comes
from (`Source`), what each scan found (`ScanRecord`), and the fingerprint of every file or
URL last ingested (`SourceItem`), which is what makes refresh skip unchanged input and prune
only inside a successfully scanned root.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from notes.models import TrustTier
from spaces.models import hand_over_or_cascade, personal_space_id

DEFAULT_STALE_AFTER_DAYS = 30
# Separates an annotation's own text from the quoted span in its note body
# (`externals.annotations` writes it; `Annotation.text` splits on it to show the text alone).
QUOTE_SEPARATOR = "\n\n---\n\n"


# --- staleness: the one rule (README: a snapshot "becomes a stale external snapshot when not
# confirmed for the source's stale age"). The pages' badge (`externals.services.is_stale`)
# and the tier the refresh gives documents (`externals.pipeline.refresh_staleness`, one
# query) both come from here; tests/externals/test_externals_staleness.py holds them to each other.


def stale_cutoff(stale_after_days: int, *, now: datetime | None = None) -> datetime:
    """The instant before which a last confirmation is too old: a snapshot confirmed
    strictly before it is stale, one confirmed exactly at it is still current."""
    return (now or timezone.now()) - timedelta(days=stale_after_days)


def confirmed_before(fetched_at: datetime, verified_at: datetime | None, cutoff: datetime) -> bool:
    """Whether a snapshot was last confirmed before `cutoff`, i.e. is stale.

    A snapshot is confirmed when it is fetched (`Version.created_at`) and again whenever a
    scan finds its source unchanged (`SourceItem.verified_at`, which covers the head only;
    None when never re-checked), so its last confirmation is the later of the two. The later
    of two instants is before the cutoff exactly when both are: the form
    `SourceItemQuerySet.confirmed_before` writes in SQL."""
    return fetched_at < cutoff and (verified_at is None or verified_at < cutoff)


class SourceItemQuerySet(models.QuerySet["SourceItem"]):
    def confirmed_before(self, cutoff: datetime) -> SourceItemQuerySet:
        """Items whose document's head snapshot was last confirmed before `cutoff`: the
        module-level `confirmed_before` over (head fetch time, `verified_at`), in SQL. An
        item whose document has no head has nothing to be stale."""
        return self.filter(
            models.Q(document__head__created_at__lt=cutoff),
            models.Q(verified_at__isnull=True) | models.Q(verified_at__lt=cutoff),
        )


class DiscoveredVia(models.TextChoices):
    CONFIGURED = "configured", "Added by a person"
    ASK = "ask", "Fetched for an answer"


class Source(models.Model):
    class Kind(models.TextChoices):
        FOLDER = "folder", "Folder on the server"
        UPLOAD = "upload", "Uploaded file"
        URL = "url", "Web page (URL)"

    # A shared space's sources outlive their owner's account (`hand_over_or_cascade`).
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=hand_over_or_cascade, related_name="sources"
    )
    # Its externals (and their snapshots and annotations) belong to the same space.
    space = models.ForeignKey("spaces.Space", on_delete=models.RESTRICT, related_name="sources")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # A folder's absolute path, a URL, or (uploads) the original file name.
    location = models.CharField(max_length=2000)
    trust_tier = models.CharField(
        max_length=16, choices=TrustTier.choices, default=TrustTier.EXTERNAL_CURRENT
    )
    # Never send this source's content off the machine (copied onto its documents).
    no_egress = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    # "ask": made by an ask's fetch of a page (snapshot-then-cite); "configured": added by
    # a person. Both are ordinary sources: same snapshots, dedup, no-egress and access.
    discovered_via = models.CharField(
        max_length=16, choices=DiscoveredVia.choices, default=DiscoveredVia.CONFIGURED
    )
    # A snapshot older than this is shown (and ranked) as stale.
    stale_after_days = models.PositiveIntegerField(default=DEFAULT_STALE_AFTER_DAYS)
    # HMAC-SHA256 key for push-triggered re-indexing; shown once when created/rotated.
    webhook_secret = models.CharField(max_length=128, blank=True, default="")
    # Set while a scan holds this source (one scan per source at a time; claimed with a
    # conditional UPDATE in externals.pipeline.claim_scan, refreshed as the scan runs, taken
    # over when older than pipeline.SCAN_CLAIM_STALE_AFTER).
    scanning_since = models.DateTimeField(null=True, blank=True, editable=False)
    # Set while a refresh of this source is queued and has not started (at most one pending
    # refresh per source: externals.tasks.enqueue_refresh coalesces the rest into it).
    refresh_queued_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="source_unique_name_per_owner")
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        # A source created without a space belongs to its owner's personal space.
        if self.space_id is None and self.owner_id is not None:
            self.space_id = personal_space_id(self.owner_id)
        super().save(*args, **kwargs)


class ScanRecord(models.Model):
    """One scan (first ingest or refresh) of a source: what it found, changed, skipped,
    rejected and pruned, and every failure with its reason. A scan that is not `ok` prunes
    nothing."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        OK = "ok", "Succeeded"
        PARTIAL = "partial", "Partly failed"
        FAILED = "failed", "Failed"

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="scans")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    trigger = models.CharField(max_length=16, default="manual")  # manual | webhook | reconcile
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Files (or pages) the scan found to read, counted before it reads any, so a running
    # scan shows "done of found"; `items_seen` is how many it has started reading.
    items_found = models.PositiveIntegerField(default=0)
    items_seen = models.PositiveIntegerField(default=0)
    items_new = models.PositiveIntegerField(default=0)
    items_changed = models.PositiveIntegerField(default=0)
    items_unchanged = models.PositiveIntegerField(default=0)
    items_pruned = models.PositiveIntegerField(default=0)
    items_failed = models.PositiveIntegerField(default=0)
    items_rejected = models.PositiveIntegerField(default=0)
    items_skipped = models.PositiveIntegerField(default=0)  # binary, empty …
    # [{"path", "reason"}] for failures, rejections (secrets, escaping symlinks) and skips.
    failures = models.JSONField(default=list, blank=True)
    rejected = models.JSONField(default=list, blank=True)
    skipped = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, default="")  # why the whole scan failed, if it did

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"{self.source} scan {self.pk} ({self.status})"


class SourceItem(models.Model):
    """The fingerprint of one file (path relative to the folder) or URL as last ingested,
    and the external document it feeds. Refresh compares fingerprints to skip unchanged
    input; a path missing from a successful scan is pruned (its document soft-deleted)."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="items")
    path = models.CharField(max_length=1000)
    document = models.ForeignKey(
        "notes.Document", on_delete=models.CASCADE, related_name="source_items"
    )
    sha256 = models.CharField(max_length=64)
    byte_size = models.PositiveBigIntegerField()
    mtime_ns = models.BigIntegerField(null=True, blank=True)
    # When a scan last confirmed the head snapshot matches the source (written or found
    # unchanged). Staleness counts from here: an unchanged file re-checked today is current
    # however old its snapshot is; a URL that can no longer be fetched ages into "stale".
    verified_at = models.DateTimeField(null=True, blank=True)
    last_scan = models.ForeignKey(
        ScanRecord, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The last failure for this item, kept until a later scan ingests it (the previous
    # snapshot stays searchable meanwhile).
    last_error = models.TextField(blank=True, default="")

    objects = SourceItemQuerySet.as_manager()

    class Meta:
        ordering = ["source_id", "path"]
        constraints = [
            models.UniqueConstraint(fields=["source", "path"], name="source_item_unique_path")
        ]

    def __str__(self) -> str:
        return f"{self.source}:{self.path}"


class WebhookDelivery(models.Model):
    """An accepted push delivery, for idempotency and audit: a repeated delivery id, or a
    repeated signature (the same signed timestamp and body, whatever id it is sent under),
    is acknowledged and ignored."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="deliveries")
    delivery_id = models.CharField(max_length=200, blank=True, default="")
    received_at = models.DateTimeField(auto_now_add=True)
    accepted = models.BooleanField(default=False)
    reason = models.CharField(max_length=200, blank=True, default="")
    remote_addr = models.CharField(max_length=64, blank=True, default="")
    # SHA-256 of the accepted X-Lode-Signature: the signature covers the timestamp and the
    # body, so a replay of a captured request (under any delivery id) has the same one.
    signature_digest = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["-received_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["source", "delivery_id"],
                condition=models.Q(accepted=True) & ~models.Q(delivery_id=""),
                name="webhook_delivery_unique_accepted_id",
            ),
            models.UniqueConstraint(
                fields=["source", "signature_digest"],
                condition=models.Q(accepted=True) & ~models.Q(signature_digest=""),
                name="webhook_delivery_unique_accepted_signature",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source} delivery {self.delivery_id or '-'}"


class Annotation(models.Model):
    """A user's note attached to a span of an external's snapshot.

    The span is kept three ways so it can follow the text into later snapshots: code-point
    offsets into `version.body`, the exact `quote`, and some context either side
    (`prefix`/`suffix`). When a new snapshot becomes head, `externals.annotations.
    migrate_annotations` moves each anchored annotation to where its quote is found (context
    picks among repeats) or marks it orphaned; an annotation is never dropped. Its text lives
    in `note_document`, an ordinary document of trust tier "annotation", so search indexes
    it as its own tier and evidence for it opens like any note's.
    """

    class Status(models.TextChoices):
        ANCHORED = "anchored", "Anchored"
        ORPHANED = "orphaned", "Orphaned (quote not found in the current snapshot)"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=hand_over_or_cascade, related_name="annotations"
    )
    # The annotated external (a notes.Document of kind "external").
    document = models.ForeignKey(
        "notes.Document", on_delete=models.CASCADE, related_name="annotations"
    )
    # The snapshot the annotation currently sits on (for an orphan: the last one it was
    # found in). RESTRICT: snapshots are immutable history, never deleted under an
    # annotation — except together with it (its owner or document deleted).
    version = models.ForeignKey(
        "notes.Version", on_delete=models.RESTRICT, related_name="annotations"
    )
    start = models.PositiveIntegerField(help_text="Code-point offset into version.body.")
    end = models.PositiveIntegerField(help_text="Code-point offset (exclusive).")
    quote = models.TextField()
    prefix = models.TextField(blank=True, default="")
    suffix = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ANCHORED)
    orphaned_at = models.DateTimeField(null=True, blank=True)
    # The annotation's own text as a searchable document (trust tier "annotation").
    note_document = models.OneToOneField(
        "notes.Document", on_delete=models.RESTRICT, related_name="annotation_of"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["document_id", "start", "id"]
        indexes = [models.Index(fields=["document", "status"])]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(end__gt=models.F("start")), name="annotation_nonempty_span"
            )
        ]

    def __str__(self) -> str:
        return f"Annotation {self.pk} on {self.document_id} ({self.status})"

    @property
    def text(self) -> str:
        """The annotation's own words (its note's head body before the quoted span)."""
        head = self.note_document.head
        if head is None:
            return ""
        return head.body.split(QUOTE_SEPARATOR, 1)[0]

    @property
    def is_orphaned(self) -> bool:
        return self.status == self.Status.ORPHANED
