"""Search modes and explanations, end to end through `search()`, the page and the API.

* `mode` = hybrid | lexical | semantic and the reranker are chosen per request (page URL,
  API parameter, `search()` argument); an unknown one is a clean error, never a 500;
* a query that shares no word with a note but means the same finds it semantically;
* every hit explains itself: per-leg rank/score/score name, RRF, reasons, the rerank score's
  name, and its parent block (small-to-big) as an exact slice of the version body;
* an exact identifier in the query puts the passage containing it first;
* eligibility holds in the dense leg too: nobody sees another owner's passages, and a crowd
  of another owner's near-duplicates never displaces one's own eligible passage;
* no score is called "confidence".

Each test gets a private embedded Chroma folder; only tests that need vectors sync them.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.utils.html import escape

from notes import services
from notes.models import Document, Version
from retrieval.index.sync import sync_vectors
from retrieval.models import Passage
from retrieval.search.fusion import RRF_K
from retrieval.search.pipeline import MODES, search

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_vectors")]

CAR_NOTE = "The automobile would not start in the cold"
CAR_QUERY = "car engine failure winter"
DISTRACTORS = {
    "Sourdough": "Bake the sourdough loaf at 220 degrees for forty minutes.",
    "Redis": "Set maxmemory-policy allkeys-lru on the cache and restart it.",
    "Garden": "Water the tomato plants every second evening in July.",
}


def lexical_score_name() -> str:
    return "bm25"  # both backends rank with BM25


def page_text(response) -> str:
    assert response.status_code == 200
    return response.content.decode("utf-8")


def owned_by(user: User) -> set[int]:
    return set(Passage.objects.filter(document__owner=user).values_list("pk", flat=True))


@pytest.fixture
def car_notes(alice) -> Document:
    for title, body in DISTRACTORS.items():
        services.note_create(owner=alice, title=title, body=body)
    return services.note_create(owner=alice, title="Road trip", body=CAR_NOTE + ".")


# --- choosing the mode and the reranker ---------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_mode_and_reranker_are_chosen_per_request(mode, alice_client, alice, alice_note) -> None:
    sync_vectors()
    query = "certbot staging certs"

    result = search(user=alice, query=query, mode=mode, rerank="off", show_weaker=False)
    assert (result.mode, result.rerank, result.error, result.degraded) == (mode, "off", "", [])
    assert result.hits
    legs = {(h.fused.lexical is not None, h.fused.dense is not None) for h in result.hits}
    if mode == "lexical":
        assert legs == {(True, False)} and result.dense_candidates == 0
    elif mode == "semantic":
        assert legs == {(False, True)} and result.lexical_candidates == 0
    else:
        assert (True, True) in legs
        assert result.lexical_candidates and result.dense_candidates

    # The mode and reranker are shown in the Advanced view.
    page = page_text(
        alice_client.get(f"/search?q=certbot+staging+certs&mode={mode}&rerank=off&adv=1")
    )
    assert f'<option value="{mode}" selected>' in page
    assert '<option value="off" selected>' in page
    selects = re.findall(r"<select\b.*?</select>", page, flags=re.DOTALL)
    assert len(selects) == 3  # the space switcher, the mode, the reranker
    assert all(select.count(" selected>") == 1 for select in selects)  # one choice each
    assert f"{mode} search · rerank off" in page
    # Highlighted by the index, or in Python for semantic-only hits: the same words.
    assert "Rotate the <mark>staging</mark> <mark>certs</mark> with <mark>certbot</mark>" in page

    response = alice_client.get("/api/search/", {"q": query, "mode": mode, "rerank": "off"})
    assert response.status_code == 200
    data = response.json()
    assert (data["mode"], data["rerank"], data["error"]) == (mode, "off", "")
    assert [h["passage_id"] for h in data["hits"]] == [h.passage.pk for h in result.hits]
    for hit in data["hits"]:
        if mode == "lexical":
            assert hit["lexical"] is not None and hit["dense"] is None
        elif mode == "semantic":
            assert hit["lexical"] is None and hit["dense"] is not None
        else:
            assert hit["lexical"] is not None or hit["dense"] is not None

    # The learned reranker, asked for by name, runs in every mode.
    learned = alice_client.get("/api/search/", {"q": query, "mode": mode, "rerank": "learned"})
    assert learned.status_code == 200
    assert learned.json()["rerank"] == "learned"
    page = page_text(
        alice_client.get("/search", {"q": query, "mode": mode, "rerank": "learned", "adv": "1"})
    )
    assert '<option value="learned" selected>' in page
    assert f"{mode} search · rerank learned" in page


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"mode": "telepathy"}, "Unknown search mode 'telepathy'; choose one of: "),
        ({"mode": "HYBRID"}, "Unknown search mode 'HYBRID'"),
        ({"rerank": "oracle"}, "Unknown reranker 'oracle'; choose one of: "),
        ({"mode": "semantic", "rerank": "<b>x</b>"}, "Unknown reranker '<b>x</b>'"),
    ],
)
def test_unknown_mode_or_reranker_is_a_clean_error(
    params, message, alice_client, alice, alice_note
) -> None:
    result = search(user=alice, query="certbot", **params)
    assert result.error.startswith(message)
    assert result.hits == []

    page = page_text(alice_client.get("/search", {"q": "certbot", **params}))
    assert 'class="error" role="alert"' in page
    assert escape(message) in page
    assert "<b>x</b>" not in page  # the echoed value is escaped
    assert 'class="hit"' not in page

    response = alice_client.get("/api/search/", {"q": "certbot", **params})
    assert response.status_code == 422  # the schema lists the modes and rerankers
    assert response.json()["detail"][0]["loc"] in [["query", name] for name in params]


# --- semantic recall ----------------------------------------------------------------------


def test_a_query_sharing_no_word_is_found_by_meaning(car_notes, alice_client, alice) -> None:
    sync_vectors()
    (car,) = Passage.objects.filter(document=car_notes, is_head=True)

    lexical = search(user=alice, query=CAR_QUERY, mode="lexical", rerank="off")
    assert lexical.error == "" and lexical.hits == []  # no word in common
    for mode in ("semantic", "hybrid"):
        for rerank in ("off", "learned"):
            result = search(user=alice, query=CAR_QUERY, mode=mode, rerank=rerank)
            assert result.error == "" and result.degraded == []
            assert result.hits[0].passage.pk == car.pk, (mode, rerank)
            assert result.hits[0].fused.lexical is None
            assert result.hits[0].fused.dense.score_name == "cosine"

    page = page_text(alice_client.get("/search", {"q": CAR_QUERY, "mode": "lexical"}))
    assert "Nothing in your notes matches" in page and CAR_NOTE not in page
    for mode in ("semantic", "hybrid"):
        page = page_text(alice_client.get("/search", {"q": CAR_QUERY, "mode": mode}))
        assert CAR_NOTE in page
        data = alice_client.get("/api/search/", {"q": CAR_QUERY, "mode": mode}).json()
        assert data["hits"][0]["passage_id"] == car.pk
        assert data["hits"][0]["lexical"] is None
        assert data["hits"][0]["dense"]["score_name"] == "cosine"
    data = alice_client.get("/api/search/", {"q": CAR_QUERY, "mode": "lexical"}).json()
    assert data["hits"] == []


def test_hybrid_embeds_the_query_beside_the_lexical_leg_without_the_database(
    car_notes, alice, monkeypatch
) -> None:
    """Hybrid search embeds the query on a background thread while the lexical leg runs on
    the request's; that thread never opens a database connection (it could not see the
    request's transaction). Semantic mode embeds on the request's thread, as before. The
    hits are the same either way."""
    import threading

    from django.db import connections

    from retrieval.index import embeddings

    sync_vectors()
    threads: list[str] = []
    real = embeddings.Embedder.embed_query

    held: list[object] = []

    def spy(self, text):
        threads.append(threading.current_thread().name)
        vector = real(self, text)
        held.append(connections["default"].connection)  # this thread's own, if it opened one
        return vector

    monkeypatch.setattr(embeddings.Embedder, "embed_query", spy)
    hybrid = search(user=alice, query=CAR_QUERY, mode="hybrid", rerank="off")
    assert hybrid.error == "" and hybrid.degraded == [] and hybrid.hits
    assert len(threads) == 1 and threads[0].startswith("lode-embed")
    assert threads[0] != threading.current_thread().name
    assert held == [None]

    threads.clear()
    semantic = search(user=alice, query=CAR_QUERY, mode="semantic", rerank="off")
    assert threads == [threading.current_thread().name]
    assert semantic.hits[0].passage.pk == hybrid.hits[0].passage.pk


def test_a_dead_model_on_the_embedding_thread_degrades_hybrid_to_keywords(
    alice, alice_note, monkeypatch
) -> None:
    from retrieval.index import embeddings

    def dead():
        raise embeddings.EmbeddingUnavailable("model failed to load")

    monkeypatch.setattr(embeddings, "get_embedder", dead)
    result = search(user=alice, query="certbot", mode="hybrid", rerank="off")
    assert result.error == "" and result.hits  # the keyword hits
    assert any("Semantic search unavailable: model failed to load" in d for d in result.degraded)


# --- explanations -------------------------------------------------------------------------

SECTION = " ".join(
    f"Paragraph {i} of the renewal notes: certbot renews the staging certificates, nginx "
    f"reloads, and the monitoring check for certificate expiry turns green again within the "
    f"hour; if it does not, page the on-call engineer and check the ACME challenge logs."
    for i in range(3)
)


@pytest.fixture
def long_note(alice) -> Document:
    """A heading section long enough to be cut into several passages (small-to-big)."""
    body = "# Certificates\n\n" + "\n\n".join(SECTION for _ in range(4))
    body += "\n\n# Redis\n\nSet maxmemory-policy allkeys-lru on the staging cache.\n"
    document = services.note_create(owner=alice, title="Renewal runbook", body=body)
    services.note_create(owner=alice, title="Unrelated", body=DISTRACTORS["Sourdough"])
    return document


def test_api_hits_explain_their_rank(long_note, alice_client, alice) -> None:
    sync_vectors()
    passages = Passage.objects.filter(document=long_note, is_head=True)
    assert passages.count() > 2
    response = alice_client.get(
        "/api/search/", {"q": "certbot staging certificates", "mode": "hybrid", "rerank": "learned"}
    )
    assert response.status_code == 200
    data = response.json()
    assert data["rerank"] == "learned" and data["degraded"] == []
    hits = data["hits"]
    assert hits
    both = 0
    for hit in hits:
        expected_rrf = 0.0
        for leg, names in (("lexical", {lexical_score_name()}), ("dense", {"cosine"})):
            if hit[leg] is None:
                continue
            assert set(hit[leg]) == {"rank", "score", "score_name"}
            assert hit[leg]["rank"] >= 1
            assert isinstance(hit[leg]["score"], float)
            assert hit[leg]["score_name"] in names
            expected_rrf += 1 / (RRF_K + hit[leg]["rank"])
            assert any(r.startswith(f"{leg} rank {hit[leg]['rank']} (") for r in hit["reasons"])
        assert hit["lexical"] is not None or hit["dense"] is not None
        both += hit["lexical"] is not None and hit["dense"] is not None
        assert hit["rrf"] == pytest.approx(expected_rrf)
        assert hit["reasons"] and all(isinstance(r, str) and r.strip() for r in hit["reasons"])
        assert hit["rerank_score_name"] == "learned fusion score"
        assert isinstance(hit["rerank_score"], float)
        assert hit["score_name"] == "learned fusion score"
        assert hit["score"] == hit["rerank_score"]
        assert any(r.startswith("learned fusion score ") for r in hit["reasons"])
        assert hit["offset_unit"] == "unicode_code_point"

        body = Version.objects.get(pk=hit["version_id"]).body
        parent = hit["parent"]
        assert set(parent) == {"start", "end", "text", "section_start", "section_end"} | {
            "truncated",
            "trimmed",
        }
        # The parent context is a window of the section around the passage.
        assert parent["text"] == body[parent["start"] : parent["end"]]
        assert hit["text"] == body[hit["start"] : hit["end"]]
        assert parent["section_start"] <= parent["start"] <= hit["start"]
        assert hit["end"] <= parent["end"] <= parent["section_end"]
    assert both, "no hit was found by both legs"
    # Small-to-big: the long section's passages come with (a window of) the section as parent.
    section_hits = [h for h in hits if h["document_id"] == long_note.pk and "certbot" in h["text"]]
    assert len(section_hits) > 1
    sections = {(h["parent"]["section_start"], h["parent"]["section_end"]) for h in section_hits}
    assert len(sections) == 1
    assert all(len(h["parent"]["text"]) > len(h["text"]) for h in section_hits)

    # Without a reranker there is no rerank score, and the fused score is named for what it is.
    data = alice_client.get(
        "/api/search/", {"q": "certbot staging certificates", "rerank": "off"}
    ).json()
    assert data["rerank"] == "off"
    for hit in data["hits"]:
        assert hit["rerank_score"] is None and hit["rerank_score_name"] == ""
        assert hit["score_name"] in {"reciprocal rank fusion", "cosine", lexical_score_name()}


def test_page_shows_why_each_result_is_there(long_note, alice_client, alice) -> None:
    sync_vectors()
    query = "certbot staging certificates"
    result = search(user=alice, query=query, mode="hybrid", rerank="learned", show_weaker=False)
    assert result.hits
    page = page_text(alice_client.get("/search", {"q": query, "rerank": "learned", "adv": "1"}))
    assert page.count('<details class="why"><summary>Why this result</summary>') == len(result.hits)
    for hit in result.hits:
        assert hit.reasons
        for reason in hit.reasons:
            assert f"<li>{escape(reason)}</li>" in page
    # The parent block of a cut section (or a window of it).
    assert "Show the whole section" in page or "Show the surrounding text" in page


def test_exact_match_details_are_listed(alice, alice_client) -> None:
    services.note_create(owner=alice, title="Cache", body="Use allkeys-lru for the cache.")
    data = alice_client.get("/api/search/", {"q": "allkeys-lru", "mode": "lexical"}).json()
    assert data["hits"][0]["exact_matches"] == ["allkeys-lru"]
    assert data["hits"][0]["reasons"][0] == "exact match: “allkeys-lru”"


# --- exact identifiers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("identifier", "target", "crowd", "query"),
    [
        (
            "ERR_SSL_PROTOCOL_ERROR",
            "Chrome showed ERR_SSL_PROTOCOL_ERROR on staging until TLS 1.2 was enabled.",
            [
                "SSL protocol error: an SSL protocol error means the SSL protocol handshake "
                "failed with an error. Protocol error after protocol error.",
                "Error handling: every SSL error and protocol error is logged as an error.",
                "Err on the side of caution with SSL; a protocol error is an SSL error.",
            ],
            "ssl protocol error ERR_SSL_PROTOCOL_ERROR",
        ),
        (
            "nginx.conf",
            "The proxy settings live in nginx.conf under the http block.",
            [
                "Nginx configuration: the nginx conf directory holds every nginx conf file; "
                "conf changes need an nginx reload. Nginx nginx conf conf.",
                "Reload nginx after editing any conf file; nginx checks its conf first.",
                "The conf of nginx: nginx workers, nginx logs, nginx conf includes.",
            ],
            "nginx conf settings nginx.conf",
        ),
    ],
    ids=["error-code", "file-name"],
)
def test_an_exact_identifier_ranks_first(
    identifier, target, crowd, query, alice, alice_client
) -> None:
    for i, text in enumerate(crowd):
        services.note_create(owner=alice, title=f"Note {i}", body=text)
    document = services.note_create(owner=alice, title="Incident", body=target)
    services.note_create(owner=alice, title="Unrelated", body=DISTRACTORS["Garden"])
    sync_vectors()
    (passage,) = Passage.objects.filter(document=document, is_head=True)

    for rerank in ("off", "learned"):
        result = search(user=alice, query=query, mode="hybrid", rerank=rerank)
        assert result.error == "" and result.degraded == []
        assert len(result.hits) > 3
        first = result.hits[0]
        assert first.passage.pk == passage.pk, [h.passage.text for h in result.hits]
        assert first.fused.exact_matches == (identifier,)
        assert first.reasons[0] == f"exact match: “{identifier}”"
        assert all(not h.fused.exact_matches for h in result.hits[1:])
    # Fusion alone would not have put it first: the boost did.
    plain = search(user=alice, query=query, mode="hybrid", rerank="off")
    assert max(h.fused.rrf for h in plain.hits[1:]) > plain.hits[0].fused.rrf

    data = alice_client.get("/api/search/", {"q": query}).json()
    assert data["hits"][0]["passage_id"] == passage.pk
    assert data["hits"][0]["exact_matches"] == [identifier]
    page = page_text(alice_client.get("/search", {"q": query}))
    page = page.replace("<mark>", "").replace("</mark>", "")  # passage text without highlights
    assert page.index(escape(target)) < min(
        page.index(escape(text)) for text in crowd if escape(text) in page
    )


# --- eligibility ------------------------------------------------------------------------------


def test_bob_never_sees_alices_passages_in_any_leg(alice, bob, bob_client, alice_note) -> None:
    services.note_create(
        owner=alice, title="Alice's diary", body="Certbot renews the staging certs on Friday."
    )
    mine = services.note_create(
        owner=bob, title="Bob's bread", body=DISTRACTORS["Sourdough"] + "\n\n# More\n\nRye too."
    )
    sync_vectors()
    alices, bobs = owned_by(alice), owned_by(bob)
    assert alices and bobs
    # Alice's own words, which her passages match best in both legs.
    for query in ("Rotate the staging certs with certbot before Friday", "certbot", "Redis"):
        for mode in ("hybrid", "semantic"):
            result = search(user=bob, query=query, mode=mode, rerank="learned")
            assert result.error == "" and result.degraded == []
            ids = {h.passage.pk for h in result.hits}
            assert ids <= bobs and not ids & alices, (query, mode)
            if mode == "semantic":
                # The dense leg ran and found bob's passages, and only those.
                assert result.dense_candidates == len(bobs)
                assert ids == bobs
            # weaker=1: bob's own passages are all weaker matches for Alice's words.
            response = bob_client.get("/api/search/", {"q": query, "mode": mode, "weaker": 1})
            assert response.status_code == 200
            assert {h["passage_id"] for h in response.json()["hits"]} <= bobs
            assert {h["document_id"] for h in response.json()["hits"]} <= {mine.pk}
            page = page_text(bob_client.get("/search", {"q": query, "mode": mode, "weaker": 1}))
            results = page[page.index('<div id="results">') :]
            for text in ("Rotate the staging certs", "maxmemory", "renews the staging"):
                assert text not in results, (query, mode)
            assert "Deploy runbook" not in page and "Alice&#x27;s diary" not in page


@pytest.mark.slow
def test_a_crowd_of_near_duplicates_never_displaces_ones_own_passage(
    alice, bob, alice_client
) -> None:
    query = "Rotate the staging certificates with certbot before Friday"
    body = "\n\n".join(
        f"## Copy {i}\n\nRotate the staging certificates with certbot before Friday, copy {i}."
        for i in range(300)
    )
    crowd = services.note_create(owner=bob, title="Certificates", body=body)
    assert Passage.objects.filter(document=crowd, is_head=True).count() == 300
    mine = services.note_create(
        owner=alice, title="Renewals", body="Certbot renews the certificates on staging weekly."
    )
    services.note_create(owner=alice, title="Bread", body=DISTRACTORS["Sourdough"])
    sync_vectors()
    (passage,) = Passage.objects.filter(document=mine, is_head=True)
    bobs = owned_by(bob)

    for mode in ("hybrid", "semantic"):
        for rerank in ("off", "learned"):
            result = search(user=alice, query=query, mode=mode, rerank=rerank)
            assert result.error == "" and result.degraded == []
            assert result.hits[0].passage.pk == passage.pk, (mode, rerank)
            assert result.hits[0].fused.dense is not None  # the dense leg found it too
            assert not {h.passage.pk for h in result.hits} & bobs
            assert result.dense_candidates == 2  # alice's two passages, not bob's crowd
        data = alice_client.get("/api/search/", {"q": query, "mode": mode}).json()
        assert data["hits"][0]["passage_id"] == passage.pk
        assert data["hits"][0]["dense"] is not None
        assert not {h["passage_id"] for h in data["hits"]} & bobs

    # Bob's own search is all crowd: the page holds at most a page of it, none of alice's.
    result = search(user=bob, query=query, mode="semantic", rerank="off")
    assert result.dense_candidates == 256
    assert {h.passage.pk for h in result.hits} <= bobs


# --- nothing is called confidence --------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rerank", ["learned", "off"])
def test_no_score_is_called_confidence(mode, rerank, long_note, alice_client) -> None:
    sync_vectors()
    params = {"q": "certbot staging certificates", "mode": mode, "rerank": rerank}
    response = alice_client.get("/api/search/", params)
    assert response.status_code == 200 and response.json()["hits"]
    assert "confidence" not in response.content.decode("utf-8").lower()

    page = page_text(alice_client.get("/search", params))
    assert 'class="hit"' in page
    assert "confidence" not in page.lower()


# --- phrases and exclusions hold for candidates found by meaning ------------------------


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_exclusions_and_phrases_hold_for_meaning_hits(mode, alice, car_notes) -> None:
    """`-word` and `"phrase"` mean the same in every mode: a passage found only by meaning
    that contains an excluded word, or lacks a required phrase, is not returned."""
    sync_vectors()
    road_trip = set(Passage.objects.filter(document=car_notes).values_list("pk", flat=True))

    found = {h.passage.pk for h in search(user=alice, query=CAR_QUERY, mode=mode).hits}
    assert road_trip <= found  # found by meaning alone: no word in common

    # Excluding a word of the note (a different form of it: the index's stemming applies).
    excluded = search(user=alice, query=CAR_QUERY + " -starting", mode=mode)
    assert not excluded.error
    assert road_trip.isdisjoint(h.passage.pk for h in excluded.hits)
    # A phrase the note lacks; then one it has (case and word form do not matter).
    lacking = search(user=alice, query=CAR_QUERY + ' "diesel engine"', mode=mode)
    assert road_trip.isdisjoint(h.passage.pk for h in lacking.hits)
    having = search(user=alice, query=CAR_QUERY + ' "Would not Start"', mode=mode)
    assert road_trip <= {h.passage.pk for h in having.hits}
