"""The JSON API (`/api/`): notes CRUD, versions, restore, search, authentication (session
with CSRF, bearer tokens), isolation between users, hostile input and the OpenAPI docs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client

from lode_site.models import ApiToken, token_digest
from notes import services
from notes.models import Document, Version
from tests.factories import HOSTILE_HTTP_QUERIES, note_state

pytestmark = pytest.mark.django_db

RAW_TOKEN = "lode-test-token-0123456789abcdefghijklmnopqrstuvwxyz"


def put(client: Client, url: str, data: dict, **kwargs):
    return client.put(url, data, content_type="application/json", **kwargs)


def post(client: Client, url: str, data: dict | None = None, **kwargs):
    return client.post(url, data or {}, content_type="application/json", **kwargs)


@pytest.fixture
def token(alice) -> str:
    ApiToken.objects.create(user=alice, name="t", digest=token_digest(RAW_TOKEN))
    return RAW_TOKEN


def bearer(raw: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw}"}


# --------------------------------------------------------------------------
# Notes CRUD
# --------------------------------------------------------------------------


def test_list_notes(alice_client, alice_note):
    response = alice_client.get("/api/notes/")
    assert response.status_code == 200
    data = response.json()
    assert [n["id"] for n in data] == [alice_note.pk]
    item = data[0]
    assert item["title"] == "Deploy runbook"
    assert item["body"] == alice_note.head.body
    assert set(item["tags"]) == {"infra", "ops"}
    assert item["version"]["id"] == alice_note.head_id
    assert item["version"]["number"] == 1
    assert item["version"]["sha256"] == alice_note.head.sha256
    assert item["version"]["byte_size"] == alice_note.head.byte_size


def test_list_notes_tag_filter_and_paging(alice_client, alice, alice_note):
    services.note_create(owner=alice, title="Second", body="b", tags="other")
    assert [n["title"] for n in alice_client.get("/api/notes/?tag=infra").json()] == [
        "Deploy runbook"
    ]
    assert alice_client.get("/api/notes/?tag=missing").json() == []
    assert len(alice_client.get("/api/notes/?limit=1").json()) == 1
    assert len(alice_client.get("/api/notes/?limit=1&offset=1").json()) == 1
    assert len(alice_client.get("/api/notes/?limit=0").json()) == 1  # clamped to >= 1


def test_list_notes_bounds_the_bodies_it_carries(alice_client, alice, settings):
    """A list of many large notes stays within its body budget; the notes
    past it are still listed, say their body was left out, and their own endpoint has it."""
    settings.LODE_API_LIST_MAX_BODY_CHARS = 25_000
    for i in range(4):
        services.note_create(owner=alice, title=f"Big {i}", body=f"{i} " * 5_000, tags="")
    response = alice_client.get("/api/notes/")
    data = response.json()
    assert len(data) == 4
    included = [n for n in data if not n["body_omitted"]]
    omitted = [n for n in data if n["body_omitted"]]
    assert len(included) == 2 and len(omitted) == 2
    assert all(n["body"] == "" for n in omitted)
    assert sum(len(n["body"]) for n in data) <= 25_000
    assert len(response.content) < 30_000
    whole = alice_client.get(f"/api/notes/{omitted[0]['id']}").json()
    assert len(whole["body"]) == 10_000 and whole["body_omitted"] is False


def test_list_notes_always_carries_the_first_body(alice_client, alice, settings):
    settings.LODE_API_LIST_MAX_BODY_CHARS = 1000
    services.note_create(owner=alice, title="Big", body="word " * 1_000, tags="")
    [item] = alice_client.get("/api/notes/").json()
    assert item["body_omitted"] is False and len(item["body"]) == 5_000


def test_create_note(alice_client, alice):
    response = post(
        alice_client, "/api/notes/", {"title": "API note", "body": "Hello #World", "tags": ["X"]}
    )
    assert response.status_code == 201
    data = response.json()
    note = Document.objects.get(pk=data["id"])
    assert note.owner == alice
    assert data["title"] == "API note"
    assert data["body"] == "Hello #World"
    assert set(data["tags"]) == {"x", "world"}
    assert data["version"]["number"] == 1
    assert data["version"]["id"] == note.head_id


@pytest.mark.parametrize(
    "payload",
    [
        {"title": "", "body": "x"},
        {"title": "   ", "body": "x"},
        {"title": "t", "body": "nul \u0000 byte"},
        {"title": "t", "body": "x", "tags": ["bad!tag"]},
        {"title": "x" * 501, "body": "x"},
    ],
)
def test_create_note_invalid_is_a_422_from_the_schema(alice_client, payload):
    """Each of these rules is stated in the schema (pattern, maxLength), so breaking one is
    a 422 naming the field, like any other schema violation."""
    response = post(alice_client, "/api/notes/", payload)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][0] == "body"
    assert not Document.objects.exists()


def test_create_note_missing_title_is_422(alice_client):
    response = post(alice_client, "/api/notes/", {"body": "no title"})
    assert response.status_code == 422
    assert not Document.objects.exists()


def test_create_note_oversized_is_400(alice_client, settings):
    settings.LODE_MAX_NOTE_BYTES = 1024
    response = post(alice_client, "/api/notes/", {"title": "big", "body": "x" * 2000})
    assert response.status_code == 400
    assert "limit" in response.json()["detail"]
    assert not Document.objects.exists()


def test_get_note(alice_client, alice_note):
    response = alice_client.get(f"/api/notes/{alice_note.pk}")
    assert response.status_code == 200
    assert response.json()["id"] == alice_note.pk
    assert response.json()["body"] == alice_note.head.body


def test_update_note(alice_client, alice_note):
    v1 = alice_note.head_id
    response = put(
        alice_client,
        f"/api/notes/{alice_note.pk}",
        {"title": "Renamed", "body": "New body", "tags": ["a"], "base_version_id": v1},
    )
    assert response.status_code == 200
    data = response.json()
    assert data["title"] == "Renamed"
    assert data["body"] == "New body"
    assert data["tags"] == ["a"]
    assert data["version"]["number"] == 2
    assert data["version"]["id"] != v1
    alice_note.refresh_from_db()
    assert alice_note.head.body == "New body"


def test_update_with_stale_base_is_409_with_both_versions(alice_client, alice, alice_note):
    v1 = alice_note.head
    v2 = services.note_update(
        document=alice_note, user=alice, base_version_id=v1.pk, title="T2", body="other tab"
    )
    before = note_state(alice_note)
    response = put(
        alice_client,
        f"/api/notes/{alice_note.pk}",
        {"title": "Mine", "body": "my stale text", "tags": [], "base_version_id": v1.pk},
    )
    assert response.status_code == 409
    data = response.json()
    assert data["detail"]
    assert data["base_version"]["id"] == v1.pk
    assert data["base_version"]["number"] == 1
    assert data["head_version"]["id"] == v2.pk
    assert data["head_version"]["number"] == 2
    assert data["head_title"] == "T2"
    assert data["head_body"] == "other tab"
    assert note_state(alice_note) == before


@pytest.mark.parametrize("whose", ["other note", "bob's note", "missing"])
def test_update_naming_a_base_that_is_no_version_of_the_note_is_404(
    alice_client, alice, bob, alice_note, whose
):
    """Not the old misleading "changed (version 1) after you started editing version 1":
    the answer says the id is not a version of this note and names the current one."""
    base_id = {
        "other note": services.note_create(owner=alice, title="O", body="o").head_id,
        "bob's note": services.note_create(owner=bob, title="B", body="b").head_id,
        "missing": alice_note.head_id + 1000,
    }[whose]
    before = note_state(alice_note)
    response = put(
        alice_client,
        f"/api/notes/{alice_note.pk}",
        {"title": "Mine", "body": "text", "base_version_id": base_id},
    )
    assert response.status_code == 404
    detail = response.json()["detail"]
    assert f"Version id {base_id} is not a version of this note" in detail
    assert f"current version is id {alice_note.head_id} (version 1)" in detail
    assert "after you started editing" not in detail
    assert note_state(alice_note) == before


def test_restore_needs_the_base_version(alice_client, alice, alice_note):
    v1 = alice_note.head
    services.note_update(
        document=alice_note, user=alice, base_version_id=v1.pk, title="T2", body="second"
    )
    before = note_state(alice_note)
    response = post(alice_client, f"/api/notes/{alice_note.pk}/versions/{v1.pk}/restore")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == "base_version_id"
    assert note_state(alice_note) == before


def test_restore_from_a_stale_head_is_409(alice_client, alice, alice_note):
    v1 = alice_note.head
    v2 = services.note_update(
        document=alice_note, user=alice, base_version_id=v1.pk, title="T2", body="second"
    )
    url = f"/api/notes/{alice_note.pk}/versions/{v1.pk}/restore"
    response = post(alice_client, url, {"base_version_id": v2.pk})
    assert response.status_code == 200
    restored = response.json()["version"]
    before = note_state(alice_note)
    response = post(alice_client, url, {"base_version_id": v2.pk})  # the same page, again
    assert response.status_code == 409
    data = response.json()
    assert "Nothing was restored" in data["detail"]
    assert data["base_version"]["id"] == v2.pk
    assert data["head_version"]["id"] == restored["id"]
    assert data["head_body"] == v1.body
    assert note_state(alice_note) == before


def test_restore_naming_a_base_of_another_note_is_404(alice_client, alice, alice_note):
    v1 = alice_note.head
    v2 = services.note_update(
        document=alice_note, user=alice, base_version_id=v1.pk, title="T2", body="second"
    )
    other = services.note_create(owner=alice, title="O", body="o")
    before = note_state(alice_note)
    response = post(
        alice_client,
        f"/api/notes/{alice_note.pk}/versions/{v1.pk}/restore",
        {"base_version_id": other.head_id},
    )
    assert response.status_code == 404
    assert f"current version is id {v2.pk} (version 2)" in response.json()["detail"]
    assert note_state(alice_note) == before


def test_update_identical_content_writes_no_version(alice_client, alice_note):
    response = put(
        alice_client,
        f"/api/notes/{alice_note.pk}",
        {
            "title": alice_note.title,
            "body": alice_note.head.body,
            "tags": ["infra"],
            "base_version_id": alice_note.head_id,
        },
    )
    assert response.status_code == 200
    assert response.json()["version"]["number"] == 1
    assert alice_note.versions.count() == 1


def test_update_invalid_is_422_and_saves_nothing(alice_client, alice_note):
    before = note_state(alice_note)
    response = put(
        alice_client,
        f"/api/notes/{alice_note.pk}",
        {"title": "", "body": "x", "base_version_id": alice_note.head_id},
    )
    assert response.status_code == 422
    assert note_state(alice_note) == before


def test_delete_note(alice_client, alice_note):
    response = alice_client.delete(f"/api/notes/{alice_note.pk}")
    assert response.status_code == 204
    alice_note.refresh_from_db()
    assert alice_note.is_deleted
    assert alice_client.get(f"/api/notes/{alice_note.pk}").status_code == 404
    assert alice_client.get("/api/notes/").json() == []
    assert alice_client.delete(f"/api/notes/{alice_note.pk}").status_code == 404


def test_versions_and_restore(alice_client, alice, alice_note):
    v1 = alice_note.head
    services.note_update(
        document=alice_note, user=alice, base_version_id=v1.pk, title="T2", body="second"
    )
    response = alice_client.get(f"/api/notes/{alice_note.pk}/versions")
    assert response.status_code == 200
    assert [v["number"] for v in response.json()] == [2, 1]
    assert response.json()[1]["id"] == v1.pk

    response = alice_client.get(f"/api/notes/{alice_note.pk}/versions/{v1.pk}")
    assert response.status_code == 200
    detail = response.json()
    assert detail["body"] == v1.body
    assert detail["sha256"] == v1.sha256
    assert detail["extractor_name"] == services.NOTE_EXTRACTOR
    assert detail["extractor_version"] == services.NOTE_EXTRACTOR_VERSION
    assert detail["parent_id"] is None

    alice_note.refresh_from_db()
    response = post(
        alice_client,
        f"/api/notes/{alice_note.pk}/versions/{v1.pk}/restore",
        {"base_version_id": alice_note.head_id},
    )
    assert response.status_code == 200
    data = response.json()
    assert data["body"] == v1.body
    assert data["title"] == v1.title
    assert data["version"]["number"] == 3
    assert alice_note.versions.count() == 3


def test_unknown_version_is_404(alice_client, alice, alice_note):
    other = services.note_create(owner=alice, title="Other", body="other")
    url = f"/api/notes/{alice_note.pk}/versions/{other.head_id}"
    assert alice_client.get(url).status_code == 404
    before = note_state(alice_note)
    response = post(alice_client, url + "/restore", {"base_version_id": alice_note.head_id})
    assert response.status_code == 404
    assert note_state(alice_note) == before


# --------------------------------------------------------------------------
# Authentication
# --------------------------------------------------------------------------


ANON_REQUESTS = [
    ("get", "/api/notes/"),
    ("post", "/api/notes/"),
    ("get", "/api/notes/{id}"),
    ("put", "/api/notes/{id}"),
    ("delete", "/api/notes/{id}"),
    ("get", "/api/notes/{id}/versions"),
    ("get", "/api/notes/{id}/versions/{v}"),
    ("post", "/api/notes/{id}/versions/{v}/restore"),
    ("get", "/api/search/?q=certbot"),
]


def _call(client: Client, method: str, template: str, note: Document, **kwargs):
    url = template.format(id=note.pk, v=note.head_id)
    payload = {"title": "x", "body": "y", "tags": [], "base_version_id": note.head_id}
    if method in ("post", "put"):
        return getattr(client, method)(url, payload, content_type="application/json", **kwargs)
    return getattr(client, method)(url, **kwargs)


@pytest.mark.parametrize(("method", "template"), ANON_REQUESTS)
def test_anonymous_is_401(client, alice_note, method, template):
    before = note_state(alice_note)
    response = _call(client, method, template, alice_note)
    assert response.status_code == 401
    assert note_state(alice_note) == before
    assert Document.objects.count() == 1


@pytest.mark.parametrize(("method", "template"), ANON_REQUESTS)
def test_wrong_token_is_401(client, token, alice_note, method, template):
    before = note_state(alice_note)
    response = _call(client, method, template, alice_note, headers=bearer("not-the-token"))
    assert response.status_code == 401
    assert note_state(alice_note) == before


def test_token_auth_reads_and_writes(token, alice, alice_note):
    client = Client(enforce_csrf_checks=True)  # bearer requests need no CSRF token
    response = client.get("/api/notes/", headers=bearer(token))
    assert response.status_code == 200
    assert [n["id"] for n in response.json()] == [alice_note.pk]
    row = ApiToken.objects.get(user=alice)
    assert row.last_used_at is not None
    # Written at most once a minute, so an API read is not a write every time.
    first = row.last_used_at
    assert client.get("/api/notes/", headers=bearer(token)).status_code == 200
    assert ApiToken.objects.get(pk=row.pk).last_used_at == first
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=first - timedelta(minutes=2))
    assert client.get("/api/notes/", headers=bearer(token)).status_code == 200
    assert ApiToken.objects.get(pk=row.pk).last_used_at > first

    response = post(
        client, "/api/notes/", {"title": "By token", "body": "b"}, headers=bearer(token)
    )
    assert response.status_code == 201
    assert Document.objects.get(pk=response.json()["id"]).owner == alice


def test_token_is_stored_only_as_digest(token):
    row = ApiToken.objects.get()
    assert row.digest == token_digest(token)
    assert token not in row.digest


def test_token_of_inactive_user_is_401(token, alice, alice_note):
    alice.is_active = False
    alice.save()
    response = Client().get("/api/notes/", headers=bearer(token))
    assert response.status_code == 401


@pytest.mark.parametrize("header", ["Bearer", "Bearer ", "Basic abc", "bearer", RAW_TOKEN])
def test_malformed_authorization_is_401(client, token, header):
    response = client.get("/api/notes/", headers={"Authorization": header})
    assert response.status_code == 401


def test_session_post_without_csrf_is_403(alice, alice_note):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.get("/api/notes/").status_code == 200  # reads need no token
    response = post(client, "/api/notes/", {"title": "No CSRF", "body": "x"})
    assert response.status_code == 403
    assert not Document.objects.filter(title="No CSRF").exists()


@pytest.mark.parametrize(("method", "template"), [r for r in ANON_REQUESTS if r[0] != "get"])
def test_session_writes_without_csrf_are_403(alice, alice_note, method, template):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    before = note_state(alice_note)
    response = _call(client, method, template, alice_note)
    assert response.status_code == 403
    assert note_state(alice_note) == before


def test_session_post_with_csrf_token_works(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    client.get("/notes/new")  # sets the CSRF cookie
    csrf = client.cookies["csrftoken"].value
    response = post(
        client, "/api/notes/", {"title": "With CSRF", "body": "x"}, headers={"X-CSRFToken": csrf}
    )
    assert response.status_code == 201


# --------------------------------------------------------------------------
# Isolation
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "template"), [r for r in ANON_REQUESTS if "{id}" in r[1]])
def test_bob_gets_404_for_alices_note_endpoints(bob_client, alice_note, method, template):
    before = note_state(alice_note)
    versions = Version.objects.count()
    response = _call(bob_client, method, template, alice_note)
    assert response.status_code == 404
    assert "Deploy runbook" not in response.content.decode()
    assert note_state(alice_note) == before
    assert Version.objects.count() == versions


def test_bob_token_gets_404_for_alices_note(bob, alice_note):
    ApiToken.objects.create(user=bob, name="b", digest=token_digest("bob-token-" + "x" * 30))
    response = Client().get(f"/api/notes/{alice_note.pk}", headers=bearer("bob-token-" + "x" * 30))
    assert response.status_code == 404


def test_bob_lists_only_his_notes(bob_client, bob, alice_note):
    mine = services.note_create(owner=bob, title="Bob's", body="b")
    assert [n["id"] for n in bob_client.get("/api/notes/").json()] == [mine.pk]


def test_bob_search_never_returns_alices_passages(bob_client, bob, alice_note):
    mine = services.note_create(owner=bob, title="Bob's runbook", body=alice_note.head.body)
    for q in ("certbot", "rotate", '"staging certs"', "deploy runbook", "maxmemory-policy"):
        response = bob_client.get("/api/search/", {"q": q})
        assert response.status_code == 200
        hits = response.json()["hits"]
        assert hits, q
        assert {h["document_id"] for h in hits} == {mine.pk}


# --------------------------------------------------------------------------
# Search
# --------------------------------------------------------------------------


def test_search_returns_passages_with_provenance(alice_client, alice_note):
    response = alice_client.get("/api/search/", {"q": "certbot"})
    assert response.status_code == 200
    data = response.json()
    assert data["query"] == "certbot"
    assert data["error"] == ""
    assert data["hits"]
    hit = data["hits"][0]
    assert hit["rank"] == 1
    assert hit["document_id"] == alice_note.pk
    assert hit["document_title"] == "Deploy runbook"
    assert hit["document_kind"] == "note"
    assert hit["version_id"] == alice_note.head_id
    assert hit["version_number"] == 1
    assert "certbot" in hit["text"]
    assert hit["offset_unit"] == "unicode_code_point"
    assert alice_note.head.body[hit["start"] : hit["end"]] == hit["text"]
    assert hit["start_line"] <= hit["end_line"]
    assert isinstance(hit["score"], float)
    assert hit["score_name"]
    assert "confidence" not in hit["score_name"].lower()


def test_search_by_token(token, alice_note):
    response = Client().get("/api/search/", {"q": "certbot"}, headers=bearer(token))
    assert response.status_code == 200
    assert {h["document_id"] for h in response.json()["hits"]} == {alice_note.pk}


def test_search_empty_query(alice_client, alice_note):
    response = alice_client.get("/api/search/", {"q": ""})
    assert response.status_code == 200
    assert response.json()["hits"] == []
    assert response.json()["error"] == ""


def test_search_limit_is_clamped(alice_client, alice):
    for i in range(3):
        services.note_create(owner=alice, title=f"Lemur {i}", body="lemur facts")
    assert len(alice_client.get("/api/search/", {"q": "lemur", "limit": 1}).json()["hits"]) == 1
    assert len(alice_client.get("/api/search/", {"q": "lemur", "limit": 0}).json()["hits"]) == 1
    assert len(alice_client.get("/api/search/", {"q": "lemur", "limit": 10**6}).json()["hits"]) == 3


def test_search_deleted_note_not_returned(alice_client, alice_note):
    assert alice_client.get("/api/search/", {"q": "certbot"}).json()["hits"]
    assert alice_client.delete(f"/api/notes/{alice_note.pk}").status_code == 204
    assert alice_client.get("/api/search/", {"q": "certbot"}).json()["hits"] == []


@pytest.mark.parametrize("query", HOSTILE_HTTP_QUERIES)
def test_search_hostile_queries(alice_client, alice_note, query):
    response = alice_client.get("/api/search/", {"q": query})
    if "\x00" in query or len(query) > settings.LODE_MAX_QUERY_CHARS:
        assert response.status_code == 422  # the schema's pattern and maxLength refuse it
        return
    assert response.status_code == 200
    data = response.json()
    assert isinstance(data["error"], str)
    if data["error"]:  # a query the language cannot run finds nothing and says why
        assert data["hits"] == []
    else:
        assert all(h["document_id"] == alice_note.pk for h in data["hits"])


@pytest.mark.parametrize("raw", ["%ED%A0%80", "%FF%FE", "%00", "%C0%AF"])
def test_search_invalid_utf8_query(alice_client, alice_note, raw):
    response = alice_client.get(f"/api/search/?q={raw}")
    if raw == "%00":
        assert response.status_code == 422
    else:
        assert response.status_code == 200
        assert isinstance(response.json()["error"], str)


def test_search_over_long_query_is_422(alice_client, alice_note):
    response = alice_client.get("/api/search/", {"q": "x" * 10_000})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "q"]


@pytest.mark.parametrize("param", [{"mode": "telepathy"}, {"rerank": "psychic"}])
def test_search_unknown_mode_or_reranker_is_422(alice_client, alice_note, param):
    response = alice_client.get("/api/search/", {"q": "certbot", **param})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", *param]


def test_search_query_the_language_cannot_run_finds_nothing_and_says_why(alice_client, alice_note):
    response = alice_client.get("/api/search/", {"q": "tag:infra -certbot"})
    assert response.status_code == 200
    data = response.json()
    assert "Add at least one search word" in data["error"]
    assert data["hits"] == [] and data["listing"] is None


# --------------------------------------------------------------------------
# OpenAPI and docs
# --------------------------------------------------------------------------


def test_openapi_lists_endpoints(alice_client):
    response = alice_client.get("/api/openapi.json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in (
        "/api/notes/",
        "/api/notes/{note_id}",
        "/api/notes/{note_id}/versions",
        "/api/notes/{note_id}/versions/{version_id}",
        "/api/notes/{note_id}/versions/{version_id}/restore",
        "/api/search/",
    ):
        assert path in paths, path
    assert {"get", "post"} <= set(paths["/api/notes/"])
    assert {"get", "put", "delete"} <= set(paths["/api/notes/{note_id}"])


def test_docs_require_login(client):
    for url in ("/api/docs", "/api/openapi.json"):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/")


def test_docs_render_for_logged_in_user(alice_client):
    response = alice_client.get("/api/docs")
    assert response.status_code == 200
    assert b"openapi.json" in response.content
