"""Managing public read-only links, for members of a space:

* `POST /share/links/new` — create a link to a note version or a stored answer (the form in
  templates/spaces/_public_link_form.html: `kind`, `target_id`, optional `expires_in_days`);
* `POST /share/links/<id>/revoke` — revoke one (its creator or an admin of its space);
* `GET /share/spaces/<space_id>/links` — the space's live links: all of them for its admins,
  each member's own for everyone else;
* `GET|POST /share/spaces/<space_id>/links/turn-on` — an admin turns public links back on,
  choosing which earlier links come back (none ticked: every other one is revoked).

Targets and spaces are looked up only through `retrieval.eligibility`: anything the member
may not see answers the no-access page, exactly like something that does not exist. What a
member may see but not publish (a viewer, a space with public links off, an external, an
answer asked across all spaces, someone else's link to revoke) is refused with 403 and the
space's link page saying why. `target_id` may also be sent under the kind's own name
(`version=<id>`, `answer=<id>`). The rules themselves are in spaces/public.py.
"""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from lode_site.errors import no_access
from notes.models import Version
from retrieval.eligibility import member_space_ids, role_in, visible_documents
from retrieval.models import AskTrace
from spaces import public, services
from spaces.models import PublicLink, Role, Space, personal_space_id


class PublicLinkForm(forms.Form):
    kind = forms.ChoiceField(choices=PublicLink.Kind.choices)
    target_id = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1)
    expires_in_days = forms.IntegerField(
        required=False, min_value=1, max_value=public.MAX_EXPIRY_DAYS
    )


def links_url(space_id: int) -> str:
    return reverse("public-links", kwargs={"space_id": space_id})


def _version_for(request: HttpRequest, version_id: int) -> Version | None:
    """The version, if the user may see its document (any role)."""
    return (
        Version.objects.filter(
            pk=version_id, document__in=visible_documents(request.user.pk).values("pk")
        )
        .select_related("document__space")
        .first()
    )


def _answer_for(request: HttpRequest, trace_id: int) -> AskTrace | None:
    """The stored answer, if the user may open it: asked in one of their spaces, or asked by
    them across all their spaces (which `link_create` then refuses, saying why)."""
    trace = AskTrace.objects.filter(pk=trace_id).select_related("space").first()
    if trace is None:
        return None
    if trace.space_id is None:
        return trace if trace.user_id == request.user.pk else None
    return trace if trace.space_id in member_space_ids(request.user.pk) else None


def _target_id(form: PublicLinkForm, data) -> int | None:
    """`target_id`, or else the field named after the kind (`version=<id>`, `answer=<id>`):
    both spellings of "publish this" are accepted."""
    value = form.cleaned_data.get("target_id")
    if value is not None:
        return value
    raw = str(data.get(form.cleaned_data["kind"], ""))
    if raw.isascii() and raw.isdigit() and 0 < int(raw) < 2**63:
        return int(raw)
    return None


def _refused(request: HttpRequest, space_id: int, message: str) -> HttpResponse:
    """403: the member may see this but not do it; the space's link page says why."""
    return _links_page(request, space_id, error=message, status=403)


@require_POST
def link_new(request: HttpRequest) -> HttpResponse:
    form = PublicLinkForm(request.POST)
    if not form.is_valid():
        return no_access(request)
    kind, target_id = form.cleaned_data["kind"], _target_id(form, request.POST)
    if target_id is None:
        return no_access(request)
    days = form.cleaned_data["expires_in_days"]
    expires_at = timezone.now() + timedelta(days=days) if days else None
    if kind == PublicLink.Kind.VERSION:
        version = _version_for(request, target_id)
        if version is None:
            return no_access(request)
        space_id, target = version.document.space_id, {"version": version}
    else:
        answer = _answer_for(request, target_id)
        if answer is None:
            return no_access(request)
        if answer.space_id is None:
            # Private to the asker: say why on the asker's personal space's link page.
            space_id = personal_space_id(request.user.pk)
        else:
            space_id = answer.space_id
        target = {"answer": answer}
    try:
        link = public.link_create(by=request.user, expires_at=expires_at, **target)
    except (PermissionDenied, ValidationError) as exc:
        return _refused(request, space_id, " ".join(getattr(exc, "messages", None) or [str(exc)]))
    messages.success(
        request,
        "Public link created: anyone with the link can read this, without logging in.",
    )
    return redirect(f"{links_url(link.space_id)}?created={link.pk}")


@require_POST
def link_revoke(request: HttpRequest, link_id: int) -> HttpResponse:
    link = PublicLink.objects.filter(
        pk=link_id, space_id__in=member_space_ids(request.user.pk)
    ).first()
    if link is None:
        return no_access(request)
    try:
        public.link_revoke(by=request.user, link=link)
    except PermissionDenied as exc:
        return _refused(request, link.space_id, str(exc))
    messages.success(request, "Link revoked: it no longer opens anything.")
    return redirect(links_url(link.space_id))


@require_GET
def space_links(request: HttpRequest, space_id: int) -> HttpResponse:
    return _links_page(request, space_id)


def _links_page(
    request: HttpRequest, space_id: int, *, error: str = "", status: int = 200
) -> HttpResponse:
    """The space's live links (all for an admin, the member's own otherwise), with `error`
    (why an action was refused) above them."""
    role = role_in(request.user.pk, space_id)
    if role is None:
        return no_access(request)
    space = Space.objects.get(pk=space_id)
    is_admin = role == Role.ADMIN
    links = public.live_links(space, created_by=None if is_admin else request.user).annotate(
        view_count=Count("views")
    )
    created = request.GET.get("created", "")
    rows = [
        {
            "link": link,
            "url": request.build_absolute_uri(public.public_url(link)),
            "share_id": f"public-link-{link.pk}",
            "just_created": str(link.pk) == created,
            "may_revoke": is_admin or link.created_by_id == request.user.pk,
            "views": link.view_count,
        }
        for link in links
    ]
    return render(
        request,
        "spaces/links.html",
        {
            "space": space,
            "role": role,
            "is_admin": is_admin,
            "rows": rows,
            "error": error,
            "may_create": space.public_links_enabled and role in (Role.EDITOR, Role.ADMIN),
        },
        status=status,
    )


class ReviveLinksForm(forms.Form):
    """Which earlier links to bring back: any of `choices` (the space's `earlier_links`)."""

    revive = forms.TypedMultipleChoiceField(coerce=int, required=False)

    def __init__(self, *args, earlier: list[PublicLink], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["revive"].choices = [(link.pk, str(link.pk)) for link in earlier]
        self.fields["revive"].error_messages["invalid_choice"] = (
            "That link is no longer one of this space's earlier links; choose again."
        )


def turn_on_url(space_id: int) -> str:
    return reverse("public-links-turn-on", kwargs={"space_id": space_id})


@require_http_methods(["GET", "POST"])
def links_turn_on(request: HttpRequest, space_id: int) -> HttpResponse:
    """Turn a space's public links back on (its admins): the page lists the links that were
    live when they were turned off, none ticked; the ticked ones come back, the others are
    revoked (`spaces.services.space_update`). Already on: back to the links page."""
    role = role_in(request.user.pk, space_id)
    if role is None:
        return no_access(request)
    if role != Role.ADMIN:
        raise PermissionDenied(services.NOT_ADMIN)
    space = Space.objects.get(pk=space_id)
    if space.public_links_enabled:
        messages.info(request, "Public links are already on for this space.")
        return redirect(links_url(space.pk))
    earlier = list(public.earlier_links(space).annotate(view_count=Count("views")))
    form = ReviveLinksForm(request.POST if request.method == "POST" else None, earlier=earlier)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            kept = form.cleaned_data["revive"]
            try:
                services.space_update(
                    by=request.user, space=space, public_links_enabled=True, revive_links=kept
                )
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, turned_on_words(len(kept), len(earlier) - len(kept)))
                return redirect(links_url(space.pk))
        status = 400
    return render(
        request,
        "spaces/links_turn_on.html",
        {"space": space, "form": form, "earlier": earlier},
        status=status,
    )


def turned_on_words(kept: int, revoked: int) -> str:
    """What turning public links on did, in words."""
    words = ["Public links are on."]
    if kept:
        words.append(f"Earlier links brought back: {kept}.")
    if revoked:
        words.append(f"Earlier links revoked for good (they open nothing): {revoked}.")
    return " ".join(words)
