"""Error pages that know about the API: under `/api/` a 400, 404, 500 or 503 answers JSON
(`{"detail": ...}`, the shape every endpoint uses) instead of the HTML page a browser gets.

An unhandled exception that says the database cannot be reached (PostgreSQL restarting or
down, a connection lost mid-request, SQLite busy beyond its timeout) is not a bug in lode:
it answers 503 with `Retry-After` and says so, instead of a 500. Connections are checked
before reuse (`CONN_HEALTH_CHECKS`), so the next request after the server is back works.

Django calls these (`handler400`, `handler404`, `handler500` in lode_site/urls.py) when no
view answered: a URL that matches no pattern — such as an id that is not a whole number from
1 to 2**63-1 (lode_site/ids.py) — or an exception no view handled. The traceback of a 500 is
logged by Django's `django.request` logger before this runs (LOGGING in settings).
"""

from __future__ import annotations

import logging
import sys

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views import defaults

API_PREFIX = "/api/"
# Seconds a client is asked to wait before retrying while the database is unreachable: a
# PostgreSQL restart takes a few.
DATABASE_RETRY_AFTER = 5
DATABASE_UNAVAILABLE = (
    "The database is unavailable right now (restarting or unreachable), so this request "
    "could not be answered. Try again in a few seconds. If it was saving something, open "
    "it again to check before saving a second time."
)

logger = logging.getLogger("lode.errors")


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


NO_ACCESS = "No access: this belongs to a space you are not a member of, or it does not exist."


def no_access(request: HttpRequest) -> HttpResponse:
    """404 for something the viewer may not see: a space they are not in, or a
    link into one. It looks exactly like a link to nothing, so it reveals no title, count,
    snippet or space; under `/api/` it is `{"detail": …}`."""
    if _is_api(request):
        return JsonResponse({"detail": NO_ACCESS}, status=404)
    return HttpResponse(render_to_string("no_access.html", request=request), status=404)


def is_database_unavailable(exc: BaseException | None) -> bool:
    """Whether `exc` (or what it was raised from) says the database cannot be reached or
    used right now, rather than that a query is wrong: Django wraps the driver's
    OperationalError and InterfaceError (connection refused or lost, server shutting down,
    SQLite locked) in its own classes of the same names."""
    while exc is not None:
        if isinstance(exc, (OperationalError, InterfaceError)):
            return True
        exc = exc.__cause__
    return False


def database_unavailable(request: HttpRequest) -> HttpResponse:
    """503 with Retry-After. The HTML page is rendered without the request: its context
    processors would load the session's user, from the database that is down."""
    if _is_api(request):
        response: HttpResponse = JsonResponse({"detail": DATABASE_UNAVAILABLE}, status=503)
    else:
        response = HttpResponse(
            render_to_string("503.html", {"message": DATABASE_UNAVAILABLE}), status=503
        )
    response["Retry-After"] = str(DATABASE_RETRY_AFTER)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """500: an unhandled exception (already logged with its traceback), or 503 when the
    exception says the database is unavailable (see the module docstring)."""
    if is_database_unavailable(sys.exc_info()[1]):
        logger.warning("%s %s: database unavailable", request.method, request.path_info)
        return database_unavailable(request)
    if _is_api(request):
        return JsonResponse(
            {"detail": "Server error: lode failed to answer this request; it has been logged."},
            status=500,
        )
    return defaults.server_error(request)
