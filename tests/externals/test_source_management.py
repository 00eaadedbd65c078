"""Sources managed in the app: edit a source's settings, disable and
enable it, delete it after a confirmation that counts what happens to its externals,
snapshots and annotations; a link to each external's original; titles taken from the
document; delete an annotation. Every write is owner-only (bob gets 404), POST only and
CSRF-protected."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from pypdf import PdfReader, PdfWriter

from externals import pipeline, services
from externals.annotations import annotation_create, annotations_for
from externals.extract import extract, html_title, markdown_title
from externals.models import Annotation, ScanRecord, Source, SourceItem
from notes.models import Document, TrustTier, Version
from retrieval.search.pipeline import search
from tests.factories import make_source, make_source_external
from tests.local_http import minimal_pdf


def annotate(owner, document: Document, quote: str = "rotate certs", text: str = "Which certs?"):
    version = document.head
    start = version.body.index(quote)
    return annotation_create(
        owner=owner, version=version, start=start, end=start + len(quote), quote=quote, text=text
    )


def edit_data(**fields: str) -> dict[str, str]:
    base = {
        "name": "Docs",
        "trust_tier": TrustTier.EXTERNAL_CURRENT.value,
        "stale_after_days": "30",
        "enabled": "on",
        **fields,
    }
    return {f"edit-{key}": value for key, value in base.items() if value is not None}


def lexical(user, query: str) -> list[int]:
    result = search(user=user, query=query, mode="lexical", rerank="off")
    assert not result.error, result.error
    return [hit.passage.document_id for hit in result.hits]


# --- owner only, POST only, CSRF ------------------------------------------------------------


def owner_urls(source: Source, annotation: Annotation) -> list[str]:
    return [
        reverse("externals:source-edit", args=[source.pk]),
        reverse("externals:source-enabled", args=[source.pk]),
        reverse("externals:source-delete", args=[source.pk]),
        reverse("externals:annotation-delete", args=[annotation.document_id, annotation.pk]),
    ]


def test_bob_gets_404_and_changes_nothing(bob_client, alice, source, external):
    annotation = annotate(alice, external)
    for url in owner_urls(source, annotation):
        assert bob_client.get(url).status_code in (404, 405), url
        assert bob_client.post(url, edit_data(name="Bob's now")).status_code == 404, url
    source.refresh_from_db()
    assert (source.name, source.enabled) == ("Docs", True)
    assert Source.objects.filter(pk=source.pk).exists()
    assert list(annotations_for(alice, external.head)) == [annotation]


def test_annotation_of_another_external_is_404(alice, alice_client, source, external):
    """The annotation id must belong to the external in the URL."""
    annotation = annotate(alice, external)
    other = make_source_external(source, path="other.md", title="Other")
    url = reverse("externals:annotation-delete", args=[other.pk, annotation.pk])
    assert alice_client.get(url).status_code == 404
    assert alice_client.post(url).status_code == 404


def test_pages_and_posts_require_login(client, alice, source, external):
    annotation = annotate(alice, external)
    for url in owner_urls(source, annotation):
        response = client.post(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert Source.objects.filter(pk=source.pk, enabled=True).exists()


def test_writes_need_the_csrf_token(alice, source, external):
    annotation = annotate(alice, external)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    for url in owner_urls(source, annotation):
        assert strict.post(url, edit_data(name="Renamed")).status_code == 403, url
    source.refresh_from_db()
    assert source.name == "Docs" and source.enabled
    assert list(annotations_for(alice, external.head)) == [annotation]


def test_the_enable_toggle_and_the_delete_page_do_not_change_on_get(alice_client, source):
    assert (
        alice_client.get(reverse("externals:source-enabled", args=[source.pk])).status_code == 405
    )
    assert alice_client.get(reverse("externals:source-delete", args=[source.pk])).status_code == 200
    assert Source.objects.filter(pk=source.pk, enabled=True).exists()


# --- edit ------------------------------------------------------------------------------------


def test_source_page_links_to_edit_disable_and_delete(alice_client, source):
    page = alice_client.get(reverse("externals:source", args=[source.pk])).content.decode()
    assert reverse("externals:source-edit", args=[source.pk]) in page
    assert reverse("externals:source-enabled", args=[source.pk]) in page
    assert reverse("externals:source-delete", args=[source.pk]) in page


def test_edit_form_shows_the_current_settings(alice_client, source):
    source.stale_after_days = 12
    source.no_egress = True
    source.save()
    page = alice_client.get(reverse("externals:source-edit", args=[source.pk])).content.decode()
    assert 'name="edit-name"' in page and 'value="Docs"' in page
    assert re.search(r'name="edit-stale_after_days"[^>]*value="12"', page)
    assert re.search(r'name="edit-no_egress"[^>]*checked', page)


def test_edit_saves_and_copies_onto_the_externals_at_once(alice, alice_client, source, external):
    url = reverse("externals:source-edit", args=[source.pk])
    data = edit_data(
        name="Runbooks",
        trust_tier=TrustTier.EXTERNAL_STALE.value,
        no_egress="on",
        stale_after_days="90",
        enabled=None,  # unchecked
    )
    response = alice_client.post(url, data)
    assert response.status_code == 302
    assert response["Location"] == reverse("externals:source", args=[source.pk])
    source.refresh_from_db()
    assert (source.name, source.trust_tier, source.no_egress) == (
        "Runbooks",
        TrustTier.EXTERNAL_STALE,
        True,
    )
    assert (source.stale_after_days, source.enabled) == (90, False)
    external.refresh_from_db()
    # No-egress must not wait for the next scan (the admin's rule, externals.admin).
    assert (external.no_egress, external.trust_tier, external.source_name) == (
        True,
        TrustTier.EXTERNAL_STALE,
        "Runbooks",
    )


def test_edit_keeps_its_own_name_but_refuses_another_sources(alice, alice_client, source):
    make_source(alice, name="Taken")
    url = reverse("externals:source-edit", args=[source.pk])
    assert alice_client.post(url, edit_data(stale_after_days="7")).status_code == 302
    response = alice_client.post(url, edit_data(name="Taken"))
    assert response.status_code == 400
    assert "You already have a source named “Taken”." in response.content.decode()
    source.refresh_from_db()
    assert (source.name, source.stale_after_days) == ("Docs", 7)


@pytest.mark.parametrize("days", ["0", "-1", "3651", "soon"])
def test_edit_refuses_a_stale_age_outside_the_add_forms_range(alice_client, source, days):
    response = alice_client.post(
        reverse("externals:source-edit", args=[source.pk]), edit_data(stale_after_days=days)
    )
    assert response.status_code == 400
    assert 'class="error field-error"' in response.content.decode()
    source.refresh_from_db()
    assert source.stale_after_days == 30


def test_edit_refuses_a_tier_that_would_outrank_notes(alice_client, source):
    response = alice_client.post(
        reverse("externals:source-edit", args=[source.pk]),
        edit_data(trust_tier=TrustTier.NOTE.value),
    )
    assert response.status_code == 400
    source.refresh_from_db()
    assert source.trust_tier == TrustTier.EXTERNAL_CURRENT


def test_the_service_holds_the_same_rules(alice, source):
    make_source(alice, name="Taken")
    common = {"source": source, "trust_tier": TrustTier.EXTERNAL_CURRENT, "no_egress": False}
    for name, days, field in (("Taken", 30, "name"), ("Docs", 0, "stale_after_days")):
        with pytest.raises(ValidationError) as caught:
            services.source_update(**common, name=name, stale_after_days=days, enabled=True)
        assert field in caught.value.message_dict
    with pytest.raises(ValidationError):
        services.source_update(
            **{**common, "trust_tier": TrustTier.NOTE},
            name="Docs",
            stale_after_days=30,
            enabled=True,
        )


def test_disable_and_enable(alice_client, source):
    url = reverse("externals:source-enabled", args=[source.pk])
    page = alice_client.post(url, {"enabled": "0"}, follow=True).content.decode()
    source.refresh_from_db()
    assert not source.enabled
    assert "Source disabled" in page and ">Enable</button>" in page
    alice_client.post(url, {"enabled": "1"})
    source.refresh_from_db()
    assert source.enabled


# --- delete ------------------------------------------------------------------------------------


def test_delete_page_spells_out_the_counts(alice, alice_client, source, external):
    make_source_external(source, path="second.md", title="Second")
    annotate(alice, external)
    ScanRecord.objects.create(source=source, status=ScanRecord.Status.OK)
    page = alice_client.get(reverse("externals:source-delete", args=[source.pk])).content.decode()
    assert "2 externals</strong> leave every search" in page
    assert "3 snapshots</strong> are kept" in page
    assert "1 annotation</strong> is kept" in page
    assert "1 scan record</strong>" in page and "0 webhook deliveries</strong>" in page
    assert "Nothing is deleted from the folder" in page
    assert Source.objects.filter(pk=source.pk).exists()  # looking deletes nothing


def test_delete_keeps_snapshots_and_annotations_and_leaves_search(
    alice, alice_client, source, external
):
    annotation = annotate(alice, external, text="Ask ops which certs")
    ScanRecord.objects.create(source=source, status=ScanRecord.Status.OK)
    versions = set(external.versions.values_list("pk", flat=True))
    assert external.pk in lexical(alice, "weekly")

    response = alice_client.post(reverse("externals:source-delete", args=[source.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("externals:sources")
    assert not Source.objects.filter(pk=source.pk).exists()
    assert not ScanRecord.objects.filter(source_id=source.pk).exists()
    assert not SourceItem.objects.filter(source_id=source.pk).exists()
    external.refresh_from_db()
    assert external.deleted_at is not None
    assert set(Version.objects.filter(document=external).values_list("pk", flat=True)) == versions
    assert external.pk not in lexical(alice, "weekly")
    # The annotation, on the snapshot it sat on, and its words, still searchable.
    assert Annotation.objects.filter(pk=annotation.pk, version=external.head).exists()
    assert annotation.note_document_id in lexical(alice, "ops")
    # The external's page still opens (past answers' evidence links to it).
    page = alice_client.get(reverse("externals:external", args=[external.pk]))
    assert page.status_code == 200 and "no longer searched" in page.content.decode()


def test_delete_is_refused_while_a_scan_holds_the_source(alice_client, source, external):
    claim = pipeline.claim_scan(source)
    assert claim is not None
    url = reverse("externals:source-delete", args=[source.pk])
    assert "A scan of this source is running" in alice_client.get(url).content.decode()
    page = alice_client.post(url, follow=True).content.decode()
    assert "delete it once it finishes" in page
    assert Source.objects.filter(pk=source.pk).exists()
    external.refresh_from_db()
    assert external.deleted_at is None


def test_deleting_an_upload_source_removes_its_stored_file(alice, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    source = services.upload_create(
        owner=alice, name="Upload", filename="notes.md", data=b"# Notes\n\nHello there.\n"
    )
    stored = pipeline.upload_folder(source) / "notes.md"
    assert stored.exists()
    counts = services.source_delete(source=source)
    assert counts.externals == 1 and counts.snapshots == 1
    assert not stored.exists() and not stored.parent.exists()


# --- the original ------------------------------------------------------------------------------


def test_folder_external_shows_its_file_path_as_text(alice_client, source, external):
    page = alice_client.get(reverse("externals:external", args=[external.pk])).content.decode()
    assert '<code class="original-path">/srv/docs/guide.md</code>' in page
    assert "original-link" not in page


def test_url_external_links_to_its_page_safely(alice, alice_client):
    source = make_source(
        alice, name="Web", kind=Source.Kind.URL, location="https://ex.test/a?b=1&c=2"
    )
    document = make_source_external(source, path="https://ex.test/a?b=1&c=2")
    page = alice_client.get(reverse("externals:external", args=[document.pk])).content.decode()
    assert (
        '<a href="https://ex.test/a?b=1&amp;c=2" rel="noopener noreferrer" target="_blank" '
        'class="original-link">' in page
    )


@pytest.mark.parametrize(
    "hostile",
    [
        "javascript:alert(document.cookie)",
        "JaVaScRiPt:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        '" onmouseover="alert(1)',
    ],
)
def test_a_hostile_url_is_never_a_link(alice, alice_client, hostile):
    source = make_source(alice, name="Web", kind=Source.Kind.URL, location="https://ex.test/")
    document = make_source_external(source, path=hostile)
    page = alice_client.get(reverse("externals:external", args=[document.pk])).content.decode()
    assert "original-link" not in page
    assert 'href="javascript' not in page.lower() and 'href="data:' not in page
    assert "<script>alert(1)</script>" not in page and 'onmouseover="alert' not in page
    assert 'class="original-path"' in page


def test_upload_external_names_its_file(alice, alice_client):
    source = make_source(alice, name="Up", kind=Source.Kind.UPLOAD, location="notes.md")
    document = make_source_external(source, path="notes.md")
    page = alice_client.get(reverse("externals:external", args=[document.pk])).content.decode()
    assert '<code class="original-path">uploaded file notes.md</code>' in page


# --- titles from the document ----------------------------------------------------------------


def test_markdown_title_is_the_first_level_one_heading():
    text = (
        "Intro line #notatitle\n"
        "## A second-level heading\n"
        "```\n# a comment in code\n```\n"
        "#hashtag\n"
        "  # Failover runbook ##\n"
        "# Later heading\n"
    )
    assert markdown_title(text) == "Failover runbook"
    assert markdown_title("~~~sh\n# not this\n~~~\n") == ""
    assert markdown_title("No heading at all\n") == ""


def test_html_title_is_the_title_element_with_entities_decoded():
    assert html_title(b"<html><head><title>\n A &amp; B\n</title></head></html>") == "A & B"
    assert html_title(b"<html><body><h1>Heading only</h1></body></html>") == ""


def test_extract_takes_titles_from_each_format():
    assert extract(b"# Failover runbook\n\nText.\n", filename="run.md").title == "Failover runbook"
    # A text file's `#` line is not a heading.
    assert extract(b"# not a title\n", filename="run.txt").title == ""
    html = (
        b"<html><head><title>Runbook page</title></head><body><article><h1>Runbook</h1>"
        b"<p>Rotate the staging certs with certbot every quarter, before the expiry warning "
        b"lands in the shared inbox.</p></article></body></html>"
    )
    assert extract(html, filename="p.html").title == "Runbook page"
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(minimal_pdf(["Failover steps."]))))
    writer.add_metadata({"/Title": "Failover handbook"})
    out = io.BytesIO()
    writer.write(out)
    assert extract(out.getvalue(), filename="h.pdf").title == "Failover handbook"
    assert extract(minimal_pdf(["No metadata."]), filename="h.pdf").title == ""


def test_a_scan_titles_externals_from_their_content_or_file_name(alice, tmp_path: Path):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "failover.md").write_text("# Failover runbook\n\nPromote the replica.\n")
    (root / "plain.md").write_text("No heading here, just text.\n")
    (root / "notes.txt").write_text("# shell comment\nplain text\n")
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(minimal_pdf(["Failover steps."]))))
    writer.add_metadata({"/Title": "Failover handbook"})
    with (root / "book.pdf").open("wb") as handle:
        writer.write(handle)
    source = services.source_create(owner=alice, name="docs", kind="folder", location=str(root))
    assert pipeline.scan_source(source).status == ScanRecord.Status.OK
    titles = {item.path: item.document.title for item in source.items.select_related("document")}
    assert titles == {
        "failover.md": "Failover runbook",
        "plain.md": "plain.md",
        "notes.txt": "notes.txt",
        "book.pdf": "Failover handbook",
    }


# --- delete an annotation ----------------------------------------------------------------------


def test_external_page_links_to_delete_each_annotation(alice, alice_client, external):
    annotation = annotate(alice, external)
    page = alice_client.get(reverse("externals:external", args=[external.pk])).content.decode()
    assert reverse("externals:annotation-delete", args=[external.pk, annotation.pk]) in page


def test_delete_an_annotation_after_confirming(alice, alice_client, external):
    annotation = annotate(alice, external, text="Ask ops which certs")
    assert annotation.note_document_id in lexical(alice, "ops")
    url = reverse("externals:annotation-delete", args=[external.pk, annotation.pk])
    page = alice_client.get(url).content.decode()
    assert "Delete this annotation?" in page and "Ask ops which certs" in page
    assert list(annotations_for(alice, external.head)) == [annotation]  # looking deletes nothing

    response = alice_client.post(url)
    assert response.status_code == 302
    assert response["Location"].endswith("#annotations")
    assert list(annotations_for(alice, external.head)) == []
    assert annotation.note_document_id not in lexical(alice, "ops")
    after = alice_client.get(response["Location"]).content.decode()
    assert "Annotation deleted." in after and "Ask ops which certs" not in after
    # Deleted once: a second request is a 404, not an error.
    assert alice_client.post(url).status_code == 404
