from __future__ import annotations

import json

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.html import format_html
from django.views.decorators.http import require_GET

from notes.admin import ReadOnlyAdmin
from retrieval.answer.stored_view import read_stored_answer, trace_for_reader
from retrieval.eligibility import (
    NO_LONGER_VISIBLE,
    citable_for_user,
    member_space_ids,
    visible_answers,
)
from retrieval.index.health import index_health
from retrieval.index.worker_health import STALE_AFTER_SECONDS
from retrieval.models import (
    AskTrace,
    EgressLog,
    GraphQuestionTrace,
    Passage,
    VectorClaim,
    WorkerHeartbeat,
)


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

    def get_queryset(self, request: HttpRequest) -> QuerySet[Passage]:
        # Staff who are not superusers see only their spaces' passages.
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(document__space_id__in=member_space_ids(request.user.pk))

    def get_urls(self) -> list[URLPattern]:
        # `admin_view` admits active staff only and sends anyone else to the admin login.
        health = self.admin_site.admin_view(require_GET(self.index_health_view))
        return [
            path("index-health/", health, name="retrieval_index_health"),
            *super().get_urls(),
        ]

    def index_health_view(self, request: HttpRequest) -> HttpResponse:
        """The index health report, read-only (repair: `manage.py lode_index repair`). The
        graph's edges only with `?edges=1`: re-deriving every document's edges takes a few
        milliseconds each, close to a minute at 10,000 documents."""
        context = {
            **self.admin_site.each_context(request),
            "title": "Index health",
            "opts": self.model._meta,
            "report": index_health(edges=request.GET.get("edges") == "1"),
        }
        return TemplateResponse(request, "admin/retrieval/index_health.html", context)


# Set on the stored answer the change page opens (`AskTraceAdmin.get_object`): whose eyes it
# is for, or `_EVERYTHING` for a superuser. An answer read without it shows nothing cited.
_READER = "_lode_admin_reader"
_EVERYTHING = "everything"
TRACE_HIDDEN = (
    "Not shown: this trace names a note no longer visible to you (a superuser can read it)."
)


@admin.register(AskTrace)
class AskTraceAdmin(ReadOnlyAdmin):
    """Stored answers and their traces, read-only: the flight recorder is evidence of what was
    shown, so nobody edits it here (replay: `manage.py lode_trace replay ID`).

    A superuser reads everything as stored. Other staff read an answer as its permalink shows
    it to them (`stored_view.read_stored_answer`: a claim citing a document they may not see
    now is hidden), the trace only when every document it names is one they may see
    (`stored_view.trace_for_reader`), and the pinned note only when they may see it."""

    list_display = ["id", "user", "short_question", "decision", "answerer", "created_at"]
    list_filter = ["decision", "answerer"]
    list_select_related = ["user"]
    search_fields = ["question"]
    date_hierarchy = "created_at"
    fields = [
        "user",
        "created_at",
        "question",
        "pinned_note",
        "decision",
        "answerer",
        "code_version",
        "elapsed_ms",
        "answer_json",
        "trace_json",
    ]
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[AskTrace]:
        # Staff who are not superusers see only the answers they may open.
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(pk__in=visible_answers(request.user.pk).values("pk"))

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> AskTrace | None:
        answer = super().get_object(request, object_id, from_field)
        if answer is not None:
            reader = _EVERYTHING if request.user.is_superuser else request.user.pk
            setattr(answer, _READER, reader)
        return answer

    @admin.display(description="question")
    def short_question(self, obj: AskTrace) -> str:
        return obj.question if len(obj.question) <= 80 else obj.question[:79] + "…"

    @admin.display(description="pinned note")
    def pinned_note(self, obj: AskTrace) -> str:
        pinned = obj.pinned_document
        if pinned is None:
            return "—"
        reader = getattr(obj, _READER, None)
        if reader != _EVERYTHING:
            citable = citable_for_user(reader, version_ids=(), document_ids=[pinned.pk])
            if not citable.shows(documents=[pinned.pk]):
                return NO_LONGER_VISIBLE
        return str(pinned)

    @admin.display(description="answer")
    def answer_json(self, obj: AskTrace) -> str:
        reader = getattr(obj, _READER, None)
        if reader == _EVERYTHING:
            return _pretty_json(obj.answer)
        return _pretty_json(read_stored_answer(obj, user_id=reader).outcome.as_dict())

    @admin.display(description="trace")
    def trace_json(self, obj: AskTrace) -> str:
        reader = getattr(obj, _READER, None)
        if reader == _EVERYTHING:
            return _pretty_json(obj.trace)
        trace = trace_for_reader(obj, user_id=reader)
        return _pretty_json(trace) if trace is not None else TRACE_HIDDEN


@admin.register(GraphQuestionTrace)
class GraphQuestionTraceAdmin(ReadOnlyAdmin):
    """Graph questions in words and what each became, read-only. Private to the
    asker: staff who are not superusers see only their own."""

    list_display = ["id", "user", "short_question", "path", "answered", "created_at"]
    list_filter = ["path", "answered"]
    list_select_related = ["user"]
    search_fields = ["question"]
    fields = ["user", "space", "created_at", "question", "path", "answered", "message"]
    fields += ["generation", "query_json", "trace_json"]
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[GraphQuestionTrace]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(user_id=request.user.pk)

    @admin.display(description="question")
    def short_question(self, obj: GraphQuestionTrace) -> str:
        return obj.question if len(obj.question) <= 80 else obj.question[:79] + "…"

    @admin.display(description="query")
    def query_json(self, obj: GraphQuestionTrace) -> str:
        return _pretty_json(obj.query)

    @admin.display(description="trace")
    def trace_json(self, obj: GraphQuestionTrace) -> str:
        return _pretty_json(obj.trace)


def _pretty_json(data: object) -> str:
    # format_html escapes the JSON text: stored passages and model output are never marked safe.
    text = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    return format_html('<pre class="lode-json">{}</pre>', text)


@admin.register(EgressLog)
class EgressLogAdmin(ReadOnlyAdmin):
    """Every time content left (or was about to leave) the machine, read-only: the log is the
    audit record of invariant 8, so it is never edited or deleted here."""

    list_display = [
        "created_at",
        "user",
        "purpose",
        "destination_host",
        "document_count",
        "chars_sent",
        "redaction_count",
        "withheld_count",
        "short_hash",
    ]
    list_filter = ["purpose", "destination_host", "user", "created_at"]
    list_select_related = ["user"]
    search_fields = ["request_sha256", "destination_host"]
    date_hierarchy = "created_at"
    fields = [
        "created_at",
        "user",
        "purpose",
        "destination_host",
        "items_json",
        "chars_sent",
        "redaction_count",
        "withheld_count",
        "request_sha256",
    ]
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[EgressLog]:
        # Staff who are not superusers see only their own egress.
        queryset = super().get_queryset(request)
        return queryset if request.user.is_superuser else queryset.filter(user=request.user)

    @admin.display(description="documents")
    def document_count(self, obj: EgressLog) -> int:
        return len({entry.get("document_id") for entry in obj.items or []})

    @admin.display(description="request SHA-256")
    def short_hash(self, obj: EgressLog) -> str:
        return obj.request_sha256[:12]

    @admin.display(description="documents and versions sent")
    def items_json(self, obj: EgressLog) -> str:
        return _pretty_json(obj.items)


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(ReadOnlyAdmin):
    """Running `db_worker`s. A clean stop deletes the row; a row not renewed for
    the stale limit is a killed or hung worker (`manage.py lode_index health` reports it).
    Install-wide process bookkeeping, no user's text: superusers and staff given the view
    permission see it."""

    list_display = ["worker_id", "hostname", "pid", "started_at", "seen_at", "task_id", "state"]
    ordering = ["-seen_at"]

    @admin.display(description="state")
    def state(self, row: WorkerHeartbeat) -> str:
        from django.utils import timezone

        age = (timezone.now() - row.seen_at).total_seconds()
        return "alive" if age <= STALE_AFTER_SECONDS else f"stale ({age:.0f} s since heard)"


@admin.register(VectorClaim)
class VectorClaimAdmin(ReadOnlyAdmin):
    """Passages a sync run is embedding right now (PostgreSQL); an expired claim is taken
    over by the next run."""

    list_display = ["passage_id", "owner", "claimed_at", "expires_at"]
    ordering = ["expires_at"]
