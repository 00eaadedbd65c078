"""Highlight segments and the evidence anchor end to end: the lexical engine's own marking
(FTS5 `highlight()` on SQLite, `ts_headline` on PostgreSQL; the suite runs on both), term
highlights for semantic-only hits, the strict-parse fallback, the page (auto-escaped, matches
inside <mark>) and the API (segments, code-point and UTF-16 offsets, anchor, evidence URL).

Invariant 2 (DESIGN.md) is checked on every hit: the segments concatenate to exactly the
passage text.
"""

from __future__ import annotations

import logging
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.db import connection
from django.utils.html import escape
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from notes.models import Document
from retrieval import highlight as highlight_module
from retrieval.highlight import ANCHOR_NOTE, Segment, collision_free_markers
from retrieval.index import lexical
from retrieval.index.sync import sync_vectors
from retrieval.links import evidence_url
from retrieval.models import Passage
from retrieval.query import parse
from retrieval.search.pipeline import Hit, search
from tests.factories import note

pytestmark = pytest.mark.django_db

MARKER_START = "\ue000LODE-0-START\ue001"
MARKER_END = "\ue000LODE-0-END\ue001"
# One paragraph (so one passage) holding every payload the page must show as text.
XSS_PARAGRAPH = (
    "payload <script>alert(1)</script> payload </mark> and &lt; and "
    f"{MARKER_START}payload{MARKER_END} and <mark>payload</mark> end"
)


def lexical_search(user, query: str):
    result = search(user=user, query=query, mode="lexical", rerank="off")
    assert result.error == "", result.error
    return result


def only_hit(result) -> Hit:
    assert len(result.hits) == 1, [h.passage.text for h in result.hits]
    return result.hits[0]


def assert_exact(hit: Hit) -> None:
    """Invariant 2: the pieces add up to the stored passage text, and no piece is empty."""
    assert "".join(s.text for s in hit.segments) == hit.passage.text
    assert all(s.text for s in hit.segments)


def marked(hit: Hit) -> list[str]:
    return [s.text for s in hit.segments if s.highlighted]


# --- the index marks the matches ---------------------------------------------------------


def test_index_highlights_a_real_note(alice, alice_note):
    hit = only_hit(lexical_search(alice, "certbot staging"))
    assert_exact(hit)
    assert hit.highlighted_by == "index"
    assert marked(hit) == ["staging", "certbot"]
    p = hit.passage
    body = p.version.body
    a = hit.anchor
    assert (a.start, a.end) == (p.text.index("staging"), p.text.index("certbot") + 7)
    assert body[a.body_start : a.body_end] == "staging certs with certbot"
    assert a.start_line == a.end_line == body[: a.body_start].count("\n") + 1
    assert [(h.start, h.end) for h in hit.highlights] == [
        (p.text.index("staging"), p.text.index("staging") + 7),
        (p.text.index("certbot"), p.text.index("certbot") + 7),
    ]


def test_stemmed_matches_and_phrases_are_marked(alice):
    note(alice, "Deploys", "Deploying again: we deployed the deploy scripts, then deploy notes.")
    hit = only_hit(lexical_search(alice, "deploy"))
    assert_exact(hit)
    assert [t.casefold() for t in marked(hit)] == [
        "deploying",
        "deployed",
        "deploy",
        "deploy",
    ]
    hit = only_hit(lexical_search(alice, '"deploy scripts"'))
    assert_exact(hit)
    if connection.vendor == "sqlite":
        # FTS5 marks each occurrence of the phrase, as one span.
        assert marked(hit) == ["deploy scripts"]
    else:
        # ts_headline marks every word of the query wherever it occurs, phrase or not.
        assert [t.casefold() for t in marked(hit)] == [
            "deploying",
            "deployed",
            "deploy",
            "scripts",
            "deploy",
        ]


def test_excluded_words_are_never_marked(alice):
    note(alice, "Exclusions", "Deploy the foo and the bar, then deploy.")
    hit = only_hit(lexical_search(alice, 'deploy -"foo bar" -baz'))
    assert_exact(hit)
    assert [t.casefold() for t in marked(hit)] == ["deploy", "deploy"]


def test_only_the_passage_text_is_marked_not_the_title(alice):
    note(alice, "Zeppelin", "Nothing in this body names the airship.")
    hit = only_hit(lexical_search(alice, "zeppelin"))
    assert_exact(hit)
    assert marked(hit) == [] and hit.anchor is None
    assert hit.segments == [Segment(hit.passage.text, False)]


def test_passage_containing_the_marker_strings(alice):
    body = f"The {MARKER_START}notes{MARKER_END} mention deploy twice: deploy."
    note(alice, "Markers", body)
    hit = only_hit(lexical_search(alice, "deploy"))
    assert_exact(hit)
    assert MARKER_START in hit.passage.text
    # The markers the engine used differ from the text's, so the text's stay literal.
    assert collision_free_markers(hit.passage.text)[0] != MARKER_START
    assert marked(hit) == ["deploy", "deploy"]
    assert any(MARKER_START in s.text for s in hit.segments if not s.highlighted)


@pytest.mark.parametrize(
    ("body", "query", "expected"),
    [
        ("Meet at the café near the station.", "cafe", ["café"]),
        ("Meet at the cafe near the station.", "café", ["cafe"]),
        ("Le CAFÉ crème et la crème brûlée.", "creme brulee", ["crème", "crème", "brûlée"]),
    ],
)
def test_accents_fold_like_the_index(alice, body, query, expected):
    note(alice, "Accents", body)
    hit = only_hit(lexical_search(alice, query))
    assert_exact(hit)
    assert marked(hit) == expected


def test_astral_characters_give_utf16_offsets(alice):
    body = "👍🏽 deploy the 𝒳 service 🚀 now, deploy!"
    note(alice, "Emoji", body)
    hit = only_hit(lexical_search(alice, "deploy service"))
    assert_exact(hit)
    text = hit.passage.text
    utf16 = text.encode("utf-16-le")
    assert [h.start for h in hit.highlights] == [
        text.index("deploy"),
        text.index("service"),
        text.rindex("deploy"),
    ]
    for h in hit.highlights:
        assert text[h.start : h.end] in ("deploy", "service")
        # What a browser sees: the same word at the UTF-16 offsets.
        assert (
            utf16[2 * h.start_utf16 : 2 * h.end_utf16].decode("utf-16-le")
            == (text[h.start : h.end])
        )
    # 👍🏽 is two astral code points (four UTF-16 units), 𝒳 one more astral one.
    first, second = hit.highlights[0], hit.highlights[1]
    assert first.start_utf16 - first.start == 2
    assert second.start_utf16 - second.start == 3


def test_anchor_spans_lines_in_the_version_body(alice):
    body = "# Runbook\n\nalpha one\nbeta two\ngamma three\n"
    note(alice, "Runbook", body)
    hit = only_hit(lexical_search(alice, "alpha gamma"))
    assert_exact(hit)
    a = hit.anchor
    version_body = hit.passage.version.body
    assert version_body[a.body_start : a.body_end] == "alpha one\nbeta two\ngamma"
    # The span includes "one", "beta", "two": unmatched text between the hits.
    assert marked(hit) == ["alpha", "gamma"]
    assert (a.start_line, a.end_line) == (3, 5)
    assert hit.passage.start_line <= a.start_line <= a.end_line <= hit.passage.end_line


def test_only_returned_hits_are_highlighted(alice, monkeypatch):
    for i in range(30):
        note(alice, f"Note {i}", f"Otters number {i} float on their backs.")
    seen: list[int] = []
    real = lexical.backend().highlight

    def spy(parsed, passages):
        seen.append(len(passages))
        return real(parsed, passages)

    monkeypatch.setattr(lexical.backend(), "highlight", spy)
    result = search(user=alice, query="otters", mode="lexical", rerank="off", limit=5)
    assert result.lexical_candidates == 30
    assert seen == [5]
    assert all(h.segments and h.highlighted_by == "index" for h in result.hits)
    for hit in result.hits:
        assert_exact(hit)


def test_search_without_highlights_leaves_hits_plain(alice, alice_note):
    result = search(user=alice, query="certbot", mode="lexical", rerank="off", highlight=False)
    (hit,) = result.hits
    assert hit.segments == [] and hit.anchor is None
    assert hit.display_segments == [Segment(hit.passage.text, False)]


# --- the fallback when the engine's output cannot be trusted -----------------------------


def _mangle(how: str):
    real = highlight_module.segments_or_plain

    def mangled(passage, marked_text, start, end):
        if how == "unclosed":
            cut = marked_text.rfind(end)
            marked_text = marked_text[:cut] + marked_text[cut + len(end) :]
        elif how == "altered":  # the engine changed a character of the text
            marked_text = marked_text.replace("Rotate", "Rotat3")
        elif how == "nested":
            marked_text = marked_text.replace(start, start + start, 1)
        return real(passage, marked_text, start, end)

    return mangled


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("unclosed", "unclosed highlight"),
        ("altered", "do not concatenate"),
        ("nested", "nested start marker"),
    ],
)
def test_malformed_engine_output_falls_back_to_plain_text(
    how, reason, alice, alice_note, alice_client, monkeypatch, caplog
):
    monkeypatch.setattr(lexical.backend(), "segments_or_plain", _mangle(how))
    with caplog.at_level(logging.WARNING, logger="lode.highlight"):
        hit = only_hit(lexical_search(alice, "rotate certbot"))
    assert hit.segments == [Segment(hit.passage.text, False)]
    assert hit.anchor is None and hit.highlights == []
    assert any(
        r.name == "lode.highlight" and "highlight fallback" in r.message and reason in r.message
        for r in caplog.records
    ), caplog.text

    # The calm view shows the passage as a person reads it ("# " dropped); the anchor line
    # saying nothing is highlighted is under Advanced (adv=1).
    page = alice_client.get("/search", {"q": "rotate certbot", "mode": "lexical", "adv": "1"})
    html = page.content.decode()
    assert "<mark>" not in html
    assert escape("Rotate the staging certs with certbot before Friday.") in html
    assert "No words of the query are highlighted" in html


# --- semantic-only hits: term highlights computed in Python ------------------------------


@pytest.fixture
def car_note(alice, private_vectors: Path) -> Document:
    note(alice, "Sourdough", "Bake the sourdough loaf at 220 degrees for forty minutes.")
    document = note(alice, "Road trip", "The automobile would not start in the cold morning.")
    sync_vectors()
    return document


def test_semantic_only_hits_get_term_highlights(alice, car_note):
    result = search(user=alice, query="automobiles winter", mode="semantic", rerank="off")
    assert result.error == "" and result.degraded == []
    hit = result.hits[0]
    assert hit.passage.document_id == car_note.pk
    assert hit.fused.lexical is None
    assert_exact(hit)
    assert hit.highlighted_by == "query terms"
    assert marked(hit) == ["automobile"]
    assert hit.anchor is not None
    assert hit.passage.text[hit.anchor.start : hit.anchor.end] == "automobile"


def test_semantic_only_hit_sharing_no_word_has_no_highlight(alice, car_note):
    result = search(user=alice, query="car engine failure", mode="semantic", rerank="off")
    hit = next(h for h in result.hits if h.passage.document_id == car_note.pk)
    assert hit.segments == [Segment(hit.passage.text, False)] and hit.anchor is None


def test_hybrid_uses_the_index_for_lexical_hits_and_terms_for_the_rest(alice, car_note):
    result = search(user=alice, query="automobile", mode="hybrid", rerank="off")
    by_doc = {h.passage.document_id: h for h in result.hits}
    car = by_doc[car_note.pk]
    assert car.fused.lexical is not None and car.highlighted_by == "index"
    assert marked(car) == ["automobile"]
    for hit in result.hits:
        assert_exact(hit)
        assert hit.highlighted_by == ("index" if hit.fused.lexical else "query terms")


@pytest.mark.parametrize(
    "body",
    [
        "Deploying again: we deployed the deploy scripts, then deploys.",
        "Le café, CAFÉ and cafes; naïve résumé of the cafe.",
        "Rotate certs. Rotating the certificates rotated nothing!",
    ],
)
def test_python_term_highlights_agree_with_the_index(alice, body):
    note(alice, "Agree", body)
    for query in ("deploy", "cafe resume", "rotate certs"):
        result = lexical_search(alice, query)
        if not result.hits:
            continue
        (hit,) = result.hits
        parsed = parse(query)
        python = highlight_module.term_segments(hit.passage.text, [*parsed.terms])
        assert marked(hit) == [s.text for s in python if s.highlighted], query


# --- the page: auto-escaped segments, <mark> around matches ------------------------------


class _HitText(HTMLParser):
    """Text content of each hit's passage text, and the text inside its <mark>s."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self.marks: list[list[str]] = []
        self.tags_inside: list[str] = []
        self._depth = 0
        self._in_mark = False

    def handle_starttag(self, tag, attrs):
        if self._depth:
            self._depth += 1
            self.tags_inside.append(tag)
            if tag == "mark":
                self._in_mark = True
                self.marks[-1].append("")
        elif tag == "p" and ("class", "hit-text passage-text") in attrs:
            self._depth = 1
            self.texts.append("")
            self.marks.append([])

    def handle_endtag(self, tag):
        if not self._depth:
            return
        if tag == "mark":
            self._in_mark = False
        self._depth -= 1

    def handle_data(self, data):
        if self._depth:
            self.texts[-1] += data
            if self._in_mark:
                self.marks[-1][-1] += data


def rendered_hits(html: str) -> _HitText:
    parser = _HitText()
    parser.feed(html)
    parser.close()
    return parser


def test_xss_payloads_in_a_passage_render_as_text(alice, alice_client):
    note(alice, "Payloads", XSS_PARAGRAPH)
    hit = only_hit(lexical_search(alice, "payload"))
    assert_exact(hit)
    assert hit.passage.text == XSS_PARAGRAPH
    assert marked(hit)

    for params in ({}, {"HTTP_HX_REQUEST": "true"}):  # full page and htmx partial
        response = alice_client.get("/search", {"q": "payload", "mode": "lexical"}, **params)
        assert response.status_code == 200
        html = response.content.decode()
        assert "<script>alert(1)" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "&lt;mark&gt;<mark>payload</mark>&lt;/mark&gt;" in html
        assert "&amp;lt;" in html
        assert MARKER_START in html and MARKER_END in html  # displayed literally
        pieces = "".join(
            f"<mark>{escape(s.text)}</mark>" if s.highlighted else escape(s.text)
            for s in hit.segments
        )
        assert f'<p class="hit-text passage-text">{pieces}</p>' in html
        hits = rendered_hits(html)
        assert hits.texts == [XSS_PARAGRAPH]  # what a reader sees is the passage, verbatim
        assert hits.tags_inside == ["mark"] * len(marked(hit))
        assert hits.marks == [marked(hit)]


def test_page_shows_anchor_caveat_and_evidence_link(alice, alice_client, alice_note):
    hit = only_hit(lexical_search(alice, "certbot staging"))
    query = {"q": "certbot staging", "mode": "lexical", "adv": "1"}  # the anchor: Advanced
    html = alice_client.get("/search", query).content.decode()
    a = hit.anchor
    assert f"Evidence anchor: line {a.start_line}," in html
    assert f"characters {a.body_start}–{a.body_end} (Unicode code points)" in html
    assert "the span may contain unmatched text between hits" in html
    url = evidence_url(hit.passage)
    assert hit.evidence_url == url
    # The link carries the search back (query, mode, reranker) for "back to results".
    back = "?q=certbot+staging&amp;mode=lexical&amp;rerank="
    assert f'<a class="evidence-link" href="{escape(url)}{back}' in html
    assert "<mark>certbot</mark>" in html and "<mark>staging</mark>" in html


# --- the API --------------------------------------------------------------------------------


def test_api_returns_segments_offsets_anchor_and_evidence_url(alice, alice_client):
    body = "# Emoji\n\n👍🏽 deploy the 𝒳 service\nthen deploy <b>again</b>.\n"
    note(alice, "Emoji", body)
    response = alice_client.get("/api/search/", {"q": "deploy service", "mode": "lexical"})
    assert response.status_code == 200
    (item,) = response.json()["hits"]
    passage = Passage.objects.get(pk=item["passage_id"])
    text = item["text"]
    assert text == passage.text
    assert "".join(s["text"] for s in item["segments"]) == text
    assert all(set(s) == {"text", "highlighted"} for s in item["segments"])
    assert [s["text"] for s in item["segments"] if s["highlighted"]] == [
        "deploy",
        "service",
        "deploy",
    ]
    utf16 = text.encode("utf-16-le")
    for h in item["highlights"]:
        assert set(h) == {"start", "end", "start_utf16", "end_utf16"}
        word = text[h["start"] : h["end"]]
        assert word in ("deploy", "service")
        assert utf16[2 * h["start_utf16"] : 2 * h["end_utf16"]].decode("utf-16-le") == word
    assert item["highlights"][0]["start_utf16"] == item["highlights"][0]["start"] + 2
    assert item["highlighted_by"] == "index"
    anchor = item["anchor"]
    assert anchor["note"] == ANCHOR_NOTE == "may contain unmatched text between hits"
    assert anchor["passage_start"] == item["highlights"][0]["start"]
    assert anchor["passage_end"] == item["highlights"][-1]["end"]
    assert anchor["start"] == passage.start + anchor["passage_start"]
    assert anchor["end"] == passage.start + anchor["passage_end"]
    assert (anchor["start_line"], anchor["end_line"]) == (3, 4)
    assert item["evidence_url"] == evidence_url(passage)


def test_api_anchor_is_null_without_highlights(alice, alice_client):
    note(alice, "Zeppelin", "Nothing in this body names the airship.")
    (item,) = alice_client.get("/api/search/", {"q": "zeppelin"}).json()["hits"]
    assert item["anchor"] is None and item["highlights"] == []
    assert item["segments"] == [{"text": item["text"], "highlighted": False}]


def test_openapi_says_which_unit_each_offset_uses(alice_client):
    schemas = alice_client.get("/api/openapi.json").json()["components"]["schemas"]
    highlight = schemas["HighlightOut"]["properties"]
    assert "Unicode code points" in highlight["start"]["description"]
    assert "Unicode code points" in highlight["end"]["description"]
    assert "UTF-16 code units" in highlight["start_utf16"]["description"]
    assert "UTF-16 code units" in highlight["end_utf16"]["description"]
    anchor = schemas["AnchorOut"]
    assert "unmatched text between hits" in anchor["description"]
    hit = schemas["HitOut"]["properties"]
    assert "concatenate to exactly" in hit["segments"]["description"]
    assert "unmatched text between hits" in hit["anchor"]["description"]


# --- engine specifics ------------------------------------------------------------------------


@pytest.mark.skipif(connection.vendor != "postgresql", reason="ts_headline is PostgreSQL's")
@pytest.mark.parametrize(
    ("start", "stop"),
    [
        (MARKER_START, MARKER_END),
        ('a"b, c=d', "</x>"),
        ("--[", "]--"),
        ("'quote'", 'say ""hi""'),
    ],
)
def test_ts_headline_options_carry_any_marker(start, stop):
    from retrieval.index.lexical import postgresql

    options = postgresql.headline_options(start, stop)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT ts_headline('{postgresql.CONFIG}'::regconfig, %s, "
            f"plainto_tsquery('{postgresql.CONFIG}'::regconfig, 'deploy'), %s)",
            ["we deploy, then deploy again", options],
        )
        (out,) = cursor.fetchone()
    assert out == f"we {start}deploy{stop}, then {start}deploy{stop} again"


@pytest.mark.skipif(connection.vendor != "sqlite", reason="FTS5 highlight() is SQLite's")
def test_fts5_highlight_uses_per_passage_markers(alice):
    plain = note(alice, "Plain", "deploy here")
    tricky = note(alice, "Tricky", f"deploy there {MARKER_START}")
    ids = {d.pk: Passage.objects.get(document=d, is_head=True) for d in (plain, tricky)}
    passages = [(p.pk, p.text) for p in ids.values()]
    segments = lexical.backend().highlight(parse("deploy"), passages)
    assert segments[ids[plain.pk].pk] == [Segment("deploy", True), Segment(" here", False)]
    assert segments[ids[tricky.pk].pk] == [
        Segment("deploy", True),
        Segment(f" there {MARKER_START}", False),
    ]


TRICKY_PIECES = [
    "deploy",
    "Deploying",
    "café",
    "CAFE\u0301",
    " ",
    "  ",
    "\n",
    "\t",
    "-",
    "<b>",
    "</b>",
    "<script>",
    "</mark>",
    "&lt;",
    "&amp;",
    "http://x.org/deploy",
    "x@y.com",
    "long-term",
    "1.5",
    "👍🏽",
    "𝒳",
    "\ue000",
    MARKER_START,
    MARKER_END,
    "'",
    '"',
    "\\",
    "ß",
    "İ",
    "ﬁ",
    "_deploy_",
    "v1.2.3",
    "<!-- c -->",
]


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.sampled_from(TRICKY_PIECES), min_size=1, max_size=30))
@pytest.mark.slow
def test_engine_output_always_parses_and_adds_up(alice, pieces):
    """The engine's marked text, minus our markers, is the stored text exactly: no fallback
    is ever needed for real output, whatever the passage contains."""
    document = note(alice, "Fuzz", "deploy " + "".join(pieces))
    passages = [(p.pk, p.text) for p in Passage.objects.filter(document=document, is_head=True)]
    handler = _Warnings()
    logger = logging.getLogger("lode.highlight")
    logger.addHandler(handler)
    try:
        segments = lexical.backend().highlight(parse("deploy cafe"), passages)
    finally:
        logger.removeHandler(handler)
    assert handler.messages == []
    for pid, text in passages:
        if pid in segments:
            assert "".join(s.text for s in segments[pid]) == text
            assert all(s.text for s in segments[pid])
    assert any(s.highlighted for segs in segments.values() for s in segs)


def index_highlight(query, passages):
    """FTS5 `highlight()` run on the index itself (what `highlight()` did before it used a
    scratch copy of the hits): the reference its marks must equal."""
    from retrieval.highlight import segments_or_plain
    from retrieval.index.lexical import sqlite as backend

    markers = {pid: collision_free_markers(text) for pid, text in passages}
    texts = dict(passages)
    values = ", ".join(["(%s, %s, %s)"] * len(markers))
    params = [x for pid, (start, end) in markers.items() for x in (pid, start, end)]
    table = backend.FTS_TABLE
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH m(id, s, e) AS (VALUES {values}) SELECT {table}.rowid, "
            f"highlight({table}, {backend.TEXT_COLUMN}, m.s, m.e) FROM m "
            f"JOIN {table} ON {table}.rowid = m.id WHERE {table} MATCH %s",
            [*params, backend.match_expression(query)],
        )
        rows = cursor.fetchall()
    return {pid: segments_or_plain(texts[pid], marked or "", *markers[pid]) for pid, marked in rows}


SCRATCH_QUERIES = [
    "deploy",
    "deploy cafe",
    '"deploy cafe"',
    "deploying -term",
    "fuzz deploy",  # "fuzz" is in the title only
    "long-term 1.5",
    "ß ﬁ",
]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="FTS5 highlight() is SQLite's")
@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.lists(st.sampled_from(TRICKY_PIECES), min_size=1, max_size=20), min_size=1,
             max_size=3),
    st.sampled_from(SCRATCH_QUERIES),
)  # fmt: skip
@pytest.mark.slow
def test_scratch_copy_marks_exactly_what_the_index_marks(alice, bodies, query):
    """Highlighting runs on a scratch copy of the hits' index rows; its marks must be the
    index's own, for every kind of query (phrase, exclusion, a title-only match) and text."""
    from retrieval.index.lexical import sqlite as backend

    documents = [note(alice, "Fuzz", "deploy " + "".join(pieces)) for pieces in bodies]
    passages = [
        (p.pk, p.text) for p in Passage.objects.filter(document__in=documents, is_head=True)
    ]
    parsed = parse(query)
    assert backend.highlight(parsed, passages) == index_highlight(parsed, passages)
    # Nothing is left in the connection's scratch tables for the next request to find.
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM temp.{backend.HIGHLIGHT_CONTENT}")
        assert cursor.fetchone()[0] == 0


@pytest.mark.skipif(connection.vendor != "sqlite", reason="FTS5 highlight() is SQLite's")
def test_a_passage_no_longer_at_head_is_left_to_python(alice):
    from notes import services
    from retrieval.index.lexical import sqlite as backend

    document = note(alice, "Deploys", "deploy the old way")
    old = Passage.objects.get(document=document, is_head=True)
    services.note_update(
        document=document,
        user=alice,
        base_version_id=document.head_id,
        title="Deploys",
        body="deploy anew",
    )
    new = Passage.objects.get(document=document, is_head=True)
    found = backend.highlight(parse("deploy"), [(old.pk, old.text), (new.pk, new.text)])
    assert list(found) == [new.pk]


# --- bounded highlighting -----------------------------------------------------


def marks(hit: Hit) -> int:
    return sum(1 for s in hit.segments if s.highlighted)


def test_many_matches_in_one_passage_are_capped_by_the_index(alice, alice_client):
    # 2,000 characters (within the chunker's bound, so one passage the engine highlights)
    # holding 1,000 matches of "x": only the first HIGHLIGHT_MAX_MARKS are marked.
    document = note(alice, "Table", "|x" * 1000)
    hit = only_hit(lexical_search(alice, "x"))
    assert hit.passage.document_id == document.pk
    assert_exact(hit)
    assert hit.highlighted_by == "index"
    assert marks(hit) == highlight_module.HIGHLIGHT_MAX_MARKS
    assert hit.highlights_truncated is True
    assert len(hit.highlights) == highlight_module.HIGHLIGHT_MAX_MARKS
    (item,) = alice_client.get("/api/search/", {"q": "x", "mode": "lexical"}).json()["hits"]
    assert item["highlights_truncated"] is True
    assert "".join(s["text"] for s in item["segments"]) == item["text"]
    assert sum(s["highlighted"] for s in item["segments"]) == len(item["highlights"]) == 100


def test_a_passage_with_tens_of_thousands_of_matches_is_highlighted_in_a_window(
    alice, alice_client, settings
):
    # A passage chunked before the character bound (one 40,000-character line, 20,000
    # matches): the engine never sees it; Python marks the first window, capped.
    settings.LODE_CHUNK_MAX_CHARS = 1_000_000
    note(alice, "Wide table", "|x" * 20_000)
    (passage,) = Passage.objects.filter(is_head=True)
    assert len(passage.text) == 40_000
    assert lexical.backend().highlight(parse("x"), [(passage.pk, passage.text)]) == {}

    hit = only_hit(lexical_search(alice, "x"))
    assert_exact(hit)
    assert hit.highlighted_by == "query terms"
    assert 0 < marks(hit) <= highlight_module.HIGHLIGHT_MAX_MARKS
    assert hit.highlights_truncated is True
    assert hit.anchor is not None and hit.anchor.end <= highlight_module.HIGHLIGHT_MAX_CHARS
    (item,) = alice_client.get("/api/search/", {"q": "x", "mode": "lexical"}).json()["hits"]
    assert item["highlights_truncated"] is True and item["highlighted_by"] == "query terms"
    assert "".join(s["text"] for s in item["segments"]) == item["text"] == passage.text


def test_ordinary_hits_are_not_truncated(alice, alice_note, alice_client):
    hit = only_hit(lexical_search(alice, "certbot staging"))
    assert hit.highlights_truncated is False
    (item,) = alice_client.get("/api/search/", {"q": "certbot"}).json()["hits"]
    assert item["highlights_truncated"] is False
