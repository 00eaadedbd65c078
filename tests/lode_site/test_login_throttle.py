"""Login throttling (lode_site/throttle.py): after N failed logins for a
username from one address (or M from one address for any usernames) within the window, the
next login is refused — even with the right password — with "Too many failed attempts; try
again in N minutes", until the window has moved on; another user, or a bearer token, is
unaffected."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from lode_site import throttle
from lode_site.models import ApiToken, token_digest
from tests.conftest import PASSWORD

LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"


@pytest.fixture
def clock(monkeypatch) -> list[float]:
    """A controllable clock for the throttle: `clock[0] += seconds` moves time forward."""
    current = [1_800_000_000.0]
    monkeypatch.setattr(throttle, "now", lambda: current[0])
    return current


def attempt(client: Client, username: str, password: str, path: str = LOGIN, **extra):
    return client.post(path, {"username": username, "password": password}, **extra)


def logged_in_as(client: Client) -> str | None:
    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id).username if user_id else None


def fail(client: Client, username: str, times: int, **extra) -> None:
    for _ in range(times):
        response = attempt(client, username, "wrong password", **extra)
        assert response.status_code == 200  # the form again, with its error
        assert logged_in_as(client) is None


def test_settings_defaults(settings):
    assert settings.LODE_LOGIN_MAX_FAILURES == 5
    assert settings.LODE_LOGIN_MAX_FAILURES_PER_IP == 20
    assert settings.LODE_LOGIN_LOCKOUT_MINUTES == 15


def test_right_password_logs_in(alice, clock):
    client = Client()
    response = attempt(client, "alice", PASSWORD)
    assert response.status_code == 302
    assert logged_in_as(client) == "alice"


def test_n_failures_lock_the_username_even_for_the_right_password(alice, clock):
    client = Client()
    fail(client, "alice", 5)
    response = attempt(client, "alice", PASSWORD)
    assert response.status_code == 429
    assert response["Retry-After"] == str(15 * 60 + 1)
    text = response.content.decode()
    assert "Too many failed attempts; try again in 15 minutes." in text
    assert "didn&#x27;t match" not in text
    assert logged_in_as(client) is None
    assert Client().get(reverse("notes:list")).status_code == 302  # still signed out


def test_fewer_failures_than_the_limit_do_not_lock(alice, clock):
    client = Client()
    fail(client, "alice", 4)
    assert attempt(client, "alice", PASSWORD).status_code == 302
    assert logged_in_as(client) == "alice"


def test_lock_lifts_after_the_window_and_says_how_long_is_left(alice, clock):
    client = Client()
    fail(client, "alice", 5)
    clock[0] += 10 * 60
    response = attempt(client, "alice", PASSWORD)
    assert response.status_code == 429
    assert "try again in 5 minutes." in response.content.decode()
    clock[0] += 4 * 60 + 30
    assert "try again in 1 minute." in attempt(client, "alice", PASSWORD).content.decode()
    clock[0] += 31  # 15 minutes and 1 second after the first failure
    assert attempt(client, "alice", PASSWORD).status_code == 302
    assert logged_in_as(client) == "alice"


def test_refused_attempts_do_not_extend_the_lock(alice, clock):
    client = Client()
    fail(client, "alice", 5)
    for _ in range(10):  # hammering while locked: refused, not counted
        clock[0] += 60
        assert attempt(client, "alice", "wrong password").status_code == 429
    clock[0] += 5 * 60 + 1
    assert attempt(client, "alice", PASSWORD).status_code == 302


def test_another_user_from_the_same_address_can_log_in(alice, bob, clock):
    client = Client()
    fail(client, "alice", 5)
    assert attempt(client, "alice", PASSWORD).status_code == 429
    other = Client()
    assert attempt(other, "bob", PASSWORD).status_code == 302
    assert logged_in_as(other) == "bob"


def test_a_stranger_cannot_lock_an_account_out_from_elsewhere(alice, clock):
    """The username lock is per address: five wrong passwords for alice from an attacker's
    address lock that address out of alice, not alice out of her account."""
    fail(Client(), "alice", 5, REMOTE_ADDR="203.0.113.7")
    assert attempt(Client(), "alice", PASSWORD, REMOTE_ADDR="203.0.113.7").status_code == 429
    response = attempt(Client(), "alice", PASSWORD, REMOTE_ADDR="198.51.100.9")
    assert response.status_code == 302


def test_username_case_does_not_evade_the_lock(alice, clock):
    client = Client()
    fail(client, "ALICE", 3)
    fail(client, "Alice", 2)
    assert attempt(client, "alice", PASSWORD).status_code == 429


def test_one_address_is_limited_across_usernames(alice, bob, clock, settings):
    settings.LODE_LOGIN_MAX_FAILURES_PER_IP = 6
    attacker = "203.0.113.50"
    for name in ("carol", "dave", "erin"):
        fail(Client(), name, 2, REMOTE_ADDR=attacker)
    # Six failures from the address (none reaching the per-username limit of 5): bob's
    # right password from that address is refused; from another address it works.
    response = attempt(Client(), "bob", PASSWORD, REMOTE_ADDR=attacker)
    assert response.status_code == 429
    assert "Too many failed attempts" in response.content.decode()
    assert attempt(Client(), "bob", PASSWORD, REMOTE_ADDR="198.51.100.1").status_code == 302


def test_success_clears_the_usernames_failures(alice, clock):
    client = Client()
    fail(client, "alice", 4)
    assert attempt(client, "alice", PASSWORD).status_code == 302
    client.logout()
    fail(client, "alice", 4)  # four more: without the reset this would be nine
    assert attempt(client, "alice", PASSWORD).status_code == 302


def test_admin_login_is_throttled_too(alice, clock):
    alice.is_staff = True
    alice.save()
    client = Client()
    for _ in range(5):
        assert attempt(client, "alice", "wrong password", path=ADMIN_LOGIN).status_code == 200
    response = attempt(client, "alice", PASSWORD, path=ADMIN_LOGIN)
    assert response.status_code == 429
    assert "Too many failed attempts; try again in 15 minutes." in response.content.decode()
    assert logged_in_as(client) is None


def test_failures_on_the_admin_login_count_for_the_site_login(alice, clock):
    client = Client()
    for _ in range(5):
        attempt(client, "alice", "wrong password", path=ADMIN_LOGIN)
    assert attempt(client, "alice", PASSWORD).status_code == 429


def test_bearer_tokens_are_not_password_logins(alice, clock):
    ApiToken.objects.create(user=alice, name="t", digest=token_digest("tok-123"))
    fail(Client(), "alice", 5)
    assert attempt(Client(), "alice", PASSWORD).status_code == 429
    response = Client().get("/api/notes/", HTTP_AUTHORIZATION="Bearer tok-123")
    assert response.status_code == 200


def test_client_address_behind_the_https_proxy(rf, settings):
    request = rf.get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="1.2.3.4, 203.0.113.9")
    settings.LODE_HTTPS = False  # no proxy: the header is the client's to invent
    assert throttle.client_address(request) == "10.0.0.2"
    settings.LODE_HTTPS = True  # the proxy appended the last entry
    assert throttle.client_address(request) == "203.0.113.9"
    assert throttle.client_address(rf.get("/", REMOTE_ADDR="10.0.0.2")) == "10.0.0.2"


def test_spoofed_forwarded_for_does_not_evade_the_address_limit(bob, clock, settings):
    settings.LODE_LOGIN_MAX_FAILURES_PER_IP = 3
    for n in range(3):  # no proxy: each failure claims a different forwarded address
        fail(Client(), f"user{n}", 1, HTTP_X_FORWARDED_FOR=f"192.0.2.{n}")
    assert attempt(Client(), "bob", PASSWORD).status_code == 429


def test_failures_are_shared_through_the_cache(alice, clock):
    """The count lives in the `default` cache (shared by every worker process), not in the
    process: clearing the cache forgets it."""
    from django.core.cache import cache

    fail(Client(), "alice", 5)
    assert attempt(Client(), "alice", PASSWORD).status_code == 429
    cache.clear()
    assert attempt(Client(), "alice", PASSWORD).status_code == 302


def test_force_login_and_client_login_are_not_throttled(alice, clock):
    """Test helpers and other code paths without a request are not web logins."""
    fail(Client(), "alice", 5)
    client = Client()
    assert client.login(username="alice", password=PASSWORD)
    other = Client()
    other.force_login(alice)
    assert other.get(reverse("notes:list")).status_code == 200


def test_rendered_notes_never_evict_the_counters(alice, clock, monkeypatch):
    """A full render cache culls a random share of its entries; the failure counters live in
    another store, so paging through big notes cannot wipe a lockout."""
    from django.core.cache import caches

    fail(Client(), "alice", 5)
    renders = caches["renders"]
    monkeypatch.setattr(renders, "_max_entries", 2)
    monkeypatch.setattr(renders, "_cull_frequency", 1)  # cull everything when full
    for n in range(10):
        renders.set(f"part-{n}", "<p>x</p>")
    assert attempt(Client(), "alice", PASSWORD).status_code == 429
