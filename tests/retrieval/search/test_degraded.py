"""Invariant 10: if the vector leg or the models are unavailable, search still works
lexically and says it is degraded — never a 500.

Each cause is checked three ways: `search()` (hybrid and semantic modes), the search page
(`GET /search`) and the API (`GET /api/search/`):

a. the model folder is missing (or empty);
b. the model file is corrupt (hash mismatch);
c. the Chroma server is down (a closed loopback port);
d. vectors lag behind the notes (saved but not yet embedded), counted per owner;
e. the learned reranker's weights are unreadable.

Every test gets a private embedded Chroma folder, so vectors never leak between tests. The
real embedder loads once per session; tests that point `LODE_MODEL_DIR` elsewhere set the
loaded embedders aside and put them back afterwards.
"""

from __future__ import annotations

import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils.html import escape

from notes import services
from notes.models import Document
from retrieval.index import embeddings, vectors
from retrieval.index.embeddings import MODEL_FILE
from retrieval.index.sync import sync_vectors
from retrieval.models import Passage
from retrieval.search import rerank
from retrieval.search.pipeline import SearchResult, search
from spaces.models import personal_space_id
from tests.factories import free_port

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_vectors")]

QUERY = "certbot staging certificates"
SEMANTIC_UNAVAILABLE = "Semantic search unavailable: "


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture
def embedders_set_aside() -> Iterator[None]:
    """Forget loaded embedders (and remembered failures) for one test, then restore them, so
    a changed `LODE_MODEL_DIR` takes effect and the real model need not load again."""
    with embeddings._load_lock:
        loaded, failures = dict(embeddings._embedders), dict(embeddings._failures)
    embeddings.reset_embedders()
    yield
    embeddings.reset_embedders()
    with embeddings._load_lock:
        embeddings._embedders.update(loaded)
        embeddings._failures.update(failures)


@pytest.fixture
def corrupt_model_dir(tmp_path) -> Path:
    """A copy of the assembled model folder whose model.onnx has some bytes flipped."""
    assembled = embeddings.assemble_model_folder(embeddings.default_model_folder())
    folder = tmp_path / "corrupt-model"
    shutil.copytree(assembled, folder)
    model = folder / MODEL_FILE
    data = bytearray(model.read_bytes())
    for i in range(1_000_000, 1_000_016):
        data[i] ^= 0xFF
    model.write_bytes(bytes(data))
    return folder


@pytest.fixture
def notes(alice, bob) -> dict[str, Document]:
    """Alice's two notes (three head passages) and bob's one, all matching QUERY."""
    return {
        "runbook": services.note_create(
            owner=alice,
            title="Deploy runbook",
            body=(
                "# Certificates\n\nRotate the staging certificates with certbot before Friday.\n\n"
                "# Redis\n\nSet maxmemory-policy allkeys-lru on the staging cache.\n"
            ),
        ),
        "journal": services.note_create(
            owner=alice,
            title="Ops journal",
            body="Certbot renewed the staging certificates overnight without trouble.",
        ),
        "bob": services.note_create(
            owner=bob,
            title="Bob's certs",
            body="Bob keeps his own certbot staging certificates notes.\n\n# More\n\nAnd more.",
        ),
    }


def head_count(user: User) -> int:
    return Passage.objects.filter(
        document__owner=user, is_head=True, document__deleted_at__isnull=True
    ).count()


# --- the three ways in -------------------------------------------------------------------


def degraded_search(user: User, mode: str, expected: str, *, rerank: str = "off") -> SearchResult:
    """`search()` answers lexically, without an error, and says why it is degraded."""
    result = search(user=user, query=QUERY, mode=mode, rerank=rerank)
    assert result.error == ""
    assert result.mode == mode
    assert result.hits, result.degraded
    assert any(expected in message for message in result.degraded), result.degraded
    assert all(hit.passage.document.owner_id == user.pk for hit in result.hits)
    return result


def assert_lexical_only(result: SearchResult) -> None:
    assert result.dense_candidates == 0
    assert all(hit.fused.dense is None for hit in result.hits)
    assert all(hit.fused.lexical is not None for hit in result.hits)


def degraded_page(client: Client, mode: str, expected: str, **params: str) -> str:
    """The page renders (200) with hits and the degraded message."""
    response = client.get("/search", {"q": QUERY, "mode": mode, **params})
    assert response.status_code == 200
    page = response.content.decode("utf-8")
    assert 'class="warning degraded"' in page
    assert escape(expected) in page
    assert 'class="hit"' in page
    assert "Nothing in your notes matches" not in page
    assert 'role="alert"' not in page  # degraded is a warning, not an error
    return page


def degraded_api(client: Client, mode: str, expected: str, **params: str) -> dict:
    """The API answers 200 with hits, a non-empty `degraded` list naming the cause."""
    response = client.get("/api/search/", {"q": QUERY, "mode": mode, **params})
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["error"] == ""
    assert data["degraded"]
    assert any(expected in message for message in data["degraded"]), data["degraded"]
    assert data["hits"]
    return data


def assert_api_lexical_only(data: dict) -> None:
    assert data["dense_candidates"] == 0
    for hit in data["hits"]:
        assert hit["dense"] is None
        assert hit["lexical"] is not None


def check_dense_leg_down(client: Client, user: User, expected: str) -> None:
    """Hybrid and semantic both fall back to keyword matches on every way in."""
    for mode in ("hybrid", "semantic"):
        result = degraded_search(user, mode, expected)
        assert_lexical_only(result)
        assert any(m.startswith(SEMANTIC_UNAVAILABLE) for m in result.degraded)
        assert any(m.endswith("Showing keyword matches.") for m in result.degraded)
        page = degraded_page(client, mode, expected)
        marked = "<mark>staging</mark> <mark>certificates</mark> with <mark>certbot</mark>"
        assert f"Rotate the {marked}" in page
        data = degraded_api(client, mode, expected)
        assert_api_lexical_only(data)
        assert any(m.startswith(SEMANTIC_UNAVAILABLE) for m in data["degraded"])
    # Lexical mode never touches the dense leg, so it is not degraded at all.
    result = search(user=user, query=QUERY, mode="lexical", rerank="off")
    assert result.hits and result.degraded == []


# --- a. the model folder is missing --------------------------------------------------------


@pytest.mark.parametrize(
    ("make_folder", "reason"),
    [(False, "model folder missing"), (True, "model file missing")],
    ids=["nonexistent", "empty"],
)
def test_missing_model_folder_degrades_to_keywords(
    settings, tmp_path, embedders_set_aside, alice_client, alice, notes, make_folder, reason
) -> None:
    folder = tmp_path / "no-model"
    if make_folder:
        folder.mkdir()
    settings.LODE_MODEL_DIR = str(folder)
    check_dense_leg_down(alice_client, alice, f"{SEMANTIC_UNAVAILABLE}{reason}")
    # An explicit folder is used as-is: never assembled into.
    if make_folder:
        assert list(folder.iterdir()) == []
    else:
        assert not folder.exists()


# --- b. the model file is corrupt --------------------------------------------------------


def test_corrupt_model_file_degrades_to_keywords(
    settings, embedders_set_aside, corrupt_model_dir, alice_client, alice, notes
) -> None:
    settings.LODE_MODEL_DIR = str(corrupt_model_dir)
    check_dense_leg_down(alice_client, alice, f"{SEMANTIC_UNAVAILABLE}model file hash mismatch")


def test_degraded_model_recovers_once_the_folder_is_good_again(
    settings, embedders_set_aside, alice, notes
) -> None:
    settings.LODE_MODEL_DIR = str(Path(settings.DATA_DIR) / "nowhere")
    result = search(user=alice, query=QUERY, mode="hybrid", rerank="off")
    assert any(SEMANTIC_UNAVAILABLE in m for m in result.degraded)
    settings.LODE_MODEL_DIR = ""  # back to the managed, verified folder
    result = search(user=alice, query=QUERY, mode="hybrid", rerank="off")
    assert not any(SEMANTIC_UNAVAILABLE in m for m in result.degraded)


# --- c. Chroma is down -------------------------------------------------------------------


def test_chroma_server_down_degrades_to_keywords(settings, alice_client, alice, notes) -> None:
    settings.LODE_CHROMA_TIMEOUT_SECONDS = 2
    settings.CHROMA_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    vectors.reset_vector_stores()
    check_dense_leg_down(alice_client, alice, f"{SEMANTIC_UNAVAILABLE}vector server unreachable")


class _NotChroma(http.server.BaseHTTPRequestHandler):
    """Some other web app on the configured port: 200 and HTML for every request."""

    def _answer(self) -> None:
        body = b"<html>not chroma</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def not_chroma_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotChroma)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_url_that_is_not_chroma_degrades_to_keywords(
    settings, not_chroma_url, alice_client, alice, notes
) -> None:
    settings.CHROMA_URL = not_chroma_url
    vectors.reset_vector_stores()
    for mode in ("hybrid", "semantic"):
        assert_lexical_only(degraded_search(alice, mode, SEMANTIC_UNAVAILABLE))
        assert_api_lexical_only(degraded_api(alice_client, mode, SEMANTIC_UNAVAILABLE))


def test_bad_chroma_url_degrades_to_keywords(settings, alice, notes) -> None:
    settings.CHROMA_URL = "ftp://127.0.0.1:1"
    vectors.reset_vector_stores()
    for mode in ("hybrid", "semantic"):
        assert_lexical_only(degraded_search(alice, mode, "CHROMA_URL"))


# --- d. vectors lag behind ---------------------------------------------------------------


INDEXING = "New and changed notes are still being indexed for meaning search"


def pending_message(count: int) -> str:
    return f"({count:,} passage{'s' if count != 1 else ''} waiting)"


def test_lagging_vectors_are_counted_per_owner_until_synced(
    alice_client, bob_client, alice, bob, notes
) -> None:
    alice_pending, bob_pending = head_count(alice), head_count(bob)
    assert alice_pending == 3 and bob_pending == 2  # bob's are not alice's business
    expected = pending_message(alice_pending)

    # Nothing is embedded yet (tasks stay queued in tests): keyword hits, and the count.
    result = degraded_search(alice, "hybrid", expected)
    assert_lexical_only(result)
    assert [m for m in result.degraded if "meaning search" in m] == [
        f"{INDEXING} {expected}; keyword search already finds them."
    ]
    assert not any(SEMANTIC_UNAVAILABLE in m for m in result.degraded)
    page = degraded_page(alice_client, "hybrid", expected)
    assert pending_message(bob_pending) not in page
    data = degraded_api(alice_client, "hybrid", expected)
    assert_api_lexical_only(data)
    assert not any(pending_message(bob_pending) in m for m in data["degraded"])
    # Semantic mode finds nothing un-embedded, but says why rather than looking empty.
    semantic = search(user=alice, query=QUERY, mode="semantic", rerank="off")
    assert semantic.error == "" and any(expected in m for m in semantic.degraded)

    # Only alice's passages are embedded: her message goes, bob's count stays his own.
    alice_ids = Passage.objects.filter(document__owner=alice, is_head=True).values_list(
        "pk", flat=True
    )
    assert sync_vectors(list(alice_ids)).written == alice_pending
    result = search(user=alice, query=QUERY, mode="hybrid", rerank="off")
    assert result.degraded == []
    assert result.hits and all(hit.fused.dense is not None for hit in result.hits)
    bob_result = degraded_search(bob, "hybrid", pending_message(bob_pending))
    assert_lexical_only(bob_result)

    # Everything embedded: no message for anyone, and every hit carries a dense leg.
    sync_vectors()
    for client, user in ((alice_client, alice), (bob_client, bob)):
        for mode in ("hybrid", "semantic"):
            result = search(user=user, query=QUERY, mode=mode, rerank="off")
            assert result.degraded == [], (user, mode)
            assert result.hits and all(hit.fused.dense is not None for hit in result.hits)
        response = client.get("/search", {"q": QUERY})
        assert response.status_code == 200
        assert b"being indexed for meaning search" not in response.content
        assert b'class="warning degraded"' not in response.content
        data = client.get("/api/search/", {"q": QUERY}).json()
        assert data["degraded"] == []
        assert data["hits"]
        for hit in data["hits"]:
            assert hit["dense"] is not None
            assert hit["dense"]["score_name"] == "cosine"


def test_deleted_and_replaced_passages_are_not_counted_as_lagging(alice, notes) -> None:
    sync_vectors()
    assert vectors.pending_count([personal_space_id(alice.pk)]) == 0
    runbook = notes["runbook"]
    services.note_update(
        document=runbook,
        user=alice,
        base_version_id=runbook.head_id,
        title=runbook.title,
        body="Rotate the staging certificates with certbot on Thursdays now.",
    )
    services.note_delete(document=notes["journal"], user=alice)
    result = degraded_search(alice, "hybrid", pending_message(1))
    assert len(result.hits) == 1  # the new head passage, by keywords only
    assert result.hits[0].fused.dense is None


# --- e. the learned reranker's weights are unreadable ------------------------------------


@pytest.fixture
def broken_rerank_weights(monkeypatch, tmp_path) -> Iterator[Path]:
    weights = tmp_path / "rerank_learned.json"
    weights.write_bytes(b'{"feature_names": ["lexical_norm", \x00\xff truncated')
    monkeypatch.setattr(rerank, "LEARNED_MODEL_FILE", weights)
    rerank._learned.cache_clear()
    yield weights
    rerank._learned.cache_clear()  # the real weights load again on next use


def test_unreadable_rerank_weights_degrade_to_fused_order(
    broken_rerank_weights, alice_client, alice, notes
) -> None:
    sync_vectors()  # semantic mode needs vectors; only the reranker is broken here
    expected = "Reranking unavailable"
    for mode in ("hybrid", "semantic"):
        result = degraded_search(alice, mode, expected, rerank="learned")
        assert result.rerank == "off"
        message = next(m for m in result.degraded if expected in m)
        assert "rerank_learned.json" in message and "unreadable" in message
        assert all(hit.rerank_score is None for hit in result.hits)
        assert all(hit.rerank_score_name == "" for hit in result.hits)
        # Same order as no reranking at all.
        plain = search(user=alice, query=QUERY, mode=mode, rerank="off")
        assert [h.passage.pk for h in result.hits] == [h.passage.pk for h in plain.hits]

        page = degraded_page(alice_client, mode, expected, rerank="learned", adv="1")
        assert "rerank off" in page  # the Advanced view names the reranker that ran
        data = degraded_api(alice_client, mode, expected, rerank="learned")
        assert data["rerank"] == "off"
        assert all(hit["rerank_score"] is None for hit in data["hits"])
        # The dense leg itself is fine: the degradation is the reranker's alone.
        assert all(hit["dense"] is not None for hit in data["hits"])
        assert not any(SEMANTIC_UNAVAILABLE in m for m in data["degraded"])


def test_missing_rerank_weights_degrade_too(monkeypatch, tmp_path, alice) -> None:
    services.note_create(owner=alice, title="Certs", body="Certbot staging certificates.")
    monkeypatch.setattr(rerank, "LEARNED_MODEL_FILE", tmp_path / "absent.json")
    rerank._learned.cache_clear()
    try:
        result = degraded_search(alice, "hybrid", "Reranking unavailable", rerank="learned")
        assert result.rerank == "off"
        assert any("missing" in m for m in result.degraded)
    finally:
        rerank._learned.cache_clear()


def test_everything_down_at_once_still_answers(
    settings, embedders_set_aside, broken_rerank_weights, alice_client, alice, notes
) -> None:
    settings.LODE_MODEL_DIR = str(Path(settings.DATA_DIR) / "nowhere")
    settings.CHROMA_URL = f"http://127.0.0.1:{free_port()}"
    vectors.reset_vector_stores()
    for mode in ("hybrid", "semantic"):
        result = degraded_search(alice, mode, SEMANTIC_UNAVAILABLE, rerank="learned")
        assert_lexical_only(result)
        assert any("Reranking unavailable" in m for m in result.degraded)
        assert result.rerank == "off"
        degraded_page(alice_client, mode, "Reranking unavailable", rerank="learned")
        assert_api_lexical_only(
            degraded_api(alice_client, mode, SEMANTIC_UNAVAILABLE, rerank="learned")
        )
