"""Backlinks, pictures and `[[` completion on note and external pages:
what each section shows and to whom, "Link it", the completion endpoint and the SVG picture.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from notes import services
from notes.models import Document, Version
from retrieval.eligibility import audience_for
from retrieval.models import Edge
from retrieval.search import backlinks
from retrieval.web.graph_picture import PictureEdge, PictureNode, graph_svg
from spaces import services as space_services
from spaces.models import Role
from tests import factories
from tests.factories import assert_no_executable_markup

pytestmark = pytest.mark.django_db


def section(page: str, element_id: str) -> str:
    """The HTML of `<section id=element_id>` (up to its closing tag; sections here do not
    nest inside each other's lists)."""
    start = page.index(f'id="{element_id}"')
    return page[start : page.index("</section>", start)]


def titles_in(html: str) -> list[str]:
    """The document titles a list of rows names (`.graph-doc` text)."""
    return [re.sub(r"<[^>]+>", "", m) for m in re.findall(r'class="graph-doc"[^>]*>(.*?)</', html)]


@pytest.fixture
def world(alice, bob):
    """alice and bob share the space Ops (bob a viewer); alice writes a private note that
    links to a shared one, and shared notes that link, mention and fail to link."""
    ops = space_services.space_create(by=alice, name="Ops")
    space_services.member_add(by=alice, space=ops, username="bob", role=Role.VIEWER)

    def shared(title: str, body: str) -> Document:
        return services.note_create(owner=alice, title=title, body=body, space=ops)

    target = shared("Backup Policy", "Snapshots are kept for 35 days.")
    linker = shared(
        "Restore runbook",
        "Start here. Restore from backups per [[Backup Policy|the policy]] before noon. Done.",
    )
    mentioner = shared("Weekly review", "We read the backup policy again on Monday.")
    private = factories.note(alice, "Alice diary", "Private: see [[Backup Policy]] too.")
    unresolved = shared("Index", "See [[Nowhere Page]] and [[Backup Policy]].")
    return {
        "ops": ops,
        "target": target,
        "linker": linker,
        "mentioner": mentioner,
        "private": private,
        "unresolved": unresolved,
    }


def page_of(client: Client, document: Document, **params) -> str:
    response = client.get(reverse("notes:detail", args=[document.pk]), params)
    assert response.status_code == 200
    return response.content.decode()


# --- the sections ----------------------------------------------------------------------------


def test_sections_show_the_right_rows_for_alice(alice_client, world):
    page = page_of(alice_client, world["target"])
    linked_from = section(page, "linked-from")
    assert sorted(titles_in(linked_from)) == ["Alice diary", "Index", "Restore runbook"]
    # The linking sentence, the link itself highlighted, escaped text (no raw markup).
    assert "<mark>[[Backup Policy|the policy]]</mark>" in linked_from
    assert "Restore from backups per " in linked_from
    mentions = section(page, "mentions")
    assert titles_in(mentions) == ["Weekly review"]
    assert "<mark>backup policy</mark>" in mentions
    assert "inferred" in mentions
    assert "Link it" in mentions  # alice is admin of Ops

    index_page = page_of(alice_client, world["unresolved"])
    assert titles_in(section(index_page, "links-to")) == ["Backup Policy"]
    unresolved = section(index_page, "unresolved")
    assert "Nowhere Page" in unresolved
    assert reverse("notes:create") + "?title=Nowhere+Page" in unresolved


def test_bob_never_sees_a_note_of_a_space_he_is_not_in(bob, bob_client, world):
    page = page_of(bob_client, world["target"])
    linked_from = section(page, "linked-from")
    assert sorted(titles_in(linked_from)) == ["Index", "Restore runbook"]
    assert "Alice diary" not in page and "Private:" not in page
    # A viewer reads the mentions but gets no "Link it".
    mentions = section(page, "mentions")
    assert titles_in(mentions) == ["Weekly review"]
    assert "Link it" not in mentions
    # The picture neither.
    hood = backlinks.neighbourhood(audience_for(bob.pk), world["target"], hops=2)
    assert world["private"].pk not in {node.id for node in hood.nodes}


def test_ambiguous_links_list_only_candidates_the_reader_may_see(alice, bob, alice_client):
    ops = space_services.space_create(by=alice, name="Ops")
    space_services.member_add(by=alice, space=ops, username="bob", role=Role.VIEWER)
    third = space_services.space_create(by=alice, name="Third")
    factories.note(alice, "Pager", "alice's own pager note")
    services.note_create(owner=alice, title="Pager", body="the ops one", space=ops)
    lone = services.note_create(owner=alice, title="Elsewhere", body="[[Pager]]", space=third)
    space_services.member_add(by=alice, space=third, username="bob", role=Role.VIEWER)
    [edge] = Edge.objects.filter(origin=lone)
    assert edge.resolution == Edge.Resolution.AMBIGUOUS
    alice_rows = backlinks.document_links(audience_for(alice.pk), lone).unresolved.rows
    bob_rows = backlinks.document_links(audience_for(bob.pk), lone).unresolved.rows
    assert len(alice_rows[0].candidates) == 2
    assert [c.title for c in bob_rows[0].candidates] == ["Pager"]
    assert (
        bob_rows[0]
        .candidates[0]
        .url.endswith(f"/notes/{Document.objects.get(title='Pager', space=ops).pk}")
    )


def test_lists_are_bounded_with_their_counts(alice):
    target = factories.note(alice, "Hub Page", "the hub")
    for i in range(backlinks.MAX_ROWS + 3):
        factories.note(alice, f"Spoke {i:03d}", "links to [[Hub Page]]")
    found = backlinks.document_links(audience_for(alice.pk), target)
    assert len(found.linked_from.rows) == backlinks.MAX_ROWS
    assert found.linked_from.total == backlinks.MAX_ROWS + 3
    assert found.linked_from.hidden == 3


def test_external_page_shows_who_links_to_it(alice, alice_client):
    source = factories.make_source(alice)
    external = factories.make_source_external(source, path="guide.md", title="Cert Guide")
    factories.note(alice, "Cert runbook", "Follow the [[Cert Guide]] every quarter.")
    response = alice_client.get(reverse("externals:external", args=[external.pk]))
    page = response.content.decode()
    linked_from = section(page, "linked-from")
    assert "Cert runbook" in linked_from and "Docs" in linked_from  # the note and its source
    assert "contains" in linked_from


# --- the excerpt ------------------------------------------------------------------------------


def test_excerpt_is_the_sentence_with_the_span_highlighted():
    text = "First sentence here. The link [[X]] sits in this one. Last one."
    start = text.index("[[X]]")
    found = backlinks.excerpt(text, start, start + 5)
    assert "".join(s.text for s in found.segments) == "The link [[X]] sits in this one."
    assert [s.text for s in found.segments if s.highlighted] == ["[[X]]"]
    assert found.cut_before and found.cut_after
    assert backlinks.excerpt(text, 10, 999) is None  # a stale span marks nothing


def test_linking_text_is_escaped_on_the_page(alice, alice_client):
    target = factories.note(alice, "Safe Target", "t")
    factories.note(alice, "Hostile", "<script>alert(1)</script> see [[Safe Target]] <b>x</b>")
    page = page_of(alice_client, target)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section(page, "linked-from")
    assert_no_executable_markup(
        page.replace('<svg xmlns="http://www.w3.org/2000/svg" class="graph-picture"', "<g")
    )


# --- Link it ----------------------------------------------------------------------------------


def link_form(world, **overrides) -> dict[str, object]:
    [row] = [
        r
        for r in backlinks.document_links(
            audience_for(world["target"].owner_id), world["target"], user=world["target"].owner
        ).mentions.rows
        if r.link_it
    ]
    form = {
        "base_version": row.link_it.base_version_id,
        "start": row.link_it.start,
        "end": row.link_it.end,
        "target": row.link_it.target_id,
        "next": reverse("notes:detail", args=[world["target"].pk]),
    }
    form.update(overrides)
    return form


def link_url(world) -> str:
    return reverse("notes:link-mention", args=[world["mentioner"].pk])


def test_link_it_writes_a_new_version_with_the_wiki_link(alice_client, world):
    mentioner = world["mentioner"]
    before = mentioner.head
    response = alice_client.post(link_url(world), link_form(world), follow=True)
    assert response.status_code == 200
    mentioner.refresh_from_db()
    assert mentioner.head.number == before.number + 1
    assert mentioner.head.body == "We read the [[Backup Policy|backup policy]] again on Monday."
    assert "Linked “Backup Policy”" in response.content.decode()
    # Now a declared link, no longer a mention.
    page = page_of(alice_client, world["target"])
    assert "Weekly review" in section(page, "linked-from")
    assert "Weekly review" not in section(page, "mentions")


def test_link_it_keeps_the_title_alone_when_the_text_is_the_title(alice):
    target = factories.note(alice, "Kubernetes", "k8s")
    note = factories.note(alice, "Cluster notes", "We run Kubernetes here.")
    [edge] = Edge.objects.filter(origin=note, kind=Edge.Kind.MENTIONS)
    version = backlinks.link_mention(
        user=alice,
        note=note,
        base_version_id=note.head_id,
        start=edge.start,
        end=edge.end,
        target=target,
    )
    assert version.body == "We run [[Kubernetes]] here."


def test_link_it_refuses_a_viewer(bob_client, world):
    before = factories.note_state(world["mentioner"])
    response = bob_client.post(link_url(world), link_form(world))
    assert response.status_code == 403
    assert factories.note_state(world["mentioner"]) == before


def test_link_it_refuses_a_stale_span(alice_client, world):
    before = factories.note_state(world["mentioner"])
    form = link_form(world)
    form["start"] += 1  # "ackup policy " is not the title
    form["end"] += 1
    response = alice_client.post(link_url(world), form, follow=True)
    page = response.content.decode()
    assert "the mention is no longer where it was" in page
    assert "Reload to see the current mentions." in page
    assert "characters" not in page.split('<section class="graph-links"')[0]
    assert factories.note_state(world["mentioner"]) == before


def test_link_it_after_a_concurrent_edit_is_the_usual_conflict(alice, alice_client, world):
    form = link_form(world)
    mentioner = world["mentioner"]
    services.note_update(
        document=mentioner,
        user=alice,
        base_version_id=mentioner.head_id,
        title=mentioner.title,
        body="Someone else rewrote this: the backup policy is fine.",
    )
    before = factories.note_state(mentioner)
    response = alice_client.post(link_url(world), form, follow=True)
    page = response.content.decode()
    assert "Nothing was linked" in page and "after you started editing" in page
    assert factories.note_state(mentioner) == before
    assert Version.objects.filter(document=mentioner).count() == 2  # nothing lost or added


def test_link_it_enforces_csrf(alice, world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    before = factories.note_state(world["mentioner"])
    response = client.post(link_url(world), link_form(world))
    assert response.status_code == 403
    assert factories.note_state(world["mentioner"]) == before


def test_link_it_hides_notes_of_other_spaces(bob, bob_client, world):
    # bob posts against alice's private note: it answers like a link to nothing.
    response = bob_client.post(
        reverse("notes:link-mention", args=[world["private"].pk]), link_form(world)
    )
    assert response.status_code == 404


# --- [[ completion ----------------------------------------------------------------------------


def test_completion_offers_only_visible_titles(alice, bob, bob_client, world):
    factories.note(bob, "Backup Tapes", "bob's own")
    factories.note(alice, "Backup Secrets", "alice private")
    response = bob_client.get(reverse("notes:complete"), {"q": "back"})
    assert response.status_code == 200
    page = response.content.decode()
    found = re.findall(r'data-wiki-title="([^"]*)"', page)
    # Prefix matches first (by title), then "contains" matches.
    assert found[:2] == ["Backup Policy", "Backup Tapes"]
    assert "Backup Secrets" not in page
    assert "Restore runbook" not in found  # its title does not hold "back"
    contains = re.findall(
        r'data-wiki-title="([^"]*)"',
        bob_client.get(reverse("notes:complete"), {"q": "policy"}).content.decode(),
    )
    assert contains == ["Backup Policy"]


def test_completion_is_bounded_and_needs_a_login(alice, alice_client):
    for i in range(15):
        factories.note(alice, f"Runbook {i:02d}", "r")
    found = re.findall(
        r'data-wiki-title="([^"]*)"',
        alice_client.get(reverse("notes:complete"), {"q": "run"}).content.decode(),
    )
    assert found == [f"Runbook {i:02d}" for i in range(10)]
    anonymous = Client().get(reverse("notes:complete"), {"q": "run"})
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def test_the_editor_offers_completion_and_still_works_without_it(alice_client, world):
    page = alice_client.get(reverse("notes:edit", args=[world["linker"].pk])).content.decode()
    assert "data-wiki-complete" in page and "wiki_complete" in page
    assert '<textarea name="body"' in page


# --- the picture ------------------------------------------------------------------------------


class _Svg(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.paths: list[dict[str, str]] = []
        self.links: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attributes = {k: v or "" for k, v in attrs}
        self.tags.add(tag)
        if tag == "path" and "gp-edge" in attributes.get("class", ""):
            self.paths.append(attributes)
        if tag == "a":
            self.links.append(attributes.get("href", ""))

    handle_startendtag = handle_starttag


def parse_svg(markup: str) -> _Svg:
    parser = _Svg()
    parser.feed(markup)
    return parser


def test_svg_escapes_titles_and_urls():
    nodes = [
        PictureNode(1, "<script>alert(1)</script>", '/notes/1"onload="x', "note", "note"),
        PictureNode(2, 'Quote " & <b>', "/notes/2", "external", "external"),
    ]
    markup = graph_svg(nodes, [PictureEdge(1, 2, "links_to", False)], focus=1)
    assert "<script>" not in markup and "<b>" not in markup
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markup
    assert '"onload="' not in markup and "&quot;onload=&quot;" in markup
    svg = parse_svg(markup)
    assert "script" not in svg.tags
    assert svg.links == ['/notes/1"onload="x', "/notes/2"]  # one attribute each, as given


def test_svg_dashes_inferred_edges_and_has_a_legend():
    nodes = [PictureNode(i, f"Doc {i}", f"/notes/{i}", "note", "note") for i in (1, 2, 3)]
    edges = [PictureEdge(1, 2, "links_to", False), PictureEdge(3, 1, "mentions", True)]
    svg = parse_svg(graph_svg(nodes, edges, focus=1))
    by_kind = {p["class"].split()[1]: p for p in svg.paths}
    assert "stroke-dasharray" in by_kind["gp-kind-mentions"]
    assert "stroke-dasharray" not in by_kind["gp-kind-links_to"]
    assert by_kind["gp-kind-mentions"]["stroke"] != by_kind["gp-kind-links_to"]["stroke"]
    assert all(p["marker-end"].startswith("url(#") for p in svg.paths)
    markup = graph_svg(nodes, edges, focus=1)
    assert "links to" in markup and "mentions (inferred)" in markup
    assert 'viewBox="0 0 640 420"' in markup


def test_svg_layout_is_deterministic_with_the_focus_at_the_centre():
    nodes = [PictureNode(i, f"Doc {i}", f"/notes/{i}", "note", "note") for i in range(1, 8)]
    edges = [PictureEdge(1, i, "links_to", False) for i in range(2, 6)] + [
        PictureEdge(5, 6, "links_to", False),
        PictureEdge(6, 7, "related", True),
    ]
    first = graph_svg(nodes, edges, focus=1)
    assert graph_svg(list(reversed(nodes)), list(reversed(edges)), focus=1) == first
    centre = re.search(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="13"', first)
    assert centre and float(centre.group(1)) == 320.0


def test_neighbourhood_one_and_two_hops(alice, alice_client):
    a = factories.note(alice, "Alpha Node", "to [[Beta Node]]")
    b = factories.note(alice, "Beta Node", "to [[Gamma Node]]")
    c = factories.note(alice, "Gamma Node", "end")
    one = backlinks.neighbourhood(audience_for(alice.pk), a, hops=1)
    two = backlinks.neighbourhood(audience_for(alice.pk), a, hops=2)
    assert {n.id for n in one.nodes} == {a.pk, b.pk}
    assert {n.id for n in two.nodes} == {a.pk, b.pk, c.pk}
    assert [(e.source, e.target) for e in two.edges] == sorted([(a.pk, b.pk), (b.pk, c.pk)])
    page = page_of(alice_client, a, hops="2")
    assert 'class="graph-picture"' in page and "Gamma Node" in section(page, "graph")
    assert 'aria-current="true"' in page


def test_picture_is_bounded(alice):
    hub = factories.note(alice, "Hub Page", "the hub")
    for i in range(40):
        factories.note(alice, f"Spoke {i:03d}", "links to [[Hub Page]]")
    hood = backlinks.neighbourhood(audience_for(alice.pk), hub, hops=2)
    assert len(hood.nodes) == backlinks.MAX_PICTURE_NODES and hood.truncated


def test_unlinked_mentions_leave_out_documents_linked_either_way(alice, alice_client):
    """A note that Backup Policy links to, and that mentions Backup Policy by name, is
    listed once (Links to), not again as an unlinked mention; neither is a related note that
    links here. A related note not linked stays."""
    from retrieval.index import related

    mentioner = services.note_create(
        owner=alice, title="Weekly review", body="We read the backup policy again on Monday."
    )
    target = services.note_create(
        owner=alice, title="Backup Policy", body="Kept 35 days. Discussed in [[Weekly review]]."
    )
    linker = services.note_create(owner=alice, title="Restore runbook", body="[[Backup Policy]]")
    similar = services.note_create(owner=alice, title="Retention notes", body="35 days.")
    mentioner.refresh_from_db()
    # The mention edge exists: the filter, not the derivation, keeps it off the list.
    assert Edge.objects.filter(
        kind=Edge.Kind.MENTIONS, from_document=mentioner, to_document=target
    ).exists()
    for other in (linker, similar):
        other.refresh_from_db()
        assert related._write(other.pk, other.head_id, [(target.pk, 0.91)], {})
    links = backlinks.document_links(audience_for(alice.pk), target)
    assert [r.other_id for r in links.links_to.rows] == [mentioner.pk]
    assert [r.other_id for r in links.linked_from.rows] == [linker.pk]
    assert [r.other_id for r in links.mentions.rows] == [similar.pk]
    assert links.mentions.total == 1
    page = alice_client.get(reverse("notes:detail", kwargs={"note_id": target.pk})).content
    assert titles_in(section(page.decode(), "mentions")) == ["Retention notes"]


def test_svg_labels_wrap_cut_and_keep_the_whole_title():
    long = "Ops meeting notes for the quarterly planning of the platform team"
    nodes = [PictureNode(1, "Hub", "/n/1", "note", "Your note")] + [
        PictureNode(i, f"{long} {i}", f"/n/{i}", "note", "Your note") for i in range(2, 9)
    ]
    edges = [PictureEdge(i, 1, "links_to", False) for i in range(2, 9)]
    for size in ({"width": 640, "height": 420}, {"width": 380, "height": 460}):
        markup = graph_svg(nodes, edges, focus=1, **size)
        labels = re.findall(r'class="gp-label">(.*?)</text>', markup)
        fulls = re.findall(r'class="gp-full">(.*?)</text>', markup)
        assert len(labels) == len(fulls) == 8
        assert f"{long} 5" in fulls
        for label in labels[1:]:
            lines = re.findall(r"<tspan[^>]*>(.*?)</tspan>", label)
            assert 1 <= len(lines) <= 2
            assert lines[-1].endswith("…")  # too long for two lines: cut, never clipped
        # Every label starts inside the picture.
        for y in re.findall(r'<text x="[\d.]+" y="(-?[\d.]+)" text-anchor', markup):
            assert float(y) >= 14 - 0.01  # LABEL_SIZE: the first line's top is inside


def test_graph_query_page_in_plain_words_with_the_details_under_advanced(alice, alice_client):
    for i in range(3):
        services.note_create(owner=alice, title=f"Filler {i}", body="filler")
    services.note_create(owner=alice, title="Deploy runbook", body="Blue-green.")
    services.note_create(owner=alice, title="Incident response", body="Page on-call.")
    backup = services.note_create(
        owner=alice,
        title="Backup runbook",
        body="Read [[Deploy runbook]] and [[Incident response]].",
    )
    page = alice_client.get(
        reverse("graph-query"),
        {"lookup": ["Deploy runbook", "Incident response"], "op": "path"},
    ).content.decode()
    result = page[page.index('id="gq-result-heading"') :]
    everyday, advanced = result.split('<details class="advanced gq-advanced">')
    assert "A path of 2 steps" in everyday
    assert "is linked from" in everyday and "links to →" in everyday
    assert "against the link’s direction" in everyday
    assert f"“Backup runbook”, version {backup.head.number}" in everyday
    for detail in ("generation", "code points", "wiki-link v", "characters"):
        assert detail not in everyday, detail
    assert "Graph generation" in advanced and "wiki-link v1" in advanced
    assert f"of version {backup.head.number}<" in advanced
    assert f"of version {backup.head_id}" not in advanced
    assert backup.head_id != backup.head.number
    # Evidence links lead back to this query.
    assert "?from=graph&amp;back=/graph/query%3Flookup%3DDeploy%2Brunbook%26" in everyday
