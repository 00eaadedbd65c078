"""Passages: the retrieval unit, chunked from a version's body.

Passages are canonical rows (the lexical and vector indexes are derived from them). Only
passages of head versions carry `is_head=True`; the lexical index covers exactly those,
maintained by database triggers (SQLite) or a generated column + partial index (PostgreSQL),
see `retrieval/lexical/`.
"""

from __future__ import annotations

from django.db import models


class Passage(models.Model):
    version = models.ForeignKey("notes.Version", on_delete=models.CASCADE, related_name="passages")
    # Denormalised from version.document so eligibility filters need no extra join.
    document = models.ForeignKey(
        "notes.Document", on_delete=models.CASCADE, related_name="passages"
    )
    is_head = models.BooleanField(default=True)
    position = models.PositiveIntegerField()
    block_kind = models.CharField(max_length=16)
    heading_path = models.JSONField(default=list, blank=True)
    # The title text the lexical index weights above the body: the version title plus any
    # heading-path entries that differ from it.
    title_text = models.TextField(blank=True, default="")
    start = models.PositiveIntegerField(help_text="Unicode code-point offset in the version body.")
    end = models.PositiveIntegerField(help_text="Unicode code-point offset (exclusive).")
    start_line = models.PositiveIntegerField()
    end_line = models.PositiveIntegerField()
    parent_start = models.PositiveIntegerField()
    parent_end = models.PositiveIntegerField()
    text = models.TextField()
    text_sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["version_id", "position"]
        indexes = [models.Index(fields=["document", "is_head"])]
        constraints = [
            models.UniqueConstraint(fields=["version", "position"], name="passage_unique_position")
        ]

    def __str__(self) -> str:
        return f"passage {self.id} of version {self.version_id}"
