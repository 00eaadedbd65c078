"""Shared fixtures: two users, alice and bob, so every test can check that bob cannot see
alice's notes (the shape healthchecks uses in hc/test.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from notes import services
from notes.models import Document

PASSWORD = "correct horse battery staple"


@pytest.fixture
def alice(db) -> User:
    return User.objects.create_user("alice", "alice@example.com", PASSWORD)


@pytest.fixture
def bob(db) -> User:
    return User.objects.create_user("bob", "bob@example.com", PASSWORD)


@pytest.fixture
def alice_client(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def bob_client(bob) -> Client:
    client = Client()
    client.force_login(bob)
    return client


@pytest.fixture
def alice_note(alice) -> Document:
    return services.note_create(
        owner=alice,
        title="Deploy runbook",
        body=(
            "# Deploy runbook\n\nRotate the staging certs with certbot before Friday.\n\n"
            "## Redis\n\nSet maxmemory-policy allkeys-lru on the cache. #ops\n"
        ),
        tags="infra",
    )
