"""Source and external pages: login, owner scoping (bob gets 404
on alice's pages), add-source forms, scan now with htmx polling, webhook secret shown once,
snapshot text escaped as one text node, snapshot history, and evidence links to externals.

Externals are built directly from the models (a `notes.Document` of kind "external" plus a
`SourceItem`) so the page tests do not depend on the extractors or a network.
"""

from __future__ import annotations

import re
import tempfile
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from externals.models import ScanRecord, Source
from notes.models import Document
from retrieval.links import evidence_url
from retrieval.models import Passage
from tests.factories import make_source, make_source_external

XSS = "<script>alert('x')</script>"


class TextCollector(HTMLParser):
    """Text nodes of the element with id=snapshot-text, and whether it has child tags."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.chunks: list[str] = []
        self.child_tags = 0
        self.attrs: dict[str, str | None] = {}

    def handle_starttag(self, tag, attrs):
        if self.depth:
            self.depth += 1
            self.child_tags += 1
        elif dict(attrs).get("id") == "snapshot-text":
            self.depth = 1
            self.attrs = dict(attrs)

    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.chunks.append(data)


def snapshot_text(html: str) -> TextCollector:
    parser = TextCollector()
    parser.feed(html)
    return parser


def page_urls(source: Source, external: Document) -> list[str]:
    return [
        reverse("externals:source", args=[source.pk]),
        reverse("externals:scan-status", args=[source.pk]),
        reverse("externals:external", args=[external.pk]),
        reverse("externals:snapshot", args=[external.pk, external.versions.last().pk]),
    ]


# --- login and owner scoping ------------------------------------------------------------


def test_pages_require_login(client, source, external):
    for url in [reverse("externals:sources"), *page_urls(source, external)]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login"))


def test_posts_require_login(client, source):
    for url in (
        reverse("externals:scan-now", args=[source.pk]),
        reverse("externals:rotate-secret", args=[source.pk]),
        reverse("externals:source-add", args=["folder"]),
    ):
        assert client.post(url).status_code == 302
    source.refresh_from_db()
    assert source.webhook_secret == "" and not source.scans.exists()


def test_bob_gets_404_on_alices_pages(bob_client, source, external):
    for url in page_urls(source, external):
        assert bob_client.get(url).status_code == 404, url
    for name in ("externals:scan-now", "externals:rotate-secret"):
        assert bob_client.post(reverse(name, args=[source.pk])).status_code == 404
    source.refresh_from_db()
    assert source.webhook_secret == "" and not source.scans.exists()


def test_bob_cannot_open_alices_snapshot_through_his_own_external(bob, alice_client, external):
    bob_source = make_source(bob, name="Bob docs")
    bob_external = make_source_external(bob_source)
    url = reverse("externals:snapshot", args=[bob_external.pk, external.head_id])
    assert alice_client.get(url).status_code == 404  # alice: not her external
    mixed = reverse("externals:snapshot", args=[external.pk, bob_external.head_id])
    assert alice_client.get(mixed).status_code == 404  # her external, not its snapshot


def test_notes_are_not_externals(alice_client, alice_note):
    assert alice_client.get(reverse("externals:external", args=[alice_note.pk])).status_code == 404


def test_source_list_shows_only_own_sources(alice_client, bob, source, external):
    make_source(bob, name="Bob's secret stash", location="/srv/bob")
    ScanRecord.objects.create(
        source=source, status=ScanRecord.Status.OK, finished_at=timezone.now(), items_seen=7
    )
    page = alice_client.get(reverse("externals:sources")).content.decode()
    assert "Docs" in page and "/srv/docs" in page and "7 seen" in page
    assert "Bob" not in page
    assert re.search(r"<td>1</td>\s*</tr>", page)  # one external


# --- the source list and its forms ------------------------------------------------------


def test_nav_links_to_sources(alice_client):
    page = alice_client.get(reverse("notes:list")).content.decode()
    assert f'href="{reverse("externals:sources")}"' in page


def test_list_has_three_forms_with_csrf(alice_client):
    page = alice_client.get(reverse("externals:sources")).content.decode()
    assert page.count('name="csrfmiddlewaretoken"') >= 4  # three forms + log out
    assert 'enctype="multipart/form-data"' in page
    for kind in ("folder", "url", "upload"):
        assert reverse("externals:source-add", args=[kind]) in page
    assert 'name="folder-stale_after_days"' in page and 'value="30"' in page
    assert '<option value="external" selected>' in page


def form_data(kind: str, **fields) -> dict:
    base = {"name": "Mirror", "trust_tier": "external", "stale_after_days": "30", **fields}
    return {f"{kind}-{key}": value for key, value in base.items()}


MISSING_FOLDER = Path(tempfile.gettempdir()) / "no-such-folder-anywhere"


@pytest.mark.parametrize(
    ("location", "message"),
    [
        # Inside the test settings' root (the temporary directory): outside it, staff too
        # hear only which folders are allowed (test_externals_folder_roots.py).
        (str(MISSING_FOLDER), f"No folder exists at {MISSING_FOLDER}."),
        ("relative/path", "Give an absolute path"),
    ],
)
def test_folder_form_rejects_missing_folder(alice, alice_client, location, message):
    alice.is_staff = True  # staff hear precisely (others: test_externals_folder_privacy.py)
    alice.save()
    url = reverse("externals:source-add", args=["folder"])
    response = alice_client.post(url, form_data("folder", location=location))
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Source.objects.exists()


def test_folder_form_rejects_a_file(alice, alice_client, tmp_path):
    alice.is_staff = True
    alice.save()
    file = tmp_path / "notes.md"
    file.write_text("hi")
    url = reverse("externals:source-add", args=["folder"])
    response = alice_client.post(url, form_data("folder", location=str(file)))
    assert response.status_code == 400
    assert "is a file, not a folder" in response.content.decode()
    assert not Source.objects.exists()


def test_form_rejects_duplicate_name_and_bad_days(alice_client, source, tmp_path):
    url = reverse("externals:source-add", args=["folder"])
    data = form_data("folder", location=str(tmp_path), name="Docs", stale_after_days="0")
    page = alice_client.post(url, data).content.decode()
    assert "You already have a source named “Docs”." in page
    assert "greater than or equal to 1" in page
    assert Source.objects.count() == 1


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("not a url", "Enter a valid URL."),
        ("javascript:alert(1)", "Enter a valid URL."),
        ("ftp://example.com/file.txt", "Only http and https URLs can be mirrored."),
    ],
)
def test_url_form_rejects_bad_urls(alice_client, location, message):
    url = reverse("externals:source-add", args=["url"])
    response = alice_client.post(url, form_data("url", location=location))
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Source.objects.exists()


def test_upload_form_rejects_oversize_and_empty_files(alice_client, settings):
    settings.LODE_SOURCE_MAX_FILE_BYTES = 1024
    url = reverse("externals:source-add", args=["upload"])
    big = SimpleUploadedFile("big.txt", b"x" * 1025, content_type="text/plain")
    data = {**form_data("upload"), "upload-file": big}
    page = alice_client.post(url, data, follow=True).content.decode()
    assert "The file is 1,025 bytes; the limit is 1,024 bytes." in page
    empty = SimpleUploadedFile("empty.txt", b"", content_type="text/plain")
    data = {**form_data("upload"), "upload-file": empty}
    page = alice_client.post(url, data, follow=True).content.decode()
    assert "The submitted file is empty." in page
    assert not Source.objects.exists()


def test_unknown_kind_is_404(alice_client):
    assert alice_client.post(reverse("externals:source-add", args=["ftp"])).status_code == 404


def test_csrf_enforced_on_every_form(alice, source):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    for url in (
        reverse("externals:source-add", args=["folder"]),
        reverse("externals:scan-now", args=[source.pk]),
        reverse("externals:rotate-secret", args=[source.pk]),
    ):
        assert client.post(url, form_data("folder", location="/tmp")).status_code == 403, url
    source.refresh_from_db()
    assert source.webhook_secret == "" and not source.scans.exists()
    assert Source.objects.count() == 1


# --- source detail: scan status, polling, webhook ---------------------------------------


def test_source_detail_shows_settings_scan_failures_and_externals(alice_client, source, external):
    source.no_egress = True
    source.save()
    ScanRecord.objects.create(source=source, status=ScanRecord.Status.OK, items_seen=1)
    ScanRecord.objects.create(
        source=source,
        status=ScanRecord.Status.PARTIAL,
        finished_at=timezone.now(),
        items_seen=4,
        items_failed=1,
        items_rejected=1,
        items_skipped=1,
        failures=[{"path": "broken.pdf", "reason": "extractor crashed"}],
        rejected=[{"path": ".env", "reason": "known secret file"}],
        skipped=[{"path": "logo.png", "reason": "binary file"}],
    )
    page = alice_client.get(reverse("externals:source", args=[source.pk])).content.decode()
    assert "Partly failed" in page and "4 seen" in page
    assert "broken.pdf" in page and "extractor crashed" in page
    assert ".env" in page and "known secret file" in page
    assert "logo.png" in page and "binary file" in page
    assert '<span class="badge no-egress">yes</span>' in page
    assert reverse("externals:external", args=[external.pk]) in page and "guide.md" in page
    assert "3\xa0days ago" in page
    assert 'hx-get="' not in page  # nothing running: no polling
    assert page.count("<tr><td>") == 2  # two scans in the history


def test_scan_history_shows_last_ten(alice_client, source):
    for n in range(12):
        ScanRecord.objects.create(source=source, status=ScanRecord.Status.OK, items_seen=n)
    page = alice_client.get(reverse("externals:source", args=[source.pk])).content.decode()
    assert "last 10" in page and page.count("<tr><td>") == 10


def test_stale_external_has_badge(alice_client, alice):
    source = make_source(alice, stale_after_days=2)
    fresh = make_source_external(source, path="fresh.md", title="Fresh")
    old = make_source_external(source, path="old.md", title="Old", age=timedelta(days=5))
    page = alice_client.get(reverse("externals:source", args=[source.pk])).content.decode()
    assert page.count('class="badge stale"') == 1
    assert (
        'class="badge stale"'
        in alice_client.get(reverse("externals:external", args=[old.pk])).content.decode()
    )
    assert (
        'class="badge stale"'
        not in alice_client.get(reverse("externals:external", args=[fresh.pk])).content.decode()
    )


def test_running_scan_polls_and_done_scan_stops(alice_client, source):
    scan = ScanRecord.objects.create(source=source, items_seen=3)
    status_url = reverse("externals:scan-status", args=[source.pk])
    page = alice_client.get(reverse("externals:source", args=[source.pk])).content.decode()
    assert f'hx-get="{status_url}?n=1"' in page and 'hx-trigger="every 2s"' in page
    assert 'data-state="running"' in page and "Scanning…" in page

    partial = alice_client.get(status_url + "?n=1", HTTP_HX_REQUEST="true")
    assert 'data-state="running"' in partial.content.decode()
    assert "HX-Refresh" not in partial

    scan.status = ScanRecord.Status.OK
    scan.finished_at = timezone.now()
    scan.items_new = 3
    scan.save()
    partial = alice_client.get(status_url + "?n=2", HTTP_HX_REQUEST="true")
    body = partial.content.decode()
    assert 'data-state="ok"' in body and "3 new" in body and "hx-get" not in body
    assert partial["HX-Refresh"] == "true"  # reload to show the new externals


def test_queued_scan_polls_until_a_newer_scan_appears(alice_client, source):
    old = ScanRecord.objects.create(source=source, status=ScanRecord.Status.OK)
    status_url = reverse("externals:scan-status", args=[source.pk])
    body = alice_client.get(f"{status_url}?after={old.pk}&n=1").content.decode()
    assert 'data-state="queued"' in body and f"after={old.pk}&amp;n=2" in body
    body = alice_client.get(f"{status_url}?after={old.pk}&n=150").content.decode()
    assert "hx-get" not in body and "db_worker" in body  # gave up politely
    ScanRecord.objects.create(source=source)
    body = alice_client.get(f"{status_url}?after={old.pk}&n=3").content.decode()
    assert 'data-state="running"' in body and "hx-get" in body


def test_scan_now_enqueues_a_refresh(alice_client, source, monkeypatch, tmp_path):
    from externals import views

    source.location = str(tmp_path)  # a folder "Scan now" may scan (inside the roots)
    source.save()
    calls = []
    monkeypatch.setattr(views, "_enqueue", lambda s, trigger: calls.append((s.pk, trigger)))
    previous = ScanRecord.objects.create(source=source, status=ScanRecord.Status.OK)
    response = alice_client.post(reverse("externals:scan-now", args=[source.pk]))
    assert calls == [(source.pk, "manual")]
    assert response.status_code == 302
    assert response["Location"].endswith(f"?after={previous.pk}")
    page = alice_client.get(response["Location"]).content.decode()
    assert 'data-state="queued"' in page and "hx-get" in page


def test_scan_now_runs_a_real_scan(alice_client, alice, tmp_path, settings):
    """With the immediate task backend the POST scans the folder before redirecting."""
    pytest.importorskip("externals.tasks")
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
    (tmp_path / "guide.md").write_text("# Guide\n\nRotate the certs.\n")
    source = make_source(alice, location=str(tmp_path))
    response = alice_client.post(reverse("externals:scan-now", args=[source.pk]))
    assert response.status_code == 302
    scan = source.scans.get()
    assert scan.status == ScanRecord.Status.OK and scan.items_new == 1
    page = alice_client.get(response["Location"]).content.decode()
    assert 'data-state="ok"' in page and "hx-get" not in page and "guide.md" in page


def test_rotate_secret_shows_it_once(alice_client, source):
    pytest.importorskip("externals.services")
    detail = reverse("externals:source", args=[source.pk])
    assert "not set" in alice_client.get(detail).content.decode()
    response = alice_client.post(reverse("externals:rotate-secret", args=[source.pk]))
    source.refresh_from_db()
    assert source.webhook_secret
    page = response.content.decode()
    secret = re.search(r'<code class="secret">([^<]+)</code>', page).group(1)
    assert "shown only this once" in page and "no-store" in response["Cache-Control"]
    later = alice_client.get(detail).content.decode()
    assert secret not in later and "shown only this once" not in later
    assert ">set</span>" in later
    assert f"/api/sources/{source.pk}/webhook" in later
    assert "X-Lode-Signature: sha256=" in later and "X-Lode-Delivery" in later
    assert "X-Lode-Timestamp: $ts" in later
    _check_signing_recipe(later, secret)


def _check_signing_recipe(page: str, secret: str) -> None:
    """Run the page's own `sig=$(…)` shell line: it must compute what lode checks."""
    import shutil
    import subprocess
    from html import unescape

    from externals.webhooks import sign

    if shutil.which("openssl") is None:
        return
    line = next(x for x in unescape(page).splitlines() if x.startswith("sig=$("))
    body, timestamp = '{"ref":"main"}', "1764547200"
    env = {"ts": timestamp, "body": body, "LODE_WEBHOOK_SECRET": secret, "PATH": "/usr/bin:/bin"}
    script = f'{line}\nprintf %s "$sig"'
    out = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=True)
    assert f"sha256={out.stdout}" == sign(secret, body.encode(), timestamp)


# --- external detail and snapshots -------------------------------------------------------


def test_external_detail_shows_head_age_tier_and_history(alice_client, source, external):
    page = alice_client.get(reverse("externals:external", args=[external.pk])).content.decode()
    assert "fetched 3\xa0days ago" in page
    assert "External snapshot" in page  # trust tier
    assert reverse("externals:source", args=[source.pk]) in page
    collected = snapshot_text(page)
    assert "".join(collected.chunks) == "Second snapshot: rotate certs weekly.\n"
    old, head = external.versions.order_by("number")
    assert reverse("externals:snapshot", args=[external.pk, old.pk]) in page
    for version in (old, head):
        assert version.sha256[:12] in page
    assert "trafilatura 2.0.0" in page and f"<td>{head.byte_size}</td>" in page


def test_old_snapshot_page_shows_old_text_and_points_to_head(alice_client, external):
    old = external.versions.get(number=1)
    page = alice_client.get(
        reverse("externals:snapshot", args=[external.pk, old.pk])
    ).content.decode()
    assert "".join(snapshot_text(page).chunks) == "First snapshot: rotate certs.\n"
    assert "This is an older snapshot" in page
    assert f'data-version-id="{old.pk}"' in page


def test_snapshot_text_is_one_escaped_text_node_with_exact_code_points(alice_client, source):
    body = "\nLeading newline, CRLF\r\nline & <b>tag</b> 🙂 " + XSS + "\n"
    external = make_source_external(source, path="x.html", title="Tricky", bodies=(body,))
    page = alice_client.get(reverse("externals:external", args=[external.pk])).content.decode()
    collected = snapshot_text(page)
    assert collected.child_tags == 0
    assert collected.attrs["data-version-id"] == str(external.head_id)
    assert "".join(collected.chunks) == body  # the code points of the version body
    assert "<b>tag</b>" not in page and XSS not in page


def test_xss_in_title_and_source_name_is_escaped(alice_client, alice):
    source = make_source(alice, name=f"src {XSS}", location=f"/srv/{XSS}")
    external = make_source_external(source, title=f"title {XSS}", bodies=(f"body {XSS}",))
    ScanRecord.objects.create(
        source=source,
        status=ScanRecord.Status.FAILED,
        error=XSS,
        failures=[{"path": XSS, "reason": XSS}],
    )
    for url in (
        reverse("externals:sources"),
        reverse("externals:source", args=[source.pk]),
        reverse("externals:external", args=[external.pk]),
    ):
        page = alice_client.get(url).content.decode()
        assert XSS not in page, url
        assert "&lt;script&gt;" in page, url


def test_annotations_panel_is_included(alice_client, external):
    page = alice_client.get(reverse("externals:external", args=[external.pk])).content.decode()
    assert 'id="annotations"' in page
    assert reverse("externals:annotation-add", args=[external.pk]) in page


# --- evidence links for externals ---------------------------------------------------------


def test_evidence_page_links_to_the_external_pages(alice_client, external):
    passage = Passage.objects.filter(version=external.head).first()
    assert passage is not None
    page = alice_client.get(evidence_url(passage)).content.decode()
    snapshot = reverse("externals:snapshot", args=[external.pk, external.head_id])
    assert f'href="{snapshot}"' in page


def test_evidence_outcome_urls_for_externals(external):
    from retrieval.search.evidence import EvidenceOutcome, EvidenceStatus

    old = external.versions.get(number=1)
    outcome = EvidenceOutcome(
        status=EvidenceStatus.VERIFIED_SUPERSEDED,
        message="",
        document=external,
        version=old,
        head=external.head,
    )
    assert outcome.current_url == reverse("externals:external", args=[external.pk])
    assert outcome.version_url == reverse("externals:snapshot", args=[external.pk, old.pk])


# --- adding sources end to end (immediate task backend, local HTTP server) --------------


@pytest.fixture
def immediate_tasks(settings):
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}


@pytest.fixture
def local_site(tmp_path, settings):
    """Pages served from a folder on 127.0.0.1 (tests never touch the network)."""
    import functools
    import http.server
    import threading

    folder = tmp_path / "site"
    folder.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.LODE_FETCH_ALLOW_PRIVATE = True
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_add_folder_source_scans_it(alice_client, alice, tmp_path, immediate_tasks):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nRotate the certs.\n")
    (docs / ".env").write_text("SECRET=1\n")
    data = form_data("folder", location=str(docs), trust_tier="external_stale", no_egress="on")
    response = alice_client.post(reverse("externals:source-add", args=["folder"]), data)
    source = Source.objects.get(owner=alice)
    assert response.status_code == 302 and response["Location"].endswith("?after=0")
    assert (source.kind, source.location, source.no_egress) == ("folder", str(docs), True)
    assert source.trust_tier == "external_stale"
    page = alice_client.get(response["Location"]).content.decode()
    assert 'data-state="ok"' in page and "hx-get" not in page
    assert "guide.md" in page and ".env" in page  # ingested, and rejected as a secret
    listing = alice_client.get(reverse("externals:sources")).content.decode()
    assert "Succeeded" in listing and "no egress" in listing


def test_add_url_source_fetches_from_local_server(alice_client, alice, local_site, immediate_tasks):
    folder, base = local_site
    (folder / "page.html").write_text(
        "<html><head><title>Runbook</title></head><body><article><h1>Runbook</h1>"
        "<p>Always rotate the staging certificates with certbot before each Friday release."
        "</p></article></body></html>"
    )
    data = form_data("url", location=f"{base}/page.html")
    response = alice_client.post(reverse("externals:source-add", args=["url"]), data)
    assert response.status_code == 302
    source = Source.objects.get(owner=alice, kind="url")
    scan = source.scans.get()
    assert scan.status == ScanRecord.Status.OK, (scan.error, scan.failures)
    document = Document.objects.get(owner=alice, kind=Document.Kind.EXTERNAL)
    page = alice_client.get(reverse("externals:external", args=[document.pk])).content.decode()
    assert "rotate the staging certificates" in "".join(snapshot_text(page).chunks)
    assert "fetched 0\xa0minutes ago" in page


def test_upload_source_is_stored_and_scanned(alice_client, alice):
    upload = SimpleUploadedFile("notes.md", b"# Upload\n\nHello from a file.\n")
    data = {**form_data("upload", name="My upload"), "upload-file": upload}
    response = alice_client.post(reverse("externals:source-add", args=["upload"]), data)
    assert response.status_code == 302
    source = Source.objects.get(owner=alice)
    assert (source.kind, source.location, source.name) == ("upload", "notes.md", "My upload")
    assert source.scans.get().items_new == 1
    page = alice_client.get(response["Location"]).content.decode()
    assert "notes.md" in page and "My upload" in page and 'data-upload-result="saved"' in page


def test_scan_now_on_disabled_source_does_nothing(alice_client, source, monkeypatch):
    from externals import views

    monkeypatch.setattr(views, "_enqueue", lambda *a, **k: pytest.fail("enqueued"))
    source.enabled = False
    source.save()
    response = alice_client.post(reverse("externals:scan-now", args=[source.pk]), follow=True)
    assert "This source is disabled" in response.content.decode()


def test_search_and_evidence_show_the_age_of_an_external_snapshot(alice, alice_client, tmp_path):
    """The age shows wherever a snapshot is cited: search results and verified opening."""
    from datetime import timedelta

    from django.utils import timezone

    from externals.pipeline import scan_source
    from externals.services import source_create
    from notes.models import Version
    from retrieval.models import Passage

    root = tmp_path / "site"
    root.mkdir()
    (root / "page.md").write_text("# Wombats\n\nWombats produce cube-shaped droppings.\n")
    source = source_create(owner=alice, name="zoo", kind="folder", location=str(root))
    scan_source(source)
    passage = Passage.objects.get(document__source_items__source=source, is_head=True)
    Version.objects.filter(pk=passage.version_id).update(
        created_at=timezone.now() - timedelta(days=3)
    )
    page = alice_client.get("/search", {"q": "wombats", "mode": "lexical"}).content.decode()
    assert (
        "fetched 3\xa0days ago" in page
    )  # the calm view's age ("snapshot fetched … ago" with adv=1)
    from retrieval.links import evidence_url

    passage.refresh_from_db()
    evidence = alice_client.get(evidence_url(passage)).content.decode()
    assert "snapshot fetched" in evidence and "3\xa0days ago" in evidence


@pytest.fixture
def scanned_external(alice, tmp_path) -> Document:
    """An external mirrored from a folder source by a real scan, next to one of alice's
    notes on the same subject (so a search finds a hit of each kind)."""
    from externals.pipeline import scan_source
    from externals.services import source_create
    from notes.services import note_create

    root = tmp_path / "site"
    root.mkdir()
    (root / "wombats.md").write_text(
        "# Wombats\n\nWombats produce cube-shaped droppings every night.\n"
    )
    source = source_create(owner=alice, name="zoo", kind="folder", location=str(root))
    scan_source(source)
    note_create(owner=alice, title="Wombat notes", body="Wombats dig burrows with their claws.\n")
    return Document.objects.get(owner=alice, kind=Document.Kind.EXTERNAL)


def links_of(html: str, css_class: str) -> dict[str, str]:
    """Title → href of every `<a class="{css_class}">` of a page (hrefs unescaped)."""
    found = re.findall(rf'<a class="{css_class}" href="([^"]*)">([^<]*)</a>', html)
    return {title: href.replace("&amp;", "&") for href, title in found}


def test_search_hit_titles_open_the_page_of_each_kind_of_document(alice_client, scanned_external):
    """Each hit's title opens its own kind of page: an external's never the note view (a 404)."""
    page = alice_client.get("/search", {"q": "wombats", "mode": "lexical"}).content.decode()
    titles = links_of(page, "hit-title")
    # An external is titled by its first `# ` heading.
    assert set(titles) == {"Wombats", "Wombat notes"}
    snapshot = alice_client.get(titles["Wombats"])
    assert snapshot.status_code == 200
    assert snapshot.templates[0].name == "externals/external_detail.html"
    text = "".join(snapshot_text(snapshot.content.decode()).chunks)
    assert "cube-shaped droppings" in text
    assert f'data-version-id="{scanned_external.head_id}"' in snapshot.content.decode()
    note_page = alice_client.get(titles["Wombat notes"])
    assert note_page.status_code == 200
    assert "dig burrows" in note_page.content.decode()


def test_ask_page_links_an_external_claim_and_pinned_external_to_its_pages(
    alice_client, scanned_external
):
    """The answer page showed a claim's external source without a link, and linked a
    pinned external to the note view."""
    response = alice_client.post(
        "/ask",
        {"question": "What do wombats produce?", "pinned_document_id": scanned_external.pk},
    )
    assert response.status_code == 303
    page = alice_client.get(response["Location"]).content.decode()
    assert 'data-decision="ANSWER"' in page
    supports = links_of(page, "support-title")
    assert "Wombats" in supports
    snapshot = alice_client.get(supports["Wombats"])
    assert snapshot.status_code == 200
    assert "cube-shaped droppings" in "".join(snapshot_text(snapshot.content.decode()).chunks)
    pinned = re.search(r'About the note <a href="([^"]+)">Wombats</a>', page)
    assert pinned is not None
    assert alice_client.get(pinned.group(1)).status_code == 200
    form = alice_client.get("/ask", {"pinned": scanned_external.pk}).content.decode()
    pinned = re.search(r'Asking about <a href="([^"]+)">Wombats</a>', form)
    assert pinned is not None
    assert alice_client.get(pinned.group(1)).status_code == 200
