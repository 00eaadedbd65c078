"""Error pages that know about the API: under `/api/` a 400, 404 or 500 answers JSON
(`{"detail": ...}`, the shape every endpoint uses) instead of the HTML page a browser gets.

Django calls these (`handler400`, `handler404`, `handler500` in lode_site/urls.py) when no
view answered: a URL that matches no pattern — such as an id that is not a whole number from
1 to 2**63-1 (lode_site/ids.py) — or an exception no view handled. The traceback of a 500 is
logged by Django's `django.request` logger before this runs (LOGGING in settings).
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

API_PREFIX = "/api/"


def _is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """400: a request Django itself refused (a body over DATA_UPLOAD_MAX_MEMORY_SIZE, a
    suspicious one)."""
    if _is_api(request):
        if isinstance(exception, RequestDataTooBig):
            detail = (
                f"The request body is over the limit of {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} "
                "bytes (LODE_MAX_REQUEST_BYTES)."
            )
        else:
            detail = "Bad request: Django refused it before any endpoint ran."
        return JsonResponse({"detail": detail}, status=400)
    return defaults.bad_request(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404: no page or endpoint matches the URL."""
    if _is_api(request):
        return JsonResponse(
            {
                "detail": "Not found: no API endpoint matches this URL. Ids in API paths are "
                "whole numbers from 1 to 9223372036854775807; see /api/docs."
            },
            status=404,
        )
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """500: an unhandled exception (already logged with its traceback)."""
    if _is_api(request):
        return JsonResponse(
            {"detail": "Server error: lode failed to answer this request; it has been logged."},
            status=500,
        )
    return defaults.server_error(request)
