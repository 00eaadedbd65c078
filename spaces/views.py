"""Space pages: your spaces, one space's members and settings, the
header's switcher and moving a document. Thin: reads go through `retrieval.eligibility`,
writes through `spaces.services`, whose refusals become messages on the page they came from.

Anything about a space the viewer is not a member of answers `lode_site.errors.no_access`,
the same 404 as a space that does not exist.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from lode_site.errors import no_access
from retrieval import links
from retrieval.eligibility import member_space_ids, role_in, visible_documents
from spaces import public, services
from spaces.current import current_space_id, set_current_space
from spaces.forms import (
    MemberAddForm,
    MemberRoleForm,
    MoveForm,
    SpaceCreateForm,
    SpaceSettingsForm,
)
from spaces.models import DocumentMove, Membership, Role, Space, role_at_least

SETTINGS_SAVED_CHOOSE_LINKS = (
    "Saved the space's settings. Public links are still off: choose which earlier links to "
    "bring back, then turn them on."
)


def _member_space(request: HttpRequest, space_id: int) -> tuple[Space, str] | None:
    """The space and the viewer's role in it, or None when they are not a member (or it
    does not exist: the two are never told apart)."""
    role = role_in(request.user.pk, space_id)
    if role is None:
        return None
    return Space.objects.get(pk=space_id), role


def _refused(request: HttpRequest, exc: ValidationError | PermissionDenied) -> None:
    text = " ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
    messages.error(request, text or "That is not allowed.")


def _attempt(request: HttpRequest, action: Callable[[], object], done: str) -> bool:
    """Run a service call; a refusal of the input (`ValidationError`) becomes an error
    message, success `done`. A refusal of the role (`PermissionDenied`) is not caught: it is
    Django's 403, as for every write a member's role does not allow."""
    try:
        action()
    except ValidationError as exc:
        _refused(request, exc)
        return False
    messages.success(request, done)
    return True


def _back(request: HttpRequest, fallback: str) -> HttpResponseRedirect:
    """Redirect to the posted `next` (or the referring page) when it is on this site, else
    to `fallback`: an open redirect would let a crafted form send people anywhere."""
    for candidate in (request.POST.get("next"), request.META.get("HTTP_REFERER")):
        if candidate and url_has_allowed_host_and_scheme(
            candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            return redirect(candidate)
    return redirect(fallback)


@require_GET
def space_list(request: HttpRequest) -> HttpResponse:
    return _render_list(request, SpaceCreateForm())


def _render_list(request: HttpRequest, form: SpaceCreateForm, status: int = 200) -> HttpResponse:
    spaces = services.member_spaces_with_counts(request.user.pk)
    return render(request, "spaces/list.html", {"spaces": spaces, "form": form}, status=status)


@require_POST
def space_create(request: HttpRequest) -> HttpResponse:
    form = SpaceCreateForm(request.POST)
    if not form.is_valid():
        return _render_list(request, form, status=400)
    try:
        space = services.space_create(
            by=request.user,
            name=form.cleaned_data["name"],
            description=form.cleaned_data["description"],
        )
    except ValidationError as exc:
        form.add_error(None, exc)
        return _render_list(request, form, status=400)
    messages.success(request, f"Created the space {space.name}. Invite people below.")
    return redirect("spaces:detail", space_id=space.pk)


@require_GET
def space_detail(request: HttpRequest, space_id: int) -> HttpResponse:
    found = _member_space(request, space_id)
    if found is None:
        return no_access(request)
    space, role = found
    return _render_detail(request, space, role)


def _render_detail(
    request: HttpRequest,
    space: Space,
    role: str,
    *,
    settings_form: SpaceSettingsForm | None = None,
    member_form: MemberAddForm | None = None,
    status: int = 200,
) -> HttpResponse:
    is_admin = role_at_least(role, Role.ADMIN)
    memberships = Membership.objects.filter(space=space).select_related("user")
    admin_ids = [m.user_id for m in memberships if m.role == Role.ADMIN]
    members = [
        {
            "membership": m,
            "is_me": m.user_id == request.user.pk,
            "last_admin": admin_ids == [m.user_id],
            "role_form": MemberRoleForm(initial={"role": m.role}, prefix=f"m{m.user_id}"),
        }
        for m in memberships
    ]
    if settings_form is None:
        settings_form = SpaceSettingsForm(
            initial={
                "name": space.name,
                "description": space.description,
                "no_egress": space.no_egress,
                "public_links_enabled": space.public_links_enabled,
            }
        )
    # Recent moves in and out. A document that has since gone where the viewer cannot see
    # it is listed without its title.
    moves = list(
        DocumentMove.objects.filter(Q(from_space=space) | Q(to_space=space)).select_related(
            "moved_by"
        )[:10]
    )
    seen = set(
        visible_documents(request.user.pk)
        .filter(pk__in=[move.document_id for move in moves])
        .values_list("pk", flat=True)
    )
    visible = {
        pk: (title, links.document_url(kind=kind, document_id=pk))
        for pk, title, kind in visible_documents(request.user.pk)
        .filter(pk__in=seen)
        .values_list("pk", "title", "kind")
    }
    for move in moves:
        move.visible_title, move.visible_url = visible.get(move.document_id, (None, None))
    context = {
        "space": space,
        "role": role,
        "is_admin": is_admin,
        "members": members,
        "i_am_last_admin": admin_ids == [request.user.pk],
        "settings_form": settings_form if is_admin else None,
        "member_form": (member_form or MemberAddForm()) if is_admin else None,
        "document_count": space.documents.filter(deleted_at__isnull=True).count(),
        "moves": moves,
        "is_current": current_space_id(request) == space.pk,
    }
    return render(request, "spaces/detail.html", context, status=status)


@require_POST
def space_settings(request: HttpRequest, space_id: int) -> HttpResponse:
    found = _member_space(request, space_id)
    if found is None:
        return no_access(request)
    space, role = found
    form = SpaceSettingsForm(request.POST)
    if not form.is_valid():
        return _render_detail(request, space, role, settings_form=form, status=400)
    data = form.cleaned_data
    # Turning public links back on while earlier links exist goes through the page that asks
    # which of them to bring back; the other settings are saved here first.
    choose_links = (
        data["public_links_enabled"]
        and not space.public_links_enabled
        and public.earlier_links(space).exists()
    )
    saved = _attempt(
        request,
        lambda: services.space_update(
            by=request.user,
            space=space,
            name=data["name"],
            description=data["description"],
            no_egress=data["no_egress"],
            public_links_enabled=None if choose_links else data["public_links_enabled"],
        ),
        SETTINGS_SAVED_CHOOSE_LINKS if choose_links else "Saved the space's settings.",
    )
    if saved and choose_links:
        return redirect("public-links-turn-on", space_id=space.pk)
    return redirect("spaces:detail", space_id=space.pk)


@require_POST
def space_delete(request: HttpRequest, space_id: int) -> HttpResponse:
    found = _member_space(request, space_id)
    if found is None:
        return no_access(request)
    space, _ = found
    name = space.name
    if _attempt(
        request,
        lambda: services.space_delete(by=request.user, space=space),
        f"Deleted the space {name}.",
    ):
        return redirect("spaces:list")
    return redirect("spaces:detail", space_id=space_id)


@require_POST
def space_leave(request: HttpRequest, space_id: int) -> HttpResponse:
    found = _member_space(request, space_id)
    if found is None:
        return no_access(request)
    space, _ = found
    if _attempt(
        request,
        lambda: services.space_leave(user=request.user, space=space),
        f"You left {space.name}.",
    ):
        return redirect("spaces:list")
    return redirect("spaces:detail", space_id=space_id)


@require_POST
def member_add(request: HttpRequest, space_id: int) -> HttpResponse:
    found = _member_space(request, space_id)
    if found is None:
        return no_access(request)
    space, role = found
    form = MemberAddForm(request.POST)
    if not form.is_valid():
        return _render_detail(request, space, role, member_form=form, status=400)
    username = form.cleaned_data["username"]
    _attempt(
        request,
        lambda: services.member_add(
            by=request.user, space=space, username=username, role=form.cleaned_data["role"]
        ),
        f"Added {username} as {Role(form.cleaned_data['role']).label.lower()}.",
    )
    return redirect("spaces:detail", space_id=space.pk)


@require_POST
def member_role(request: HttpRequest, space_id: int, user_id: int) -> HttpResponse:
    found = _member_space(request, space_id)
    if found is None:
        return no_access(request)
    space, _ = found
    form = MemberRoleForm(request.POST, prefix=f"m{user_id}")
    if not form.is_valid():
        messages.error(request, "Choose viewer, editor or admin.")
        return redirect("spaces:detail", space_id=space.pk)
    new_role = form.cleaned_data["role"]
    _attempt(
        request,
        lambda: services.member_set_role(
            by=request.user, space=space, user_id=user_id, role=new_role
        ),
        f"Role changed to {Role(new_role).label.lower()}.",
    )
    return redirect("spaces:detail", space_id=space.pk)


@require_POST
def member_remove(request: HttpRequest, space_id: int, user_id: int) -> HttpResponse:
    found = _member_space(request, space_id)
    if found is None:
        return no_access(request)
    space, _ = found
    if user_id == request.user.pk:
        return space_leave(request, space_id)
    _attempt(
        request,
        lambda: services.member_remove(by=request.user, space=space, user_id=user_id),
        "Removed the member.",
    )
    return redirect("spaces:detail", space_id=space.pk)


@require_POST
def space_switch(request: HttpRequest) -> HttpResponse:
    """Choose the current space ("all" or one of the user's) and go back where they were:
    the posted `next`, else the Referer (the header's form sends none, so that no page
    repeats its own URL), when either is on this site."""
    chosen = (request.POST.get("space") or "all").strip()
    if chosen == "all":
        set_current_space(request, None)
    else:
        try:
            space_id = int(chosen)
        except ValueError:
            space_id = 0
        if space_id not in member_space_ids(request.user.pk):
            messages.error(request, services.NOT_MEMBER)
            return _back(request, reverse("home"))
        set_current_space(request, space_id)
    return _back(request, reverse("home"))


@require_http_methods(["POST"])
def document_move(request: HttpRequest, document_id: int) -> HttpResponse:
    """Move one of the user's visible notes to another of their spaces (form field
    `to_space`), then go back with a message saying where it went."""
    document = visible_documents(request.user.pk).filter(pk=document_id).first()
    if document is None:
        return no_access(request)
    fallback = links.document_url(kind=document.kind, document_id=document.pk)
    form = MoveForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a space to move it to.")
        return _back(request, fallback)
    to_space_id = form.cleaned_data["to_space"]
    if to_space_id not in member_space_ids(request.user.pk):
        messages.error(request, services.NOT_MEMBER)
        return _back(request, fallback)
    to_space = Space.objects.get(pk=to_space_id)
    _attempt(
        request,
        lambda: services.document_move(by=request.user, document=document, to_space=to_space),
        f"Moved “{document.title}” to {to_space.name}.",
    )
    return _back(request, fallback)
