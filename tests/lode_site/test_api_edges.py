"""The API's edges, for every operation its own schema lists: a deeply nested JSON body is a
400 with a JSON `detail` (never a RecursionError), a body of the wrong JSON type is a 422
that changes nothing, a request without credentials is the 401 the schema promises, and a
signed-in session's write without the CSRF token is a 403 the schema declares."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from lode_site.api_bodies import MAX_JSON_DEPTH, json_depth, parse_json_body
from lode_site.models import ApiToken, token_digest
from notes.models import Document
from spaces.models import Space

pytestmark = pytest.mark.django_db

TOKEN = "lode-api-edges-token-0123456789abcdefghijklmnopqrstuvwxyz"
DEEP = "[" * 100_000 + "]" * 100_000
WRONG_TYPES = ['"Buy milk"', "[null, null]", "42", "null", "true", '["title", "body"]']
UNSAFE = {"post", "put", "patch", "delete"}


@pytest.fixture
def schema(alice_client) -> dict:
    response = alice_client.get("/api/openapi.json")
    assert response.status_code == 200
    return response.json()


@pytest.fixture
def token(alice) -> dict[str, str]:
    ApiToken.objects.create(user=alice, name="edges", digest=token_digest(TOKEN))
    return {"Authorization": f"Bearer {TOKEN}"}


def operations(schema: dict, *, where=lambda method, operation: True) -> list[tuple[str, str]]:
    found = [
        (method, path)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        if where(method, operation)
    ]
    assert found
    return found


def with_body(method: str, operation: dict) -> bool:
    return "application/json" in operation.get("requestBody", {}).get("content", {})


def secured(method: str, operation: dict) -> bool:
    return bool(operation.get("security"))


def url_for(path: str, note: Document) -> str:
    """The path with every `{parameter}` filled by an id that exists (the note's, its head
    version's, its space's, its owner's) or a well-formed one."""
    values = {
        "note_id": note.pk,
        "document_id": note.pk,
        "version_id": note.head_id,
        "space_id": note.space_id,
        "user_id": note.owner_id,
        "sha256": "0" * 64,
    }
    return re.sub(r"\{(\w+)\}", lambda m: str(values.get(m.group(1), 1)), path)


def send(client: Client, method: str, url: str, body: str | None = None, **headers):
    if body is None:
        return client.generic(method.upper(), url, headers=headers)
    return client.generic(
        method.upper(), url, body, content_type="application/json", headers=headers
    )


def detail_of(response) -> object:
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    return response.json()["detail"]


# --------------------------------------------------------------------------
# Nesting depth
# --------------------------------------------------------------------------


def test_depth_is_counted_without_recursion_and_ignores_brackets_in_strings():
    assert json_depth(b'{"a": 1}') == 1
    assert json_depth(b'"[[[[{{{{"') == 0
    assert json_depth(b'{"a": ["x]]]", {"b": "\\"[[["}]}') == 3
    assert json_depth(DEEP.encode()) == 100_000
    nested = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert parse_json_body(nested.encode()) is not None
    with pytest.raises(ValueError, match=f"at most {MAX_JSON_DEPTH}"):
        parse_json_body(("[" + nested + "]").encode())


def test_deep_json_to_graph_query_is_a_400(alice_client):
    response = alice_client.post("/api/graph/query", DEEP, content_type="application/json")
    assert response.status_code == 400
    assert f"at most {MAX_JSON_DEPTH}" in detail_of(response)


def test_deep_json_is_a_declared_400_for_every_operation_with_a_body(
    schema, token, alice_note
):
    for method, path in operations(schema, where=with_body):
        response = send(Client(), method, url_for(path, alice_note), DEEP, **token)
        where = f"{method.upper()} {path}"
        assert response.status_code == 400, (where, response.content[:200])
        assert "100000 levels deep" in detail_of(response), where
        declared = schema["paths"][path][method]["responses"]["400"]["description"]
        assert f"deeper than {MAX_JSON_DEPTH} levels" in declared, where


def test_a_body_just_past_the_limit_is_refused_and_one_at_it_is_read(alice_client):
    at_limit = {"title": "x", "body": "y"}  # one level; each wrapping adds one
    for _ in range(MAX_JSON_DEPTH - 1):
        at_limit = {"title": "x", "nested": at_limit}
    response = alice_client.post("/api/notes/", json.dumps(at_limit), "application/json")
    assert response.status_code == 201, response.content[:200]
    past = json.dumps({"title": "y", "nested": at_limit})
    response = alice_client.post("/api/notes/", past, "application/json")
    assert response.status_code == 400
    assert f"{MAX_JSON_DEPTH + 1} levels deep" in detail_of(response)


# --------------------------------------------------------------------------
# The body's JSON type
# --------------------------------------------------------------------------


def test_every_body_of_the_wrong_json_type_is_a_422_that_changes_nothing(
    schema, token, alice_note
):
    space = Space.objects.get(pk=alice_note.space_id)
    before = (Document.objects.count(), space.name, alice_note.head_id)
    for method, path in operations(schema, where=with_body):
        assert "422" in schema["paths"][path][method]["responses"], path
        for body in WRONG_TYPES:
            response = send(Client(), method, url_for(path, alice_note), body, **token)
            where = f"{method.upper()} {path} with {body}"
            assert response.status_code == 422, (where, response.content[:300])
            assert "JSON object" in json.dumps(detail_of(response)), where
    alice_note.refresh_from_db()
    space.refresh_from_db()
    assert (Document.objects.count(), space.name, alice_note.head_id) == before


def test_a_json_string_creates_no_note(alice_client, alice):
    response = alice_client.post("/api/notes/", '"hello world"', "application/json")
    assert response.status_code == 422
    [problem] = detail_of(response)
    assert problem["msg"] == "The request body must be a JSON object, not a string."
    assert not Document.objects.filter(title__iexact="hello world").exists()


def test_patching_a_space_with_an_array_is_a_422(alice_client, alice_note):
    url = f"/api/spaces/{alice_note.space_id}"
    response = alice_client.patch(url, "[null, null]", content_type="application/json")
    assert response.status_code == 422
    assert "not an array" in json.dumps(detail_of(response))


@pytest.mark.parametrize(
    "body", ['{"no_egress": 0}', '{"public_links_enabled": "true"}', '{"name": 5}']
)
def test_a_field_of_the_wrong_json_type_is_a_422(alice_client, alice_note, body):
    space = Space.objects.get(pk=alice_note.space_id)
    url = f"/api/spaces/{space.pk}"
    response = alice_client.patch(url, body, content_type="application/json")
    assert response.status_code == 422, response.content[:200]
    refreshed = Space.objects.get(pk=space.pk)
    assert (refreshed.name, refreshed.no_egress) == (space.name, space.no_egress)


def test_a_whole_number_written_as_a_float_is_an_integer(alice_client, alice_note):
    url = f"/api/spaces/move/document/{alice_note.pk}"
    body = json.dumps({"to_space": float(alice_note.space_id)})
    response = alice_client.post(url, body, content_type="application/json")
    assert response.status_code == 409  # read as the id: "It is already in Personal."
    assert "already in" in detail_of(response)


# --------------------------------------------------------------------------
# Authentication and CSRF
# --------------------------------------------------------------------------


def test_every_secured_operation_answers_401_without_credentials(schema, alice_note):
    anonymous = Client(enforce_csrf_checks=True)  # as a real client: no CSRF exemption
    for method, path in operations(schema, where=secured):
        body = "{}" if method in UNSAFE else None
        response = send(anonymous, method, url_for(path, alice_note), body)
        where = f"{method.upper()} {path}"
        assert response.status_code == 401, (where, response.content[:200])
        assert detail_of(response), where
        assert "401" in schema["paths"][path][method]["responses"], where


def test_a_session_write_without_csrf_is_a_declared_403(schema, alice, alice_note):
    session = Client(enforce_csrf_checks=True)
    session.force_login(alice)
    before = (Document.objects.count(), alice_note.head_id)

    def session_write(method: str, operation: dict) -> bool:
        options = operation.get("security") or []
        return method in UNSAFE and any("SessionAuth" in option for option in options)

    for method, path in operations(schema, where=session_write):
        response = send(session, method, url_for(path, alice_note), "{}")
        where = f"{method.upper()} {path}"
        assert response.status_code == 403, (where, response.content[:200])
        assert "CSRF" in detail_of(response), where
        declared = schema["paths"][path][method]["responses"].get("403", {})
        assert "CSRF" in declared.get("description", ""), where
    alice_note.refresh_from_db()
    assert (Document.objects.count(), alice_note.head_id) == before


def test_reads_declare_no_csrf_403_and_a_session_read_needs_no_token(schema, alice, alice_note):
    for method, path in operations(schema, where=lambda m, o: m == "get" and secured(m, o)):
        declared = schema["paths"][path][method]["responses"].get("403", {})
        assert "CSRF" not in declared.get("description", ""), path
    session = Client(enforce_csrf_checks=True)
    session.force_login(alice)
    assert session.get(f"/api/notes/{alice_note.pk}").status_code == 200


def test_a_session_write_with_the_csrf_token_and_a_token_write_without_it_work(alice, token):
    session = Client(enforce_csrf_checks=True)
    session.force_login(alice)
    session.get("/notes/new")  # sets the CSRF cookie
    csrf = session.cookies["csrftoken"].value
    body = json.dumps({"title": "With CSRF"})
    response = send(session, "post", "/api/notes/", body, **{"X-CSRFToken": csrf})
    assert response.status_code == 201
    response = send(Client(enforce_csrf_checks=True), "post", "/api/notes/", body, **token)
    assert response.status_code == 201
