"""Note pages. Thin: each view reads through selectors, writes through services."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from notes import selectors, services
from notes.forms import NoteForm
from notes.models import Document, Version
from notes.rendering import render_markdown


def _note_or_404(request: HttpRequest, note_id: int) -> Document:
    try:
        return selectors.note_get(request.user, note_id)
    except Document.DoesNotExist:
        raise Http404("No such note.") from None


@require_GET
def note_list(request: HttpRequest) -> HttpResponse:
    tag = request.GET.get("tag") or None
    notes = selectors.notes_for_user(request.user, tag=tag)[:500]
    return render(
        request,
        "notes/list.html",
        {"notes": notes, "tag": tag, "tags": selectors.tags_for_user(request.user)},
    )


@require_GET
def note_detail(request: HttpRequest, note_id: int) -> HttpResponse:
    note = _note_or_404(request, note_id)
    return render(
        request,
        "notes/detail.html",
        {
            "note": note,
            "version": note.head,
            "rendered": render_markdown(note.head.body),
            "tags": selectors.note_tags(note),
        },
    )


def _form_errors(form: NoteForm, exc: ValidationError) -> None:
    for message in exc.messages:
        form.add_error(None, message)


@require_http_methods(["GET", "POST"])
def note_create(request: HttpRequest) -> HttpResponse:
    form = NoteForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            note = services.note_create(
                owner=request.user,
                title=form.cleaned_data["title"],
                body=form.cleaned_data["body"],
                tags=form.cleaned_data["tags"],
            )
        except ValidationError as exc:
            _form_errors(form, exc)
        else:
            messages.success(request, "Note saved.")
            return redirect("notes:detail", note_id=note.pk)
    return render(request, "notes/form.html", {"form": form, "creating": True})


@require_http_methods(["GET", "POST"])
def note_edit(request: HttpRequest, note_id: int) -> HttpResponse:
    note = _note_or_404(request, note_id)
    conflict: services.EditConflict | None = None
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
            except ValidationError as exc:
                _form_errors(form, exc)
            else:
                messages.success(request, "Note saved.")
                return redirect("notes:detail", note_id=note.pk)
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
    status = 409 if conflict else 200
    return render(
        request,
        "notes/form.html",
        {"form": form, "note": note, "conflict": conflict, "creating": False},
        status=status,
    )


@require_http_methods(["GET", "POST"])
def note_delete(request: HttpRequest, note_id: int) -> HttpResponse:
    note = _note_or_404(request, note_id)
    if request.method == "POST":
        services.note_delete(document=note, user=request.user)
        messages.success(request, f"Deleted “{note.title}”.")
        return redirect("notes:list")
    return render(request, "notes/confirm_delete.html", {"note": note})


@require_GET
def note_history(request: HttpRequest, note_id: int) -> HttpResponse:
    note = _note_or_404(request, note_id)
    return render(
        request, "notes/history.html", {"note": note, "versions": selectors.note_versions(note)}
    )


@require_GET
def version_detail(request: HttpRequest, note_id: int, version_id: int) -> HttpResponse:
    note = _note_or_404(request, note_id)
    try:
        version = note.versions.get(pk=version_id)
    except Version.DoesNotExist:
        raise Http404("No such version of this note.") from None
    return render(
        request,
        "notes/version.html",
        {"note": note, "version": version, "rendered": render_markdown(version.body)},
    )


@require_POST
def version_restore(request: HttpRequest, note_id: int, version_id: int) -> HttpResponse:
    note = _note_or_404(request, note_id)
    try:
        version = services.note_restore(document=note, user=request.user, version_id=version_id)
    except Version.DoesNotExist:
        raise Http404("No such version of this note.") from None
    messages.success(request, f"Restored as version {version.number}.")
    return redirect("notes:detail", note_id=note.pk)
