"""Access tokens: the settings page (create with the secret shown once, list, revoke; only
your own; CSRF), `manage.py lode_token`, and what the JSON API accepts."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from lode_site.models import ApiToken, token_create, token_revoke
from retrieval.web.mcp_tools import Refused, token_for
from spaces.services import space_create

URL = "/settings/tokens"


def test_the_page_needs_a_login(db):
    response = Client().get(URL)
    assert response.status_code == 302 and "/accounts/login" in response["Location"]


def test_creating_a_token_shows_its_secret_once(alice, alice_client):
    team = space_create(by=alice, name="Team docs")
    response = alice_client.post(
        URL,
        {"name": "laptop", "scope": "read", "spaces": [team.pk], "expires_in_days": "30"},
        follow=True,
    )
    assert response.redirect_chain == [(URL, 302)]
    secret = re.search(r'<code id="new-token">(lode_[^<]+)</code>', response.text).group(1)
    token = token_for(secret)
    assert token.user == alice and token.scope == "read"
    assert list(token.spaces.values_list("pk", flat=True)) == [team.pk]
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    again = alice_client.get(URL)
    assert secret not in again.text and "laptop" in again.text
    assert "no-store" in response["Cache-Control"]


def test_a_token_cannot_cover_someone_elses_space(alice, bob, alice_client):
    bobs = space_create(by=bob, name="Bob's team")
    response = alice_client.post(URL, {"name": "x", "scope": "read", "spaces": [bobs.pk]})
    assert response.status_code == 400
    assert not ApiToken.objects.exists()
    with pytest.raises(Exception, match="spaces you are a member of"):
        token_create(user=alice, name="x", space_ids=[bobs.pk])


def test_the_list_shows_only_your_tokens_and_revoke_is_yours_only(alice, bob, alice_client):
    mine, raw = token_create(user=alice, name="alice-laptop")
    theirs, _ = token_create(user=bob, name="bob-laptop")
    page = alice_client.get(URL).text
    assert "alice-laptop" in page and "bob-laptop" not in page
    assert alice_client.post(reverse("settings-token-revoke", args=[theirs.pk])).status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None
    response = alice_client.post(reverse("settings-token-revoke", args=[mine.pk]))
    assert response.status_code == 302
    with pytest.raises(Refused, match="revoked"):
        token_for(raw)


def test_writes_need_the_csrf_token(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(URL, {"name": "x", "scope": "read"}).status_code == 403
    assert not ApiToken.objects.exists()


def test_lode_token_creates_lists_expires_and_revokes(alice):
    team = space_create(by=alice, name="Team docs")
    out = StringIO()
    call_command(
        "lode_token", "create", "alice", "agent", "--scope", "read", "--space", str(team.pk),
        "--days", "7", stdout=out,
    )
    raw = out.getvalue().split()[0]
    assert token_for(raw).scope == "read"
    listing = StringIO()
    call_command("lode_token", "list", "alice", stdout=listing)
    assert f"agent\tactive\tread\tspaces {team.pk}" in listing.getvalue()
    call_command("lode_token", "expire", "alice", "agent", stdout=StringIO())
    with pytest.raises(Refused, match="expired"):
        token_for(raw)
    call_command("lode_token", "revoke", "alice", "agent", stdout=StringIO())
    with pytest.raises(Refused, match="revoked"):
        token_for(raw)
    with pytest.raises(CommandError, match="member of"):
        call_command("lode_token", "create", "alice", "x", "--space", "999999")


def test_the_api_takes_full_tokens_and_refuses_narrowed_or_dead_ones(alice, alice_note):
    _, full = token_create(user=alice, name="full")
    _, read = token_create(user=alice, name="read", scope="read")
    dead, dead_raw = token_create(user=alice, name="dead")
    token_revoke(dead)
    client = Client()

    def status(raw: str) -> int:
        query = {"q": "certbot", "mode": "lexical"}
        headers = {"Authorization": f"Bearer {raw}"}
        return client.get("/api/search/", query, headers=headers).status_code

    assert status(full) == 200
    assert status(read) == 401
    assert status(dead_raw) == 401
