from __future__ import annotations

from django.contrib import admin

from notes.admin import ReadOnlyAdmin
from retrieval.models import Passage


@admin.register(Passage)
class PassageAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "document",
        "version",
        "position",
        "block_kind",
        "is_head",
        "start",
        "end",
    ]
    list_filter = ["is_head", "block_kind"]
    list_select_related = ["document", "version"]
    search_fields = ["text_sha256"]
    raw_id_fields = ["document", "version"]
