"""The query language's help page, `GET /search/help` (login required by the site
middleware). `retrieval/query.py` implements what it documents; the allowed values come
from the models, so the page cannot drift from them."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from notes.models import Document, TrustTier


@require_GET
def search_help(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "search/help.html",
        {
            "kinds": Document.Kind.values,
            "trust_tiers": TrustTier.choices,
            "time_zone": settings.TIME_ZONE,
            "max_chars": settings.LODE_MAX_QUERY_CHARS,
        },
    )
