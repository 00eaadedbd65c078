"""Admin for documents, versions and tags. Staff who are not superusers see only the rows of
the spaces they are members of (admin is one of the places the one eligibility
rule applies); superusers see everything."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from notes.models import Document, Tag, Version
from retrieval.eligibility import member_space_ids


class SpaceScopedAdmin(admin.ModelAdmin):
    """For a non-superuser, only rows whose space (reached by `space_lookup`, the path to a
    `spaces.Space` id from the model) is one they belong to. Lookups of a single object go
    through `get_queryset` too, so another space's change page is a 404."""

    space_lookup = "space"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        spaces = sorted(member_space_ids(request.user.pk))
        # Forward foreign keys only, so no row repeats (and no DISTINCT, which would break
        # the delete action).
        return queryset.filter(**{f"{self.space_lookup}__in": spaces})


class ReadOnlyAdmin(admin.ModelAdmin):
    """Versions and passages are immutable canonical records: viewable, never edited here."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Document)
class DocumentAdmin(SpaceScopedAdmin):
    list_display = [
        "id",
        "title",
        "kind",
        "space",
        "owner",
        "trust_tier",
        "updated_at",
        "deleted_at",
    ]
    list_filter = ["kind", "trust_tier", ("deleted_at", admin.EmptyFieldListFilter)]
    search_fields = ["title", "external_key"]
    # `space` is shown, never edited here: moving a document is an explicit, recorded action.
    raw_id_fields = ["owner", "head"]
    readonly_fields = ["space", "head", "created_at", "updated_at"]


@admin.register(Version)
class VersionAdmin(SpaceScopedAdmin, ReadOnlyAdmin):
    space_lookup = "document__space"
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

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tag]:
        """A non-superuser sees their own tags and those on documents of their spaces."""
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        spaces = sorted(member_space_ids(request.user.pk))
        return queryset.filter(
            Q(owner_id=request.user.pk) | Q(documents__space_id__in=spaces)
        ).distinct()
