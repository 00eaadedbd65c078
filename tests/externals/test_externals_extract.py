"""Extractors: strict UTF-8 with the byte offset of a decode error, BOM
dropped, HTML through trafilatura, PDF page by page with page offsets, binary and unknown
types skipped with a reason, and the extractor's name and version always reported."""

from __future__ import annotations

import pytest

from externals.extract import (
    ExtractionError,
    SkipItem,
    extract,
    kind_of,
)
from tests.local_http import minimal_pdf


def test_markdown_is_strict_utf8_with_the_bom_dropped():
    result = extract("\ufeff# Café\n".encode(), filename="notes/cafe.md")
    assert result.text == "# Café\n"
    assert (result.extractor_name, result.extractor_version, result.pages) == (
        "utf8-text",
        "1",
        None,
    )


def test_a_decode_error_names_the_byte_offset():
    with pytest.raises(ExtractionError, match=r"byte 6 \(ff\)"):
        extract(b"hello \xff world", filename="a.txt")


def test_a_nul_byte_anywhere_makes_a_text_or_html_file_binary():
    """A NUL past the first 8 KB is found too: stored in a snapshot, it would stop SQLite's
    substr()/length() there."""
    late_nul = b"# Notes\n" + b"words " * 2000 + b"\x00 tail\n"
    assert late_nul.index(b"\x00") > 8192
    with pytest.raises(SkipItem, match="binary file"):
        extract(late_nul, filename="a.md")
    with pytest.raises(SkipItem, match="binary file"):
        extract(late_nul, filename="a.txt")
    html = b"<html><body><p>" + b"words " * 2000 + b"\x00</p></body></html>"
    with pytest.raises(SkipItem, match="binary file"):
        extract(html, filename="page.html")
    assert extract(late_nul.replace(b"\x00", b""), filename="a.md").text.endswith(" tail\n")


def test_nul_characters_in_extracted_pdf_text_are_removed_with_page_offsets_kept():
    pdf = minimal_pdf(["Before\x00after one.", "Second\x00 page."])
    result = extract(pdf, filename="a.pdf")
    assert "\x00" not in result.text
    assert result.text == "Beforeafter one.\n\nSecond page."
    assert result.pages == [(1, 0), (2, len("Beforeafter one.\n\n"))]


def test_nul_characters_in_extracted_html_text_are_removed(monkeypatch):
    """The HTML bytes hold no NUL (else the file is binary), but the extractor's output is
    derived text and may still carry one (a decoded entity): it is removed."""
    import trafilatura

    monkeypatch.setattr(trafilatura, "extract", lambda *a, **k: "Main\x00 text of\x00 the page.")
    result = extract(b"<html><title>T</title><body><p>x</p></body></html>", filename="p.html")
    assert result.text == "Main text of the page."
    monkeypatch.setattr(trafilatura, "extract", lambda *a, **k: "\x00\x00")
    with pytest.raises(ExtractionError, match="no main text"):
        extract(b"<html><body><p>x</p></body></html>", filename="p.html")


def test_binary_and_unknown_types_are_skipped_with_a_reason():
    with pytest.raises(SkipItem, match="binary file") as info:
        extract(b"text\x00more", filename="a.md")
    assert info.value.reason.startswith("binary file")
    with pytest.raises(SkipItem, match="unsupported file type"):
        extract(b"fn main() {}", filename="main.rs")
    with pytest.raises(SkipItem, match="no extension"):
        extract(b"abc", filename="Makefile")


def test_content_type_wins_over_the_name():
    assert kind_of("page", "text/html; charset=utf-8") == "html"
    assert kind_of("download.bin", "application/pdf") == "pdf"
    assert kind_of("x.md", "") == "text"


def test_html_goes_through_trafilatura_and_records_its_version():
    html = (
        b"<html><head><title>T</title></head><body><nav>Home | About</nav><article>"
        b"<h1>Heading</h1><p>The main paragraph talks about certbot renewal windows in detail, "
        b"before the expiry warning lands in the shared inbox.</p></article></body></html>"
    )
    result = extract(html, filename="page.html")
    assert "certbot renewal windows" in result.text and "About" not in result.text
    assert result.extractor_name == "trafilatura" and result.extractor_version[0].isdigit()


def test_html_with_no_main_text_is_an_error_not_an_empty_snapshot():
    with pytest.raises(ExtractionError, match="no main text"):
        extract(b"<html><body></body></html>", filename="empty.html")


def test_pdf_pages_are_joined_with_blank_lines_and_located():
    result = extract(minimal_pdf(["First page text.", "Second page text."]), filename="a.pdf")
    assert result.text == "First page text.\n\nSecond page text."
    assert result.pages == [(1, 0), (2, len("First page text.\n\n"))]
    assert result.extractor_name == "pypdf"
    start = result.pages[1][1]
    assert result.text[start:].startswith("Second")


def test_a_pdf_parse_past_its_time_limit_is_stopped(monkeypatch):
    from externals import extract as extractors

    monkeypatch.setattr(extractors, "PDF_PARSE_TIMEOUT_SECONDS", 0.001)
    with pytest.raises(ExtractionError, match=r"PDF file took over 0\.001 seconds to read"):
        extract(minimal_pdf(["Slow page."]), filename="slow.pdf")


def test_a_broken_pdf_is_an_extraction_error():
    with pytest.raises(ExtractionError, match="pypdf failed"):
        extract(b"%PDF-1.4\ngarbage without objects", filename="bad.pdf")
    with pytest.raises(ExtractionError, match="not a PDF"):
        extract(b"plain text pretending", filename="fake.pdf")
