"""Admin for sources and what their scans recorded.

Sources are created through `externals.services` (which validates the folder or URL and
runs the first scan), so the admin edits only the settings an operator changes afterwards:
trust tier (one of the tiers a source may carry), no-egress, enabled and the stale age.
Saving copies trust tier and no-egress onto the source's existing externals at once —
no-egress in particular must not wait for the next scan. The webhook secret is never
displayed (only whether one is set); rotate it with `manage.py lode_sources secret ID`.
Scan records, items, deliveries and snapshots are records of what happened: read-only.

Staff who are not superusers see only the sources (and their records, snapshots and
annotations) of the spaces they are members of; superusers see all.
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET

from externals.forms import SOURCE_TIERS
from externals.models import Annotation, ScanRecord, Source, SourceItem, WebhookDelivery
from externals.pipeline import COUNTERS, sync_source_flags
from notes.admin import ReadOnlyAdmin, SpaceScopedAdmin
from notes.models import Document, Version
from retrieval.eligibility import member_space_ids

SNAPSHOTS_PER_PAGE = 100


def _pretty_json(data: object) -> str:
    # format_html escapes: file names and error messages come from disk and the network.
    text = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    return format_html('<pre class="lode-json">{}</pre>', text)


class SourceTierFilter(admin.SimpleListFilter):
    """Filter by trust tier, offering only the tiers a source may carry."""

    title = "trust tier"
    parameter_name = "trust_tier__exact"

    def lookups(self, request: HttpRequest, model_admin) -> list[tuple[str, str]]:
        return SOURCE_TIERS

    def queryset(self, request: HttpRequest, queryset: QuerySet[Source]) -> QuerySet[Source]:
        return queryset.filter(trust_tier=self.value()) if self.value() else queryset


@admin.register(Source)
class SourceAdmin(SpaceScopedAdmin):
    # Few enough columns for a 1280 px screen; owner, stale age and the webhook secret's
    # state are on each source's own page.
    list_display = ["name_and_kind", "space", "trust_tier", "enabled", "no_egress", "last_scan"]
    list_display_links = ["name_and_kind"]
    list_editable = ["trust_tier", "enabled", "no_egress"]
    list_filter = ["kind", "enabled", "no_egress", SourceTierFilter]
    list_select_related = ["owner"]
    search_fields = ["name", "location", "owner__username"]
    # `webhook_secret` is deliberately absent: not in the form, not on the page.
    fields = [
        "name",
        "space",
        "owner",
        "kind",
        "location",
        "trust_tier",
        "no_egress",
        "enabled",
        "stale_after_days",
        "webhook_secret_set",
        "created_at",
        "updated_at",
    ]
    readonly_fields = [
        "name",
        "space",
        "owner",
        "kind",
        "location",
        "webhook_secret_set",
        "created_at",
        "updated_at",
    ]

    def formfield_for_choice_field(self, db_field, request: HttpRequest, **kwargs):
        # The model field lists every tier; a source may carry only the externals' tiers
        # (`externals.services`), on its page and in the list's editable column alike. The
        # form refuses any other value, so a forged POST saves nothing.
        if db_field.name == "trust_tier":
            kwargs["choices"] = SOURCE_TIERS
        return super().formfield_for_choice_field(db_field, request, **kwargs)

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        # Creation validates the location and runs the first scan: the sources page does it.
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        # Deleting would strand its externals without their fingerprints; disable instead.
        return False

    def save_model(self, request: HttpRequest, obj: Source, form, change: bool) -> None:
        # Also called for each row saved from the list's editable columns.
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            sync_source_flags(obj)

    @admin.display(boolean=True, description="webhook secret set")
    def webhook_secret_set(self, obj: Source) -> bool:
        return bool(obj.webhook_secret)

    @admin.display(description="source", ordering="name")
    def name_and_kind(self, obj: Source) -> str:
        return format_html("{}<br><small>{}</small>", obj.name, obj.get_kind_display())

    @admin.display(description="last scan")
    def last_scan(self, obj: Source) -> str:
        # Status, time and the snapshots link on separate lines: one narrow column.
        snapshots = self.snapshots_link(obj)
        scan = obj.scans.order_by("-started_at", "-id").first()
        if scan is None:
            return format_html("never<br>{}", snapshots)
        url = reverse("admin:externals_scanrecord_change", args=[scan.pk])
        return format_html(
            '<a href="{}">{}<br>{}</a><br>{}',
            url,
            scan.get_status_display(),
            f"{scan.started_at:%Y-%m-%d %H:%M}",
            snapshots,
        )

    @admin.display(description="snapshots")
    def snapshots_link(self, obj: Source) -> str:
        url = reverse("admin:externals_source_snapshots")
        return format_html('<a href="{}?source={}">snapshots</a>', url, obj.pk)

    def get_urls(self) -> list[URLPattern]:
        # `admin_view` admits active staff only and sends anyone else to the admin login.
        snapshots = self.admin_site.admin_view(require_GET(self.snapshots_view))
        return [
            path("snapshots/", snapshots, name="externals_source_snapshots"),
            *super().get_urls(),
        ]

    def snapshots_view(self, request: HttpRequest) -> HttpResponse:
        """Every snapshot (a `notes.Version` of an external), newest first, read-only;
        `?source=ID` narrows to one source's. Each links to the version's read-only page."""
        versions = (
            Version.objects.filter(document__kind=Document.Kind.EXTERNAL)
            .select_related("document", "document__owner")
            .order_by("-created_at", "-id")
        )
        if not request.user.is_superuser:
            versions = versions.filter(
                document__space_id__in=sorted(member_space_ids(request.user.pk))
            )
        source = None
        source_id = request.GET.get("source", "")
        if source_id.isdigit():
            source = self.get_queryset(request).filter(pk=int(source_id)).first()
            versions = versions.filter(document__source_items__source_id=int(source_id)).distinct()
        page = Paginator(versions, SNAPSHOTS_PER_PAGE).get_page(request.GET.get("page"))
        context = {
            **self.admin_site.each_context(request),
            "title": f"Snapshots of {source}" if source else "Snapshots",
            "opts": self.model._meta,
            "source": source,
            "page": page,
        }
        return TemplateResponse(request, "admin/externals/snapshots.html", context)


@admin.register(ScanRecord)
class ScanRecordAdmin(SpaceScopedAdmin, ReadOnlyAdmin):
    space_lookup = "source__space"
    list_display = ["id", "source", "status", "trigger", "started_at", "finished_at", *COUNTERS]
    list_filter = ["status", "trigger", ("source", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["source"]
    date_hierarchy = "started_at"
    fields = [
        "source",
        "status",
        "trigger",
        "started_at",
        "finished_at",
        *COUNTERS,
        "error",
        "failures_json",
        "rejected_json",
        "skipped_json",
    ]
    readonly_fields = fields

    @admin.display(description="failures")
    def failures_json(self, obj: ScanRecord) -> str:
        return _pretty_json(obj.failures)

    @admin.display(description="rejected")
    def rejected_json(self, obj: ScanRecord) -> str:
        return _pretty_json(obj.rejected)

    @admin.display(description="skipped")
    def skipped_json(self, obj: ScanRecord) -> str:
        return _pretty_json(obj.skipped)


@admin.register(SourceItem)
class SourceItemAdmin(SpaceScopedAdmin, ReadOnlyAdmin):
    space_lookup = "source__space"
    list_display = ["path", "source", "document", "byte_size", "short_hash", "last_error"]
    list_filter = [("source", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["source", "document"]
    search_fields = ["path", "sha256"]
    raw_id_fields = ["source", "document", "last_scan"]

    @admin.display(description="SHA-256")
    def short_hash(self, obj: SourceItem) -> str:
        return obj.sha256[:12]


# The admin's plural, set here rather than in the model's Meta, which would need a migration
# for a label no table stores.
WebhookDelivery._meta.verbose_name_plural = "webhook deliveries"


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(SpaceScopedAdmin, ReadOnlyAdmin):
    space_lookup = "source__space"
    list_display = ["received_at", "source", "delivery_id", "accepted", "reason", "remote_addr"]
    list_filter = ["accepted", "reason", ("source", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["source"]
    search_fields = ["delivery_id", "remote_addr"]
    date_hierarchy = "received_at"


@admin.register(Annotation)
class AnnotationAdmin(SpaceScopedAdmin, ReadOnlyAdmin):
    """Annotations are written from the snapshot page (their range and quote are checked
    against the stored snapshot there); here they are reviewed, never edited."""

    space_lookup = "document__space"

    list_display = ["created_at", "owner", "document", "version", "status", "quote_preview"]
    list_filter = ["status"]
    list_select_related = ["owner", "document", "version"]
    search_fields = ["quote"]
    raw_id_fields = ["owner", "document", "version", "note_document"]

    @admin.display(description="quote")
    def quote_preview(self, obj: Annotation) -> str:
        return obj.quote[:80]
