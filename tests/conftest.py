"""Shared fixtures: two users, alice and bob, so every test can check that bob cannot see
alice's notes (the shape healthchecks uses in hc/test.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from notes import services
from notes.models import Document
from tests import factories

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """Every test starts with an empty `default` cache: login-failure counts (the login
    throttle, lode_site/throttle.py) and rendered notes never leak from one test into the
    next."""
    from django.core.cache import caches

    for alias in ("default", "renders"):
        caches[alias].clear()
    yield
    for alias in ("default", "renders"):
        caches[alias].clear()


@pytest.fixture
def alice(db) -> User:
    return User.objects.create_user("alice", "alice@example.com", PASSWORD)


@pytest.fixture
def bob(db) -> User:
    return User.objects.create_user("bob", "bob@example.com", PASSWORD)


@pytest.fixture
def carol(db) -> User:
    return User.objects.create_user("carol", "carol@example.com", PASSWORD)


@pytest.fixture
def dave(db) -> User:
    return User.objects.create_user("dave", "dave@example.com", PASSWORD)


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
def staff_client(db) -> Client:
    """A client logged in as a new superuser "root", for the admin pages."""
    return factories.staff_client()


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


@pytest.fixture
def private_vectors(settings, tmp_path) -> Iterator[Path]:
    """A private embedded Chroma folder and collection prefix for one test."""
    from retrieval.index import vectors

    settings.CHROMA_URL = ""
    settings.LODE_CHROMA_PATH = tmp_path / "chroma"
    settings.LODE_CHROMA_COLLECTION_PREFIX = f"t{uuid.uuid4().hex[:10]}"
    vectors.reset_vector_stores()
    yield tmp_path / "chroma"
    vectors.reset_vector_stores()


@pytest.fixture
def fake_llm(settings, monkeypatch) -> Iterator:
    """A scriptable OpenAI-compatible server on 127.0.0.1 wired into `LODE_LLM_*` settings
    (tests/fake_llm.py)."""
    from tests.fake_llm import running_fake_llm

    with running_fake_llm(settings, monkeypatch) as server:
        yield server


@pytest.fixture
def fastembed_offline(monkeypatch, tmp_path) -> None:
    """Fail any attempt by fastembed to reach a model hub and keep its cache in tmp: the
    cross-encoder seams (rerank, entailment) must load local folders only."""
    from fastembed.common.model_management import ModelManagement

    def refuse(*args, **kwargs):
        raise AssertionError("fastembed tried to download a model")

    monkeypatch.setattr(ModelManagement, "download_files_from_huggingface", refuse)
    monkeypatch.setattr(ModelManagement, "download_file_from_gcs", refuse)
    monkeypatch.setattr(ModelManagement, "retrieve_model_gcs", refuse)
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(tmp_path / "fastembed_cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
