from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html

from lode_site.models import ApiToken, JobProgress, McpCall
from notes.admin import ReadOnlyAdmin


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = [
        "name", "user", "scope", "created_at", "expires_at", "revoked_at", "last_used_at",
    ]
    list_filter = ["scope"]
    readonly_fields = ["digest", "created_at", "last_used_at"]
    filter_horizontal = ["spaces"]


@admin.register(McpCall)
class McpCallAdmin(ReadOnlyAdmin):
    """Every MCP tool call: token, tool, time taken and bytes returned; refusals say why."""

    list_display = [
        "created_at", "tool", "token", "user", "transport", "milliseconds", "response_bytes",
        "refused",
    ]
    list_filter = ["tool", "transport"]
    date_hierarchy = "created_at"


@admin.register(JobProgress)
class JobProgressAdmin(ReadOnlyAdmin):
    """Progress of long imports and re-embeds, read-only: the commands write it (reload the
    page to follow a running one)."""

    list_display = [
        "kind",
        "summary",
        "started_at",
        "finished_at",
        "done_of_total",
        "progress",
        "status",
        "short_error",
        "updated_at",
    ]
    list_filter = ["status", "kind"]
    date_hierarchy = "started_at"
    fields = [
        "kind",
        "summary",
        "status",
        "started_at",
        "updated_at",
        "finished_at",
        "done",
        "total",
        "progress",
        "error",
    ]
    readonly_fields = fields

    @admin.display(description="done / total")
    def done_of_total(self, obj: JobProgress) -> str:
        return f"{obj.done} / {obj.total}" if obj.total else f"{obj.done} / ?"

    @admin.display(description="progress")
    def progress(self, obj: JobProgress) -> str:
        percent = obj.percent
        if percent is None:
            return "–"
        # format_html escapes; the bar is the browser's own <progress>, the text is for
        # screen readers and copy-paste.
        return format_html('<progress max="100" value="{}"></progress> {}%', percent, percent)

    @admin.display(description="error")
    def short_error(self, obj: JobProgress) -> str:
        return obj.error if len(obj.error) <= 120 else obj.error[:119] + "…"
