"""Search that says "nothing matches", through `search()`, the page
and the API, with the real embedding model and a private embedded Chroma:

* meaning-only hits (no query word) below the measured similarity floor are hidden unless
  weaker matches are asked for (`weaker=1`, kept in the URL; `weaker=true` in the API), and
  a search whose every candidate was hidden says "Nothing in your notes matches";
* a meaning-only hit above the floor is still shown;
* on a short hybrid query a passage holding every query word ranks above passages holding
  none, also where fusion alone (and the reranker) put it far down: the "failover replica"
  runbook, in a library crowded with notes that hold one of the two words;
* orphaned annotations are labelled and rank after live ones;
* the search page has an `<h1>`.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.utils.html import escape

from externals.annotations import annotation_create, migrate_annotations
from externals.models import Annotation
from notes import services
from notes.models import Document
from notes.services import version_create
from retrieval.index.sync import sync_vectors
from retrieval.models import Passage
from retrieval.search.fusion import FusedHit, LegHit, word_tier, word_tiers
from retrieval.search.pipeline import MEANING_ONLY_FLOOR, search, words_matched
from tests.factories import make_external

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_vectors")]

UNRELATED = {
    "Sourdough": "Bake the sourdough loaf at 220 degrees for forty minutes, then let it cool.",
    "Garden": "Water the tomato plants every second evening in July and pinch out side shoots.",
    "Redis cache": "Set maxmemory-policy allkeys-lru on the cache and restart it after the deploy.",
    "Lisbon trip": "The tram to Belém leaves from Praça da Figueira; buy a Viva Viagem card.",
}
NOWHERE = "kubernetes helm chart"


def text(response) -> str:
    assert response.status_code == 200
    return response.content.decode("utf-8")


@pytest.fixture
def unrelated_notes(alice: User) -> list[Document]:
    notes = [services.note_create(owner=alice, title=t, body=b) for t, b in UNRELATED.items()]
    sync_vectors()
    return notes


# --- the similarity floor --------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
def test_meaning_only_hits_below_the_floor_are_hidden_unless_asked_for(
    mode, alice, unrelated_notes
) -> None:
    every = search(user=alice, query=NOWHERE, mode=mode, rerank="off")
    # The dense leg finds every passage, however unrelated: all meaning-only, all below.
    assert len(every.hits) == len(UNRELATED)
    assert all(h.fused.lexical is None for h in every.hits)
    assert all(h.fused.dense.score < MEANING_ONLY_FLOOR for h in every.hits)
    assert all(h.weak for h in every.hits)
    assert every.show_weaker and every.weaker_hidden == 0

    hidden = search(user=alice, query=NOWHERE, mode=mode, rerank="off", show_weaker=False)
    assert hidden.hits == [] and hidden.error == ""
    assert hidden.weaker_hidden == len(UNRELATED)
    # Lexical mode never had them.
    assert search(user=alice, query=NOWHERE, mode="lexical", show_weaker=False).weaker_hidden == 0


def test_page_says_nothing_matches_and_offers_weaker_matches(alice_client, unrelated_notes):
    page = text(alice_client.get("/search", {"q": NOWHERE, "mode": "hybrid"}))
    assert f"Nothing in your notes matches “{NOWHERE}”." in page
    assert 'class="hit"' not in page
    # The count of hidden weaker matches is for the Advanced view; the calm one offers them.
    assert "weaker matches hidden" not in page
    assert 'class="show-weaker"' in page
    advanced = text(alice_client.get("/search", {"q": NOWHERE, "mode": "hybrid", "adv": "1"}))
    assert "4 weaker matches hidden" in advanced
    assert escape("weaker=1") in page  # the link keeps it in the URL
    for body in UNRELATED.values():
        assert escape(body) not in page

    weaker = text(alice_client.get("/search", {"q": NOWHERE, "mode": "hybrid", "weaker": "1"}))
    assert "Nothing in your notes matches" not in weaker
    assert weaker.count('class="hit"') == len(UNRELATED)
    assert weaker.count("Weaker match: similar in meaning only") == len(UNRELATED)
    assert 'class="hide-weaker"' in weaker
    # The share link reproduces the weaker view; the form keeps it across a mode change.
    assert escape("weaker=1") in weaker.split('id="share-url"', 1)[1].split(">", 1)[0]
    assert '<input type="hidden" name="weaker" value="1">' in weaker


def test_api_hides_weaker_matches_and_says_how_many(alice_client, unrelated_notes):
    data = alice_client.get("/api/search/", {"q": NOWHERE}).json()
    assert data["hits"] == []
    assert data["weaker"] is False
    assert data["weaker_hidden"] == len(UNRELATED)
    assert data["similarity_floor"] == MEANING_ONLY_FLOOR

    data = alice_client.get("/api/search/", {"q": NOWHERE, "weaker": "true"}).json()
    assert data["weaker"] is True and data["weaker_hidden"] == 0
    assert len(data["hits"]) == len(UNRELATED)
    assert all(hit["weaker"] and hit["lexical"] is None for hit in data["hits"])


def test_a_meaning_only_hit_above_the_floor_is_still_shown(alice, alice_client, unrelated_notes):
    car = services.note_create(
        owner=alice, title="Road trip", body="The automobile would not start in the cold."
    )
    sync_vectors()
    query = "car engine failure winter"  # no word in common with the note
    result = search(user=alice, query=query, mode="hybrid", show_weaker=False)
    assert result.hits and result.hits[0].passage.document_id == car.pk
    assert result.hits[0].fused.lexical is None
    assert result.hits[0].fused.dense.score >= MEANING_ONLY_FLOOR
    assert not result.hits[0].weak
    # The unrelated notes are hidden as weaker matches, the car note is not.
    assert result.weaker_hidden == len(UNRELATED) and len(result.hits) == 1
    data = alice_client.get("/api/search/", {"q": query}).json()
    assert [hit["document_id"] for hit in data["hits"]] == [car.pk]
    assert data["hits"][0]["weaker"] is False


def test_lexical_hits_are_never_hidden(alice, unrelated_notes) -> None:
    # "cache" is a word of one note: that passage stays whatever its cosine; the rest are
    # meaning-only and below the floor.
    result = search(user=alice, query="cache kubernetes", mode="hybrid", show_weaker=False)
    assert [h.passage.document.title for h in result.hits] == ["Redis cache"]
    assert result.hits[0].fused.lexical is not None
    assert result.weaker_hidden == len(UNRELATED) - 1


# --- word-coverage tiers on short hybrid queries ---------------------------------------------

RUNBOOK = (
    "# Quarterly maintenance\n\n"
    "Rotate the API keys, renew the wildcard certificate, prune old container images, check "
    "the disk usage of the log volume, review the on-call rota, archive the closed tickets, "
    "update the vendor contact sheet, confirm the office alarm codes, test the UPS batteries, "
    "clean the build cache, and if the primary is lost, failover to the replica in zone b; "
    "then email the summary to the team and file the checklist in the shared drive."
)
NEAR_BUT_WORDLESS = (
    # Nearer in meaning to "failover replica" than anything else in the library (cosine ~0.6
    # and ~0.54 with the bundled model), without either word ("fail over" is two words,
    # "replication" another stem than "replica").
    "How to fail over to the standby: promote the replication standby to primary.",
    "Replication standby promotion when the primary is lost.",
    "Fail over to the hot standby when the primary database dies.",
)


def crowded_library(owner: User) -> tuple[Document, list[Document]]:
    """The runbook passage holding both words, three passages about the same thing holding
    neither, and 120 short notes holding one of the two words each (a replica-lag log and
    failover drill reports, as an import brings). The short one-word notes outscore the long
    runbook in BM25 and are nearer in meaning, so both legs rank it below them, and RRF
    below the word-less passages that top the dense leg."""
    for i in range(60):
        services.note_create(
            owner=owner,
            title=f"Lag check {i}",
            body=f"Replica db-{i % 5} was {i % 9 + 1} seconds behind at {i % 24:02d}:00.",
        )
        services.note_create(
            owner=owner,
            title=f"Drill {i}",
            body=f"Failover drill number {i} finished in {i % 7 + 3} minutes.",
        )
    runbook = services.note_create(owner=owner, title="Maintenance", body=RUNBOOK)
    wordless = [
        services.note_create(owner=owner, title=f"Database note {i}", body=body)
        for i, body in enumerate(NEAR_BUT_WORDLESS)
    ]
    sync_vectors()
    return runbook, wordless


@pytest.mark.parametrize("rerank", ["off", "learned"])
@pytest.mark.slow
def test_failover_replica_ranks_the_passage_with_both_words_first(alice, rerank) -> None:
    runbook, wordless = crowded_library(alice)
    (passage,) = Passage.objects.filter(document=runbook, is_head=True)
    wordless_ids = {d.pk for d in wordless}

    result = search(user=alice, query="failover replica", mode="hybrid", rerank=rerank, limit=200)
    assert result.error == "" and result.degraded == []
    ranked = [h.passage.document_id for h in result.hits]
    assert ranked[0] == runbook.pk, [h.passage.document.title for h in result.hits[:5]]
    assert result.hits[0].passage.pk == passage.pk
    assert "holds 2 of 2 query words" in result.hits[0].reasons
    # Every passage holding no query word comes after every passage holding one. Before
    # the tiers, fusion put two of them above the runbook (80th and 89th against 123rd) and
    # the learned reranker put them first and second.
    first_wordless = min(ranked.index(pk) for pk in wordless_ids if pk in ranked)
    assert all(h.passage.document_id in wordless_ids for h in result.hits[first_wordless:])


@pytest.mark.slow
def test_long_queries_are_left_to_fusion(alice) -> None:
    """Five content words or more: no tiers (a question's missing word says little)."""
    crowded_library(alice)
    result = search(
        user=alice,
        query="failover replica zone primary lost",
        mode="hybrid",
        rerank="off",
        limit=100,
    )
    assert not any(r.startswith("holds ") for h in result.hits for r in h.reasons)


def test_word_tiers_keep_exact_matches_first() -> None:
    def hit(pid: int, words: int, *, rank: int, exact: tuple[str, ...] = ()) -> FusedHit:
        return FusedHit(
            passage_id=pid,
            rrf=1 / (60 + rank),
            dense=LegHit(pid, rank, 0.5, "cosine"),
            exact_matches=exact,
            words_matched=words,
        )

    hits = [
        hit(1, 0, rank=1),
        hit(2, 1, rank=2),
        hit(3, 2, rank=3),
        hit(4, 0, rank=4, exact=("db-1",)),
        hit(5, 2, rank=5),
    ]
    assert [h.passage_id for h in word_tiers(hits, 2)] == [4, 3, 5, 2, 1]
    assert [word_tier(n, 3) for n in (0, 1, 2, 3, 4)] == [2, 1, 1, 0, 0]


def test_words_matched_uses_the_index_folding() -> None:
    from retrieval.query import parse
    from retrieval.search.pipeline import CandidateRow

    row = CandidateRow(1, 1, "Runbooks › Failovers", "Promoting replicas quickly", 0, "note", "")
    assert words_matched(parse("failover replica"), row) == 2
    assert words_matched(parse("failover standby"), row) == 1
    assert words_matched(parse("kubernetes"), row) == 0


# --- orphaned annotations --------------------------------------------------------------------


def new_snapshot(document: Document, body: str) -> None:
    with transaction.atomic():
        locked = Document.objects.select_for_update().get(pk=document.pk)
        version = version_create(
            document=locked,
            title=locked.title,
            body=body,
            user=None,
            extractor_name="text",
            extractor_version="1",
        )
        migrate_annotations(locked, version)


def annotate(owner: User, document: Document, quote: str, text: str) -> Annotation:
    version = document.head
    start = version.body.index(quote)
    return annotation_create(
        owner=owner, version=version, start=start, end=start + len(quote), quote=quote, text=text
    )


@pytest.fixture
def annotations(alice: User) -> tuple[Annotation, Annotation]:
    body = "Cache settings.\n\nSet maxmemory-policy allkeys-lru.\n\nRotate certs every quarter.\n"
    external = make_external(alice, body=body)
    # The one that will be orphaned matches the query better (the word twice, shorter).
    lost = annotate(alice, external, "every quarter", "Zanzibar zanzibar")
    live = annotate(
        alice, external, "allkeys-lru", "Zanzibar storms evict keys on launch day, check it"
    )
    new_snapshot(external, body.replace("every quarter", "monthly"))
    lost.refresh_from_db()
    live.refresh_from_db()
    assert lost.is_orphaned and not live.is_orphaned
    return live, lost


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_orphaned_annotations_are_labelled_and_ranked_below_live_ones(
    mode, alice, alice_client, annotations
) -> None:
    live, lost = annotations
    sync_vectors()
    result = search(user=alice, query="zanzibar", mode=mode, rerank="off")
    documents = [h.passage.document_id for h in result.hits]
    assert documents.index(live.note_document_id) < documents.index(lost.note_document_id)
    # The orphan comes after every live hit (in hybrid mode the annotated external itself
    # is a meaning-only hit), and only it is labelled.
    assert result.hits[-1].passage.document_id == lost.note_document_id
    assert [h.orphaned for h in result.hits] == [False] * (len(result.hits) - 1) + [True]
    # Before the rule the orphan ranked first: it is the better lexical match.
    assert result.hits[-1].fused.lexical.rank == 1

    page = text(alice_client.get("/search", {"q": "zanzibar", "mode": mode}))
    blocks = page.split('<li class="hit">')[1:]
    assert len(blocks) >= 2
    assert ["Orphaned annotation" in block for block in blocks] == [False] * (len(blocks) - 1) + [
        True
    ]
    data = alice_client.get("/api/search/", {"q": "zanzibar", "mode": mode}).json()
    assert [(h["document_id"], h["orphaned"]) for h in data["hits"]][-1] == (
        lost.note_document_id,
        True,
    )
    assert not any(h["orphaned"] for h in data["hits"][:-1])


# --- the page's heading ----------------------------------------------------------------------


def test_search_page_has_a_heading(alice_client) -> None:
    for params in ({}, {"q": "anything", "mode": "lexical"}):
        page = text(alice_client.get("/search", params))
        assert page.count("<h1") == 1
        assert "<h1>Search your notes</h1>" in page
