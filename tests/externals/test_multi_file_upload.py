"""Several files in one upload, brought in as one mirrored source or as editable notes,
each file through its own checks, with a per-file report shown after a redirect (one bad
file never loses the others) and per-request bounds; and the rendered view of Markdown/HTML
snapshots beside the exact text, through the notes' sanitiser, owner only."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from externals import forms as external_forms
from externals import pipeline
from externals.models import Source
from notes.models import Document
from tests.factories import make_source, make_source_external

UPLOAD_URL = reverse("externals:source-add", args=["upload"])


@pytest.fixture(autouse=True)
def _data_dir(settings, tmp_path) -> None:
    settings.DATA_DIR = tmp_path / "data"


def upload_data(
    *files: SimpleUploadedFile, name: str = "", brought_in_as: str = "source"
) -> dict[str, object]:
    return {
        "upload-brought_in_as": brought_in_as,
        "upload-name": name,
        "upload-trust_tier": "external",
        "upload-stale_after_days": "30",
        "upload-file": list(files),
    }


def md(name: str, text: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="text/markdown")


def results(page: str) -> dict[str, str]:
    """{file name: "saved" | "already-there" | "refused"} from the upload report."""
    found = re.findall(
        r'data-upload-result="(saved|already-there|refused)"><span[^>]*>[^<]*</span> '
        r"<code>([^<]*)</code>",
        page,
    )
    return {name: state for state, name in found}


def posted(client: Client, data: dict[str, object]) -> str:
    """POST the upload, check it redirects to the report, and return the report page."""
    response = client.post(UPLOAD_URL, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert response["Location"].startswith(reverse("externals:sources") + "?upload=")
    assert response["Location"].endswith("#upload-results")
    return client.get(response["Location"]).content.decode()


# --- several files at once -------------------------------------------------------------------


def test_the_form_offers_several_files_a_drop_zone_and_the_choice(alice_client):
    page = alice_client.get(reverse("externals:sources")).content.decode()
    assert re.search(r'<input type="file" name="upload-file"[^>]* multiple', page)
    assert "data-drop-zone" in page and "upload.js" in page
    assert re.search(r'type="radio" name="upload-brought_in_as" value="notes"', page)
    assert re.search(r'type="radio" name="upload-brought_in_as" value="source"[^>]*checked', page)
    assert "As editable notes" in page and "As a mirrored source" in page


def test_several_files_become_one_source_and_bad_ones_are_refused(alice, alice_client, settings):
    settings.LODE_SOURCE_MAX_FILE_BYTES = 1024
    files = [
        md("first.md", "# First runbook\n\nRotate the certs.\n"),
        SimpleUploadedFile("broken.md", b"# Broken\n\n\xff\xfe not utf-8\n"),
        SimpleUploadedFile("image.png", b"\x89PNG\r\n\x1a\n\x00\x00"),
        SimpleUploadedFile("big.txt", b"x" * 1025),
        SimpleUploadedFile("empty.md", b""),
        md("second.md", "# Second runbook\n\nDrain the queue.\n"),
    ]
    page = posted(alice_client, upload_data(*files))
    assert results(page) == {
        "first.md": "saved",
        "broken.md": "refused",
        "image.png": "refused",
        "big.txt": "refused",
        "empty.md": "refused",
        "second.md": "saved",
    }
    assert "not valid UTF-8: byte 10 (ff)" in page
    assert "unsupported file type (.png)" in page
    assert "The file is 1,025 bytes; the limit is 1,024 bytes." in page
    assert "The submitted file is empty." in page
    # One source, named "Uploads <date>", holding both good files as externals; the
    # refused ones left no stored file behind.
    source = Source.objects.get(owner=alice)
    assert source.name.startswith("Uploads ")
    assert f'href="{reverse("externals:source", args=[source.pk])}"' in page
    # Scanned again without the refused files: its latest scan is clean.
    assert source.scans.order_by("-started_at", "-id").first().status == "ok"
    titles = {item.path: item.document.head.title for item in source.items.all()}
    assert titles == {"first.md": "First runbook", "second.md": "Second runbook"}
    stored = sorted(p.name for p in (settings.DATA_DIR / "uploads").rglob("*") if p.is_file())
    assert stored == ["first.md", "second.md"]
    page = alice_client.get(reverse("externals:source", args=[source.pk])).content.decode()
    assert "First runbook" in page and "Second runbook" in page


def test_reloading_the_report_sends_nothing_again(alice, alice_client, bob_client):
    response = alice_client.post(
        UPLOAD_URL, upload_data(md("a.md", "# A\n\nalpha\n"), md("b.md", "# B\n\nbeta\n"))
    )
    report_url = response["Location"]
    first = alice_client.get(report_url).content.decode()
    again = alice_client.get(report_url).content.decode()
    assert results(first) == results(again) == {"a.md": "saved", "b.md": "saved"}
    assert Source.objects.filter(owner=alice).count() == 1
    # Another user's session has no such report: their page shows none.
    assert "upload-results" not in bob_client.get(report_url).content.decode()


def test_the_same_files_uploaded_again_are_already_there(alice, alice_client):
    files = (md("a.md", "# A\n\nalpha\n"), md("b.md", "# B\n\nbeta\n"))
    posted(alice_client, upload_data(*files))
    files = (md("a.md", "# A\n\nalpha\n"), md("b.md", "# B\n\nbeta, changed\n"))
    page = posted(alice_client, upload_data(*files))
    assert results(page) == {"a.md": "already-there", "b.md": "saved"}
    assert "(same content)" in page
    assert Source.objects.filter(owner=alice).count() == 2


def test_a_named_source_and_a_taken_name(alice, alice_client):
    page = posted(alice_client, upload_data(md("a.md", "# A\n\nalpha\n"), name="Runbooks"))
    assert results(page) == {"a.md": "saved"}
    assert Source.objects.get(owner=alice).name == "Runbooks"
    response = alice_client.post(
        UPLOAD_URL, upload_data(md("b.md", "# B\n\nbeta\n"), name="Runbooks")
    )
    assert response.status_code == 400
    assert "You already have a source named “Runbooks”." in response.content.decode()
    assert Source.objects.filter(owner=alice).count() == 1


def test_one_file_is_named_after_itself(alice, alice_client):
    posted(alice_client, upload_data(md("guide.md", "# Guide\n\nalpha\n")))
    posted(alice_client, upload_data(md("guide.md", "# Guide\n\nbeta\n")))
    names = set(Source.objects.filter(owner=alice).values_list("name", flat=True))
    assert names == {"guide.md", "guide.md (2)"}


def test_every_file_refused_leaves_no_source(alice, alice_client):
    page = posted(
        alice_client, upload_data(SimpleUploadedFile("a.bin", b"\x00\x01"), md("b.md", ""))
    )
    assert results(page) == {"a.bin": "refused", "b.md": "refused"}
    assert not Source.objects.exists()


# --- as editable notes -----------------------------------------------------------------------


def test_markdown_and_text_files_become_notes_titled_from_their_text(alice, alice_client):
    files = [
        md("front.md", "---\ntitle: From front matter\ntags: [ops]\n---\n# Heading\n\nbody\n"),
        md("heading.md", "```\n# not a heading\n```\n\n## Second level heading\n\ntext\n"),
        SimpleUploadedFile("plain.txt", b"just some words\n"),
        SimpleUploadedFile("report.pdf", b"%PDF-1.4 not really"),
        SimpleUploadedFile("bad.md", b"\xff\xfe"),
    ]
    page = posted(alice_client, upload_data(*files, brought_in_as="notes"))
    assert results(page) == {
        "front.md": "saved",
        "heading.md": "saved",
        "plain.txt": "saved",
        "report.pdf": "refused",
        "bad.md": "refused",
    }
    assert "A .pdf file cannot be an editable note" in page
    assert "Upload it again choosing “As a mirrored source”." in page
    assert "Not valid UTF-8 (byte 0)." in page
    notes = {d.head.title: d for d in Document.objects.filter(owner=alice, kind="note")}
    assert set(notes) == {"From front matter", "Second level heading", "plain"}
    # The text is kept whole, front matter included, and the note is editable.
    assert notes["From front matter"].head.body.startswith("---\ntitle: From front matter")
    link = reverse("notes:detail", args=[notes["plain"].pk])
    assert f'href="{link}"' in page
    assert not Source.objects.exists()


def test_the_same_note_uploaded_again_is_already_there(alice, alice_client):
    data = upload_data(md("a.md", "# A\n\nalpha\n"), brought_in_as="notes")
    posted(alice_client, data)
    data = upload_data(
        md("a.md", "# A\n\nalpha\n"), md("c.md", "# A\n\nother\n"), brought_in_as="notes"
    )
    page = posted(alice_client, data)
    assert results(page) == {"a.md": "already-there", "c.md": "saved"}
    assert Document.objects.filter(owner=alice, kind="note").count() == 2


def test_notes_go_to_the_chosen_space_only_where_the_user_edits(alice, bob, alice_client):
    from spaces import services as space_services
    from spaces.models import Role

    team = space_services.space_create(by=bob, name="Team")
    space_services.member_add(by=bob, space=team, username=alice.username, role=Role.VIEWER)

    def data() -> dict[str, object]:
        files = upload_data(md("a.md", "# A\n\nalpha\n"), brought_in_as="notes")
        return {**files, "upload-space": team.pk}

    assert alice_client.post(UPLOAD_URL, data()).status_code == 403
    assert not Document.objects.filter(owner=alice).exists()
    space_services.member_set_role(by=bob, space=team, user_id=alice.pk, role=Role.EDITOR)
    assert results(posted(alice_client, data())) == {"a.md": "saved"}
    assert Document.objects.get(owner=alice).space_id == team.pk


# --- bounds and access -----------------------------------------------------------------------


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


def test_the_session_keeps_only_the_last_few_reports(alice_client, monkeypatch):
    from externals import views

    monkeypatch.setattr(views, "MAX_KEPT_UPLOAD_REPORTS", 2)
    locations = [
        alice_client.post(UPLOAD_URL, upload_data(md(f"{n}.md", f"# N{n}\n\nx\n")))["Location"]
        for n in range(3)
    ]
    assert len(alice_client.session[views.UPLOAD_REPORTS_SESSION_KEY]) == 2
    assert "upload-results" not in alice_client.get(locations[0]).content.decode()
    assert results(alice_client.get(locations[2]).content.decode()) == {"2.md": "saved"}


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
