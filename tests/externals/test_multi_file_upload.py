"""Several files in one upload, each through the checks a single upload
has, with a per-file report (one bad file never loses the others) and per-request bounds;
and the rendered view of Markdown/HTML snapshots beside the exact text, through the notes'
sanitiser, owner only."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from externals import forms as external_forms
from externals import pipeline
from externals.models import Source
from tests.factories import make_source, make_source_external

UPLOAD_URL = reverse("externals:source-add", args=["upload"])


@pytest.fixture(autouse=True)
def _data_dir(settings, tmp_path) -> None:
    settings.DATA_DIR = tmp_path / "data"


def upload_data(*files: SimpleUploadedFile, name: str = "") -> dict[str, object]:
    return {
        "upload-name": name,
        "upload-trust_tier": "external",
        "upload-stale_after_days": "30",
        "upload-file": list(files),
    }


def md(name: str, text: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="text/markdown")


def results(page: str) -> dict[str, str]:
    """{file name: "accepted" | "refused"} from the upload report."""
    found = re.findall(
        r'data-upload-result="(accepted|refused)"><span[^>]*>[^<]*</span> <code>([^<]*)</code>',
        page,
    )
    return {name: state for state, name in found}


# --- several files at once -------------------------------------------------------------------


def test_the_form_offers_several_files_and_a_drop_zone(alice_client):
    page = alice_client.get(reverse("externals:sources")).content.decode()
    assert re.search(r'<input type="file" name="upload-file"[^>]* multiple', page)
    assert "data-drop-zone" in page and "upload.js" in page


def test_one_bad_file_is_reported_and_the_others_are_saved(alice, alice_client, settings):
    settings.LODE_SOURCE_MAX_FILE_BYTES = 1024
    files = [
        md("first.md", "# First runbook\n\nRotate the certs.\n"),
        SimpleUploadedFile("broken.md", b"# Broken\n\n\xff\xfe not utf-8\n"),
        SimpleUploadedFile("image.png", b"\x89PNG\r\n\x1a\n\x00\x00"),
        SimpleUploadedFile("big.txt", b"x" * 1025),
        SimpleUploadedFile("empty.md", b""),
        md("second.md", "# Second runbook\n\nDrain the queue.\n"),
    ]
    response = alice_client.post(UPLOAD_URL, upload_data(*files))
    assert response.status_code == 200
    page = response.content.decode()
    assert results(page) == {
        "first.md": "accepted",
        "broken.md": "refused",
        "image.png": "refused",
        "big.txt": "refused",
        "empty.md": "refused",
        "second.md": "accepted",
    }
    assert "not valid UTF-8: byte 10 (ff)" in page
    assert "unsupported file type (.png)" in page
    assert "The file is 1,025 bytes; the limit is 1,024 bytes." in page
    assert "The submitted file is empty." in page
    # Only the good files became sources (named after their files), each scanned into an
    # external; the refused ones left no source and no stored file behind.
    sources = {source.name: source for source in Source.objects.filter(owner=alice)}
    assert set(sources) == {"first.md", "second.md"}
    for source in sources.values():
        assert source.scans.get().items_new == 1
        assert source.items.get().document.head.title in ("First runbook", "Second runbook")
    stored = sorted(p.name for p in (settings.DATA_DIR / "uploads").rglob("*") if p.is_file())
    assert stored == ["first.md", "second.md"]


def test_a_name_prefixes_each_file_and_a_taken_name_refuses_only_its_file(alice, alice_client):
    make_source(alice, name="Runbooks: a.md")
    response = alice_client.post(
        UPLOAD_URL,
        upload_data(md("a.md", "# A\n\nalpha\n"), md("b.md", "# B\n\nbeta\n"), name="Runbooks"),
    )
    page = response.content.decode()
    assert results(page) == {"a.md": "refused", "b.md": "accepted"}
    assert "You already have a source named “Runbooks: a.md”." in page
    assert set(Source.objects.filter(owner=alice).values_list("name", flat=True)) == {
        "Runbooks: a.md",
        "Runbooks: b.md",
    }


def test_every_file_refused_is_a_400_with_the_reasons(alice, alice_client):
    response = alice_client.post(
        UPLOAD_URL, upload_data(SimpleUploadedFile("a.bin", b"\x00\x01"), md("b.md", ""))
    )
    assert response.status_code == 400
    assert results(response.content.decode()) == {"a.bin": "refused", "b.md": "refused"}
    assert not Source.objects.exists()


def test_at_most_max_upload_files_per_request(alice_client, monkeypatch):
    monkeypatch.setattr(external_forms, "MAX_UPLOAD_FILES", 2)
    files = [md(f"n{i}.md", f"# N{i}\n\ntext\n") for i in range(3)]
    response = alice_client.post(UPLOAD_URL, upload_data(*files))
    assert response.status_code == 400
    assert "3 files sent; at most 2 can be uploaded at once." in response.content.decode()
    assert not Source.objects.exists()


def test_the_total_size_of_one_upload_is_bounded(alice_client, monkeypatch):
    monkeypatch.setattr(external_forms, "MAX_UPLOAD_TOTAL_BYTES", 100)
    files = [md("a.md", "# A\n\n" + "a" * 60), md("b.md", "# B\n\n" + "b" * 60)]
    response = alice_client.post(UPLOAD_URL, upload_data(*files))
    assert response.status_code == 400
    assert "one upload may carry at most 100 bytes" in response.content.decode()
    assert not Source.objects.exists()


def test_a_request_announcing_too_many_bytes_is_refused_before_any_file_is_stored(
    alice_client, monkeypatch
):
    from externals import views

    monkeypatch.setattr(views, "MAX_UPLOAD_TOTAL_BYTES", 100)
    monkeypatch.setattr(views, "UPLOAD_REQUEST_OVERHEAD_BYTES", 0)
    response = alice_client.post(UPLOAD_URL, upload_data(md("a.md", "# A\n\n" + "a" * 200)))
    assert response.status_code == 413
    assert "one upload may carry at most 100 bytes of files" in response.content.decode()
    assert not Source.objects.exists()


def test_upload_needs_login_and_csrf(alice, client):
    response = client.post(UPLOAD_URL, upload_data(md("a.md", "# A\n\nalpha\n")))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post(UPLOAD_URL, upload_data(md("a.md", "# A\n\nalpha\n"))).status_code == 403
    assert not Source.objects.exists()


# --- rendered view of Markdown / HTML snapshots -----------------------------------------------

HOSTILE = (
    "# Heading\n\n"
    'Some **bold** text and `a < b && "c"`.\n\n'
    "<script>alert('x')</script>\n\n"
    '<img src=x onerror="alert(1)">\n\n'
    "[click](javascript:alert(1))\n"
)


@pytest.fixture
def external(alice):
    """An HTML snapshot (the extractor's Markdown text) with hostile content."""
    return make_source_external(make_source(alice), path="page.html", bodies=(HOSTILE,))


def rendered_box(page: str) -> str:
    match = re.search(
        r'<div class="rendered snapshot-rendered" id="snapshot-rendered">(.*?)</div>\n', page, re.S
    )
    assert match, "no rendered snapshot on the page"
    return match.group(1)


def test_exact_text_stays_the_default_with_a_link_to_rendered(alice_client, external):
    url = reverse("externals:external", args=[external.pk])
    page = alice_client.get(url).content.decode()
    assert 'id="snapshot-text"' in page and "snapshot-rendered" not in page
    assert f'href="{url}?view=rendered"' in page
    assert "# Heading" in page  # the exact text, Markdown marks and all


def test_rendered_view_renders_markdown_and_sanitises_hostile_content(alice_client, external):
    url = reverse("externals:external", args=[external.pk])
    page = alice_client.get(url, {"view": "rendered"}).content.decode()
    box = rendered_box(page)
    assert "<h1>Heading</h1>" in box and "<strong>bold</strong>" in box
    assert '<code>a &lt; b &amp;&amp; "c"</code>' in box  # escaped once, not twice
    # Raw HTML comes out as text, never as elements; a javascript: link is not a link.
    assert "<script" not in box and "<img" not in box and "href=" not in box
    assert "&lt;script&gt;" in box and "&lt;img src=x onerror" in box
    # Annotating happens in the exact text (its offsets are what annotations store).
    assert 'id="snapshot-text"' not in page and "data-annotate-form" not in page
    assert 'aria-current="page">Rendered</a>' in page


def test_older_snapshot_renders_too(alice, alice_client):
    document = make_source_external(
        make_source(alice), path="notes.md", bodies=("# Old\n", "# New\n")
    )
    old = document.versions.get(number=1)
    url = reverse("externals:snapshot", args=[document.pk, old.pk])
    assert "<h1>Old</h1>" in rendered_box(
        alice_client.get(url, {"view": "rendered"}).content.decode()
    )


def test_plain_text_snapshots_offer_only_the_exact_text(alice, alice_client):
    document = make_source_external(make_source(alice), path="notes.txt", bodies=("# not md\n",))
    document.versions.update(extractor_name="utf8-text")
    url = reverse("externals:external", args=[document.pk])
    page = alice_client.get(url, {"view": "rendered"}).content.decode()
    assert 'class="snapshot-views"' not in page
    assert 'id="snapshot-text"' in page and "snapshot-rendered" not in page


def test_markdown_file_snapshot_renders(alice, alice_client):
    document = make_source_external(make_source(alice), path="docs/notes.md", bodies=("# Title\n",))
    document.versions.update(extractor_name="utf8-text")
    url = reverse("externals:external", args=[document.pk])
    assert "<h1>Title</h1>" in rendered_box(
        alice_client.get(url, {"view": "rendered"}).content.decode()
    )


def test_an_unknown_part_is_404(alice_client, external):
    url = reverse("externals:external", args=[external.pk])
    assert alice_client.get(url, {"view": "rendered", "part": "9"}).status_code == 404


def test_rendered_view_is_owner_only(bob_client, client, external):
    url = reverse("externals:external", args=[external.pk])
    assert bob_client.get(url, {"view": "rendered"}).status_code == 404
    response = client.get(url, {"view": "rendered"})
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_upload_folder_is_under_the_data_dir(alice, alice_client, settings):
    """The accepted file of a multi-file upload is stored where a single upload's is."""
    alice_client.post(UPLOAD_URL, upload_data(md("a.md", "# A\n\nalpha\n"), md("b.md", "# B\n")))
    for source in Source.objects.filter(owner=alice):
        assert (pipeline.upload_folder(source) / source.location).is_file()
