"""The annotation endpoint of the snapshot page. Thin: the role check,
the version check and the quote check all live in `externals.annotations.annotation_create`.

An external of a space the user is not in answers the no-access page (404); a member who may
not write (a viewer annotating, anyone but the author or a space admin deleting) gets 403.

A plain form POST (static/annotate.js fills the hidden start/end/quote fields from the
browser selection), answered with a redirect back to the snapshot page and a message, so
the page needs no client-side rendering of results.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from externals import selectors
from externals.annotations import (
    annotation_create,
    annotation_delete,
    annotation_get,
    may_delete,
)
from externals.models import Annotation
from notes.views import NotVisible, shows_no_access
from retrieval import links
from spaces.models import Role


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


@require_POST
@shows_no_access
def annotation_add(request: HttpRequest, document_id: int) -> HttpResponse:
    """Create an annotation on a snapshot of an external of one of the user's spaces; the
    no-access 404 for any other (ids leak nothing), 403 for a viewer, a message for a bad
    selection."""
    external = (
        selectors.externals_for_user(request.user)
        .filter(pk=document_id, deleted_at__isnull=True)
        .first()
    )
    if external is None:
        raise NotVisible(document_id)
    if not selectors.may(request.user, external.space_id, Role.EDITOR):
        raise PermissionDenied("Only editors and admins of this space can annotate.")
    version_id = _int(request.POST.get("version"))
    version = external.versions.filter(pk=version_id).first() if version_id else None
    if version is None:
        raise Http404("No such snapshot of this external.")
    fallback = links.version_url(kind=external.kind, document_id=external.pk, version_id=version.pk)
    back = request.POST.get("next") or ""
    if not url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        back = fallback
    start, end = _int(request.POST.get("start")), _int(request.POST.get("end"))
    if start is None or end is None:
        messages.error(request, "Select some text of the snapshot to annotate.")
        return redirect(back)
    try:
        annotation_create(
            owner=request.user,
            version=version,
            start=start,
            end=end,
            quote=request.POST.get("quote", ""),
            text=request.POST.get("text", ""),
            document=external,
        )
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return redirect(back)
    messages.success(request, "Annotation saved.")
    return redirect(back)


@require_http_methods(["GET", "POST"])
@shows_no_access
def annotation_delete_view(
    request: HttpRequest, document_id: int, annotation_id: int
) -> HttpResponse:
    """GET: a confirmation page showing the annotation; POST: delete it (its note leaves
    search) and go back to the snapshot page. The no-access 404 for an annotation of a
    space the user is not in; 403 unless they wrote it or are an admin of the space."""
    try:
        annotation = annotation_get(request.user, document_id, annotation_id)
    except Annotation.DoesNotExist:
        raise NotVisible(annotation_id) from None
    if not may_delete(request.user, annotation):
        raise PermissionDenied("Only its author or an admin of this space can delete it.")
    back = (
        links.version_url(
            kind=annotation.document.kind,
            document_id=annotation.document_id,
            version_id=annotation.version_id,
        )
        + "#annotations"
    )
    if request.method == "POST":
        annotation_delete(owner=request.user, annotation=annotation)
        messages.success(request, "Annotation deleted.")
        return redirect(back)
    return render(
        request,
        "externals/annotation_confirm_delete.html",
        {"annotation": annotation, "back": back},
    )
