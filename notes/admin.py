from __future__ import annotations

from django.contrib import admin

from notes.models import Document, Tag, Version


class ReadOnlyAdmin(admin.ModelAdmin):
    """Versions and passages are immutable canonical records: viewable, never edited here."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "kind", "owner", "trust_tier", "updated_at", "deleted_at"]
    list_filter = ["kind", "trust_tier", ("deleted_at", admin.EmptyFieldListFilter)]
    search_fields = ["title", "external_key"]
    raw_id_fields = ["owner", "head"]
    readonly_fields = ["head", "created_at", "updated_at"]


@admin.register(Version)
class VersionAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "document",
        "number",
        "title",
        "byte_size",
        "extractor_name",
        "created_at",
    ]
    list_select_related = ["document"]
    search_fields = ["title", "sha256"]
    raw_id_fields = ["document", "parent"]


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    list_display = ["name", "owner"]
    search_fields = ["name"]
