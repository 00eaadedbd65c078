"""The canonical document store: documents (notes or externals) and their immutable versions.

A document points at its head version; versions are never edited, so a citation pinned to
a version id always means the same bytes. History exists for audit, undo and annotation
migration, not retrieval: only head versions are chunked into searchable passages.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.db import models

from spaces.models import hand_over_or_cascade, personal_space_id

# A word of a title: letters and digits, with inner hyphens, apostrophes and dots ("on-call",
# "v1.2"). The same pattern splits text into words where mentions are looked for.
TITLE_WORD = re.compile(r"\w+(?:[-'’.]\w+)*")


def title_key(title: str) -> str:
    """How a title is matched by links and mentions: its words, case-folded, one space
    apart; punctuation between words does not count. "Backup  Policy", "backup policy" and
    "Backup policy:" name the same note. A title with no word keeps its folded text."""
    words = TITLE_WORD.findall(title.casefold())
    return (" ".join(words) if words else " ".join(title.casefold().split()))[:500]


class TrustTier(models.TextChoices):
    """The trust gradient, highest first (DESIGN.md): notes outrank everything else."""

    NOTE = "note", "Your note"
    ANNOTATION = "annotation", "Your annotation"
    EXTERNAL_CURRENT = "external", "External snapshot"
    EXTERNAL_STALE = "external_stale", "Stale external snapshot"
    INFERRED = "inferred", "Inferred edge"


class Document(models.Model):
    class Kind(models.TextChoices):
        NOTE = "note", "Note"
        EXTERNAL = "external", "External"

    # Deleting the account deletes the user's documents, except those in a shared space,
    # which another member of it inherits (`spaces.models.hand_over_or_cascade`).
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=hand_over_or_cascade, related_name="documents"
    )
    # Who may see it: the members of this space. The owner is who created it.
    # RESTRICT: a space holding documents cannot be deleted out from under them, except
    # together with them (an account deletion takes its personal space and its documents).
    space = models.ForeignKey("spaces.Space", on_delete=models.RESTRICT, related_name="documents")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.NOTE)
    title = models.CharField(max_length=500)
    # The title as links name it (`title_key()`: case-folded, spaces collapsed), indexed so a
    # `[[Title]]` link and an unlinked mention of a title resolve with one lookup.
    # Kept in step with `title` by `save()`; bulk writers set it themselves.
    title_key = models.CharField(max_length=500, blank=True, default="", db_index=True)
    # RESTRICT, not PROTECT: a version can never be deleted out from under its document,
    # but deleting the document (or its owner) takes the head version with it.
    head = models.OneToOneField(
        "notes.Version",
        on_delete=models.RESTRICT,
        related_name="head_of",
        null=True,
        blank=True,
        help_text="The current version; null only while the first version is being written.",
    )
    trust_tier = models.CharField(max_length=16, choices=TrustTier.choices, default=TrustTier.NOTE)
    # A stable key from an outside system (a BEIR `_id`, a path) so imports are idempotent
    # and evaluation can map hits back to the source's identifiers.
    external_key = models.CharField(max_length=500, blank=True, default="")
    # Where the document came from, for the `source:` search filter: an import folder's
    # name, a data set's name; blank for notes written in lode.
    source_name = models.CharField(max_length=200, blank=True, default="")
    # Never send this document's content off the machine (to a cloud answerer or judge);
    # it is listed as "present, withheld from cloud synthesis" instead. Externals inherit
    # it from their source.
    no_egress = models.BooleanField(default=False)
    tags = models.ManyToManyField(
        "notes.Tag", through="notes.DocumentTag", related_name="documents"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [
            models.Index(fields=["owner", "deleted_at", "-updated_at"]),
            models.Index(fields=["space", "deleted_at", "-updated_at"]),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "external_key"],
                condition=~models.Q(external_key=""),
                name="document_unique_external_key_per_owner",
            )
        ]

    def __str__(self) -> str:
        return self.title

    def save(self, *args, **kwargs) -> None:
        # A document created without a space goes to its owner's personal space.
        if self.space_id is None and self.owner_id is not None:
            self.space_id = personal_space_id(self.owner_id)
        self.title_key = title_key(self.title)
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "title" in update_fields:
            kwargs["update_fields"] = {*update_fields, "title_key"}
        super().save(*args, **kwargs)

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None


class Version(models.Model):
    """One immutable state of a document's body. Never updated after insert."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField(help_text="1 for the first version, then +1 per save.")
    parent = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="children"
    )
    title = models.CharField(max_length=500)
    body = models.TextField()
    sha256 = models.CharField(max_length=64, help_text="SHA-256 of the UTF-8 body.")
    byte_size = models.PositiveBigIntegerField()
    extractor_name = models.CharField(max_length=100)
    extractor_version = models.CharField(max_length=50)
    # The file on disk this version was read from (absolute path) and the SHA-256 of the
    # bytes read. Blank for text typed into lode. Verified opening re-reads the file and
    # compares, so a file changed since indexing shows as "source changed".
    source_path = models.CharField(max_length=1000, blank=True, default="")
    source_sha256 = models.CharField(max_length=64, blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["document_id", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["document", "number"], name="version_unique_number")
        ]

    def __str__(self) -> str:
        return f"{self.title} v{self.number}"


class Tag(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tags"
    )
    name = models.CharField(max_length=100)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="tag_unique_per_owner")
        ]

    def __str__(self) -> str:
        return self.name


class DocumentTag(models.Model):
    """A tag on a document, either typed in the tag field or found as `#hashtag` in the body."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE)
    tag = models.ForeignKey(Tag, on_delete=models.CASCADE)
    from_body = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["document", "tag", "from_body"], name="document_tag_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.tag_id} on {self.document_id}"
