"""Note pages. Thin: each view reads through selectors, writes through services.

Who may do what is the user's role in the note's space: any member reads (list,
detail, history, compare, versions, trash); an editor or admin writes (create, edit, delete,
restore). A note of a space the user is not in answers the no-access page (404), for reads
and writes alike, so ids leak nothing; a member without the role gets Django's 403.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q
from django.db.models.functions import Lower
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from lode_site.errors import no_access
from lode_site.htmx import HtmxHttpRequest
from notes import selectors, services
from notes.forms import NoteForm, RestoreForm
from notes.models import Document, Version
from notes.rendering import (
    NoSuchPart,
    RenderedPart,
    link_wiki,
    render_markdown,
    rendered_part,
    split_parts,
    wiki_key,
    wiki_titles,
)
from retrieval import eligibility, links
from retrieval.search import backlinks
from retrieval.search.pipeline import pending_notice
from retrieval.web.graph_picture import NARROW, neighbourhood_svg
from retrieval.web.search_views import library_is_empty
from spaces.current import current_space_id, space_for_new_documents
from spaces.models import Role, Space


class NotVisible(Exception):
    """What the user asked for is in a space they are not a member of, or does not exist:
    `shows_no_access` answers both with the same no-access page."""


def shows_no_access[**P](
    view: Callable[P, HttpResponse],
) -> Callable[P, HttpResponse]:
    """Answer `NotVisible` (and `eligibility.NoAccess`) raised by `view` with
    `lode_site.errors.no_access`: a 404 that names nothing."""

    @functools.wraps(view)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> HttpResponse:
        try:
            return view(*args, **kwargs)
        except (NotVisible, eligibility.NoAccess):
            request = args[0]
            assert isinstance(request, HttpRequest)
            return no_access(request)

    return wrapper


def _note_or_404(request: HttpRequest, note_id: int) -> Document:
    try:
        return selectors.note_get(request.user, note_id)
    except Document.DoesNotExist:
        raise NotVisible(note_id) from None


def _writable(request: HttpRequest, note: Document) -> Document:
    """`note`, when the user may write it (editor or admin of its space); 403 otherwise."""
    if not selectors.may_write(request.user, note):
        raise PermissionDenied("Only editors and admins of this space can change its notes.")
    return note


def _list_context(request: HttpRequest) -> dict[str, object]:
    """What every notes list shows beside its rows: space badges when the user has more
    than one space."""
    return {"show_spaces": selectors.shows_space_badges(request.user)}


@require_GET
@shows_no_access
def note_list(request: HttpRequest) -> HttpResponse:
    tag = request.GET.get("tag") or None
    space_id = current_space_id(request)
    notes = selectors.notes_for_user(request.user, tag=tag, space_id=space_id)[:500]
    return render(
        request,
        "notes/list.html",
        {
            "notes": notes,
            # Where the first login lands: an empty library gets the welcome guide.
            "empty_library": not tag and not notes and library_is_empty(request.user),
            "tag": tag,
            "tags": selectors.tags_for_user(request.user, space_id=space_id),
            **_list_context(request),
        },
    )


def _note_url(note: Document) -> str:
    return links.document_url(kind=note.kind, document_id=note.pk)


def _text_response(message: str, status: int) -> HttpResponse:
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


def _create_url(title: str) -> str:
    """The new-note form with `title` filled in: where an unresolved wiki link leads."""
    return f"{reverse('notes:create')}?{urlencode({'title': title})}"


def _with_wiki_links(user: AbstractBaseUser, html: SafeString) -> SafeString:
    """`html` (rendered by notes.rendering) with its `[[wiki links]]` pointing at the live
    notes of those titles in `user`'s spaces, compared without case; the most recently
    edited note wins when two share a title. Never a note of a space they are not in: the
    candidates come from `selectors.notes_for_user`.

    One query: titles equal as written or in their common casings, or equal lowercased by
    the database; `wiki_key` then decides. The casings are for SQLite, whose LOWER() folds
    ASCII only: `[[über plan]]` still finds “Über Plan” there.
    """
    titles = wiki_titles(html)
    if not titles:
        return html
    wanted = {wiki_key(title) for title in titles}
    spellings = {
        spelling
        for title in titles
        for spelling in (title, title.lower(), title.upper(), title.title(), title.capitalize())
    }
    candidates = (
        selectors.notes_for_user(user)
        .annotate(title_lower=Lower("title"))
        .filter(Q(title__in=spellings) | Q(title_lower__in=wanted))
        .order_by("-updated_at", "-id")
        .values_list("pk", "title")
    )
    targets: dict[str, str] = {}
    for pk, title in candidates:
        key = wiki_key(title)
        if key in wanted and key not in targets:
            targets[key] = links.document_url(kind=Document.Kind.NOTE, document_id=pk)
    return link_wiki(html, targets, _create_url)


def _part_or_error(request: HttpRequest, version: Version) -> RenderedPart | HttpResponse:
    """The part of `version`'s rendering that `?part=N` asks for (the first by default), or
    the 400/404 response that says why there is none. Its wiki links point at the
    reader's notes (the cached HTML is the same for every reader; this is not)."""
    raw = request.GET.get("part", "1")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        return _text_response(f"“part” must be a whole number from 1; got “{raw[:40]}”.", 400)
    try:
        part = rendered_part(sha256=version.sha256, body=version.body, number=int(raw))
    except NoSuchPart as exc:
        return _text_response(str(exc), 404)
    return dataclasses.replace(part, html=_with_wiki_links(request.user, part.html))


def _rendered_page(
    request: HtmxHttpRequest, template: str, version: Version, part_url: str, context: dict
) -> HttpResponse:
    """A page showing one part of `version`; htmx's "Show more" gets that part alone."""
    part = _part_or_error(request, version)
    if isinstance(part, HttpResponse):
        return part
    context = {**context, "version": version, "part": part, "part_url": part_url}
    if request.htmx and "part" in request.GET:
        return render(request, "partials.html#rendered_part", context)
    return render(request, template, context)


@require_GET
@shows_no_access
def note_detail(request: HtmxHttpRequest, note_id: int) -> HttpResponse:
    note = _note_or_404(request, note_id)
    context = {"note": note, "tags": selectors.note_tags(note), **_note_context(request, note)}
    if not (request.htmx and "part" in request.GET):  # "Show more" needs only the text
        context.update(graph_context(request, note))
        # Right after a save the note is found by keywords, not yet by meaning: say so.
        context["pending_notice"] = pending_notice(eligibility.audience_for(request.user.pk))
    return _rendered_page(request, "notes/detail.html", note.head, _note_url(note), context)


def graph_context(
    request: HttpRequest, document: Document, *, annotations_listed: bool = False
) -> dict[str, object]:
    """The graph sections of a document's page (templates/graph/_links.html):
    its backlinks, links, unresolved links and unlinked mentions as this reader may see them,
    and the picture of its neighbourhood, one hop by default, two with `?hops=2`. A page that
    lists its annotations itself (`annotations_listed`) keeps them out of *Linked from*."""
    audience = eligibility.audience_for(request.user.pk)
    hops = 2 if request.GET.get("hops") == "2" else 1
    hood = backlinks.neighbourhood(audience, document, hops=hops)
    return {
        "graph_links": backlinks.document_links(
            audience, document, user=request.user, annotations_listed=annotations_listed
        ),
        "graph_hood": hood,
        # Built by graph_picture with every user string escaped, so the template may
        # include it with |safe (see retrieval/web/graph_picture.py).
        "graph_picture": neighbourhood_svg(hood, viewer_id=request.user.pk),
        # Shown under 40rem.
        "graph_picture_narrow": neighbourhood_svg(hood, viewer_id=request.user.pk, **NARROW),
        "graph_hops": hops,
        "graph_page_url": request.path,
    }


def _int_field(raw: str | None) -> int | None:
    if raw is None or not (raw.isascii() and raw.isdigit()) or len(raw) > 12:
        return None
    return int(raw)


@require_POST
@shows_no_access
def link_mention(request: HttpRequest, note_id: int) -> HttpResponse:
    """The "Link it" button of an unlinked mention: a new version of the
    mentioning note `note_id` in which the mention becomes a `[[wiki link]]` to `target`.

    The form carries the head the mention was read from (`base_version`) and its span
    (`start`, `end`, code points): when the note changed since, nothing is saved and the
    page says so (the edit conflict's message); when the span no longer holds the title,
    likewise. Editors and admins of the note's space only (403 for a viewer).
    """
    note = _writable(request, _note_or_404(request, note_id))
    fields = {
        name: _int_field(request.POST.get(name))
        for name in ("base_version", "start", "end", "target")
    }
    if None in fields.values():
        return _text_response(
            "“base_version”, “start”, “end” and “target” must be whole numbers.", 400
        )
    try:
        target = (
            eligibility.visible_documents(request.user.pk)
            .filter(deleted_at__isnull=True)
            .get(pk=fields["target"])
        )
    except Document.DoesNotExist:
        raise NotVisible(fields["target"]) from None
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        back = links.document_url(kind=target.kind, document_id=target.pk)
    try:
        version = backlinks.link_mention(
            user=request.user,
            note=note,
            base_version_id=fields["base_version"],
            start=fields["start"],
            end=fields["end"],
            target=target,
        )
    except services.EditConflict as exc:
        messages.error(request, f"Nothing was linked: {exc}")
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(
            request, f"Linked “{target.title}” in “{note.title}” (now version {version.number})."
        )
    return redirect(back)


@require_GET
def wiki_complete(request: HttpRequest) -> HttpResponse:
    """`[[` completion in the note editor (htmx, static/wiki_complete.js): at most 10
    titles of live documents the user may see whose title starts with `q` (then contain
    it), as buttons that insert `[[Title]]`."""
    prefix = request.GET.get("q", "")[:200]
    audience = eligibility.audience_for(request.user.pk)
    titles = backlinks.completions(audience, prefix) if prefix.strip() else []
    return render(request, "graph/_complete.html", {"titles": titles, "prefix": prefix})


def _note_context(request: HttpRequest, note: Document) -> dict[str, object]:
    """What a note's pages show about its space: whether this user may write it (write
    buttons), and the space's name when the user has more than one space."""
    space = note.space
    return {
        "can_write": selectors.may_write(request.user, note),
        "show_spaces": selectors.shows_space_badges(request.user),
        # Share: the note's link and who can open it; moving it to
        # another space (spaces/move.html, which reads `document`); a public read-only
        # link to its current version (spaces/_public_link_form.html).
        "share_url": request.build_absolute_uri(_note_url(note)),
        "share_audience": note_audience(space),
        "document": note,
        "public_link_kind": "version",
        "public_link_target_id": note.head_id,
        "public_link_space": space,
        "public_link_role": eligibility.role_in(request.user.pk, space.pk),
    }


def note_audience(space: Space) -> str:
    """Who can open a link to a note in `space`, in words."""
    if space.is_personal:
        return "Only you can open this link: the note is in your personal space."
    members = space.memberships.count()
    return (
        f"Members of {space.name} ({members} {'people' if members != 1 else 'person'}) can "
        "open this link; anyone else sees a page saying they have no access."
    )


def _form_errors(form: NoteForm, exc: ValidationError) -> None:
    for message in exc.messages:
        form.add_error(None, message)


def check_target_space(request: HttpRequest, raw: str | None) -> None:
    """The space a create form (a note, a source) names must be one the user may write in:
    not a member → `NotVisible` (the no-access page, as for any id of a space they are not
    in); a member without the editor role → 403. Anything not an id is left to the form's
    validation."""
    if raw is None or not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        return
    role = eligibility.role_in(request.user.pk, int(raw))
    if role is None:
        raise NotVisible(raw)
    if not eligibility.can(request.user.pk, int(raw), Role.EDITOR):
        raise PermissionDenied("Only editors and admins of this space can add to it.")


@require_http_methods(["GET", "POST"])
@shows_no_access
def note_create(request: HttpRequest) -> HttpResponse:
    # `?title=` fills in the title: an unresolved [[wiki link]] leads here.
    initial = {
        "title": request.GET.get("title", "")[: services.MAX_TITLE_CHARS],
        "space": space_for_new_documents(request).pk,
    }
    if request.method == "POST":
        check_target_space(request, request.POST.get("space"))
    spaces = selectors.writable_spaces(request.user)
    form = NoteForm(request.POST or None, initial=initial, spaces=spaces)
    if request.method == "POST" and form.is_valid():
        try:
            note = services.note_create(
                owner=request.user,
                title=form.cleaned_data["title"],
                body=form.cleaned_data["body"],
                tags=form.cleaned_data["tags"],
                space=form.cleaned_data["space"] or space_for_new_documents(request),
            )
        except ValidationError as exc:
            _form_errors(form, exc)
        else:
            messages.success(request, "Note saved.")
            return redirect(_note_url(note))
    return render(request, "notes/form.html", {"form": form, "creating": True})


@require_http_methods(["GET", "POST"])
@shows_no_access
def note_edit(request: HttpRequest, note_id: int) -> HttpResponse:
    note = _writable(request, _note_or_404(request, note_id))
    conflict: services.EditConflict | None = None
    status = 200
    if request.method == "POST":
        form = NoteForm(request.POST)
        if form.is_valid():
            try:
                services.note_update(
                    document=note,
                    user=request.user,
                    base_version_id=form.cleaned_data["base_version"] or 0,
                    title=form.cleaned_data["title"],
                    body=form.cleaned_data["body"],
                    tags=form.cleaned_data["tags"],
                )
            except services.EditConflict as exc:
                conflict = exc
                # Keep the user's text in the form, now based on the current head, so a
                # second save is a deliberate choice after seeing both versions.
                data = request.POST.copy()
                data["base_version"] = str(exc.head.pk)
                form = NoteForm(data)
                form.is_valid()
            except services.UnknownBaseVersion as exc:
                # Nothing to compare with: say so, and base the kept text on the current head
                # so that saving again is possible (and deliberate).
                data = request.POST.copy()
                data["base_version"] = str(exc.head.pk)
                form = NoteForm(data)
                form.is_valid()
                _form_errors(form, exc)
                status = 400
            except ValidationError as exc:
                _form_errors(form, exc)
            else:
                messages.success(request, "Note saved.")
                return redirect(_note_url(note))
    else:
        form = NoteForm(
            initial={
                "title": note.head.title,
                "body": note.head.body,
                "tags": " ".join(
                    name for name, from_body in selectors.note_tags(note) if not from_body
                ),
                "base_version": note.head.pk,
            }
        )
    context: dict[str, object] = {
        "form": form,
        "note": note,
        "conflict": conflict,
        "creating": False,
    }
    if conflict:
        status = 409
        # What changed under the user (their starting version → the head), and what saving
        # their text would change (the head → their text).
        context["since_diff"] = services.word_diff(conflict.base.body, conflict.head.body)
        context["yours_diff"] = services.word_diff(conflict.head.body, conflict.body)
    return render(request, "notes/form.html", context, status=status)


@require_http_methods(["GET", "POST"])
@shows_no_access
def note_delete(request: HttpRequest, note_id: int) -> HttpResponse:
    note = _writable(request, _note_or_404(request, note_id))
    if request.method == "POST":
        services.note_delete(document=note, user=request.user)
        messages.success(request, f"Moved “{note.title}” to the trash; you can restore it there.")
        return redirect("notes:list")
    return render(request, "notes/confirm_delete.html", {"note": note})


@require_GET
@shows_no_access
def note_history(request: HttpRequest, note_id: int) -> HttpResponse:
    return _history(request, _note_or_404(request, note_id))


def _history(request: HttpRequest, note: Document, *, status: int = 200) -> HttpResponse:
    note.refresh_from_db()  # a refused restore shows the head as it is now
    return render(
        request,
        "notes/history.html",
        {
            "note": note,
            "versions": selectors.note_versions(note),
            **_note_context(request, note),
        },
        status=status,
    )


def _version_number(raw: str | None, default: int) -> int | None:
    """A user-facing version number from the query string (`default` when absent), or None
    when it is not a whole number from 1."""
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) < 1:
        return None
    return int(raw)


@require_GET
@shows_no_access
def note_compare(request: HttpRequest, note_id: int) -> HttpResponse:
    """`?a=N&b=M`: the word diff from version N to version M of a note (user-facing numbers;
    by default the version before the current one to the current one)."""
    note = _note_or_404(request, note_id)
    head = note.head
    numbers = (
        _version_number(request.GET.get("a"), max(head.number - 1, 1)),
        _version_number(request.GET.get("b"), head.number),
    )
    if None in numbers:
        return _text_response("“a” and “b” must be version numbers (whole numbers from 1).", 400)
    found = {v.number: v for v in note.versions.filter(number__in=numbers)}
    missing = [n for n in numbers if n not in found]
    if missing:
        raise Http404(f"This note has no version {missing[0]}.")
    old, new = found[numbers[0]], found[numbers[1]]
    return render(
        request,
        "notes/compare.html",
        {
            "note": note,
            "old": old,
            "new": new,
            "diff": services.word_diff(old.body, new.body),
            "versions": selectors.note_versions(note).only("number", "created_at"),
        },
    )


@require_GET
@shows_no_access
def note_trash(request: HttpRequest) -> HttpResponse:
    notes = list(
        selectors.trashed_notes_for_user(request.user, space_id=current_space_id(request))[:500]
    )
    restorable = selectors.writable_ids(request.user, notes)
    return render(
        request,
        "notes/trash.html",
        {"notes": notes, "restorable": restorable, **_list_context(request)},
    )


@require_POST
@shows_no_access
def note_undelete(request: HttpRequest, note_id: int) -> HttpResponse:
    """Restore a note from the trash (one of a space the user edits in, only one that is in
    the trash)."""
    try:
        note = selectors.trashed_note_get(request.user, note_id)
    except Document.DoesNotExist:
        raise NotVisible(note_id) from None
    _writable(request, note)
    try:
        services.note_undelete(document=note, user=request.user)
    except ValidationError as exc:
        # Restored meanwhile (another tab, a double click): say so, and show the note.
        messages.info(request, " ".join(exc.messages))
        return redirect(_note_url(note))
    count = note.versions.count()
    messages.success(
        request, f"Restored “{note.title}” with its {count} version{'s' if count != 1 else ''}."
    )
    return redirect(_note_url(note))


@require_GET
@shows_no_access
def version_detail(request: HtmxHttpRequest, note_id: int, version_id: int) -> HttpResponse:
    note = _note_or_404(request, note_id)
    try:
        version = note.versions.get(pk=version_id)
    except Version.DoesNotExist:
        raise Http404("No such version of this note.") from None
    return _rendered_page(
        request,
        "notes/version.html",
        version,
        links.version_url(kind=note.kind, document_id=note.pk, version_id=version.pk),
        {"note": note, **_note_context(request, note)},
    )


@require_POST
@shows_no_access
def version_restore(request: HttpRequest, note_id: int, version_id: int) -> HttpResponse:
    """Restore `version_id` on top of the head the user saw (the form's `base_version`).

    When the note changed since that page was shown, nothing is restored and the history
    page comes back (409) saying so, with the current versions to choose from again.
    """
    note = _writable(request, _note_or_404(request, note_id))
    form = RestoreForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Nothing was restored: {form.first_error()}")
        return _history(request, note, status=400)
    try:
        version = services.note_restore(
            document=note,
            user=request.user,
            version_id=version_id,
            base_version_id=form.cleaned_data["base_version"],
        )
    except Version.DoesNotExist:
        raise Http404("No such version of this note.") from None
    except services.EditConflict as exc:
        messages.error(request, str(exc))
        return _history(request, note, status=409)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return _history(request, note, status=400)
    messages.success(request, f"Restored as version {version.number}.")
    return redirect(_note_url(note))


@require_POST
def note_preview(request: HttpRequest) -> HttpResponse:
    """The edit form's Preview (htmx): the text as it is in the form, rendered by the same
    renderer and sanitiser as a saved note, wiki links resolved for this user.

    Bounded like a page: text over the note size limit is refused (saying so), and only its
    first part (`rendering.split_parts`, as a note page shows first) is rendered.
    """
    body = request.POST.get("body", "")
    size = len(body.encode("utf-8"))
    context: dict[str, object] = {"too_large": "", "html": None, "shown_chars": 0}
    if size > settings.LODE_MAX_NOTE_BYTES:
        context["too_large"] = (
            f"Too long to preview: the text is {size:,} bytes and a note may have at most "
            f"{settings.LODE_MAX_NOTE_BYTES:,}, so it could not be saved either."
        )
    else:
        first = split_parts(body)[0]
        context["html"] = _with_wiki_links(request.user, render_markdown(first.source(body)))
        context["shown_chars"] = first.end
    context["body_chars"] = len(body)
    return render(request, "notes/form.html#preview", context)
