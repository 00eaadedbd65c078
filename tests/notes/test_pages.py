"""The HTML pages through Django's test client: login, note CRUD and history, isolation
between users, edit conflicts, the search page (full page and htmx partial), CSRF and XSS."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from notes import services
from notes.models import Document, Version
from tests.factories import (
    HOSTILE_HTTP_QUERIES,
    assert_no_executable_markup,
    note_state,
)

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"

XSS_BODY = (
    "Intro text.\n\n"
    "<script>alert(1)</script>\n\n"
    "<img src=x onerror=alert(1)>\n\n"
    "[x](javascript:alert(1))\n\n"
    '<a href="javascript:alert(1)">click</a>\n\n'
    "[y](JaVaScRiPt:alert(2)) and [z](  javascript:alert(3))\n\n"
    "<svg onload=alert(1)></svg> <iframe src=javascript:alert(1)></iframe>\n"
)
XSS_TITLE = '<script>alert("title")</script> Title'


def text(response) -> str:
    return response.content.decode("utf-8")


def note_urls(note: Document) -> dict[str, str]:
    version = note.head_id
    return {
        "detail": reverse("notes:detail", args=[note.pk]),
        "edit": reverse("notes:edit", args=[note.pk]),
        "delete": reverse("notes:delete", args=[note.pk]),
        "history": reverse("notes:history", args=[note.pk]),
        "version": reverse("notes:version", args=[note.pk, version]),
        "restore": reverse("notes:restore", args=[note.pk, version]),
    }


# --------------------------------------------------------------------------
# Login
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/", "/notes/", "/notes/new", "/notes/1", "/notes/1/edit", "/notes/1/delete",
     "/notes/1/history", "/notes/1/versions/1", "/search", "/search?q=certbot"],
)  # fmt: skip
def test_anonymous_get_redirects_to_login(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith(LOGIN)


@pytest.mark.parametrize("name", ["create", "edit", "delete", "restore"])
def test_anonymous_post_redirects_and_changes_nothing(client, alice_note, name):
    before = note_state(alice_note)
    url = reverse("notes:create") if name == "create" else note_urls(alice_note)[name]
    response = client.post(url, {"title": "anon", "body": "anon", "base_version": before[0]})
    assert response.status_code == 302
    assert response["Location"].startswith(LOGIN)
    assert note_state(alice_note) == before
    assert Document.objects.count() == 1


def test_login_page_is_public(client):
    response = client.get(LOGIN)
    assert response.status_code == 200
    assert 'name="password"' in text(response)


def test_login_with_password(client, alice):
    from tests.conftest import PASSWORD

    response = client.post(LOGIN, {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302
    assert client.get("/notes/").status_code == 200


# --------------------------------------------------------------------------
# Owner CRUD
# --------------------------------------------------------------------------


def test_note_list_shows_own_notes_and_tags(alice_client, alice_note):
    response = alice_client.get("/notes/")
    assert response.status_code == 200
    page = text(response)
    assert "Deploy runbook" in page
    assert "#infra" in page
    assert "#ops" in page
    assert "Deploy runbook" in text(alice_client.get("/notes/?tag=infra"))
    assert "Deploy runbook" not in text(alice_client.get("/notes/?tag=nothing"))


def test_empty_note_list(alice_client):
    response = alice_client.get("/notes/")
    assert response.status_code == 200
    assert "Your library is empty" in text(response)  # the welcome guide


def test_create_note_via_form(alice_client, alice):
    assert alice_client.get("/notes/new").status_code == 200
    response = alice_client.post(
        "/notes/new", {"title": "Shopping", "body": "Milk and #groceries", "tags": "Home"}
    )
    note = Document.objects.get(owner=alice, title="Shopping")
    assert response.status_code == 302
    assert response["Location"] == reverse("notes:detail", args=[note.pk])
    assert note.head.body == "Milk and #groceries"
    page = text(alice_client.get(response["Location"]))
    assert "Shopping" in page
    assert "#home" in page
    assert "#groceries" in page


@pytest.mark.parametrize(
    "data",
    [
        {"title": "", "body": "no title"},
        {"title": "   ", "body": "blank title"},
        {"title": "t", "body": "x", "tags": "bad!tag"},
        {"title": "t", "body": "nul \x00 byte"},
    ],
)
def test_create_note_invalid_shows_errors(alice_client, data):
    response = alice_client.post("/notes/new", data)
    assert response.status_code == 200
    assert not Document.objects.exists()
    assert 'class="error' in text(response) or "errorlist" in text(response)


def test_detail_renders_markdown(alice_client, alice_note):
    response = alice_client.get(reverse("notes:detail", args=[alice_note.pk]))
    assert response.status_code == 200
    page = text(response)
    assert "<h2>Redis</h2>" in page
    assert "Rotate the staging certs" in page
    assert "Version 1" in page


def test_edit_form_prefills_head(alice_client, alice_note):
    response = alice_client.get(reverse("notes:edit", args=[alice_note.pk]))
    assert response.status_code == 200
    page = text(response)
    assert f'name="base_version" value="{alice_note.head_id}"' in page
    assert "maxmemory-policy allkeys-lru" in page
    assert 'value="infra"' in page


def test_edit_saves_new_version(alice_client, alice_note):
    v1 = alice_note.head
    response = alice_client.post(
        reverse("notes:edit", args=[alice_note.pk]),
        {"title": "Runbook", "body": "New body", "tags": "infra", "base_version": v1.pk},
    )
    assert response.status_code == 302
    alice_note.refresh_from_db()
    assert alice_note.head.number == 2
    assert alice_note.head.body == "New body"
    assert alice_note.title == "Runbook"
    assert "New body" in text(alice_client.get(response["Location"]))


def test_edit_with_stale_base_shows_conflict_and_saves_nothing(alice_client, alice, alice_note):
    v1 = alice_note.head
    services.note_update(
        document=alice_note,
        user=alice,
        base_version_id=v1.pk,
        title="Deploy runbook",
        body="Edited in another tab: penguins.",
    )
    before = note_state(alice_note)
    response = alice_client.post(
        reverse("notes:edit", args=[alice_note.pk]),
        {"title": "Mine", "body": "My stale text: walruses.", "tags": "", "base_version": v1.pk},
    )
    assert response.status_code == 409
    page = text(response)
    assert "Edited in another tab: penguins." in page
    assert "My stale text: walruses." in page
    assert note_state(alice_note) == before
    # The form is now based on the current head, so a second save is deliberate.
    assert f'name="base_version" value="{before[0]}"' in page


def test_second_save_after_conflict_succeeds(alice_client, alice, alice_note):
    v1 = alice_note.head
    v2 = services.note_update(
        document=alice_note, user=alice, base_version_id=v1.pk, title="T", body="other tab"
    )
    url = reverse("notes:edit", args=[alice_note.pk])
    data = {"title": "T", "body": "mine", "tags": "", "base_version": v1.pk}
    assert alice_client.post(url, data).status_code == 409
    data["base_version"] = v2.pk
    assert alice_client.post(url, data).status_code == 302
    alice_note.refresh_from_db()
    assert alice_note.head.body == "mine"
    assert alice_note.head.number == 3


def test_edit_without_base_version_is_refused_and_says_so(alice_client, alice_note):
    before = note_state(alice_note)
    response = alice_client.post(
        reverse("notes:edit", args=[alice_note.pk]), {"title": "T", "body": "no base"}
    )
    assert response.status_code == 400
    assert "is not a version of this note" in text(response)
    assert "no base" in text(response)  # the text is kept, now based on the current head
    assert f'name="base_version" value="{alice_note.head_id}"' in text(response)
    assert note_state(alice_note) == before


def test_delete_confirms_then_deletes(alice_client, alice_note):
    url = reverse("notes:delete", args=[alice_note.pk])
    response = alice_client.get(url)
    assert response.status_code == 200
    assert note_state(alice_note)[2] is None
    response = alice_client.post(url)
    assert response.status_code == 302
    assert response["Location"] == reverse("notes:list")
    alice_note.refresh_from_db()
    assert alice_note.is_deleted
    assert alice_client.get(reverse("notes:detail", args=[alice_note.pk])).status_code == 404
    assert "Your library is empty" in text(alice_client.get("/notes/"))


def test_history_version_and_restore(alice_client, alice, alice_note):
    v1 = alice_note.head
    services.note_update(
        document=alice_note, user=alice, base_version_id=v1.pk, title="Second", body="v2 text"
    )
    page = text(alice_client.get(reverse("notes:history", args=[alice_note.pk])))
    assert "v1" in page
    assert "v2" in page
    assert reverse("notes:restore", args=[alice_note.pk, v1.pk]) in page

    response = alice_client.get(reverse("notes:version", args=[alice_note.pk, v1.pk]))
    assert response.status_code == 200
    assert "older version" in text(response)
    assert "Rotate the staging certs" in text(response)

    assert alice_client.get(reverse("notes:restore", args=[alice_note.pk, v1.pk])).status_code == (
        405
    )
    alice_note.refresh_from_db()
    response = alice_client.post(
        reverse("notes:restore", args=[alice_note.pk, v1.pk]),
        {"base_version": alice_note.head_id},
    )
    assert response.status_code == 302
    alice_note.refresh_from_db()
    assert alice_note.head.number == 3
    assert alice_note.head.body == v1.body
    assert alice_note.title == "Deploy runbook"


def test_restore_forms_carry_the_head_they_showed(alice_client, alice, alice_note):
    v1 = alice_note.head
    v2 = services.note_update(
        document=alice_note, user=alice, base_version_id=v1.pk, title="Second", body="v2 text"
    )
    hidden = f'name="base_version" value="{v2.pk}"'
    assert hidden in text(alice_client.get(reverse("notes:history", args=[alice_note.pk])))
    assert hidden in text(alice_client.get(reverse("notes:version", args=[alice_note.pk, v1.pk])))


def test_restore_from_a_stale_page_is_409_and_restores_nothing(alice_client, alice, alice_note):
    v1 = alice_note.head
    v2 = services.note_update(
        document=alice_note, user=alice, base_version_id=v1.pk, title="Second", body="v2 text"
    )
    v3 = services.note_update(
        document=alice_note, user=alice, base_version_id=v2.pk, title="Third", body="v3 text"
    )
    before = note_state(alice_note)
    url = reverse("notes:restore", args=[alice_note.pk, v1.pk])
    response = alice_client.post(url, {"base_version": v2.pk})  # the page showed v2 as head
    assert response.status_code == 409
    page = text(response)
    assert "Nothing was restored" in page
    assert f'name="base_version" value="{v3.pk}"' in page  # the fresh page, to try again
    assert note_state(alice_note) == before


def test_restore_without_or_with_a_foreign_base_is_400(alice_client, alice, alice_note):
    v1 = alice_note.head
    services.note_update(
        document=alice_note, user=alice, base_version_id=v1.pk, title="Second", body="v2 text"
    )
    other = services.note_create(owner=alice, title="Other", body="other")
    before = note_state(alice_note)
    url = reverse("notes:restore", args=[alice_note.pk, v1.pk])
    response = alice_client.post(url)
    assert response.status_code == 400
    assert "did not say which version you saw" in text(response)
    response = alice_client.post(url, {"base_version": other.head_id})
    assert response.status_code == 400
    assert "is not a version of this note" in text(response)
    assert note_state(alice_note) == before


def test_unknown_version_is_404(alice_client, alice, alice_note):
    other = services.note_create(owner=alice, title="Other", body="other")
    bad = reverse("notes:version", args=[alice_note.pk, other.head_id])
    assert alice_client.get(bad).status_code == 404
    before = note_state(alice_note)
    restore = reverse("notes:restore", args=[alice_note.pk, other.head_id])
    assert alice_client.post(restore, {"base_version": alice_note.head_id}).status_code == 404
    assert note_state(alice_note) == before


def test_missing_note_is_404(alice_client):
    assert alice_client.get("/notes/999999").status_code == 404


# --------------------------------------------------------------------------
# Bob and alice's notes
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["detail", "edit", "delete", "history", "version"])
def test_bob_gets_404_for_alices_pages(bob_client, alice_note, name):
    before = note_state(alice_note)
    response = bob_client.get(note_urls(alice_note)[name])
    assert response.status_code == 404
    assert "Deploy runbook" not in text(response)
    assert note_state(alice_note) == before


@pytest.mark.parametrize("name", ["edit", "delete", "restore", "detail", "history", "version"])
def test_bob_posts_to_alices_urls_are_404_and_change_nothing(bob_client, alice_note, name):
    before = note_state(alice_note)
    versions = Version.objects.count()
    data = {"title": "pwned", "body": "bob was here", "tags": "", "base_version": before[0]}
    response = bob_client.post(note_urls(alice_note)[name], data)
    assert response.status_code in (404, 405)
    if name in ("edit", "delete", "restore"):
        assert response.status_code == 404
    assert note_state(alice_note) == before
    assert Version.objects.count() == versions
    assert not Document.objects.filter(title="pwned").exists()


def test_bob_does_not_see_alices_notes_or_tags(bob_client, alice_note):
    page = text(bob_client.get("/notes/"))
    assert "Deploy runbook" not in page
    assert "#infra" not in page
    assert "Deploy runbook" not in text(bob_client.get("/notes/?tag=infra"))


def test_bob_search_page_does_not_show_alices_passages(bob_client, alice_note):
    response = bob_client.get("/search", {"q": "certbot"})
    assert response.status_code == 200
    page = text(response)
    assert "Nothing in your notes matches" in page
    assert "Rotate the staging certs" not in page
    assert "Deploy runbook" not in page


# --------------------------------------------------------------------------
# Search page
# --------------------------------------------------------------------------


def test_search_page_full_render(alice_client, alice_note):
    response = alice_client.get("/search", {"q": "certbot"})
    assert response.status_code == 200
    page = text(response)
    assert "<html" in page
    assert 'name="q" value="certbot"' in page
    assert "Rotate the staging certs with <mark>certbot</mark>" in page
    assert reverse("notes:version", args=[alice_note.pk, alice_note.head_id]) in page


def test_search_page_htmx_partial(alice_client, alice_note):
    response = alice_client.get("/search", {"q": "certbot"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    page = text(response)
    assert "<html" not in page
    assert "<form" not in page
    assert "Rotate the staging certs with <mark>certbot</mark>" in page


def test_search_page_empty_query(alice_client, alice_note):
    for params in ({}, {"q": ""}, {"q": "   "}):
        response = alice_client.get("/search", params)
        assert response.status_code == 200
        assert "Type words to search" in text(response)


def test_search_page_no_results(alice_client, alice_note):
    # Keyword mode: a semantic leg may always find a nearest neighbour.
    page = text(alice_client.get("/search", {"q": "xylophone", "mode": "lexical"}))
    assert "Nothing in your notes matches" in page
    assert "lexical search" not in page  # the mode is an Advanced detail
    advanced = {"q": "xylophone", "mode": "lexical", "adv": "1"}
    assert "lexical search" in text(alice_client.get("/search", advanced))


def test_search_page_mode_parameter_is_honoured(alice_client, alice_note):
    page = text(alice_client.get("/search", {"q": "certbot", "mode": "lexical"}))
    assert '<input type="hidden" name="mode" value="lexical">' in page
    page = text(alice_client.get("/search", {"q": "certbot", "mode": "lexical", "adv": "1"}))
    assert '<option value="lexical" selected>' in page
    assert "Rotate the staging certs with <mark>certbot</mark>" in page
    page = text(alice_client.get("/search", {"q": "certbot", "mode": "telepathy"}))
    assert 'role="alert"' in page


def test_home_redirects_to_search(alice_client):
    response = alice_client.get("/")
    assert response.status_code == 302
    assert response["Location"] == reverse("retrieval:search")


@pytest.mark.parametrize("query", HOSTILE_HTTP_QUERIES)
@pytest.mark.parametrize("htmx", [False, True])
def test_search_page_hostile_queries(alice_client, alice_note, query, htmx):
    headers = {"HX-Request": "true"} if htmx else {}
    response = alice_client.get("/search", {"q": query}, headers=headers)
    assert response.status_code == 200
    page = text(response)
    if query.strip():
        assert 'role="alert"' in page or "passage" in page
    else:  # nothing to search for: the page asks for words instead
        assert 'class="empty"' in page and "Type words" in page
    assert_no_executable_markup(page)


@pytest.mark.parametrize("raw", ["%ED%A0%80", "%FF%FE", "%00", "%C0%AF"])
def test_search_page_invalid_utf8_query(alice_client, alice_note, raw):
    response = alice_client.get(f"/search?q={raw}")
    assert response.status_code == 200


def test_search_page_over_long_query_says_why(alice_client, alice_note):
    page = text(alice_client.get("/search", {"q": "x" * 10_000}))
    assert 'role="alert"' in page
    assert "limit" in page


# --------------------------------------------------------------------------
# CSRF
# --------------------------------------------------------------------------


def test_csrf_required_for_note_create(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post("/notes/new", {"title": "No token", "body": "x"})
    assert response.status_code == 403
    assert not Document.objects.exists()


def test_csrf_token_from_form_is_accepted(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    page = text(client.get("/notes/new"))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = client.post(
        "/notes/new", {"title": "With token", "body": "x", "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    assert Document.objects.filter(title="With token").exists()


@pytest.mark.parametrize("name", ["edit", "delete", "restore"])
def test_csrf_required_for_note_writes(alice, alice_note, name):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    before = note_state(alice_note)
    data = {"title": "x", "body": "y", "base_version": alice_note.head_id}
    response = client.post(note_urls(alice_note)[name], data)
    assert response.status_code == 403
    assert note_state(alice_note) == before


# --------------------------------------------------------------------------
# XSS
# --------------------------------------------------------------------------


@pytest.fixture
def xss_note(alice):
    return services.note_create(owner=alice, title=XSS_TITLE, body=XSS_BODY)


@pytest.mark.parametrize("name", ["detail", "edit", "history", "version", "delete"])
def test_note_pages_escape_hostile_content(alice_client, xss_note, name):
    response = alice_client.get(note_urls(xss_note)[name])
    assert response.status_code == 200
    page = text(response)
    assert_no_executable_markup(page)
    assert "&lt;script&gt;alert(" in page  # the title (and body) shown as text


def test_detail_shows_script_as_text(alice_client, xss_note):
    page = text(alice_client.get(note_urls(xss_note)["detail"]))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "Intro text." in page


def test_note_list_escapes_title(alice_client, xss_note):
    page = text(alice_client.get("/notes/"))
    assert_no_executable_markup(page)
    assert escape(XSS_TITLE) in page


def test_conflict_page_escapes_both_texts(alice_client, alice, xss_note):
    v1 = xss_note.head
    services.note_update(
        document=xss_note,
        user=alice,
        base_version_id=v1.pk,
        title=XSS_TITLE,
        body=XSS_BODY + "\nsecond",
    )
    response = alice_client.post(
        note_urls(xss_note)["edit"],
        {"title": "t", "body": "<script>alert(1)</script> mine", "base_version": v1.pk},
    )
    assert response.status_code == 409
    page = text(response)
    assert_no_executable_markup(page)
    assert "&lt;script&gt;alert(1)&lt;/script&gt; mine" in page


def test_search_results_escape_passage_text(alice_client, xss_note):
    for headers in ({}, {"HX-Request": "true"}):
        response = alice_client.get("/search", {"q": "alert intro"}, headers=headers)
        assert response.status_code == 200
        page = text(response)
        assert "<mark>Intro</mark> text." in page  # the note was found, "intro" highlighted
        assert_no_executable_markup(page)
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page or "&lt;img" in page
