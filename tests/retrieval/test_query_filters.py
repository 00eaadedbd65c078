"""The query language's filters, on whichever database the run uses.

* the parser: each filter parsed and normalised, quoting, negation, words that only look
  like filters stay text, bad values and filter-only queries are `QueryError`s naming the
  filter and what it takes;
* each filter narrows lexical, semantic and hybrid search to exactly the documents it keeps;
  the same key repeated is OR, different keys AND, `-key:value` excludes;
* dates compare with the head version's `created_at`: `after:` inclusive, `before:` exclusive,
  at the start of the day in `TIME_ZONE`;
* filters apply before ranking and truncation in both legs: 300 ineligible passages that
  outrank one eligible passage never hide it;
* errors come back as a message on the page and, on the API, as `error` with no hits;
* another user's documents never appear, whatever the filters;
* fuzzed with hypothesis: the parser returns a `ParsedQuery` or raises `QueryError`, and what
  it returns runs on the real engine (FTS5 MATCH / tsquery) together with the filter SQL;
* the help page documents it all; `lode_load_beir` sets the data set's name for `source:`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from notes import services
from notes.models import Document, TrustTier, Version
from retrieval.eligibility import audience_for, eligible_documents
from retrieval.index import lexical
from retrieval.index.sync import sync_vectors
from retrieval.models import Passage
from retrieval.query import FILTER_KEYS, Filter, ParsedQuery, QueryError, parse
from retrieval.search import pipeline as search_module
from retrieval.search.pipeline import MODES, search

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_vectors")]

BEIR_FIXTURE = Path(__file__).parents[1] / "fixtures" / "beir-mini"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def make_doc(
    owner,
    title: str,
    body: str,
    *,
    kind: str = Document.Kind.NOTE,
    trust: str = TrustTier.NOTE,
    tags: str = "",
    source_name: str = "",
    source_path: str = "",
    saved: str = "2024-01-01T12:00:00",
) -> Document:
    """A document with these canonical attributes; `saved` is its head version's created_at."""
    document = services.note_create(
        owner=owner,
        title=title,
        body=body,
        tags=tags,
        source_name=source_name,
        source_path=source_path,
    )
    Document.objects.filter(pk=document.pk).update(kind=kind, trust_tier=trust)
    Version.objects.filter(pk=document.head_id).update(created_at=at(saved))
    document.refresh_from_db()
    return document


def hit_docs(result) -> set[int]:
    assert result.error == "", result.error
    return {hit.passage.document_id for hit in result.hits}


# --- the parser -----------------------------------------------------------------------------


def test_each_filter_is_parsed_and_normalised() -> None:
    parsed = parse(
        'certbot Type:NOTE source:Runbooks path:"My Dir/x" tag:#OPS trust:External_Stale '
        "after:2024-03 before:2025 -tag:old"
    )
    assert parsed.terms == (("certbot",),)
    assert parsed.filters == (
        Filter("type", "note"),
        Filter("source", "Runbooks"),
        Filter("path", "My Dir/x"),
        Filter("tag", "ops"),
        Filter("trust", "external_stale"),
        Filter("after", "2024-03-01"),
        Filter("before", "2025-01-01"),
        Filter("tag", "old", negated=True),
    )
    # Models see the words only.
    assert parsed.text == "certbot"
    assert parsed.notes == (
        'Filtered before ranking: type:note source:Runbooks path:"My Dir/x" tag:ops '
        "trust:external_stale after:2024-03-01 before:2025-01-01 -tag:old.",
    )


def test_repeated_identical_filters_count_once() -> None:
    assert parse("certbot tag:ops TAG:ops tag:#ops").filters == (Filter("tag", "ops"),)


def test_quoted_values_and_unclosed_quotes() -> None:
    parsed = parse('deploy path:"my dir/x" -path:"old stuff" redis')
    assert parsed.terms == (("deploy",), ("redis",))
    assert parsed.filters == (
        Filter("path", "my dir/x"),
        Filter("path", "old stuff", negated=True),
    )
    assert parsed.text == "deploy redis"
    unclosed = parse('deploy path:"my dir')
    assert unclosed.filters == (Filter("path", "my dir"),)


@pytest.mark.parametrize(
    "query",
    [
        "http://x",
        "foo:bar",
        "col:foo",
        "text:rotate",
        "title_text:rotate",
        "rotate:*",
        "std::vector",
        "ſource:x",  # long s: re's Unicode case folding would read it as source:
        "certbot --tag:x",
        "footag:x",
        "tags:x",
    ],
)
def test_words_that_only_look_like_filters_stay_text(query) -> None:
    parsed = parse(query)
    assert parsed.filters == ()
    assert parsed.text == query
    assert parsed.terms or parsed.phrases
    if query.startswith("certbot --"):
        assert parsed.excluded == (("tag", "x"),)  # an excluded word, as before filters


def test_a_quoted_filter_is_a_phrase() -> None:
    parsed = parse('"tag:ops" certbot')
    assert parsed.filters == ()
    assert parsed.phrases == (("tag", "ops"),)


def test_date_forms() -> None:
    assert parse("x after:2024").filters == (Filter("after", "2024-01-01"),)
    assert parse("x after:2024-3").filters == (Filter("after", "2024-03-01"),)
    assert parse("x before:2024-02-29").filters == (Filter("before", "2024-02-29"),)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("certbot type:pdf", ["type:pdf", "type: takes one of: note, external"]),
        ("certbot type:", ["type: needs a value", "type:note"]),
        ('certbot type:""', ["type: needs a value"]),
        (
            "certbot trust:high",
            [
                "trust:high",
                "trust: takes one of: note, annotation, external, external_stale, inferred",
            ],
        ),
        ("certbot tag:#", ["tag: needs a tag name"]),
        ("certbot source:", ["source: needs a value"]),
        ("certbot path:", ["path: needs a value"]),
        ("certbot before:yesterday", ["before:yesterday", "YYYY-MM-DD, YYYY-MM or YYYY"]),
        ("certbot after:2024-13", ["after:2024-13", "after: takes YYYY-MM-DD"]),
        ("certbot after:2023-02-29", ["after:2023-02-29"]),
        ("certbot after:0000", ["after:0000"]),
        ("certbot after:24-01-01", ["after:24-01-01"]),
        ("certbot after:２０２４", ["after:２０２４"]),  # fullwidth digits are not a date
        ("certbot before:2024-01-01T10:00", ["before:2024-01-01T10:00"]),
    ],
)
def test_bad_filter_values_are_clean_errors(query, expected) -> None:
    with pytest.raises(QueryError) as caught:
        parse(query)
    for part in expected:
        assert part in str(caught.value)


@pytest.mark.parametrize(
    "query", ["tag:ops", "-tag:ops", "type:note after:2024", 'path:"my dir"', "tag:ops -certbot"]
)
def test_a_filter_only_query_is_rejected(query) -> None:
    with pytest.raises(QueryError, match="Add at least one search word"):
        parse(query)


# --- narrowing, in every mode ---------------------------------------------------------------

LIBRARY = {
    # label: (title, body, attributes)
    "runbook": (
        "Deploy runbook",
        "Certbot renews the staging certificates before the deploy.",
        {
            "tags": "ops",
            "source_name": "runbooks",
            "source_path": "/home/alice/Runbooks/deploy.md",
            "saved": "2024-03-10T12:00:00",
        },
    ),
    "mirror": (
        "Certbot docs",
        "Certbot obtains certificates from Let's Encrypt and installs them.",
        {
            "kind": Document.Kind.EXTERNAL,
            "trust": TrustTier.EXTERNAL_CURRENT,
            "tags": "web",
            "source_name": "mirror",
            "source_path": "/srv/mirror/Web Pages/certbot.html",
            "saved": "2023-06-01T09:00:00",
        },
    ),
    "stale": (
        "Old certbot docs",
        "Certbot-auto was the old way to install certbot on servers.",
        {
            "kind": Document.Kind.EXTERNAL,
            "trust": TrustTier.EXTERNAL_STALE,
            "tags": "web",
            "source_name": "mirror",
            "source_path": "/srv/mirror/old/certbot-auto.html",
            "saved": "2022-01-05T09:00:00",
        },
    ),
    "typed": (
        "Infra notes",
        "Remember that certbot needs port 80 open for the HTTP challenge.",
        {"tags": "infra ops", "saved": "2025-01-15T08:00:00"},
    ),
    "annotation": (
        "Margin note",
        "This certbot paragraph is wrong about wildcard certificates.",
        # Saved exactly at the start of 2024-03-01 (UTC): `after:2024-03-01` includes it,
        # `before:2024-03-01` does not.
        {"trust": TrustTier.ANNOTATION, "saved": "2024-03-01T00:00:00"},
    ),
}
EVERYONE = set(LIBRARY)


@pytest.fixture
def library(alice, bob) -> dict[str, Document]:
    docs = {
        label: make_doc(alice, title, body, **attributes)
        for label, (title, body, attributes) in LIBRARY.items()
    }
    # Bob's twin of alice's runbook: it passes every filter alice's runbook passes.
    title, body, attributes = LIBRARY["runbook"]
    docs["bob"] = make_doc(bob, title, body, **attributes)
    sync_vectors()
    return docs


FILTER_CASES = [
    ("", EVERYONE),
    ("type:note", {"runbook", "typed", "annotation"}),
    ("type:external", {"mirror", "stale"}),
    ("type:note type:external", EVERYONE),
    ("-type:external", {"runbook", "typed", "annotation"}),
    ("source:runbooks", {"runbook"}),
    ("source:RUNBOOKS", {"runbook"}),
    ("source:mirror", {"mirror", "stale"}),
    ("source:run", set()),  # the whole name, not a prefix
    ("source:runbooks source:mirror", {"runbook", "mirror", "stale"}),
    ("path:runbooks/", {"runbook"}),  # case-insensitive substring
    ('path:"web pages"', {"mirror"}),
    ("path:/srv/mirror", {"mirror", "stale"}),
    ("-path:mirror", {"runbook", "typed", "annotation"}),  # no path: not excluded
    ("path:%", set()),  # LIKE wildcards are literal
    ("path:_", set()),
    ("tag:ops", {"runbook", "typed"}),
    ("tag:#OPS", {"runbook", "typed"}),
    ("tag:ops tag:web", {"runbook", "typed", "mirror", "stale"}),
    ("tag:ops -tag:infra", {"runbook"}),
    ("-tag:web", {"runbook", "typed", "annotation"}),
    ("-tag:web -tag:infra", {"runbook", "annotation"}),
    ("tag:nosuch", set()),
    ("trust:note", {"runbook", "typed"}),
    ("trust:annotation", {"annotation"}),
    ("trust:external_stale", {"stale"}),
    ("trust:note trust:annotation", {"runbook", "typed", "annotation"}),
    ("trust:inferred", set()),
    ("after:2024-03-01", {"runbook", "typed", "annotation"}),
    ("before:2024-03-01", {"mirror", "stale"}),
    ("after:2024-03 before:2024-04", {"runbook", "annotation"}),
    ("after:2024-03-01 before:2024-03-02", {"annotation"}),
    ("after:2024", {"runbook", "typed", "annotation"}),
    ("before:2023", {"stale"}),
    ("after:2023-06-01 before:2023-06-02", {"mirror"}),
    ("before:2023 before:2025", {"mirror", "stale", "runbook", "annotation"}),
    ("-before:2024", {"runbook", "typed", "annotation"}),
    ("type:note tag:ops after:2025", {"typed"}),
    ("source:mirror -trust:external_stale", {"mirror"}),
    ("Type:Note TAG:ops", {"runbook", "typed"}),
    ("type:note -type:note", set()),
]


# The dense leg's two ways of filtering (`search._dense_leg`), forced one at a time:
# Chroma `where` on the eligible document ids, or owner-only queries post-filtered.
DENSE_STRATEGIES = {"document $in": float("inf"), "post-filter": 0.0}


@pytest.mark.parametrize(("filters", "expected"), FILTER_CASES)
def test_each_filter_narrows_every_mode(library, alice, monkeypatch, filters, expected) -> None:
    want = {library[label].pk for label in expected}
    for strategy, share in DENSE_STRATEGIES.items():
        monkeypatch.setattr(search_module, "DENSE_POST_FILTER_SHARE", share)
        for mode in MODES:
            result = search(user=alice, query=f"certbot {filters}", mode=mode, rerank="off")
            where = (filters, mode, strategy)
            assert result.degraded == []
            assert hit_docs(result) == want, where
            if mode != "lexical":
                # The dense leg only ever scored eligible passages.
                assert result.dense_candidates == len(want), where
            if mode != "semantic":
                assert result.lexical_candidates == len(want), where


@pytest.mark.parametrize("mode", MODES)
def test_another_users_documents_never_appear(library, alice, bob, mode) -> None:
    alices = {doc.pk for label, doc in library.items() if label != "bob"}
    for filters in ("", "tag:ops", "source:runbooks", "path:runbooks", "after:2024", "-tag:web"):
        bobs = search(user=bob, query=f"certbot {filters}", mode=mode, rerank="learned")
        assert hit_docs(bobs) == {library["bob"].pk}, filters
        mine = search(user=alice, query=f"certbot {filters}", mode=mode, rerank="learned")
        assert hit_docs(mine) <= alices, filters


def test_the_api_takes_the_same_filters(library, alice_client) -> None:
    for filters, expected in FILTER_CASES[:12]:
        for mode in MODES:
            response = alice_client.get(
                "/api/search/", {"q": f"certbot {filters}", "mode": mode, "rerank": "off"}
            )
            assert response.status_code == 200
            data = response.json()
            assert data["error"] == ""
            assert {h["document_id"] for h in data["hits"]} == {
                library[label].pk for label in expected
            }, (filters, mode)


def test_the_page_shows_filtered_results_and_says_so(library, alice_client) -> None:
    page = alice_client.get("/search", {"q": "certbot tag:infra", "mode": "hybrid"})
    assert page.status_code == 200
    text = page.content.decode()
    assert "Infra notes" in text
    assert "Deploy runbook" not in text and "Certbot docs" not in text
    assert "Filtered before ranking: tag:infra." in text


def test_a_tag_matched_twice_returns_its_passage_once(library, alice) -> None:
    result = search(user=alice, query="certbot tag:infra tag:ops", mode="hybrid", rerank="off")
    pids = [hit.passage.pk for hit in result.hits]
    assert len(pids) == len(set(pids))
    assert hit_docs(result) == {library["typed"].pk, library["runbook"].pk}


# --- dates ----------------------------------------------------------------------------------


def test_dates_compare_the_head_versions_save_time(alice) -> None:
    document = make_doc(alice, "Edited", "Certbot was set up.", saved="2020-05-01T10:00:00")
    first = document.head
    services.note_update(
        document=document,
        user=alice,
        base_version_id=first.pk,
        title="Edited",
        body="Certbot was set up again.",
    )
    document.refresh_from_db()
    Version.objects.filter(pk=document.head_id).update(created_at=at("2024-07-01T10:00:00"))
    assert hit_docs(search(user=alice, query="certbot after:2024", mode="lexical"))
    assert not hit_docs(search(user=alice, query="certbot before:2021", mode="lexical"))


def test_dates_are_days_in_the_site_time_zone(alice, settings) -> None:
    # 2024-02-29 16:00 UTC is 2024-03-01 01:00 in Tokyo.
    make_doc(alice, "Late", "Certbot late at night.", saved="2024-02-29T16:00:00")
    query = "certbot after:2024-03-01"
    assert not hit_docs(search(user=alice, query=query, mode="lexical"))
    settings.TIME_ZONE = "Asia/Tokyo"
    assert hit_docs(search(user=alice, query=query, mode="lexical"))
    assert not hit_docs(search(user=alice, query="certbot before:2024-03-01", mode="lexical"))


@pytest.mark.parametrize("zone", ["UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago"])
def test_extreme_dates_do_not_overflow(alice, settings, zone) -> None:
    settings.TIME_ZONE = zone
    make_doc(alice, "Any", "Certbot any time.")
    for query, found in [
        ("certbot after:1000", True),
        ("certbot after:0001", True),
        ("certbot before:0001-01-02", False),
        ("certbot before:9999-12-31", True),
        ("certbot after:9999-12-31", False),
        ("certbot before:1000", False),
    ]:
        assert bool(hit_docs(search(user=alice, query=query, mode="hybrid"))) == found, query


# --- eligibility before ranking and truncation ----------------------------------------------

CROWD_QUERY = "Rotate the staging certificates with certbot before Friday"


@pytest.mark.slow
@pytest.mark.parametrize("strategy", DENSE_STRATEGIES)
def test_300_ineligible_passages_never_hide_an_eligible_one(
    alice, alice_client, monkeypatch, strategy
) -> None:
    """Alice's own crowd of 300 near-copies of the query outranks her one eligible passage
    in both legs (checked without filters first); every filter that excludes the crowd must
    still find that passage, first, in every mode, with no crowd passage taking a place."""
    monkeypatch.setattr(search_module, "DENSE_POST_FILTER_SHARE", DENSE_STRATEGIES[strategy])
    # Near-copies of the query, title and heading included (all-MiniLM-L6-v2 cosine >= 0.91
    # against the query; the target's is 0.70).
    crowd_body = "\n\n".join(
        f"## Rotate staging certificates\n\n{CROWD_QUERY} (copy {i})." for i in range(300)
    )
    crowd = make_doc(
        alice,
        CROWD_QUERY,
        crowd_body,
        kind=Document.Kind.EXTERNAL,
        trust=TrustTier.EXTERNAL_CURRENT,
        tags="crowd",
        source_name="crowd",
        source_path="/srv/crowd/certs.md",
        saved="2020-01-01T00:00:00",
    )
    assert Passage.objects.filter(document=crowd, is_head=True).count() == 300
    target = make_doc(
        alice,
        "Renewals",
        "Certbot renews the certificates on staging weekly.",
        tags="keep",
        source_name="mine",
        source_path="/home/alice/keep/renewals.md",
        saved="2024-06-01T00:00:00",
    )
    sync_vectors()
    (passage,) = Passage.objects.filter(document=target, is_head=True)
    crowd_ids = set(Passage.objects.filter(document=crowd).values_list("pk", flat=True))

    # Without a filter the crowd fills both legs' 256 places and the target is nowhere.
    for mode in MODES:
        result = search(user=alice, query=CROWD_QUERY, mode=mode, rerank="off", limit=512)
        assert passage.pk not in {hit.passage.pk for hit in result.hits}, mode
    backend = lexical.backend()
    assert passage.pk not in {
        h.passage_id for h in backend.search(parse(CROWD_QUERY), audience=audience_for(alice.pk))
    }

    for filters in (
        "type:note",
        "-type:external",
        "trust:note",
        "source:mine",
        "-source:crowd",
        "path:keep",
        "-path:crowd",
        "tag:keep",
        "-tag:crowd",
        "after:2021",
        "type:note tag:keep after:2024-06-01 before:2024-06-02",
    ):
        query = f"{CROWD_QUERY} {filters}"
        # The backend itself, with the tightest limit: one place, and the target gets it.
        (only,) = backend.search(parse(query), audience=audience_for(alice.pk), limit=1)
        assert only.passage_id == passage.pk, filters
        for mode in MODES:
            for rerank in ("off", "learned"):
                result = search(user=alice, query=query, mode=mode, rerank=rerank)
                assert result.error == "" and result.degraded == []
                assert [hit.passage.pk for hit in result.hits] == [passage.pk], (filters, mode)
                if mode != "lexical":
                    assert result.dense_candidates == 1
                    assert result.hits[0].fused.dense is not None
                if mode != "semantic":
                    assert result.lexical_candidates == 1
                    assert result.hits[0].fused.lexical is not None
        data = alice_client.get("/api/search/", {"q": query, "mode": "hybrid"}).json()
        assert [h["passage_id"] for h in data["hits"]] == [passage.pk]
        assert not {h["passage_id"] for h in data["hits"]} & crowd_ids

    if strategy == "post-filter":
        # With room for only 2 dense candidates, post-filtering must search deeper, past
        # the whole crowd (36, 144, then 576 nearest asked for), to reach the target.
        from retrieval.index.vectors import VectorStore

        calls: list[int] = []
        original = VectorStore.query

        def counting_query(self, *args, **kwargs):
            calls.append(kwargs["limit"])
            return original(self, *args, **kwargs)

        monkeypatch.setattr(VectorStore, "query", counting_query)
        monkeypatch.setattr(search_module, "DENSE_LIMIT", 2)
        result = search(user=alice, query=f"{CROWD_QUERY} tag:keep", mode="semantic")
        assert [hit.passage.pk for hit in result.hits] == [passage.pk]
        assert calls == [36, 144, 576]


def test_a_large_eligible_set_is_queried_in_chunks(alice, monkeypatch) -> None:
    """More eligible documents than one Chroma `$in` takes: the per-chunk top lists merge
    into the same candidates one query would give."""
    monkeypatch.setattr(search_module, "DENSE_POST_FILTER_SHARE", float("inf"))
    for i in range(7):
        make_doc(alice, f"Note {i}", f"Certbot renewal note number {i} for staging.", tags="ops")
    make_doc(alice, "Other", "Certbot renewal note for production.", tags="other")
    sync_vectors()
    whole = search(user=alice, query="certbot renewal tag:ops", mode="semantic", rerank="off")
    monkeypatch.setattr(search_module, "DENSE_IN_CHUNK", 2)
    chunked = search(user=alice, query="certbot renewal tag:ops", mode="semantic", rerank="off")
    assert whole.dense_candidates == chunked.dense_candidates == 7
    assert [h.passage.pk for h in chunked.hits] == [h.passage.pk for h in whole.hits]
    assert [h.fused.dense.score for h in chunked.hits] == pytest.approx(
        [h.fused.dense.score for h in whole.hits], abs=1e-6
    )


# --- errors on the page and the API ---------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("certbot type:pdf", "type: takes one of: note, external"),
        ("certbot trust:gold", "trust: takes one of: note, annotation, external"),
        ("certbot after:2024-13-01", "after: takes YYYY-MM-DD, YYYY-MM or YYYY"),
        # Filters alone list documents (tests/retrieval/web/test_search_page.py); with an
        # exclusion and no word they still need one.
        ("tag:ops -certbot", "Add at least one search word"),
        ("type:note after:2024 -certbot", "Add at least one search word"),
    ],
)
def test_errors_on_the_page_and_the_api(alice_client, alice_note, query, message) -> None:
    response = alice_client.get("/api/search/", {"q": query})
    assert response.status_code == 200
    data = response.json()
    assert message in data["error"]
    assert data["hits"] == []
    for mode in MODES:
        page = alice_client.get("/search", {"q": query, "mode": mode})
        assert page.status_code == 200
        text = page.content.decode()
        assert 'class="error" role="alert"' in text
        assert message in text
        assert "Rotate the staging certs" not in text


# --- the fuzzed parser ----------------------------------------------------------------------

_VOCAB = [
    *(f"{key}:" for key in FILTER_KEYS),
    *(f"-{key}:" for key in FILTER_KEYS),
    "TYPE:",
    "Tag:",
    "ſource:",
    "note",
    "external",
    "external_stale",
    "2024",
    "2024-03",
    "2024-03-01",
    "2024-13-45",
    "0000",
    "9999-12-31",
    "runbooks",
    "#ops",
    "my dir/x",
    "%",
    "_",
    "certbot",
    "rotate",
    "NEAR",
    "AND",
    "OR",
    "NOT",
    '"',
    "-",
    ":",
    "::",
    "*",
    "(",
    ")",
    "^",
    "http://x",
    "foo:bar",
    "café",
    "👍🏽",
    "שלום",
    "\x00",
    "\ud800",
    "\u202e",
    " ",
]
FUZZ_TEXT = st.one_of(
    st.text(max_size=120),
    st.lists(st.sampled_from(_VOCAB), max_size=14).map(" ".join),
    st.lists(st.sampled_from(_VOCAB), max_size=14).map("".join),
    st.lists(st.one_of(st.sampled_from(_VOCAB), st.text(max_size=6)), max_size=10).map("".join),
)
FUZZ_SETTINGS = hypothesis_settings(
    max_examples=250,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def parse_or_none(text: str) -> ParsedQuery | None:
    """`parse`, allowing only `QueryError` (with a message); any other exception fails."""
    try:
        parsed = parse(text)
    except QueryError as exc:
        assert str(exc)
        return None
    assert isinstance(parsed, ParsedQuery)
    for item in parsed.filters:
        assert item.key in FILTER_KEYS and item.value
    if parsed.filters:
        assert not parsed.is_empty
    return parsed


@FUZZ_SETTINGS
@given(text=FUZZ_TEXT)
def test_fuzzed_parser_returns_a_query_or_a_query_error(text) -> None:
    parse_or_none(text)


@pytest.fixture
def fuzz_corpus(alice, bob) -> None:
    make_doc(
        alice,
        "Runbook",
        "Rotate certbot certs. NEAR and OR not.",
        tags="ops",
        source_name="runbooks",
    )
    make_doc(bob, "Bob", "Rotate certbot certs.", tags="ops")


def run_engine_query(parsed: ParsedQuery) -> None:
    """The compiled text query straight on the engine: FTS5 MATCH on SQLite, the tsquery on
    PostgreSQL. Any syntax error raises here."""
    backend = lexical.backend()
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                f"SELECT rowid FROM {backend.FTS_TABLE} WHERE {backend.FTS_TABLE} MATCH %s",
                [backend.match_expression(parsed)],
            )
        else:
            sql, params = backend.tsquery_sql(parsed)
            cursor.execute(f"SELECT ({sql})::text", params)
        cursor.fetchall()


@FUZZ_SETTINGS
@given(text=FUZZ_TEXT)
def test_fuzzed_queries_compile_on_the_real_engine(fuzz_corpus, alice, text) -> None:
    parsed = parse_or_none(text)
    if parsed is None or parsed.is_empty:
        return
    run_engine_query(parsed)
    # The whole lexical leg, filter subquery included, and the eligible set on its own.
    for hit in lexical.backend().search(parsed, audience=audience_for(alice.pk)):
        assert Passage.objects.get(pk=hit.passage_id).document.owner_id == alice.pk
    documents = eligible_documents(parsed, audience_for(alice.pk))
    if documents is not None:
        assert set(documents.values_list("owner_id", flat=True)) <= {alice.pk}


# --- the help page --------------------------------------------------------------------------


def test_help_page_requires_login(client) -> None:
    response = client.get("/search/help")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_help_page_documents_the_query_language(alice_client) -> None:
    response = alice_client.get("/search/help")
    assert response.status_code == 200
    text = response.content.decode()
    for key in FILTER_KEYS:
        assert f"<code>{key}:" in text, key
    for value in (*TrustTier.values, *Document.Kind.values):
        assert f"<code>{value}</code>" in text, value
    for phrase in (
        "Exact phrases",
        "Excluded words",
        "on or after",
        "not included",
        "matches either value",
        "must all match",
        "before anything is ranked or cut off",
        "add at least one search word",
        'path:"my dir/x"',
        "UTC",
    ):
        assert phrase in text, phrase


def test_search_page_links_to_the_help(alice_client) -> None:
    text = alice_client.get("/search").content.decode()
    assert 'href="/search/help"' in text


# --- lode_load_beir names the data set ------------------------------------------------------


def load_beir(path: Path, **options: object) -> None:
    call_command(
        "lode_load_beir",
        str(path),
        user="alice",
        no_progress=True,
        stdout=StringIO(),
        stderr=StringIO(),
        **options,
    )


def test_load_beir_sets_the_data_set_name(alice) -> None:
    load_beir(BEIR_FIXTURE)
    names = set(Document.objects.filter(owner=alice).values_list("source_name", flat=True))
    assert names == {"beir-mini"}
    assert hit_docs(search(user=alice, query="vitamin source:beir-mini", mode="lexical"))
    assert not hit_docs(search(user=alice, query="vitamin source:scifact", mode="lexical"))

    # Re-running restores a lost name without writing versions; --source renames.
    Document.objects.filter(owner=alice).update(source_name="")
    versions = Version.objects.count()
    load_beir(BEIR_FIXTURE)
    assert set(Document.objects.values_list("source_name", flat=True)) == {"beir-mini"}
    load_beir(BEIR_FIXTURE, source="scifact")
    assert set(Document.objects.values_list("source_name", flat=True)) == {"scifact"}
    assert Version.objects.count() == versions
    assert hit_docs(search(user=alice, query="vitamin source:scifact", mode="lexical"))
