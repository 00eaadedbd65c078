"""Annotations on external snapshots: the pure
re-anchoring, creation checks, migration onto new snapshots, search, and owner scoping."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.test import Client
from django.urls import reverse

from externals.annotations import (
    CONTEXT_CHARS,
    annotation_create,
    annotations_for,
    migrate_annotations,
    reanchor,
)
from externals.models import Annotation
from notes.models import Document, TrustTier, Version
from notes.services import version_create
from retrieval.search.pipeline import search
from tests.factories import EXTERNAL_BODY, EXTERNAL_QUOTE, make_external

BODY = EXTERNAL_BODY
QUOTE = EXTERNAL_QUOTE


def new_snapshot(document: Document, body: str) -> Version:
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
    document.refresh_from_db()
    return version


def annotate(owner, document: Document, quote: str = QUOTE, text: str = "Check the eviction"):
    version = document.head
    start = version.body.index(quote)
    return annotation_create(
        owner=owner, version=version, start=start, end=start + len(quote), quote=quote, text=text
    )


# --- reanchor (pure) ---------------------------------------------------------------------


def test_reanchor_follows_shifted_text():
    old = "alpha beta gamma delta"
    start = old.index("gamma")
    new = "a new first line\n" + old
    assert reanchor(new, "gamma", "beta ", " delta", start) == (
        new.index("gamma"),
        new.index("gamma") + 5,
    )


def test_reanchor_context_disambiguates_a_repeated_quote():
    body = "restart the worker after deploy. Later: restart the worker after backup."
    quote = "restart the worker"
    second = body.rindex(quote)
    # Stored context says "Later: " before and " after backup" after: the second one, even
    # though the old offset (0) is nearer the first.
    assert reanchor(body, quote, "Later: ", " after backup", 0) == (
        second,
        second + len(quote),
    )
    first = body.index(quote)
    assert reanchor(body, quote, "", " after deploy", second) == (first, first + len(quote))


def test_reanchor_ties_go_to_the_nearest_old_position():
    body = "x ab x ab x ab"
    assert reanchor(body, "ab", "", "", 8) == (7, 9)
    assert reanchor(body, "ab", "", "", 0) == (2, 4)


def test_reanchor_orphans_when_the_quote_is_gone():
    assert reanchor("completely rewritten text", "allkeys-lru", "policy ", " on", 10) is None
    assert reanchor("anything", "", "", "", 0) is None


def test_reanchor_counts_code_points_with_astral_characters():
    body = "🦦 otters 🦦 hold 𝔥𝔞𝔫𝔡𝔰 while 🦦 sleeping"
    quote = "𝔥𝔞𝔫𝔡𝔰"
    start, end = reanchor(body, quote, "", "", 0)
    assert body[start:end] == quote
    assert start == 16  # code points, not UTF-16 units (which would be 18)
    assert len(body[:start].encode("utf-16-le")) // 2 == 18
    assert len(quote.encode("utf-16-le")) // 2 == 10 and end - start == 5


def test_reanchor_finds_overlapping_repeats():
    assert reanchor("aaaa", "aa", "a", "a", 0) == (1, 3)


# --- annotation_create -------------------------------------------------------------------


def test_create_stores_span_context_and_an_annotation_note(alice):
    external = make_external(alice)
    annotation = annotate(alice, external)
    start = BODY.index(QUOTE)
    assert (annotation.start, annotation.end) == (start, start + len(QUOTE))
    assert annotation.version == external.head
    assert annotation.status == Annotation.Status.ANCHORED
    assert annotation.prefix == BODY[max(0, start - CONTEXT_CHARS) : start]
    assert annotation.suffix == BODY[start + len(QUOTE) :][:CONTEXT_CHARS]
    note = annotation.note_document
    assert note.trust_tier == TrustTier.ANNOTATION
    assert note.owner == alice
    assert "Cache runbook" in note.title
    assert "Check the eviction" in note.head.body
    assert f"> {QUOTE}" in note.head.body
    assert "snapshot 1" in note.head.body
    assert annotation.text == "Check the eviction"


def test_create_refuses_a_wrong_quote(alice):
    external = make_external(alice)
    start = BODY.index(QUOTE)
    with pytest.raises(ValidationError, match="does not match"):
        annotation_create(
            owner=alice,
            version=external.head,
            start=start + 1,
            end=start + 1 + len(QUOTE),
            quote=QUOTE,
            text="off by one",
        )
    with pytest.raises(ValidationError, match="outside"):
        annotation_create(
            owner=alice,
            version=external.head,
            start=len(BODY),
            end=len(BODY) + 3,
            quote="abc",
            text="past the end",
        )
    with pytest.raises(ValidationError, match="Write something"):
        annotation_create(
            owner=alice,
            version=external.head,
            start=start,
            end=start + len(QUOTE),
            quote=QUOTE,
            text="   ",
        )
    assert not Annotation.objects.exists()
    assert not Document.objects.filter(trust_tier=TrustTier.ANNOTATION).exists()


def test_create_astral_offsets_are_code_points(alice):
    body = "Emoji 🦦🦦 first, then the quoted 𝔴𝔬𝔯𝔡 and more text.\n"
    external = make_external(alice, body=body)
    quote = "𝔴𝔬𝔯𝔡 and"
    start = body.index(quote)
    annotation = annotation_create(
        owner=alice,
        version=external.head,
        start=start,
        end=start + len(quote),
        quote=quote,
        text="astral",
    )
    assert external.head.body[annotation.start : annotation.end] == quote
    # UTF-16 offsets (what a browser would naively send) are refused, not stored.
    utf16_start = len(body[:start].encode("utf-16-le")) // 2
    with pytest.raises(ValidationError):
        annotation_create(
            owner=alice,
            version=external.head,
            start=utf16_start,
            end=utf16_start + len(quote),
            quote=quote,
            text="wrong units",
        )


def test_cannot_annotate_someone_elses_external_or_a_note(alice, bob, alice_note):
    external = make_external(alice)
    with pytest.raises(PermissionDenied):
        annotate(bob, external)
    with pytest.raises(PermissionDenied):  # a note is not an external
        annotate(alice, alice_note, quote="certbot")
    other = make_external(alice, title="Other")
    with pytest.raises(ValidationError, match="another document"):
        start = BODY.index(QUOTE)
        annotation_create(
            owner=alice,
            version=external.head,
            start=start,
            end=start + len(QUOTE),
            quote=QUOTE,
            text="x",
            document=other,
        )
    assert not Annotation.objects.exists()


# --- migrate_annotations -----------------------------------------------------------------


def test_new_snapshot_moves_or_orphans_and_never_deletes(alice):
    external = make_external(alice)
    kept = annotate(alice, external, quote=QUOTE, text="eviction")
    lost = annotate(alice, external, quote="every quarter", text="schedule")
    first = external.head
    body = "A new intro paragraph.\n\n" + BODY.replace("every quarter", "monthly")
    second = new_snapshot(external, body)
    kept.refresh_from_db()
    lost.refresh_from_db()
    assert kept.status == Annotation.Status.ANCHORED and kept.version == second
    assert second.body[kept.start : kept.end] == QUOTE
    assert kept.start == BODY.index(QUOTE) + len("A new intro paragraph.\n\n")
    assert lost.status == Annotation.Status.ORPHANED
    assert lost.orphaned_at is not None
    assert lost.version == first  # the snapshot it was last found in
    assert Annotation.objects.count() == 2
    # Idempotent; and an orphan whose quote comes back is anchored again.
    assert migrate_annotations(external, second) == (0, 0)
    third = new_snapshot(external, body + "\nRotate every quarter.\n")
    lost.refresh_from_db()
    assert lost.status == Annotation.Status.ANCHORED and lost.version == third
    assert lost.orphaned_at is None


def test_migration_counts_and_context_picks_the_repeat(alice):
    body = "Step one: restart the worker.\n\nStep two: drain, then restart the worker.\n"
    external = make_external(alice, body=body)
    quote = "restart the worker"
    second_start = body.rindex(quote)
    annotation = annotation_create(
        owner=alice,
        version=external.head,
        start=second_start,
        end=second_start + len(quote),
        quote=quote,
        text="the second restart",
    )
    new_body = "Step zero: restart the worker.\n\n" + body
    with transaction.atomic():
        version = version_create(
            document=external,
            title="t",
            body=new_body,
            user=None,
            extractor_name="text",
            extractor_version="1",
        )
        assert migrate_annotations(external, version) == (1, 0)
    annotation.refresh_from_db()
    assert annotation.start == new_body.rindex(quote)


def test_annotations_for_lists_anchored_then_orphans_and_only_the_owners(alice, bob):
    external = make_external(alice)
    kept = annotate(alice, external, text="kept")
    lost = annotate(alice, external, quote="every quarter", text="lost")
    second = new_snapshot(external, BODY.replace("every quarter", "weekly"))
    assert list(annotations_for(alice, second)) == [kept, lost]
    assert list(annotations_for(bob, second)) == []


def test_deleting_the_note_hides_the_annotation(alice):
    from notes.services import note_delete

    external = make_external(alice)
    annotation = annotate(alice, external)
    note_delete(document=annotation.note_document, user=alice)
    assert list(annotations_for(alice, external.head)) == []
    assert Annotation.objects.filter(pk=annotation.pk).exists()  # hidden, not dropped


# --- search and pages --------------------------------------------------------------------


def test_annotation_is_searchable_as_its_own_trust_tier(alice, bob):
    external = make_external(alice)
    annotate(alice, external, text="Zanzibar eviction storms happen on launch day")
    result = search(user=alice, query="zanzibar", mode="lexical")
    assert result.hits, result.error
    hit = result.hits[0]
    assert hit.passage.document.trust_tier == TrustTier.ANNOTATION
    assert hit.passage.document.annotation_of.document == external
    assert not search(user=bob, query="zanzibar", mode="lexical").hits
    # Evidence for the annotation's passage opens like a note's.
    client = Client()
    client.force_login(alice)
    assert client.get(hit.evidence_url).status_code == 200


def test_post_creates_annotation_and_bob_gets_404(alice, bob, alice_client, bob_client):
    external = make_external(alice)
    start = BODY.index(QUOTE)
    url = reverse("externals:annotation-add", kwargs={"document_id": external.pk})
    data = {
        "version": external.head_id,
        "start": start,
        "end": start + len(QUOTE),
        "quote": QUOTE,
        "text": "via the page",
    }
    assert bob_client.post(url, data).status_code == 404
    assert not Annotation.objects.exists()
    response = alice_client.post(url, {**data, "next": "https://evil.example/"})
    assert response.status_code == 302
    assert response["Location"].startswith("/externals/")
    assert Annotation.objects.get().text == "via the page"
    bad = alice_client.post(url, {**data, "start": start + 2}, follow=True)
    assert "does not match" in bad.content.decode()
    assert Annotation.objects.count() == 1
    assert alice_client.get(url).status_code == 405


def test_snapshot_page_shows_annotations_escaped_and_orphans(alice, bob, alice_client, bob_client):
    external = make_external(alice, body=BODY + "\n<script>alert(1)</script> quoted\n")
    annotate(alice, external, quote="<script>alert(1)</script>", text="<b>bold?</b>")
    lost = annotate(alice, external, quote="every quarter", text="gone soon")
    new_snapshot(external, external.head.body.replace("every quarter", "daily"))
    page = alice_client.get(reverse("externals:external", kwargs={"document_id": external.pk}))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="annotation-form"' in html
    assert "&lt;b&gt;bold?&lt;/b&gt;" in html and "<b>bold?</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert f'id="annotation-{lost.pk}"' in html and "Orphaned" in html
    assert "gone soon" in html
    other = bob_client.get(reverse("externals:external", kwargs={"document_id": external.pk}))
    assert other.status_code == 404


# --- through the refresh pipeline ----------------------------------------------------------


def test_refresh_of_a_folder_moves_and_orphans_annotations(alice, tmp_path):
    from externals.pipeline import scan_source
    from externals.services import source_create

    folder = tmp_path / "docs"
    folder.mkdir()
    page = folder / "cache.md"
    page.write_text(BODY, encoding="utf-8")
    source = source_create(owner=alice, name="docs", kind="folder", location=str(folder))
    assert scan_source(source).status == "ok"
    external = Document.objects.get(owner=alice, kind=Document.Kind.EXTERNAL)
    kept = annotate(alice, external, text="eviction")
    lost = annotate(alice, external, quote="every quarter", text="schedule")
    page.write_text("Intro.\n\n" + BODY.replace("every quarter", "weekly"), encoding="utf-8")
    assert scan_source(source).status == "ok"
    external.refresh_from_db()
    kept.refresh_from_db()
    lost.refresh_from_db()
    assert external.head.number == 2
    assert kept.version == external.head and kept.status == Annotation.Status.ANCHORED
    assert external.head.body[kept.start : kept.end] == QUOTE
    assert lost.status == Annotation.Status.ORPHANED


def test_snapshot_page_lists_each_annotation_once(alice, alice_client):
    """The annotation's note annotates the external and names its title: it is listed under
    Annotations, and neither under Linked from nor under Unlinked mentions."""
    external = make_external(alice)
    annotation = annotate(alice, external, text=f"Compare with {external.title} next week.")
    note_title = annotation.note_document.title
    html = alice_client.get(
        reverse("externals:external", kwargs={"document_id": external.pk})
    ).content.decode()
    graph = html[html.index('id="graph"') :]
    assert html.count(f'id="annotation-{annotation.pk}"') == 1
    linked_from = graph[graph.index('id="linked-from"') : graph.index('id="links-to"')]
    mentions = graph[graph.index('id="mentions"') :]
    assert f'href="/notes/{annotation.note_document_id}"' not in linked_from
    assert f'href="/notes/{annotation.note_document_id}"' not in mentions
    # The note's own page still shows the edge from its side.
    note_page = alice_client.get(
        reverse("notes:detail", kwargs={"note_id": annotation.note_document_id})
    ).content.decode()
    assert external.title in note_page[note_page.index('id="links-to"') :]
    assert note_title
