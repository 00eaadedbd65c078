"""Admin for public read-only links and their view log.

Links are listed with whether they are live (a "Live" filter gives the list of live links)
and can be revoked in bulk ("Revoke selected links"); nothing else of a link is editable
here: a link is created from the note or answer it publishes, by the rules of
spaces/public.py. The token is never shown in the list (staff revoke links, they do not
share them). A superuser sees every link; other staff only those of the spaces they are an
*admin* of, and may revoke those. The view log is read-only: a record of what happened.

Registered on import; spaces/admin.py imports this module.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from spaces import public
from spaces.models import Membership, PublicLink, PublicLinkView, Role


def _admin_space_ids(request: HttpRequest) -> set[int] | None:
    """None for a superuser (every space), else the spaces the staff member administers."""
    if request.user.is_superuser:
        return None
    return set(
        Membership.objects.filter(user_id=request.user.pk, role=Role.ADMIN).values_list(
            "space_id", flat=True
        )
    )


class LiveFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "live"

    def lookups(self, request, model_admin):
        return [("yes", "Live"), ("no", "Revoked or expired")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(public.live_q())
        if self.value() == "no":
            return queryset.exclude(public.live_q())
        return queryset


@admin.register(PublicLink)
class PublicLinkAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "kind",
        "space",
        "target",
        "created_by",
        "created_at",
        "expires_at",
        "revoked_at",
        "live",
    ]
    list_filter = [LiveFilter, "kind"]
    list_select_related = ["space", "created_by", "version__document", "answer"]
    search_fields = ["space__name", "created_by__username"]
    exclude = ["token"]
    readonly_fields = [
        "space",
        "kind",
        "version",
        "answer",
        "created_by",
        "created_at",
        "expires_at",
        "revoked_at",
        "revoked_by",
    ]
    actions = ["revoke_selected"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[PublicLink]:
        links = super().get_queryset(request)
        spaces = _admin_space_ids(request)
        return links if spaces is None else links.filter(space_id__in=spaces)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # created from the note or answer, by spaces/public.py's rules

    @admin.display(description="publishes")
    def target(self, link: PublicLink) -> str:
        if link.kind == PublicLink.Kind.VERSION and link.version is not None:
            return f"{link.version.document.title} (version {link.version.number})"
        if link.answer is not None:
            return f"answer #{link.answer_id}: {link.answer.question[:60]}"
        return "—"

    @admin.display(boolean=True, description="live")
    def live(self, link: PublicLink) -> bool:
        return link.is_live()

    @admin.action(description="Revoke selected links")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[PublicLink]) -> None:
        # get_queryset already narrowed a non-superuser to the spaces they administer.
        count = queryset.filter(revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_by=request.user
        )
        self.message_user(request, f"Revoked {count} link(s).", messages.SUCCESS)


@admin.register(PublicLinkView)
class PublicLinkViewAdmin(admin.ModelAdmin):
    list_display = ["viewed_at", "link", "client_hash"]
    list_select_related = ["link"]
    list_filter = ["link__kind"]
    readonly_fields = ["link", "viewed_at", "client_hash"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[PublicLinkView]:
        views = super().get_queryset(request)
        spaces = _admin_space_ids(request)
        return views if spaces is None else views.filter(link__space_id__in=spaces)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
