"""Admin for spaces, memberships and the record of moves.

A superuser sees everything. Other staff see only the spaces they are a member of (and those
spaces' memberships and moves): the admin is a reader like any page, so it applies the same
eligibility (`retrieval.eligibility.member_space_ids`). Moves are a record of what happened:
read-only. Membership edits here bypass the last-admin rule of `spaces.services`, so
changing roles is meant for the space pages; the admin is for inspection and repair.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from retrieval.eligibility import member_space_ids
from spaces import services
from spaces.models import DocumentMove, Membership, Space


def _visible_space_ids(request: HttpRequest) -> frozenset[int] | None:
    """None for a superuser (everything), else the staff member's own spaces."""
    if request.user.is_superuser:
        return None
    return member_space_ids(request.user.pk)


class MembershipInline(admin.TabularInline):
    model = Membership
    fk_name = "space"
    extra = 0
    fields = ["user", "role", "added_by", "added_at"]
    readonly_fields = ["added_by", "added_at"]
    raw_id_fields = ["user"]


@admin.register(Space)
class SpaceAdmin(admin.ModelAdmin):
    list_display = ["name", "personal_of", "no_egress", "public_links_enabled", "created_at"]
    list_filter = ["no_egress", "public_links_enabled"]
    search_fields = ["name", "personal_of__username"]
    readonly_fields = ["personal_of", "created_by", "created_at"]
    inlines = [MembershipInline]

    def save_model(self, request: HttpRequest, obj: Space, form, change: bool) -> None:
        """Turning public links back on here brings back none of the earlier links: they are
        revoked (the space's page lets its admin choose which to keep)."""
        turning_on = (
            change and "public_links_enabled" in form.changed_data and obj.public_links_enabled
        )
        with transaction.atomic():
            if turning_on:
                revoked = services.earlier_links_revoke(space=obj, by=request.user)
                if revoked:
                    self.message_user(
                        request,
                        f"Public links are on; the {revoked} earlier link(s) stay revoked.",
                        messages.WARNING,
                    )
            super().save_model(request, obj, form, change)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Space]:
        spaces = super().get_queryset(request).select_related("personal_of")
        visible = _visible_space_ids(request)
        return spaces if visible is None else spaces.filter(pk__in=visible)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["space", "user", "role", "added_by", "added_at"]
    list_filter = ["role"]
    list_select_related = ["space", "user", "added_by"]
    search_fields = ["space__name", "user__username"]
    raw_id_fields = ["user", "space"]
    readonly_fields = ["added_by", "added_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Membership]:
        memberships = super().get_queryset(request)
        visible = _visible_space_ids(request)
        return memberships if visible is None else memberships.filter(space_id__in=visible)


@admin.register(DocumentMove)
class DocumentMoveAdmin(admin.ModelAdmin):
    list_display = ["document", "from_space_name", "to_space_name", "moved_by", "moved_at"]
    list_select_related = ["document", "moved_by"]
    search_fields = ["from_space_name", "to_space_name"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[DocumentMove]:
        moves = super().get_queryset(request)
        visible = _visible_space_ids(request)
        if visible is None:
            return moves
        # A move is shown when the document is now in one of their spaces; a move out of
        # their space into one they cannot see names no document they could open.
        return moves.filter(Q(document__space_id__in=visible))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


# Public links are administered in their own module (it is imported for its registrations).
from spaces import admin_public  # noqa: E402, F401
