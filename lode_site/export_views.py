"""Settings → Export your notes: a zip of the notes you may see, as Markdown with front
matter (`notes.export`), for Obsidian or `manage.py lode_import_markdown`.

    POST /settings/export    the zip as a download; past LODE_EXPORT_MAX_BYTES or
                             LODE_EXPORT_MAX_SECONDS, back to the settings page with why

The zip is built in an unnamed temporary file (gone when the response is closed), never in
memory, and streamed from there.
"""

from __future__ import annotations

import tempfile

from django.conf import settings
from django.contrib import messages
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_POST

from notes.export import ExportTooLarge, ZipSink, export_documents


@require_POST
def export_download(request: HttpRequest) -> HttpResponse:
    versions = request.POST.get("versions") == "on"
    # Not a `with`: on success FileResponse owns the file and closes it once sent.
    file = tempfile.TemporaryFile(prefix="lode-export-")  # noqa: SIM115
    sink = ZipSink(file)
    try:
        export_documents(
            sink,
            user=request.user,
            versions=versions,
            max_bytes=settings.LODE_EXPORT_MAX_BYTES,
            max_seconds=settings.LODE_EXPORT_MAX_SECONDS,
        )
        sink.close()
    except ExportTooLarge as exc:
        sink.close()
        file.close()
        messages.error(request, str(exc))
        return redirect("settings-tokens")
    except BaseException:
        file.close()
        raise
    file.seek(0)
    stamp = timezone.now().strftime("%Y-%m-%d")
    name = f"lode-notes-{request.user.get_username()}-{stamp}.zip"
    return FileResponse(file, as_attachment=True, filename=name, content_type="application/zip")
