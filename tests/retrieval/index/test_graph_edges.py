"""Edges derived from head versions: links, mentions, containment,
annotations, their basis, and leaving the graph with the version."""

from __future__ import annotations

import pytest

from externals.annotations import annotation_create
from notes import services
from notes.models import Document
from retrieval.eligibility import audience_for
from retrieval.index.edges import current_generation, derive_edges, edge_signature
from retrieval.models import Edge
from retrieval.search.graph_read import visible_edges
from spaces import services as space_services
from spaces.models import Role
from tests import factories

pytestmark = pytest.mark.django_db


def edges_of(document: Document, **filters) -> list[Edge]:
    return list(Edge.objects.filter(origin=document, **filters).order_by("start", "id"))


def test_wiki_link_resolves_by_title_with_its_span_and_passage(alice):
    target = factories.note(alice, "Backup Policy", "Snapshots are kept for 35 days.")
    body = "Restore from backups per [[backup  policy|the policy]] before noon."
    source = factories.note(alice, "Restore runbook", body)
    [edge] = edges_of(source, kind=Edge.Kind.LINKS_TO)
    assert edge.to_document_id == target.pk
    assert edge.resolution == Edge.Resolution.RESOLVED
    assert body[edge.start : edge.end] == "[[backup  policy|the policy]]"
    assert edge.label == "the policy"
    assert edge.from_version_id == source.head_id
    assert edge.passage.text.find("[[backup") >= 0
    assert (edge.rule, edge.rule_version) == ("wiki-link", "1")


def test_missing_and_ambiguous_links_are_kept_not_guessed(alice, bob):
    factories.note(alice, "Pager", "one")
    shared = space_services.space_create(by=alice, name="Ops")
    services.note_create(owner=alice, title="Pager", body="two", space=shared)
    source = factories.note(alice, "Index", "See [[Pager]] and [[Nowhere Page]].")
    by_target = {e.target: e for e in edges_of(source, kind=Edge.Kind.LINKS_TO)}
    # Two "Pager" notes, one in the linking note's own space: that one wins.
    assert by_target["Pager"].resolution == Edge.Resolution.RESOLVED
    assert by_target["Nowhere Page"].resolution == Edge.Resolution.MISSING
    assert by_target["Nowhere Page"].to_document_id is None
    in_ops = services.note_create(owner=alice, title="Ops index", body="[[Pager]]", space=shared)
    [edge] = edges_of(in_ops)
    assert edge.resolution == Edge.Resolution.RESOLVED
    third = space_services.space_create(by=alice, name="Third")
    lone = services.note_create(owner=alice, title="Elsewhere", body="[[Pager]]", space=third)
    [edge] = edges_of(lone)
    assert edge.resolution == Edge.Resolution.AMBIGUOUS
    assert len(edge.basis["candidates"]) == 2


def test_a_link_resolves_only_among_what_the_author_may_see(alice, bob):
    factories.note(bob, "Secret Plan", "bob's")
    source = factories.note(alice, "Mine", "[[Secret Plan]]")
    [edge] = edges_of(source)
    assert edge.resolution == Edge.Resolution.MISSING


def test_creating_the_target_later_resolves_the_link_and_deleting_it_unresolves(alice):
    source = factories.note(alice, "Runbook", "Follow [[Incident Process]] first.")
    assert edges_of(source)[0].resolution == Edge.Resolution.MISSING
    target = factories.note(alice, "Incident Process", "Page the on-call.")
    assert edges_of(source)[0].to_document_id == target.pk
    services.note_delete(document=target, user=alice)
    assert edges_of(source)[0].resolution == Edge.Resolution.MISSING


def test_new_head_replaces_edges_and_old_version_leaves_the_graph(alice):
    factories.note(alice, "Alpha Service", "a")
    factories.note(alice, "Beta Service", "b")
    source = factories.note(alice, "Map", "[[Alpha Service]]")
    generation = current_generation()
    services.note_update(
        document=source,
        user=alice,
        base_version_id=source.head_id,
        title="Map",
        body="[[Beta Service]]",
    )
    source.refresh_from_db()
    [edge] = edges_of(source)
    assert edge.target == "Beta Service" and edge.from_version_id == source.head_id
    assert current_generation() > generation


def test_markdown_links_to_lode_pages_and_relative_imports(alice):
    target = factories.note(alice, "Target", "t")
    body = f"See [the target](/notes/{target.pk}) and [bad](/notes/999999999)."
    source = factories.note(alice, "Source", body)
    edges = edges_of(source, kind=Edge.Kind.LINKS_TO)
    assert [(e.to_document_id, e.resolution) for e in edges] == [
        (target.pk, Edge.Resolution.RESOLVED),
        (None, Edge.Resolution.MISSING),
    ]
    a = services.note_create(
        owner=alice,
        title="A",
        body="[b](../teams/b.md)",
        external_key="svc/a.md",
        source_name="corp",
    )
    assert edges_of(a)[0].resolution == Edge.Resolution.MISSING
    b = services.note_create(
        owner=alice, title="B", body="b", external_key="teams/b.md", source_name="corp"
    )
    assert edges_of(a)[0].to_document_id == b.pk


def test_links_in_code_are_not_links_and_images_are_not(alice):
    factories.note(alice, "Real Target", "x")
    body = "```\n[[Real Target]]\n```\nInline `[[Real Target]]` and ![img](/notes/1)."
    source = factories.note(alice, "Code", body)
    assert edges_of(source, kind=Edge.Kind.LINKS_TO) == []


def test_unlinked_mentions_are_inferred_edges(alice):
    target = factories.note(alice, "Backup Policy", "35 days.")
    source = factories.note(alice, "Ops", "Check the backup policy before restoring.")
    [edge] = edges_of(source, kind=Edge.Kind.MENTIONS)
    assert edge.to_document_id == target.pk and edge.inferred
    assert source.head.body[edge.start : edge.end] == "backup policy"
    later = factories.note(alice, "Disaster Recovery Plan", "d")
    older = factories.note(alice, "Notes", "the disaster recovery plan is old")
    assert edges_of(older, kind=Edge.Kind.MENTIONS)[0].to_document_id == later.pk
    # Created after the mention was written: the save scans others' text for its title.
    early = factories.note(alice, "Early", "we need a capacity planning guide")
    guide = factories.note(alice, "Capacity Planning Guide", "g")
    assert edges_of(early, kind=Edge.Kind.MENTIONS)[0].to_document_id == guide.pk


def test_contains_and_annotates(alice):
    source = factories.make_source(alice)
    external = factories.make_source_external(source, path="docs/guide.md")
    [contains] = Edge.objects.filter(kind=Edge.Kind.CONTAINS)
    assert contains.from_source_id == source.pk and contains.to_document_id == external.pk
    annotation = annotation_create(
        owner=alice,
        version=external.head,
        start=0,
        end=6,
        quote=external.head.body[0:6],
        text="why",
    )
    [annotates] = Edge.objects.filter(kind=Edge.Kind.ANNOTATES)
    assert annotates.from_document_id == annotation.note_document_id
    assert annotates.to_version_id == external.head_id


def test_eligibility_applies_to_both_ends(alice, bob):
    ops = space_services.space_create(by=alice, name="Ops")
    space_services.member_add(by=alice, space=ops, username="bob", role=Role.VIEWER)
    private = factories.note(alice, "Private Target", "p")
    shared = services.note_create(owner=alice, title="Shared", body="[[Private Target]]", space=ops)
    assert edges_of(shared)[0].to_document_id == private.pk
    assert visible_edges(audience_for(alice.pk)).filter(origin=shared).count() == 1
    assert visible_edges(audience_for(bob.pk)).filter(origin=shared).count() == 0


def test_derivation_is_deterministic(alice):
    factories.note(alice, "Gamma", "g")
    source = factories.note(alice, "Delta", "[[Gamma]] and the Gamma")
    stored = sorted(edge_signature(e) for e in edges_of(source))
    assert sorted(edge_signature(e) for e in derive_edges(source)) == stored


def test_links_between_mirrored_pages_and_folder_files(alice):
    web = factories.make_source(alice, "Site", kind="url", location="https://docs.example.org/")
    first = factories.make_source_external(
        web,
        path="https://docs.example.org/guide/a.html",
        title="Page A",
        bodies=("Read [the setup](/guide/b.html#top) and [elsewhere](https://other.example/).\n",),
    )
    [edge] = edges_of(first, kind=Edge.Kind.LINKS_TO)
    assert edge.resolution == Edge.Resolution.MISSING  # B is not mirrored yet
    second = factories.make_source_external(
        web, path="https://docs.example.org/guide/b.html", title="Page B", bodies=("B.\n",)
    )
    [edge] = edges_of(first, kind=Edge.Kind.LINKS_TO)
    assert edge.to_document_id == second.pk
    # A note linking to the mirrored URL links to the external.
    note = factories.note(alice, "Reading list", "[B](https://docs.example.org/guide/b.html)")
    assert edges_of(note, kind=Edge.Kind.LINKS_TO)[0].to_document_id == second.pk

    folder = factories.make_source(alice, "Handbook")
    intro = factories.make_source_external(
        folder, path="docs/intro.md", title="Intro", bodies=("See [setup](setup.md).\n",)
    )
    setup = factories.make_source_external(
        folder, path="docs/setup.md", title="Setup", bodies=("Back to [intro](/docs/intro.md)\n",)
    )
    assert edges_of(intro, kind=Edge.Kind.LINKS_TO)[0].to_document_id == setup.pk
    assert edges_of(setup, kind=Edge.Kind.LINKS_TO)[0].to_document_id == intro.pk


def test_html_extraction_keeps_links_for_the_graph():
    from externals.extract import extract_html

    page = (
        b"<html><head><title>T</title></head><body><article><h1>Guide</h1><p>Read the "
        b'<a href="/docs/setup.html">setup page</a> before anything else, because this '
        b"paragraph is long enough to be the main text of the page for the extractor.</p>"
        b"<p>A second paragraph with enough words to be kept as main content too.</p>"
        b"</article></body></html>"
    )
    extracted = extract_html(page)
    assert "[setup page](/docs/setup.html)" in extracted.text
    assert extracted.extractor_version.endswith("+markdown-links")


def test_build_command_derives_edges_once(alice):
    from django.core.management import call_command

    from retrieval.index.edges import build_all_edges

    factories.note(alice, "Target Note", "t")
    source = factories.note(alice, "Linker", "[[Target Note]]")
    Edge.objects.all().delete()
    assert build_all_edges(only_if_never_built=True) is None  # saves built generations already
    call_command("lode_graph", "build")
    assert [e.target for e in edges_of(source)] == ["Target Note"]


def test_an_edge_from_a_version_that_is_no_longer_head_is_not_visible(alice):
    factories.note(alice, "Target Note", "t")
    source = factories.note(alice, "Linker", "[[Target Note]]")
    old_head = source.head_id
    services.note_update(
        document=source, user=alice, base_version_id=old_head, title="Linker", body="none"
    )
    # Drift: an edge of the old version left behind (health would report it).
    Edge.objects.create(
        origin=source,
        kind=Edge.Kind.LINKS_TO,
        from_document=source,
        from_version_id=old_head,
        target="Target Note",
        rule="wiki-link",
        rule_version="1",
    )
    assert not visible_edges(audience_for(alice.pk)).filter(origin=source).exists()


def test_bulk_import_derives_the_same_edges_as_one_by_one(alice):
    """30 notes in one `notes_import` take the batch path (one title index for all); their
    edges equal what deriving each alone gives."""
    notes = [
        services.NoteImport(
            external_key=f"kb/n{i}.md",
            title=f"Service Number {i}",
            body=(
                f"Depends on [[Service Number {(i + 1) % 30}]] and the service number"
                f" {(i + 2) % 30}."
                f" Owned by [team](../people/t{i}.md) and Kubernetes."
            ),
        )
        for i in range(30)
    ]
    notes.append(services.NoteImport(external_key="kb/k.md", title="Kubernetes", body="k8s"))
    services.notes_import(owner=alice, notes=notes, source_name="kb")
    documents = list(Document.objects.filter(source_name="kb"))
    stored = sorted(map(repr, map(edge_signature, Edge.objects.filter(origin__in=documents))))
    derived = sorted(repr(edge_signature(e)) for d in documents for e in derive_edges(d))
    # Each: its wiki link, its missing Markdown link, mentions of the next-but-one and Kubernetes.
    assert len(stored) == 30 * 4
    assert stored == derived
    kinds = Edge.objects.filter(origin__in=documents).values_list("kind", flat=True)
    assert {*kinds} == {Edge.Kind.LINKS_TO, Edge.Kind.MENTIONS}
    assert Edge.objects.filter(kind=Edge.Kind.MENTIONS, target_key="kubernetes").count() == 30


def test_an_import_resolves_links_written_by_earlier_batches(alice):
    first = [
        services.NoteImport(external_key=f"a{i}.md", title=f"Early {i}", body=f"[[Late {i}]]")
        for i in range(25)
    ]
    services.notes_import(owner=alice, notes=first, source_name="kb")
    assert Edge.objects.filter(resolution=Edge.Resolution.MISSING).count() == 25
    later = [
        services.NoteImport(external_key=f"b{i}.md", title=f"Late {i}", body="x") for i in range(25)
    ]
    services.notes_import(owner=alice, notes=later, source_name="kb")
    assert not Edge.objects.filter(resolution=Edge.Resolution.MISSING).exists()
    assert Edge.objects.filter(kind=Edge.Kind.LINKS_TO).count() == 25


def test_renaming_a_note_moves_the_links_that_name_it(alice):
    target = factories.note(alice, "Old Name", "text")
    old_link = factories.note(alice, "Uses old", "See [[Old Name]].")
    new_link = factories.note(alice, "Uses new", "See [[New Name]].")
    assert edges_of(old_link)[0].to_document_id == target.pk
    assert edges_of(new_link)[0].resolution == Edge.Resolution.MISSING
    services.note_update(
        document=target, user=alice, base_version_id=target.head_id, title="New Name", body="t"
    )
    assert edges_of(old_link)[0].resolution == Edge.Resolution.MISSING
    assert edges_of(new_link)[0].to_document_id == target.pk
    # An edit of the text alone leaves other notes' edges as they are (and right).
    target.refresh_from_db()
    before = [edge_signature(e) for e in Edge.objects.exclude(origin=target).order_by("id")]
    services.note_update(
        document=target, user=alice, base_version_id=target.head_id, title="New Name", body="u"
    )
    after = [edge_signature(e) for e in Edge.objects.exclude(origin=target).order_by("id")]
    assert after == before
    assert sorted(map(repr, after)) == sorted(
        repr(edge_signature(e)) for d in (old_link, new_link) for e in derive_edges(d)
    )
