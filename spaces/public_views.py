"""The public page of a public read-only link: `GET /p/<token>[?part=N]`.

Anyone with the URL may open it: no login (`login_not_required`), and nothing here touches
the session, the user or the CSRF token, so the response sets no cookie. The page is
rendered without the request (no context processors: nothing of whoever is signed in in this
browser can reach it) from `templates/public/`, whose base template is not the app's: no
navigation, no search box, no link into the space.

Every request is counted against the rate limit first (`public.view_refusal`), whatever its
token, so guessing tokens is throttled like reading; a served page is logged
(`public.record_view`). An unknown, revoked or expired token, a space that turned public
links off and a target gone from the space all get the same 404 page, byte for byte.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from lode_site.throttle import client_address
from notes.rendering import NoSuchPart, rendered_part
from retrieval.answer.types import tier_of
from spaces import public
from spaces.models import PublicLink

# Every public response: not indexed, no referrer sent from it (the token is in the URL),
# kept by no cache (a revoked link must stop working at once).
PUBLIC_HEADERS = {
    "X-Robots-Tag": "noindex, nofollow",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "private, no-store",
}


def _respond(template: str, context: dict, status: int = 200) -> HttpResponse:
    response = HttpResponse(render_to_string(template, context), status=status)
    for name, value in PUBLIC_HEADERS.items():
        response[name] = value
    return response


def unavailable() -> HttpResponse:
    """The one page of every link that shows nothing (404)."""
    return _respond("public/unavailable.html", {}, status=404)


def too_many(retry_after: int) -> HttpResponse:
    response = _respond("public/too_many.html", {"retry_after": retry_after}, status=429)
    response["Retry-After"] = str(retry_after)
    return response


def _part_number(raw: str) -> int | None:
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) < 1:
        return None
    return int(raw)


def _version_page(link: PublicLink, part_number: int) -> HttpResponse:
    version = link.version
    context: dict = {"link": link, "version": version, "intact": public.version_intact(version)}
    if context["intact"]:
        try:
            context["part"] = rendered_part(
                sha256=version.sha256, body=version.body, number=part_number
            )
        except NoSuchPart:
            return unavailable()
        context["page_url"] = public.public_url(link)
    return _respond("public/version.html", context)


def _answer_page(link: PublicLink) -> HttpResponse:
    answer = link.answer
    stored = answer.answer or {}
    decision = stored.get("decision") or answer.decision
    claims = public.verified_claims(link)
    return _respond(
        "public/answer.html",
        {
            "link": link,
            "question": stored.get("question") or answer.question,
            "asked_at": answer.created_at,
            "decision": decision,
            "tier": tier_of(
                str(decision),
                error=str(stored.get("error") or ""),
                has_best_match=bool(stored.get("best_match")),
            ),
            "claims": claims,
            # The notes cited here changed since: a quoted version is no longer its note's
            # current one (what `verified_claims` read for each quote it shows).
            "stale": any(s.superseded_by is not None for c in claims for s in c.supports),
        },
    )


@login_not_required
@transaction.non_atomic_requests  # a cited version's source file is re-read outside any transaction
@require_GET
def public_link_page(request: HttpRequest, token: str) -> HttpResponse:
    address = client_address(request)
    retry_after = public.view_refusal(address)
    if retry_after is not None:
        return too_many(retry_after)
    link = public.link_resolve(token)
    if link is None:
        return unavailable()
    part_number = 1
    if link.kind == PublicLink.Kind.VERSION:
        part_number = _part_number(request.GET.get("part", "1"))
        if part_number is None:
            return unavailable()
    public.record_view(link, address)
    if link.kind == PublicLink.Kind.VERSION:
        return _version_page(link, part_number)
    return _answer_page(link)
