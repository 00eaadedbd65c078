"""Bounded search responses: each hit carries a window of its parent
section around the passage, not the whole section, and a response carries at most
LODE_SEARCH_RESPONSE_MAX_CHARS characters of passage and context text; what is left out is
flagged, with the offsets and links to fetch it. Unbounded, a 1 MB note would make
/api/search/ return 19.9 MB for 20 hits and ~100 MB with limit=100.
"""

from __future__ import annotations

import pytest
from django.test import Client

from notes import services
from retrieval.search.pipeline import HIGHLIGHT_COST, MAX_PAGE_SIZE, SEGMENT_COST

# One heading section of ~1 MB: every passage's parent is the whole section.
SENTENCE = "The otter {i} swam past the mill and ate a trout near stone {i}. "
FAR_AWAY = "Lighthouse keepers polish brass lanterns."


def big_body(target_chars: int = 1_000_000) -> str:
    parts = ["# River log\n\n"]
    size, i = 0, 0
    while size < target_chars:
        paragraph = "".join(SENTENCE.format(i=i + k) for k in range(8)) + "\n\n"
        parts.append(paragraph)
        size += len(paragraph)
        i += 8
    # Far (12,000 characters of other words) from any passage the query matches.
    parts.extend(["Gulls circle the harbour wall at dawn.\n\n"] * 300)
    parts.append(FAR_AWAY + "\n")
    return "".join(parts)


@pytest.fixture
def big_note(alice):
    body = big_body()
    return services.note_create(owner=alice, title="River log", body=body), body


def search_json(client: Client, **params) -> tuple[dict, int]:
    response = client.get("/api/search/", {"mode": "lexical", "rerank": "off", **params})
    assert response.status_code == 200, response.text[:500]
    return response.json(), len(response.content)


@pytest.mark.django_db
def test_a_1mb_note_gives_a_bounded_response_with_truncation_flags(
    big_note, alice_client: Client, settings
) -> None:
    _, body = big_note
    settings.LODE_SEARCH_RESPONSE_MAX_CHARS = 60_000
    context = settings.LODE_SEARCH_CONTEXT_CHARS
    data, size = search_json(alice_client, q="otter trout", limit=100)
    hits = data["hits"]
    assert len(hits) == MAX_PAGE_SIZE

    # The cap: passage text (as `text` and as `segments`), highlight markup and context.
    charged = sum(
        2 * len(h["text"])
        + SEGMENT_COST * len(h["segments"])
        + HIGHLIGHT_COST * len(h["highlights"])
        + len(h["parent"]["text"])
        for h in hits
    )
    assert charged <= 60_000
    assert data["max_chars"] == 60_000
    assert data["truncated"] is True
    trimmed = [h for h in hits if h["parent"]["trimmed"]]
    assert data["trimmed_hits"] == len(trimmed) > 0
    # Trimming goes in rank order: the hits kept whole come first.
    assert trimmed == hits[len(hits) - len(trimmed) :]
    # The whole response, metadata included, is a small fraction of one parent section.
    assert size < 1_000_000

    for hit in hits:
        parent = hit["parent"]
        # Each parent is the ~1 MB section, but only a window of it comes back ...
        assert (parent["section_start"], parent["section_end"]) != (hit["start"], hit["end"])
        assert parent["section_end"] - parent["section_start"] > 900_000
        assert parent["truncated"] is True
        assert parent["section_start"] <= parent["start"] <= hit["start"]
        assert hit["end"] <= parent["end"] <= parent["section_end"]
        assert parent["end"] - parent["start"] <= (hit["end"] - hit["start"]) + 2 * context
        # ... exactly the body at the offsets it names (so the rest can be fetched by them).
        if not parent["trimmed"]:
            assert parent["text"] == body[parent["start"] : parent["end"]]
        else:
            assert parent["text"] == ""
        if hit["text_trimmed"]:
            assert hit["text"] == "" and hit["segments"] == [] and hit["highlights"] == []
        else:
            assert hit["text"] == body[hit["start"] : hit["end"]]
            assert "".join(s["text"] for s in hit["segments"]) == hit["text"]
        assert hit["evidence_url"].startswith("/evidence/")
    assert any(h["text_trimmed"] for h in hits)  # 100 hits do not fit 60,000 characters

    # What was cut can be fetched: the evidence endpoint gives a trimmed hit's passage.
    cut = next(h for h in hits if h["text_trimmed"])
    evidence = alice_client.get("/api" + cut["evidence_url"].rstrip("/"))
    assert evidence.status_code == 200, evidence.text[:300]
    assert evidence.json()["passage"]["text"] == body[cut["start"] : cut["end"]]


@pytest.mark.django_db
@pytest.mark.slow
def test_the_default_cap_bounds_limit_100_and_20_hits_are_not_trimmed(
    big_note, alice_client: Client, settings
) -> None:
    data, size = search_json(alice_client, q="otter trout", limit=20)
    assert len(data["hits"]) == 20
    assert data["truncated"] is False  # 20 hits with their windows fit the default cap
    assert size < 400_000  # was 19.9 MB
    data, size = search_json(alice_client, q="otter trout", limit=100)
    assert len(data["hits"]) == 100
    # The cap plus what it does not count (ids, scores, offsets, reasons: ~1 KB a hit).
    assert size < settings.LODE_SEARCH_RESPONSE_MAX_CHARS + 100 * 1500  # was ~100 MB
    # `limit` has a maximum: more than 100 is clamped.
    data, _ = search_json(alice_client, q="otter trout", limit=100_000)
    assert len(data["hits"]) == MAX_PAGE_SIZE


@pytest.mark.django_db
def test_a_small_notes_response_is_unchanged(alice, alice_client: Client) -> None:
    body = (
        "# Deploy runbook\n\nRotate the staging certs with certbot before Friday.\n\n"
        "## Redis\n\nSet maxmemory-policy allkeys-lru on the cache.\n\n"
        "Eviction starts when memory is full.\n"
    )
    services.note_create(owner=alice, title="Deploy runbook", body=body)
    data, _ = search_json(alice_client, q="maxmemory eviction")
    assert data["truncated"] is False and data["trimmed_hits"] == 0
    assert data["hits"]
    for hit in data["hits"]:
        parent = hit["parent"]
        # The whole section, as before: the window covers it.
        assert (parent["start"], parent["end"]) == (parent["section_start"], parent["section_end"])
        assert parent["text"] == body[parent["section_start"] : parent["section_end"]]
        assert parent["truncated"] is False and parent["trimmed"] is False
        assert hit["text_trimmed"] is False and hit["text"] == body[hit["start"] : hit["end"]]


@pytest.mark.django_db
def test_the_search_page_renders_a_window_not_the_whole_section(
    big_note, alice_client: Client
) -> None:
    page = alice_client.get("/search", {"q": "otter trout", "mode": "lexical", "rerank": "off"})
    assert page.status_code == 200
    assert len(page.content) < 500_000  # the section alone is 1 MB
    assert "Show the surrounding text" in page.text
    assert "Open the whole version" in page.text
    # Text of the section far from every hit is not on the page.
    assert FAR_AWAY not in page.text


@pytest.mark.django_db
@pytest.mark.slow
def test_asking_about_a_1mb_note_gives_a_bounded_answer(
    big_note, alice_client: Client, settings
) -> None:
    """The ask API returns claims (at most a few, each with a quoted span and a short context),
    never the evidence pack: even pinned to a 1 MB note its answer stays small."""
    document, _ = big_note
    settings.LODE_ASK_BUDGET_SECONDS = 0  # sizes are tested here, not time (test_budget.py)
    response = alice_client.post(
        "/api/ask",
        {
            "question": "Where did the otter 4000 eat a trout?",
            "pinned_document_id": document.pk,
            "mode": "lexical",
        },
        content_type="application/json",
    )
    assert response.status_code == 200, response.text[:300]
    assert response.json()["claims"]
    assert len(response.content) < 20_000


@pytest.mark.django_db
def test_long_heading_paths_of_older_passages_count_against_the_cap(
    alice, alice_client: Client, settings
) -> None:
    """Passages chunked before headings were cut to 200 characters may carry long heading
    paths, which always go out; they are charged first, so the rest is trimmed instead."""
    from retrieval.models import Passage

    body = "".join(f"Otter {i} ate a trout. " * 30 + "\n\n" for i in range(30))
    note = services.note_create(owner=alice, title="Legacy", body=body)
    Passage.objects.filter(document=note).update(heading_path=["h" * 1500] * 6)
    settings.LODE_SEARCH_RESPONSE_MAX_CHARS = 200_000
    data, _ = search_json(alice_client, q="otter trout", limit=50)
    assert len(data["hits"]) == 30 and data["truncated"]
    # What the hits that kept their text carry (text twice: as `text` and as `segments`;
    # highlight markup, also charged, left out here) fits the cap with their headings.
    kept = [h for h in data["hits"] if not h["text_trimmed"]]
    carried = sum(
        len("".join(h["heading_path"])) + 2 * len(h["text"]) + len(h["parent"]["text"])
        for h in kept
    )
    assert kept and carried <= 200_000
