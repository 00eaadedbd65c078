"""Every free-text field the API takes refuses a NUL character with a 422 from its schema.

PostgreSQL's text cannot hold NUL (`\\u0000`): a NUL that reached a query or an INSERT would be
a server error there and not on SQLite. So each text field of a request body and each text
query parameter states a pattern without NUL, and the request is refused before any service
runs, with the same 422 on both databases and nothing saved. A lone surrogate escape
(`\\ud800`), which UTF-8 cannot encode, is refused with the body: a 400.
"""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from notes.models import Document, Version
from spaces.models import Membership, Space

NUL = "\u0000"


def _resolve(schema: dict, components: dict) -> dict:
    while "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _strings(schema: dict, components: dict, where: str, seen: frozenset = frozenset()):
    """(where, string schema) for every string a request value can hold."""
    ref = schema.get("$ref")
    if ref in seen:
        return
    schema = _resolve(schema, components)
    seen = seen | {ref} if ref else seen
    if schema.get("type") == "string" or "string" in (schema.get("type") or []):
        yield where, schema
    for key in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(key, []):
            yield from _strings(option, components, where, seen)
    for name, value in schema.get("properties", {}).items():
        yield from _strings(value, components, f"{where}.{name}", seen)
    if isinstance(schema.get("items"), dict):
        yield from _strings(schema["items"], components, f"{where}[]", seen)


def test_every_text_field_and_text_query_parameter_states_a_pattern_without_nul(alice_client):
    schema = alice_client.get("/api/openapi.json").json()
    components = schema.get("components", {}).get("schemas", {})
    checked = []
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            label = f"{method.upper()} {path}"
            fields = [
                (f"{label} ?{p['name']}", p["schema"])
                for p in operation.get("parameters", [])
                if p["in"] == "query"
            ]
            for content in operation.get("requestBody", {}).get("content", {}).values():
                fields.append((f"{label} body", content["schema"]))
            for where, value in fields:
                for name, text in _strings(value, components, where):
                    if "enum" in text or "const" in text:
                        continue  # only the listed words are accepted
                    assert "pattern" in text, f"{name} accepts any text"
                    pattern = re.compile(text["pattern"])
                    assert pattern.search("a"), name
                    assert not pattern.search(f"a{NUL}b"), f"{name} accepts NUL"
                    checked.append(name)
    # The note's title, body and tags, a space's name and description, a username, the
    # questions, the graph lookups, the search query and the notes' tag filter at least.
    assert len(checked) >= 14, checked


def _state() -> tuple:
    return (
        Document.objects.count(),
        Version.objects.count(),
        sorted(Space.objects.values_list("name", "description")),
        Membership.objects.count(),
    )


def _send(client: Client, method: str, url: str, body: dict):
    return client.generic(method, url, json.dumps(body), content_type="application/json")


BODIES = [
    ("POST", "/api/notes/", {"title": f"a{NUL}", "body": "x"}),
    ("POST", "/api/notes/", {"title": "T", "body": f"x{NUL}y"}),
    ("POST", "/api/notes/", {"title": "T", "body": "x", "tags": [f"ops{NUL}"]}),
    ("PUT", "/api/notes/{note}", {"title": f"a{NUL}", "body": "x", "base_version_id": 0}),
    ("PUT", "/api/notes/{note}", {"title": "T", "body": NUL, "base_version_id": 0}),
    ("POST", "/api/spaces/", {"name": f"Team{NUL}"}),
    ("POST", "/api/spaces/", {"name": "Team", "description": f"d{NUL}"}),
    ("PATCH", "/api/spaces/{space}", {"name": f"N{NUL}"}),
    ("PATCH", "/api/spaces/{space}", {"description": NUL}),
    ("POST", "/api/spaces/{space}/members", {"username": f"bob{NUL}"}),
    ("POST", "/api/ask", {"question": f"what{NUL}?"}),
    ("POST", "/api/graph/ask", {"question": f"what links to{NUL}?"}),
    (
        "POST",
        "/api/graph/query",
        {
            "lookups": [f"Deploy{NUL}"],
            "query": {"op": "neighbours", "seed": 1, "direction": "out", "kind": "links_to"},
        },
    ),
]


@pytest.mark.parametrize(("method", "url", "body"), BODIES)
def test_a_nul_in_a_text_field_is_a_422_that_saves_nothing(
    alice_client, alice_note, bob, method, url, body
):
    shared = alice_client.post(
        "/api/spaces/", json.dumps({"name": "Shared"}), content_type="application/json"
    )
    assert shared.status_code == 201
    url = url.format(note=alice_note.pk, space=shared.json()["id"])
    if "base_version_id" in body:
        body = {**body, "base_version_id": alice_note.head_id}
    before = _state()
    response = _send(alice_client, method, url, body)
    assert response.status_code == 422, response.content[:300]
    assert response.json()["detail"]  # what was wrong (the graph query says it in words)
    assert _state() == before


@pytest.mark.parametrize(("url", "param"), [("/api/search/", "q"), ("/api/notes/", "tag")])
def test_a_nul_in_a_text_query_parameter_is_a_422(alice_client, alice_note, url, param):
    response = alice_client.get(url, {param: f"deploy{NUL}"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", param]
    assert alice_client.get(url, {param: "infra"}).status_code == 200


def test_a_lone_surrogate_is_a_400_and_a_pair_is_text(alice_client):
    lone = '{"title": "half \\ud83d of a pair", "body": "x"}'
    response = alice_client.post("/api/notes/", lone, content_type="application/json")
    assert response.status_code == 400
    assert "lone surrogate" in response.json()["detail"]
    assert not Document.objects.exists()
    pair = '{"title": "a whole \\ud83d\\ude00", "body": "x"}'
    response = alice_client.post("/api/notes/", pair, content_type="application/json")
    assert response.status_code == 201
    assert response.json()["title"] == "a whole \U0001f600"
