"""The request type of views that read `request.htmx` (django-htmx's documented pattern).

`django_htmx.middleware.HtmxMiddleware` (in settings.MIDDLEWARE) sets `request.htmx` on every
request; Django's `HttpRequest` does not declare it, so a view typed with it reads an
attribute its type does not have. The class is only an annotation: views still receive
Django's own request objects.
"""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails
