"""Office and CSV files as sources: a folder scan picks them up (a corrupt one fails alone,
its reason on the source page in plain words); an upload is accepted or refused per file;
their snapshots are searched, opened and verified like Markdown, the quote found at its
offsets in the stored text; the rendered view shows their headings and tables; a 2 MB CSV
stays cheap to index and render."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from externals import pipeline, services
from externals.extract import extract
from externals.models import ScanRecord, Source, SourceItem
from notes.rendering import rendered_part
from retrieval.links import evidence_url
from retrieval.models import Passage
from retrieval.search.evidence import EvidenceStatus, open_evidence
from retrieval.search.pipeline import search
from tests.factories import docx_file, pptx_file, xlsx_file

UPLOAD_URL = reverse("externals:source-add", args=["upload"])


@pytest.fixture(autouse=True)
def _quiet(monkeypatch, settings, tmp_path):
    monkeypatch.setattr(pipeline, "embedding_problem", lambda: "")
    settings.DATA_DIR = tmp_path / "data"


@pytest.fixture
def office_folder(tmp_path) -> Path:
    root = tmp_path / "office"
    root.mkdir()
    (root / "runbook.docx").write_bytes(docx_file())
    (root / "plan.pptx").write_bytes(pptx_file())
    (root / "costs.xlsx").write_bytes(xlsx_file())
    (root / "people.csv").write_bytes(b"name,team\nalice,storage\nbob,networking\n")
    (root / "broken.xlsx").write_bytes(xlsx_file()[:900])
    (root / "macros.xlsm").write_bytes(xlsx_file())
    return root


def folder_source(owner, root: Path) -> Source:
    return services.source_create(owner=owner, name="office", kind="folder", location=str(root))


def hits(user, query: str) -> list[Passage]:
    result = search(user=user, query=query, mode="lexical", rerank="off")
    assert not result.error, result.error
    return [hit.passage for hit in result.hits]


def test_a_folder_scan_reads_each_office_file_and_fails_a_corrupt_one_alone(
    alice, alice_client, office_folder
):
    source = folder_source(alice, office_folder)
    record = pipeline.scan_source(source)
    assert record.status == ScanRecord.Status.PARTIAL
    assert (record.items_new, record.items_failed, record.items_skipped) == (4, 1, 1)
    [failure] = record.failures
    assert failure["path"] == "broken.xlsx"
    assert failure["reason"].startswith("not a readable .xlsx file: it is not a ZIP package")
    [skipped] = record.skipped
    assert skipped == {
        "path": "macros.xlsm",
        "reason": "macro-enabled Office file (.xlsm): not read; save it without macros (.xlsx) "
        "to index it",
    }
    items = {item.path: item.document for item in SourceItem.objects.filter(source=source)}
    assert sorted(items) == ["costs.xlsx", "people.csv", "plan.pptx", "runbook.docx"]
    assert items["runbook.docx"].title == "Failover runbook"
    assert items["plan.pptx"].title == "Quarterly plan"
    assert items["people.csv"].title == "people.csv"
    heads = {path: document.head for path, document in items.items()}
    assert heads["costs.xlsx"].extractor_name == "openpyxl"
    assert heads["people.csv"].body.startswith("| name | team |\n| --- | --- |\n")

    page = alice_client.get(reverse("externals:source", args=[source.pk])).content.decode()
    assert "broken.xlsx" in page
    assert "not a readable .xlsx file: it is not a ZIP package" in page
    assert "macro-enabled Office file (.xlsm)" in page


def test_slides_and_headings_cut_passages_that_search_finds(alice, office_folder):
    pipeline.scan_source(folder_source(alice, office_folder))
    [budget] = hits(alice, "budget freeze")
    assert budget.text.startswith("## Slide 1: Quarterly plan")
    assert "Numbers" not in budget.text
    [postmortem] = hits(alice, "postmortem")
    assert postmortem.text.startswith("## Afterwards")
    [networking] = hits(alice, "networking")
    assert "| bob | networking |" in networking.text


def test_evidence_from_a_word_file_is_verified_at_its_offsets(alice, alice_client, office_folder):
    pipeline.scan_source(folder_source(alice, office_folder))
    [passage] = hits(alice, "pg_ctl promote")
    version = passage.version
    assert version.source_path == str(office_folder / "runbook.docx")
    assert version.body[passage.start : passage.end] == passage.text
    assert "Promote the replica with pg_ctl promote." in passage.text

    outcome = open_evidence(alice, passage.document_id, version.pk, passage.pk, version.sha256)
    assert outcome.status == EvidenceStatus.VERIFIED_CURRENT
    page = alice_client.get(evidence_url(passage)).content.decode()
    assert "source file still has the bytes that were indexed" in page
    assert "Promote the replica with pg_ctl promote." in page

    # The Word file changes on disk: the same link now says so instead of verifying.
    (office_folder / "runbook.docx").write_bytes(docx_file(steps=["Something else."]))
    outcome = open_evidence(alice, passage.document_id, version.pk, passage.pk, version.sha256)
    assert outcome.status == EvidenceStatus.SOURCE_CHANGED


def test_an_office_snapshot_offers_its_rendered_view(alice, alice_client, office_folder):
    pipeline.scan_source(folder_source(alice, office_folder))
    document = SourceItem.objects.get(path="runbook.docx").document
    url = reverse("externals:external", args=[document.pk])
    exact = alice_client.get(url).content.decode()
    assert "| promote \\| verify | ops team |" in exact
    rendered = alice_client.get(url, {"view": "rendered"}).content.decode()
    assert re.search(r"<h1[^>]*>Failover</h1>", rendered)
    assert re.search(r"<td>promote \| verify</td>\s*<td>ops team</td>", rendered)


def upload(name: str, data: bytes) -> dict[str, object]:
    return {
        "upload-name": "",
        "upload-trust_tier": "external",
        "upload-stale_after_days": "30",
        "upload-file": [SimpleUploadedFile(name, data)],
    }


def test_the_upload_form_offers_office_files(alice_client):
    page = alice_client.get(reverse("externals:sources")).content.decode()
    [accept] = re.findall(r'<input type="file" name="upload-file"[^>]* accept="([^"]*)"', page)
    assert {".docx", ".pptx", ".xlsx", ".csv", ".md", ".pdf"} <= set(accept.split(","))
    assert "Word (.docx), PowerPoint (.pptx), Excel (.xlsx) or CSV" in page


def test_an_uploaded_word_file_is_added_and_a_corrupt_one_refused(alice, alice_client):
    page = alice_client.post(UPLOAD_URL, upload("plan.pptx", pptx_file()), follow=True)
    assert Source.objects.filter(owner=alice, name="plan.pptx").exists()
    assert "Quarterly plan" in page.content.decode()

    response = alice_client.post(
        UPLOAD_URL, upload("notes.docx", b"PK\x03\x04 not really"), follow=True
    )
    page = response.content.decode()
    assert 'data-upload-result="refused"' in page
    assert "not a readable .docx file: it is not a ZIP package" in page
    assert not Source.objects.filter(owner=alice, name="notes.docx").exists()


@pytest.mark.slow  # indexing the table's text takes ~5 s on PostgreSQL on a loaded machine
def test_a_two_megabyte_csv_is_indexed_and_rendered_within_bounds(alice, tmp_path):
    """Extraction and rendering are timed; the scan's indexing of the ~80 KB table costs
    what any file of that much text costs."""
    root = tmp_path / "big"
    root.mkdir()
    rows = "\n".join(f'{n},{"word " * 12}{n},"q|{n}"' for n in range(40_000))
    data = ("id,text,quote\n" + rows).encode()[:2_000_000]
    (root / "big.csv").write_bytes(data)
    started = time.monotonic()
    extracted = extract(data, filename="big.csv")
    extracting = time.monotonic() - started
    record = pipeline.scan_source(folder_source(alice, root))
    assert record.status == ScanRecord.Status.OK, record.failures
    version = SourceItem.objects.get(path="big.csv").document.head
    assert version.body == extracted.text
    assert len(version.body) < 100_000
    assert version.body.rstrip().endswith(
        "(Cut: only the first 1,000 rows of this file are included.)"
    )
    started = time.monotonic()
    part = rendered_part(sha256=version.sha256, body=version.body, number=1)
    rendering = time.monotonic() - started
    assert "<table>" in part.html
    assert extracting < 2 and rendering < 5, (extracting, rendering)


DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def test_a_url_serving_word_or_csv_is_read_by_its_served_type(alice, settings):
    from tests.local_http import local_server

    settings.LODE_FETCH_ALLOW_PRIVATE = True
    settings.LODE_FETCH_MAX_BYTES = 1_000_000
    with local_server() as server:
        # No extension in either address: the served type alone picks the reader.
        server.routes["/runbook"] = (200, {"Content-Type": DOCX_TYPE}, docx_file())
        server.routes["/stock"] = (
            200,
            {"Content-Type": "text/csv; charset=utf-8"},
            b"item,count\nflour,12\nsugar,7\n",
        )
        server.routes["/macro"] = (
            200,
            {"Content-Type": "application/vnd.ms-word.document.macroEnabled.12"},
            docx_file(),
        )
        texts = {}
        for path in ("/runbook", "/stock"):
            source = services.source_create(
                owner=alice, name=path.strip("/"), kind="url", location=server.url(path)
            )
            record = pipeline.scan_source(source)
            assert record.status == ScanRecord.Status.OK, record.error
            texts[path] = source.items.get().document.head.body
        macro = services.source_create(
            owner=alice, name="macro", kind="url", location=server.url("/macro")
        )
        refused = pipeline.scan_source(macro)
    assert "pg_ctl promote" in texts["/runbook"] and "# " in texts["/runbook"]
    assert "| flour | 12 |" in texts["/stock"]
    assert refused.status == ScanRecord.Status.FAILED
    assert "macroenabled" in refused.error.casefold().replace(".", "").replace("-", "")
