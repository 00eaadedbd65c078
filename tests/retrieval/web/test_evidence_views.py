"""The evidence page's view: the quoted span marked inside its passage, and the link back to
where the reader came from — a search, a stored answer or a graph query — built from a kind
and an id, or a same-site graph query path, never an arbitrary URL."""

from __future__ import annotations

import pytest
from django.urls import reverse

from notes import services
from retrieval.links import evidence_url, permalink_path
from retrieval.models import Passage
from retrieval.web.evidence_views import quoted_span

pytestmark = pytest.mark.django_db

BODY = (
    "# Backup runbook\n\n"
    "Before a deploy read the deploy notes. Snapshots are kept for 35 days on the cold tier. "
    "Restores take an hour.\n"
)
QUOTE = "Snapshots are kept for 35 days on the cold tier."


@pytest.fixture
def passage(alice) -> Passage:
    note = services.note_create(owner=alice, title="Backup runbook", body=BODY)
    return Passage.objects.select_related("version").get(
        document=note, is_head=True, text__contains="35 days"
    )


def back_link(page: str) -> str:
    """The first link of the page's article: the way back."""
    start = page.index('<article class="evidence"')
    anchor = page.index("<a ", start)
    return page[anchor : page.index("</a>", anchor) + 4]


def test_the_quoted_span_is_marked_not_the_whole_passage(alice_client, passage):
    start = BODY.index(QUOTE)
    span = f"{start}-{start + len(QUOTE)}"
    page = alice_client.get(evidence_url(passage), {"span": span}).content.decode()
    # Once in the passage, once in its context; nothing else of the passage marked.
    assert page.count(f"<mark>{QUOTE}</mark>") == 2
    assert page.count("<mark>") == 2
    assert "the quoted words marked" in page
    # Without a span the context marks the passage, the passage block marks nothing.
    plain = alice_client.get(evidence_url(passage)).content.decode()
    assert plain.count("<mark>") == 1 and f"<mark>{QUOTE}</mark>" not in plain


@pytest.mark.parametrize(
    "span",
    ["99999-100000", "5-2", "abc", "12-", "-3-9", "1" * 30 + "-2"],
)
def test_a_span_outside_the_passage_or_malformed_marks_the_passage(alice_client, passage, span):
    page = alice_client.get(evidence_url(passage), {"span": span})
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count("<mark>") == 1
    assert f"<mark>{passage.text}</mark>" in html


def test_a_span_reaching_past_the_passage_is_cut_to_it(alice_client, passage):
    start = BODY.index(QUOTE)
    page = alice_client.get(
        evidence_url(passage), {"span": f"{start}-{len(BODY) + 50}"}
    ).content.decode()
    assert page.count("<mark>") == 2
    assert "<mark>" + passage.text[start - passage.start :] + "</mark>" in page


def test_quoted_span_parses_only_two_offsets():
    assert quoted_span("3-9") == (3, 9)
    assert quoted_span(" 3-9 ") == (3, 9)
    for raw in ("", "9-3", "3-3", "3", "a-b", "3-9-1", "-1-4"):
        assert quoted_span(raw) is None, raw


def test_back_link_names_where_the_reader_came_from(alice_client, passage):
    url = evidence_url(passage)
    answer = back_link(alice_client.get(url, {"from": "answer", "answer": "42"}).content.decode())
    assert f'href="{permalink_path(42)}"' in answer and "back to the answer" in answer
    search = back_link(
        alice_client.get(url, {"q": "snapshots", "mode": "lexical"}).content.decode()
    )
    assert 'href="/search?q=snapshots&amp;mode=lexical' in search and "back to results" in search
    graph = reverse("graph-query") + "?lookup=Backup+runbook&op=neighbours"
    to_graph = back_link(alice_client.get(url, {"from": "graph", "back": graph}).content.decode())
    assert "back to the graph query" in to_graph
    assert 'href="/graph/query?lookup=Backup+runbook&amp;op=neighbours"' in to_graph
    nothing = back_link(alice_client.get(url).content.decode())
    assert f'href="{reverse("retrieval:search")}"' in nothing and "← search" in nothing


@pytest.mark.parametrize(
    "params",
    [
        {"from": "graph", "back": "https://evil.example/graph/query?x=1"},
        {"from": "graph", "back": "//evil.example/graph/query"},
        {"from": "graph", "back": "/\\evil.example/graph/query"},
        {"from": "graph", "back": "javascript:alert(1)//graph/query"},
        {"from": "graph", "back": "/notes/1/"},  # same site, but not a graph query
        {"from": "graph", "back": "/graph/queryx"},
        {"from": "answer", "answer": "https://evil.example/"},
        {"from": "answer", "answer": "0"},
        {"from": "elsewhere", "back": "https://evil.example/"},
    ],
)
def test_back_link_is_never_an_open_redirect(alice_client, passage, params):
    page = alice_client.get(evidence_url(passage), params).content.decode()
    link = back_link(page)
    assert "evil" not in link and "javascript" not in link
    assert f'href="{reverse("retrieval:search")}"' in link and "← search" in link
