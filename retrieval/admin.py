from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.views.decorators.http import require_GET

from notes.admin import ReadOnlyAdmin
from retrieval.health import index_health
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

    def get_urls(self) -> list[URLPattern]:
        # `admin_view` admits active staff only and sends anyone else to the admin login.
        health = self.admin_site.admin_view(require_GET(self.index_health_view))
        return [
            path("index-health/", health, name="retrieval_index_health"),
            *super().get_urls(),
        ]

    def index_health_view(self, request: HttpRequest) -> HttpResponse:
        """The index health report, read-only (repair: `manage.py lode_index repair`)."""
        context = {
            **self.admin_site.each_context(request),
            "title": "Index health",
            "opts": self.model._meta,
            "report": index_health(),
        }
        return TemplateResponse(request, "admin/retrieval/index_health.html", context)
