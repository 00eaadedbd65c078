"""A calm default view, on the rendered HTML: search hits show their text
as a person reads it (no raw Markdown) with the highlighted characters exactly the stored
ones; title, where a hit lives and its age, with scores, ranks, offsets, the mode and the
reranker only in the Advanced view (`adv=1`, kept in the shared link); decisions in words on
the ask and stored-answer pages; a first screen for an empty library."""

from __future__ import annotations

from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.urls import reverse
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from notes import services
from retrieval.answer.types import AskOutcome, Decision
from retrieval.highlight import Segment
from retrieval.models import AskTrace
from retrieval.web.search_views import readable_segments
from tests.factories import make_source, make_source_external

pytestmark = pytest.mark.django_db

RUNBOOK = (
    "# Database runbook\n\n"
    "## Failover\n\n"
    "Promote the **failover** replica with `pg_ctl promote` and check *lag* first.\n\n"
    "| Setting | Value |\n"
    "| --- | --- |\n"
    "| failover_timeout | 30s |\n\n"
    "```sh\n"
    'psql -c "SELECT pg_is_in_recovery()" # failover check\n'
    "```\n\n"
    "See [the failover guide](https://example.com/failover) for more.\n"
)
MARKDOWN_MARKERS = ("##", "**", "```", "|", "`", "](", "--- ")


class _Texts(HTMLParser):
    """The text of every element with `css_class` (its own and its children's), and the
    text of each <mark> inside them; plus the page's visible text (no attributes)."""

    def __init__(self, css_class: str) -> None:
        super().__init__(convert_charrefs=True)
        self.css_class = css_class
        self.blocks: list[str] = []
        self.marks: list[str] = []
        self.visible: list[str] = []
        self._depth = 0  # open elements inside the current block (0: outside any)
        self._in_mark = False
        self._skip = 0  # inside <script> or <style>

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        classes = (dict(attrs).get("class") or "").split()
        if self._depth:
            self._depth += 1
        elif self.css_class in classes:
            self._depth = 1
            self.blocks.append("")
        if tag == "mark" and self._depth:
            self._in_mark = True
            self.marks.append("")

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1
        if tag == "mark":
            self._in_mark = False
        if self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if not self._skip:
            self.visible.append(data)
        if self._depth:
            self.blocks[-1] += data
            if self._in_mark:
                self.marks[-1] += data


def texts(html: str, css_class: str) -> _Texts:
    parser = _Texts(css_class)
    parser.feed(html)
    parser.close()
    return parser


def visible_text(html: str) -> str:
    return " ".join(texts(html, "-none-").visible)


def get(client, url: str, params: dict[str, str] | None = None) -> str:
    response = client.get(url, params or {})
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def runbook(alice):
    return services.note_create(owner=alice, title="Database runbook", body=RUNBOOK)


# --- readable hit text -------------------------------------------------------------------------


def test_hit_text_shows_no_raw_markdown_and_marks_exactly_the_stored_characters(
    alice_client, runbook
):
    html = get(alice_client, "/search", {"q": "failover", "mode": "lexical"})
    found = texts(html, "hit-text")
    assert found.blocks, "the runbook is found"
    shown = "\n".join(found.blocks)
    for marker in MARKDOWN_MARKERS:
        assert marker not in shown, marker
    # Read as a person reads it: the words, the table's cells and the code are all there.
    assert "Promote the failover replica with pg_ctl promote and check lag first." in shown
    assert "failover_timeout · 30s" in shown
    assert 'psql -c "SELECT pg_is_in_recovery()" # failover check' in shown
    assert "See the failover guide for more." in shown
    # Every mark is a stored occurrence of the word, exactly, in prose, table and code alike.
    assert len(found.marks) >= 4 and all(mark.casefold() == "failover" for mark in found.marks)


def test_readable_segments_keep_each_highlight_exact_beside_markup():
    segments = [
        Segment("## ", False),
        Segment("Failover", True),
        Segment("\n\nRun **", False),
        Segment("failover", True),
        Segment("** with `", False),
        Segment("pg_ctl", True),
        Segment("` now.\n| a | ", False),
        Segment("failover", True),
        Segment(" |\n", False),
    ]
    shown = readable_segments(segments)
    assert [s.text for s in shown if s.highlighted] == [
        "Failover",
        "failover",
        "pg_ctl",
        "failover",
    ]
    assert (
        "".join(s.text for s in shown)
        == "Failover\n\nRun failover with pg_ctl now.\na · failover\n"
    )


def test_readable_segments_fall_back_to_the_stored_text_rather_than_lose_a_highlight():
    # A highlight on a fence line (a line that is only markup) would vanish with the line.
    segments = [Segment("```", False), Segment("python", True), Segment("\nx = 1\n```\n", False)]
    assert readable_segments(segments) == segments
    # A passage text that holds the placeholder word itself is still handled.
    tricky = [Segment("lodemark0lodemark **", False), Segment("bold", True), Segment("**", False)]
    shown = readable_segments(tricky)
    assert [s.text for s in shown if s.highlighted] == ["bold"]
    assert "".join(s.text for s in shown) == "lodemark0lodemark bold"


def test_inline_markup_patterns_are_skipped_only_when_they_cannot_match():
    """`without_inline_markup` runs each pattern only when the character its matches need is
    in the text; it must equal running all four, always."""
    from retrieval.answer import display

    @settings(max_examples=500, deadline=None)
    @given(st.text(alphabet=st.sampled_from(list("ab 1.-*_`~[]()<>!|#\\:/\n")), max_size=60))
    def check(text: str) -> None:
        every = display._LINK_RE.sub(r"\1", text)
        every = display._AUTOLINK_RE.sub(r"\1", every)
        every = display._INLINE_MARKS_RE.sub("", every)
        every = display._ESCAPED_RE.sub(r"\1", every)
        assert display.without_inline_markup(text) == every

    check()
    shown = display.without_inline_markup("a [link](http://x) and **bold** \\*")
    assert shown == "a link and bold *"


def test_context_is_offered_only_when_it_says_more_than_the_passage(alice, alice_client):
    whole = services.note_create(owner=alice, title="Short", body="The kettle descales monthly.")
    html = get(alice_client, "/search", {"q": "kettle", "mode": "lexical"})
    assert "kettle" in html and 'class="context"' not in html
    long_body = "# Kettle\n\n" + "\n\n".join(
        f"Paragraph {n} about the kettle and its limescale, descaled with citric acid. " * 6
        for n in range(12)
    )
    services.note_create(owner=alice, title="Long", body=long_body)
    html = get(alice_client, "/search", {"q": "limescale", "mode": "lexical"})
    assert 'class="context"' in html
    assert whole.pk


# --- title, where it lives, age; the Advanced view ---------------------------------------------


ADVANCED_ONLY = (
    "rank 1",
    "Evidence anchor",
    "Why this result",
    "keyword /",
    "lexical search",
    'name="mode" aria-label',
    "(Unicode code points)",
    " · lines ",
)


def test_advanced_details_are_hidden_by_default_and_shown_with_adv_1(alice_client, runbook):
    params = {"q": "failover", "mode": "lexical", "rerank": "off"}
    calm = get(alice_client, "/search", params)
    for detail in ADVANCED_ONLY:
        assert detail not in calm, detail
    assert '<a class="hit-title"' in calm and "Database runbook" in calm
    toggle = "/search?q=failover&amp;mode=lexical&amp;rerank=off&amp;space=all&amp;adv=1"
    assert f'class="advanced-toggle" href="{toggle}"' in calm

    advanced = get(alice_client, "/search", {**params, "adv": "1"})
    for detail in ADVANCED_ONLY:
        assert detail in advanced, detail
    # The shared link reproduces the Advanced view, and the form keeps it on the next search.
    assert (
        'value="http://testserver/search?q=failover&amp;mode=lexical&amp;rerank=off&amp;space=all'
        '&amp;adv=1"' in advanced
    )
    assert '<input type="hidden" name="adv" value="1">' in advanced
    assert "Hide advanced" in advanced
    # The htmx partial follows the same parameter.
    partial = alice_client.get("/search", params, headers={"HX-Request": "true"}).content.decode()
    assert "Evidence anchor" not in partial and "Database runbook" in partial


def test_each_hit_says_where_it_lives_and_how_old_it_is(alice, alice_client, runbook):
    runbook.versions.update(created_at=timezone.now() - timedelta(days=3, hours=2))
    source = make_source(alice, name="Team wiki")
    make_source_external(
        source,
        path="ops/failover.md",
        title="Failover guide",
        bodies=("Failover drills run every quarter.\n",),
        age=timedelta(hours=5),
    )
    html = get(alice_client, "/search", {"q": "failover", "mode": "lexical"})
    where = [w.replace("\xa0", " ") for w in texts(html, "hit-where").blocks]
    assert any(w.startswith("Note › Failover · saved 3 days ago") for w in where), where
    assert any(w.startswith("Team wiki › ops/failover.md · fetched 5 hours ago") for w in where), (
        where
    )


def test_bob_sees_neither_alices_hits_nor_her_sources_paths(bob_client, alice, runbook):
    source = make_source(alice, name="Team wiki")
    make_source_external(source, path="ops/failover.md", bodies=("Failover drills.\n",))
    html = get(bob_client, "/search", {"q": "failover", "mode": "lexical"})
    assert "Database runbook" not in html and "ops/failover.md" not in html


# --- decisions in words ------------------------------------------------------------------------


def stored_answer(user, outcome: AskOutcome) -> str:
    """The permalink of a trace row holding `outcome` as the ask pipeline stores it."""
    trace = AskTrace.objects.create(
        user=user,
        question=outcome.question,
        decision=str(outcome.decision),
        answerer=outcome.answerer,
        answer=outcome.as_dict(),
    )
    return reverse("ask-permalink", args=[trace.pk])


@pytest.mark.parametrize(
    ("decision", "error", "words"),
    [
        (Decision.ANSWER, "", "Answered"),
        (Decision.ANSWER_WITH_CONFLICTS, "", "Answered — sources disagree"),
        (Decision.ABSTAIN_NO_EVIDENCE, "", "Not in your notes"),
        (Decision.ASK_CLARIFYING, "", "Needs a clearer question"),
        (Decision.ABSTAIN_NO_EVIDENCE, "TimeoutError: slow", "Not answered — the answerer failed"),
    ],
)
def test_stored_answers_and_the_recent_list_say_the_decision_in_words(
    alice, alice_client, decision, error, words
):
    outcome = AskOutcome(question="Tides?", decision=decision, answerer="extractive", error=error)
    url = stored_answer(alice, outcome)
    html = get(alice_client, url)
    decision_line = texts(html, "decision-words").blocks
    assert [line.strip() for line in decision_line] == [words]
    recent = texts(get(alice_client, "/ask"), "recent-decision").blocks
    assert recent == [words]
    for name in Decision:
        assert str(name) not in visible_text(html), name


# --- the first screen of an empty library ------------------------------------------------------


def test_an_empty_library_invites_the_first_note_source_and_question(bob_client):
    html = get(bob_client, "/search")
    assert "Your library is empty" in html
    assert f'href="{reverse("notes:create")}"' in html
    assert f'href="{reverse("externals:sources")}"' in html
    assert f'href="{reverse("ask")}"' in html
    assert 'class="button first-note"' in html and 'class="button first-question"' in html


def test_the_first_screen_gives_way_once_there_is_a_note_or_a_source(
    alice, bob, alice_client, bob_client, runbook
):
    assert "Your library is empty" not in get(alice_client, "/search")
    assert "Type words to search" in get(alice_client, "/search")
    make_source(bob)  # a source not yet scanned is already a start
    assert "Your library is empty" not in get(bob_client, "/search")
    # A search, even in an empty library, is answered as a search.
    assert "Your library is empty" not in get(bob_client, "/search", {"q": "tides"})


def test_back_to_results_returns_to_the_view_the_results_were_in(alice_client, runbook):
    import re

    params = {"q": "failover", "mode": "lexical", "rerank": "off", "adv": "1", "weaker": "1"}
    page = get(alice_client, "/search", params)
    link = re.search(r'<a class="evidence-link" href="([^"]+)"', page)
    assert link is not None
    evidence = get(alice_client, link.group(1).replace("&amp;", "&"), {})
    back = "/search?q=failover&amp;mode=lexical&amp;rerank=off&amp;weaker=1&amp;adv=1"
    assert f'<a href="{back}">← back to results</a>' in evidence


def test_marked_segments_write_what_the_template_loop_wrote():
    """The filter that writes highlight segments gives exactly the auto-escaped loop's HTML,
    for objects and dicts (stored answers), hostile text included."""
    from django.template import Context, Template

    from retrieval.templatetags.lode_highlight import marked_segments

    loop = Template(
        "{% for segment in segments %}{% if segment.highlighted %}<mark>{{ segment.text }}"
        "</mark>{% else %}{{ segment.text }}{% endif %}{% endfor %}"
    )

    @settings(max_examples=200, deadline=None)
    @given(
        st.lists(
            st.tuples(
                st.text(alphabet=st.sampled_from(list("a <>&\"'/\n")), max_size=8), st.booleans()
            ),
            max_size=6,
        )
    )
    def check(pieces: list[tuple[str, bool]]) -> None:
        as_objects = [Segment(text, highlighted) for text, highlighted in pieces]
        as_dicts = [{"text": text, "highlighted": highlighted} for text, highlighted in pieces]
        expected = loop.render(Context({"segments": as_objects}))
        assert marked_segments(as_objects) == expected
        assert marked_segments(as_dicts) == expected

    check()
    shown = marked_segments([Segment("<script>x</script>", True), Segment(" & more", False)])
    assert shown == "<mark>&lt;script&gt;x&lt;/script&gt;</mark> &amp; more"
    assert marked_segments(None) == ""


def test_the_search_page_reads_the_users_spaces_once(alice, alice_client, runbook):
    """The page's space choice and the header's switcher share one read of the spaces."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        html = get(alice_client, "/search", {"q": "failover", "mode": "lexical"})
    reads = [q["sql"] for q in queries.captured_queries if 'FROM "spaces_space"' in q["sql"]]
    assert len(reads) == 1, reads
    assert "Database runbook" in html and 'name="space"' in html
