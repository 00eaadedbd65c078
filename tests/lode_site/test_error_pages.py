"""The 404 and 403 pages: inside the app's layout (top bar, a way back to
search and the notes), in plain words, and revealing nothing — another user's note answers
exactly what a note that never existed answers. DEBUG is off here, as in production."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory
from django.urls import get_resolver, reverse

from notes.models import Document

pytestmark = pytest.mark.django_db

CSRF_TOKEN = re.compile(r'(csrfmiddlewaretoken" value="|"X-CSRFToken": ")[^"]+')


def body(response) -> str:
    return response.content.decode()


def without_tokens(html: str) -> str:
    """The page with its CSRF tokens blanked: they differ on every render."""
    return CSRF_TOKEN.sub(r"\1", html)


def test_missing_note_is_the_styled_404(alice_client):
    """A note id that names nothing the user may see is the no-access page: the
    same for a note that does not exist and one in a space they are not in."""
    response = alice_client.get(reverse("notes:detail", args=[999_999]))
    assert response.status_code == 404
    assert "no_access.html" in [t.name for t in response.templates]
    assert "base.html" in [t.name for t in response.templates]
    html = body(response)
    assert "have access to this" in html
    assert 'class="topbar"' in html  # the app's own layout, its navigation included
    assert f'href="{reverse("retrieval:search")}"' in html
    assert f'href="{reverse("notes:list")}"' in html
    assert "No such note" not in html  # the view's exception message is for logs


@pytest.mark.parametrize("name", ["detail", "edit", "delete", "history"])
def test_another_users_note_looks_like_a_missing_one(bob_client, alice_note, name):
    missing_id = Document.objects.order_by("-pk").first().pk + 1000
    theirs = bob_client.get(reverse(f"notes:{name}", args=[alice_note.pk]))
    missing = bob_client.get(reverse(f"notes:{name}", args=[missing_id]))
    assert theirs.status_code == missing.status_code == 404
    assert "no_access.html" in [t.name for t in theirs.templates]
    html = body(theirs)
    assert alice_note.title not in html
    assert without_tokens(html) == without_tokens(body(missing))


def test_unmatched_url_is_the_styled_404_and_api_stays_json(alice_client):
    page = alice_client.get("/no-such-page/")
    assert page.status_code == 404
    assert "404.html" in [t.name for t in page.templates]
    assert "/no-such-page/" not in body(page)
    api = alice_client.get("/api/no-such-endpoint")
    assert api.status_code == 404
    assert api["Content-Type"].startswith("application/json")


def test_signed_out_404_offers_log_in():
    response = Client().get("/no-such-page/")
    assert response.status_code == 404
    html = body(response)
    assert f'href="{reverse("login")}"' in html
    assert "Log out" not in html


def test_403_is_styled_and_says_why(alice):
    """Django answers an unhandled PermissionDenied with the URLconf's 403 handler, which
    renders templates/403.html. lode raises it only for a member whose role does not allow a
    change, with a sentence for them, so the page says it."""
    handler = get_resolver().resolve_error_handler(403)
    request = RequestFactory().get("/notes/1/edit")
    request.user = alice
    response = handler(request, exception=PermissionDenied("You cannot change this note."))
    assert response.status_code == 403
    html = body(response)
    assert "<h1>You can't do this here</h1>" in html
    assert 'class="topbar"' in html
    assert f'href="{reverse("retrieval:search")}"' in html
    assert "You cannot change this note." in html

    request = RequestFactory().get("/notes/1/edit")
    request.user = AnonymousUser()
    assert f'href="{reverse("login")}"' in body(handler(request, exception=PermissionDenied()))


# --- the database unavailable (a PostgreSQL restart is a 503, never a 500) -----


def _lose_the_database(monkeypatch, target: str) -> None:
    """Make `target` (a function a view calls) fail as a lost PostgreSQL connection does:
    Django's OperationalError raised from the driver's."""
    from django.db import OperationalError

    class DriverError(Exception):
        pass

    def lost(*args, **kwargs):
        try:
            raise DriverError("server closed the connection unexpectedly")
        except DriverError as exc:
            raise OperationalError("server closed the connection unexpectedly") from exc

    monkeypatch.setattr(target, lost)


def test_a_lost_database_is_a_503_with_retry_after_on_the_api(monkeypatch, alice):
    from lode_site.models import ApiToken, token_digest

    ApiToken.objects.create(user=alice, name="t", digest=token_digest("lode_test_token"))
    _lose_the_database(monkeypatch, "retrieval.web.search_api.search")
    client = Client(raise_request_exception=False)
    response = client.get(
        "/api/search/", {"q": "backups"}, HTTP_AUTHORIZATION="Bearer lode_test_token"
    )
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "database is unavailable" in response.json()["detail"]


def test_a_lost_database_is_a_503_page_that_needs_no_database(monkeypatch, alice_client):
    from lode_site import errors

    _lose_the_database(monkeypatch, "retrieval.web.search_views.search")
    alice_client.raise_request_exception = False
    response = alice_client.get(reverse("retrieval:search"), {"q": "backups"})
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    html = body(response)
    assert "lode is briefly unavailable" in html
    assert errors.DATABASE_UNAVAILABLE in html
    # Rendered without the request: no user is loaded from the database that is down.
    assert "Log out" not in html


def test_other_unhandled_errors_stay_500(monkeypatch, alice_client):
    def broken(*args, **kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr("retrieval.web.search_views.search", broken)
    alice_client.raise_request_exception = False
    response = alice_client.get(reverse("retrieval:search"), {"q": "backups"})
    assert response.status_code == 500
    assert "Retry-After" not in response
