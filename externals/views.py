"""Source and external pages. Thin: reads through `externals.selectors`,
writes through `externals.services` / `externals.tasks`; every lookup is owner-scoped, so
another user's ids are a plain 404.

Snapshot text is shown as one escaped text node inside `#snapshot-text` (never marked
safe by a template), so a browser selection's offsets are code points of the version body,
which is what annotations store. That exact text is the default; `?view=rendered` shows a
Markdown or HTML snapshot through the notes' one renderer and sanitiser (`notes.rendering`),
beside it, never as raw HTML.

An upload may carry several files (`<input type=file multiple>`, a drop zone in
static/upload.js), brought in as editable notes or as one mirrored source, as the uploader
chooses (`externals.uploads`). The POST redirects to the sources page showing the per-file
report, kept in the session under a token in the address (the last few only), so a reload
shows the report again instead of sending the files again.

A source moves to another space from its page (`source_move`): the user must be an editor
of both spaces; its externals and their annotations go with it, each move recorded.

Roles: any member of a source's space reads it (its page, scan status, externals,
snapshots, annotations); an editor adds sources to the space, presses "Scan now" and moves
the source to another space they edit; only
an admin of the space edits, enables or disables, deletes a source or rotates its webhook
secret. Anything of a space the user is not in answers the no-access page (404), for reads
and writes alike; a member without the role gets Django's 403.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import urlsplit

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils.crypto import get_random_string
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from externals import selectors, services, uploads
from externals.annotations import annotations_for, may_delete
from externals.extract import MARKDOWN_EXTENSIONS, MARKDOWN_EXTRACTORS, TEXT_EXTRACTOR
from externals.folders import source_scan_refusal
from externals.forms import (
    MAX_UPLOAD_TOTAL_BYTES,
    SOURCE_FORMS,
    UPLOAD_REQUEST_OVERHEAD_BYTES,
    SourceBaseForm,
    SourceEditForm,
    SourceMoveForm,
    UploadSourceForm,
)
from externals.models import ScanRecord, Source, SourceItem
from externals.pipeline import scan_running_since
from lode_site.htmx import HtmxHttpRequest
from notes import selectors as note_selectors
from notes.models import Document, Version
from notes.rendering import NoSuchPart, RenderedPart, rendered_part
from notes.views import NotVisible, check_target_space, graph_context, shows_no_access
from retrieval.eligibility import member_space_ids
from spaces import services as space_services
from spaces.current import current_space_id, space_for_new_documents
from spaces.models import Role, Space

# htmx polls the scan-status partial every 2 s while a scan is queued or running. A queue
# that does not move for 5 minutes probably has no worker; a scan "running" for an hour was
# probably killed (its record is never finished). Either way polling stops and says so.
MAX_QUEUED_POLLS = 150
MAX_RUNNING_POLLS = 1800
# The external page's `?view=` value for the rendered Markdown/HTML view (exact text otherwise).
RENDERED_VIEW = "rendered"
# `Version.extractor_name` of HTML snapshots (externals.extract.extract_html: Markdown text).
HTML_EXTRACTOR = "trafilatura"
# Upload reports kept in the session (newest last), so the sources page can show one after
# the redirect; older ones are dropped. Each holds at most MAX_UPLOAD_FILES short lines.
UPLOAD_REPORTS_SESSION_KEY = "upload_reports"
MAX_KEPT_UPLOAD_REPORTS = 5
UPLOAD_REPORT_PARAM = "upload"


def _source_or_404(request: HttpRequest, source_id: int, needed: Role = Role.VIEWER) -> Source:
    """A source of one of the user's spaces (`NotVisible` otherwise: the no-access page),
    when their role there carries `needed` (403 otherwise)."""
    try:
        source = selectors.source_get(request.user, source_id)
    except Source.DoesNotExist:
        raise NotVisible(source_id) from None
    if not selectors.may(request.user, source.space_id, needed):
        raise PermissionDenied(f"This needs the role {needed.label.lower()} in the source's space.")
    return source


def _external_or_404(request: HttpRequest, document_id: int) -> Document:
    try:
        return selectors.external_get(request.user, document_id)
    except Document.DoesNotExist:
        raise NotVisible(document_id) from None


def _forms(request: HttpRequest, bound: SourceBaseForm | None = None) -> dict[str, SourceBaseForm]:
    spaces = note_selectors.writable_spaces(request.user)
    initial = {"space": space_for_new_documents(request).pk}
    forms = {
        kind: form_class(owner=request.user, spaces=spaces, initial=initial)
        for kind, form_class in SOURCE_FORMS.items()
    }
    if bound is not None:
        forms[bound.kind] = bound
    return forms


def _role_context(request: HttpRequest, source: Source) -> dict[str, object]:
    """Which of a source page's buttons this user gets: "Scan now" (editor), settings,
    enable/disable, delete and the webhook secret (admin)."""
    can_scan = selectors.may(request.user, source.space_id, Role.EDITOR)
    return {
        "can_scan": can_scan,
        "can_manage": selectors.may(request.user, source.space_id, Role.ADMIN),
        "show_spaces": note_selectors.shows_space_badges(request.user),
        # "Move to space": the other spaces this editor edits.
        "move_spaces": [
            space
            for space in note_selectors.writable_spaces(request.user)
            if space.pk != source.space_id
        ]
        if can_scan
        else [],
    }


def _list_page(
    request: HttpRequest,
    bound: SourceBaseForm | None = None,
    *,
    upload_refusal: str = "",
) -> HttpResponse:
    sources = list(selectors.sources_for_user(request.user, space_id=current_space_id(request)))
    scans = selectors.latest_scans(sources)
    rows = [(source, scans.get(source.pk)) for source in sources]
    report = _kept_report(request, request.GET.get(UPLOAD_REPORT_PARAM, ""))
    uploading = report is not None or bool(upload_refusal)
    open_kind = bound.kind if bound else (Source.Kind.UPLOAD if uploading else "")
    return render(
        request,
        "externals/source_list.html",
        {
            "rows": rows,
            "forms": _forms(request, bound),
            "open_kind": open_kind,
            "upload_report": report,
            "upload_refusal": upload_refusal,
            "show_spaces": note_selectors.shows_space_badges(request.user),
        },
        status=400 if bound is not None else 200,
    )


@require_GET
@shows_no_access
def source_list(request: HttpRequest) -> HttpResponse:
    return _list_page(request)


@require_POST
@shows_no_access
def source_add(request: HttpRequest, kind: str) -> HttpResponse:
    """Create a folder, URL or upload source in a space where the user is an editor or
    admin, and start its first scan."""
    form_class = SOURCE_FORMS.get(kind)
    if form_class is None:
        raise Http404("No such kind of source.")
    check_target_space(request, request.POST.get(f"{kind}-space"))
    spaces = note_selectors.writable_spaces(request.user)
    if kind == Source.Kind.UPLOAD:
        return _upload(request, spaces)
    form = form_class(request.POST, request.FILES, owner=request.user, spaces=spaces)
    if not form.is_valid():
        return _list_page(request, form)
    data = form.cleaned_data
    common = {
        "owner": request.user,
        "space": data["space"] or space_for_new_documents(request),
        "name": data["name"],
        "trust_tier": data["trust_tier"],
        "no_egress": data["no_egress"],
        "stale_after_days": data["stale_after_days"],
    }
    try:
        source = services.source_create(kind=kind, location=data["location"], **common)
        _enqueue(source, trigger="manual")
    except ValidationError as exc:
        for message in exc.messages:
            form.add_error(None, message)
        return _list_page(request, form)
    messages.success(request, f"Added source “{source.name}”; its first scan is queued.")
    return redirect(f"{reverse('externals:source', args=[source.pk])}?after=0")


def _upload(request: HttpRequest, spaces: list[Space]) -> HttpResponse:
    """One or several files, brought in as editable notes or as one mirrored source
    (`externals.uploads`); one bad file never loses the others. Then post/redirect/get: the
    per-file report is kept in the session and shown by the sources page the POST
    redirects to, so reloading that page sends nothing again."""
    length = _int_header(request, "CONTENT_LENGTH")
    if length is not None and length > MAX_UPLOAD_TOTAL_BYTES + UPLOAD_REQUEST_OVERHEAD_BYTES:
        # Refused on the announced size alone: no file is read into memory, stored or
        # scanned. (The CSRF check has already parsed the multipart body by now, spooling
        # large files to temporary files that Django removes after the response.)
        refusal = (
            f"This upload is {length:,} bytes; one upload may carry at most "
            f"{MAX_UPLOAD_TOTAL_BYTES:,} bytes of files."
        )
        response = _list_page(request, upload_refusal=refusal)
        response.status_code = 413
        return response
    form = UploadSourceForm(request.POST, request.FILES, owner=request.user, spaces=spaces)
    if not form.is_valid():
        return _list_page(request, form)
    data = form.cleaned_data
    space_id = data["space"] or space_for_new_documents(request).pk
    files = [(upload.name or "", upload.read()) for upload in data["file"]]
    if data["brought_in_as"] == uploads.AS_NOTES:
        report = uploads.upload_as_notes(owner=request.user, space_id=space_id, files=files)
    else:
        try:
            report = uploads.upload_as_source(
                owner=request.user,
                space_id=space_id,
                files=files,
                name=data["name"],
                trust_tier=data["trust_tier"],
                no_egress=data["no_egress"],
                stale_after_days=data["stale_after_days"],
            )
        except ValidationError as exc:
            form.add_error("name", exc.messages)
            return _list_page(request, form)
    token = _keep_report(request, report)
    return redirect(f"{reverse('externals:sources')}?{UPLOAD_REPORT_PARAM}={token}#upload-results")


def _keep_report(request: HttpRequest, report: uploads.UploadReport) -> str:
    """Store `report` in the session under a new token (dropping the oldest beyond
    MAX_KEPT_UPLOAD_REPORTS) and return the token."""
    token = get_random_string(12)
    kept = [
        entry
        for entry in request.session.get(UPLOAD_REPORTS_SESSION_KEY, [])
        if isinstance(entry, dict)
    ]
    kept.append({"token": token, "report": report.as_dict()})
    request.session[UPLOAD_REPORTS_SESSION_KEY] = kept[-MAX_KEPT_UPLOAD_REPORTS:]
    return token


def _kept_report(request: HttpRequest, token: str) -> uploads.UploadReport | None:
    """The report kept under `token` in this user's session, or None (unknown or dropped:
    the page then shows no report)."""
    if not token:
        return None
    for entry in request.session.get(UPLOAD_REPORTS_SESSION_KEY, []):
        if isinstance(entry, dict) and entry.get("token") == token:
            return uploads.UploadReport.from_dict(entry.get("report") or {})
    return None


def _int_header(request: HttpRequest, name: str) -> int | None:
    try:
        return int(request.META[name])
    except (KeyError, ValueError):
        return None


def _enqueue(source: Source, *, trigger: str) -> None:
    from externals import tasks

    tasks.enqueue_refresh(source, trigger)


def _webhook_url(request: HttpRequest, source: Source) -> str:
    try:
        path = reverse("api:source_webhook", kwargs={"source_id": source.pk})
    except NoReverseMatch:
        path = f"/api/sources/{source.pk}/webhook"
    return request.build_absolute_uri(path)


def _status_context(source: Source, *, after: int | None = None, polls: int = 0) -> dict:
    """What the polled part of the source page needs: the latest scan with its progress,
    the externals so far and the scan history. `after` is the id of the latest scan when
    "scan now" was pressed: until a newer scan appears the refresh is still queued."""
    scan = selectors.latest_scan(source)
    running = scan is not None and scan.status == ScanRecord.Status.RUNNING
    queued = after is not None and (scan is None or scan.pk <= after)
    gave_up = (queued and polls >= MAX_QUEUED_POLLS) or polls >= MAX_RUNNING_POLLS
    items = list(selectors.source_items(source))
    return {
        "source": source,
        "scan": scan,
        "progress": _progress(scan),
        "running": running,
        "queued": queued and not gave_up,
        "gave_up": gave_up,
        "poll": (running or queued) and not gave_up,
        "after": after,
        "next_poll": polls + 1,
        "history": selectors.scan_history(source),
        "externals": [
            (item, selectors.snapshot_age(item.document.head, source, item))
            for item in items
            if item.document.head is not None
        ],
    }


def _progress(scan: ScanRecord | None) -> dict[str, int] | None:
    """Files found and done for the progress bar, or None before the scan has counted
    them (a scan recorded before counts existed, or one that failed before listing)."""
    if scan is None or not scan.items_found:
        return None
    # A file is counted when its reading starts ("reading file 3 of 5" while it runs), so
    # "done" never passes "found"; clamped all the same, for a file added mid-scan.
    return {"found": scan.items_found, "done": min(scan.items_seen, scan.items_found)}


@require_GET
@shows_no_access
def source_detail(request: HttpRequest, source_id: int) -> HttpResponse:
    source = _source_or_404(request, source_id)
    return _detail_page(request, source, after=_int_param(request, "after"))


def _detail_page(
    request: HttpRequest, source: Source, *, new_secret: str = "", after: int | None = None
) -> HttpResponse:
    return render(
        request,
        "externals/source_detail.html",
        {
            **_status_context(source, after=after),
            **_role_context(request, source),
            "new_secret": new_secret,
            "webhook_url": _webhook_url(request, source),
            "scan_refusal": source_scan_refusal(source),
        },
    )


def _int_param(request: HttpRequest, name: str) -> int | None:
    try:
        return int(request.GET[name])
    except (KeyError, ValueError):
        return None


@require_GET
@shows_no_access
def scan_status(request: HtmxHttpRequest, source_id: int) -> HttpResponse:
    """The polled partial: latest scan's state, progress and counts, the externals so far
    and the history; stops polling when the scan is done."""
    source = _source_or_404(request, source_id)
    context = _status_context(
        source, after=_int_param(request, "after"), polls=_int_param(request, "n") or 0
    ) | _role_context(request, source)
    response = render(request, "externals/source_detail.html#scan_status", context)
    if request.htmx and not context["poll"] and (_int_param(request, "n") or 0) > 0:
        # The scan this page was waiting for finished: reload so the externals list and
        # history show what it changed (the reloaded page does not poll again).
        response["HX-Refresh"] = "true"
    return response


@require_POST
@shows_no_access
def scan_now(request: HttpRequest, source_id: int) -> HttpResponse:
    """Queue a refresh (the worker runs it; an immediate backend runs it inline): editor."""
    source = _source_or_404(request, source_id, Role.EDITOR)
    if not source.enabled:
        messages.error(request, "This source is disabled; enable it before scanning.")
        return redirect("externals:source", source_id=source.pk)
    if source_scan_refusal(source):  # the page says why (`scan_refusal`)
        messages.error(request, "This folder cannot be scanned now; the page says why.")
        return redirect("externals:source", source_id=source.pk)
    since = scan_running_since(source)
    if since is not None:
        # One scan per source at a time: the running one is shown (and polled) on the page.
        messages.info(
            request,
            f"Already scanning: a scan of this source has been running since "
            f"{since:%H:%M:%S} UTC. Scan again once it has finished.",
        )
        return redirect("externals:source", source_id=source.pk)
    before = selectors.latest_scan(source)
    _enqueue(source, trigger="manual")
    after = before.pk if before is not None else 0
    messages.success(request, "Scan requested.")
    return redirect(f"{reverse('externals:source', args=[source.pk])}?after={after}")


@require_POST
@shows_no_access
def rotate_secret(request: HttpRequest, source_id: int) -> HttpResponse:
    """Rotate the webhook secret and show the new one on this response only (it is not
    stored anywhere a later page could show it again): admin."""
    source = _source_or_404(request, source_id, Role.ADMIN)
    secret = services.rotate_webhook_secret(source)
    source = _source_or_404(request, source_id)
    response = _detail_page(request, source, new_secret=secret)
    response["Cache-Control"] = "no-store"
    return response


@require_http_methods(["GET", "POST"])
@shows_no_access
def source_edit(request: HttpRequest, source_id: int) -> HttpResponse:
    """Edit a source's name, trust tier, no-egress, stale age and enabled flag; saving
    copies them onto its externals at once (`externals.services.source_update`): admin."""
    source = _source_or_404(request, source_id, Role.ADMIN)
    if request.method == "POST":
        form = SourceEditForm(request.POST, owner=request.user, instance=source)
        if form.is_valid():
            data = form.cleaned_data
            try:
                services.source_update(
                    source=source,
                    name=data["name"],
                    trust_tier=data["trust_tier"],
                    no_egress=data["no_egress"],
                    stale_after_days=data["stale_after_days"],
                    enabled=data["enabled"],
                )
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                messages.success(request, "Source settings saved.")
                return redirect("externals:source", source_id=source.pk)
        status = 400
    else:
        form = SourceEditForm(owner=request.user, instance=source)
        status = 200
    return render(
        request, "externals/source_edit.html", {"source": source, "form": form}, status=status
    )


@require_POST
@shows_no_access
def source_enabled(request: HttpRequest, source_id: int) -> HttpResponse:
    """Disable or enable a source (`enabled` = "1" or "0") from its page: admin."""
    source = _source_or_404(request, source_id, Role.ADMIN)
    enabled = request.POST.get("enabled") == "1"
    services.source_set_enabled(source=source, enabled=enabled)
    messages.success(
        request,
        "Source enabled." if enabled else "Source disabled: it is not scanned until enabled.",
    )
    return redirect("externals:source", source_id=source.pk)


@require_http_methods(["GET", "POST"])
@shows_no_access
def source_delete(request: HttpRequest, source_id: int) -> HttpResponse:
    """GET: what deleting the source does, with counts; POST: do it. Admin."""
    source = _source_or_404(request, source_id, Role.ADMIN)
    if request.method == "POST":
        try:
            counts = services.source_delete(source=source)
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
            return redirect("externals:source", source_id=source.pk)
        messages.success(
            request,
            f"Deleted source “{source.name}”: {counts.externals} external"
            f"{'s' if counts.externals != 1 else ''} left search; their snapshots and "
            f"annotations are kept.",
        )
        return redirect("externals:sources")
    return render(
        request,
        "externals/source_confirm_delete.html",
        {
            "source": source,
            "counts": services.source_deletion(source),
            "running": scan_running_since(source) is not None,
        },
    )


@require_POST
@shows_no_access
def source_move(request: HttpRequest, source_id: int) -> HttpResponse:
    """Move a source, its externals and their annotations to another space
    (`spaces.services.source_move`: an editor of both spaces; each document's move is
    recorded). A viewer of the source's space gets the 403 every write they may not make
    gets; a refusal about the space it goes to is said on the source page in plain words."""
    source = _source_or_404(request, source_id, Role.EDITOR)
    back = redirect("externals:source", source_id=source.pk)
    form = SourceMoveForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a space to move the source to.")
        return back
    to_space_id = form.cleaned_data["to_space"]
    if to_space_id not in member_space_ids(request.user.pk):
        messages.error(request, space_services.NOT_MEMBER)
        return back
    to_space = Space.objects.get(pk=to_space_id)
    try:
        moved = space_services.source_move(by=request.user, source=source, to_space=to_space)
    except PermissionDenied as exc:
        messages.error(request, str(exc) or "You may not move this source there.")
        return back
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return back
    messages.success(
        request,
        f"Moved “{source.name}” to {to_space.name}, with {moved} document"
        f"{'s' if moved != 1 else ''}.",
    )
    return back


def _snapshot_html(version: Version) -> SafeString:
    """The body escaped as text. A literal CR would be folded into LF by the HTML parser
    and shift every later offset, so it is written as a character reference instead."""
    return mark_safe(escape(version.body).replace("\r", "&#13;"))  # escaped first


def _renders_as_markdown(version: Version, item: SourceItem | None) -> bool:
    """Whether a snapshot's text is Markdown: what the HTML extractor writes (trafilatura's
    Markdown output), an Office or CSV file's (`externals.office`) or a Markdown file read as
    text. Plain text and PDF text have nothing a rendering would add, so they offer only the
    exact text."""
    if version.extractor_name == HTML_EXTRACTOR or version.extractor_name in MARKDOWN_EXTRACTORS:
        return True
    if version.extractor_name != TEXT_EXTRACTOR or item is None:
        return False
    return PurePosixPath(urlsplit(item.path).path).suffix.lower() in MARKDOWN_EXTENSIONS


def _rendered(request: HttpRequest, version: Version) -> RenderedPart:
    """The snapshot through the notes' one renderer and sanitiser, in its bounded parts
    (`?part=`), cached by the body's SHA-256 like a note version's; an unknown part is a 404."""
    number = _int_param(request, "part") or 1
    try:
        return rendered_part(sha256=version.sha256, body=version.body, number=number)
    except NoSuchPart as exc:
        raise Http404(str(exc)) from None


def _snapshot_page(request: HttpRequest, document: Document, version: Version) -> HttpResponse:
    source, item = selectors.external_source(document)
    # Exact text is the default (annotating needs its code-point offsets); `?view=rendered`
    # shows Markdown and HTML snapshots rendered, so that view is linkable.
    renderable = _renders_as_markdown(version, item)
    rendered = _rendered(request, version) if renderable and _wants_rendered(request) else None
    annotations = list(annotations_for(request.user, version))
    is_head = version.pk == document.head_id
    # The graph sections: about the document as it is now, so on its head only.
    graph = (
        graph_context(request, document, annotations_listed=True)
        if is_head and document.deleted_at is None
        else {}
    )
    return render(
        request,
        "externals/external_detail.html",
        {
            **graph,
            "renderable": renderable,
            "rendered": rendered,
            "document": document,
            "version": version,
            "is_head": is_head,
            "source": source,
            "item": item,
            "original": services.external_original(source, item),
            "age": selectors.snapshot_age(version, source, item),
            "snapshot_html": _snapshot_html(version),
            "history": selectors.snapshots(document),
            "annotations": annotations,
            # Viewers read annotations; editors and admins write them; each one is deleted
            # by its author or an admin of the space.
            "can_annotate": selectors.may(request.user, document.space_id, Role.EDITOR),
            "deletable": {a.pk for a in annotations if may_delete(request.user, a)},
            "show_spaces": note_selectors.shows_space_badges(request.user),
        },
    )


def _wants_rendered(request: HttpRequest) -> bool:
    return request.GET.get("view") == RENDERED_VIEW


@require_GET
@shows_no_access
def external_detail(request: HttpRequest, document_id: int) -> HttpResponse:
    document = _external_or_404(request, document_id)
    return _snapshot_page(request, document, document.head)


@require_GET
@shows_no_access
def snapshot_detail(request: HttpRequest, document_id: int, version_id: int) -> HttpResponse:
    document = _external_or_404(request, document_id)
    try:
        version = selectors.snapshots(document).get(pk=version_id)
    except Version.DoesNotExist:
        raise Http404("No such snapshot of this external.") from None
    return _snapshot_page(request, document, version)
