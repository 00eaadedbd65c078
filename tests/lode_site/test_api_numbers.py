"""Numbers in URLs and parameters never make a server error.

Ids outside 1..2**63-1 used to reach the database and fail there: SQLite's OverflowError,
PostgreSQL's out-of-range error, "Negative indexing is not supported" for `offset=-1`. Now
page URLs and API paths use the bounded `<id:...>` converter (lode_site/ids.py), so such an
id matches no URL (404), and API parameters declare their bounds (422). Under /api/ every
error answers JSON, and a server error's traceback is logged (LOGGING in settings).
"""

from __future__ import annotations

import io
import logging

import pytest
from django.test import Client
from django.urls import reverse

from lode_site.ids import MAX_ID, IdConverter
from notes import selectors
from notes.models import Document

pytestmark = pytest.mark.django_db

TOO_BIG = str(MAX_ID + 1)  # 9223372036854775808: one past bigint
HUGE = "99999999999999999999"  # 20 digits
BAD_IDS = [TOO_BIG, HUGE, "0", "-1", "1e3", "abc", "１２"]  # the last: full-width digits


def client_for(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def assert_json_error(response, status: int) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    data = response.json()
    assert data["detail"], data
    return data


# --------------------------------------------------------------------------
# The converter
# --------------------------------------------------------------------------


def test_id_converter_bounds():
    converter = IdConverter()
    assert converter.to_python("1") == 1
    assert converter.to_python(str(MAX_ID)) == MAX_ID
    for value in ("0", TOO_BIG, "0000"):
        with pytest.raises(ValueError):
            converter.to_python(value)
    assert reverse("notes:detail", args=[MAX_ID]) == f"/notes/{MAX_ID}"


# --------------------------------------------------------------------------
# Query parameters
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "message"),
    [("-1", "greater than or equal to 0"), (TOO_BIG, "less than or equal to"), ("x", "integer")],
)
def test_notes_offset_out_of_range_is_422(alice, alice_note, offset, message):
    data = assert_json_error(client_for(alice).get("/api/notes/", {"offset": offset}), 422)
    assert data["detail"][0]["loc"] == ["query", "offset"]
    assert message in data["detail"][0]["msg"]


def test_notes_offset_and_limit_extremes_answer(alice, alice_note):
    client = client_for(alice)
    response = client.get("/api/notes/", {"offset": str(MAX_ID)})
    assert response.status_code == 200
    assert response.json() == []
    response = client.get("/api/notes/", {"limit": TOO_BIG})  # clamped to 500
    assert response.status_code == 200
    assert [n["id"] for n in response.json()] == [alice_note.pk]
    response = client.get("/api/notes/", {"limit": "-5"})  # clamped to 1
    assert [n["id"] for n in response.json()] == [alice_note.pk]


def test_search_limit_extremes_answer(alice, alice_note):
    client = client_for(alice)
    for limit in (TOO_BIG, "-1", "0"):
        response = client.get("/api/search/", {"q": "certbot", "mode": "lexical", "limit": limit})
        assert response.status_code == 200, limit
        assert len(response.json()["hits"]) == 1


# --------------------------------------------------------------------------
# API path ids: 404 JSON, never a 500 or the HTML page
# --------------------------------------------------------------------------


API_GETS = [
    "/api/notes/{x}",
    "/api/notes/{x}/versions",
    "/api/notes/{n}/versions/{x}",
    "/api/notes/{x}/versions/{v}",
    "/api/evidence/{x}/{v}/1/abc",
    "/api/evidence/{n}/{x}/1/abc",
    "/api/evidence/{n}/{v}/{x}/abc",
    "/api/ask/{x}",
]


@pytest.mark.parametrize("template", API_GETS)
@pytest.mark.parametrize("bad", BAD_IDS)
def test_api_get_with_bad_id_is_json_404(alice, alice_note, template, bad):
    url = template.format(x=bad, n=alice_note.pk, v=alice_note.head_id)
    data = assert_json_error(client_for(alice).get(url), 404)
    assert "No" in data["detail"] or "Not found" in data["detail"]


@pytest.mark.parametrize("bad", [TOO_BIG, HUGE, "-1", "abc"])
def test_api_writes_with_bad_id_are_json_404_and_change_nothing(alice, alice_note, bad):
    client = client_for(alice)
    before = (Document.objects.count(), alice_note.versions.count())
    body = {"title": "x", "body": "y", "base_version_id": alice_note.head_id}
    n, v = alice_note.pk, alice_note.head_id
    for method, url in [
        ("put", f"/api/notes/{bad}"),
        ("delete", f"/api/notes/{bad}"),
        ("post", f"/api/notes/{bad}/versions/{v}/restore"),
        ("post", f"/api/notes/{n}/versions/{bad}/restore"),
        ("post", f"/api/sources/{bad}/refresh"),
    ]:
        response = getattr(client, method)(url, body, content_type="application/json")
        assert_json_error(response, 404)
    assert (Document.objects.count(), alice_note.versions.count()) == before


@pytest.mark.parametrize("bad", [TOO_BIG, HUGE])
def test_ids_in_request_bodies(alice, alice_note, bad):
    client = client_for(alice)
    response = client.put(
        f"/api/notes/{alice_note.pk}",
        {"title": "x", "body": "y", "base_version_id": int(bad)},
        content_type="application/json",
    )
    data = assert_json_error(response, 422)
    assert data["detail"][0]["loc"][-1] == "base_version_id"
    response = client.post(
        "/api/ask",
        {"question": "How do I rotate the staging certs?", "pinned_document_id": int(bad)},
        content_type="application/json",
    )
    assert response.status_code in (404, 422), response.content[:300]
    assert response.json()["detail"]


@pytest.mark.parametrize("bad", [TOO_BIG, HUGE])
def test_webhook_with_huge_id_is_no_server_error(client, bad):
    response = client.post(f"/api/sources/{bad}/webhook", b"{}", content_type="application/json")
    assert 400 <= response.status_code < 500
    assert response["Content-Type"].startswith("application/json")


def test_unknown_api_url_is_json_404(alice):
    data = assert_json_error(client_for(alice).get("/api/no-such-endpoint"), 404)
    assert "no API endpoint matches" in data["detail"]


# --------------------------------------------------------------------------
# Page URLs: out-of-range ids are an ordinary 404 page
# --------------------------------------------------------------------------


PAGES = [
    "/notes/{x}",
    "/notes/{x}/edit",
    "/notes/{x}/history",
    "/notes/{n}/versions/{x}",
    "/evidence/{x}/{v}/1/abc/",
    "/evidence/{n}/{x}/1/abc/",
    "/evidence/{n}/{v}/{x}/abc/",
    "/ask/{x}",
    "/sources/{x}/",
    "/externals/{x}/",
    "/externals/{n}/snapshots/{x}/",
]


@pytest.mark.parametrize("template", PAGES)
@pytest.mark.parametrize("bad", [TOO_BIG, HUGE, "0"])
def test_page_with_bad_id_is_404(alice, alice_note, template, bad):
    response = client_for(alice).get(template.format(x=bad, n=alice_note.pk, v=alice_note.head_id))
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("bad", [TOO_BIG, HUGE])
def test_page_posts_with_bad_id_are_404(alice, alice_note, bad):
    client = client_for(alice)
    n, v = alice_note.pk, alice_note.head_id
    for url in [
        f"/notes/{bad}/delete",
        f"/notes/{bad}/versions/{v}/restore",
        f"/notes/{n}/versions/{bad}/restore",
        f"/sources/{bad}/scan/",
        f"/externals/{bad}/annotations/",
    ]:
        assert client.post(url, {"base_version": v}).status_code == 404, url
    assert not Document.objects.get(pk=n).is_deleted


def test_restore_form_with_huge_base_is_400(alice, alice_note):
    client = client_for(alice)
    url = reverse("notes:restore", args=[alice_note.pk, alice_note.head_id])
    response = client.post(url, {"base_version": HUGE})
    assert response.status_code == 400
    assert "Nothing was restored" in response.content.decode()
    assert alice_note.versions.count() == 1


# --------------------------------------------------------------------------
# Server errors: logged with their traceback; JSON under /api/
# --------------------------------------------------------------------------


@pytest.fixture
def error_log():
    """The stream of the `errors` log handler that LOGGING attaches to django.request."""
    handler = logging.getHandlerByName("errors")
    assert handler is not None, "LOGGING has no 'errors' handler"
    stream = io.StringIO()
    previous = handler.setStream(stream)
    yield stream
    handler.setStream(previous)


def _explode(*args, **kwargs):
    raise RuntimeError("kaboom in notes_for_user")


def test_api_server_error_is_logged_and_json(alice, monkeypatch, error_log):
    monkeypatch.setattr(selectors, "notes_for_user", _explode)
    response = client_for(alice).get("/api/notes/")
    data = assert_json_error(response, 500)
    assert "Server error" in data["detail"]
    assert "kaboom" not in data["detail"]  # no internals to the client
    logged = error_log.getvalue()
    assert "ERROR django.request: Internal Server Error: /api/notes/" in logged
    assert "Traceback (most recent call last)" in logged
    assert "RuntimeError: kaboom in notes_for_user" in logged


def test_page_server_error_is_logged_and_html(alice, monkeypatch, error_log):
    monkeypatch.setattr(selectors, "notes_for_user", _explode)
    response = client_for(alice).get("/notes/")
    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")
    assert "RuntimeError: kaboom in notes_for_user" in error_log.getvalue()


def test_not_found_is_not_logged_as_an_error(alice, error_log):
    client_for(alice).get("/api/notes/abc")
    assert error_log.getvalue() == ""


# --------------------------------------------------------------------------
# The schema declares what the API answers
# --------------------------------------------------------------------------


def test_openapi_declares_bounds_and_common_statuses(alice):
    schema = client_for(alice).get("/api/openapi.json").json()
    note = schema["paths"]["/api/notes/{note_id}"]
    param = next(p for p in note["get"]["parameters"] if p["name"] == "note_id")
    assert (param["schema"]["minimum"], param["schema"]["maximum"]) == (1, MAX_ID)
    assert {"200", "401", "404", "422"} <= set(note["get"]["responses"])
    assert {"200", "400", "404", "409", "422"} <= set(note["put"]["responses"])
    offset = next(
        p for p in schema["paths"]["/api/notes/"]["get"]["parameters"] if p["name"] == "offset"
    )
    assert offset["schema"]["minimum"] == 0
    restore = schema["paths"]["/api/notes/{note_id}/versions/{version_id}/restore"]["post"]
    assert {"200", "400", "404", "409", "422"} <= set(restore["responses"])
    assert "requestBody" in restore


@pytest.mark.slow
def test_unparseable_body_is_a_declared_400(alice, alice_note):
    client = client_for(alice)
    url = f"/api/notes/{alice_note.pk}/versions/{alice_note.head_id}/restore"
    data = assert_json_error(client.post(url, "{", content_type="application/json"), 400)
    assert "parse" in data["detail"]
    schema = client.get("/api/openapi.json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if "requestBody" in operation:
                assert "400" in operation["responses"], (method, path)
            if method == "get":
                assert "503" in operation["responses"], (method, path)  # the time budget


def test_evidence_404_declares_both_bodies(alice):
    schema = client_for(alice).get("/api/openapi.json").json()
    path = "/api/evidence/{document_id}/{version_id}/{passage_id}/{sha256}"
    body = schema["paths"][path]["get"]["responses"]["404"]["content"]["application/json"]
    text = str(body["schema"])
    assert "EvidenceOut" in text and "EvidenceUrlNotFoundOut" in text


def test_oversized_body_under_api_is_a_json_400(alice, alice_note, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    client = client_for(alice)
    payload = {"title": "big", "body": "x" * 5000}
    response = client.post("/api/notes/", payload, content_type="application/json")
    data = assert_json_error(response, 400)
    assert "over the limit of 2,048 bytes" in data["detail"]
    assert Document.objects.count() == 1
