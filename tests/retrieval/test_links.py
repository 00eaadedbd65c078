"""retrieval/links.py: one URL helper per kind of thing, each kind of document to its own
pages (an external hit never to the note view), and the one highlight shape."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest
from django.template import Context, Template
from django.urls import resolve

from externals import views as external_views
from notes import views as note_views
from notes.models import Document
from retrieval import links
from retrieval.highlight import Segment, as_segments


@pytest.mark.parametrize(
    ("kind", "document_view", "version_view"),
    [
        ("note", note_views.note_detail, note_views.version_detail),
        ("external", external_views.external_detail, external_views.snapshot_detail),
    ],
)
def test_each_kind_of_document_links_to_its_own_pages(kind, document_view, version_view):
    document = resolve(links.document_url(kind=kind, document_id=7))
    version = resolve(links.version_url(kind=kind, document_id=7, version_id=9))
    assert document.func is document_view and 7 in document.kwargs.values()
    assert version.func is version_view and sorted(version.kwargs.values()) == [7, 9]


def test_an_unknown_kind_is_refused_not_sent_to_the_note_view():
    with pytest.raises(ValueError, match="webpage"):
        links.document_url(kind="webpage", document_id=1)
    with pytest.raises(ValueError, match="webpage"):
        links.version_url(kind="webpage", document_id=1, version_id=2)


def test_search_path_spells_out_every_parameter_and_an_empty_query_is_the_bare_page():
    assert links.search_path(query="  ", mode="hybrid", rerank="off") == "/search"
    path = links.search_path(query='"a b" & c', mode="lexical", rerank="off")
    parts = urlsplit(path)
    assert parts.path == "/search"
    assert parse_qs(parts.query) == {"q": ['"a b" & c'], "mode": ["lexical"], "rerank": ["off"]}


def test_permalink_path_with_and_without_previous():
    assert links.permalink_path(12) == "/ask/12"
    assert links.permalink_path(12, previous=5) == "/ask/12?previous=5"


def test_as_segments_reads_every_stored_shape_into_one():
    expected = [Segment("a ", False), Segment("b", True)]
    assert as_segments([("a ", False), ("b", True)]) == expected
    assert as_segments([{"text": "a ", "highlighted": False}, {"text": "b", "highlighted": 1}]) == (
        expected
    )
    assert as_segments(expected) == expected
    assert as_segments([]) == []


def test_the_template_filters_link_through_the_same_helpers():
    """Templates link documents and stored answers through retrieval/links.py too (the
    `lode_links` filters), never by naming a URL pattern themselves."""
    template = Template(
        "{% load lode_links %}{{ note|document_url }} {{ external|document_url }} "
        "{{ trace_id|answer_url }}"
    )
    note = Document(pk=3, kind=Document.Kind.NOTE)
    external = Document(pk=4, kind=Document.Kind.EXTERNAL)
    rendered = template.render(Context({"note": note, "external": external, "trace_id": 12}))
    assert rendered.split() == [
        links.document_url(kind="note", document_id=3),
        links.document_url(kind="external", document_id=4),
        links.permalink_path(12),
    ]


@pytest.mark.parametrize("script_prefix", ["/", "/lode/"])
def test_links_without_the_resolver_equal_reverse_for_every_value(script_prefix):
    """The per-hit links are joined from a URL reversed once with stand-ins; they must equal
    what `reverse()` gives, under a script prefix too, at the ends of the id range."""
    from django.urls import get_script_prefix, reverse, set_script_prefix

    from lode_site.ids import MAX_ID

    sha = hashlib.sha256(b"x").hexdigest()
    old = get_script_prefix()
    set_script_prefix(script_prefix)
    try:
        for a, b, c in [(1, 2, 3), (7, 7, 7), (MAX_ID, MAX_ID - 1, 10**18), (123456, 9, 88)]:
            assert links.version_url(kind="note", document_id=a, version_id=b) == reverse(
                "notes:version", kwargs={"note_id": a, "version_id": b}
            )
            assert links.version_url(kind="external", document_id=a, version_id=b) == reverse(
                "externals:snapshot", kwargs={"document_id": a, "version_id": b}
            )
            assert links.document_url(kind="note", document_id=c) == reverse(
                "notes:detail", kwargs={"note_id": c}
            )
            passage = SimpleNamespace(
                document_id=a, version_id=b, pk=c, version=SimpleNamespace(sha256=sha)
            )
            assert links.evidence_url(passage) == reverse(
                "evidence",
                kwargs={"document_id": a, "version_id": b, "passage_id": c, "sha256": sha},
            )
        assert links.version_url(kind="note", document_id=1, version_id=2).startswith(script_prefix)
    finally:
        set_script_prefix(old)


def test_values_the_stand_ins_cannot_stand_for_go_through_reverse():
    """An id out of the database's range, or a digest that is not lowercase hex, is reversed
    by Django itself: the same URL, or the same error, as before."""
    from django.urls import NoReverseMatch, reverse

    from lode_site.ids import MAX_ID

    for bad in (0, -1, MAX_ID + 1, 10**20):
        try:
            expected = reverse("notes:version", kwargs={"note_id": bad, "version_id": 1})
        except NoReverseMatch:
            with pytest.raises(NoReverseMatch):
                links.version_url(kind="note", document_id=bad, version_id=1)
        else:
            assert links.version_url(kind="note", document_id=bad, version_id=1) == expected
    odd = SimpleNamespace(document_id=1, version_id=2, pk=3, version=SimpleNamespace(sha256="A B"))
    assert links.evidence_url(odd) == reverse(
        "evidence", kwargs={"document_id": 1, "version_id": 2, "passage_id": 3, "sha256": "A B"}
    )
    assert "A%20B" in links.evidence_url(odd)
