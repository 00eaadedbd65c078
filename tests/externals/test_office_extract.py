"""Office and data files as Markdown (externals.office): Word headings, lists and tables;
PowerPoint slides with their notes; Excel sheets as tables; CSV as a table with its dialect
sniffed and its encoding strict; bounds on rows, columns, cells and text said in the text;
and a clear error for every corrupt file, ZIP bomb, legacy or encrypted file and parse that
runs out of time."""

from __future__ import annotations

import time

import pytest

from externals import office
from externals.extract import ExtractionError, SkipItem, extract, kind_of
from tests.factories import (
    docx_file,
    pptx_file,
    with_damaged_part,
    xlsx_file,
    zip_package,
)

CONTENT_TYPES = b'<?xml version="1.0"?><Types xmlns="x"/>'


def test_a_word_file_keeps_its_headings_lists_and_tables():
    result = extract(docx_file(), filename="runbook.docx")
    assert result.text == (
        "# Failover\n\n"
        "Promote the replica with pg_ctl promote.\n\n"
        "- Check the replication lag\n"
        "1. Flip the DNS record\n\n"
        "| Step | Owner |\n"
        "| --- | --- |\n"
        "| promote \\| verify | ops team |\n\n"
        "## Afterwards\n\n"
        "Write the postmortem within two days.\n"
    )
    assert result.title == "Failover runbook"
    assert result.extractor_name == "python-docx"
    assert result.extractor_version == "1.2.0+markdown-1"
    assert result.pages is None


def test_a_word_file_without_a_title_property_is_titled_by_its_first_heading():
    assert extract(docx_file(title=""), filename="a.docx").title == "Failover"


def test_a_presentation_has_a_section_per_slide_with_its_notes_and_tables():
    result = extract(pptx_file(), filename="plan.pptx")
    assert result.text == (
        "## Slide 1: Quarterly plan\n\n"
        "- Ship hybrid search\n"
        "  - Tune the reranker\n\n"
        "Notes:\n\n"
        "Mention the budget freeze.\n\n"
        "## Slide 2: Numbers\n\n"
        "| Quarter | Revenue |\n"
        "| --- | --- |\n"
        "| Q1 | 42 |\n"
    )
    assert result.title == "Quarterly plan"
    assert result.extractor_name == "python-pptx"


def test_text_inside_grouped_shapes_is_read():
    import io

    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])  # blank: no title
    group = slide.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(1), Inches(2), Inches(1)).text = "Grouped words"
    out = io.BytesIO()
    deck.save(out)
    assert office.pptx_markdown(out.getvalue()) == ("## Slide 1\n\nGrouped words\n", "")


def test_a_workbook_has_a_section_per_sheet_with_a_table():
    result = extract(xlsx_file(), filename="costs.xlsx")
    assert result.text == (
        "## Sheet: Costs\n\n"
        "| Item | Monthly cost |\n"
        "| --- | --- |\n"
        "| Disk | 12 |\n"
        "| CPU | 3.5 |\n\n"
        "## Sheet: Notes\n\n"
        "(This sheet is empty.)\n"
    )
    assert result.extractor_name == "openpyxl"


def test_a_sheet_over_the_bounds_is_cut_and_says_so(monkeypatch):
    """Bounds checked in this process (the converter the child runs), so they can be small."""
    monkeypatch.setattr(office, "MAX_TABLE_ROWS", 3)
    monkeypatch.setattr(office, "MAX_TABLE_COLUMNS", 2)
    monkeypatch.setattr(office, "MAX_CELL_CHARS", 10)
    rows = [("a", "b", "c"), ("x" * 50, "2", ""), ("3", "4", ""), ("5", "6", ""), ("7", "8", "")]
    text, _ = office.xlsx_markdown(xlsx_file(rows))
    assert "| a | b |\n| --- | --- |\n| xxxxxxxxx… | 2 |\n| 3 | 4 |\n" in text
    assert "| 5 |" not in text
    assert "(Cut: only the first 3 rows and only the first 2 columns of this sheet" in text


def test_the_whole_text_is_bounded_and_says_where_it_stops(monkeypatch):
    monkeypatch.setattr(office, "MAX_TEXT_CHARS", 200)
    text, _ = office.docx_markdown(docx_file(steps=[f"Step {n} of many." for n in range(40)]))
    assert len(text) < 400
    assert text.rstrip().endswith("its text stops at 200 characters.)")
    assert "Step 0 of many." in text and "Step 39" not in text


def test_csv_dialect_is_sniffed_and_quotes_are_kept():
    data = '\ufeffname;note\nalpha;"one; two"\nbeta;"say ""hi"""\n'.encode()
    result = extract(data, filename="people.csv")
    assert result.text == (
        '| name | note |\n| --- | --- |\n| alpha | one; two |\n| beta | say "hi" |\n'
    )
    assert (result.extractor_name, result.extractor_version, result.title) == (
        "csv-table",
        "1",
        "",
    )


def test_tsv_and_utf16_csv_are_read():
    assert (
        extract(b"a\tb\n1\t2\n", filename="t.tsv").text == "| a | b |\n| --- | --- |\n| 1 | 2 |\n"
    )
    utf16 = "x,y\nCafé,2\n".encode("utf-16")
    assert "| Café | 2 |" in extract(utf16, filename="u.csv").text


def test_csv_cells_stay_in_their_table():
    """A `|` is escaped (a backslash before it too), a line break inside quotes becomes a
    space, and empty rows are left out."""
    data = b'a,b\n"x|y","back\\\\|slash"\n,\n"two\nlines",z\n'
    text = extract(data, filename="c.csv").text
    assert text == (
        "| a | b |\n| --- | --- |\n| x\\|y | back\\\\\\\\\\|slash |\n| two lines | z |\n"
    )
    for line in text.splitlines():
        assert line.replace("\\\\", "").replace("\\|", "").count("|") == 3


def test_broken_utf8_in_a_csv_is_an_error_naming_the_byte():
    """Never a replacement character: a citation quotes the stored text."""
    with pytest.raises(ExtractionError, match=r"not valid UTF-8: byte 7 \(e9\); save the CSV"):
        extract(b"a,b\nCaf\xe9,2\n", filename="latin1.csv")


def test_a_csv_with_a_nul_byte_is_binary():
    with pytest.raises(SkipItem, match="binary file"):
        extract(b"a,b\n1,\x002\n", filename="x.csv")


def test_a_csv_cell_past_the_csv_field_limit_is_a_clear_error():
    with pytest.raises(ExtractionError, match="line 1 has a cell longer than 131,072 characters"):
        extract(b"a," + b"y" * 200_000 + b"\n", filename="big.csv")


def test_a_two_megabyte_csv_is_read_quickly_into_a_bounded_table():
    """One long line of 180,000 columns and 60,000 rows: each keeps only what the bounds
    allow, in well under a second."""
    wide = ",".join(["cell"] * 180_000).encode()
    tall = "\n".join(f"{n},name {n},{n * 2}" for n in range(100_000)).encode()[:2_000_000]
    for data in (wide, tall):
        started = time.monotonic()
        text = extract(data, filename="big.csv").text
        assert time.monotonic() - started < 2.0
        assert len(text) < 100_000
        assert "(Cut: only the first" in text


@pytest.mark.parametrize(
    ("filename", "build", "part", "kind"),
    [
        ("a.docx", docx_file, "word/document.xml", "Word"),
        ("a.pptx", pptx_file, "ppt/slides/slide1.xml", "PowerPoint"),
        ("a.xlsx", xlsx_file, "xl/worksheets/sheet1.xml", "Excel"),
    ],
)
def test_a_corrupt_office_file_is_a_clear_error(filename, build, part, kind):
    suffix = filename[1:]
    good = build()
    with pytest.raises(ExtractionError, match=rf"not a readable {suffix} file: it is not a ZIP"):
        extract(good[: len(good) // 2], filename=filename)  # cut short: no ZIP directory
    with pytest.raises(ExtractionError, match=rf"not a readable {suffix} file: it is not a ZIP"):
        extract(b"just some text", filename=filename)
    with pytest.raises(ExtractionError, match="a ZIP archive, but not an Office document"):
        extract(zip_package({"notes.txt": b"hello"}), filename=filename)
    with pytest.raises(ExtractionError, match=rf"not a readable {kind} \({suffix}\) file: "):
        extract(with_damaged_part(good, part), filename=filename)


def test_an_encrypted_or_legacy_office_file_is_named_as_such():
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 512
    with pytest.raises(ExtractionError, match="password-protected or an old binary Office"):
        extract(ole, filename="secret.xlsx")


def test_a_zip_bomb_is_refused_before_it_is_parsed():
    bomb = zip_package(
        {"[Content_Types].xml": CONTENT_TYPES, "word/document.xml": b"<" * (70 * 1024 * 1024)}
    )
    assert len(bomb) < 200_000
    with pytest.raises(ExtractionError, match=r"unpacks to 73,400,3\d\d bytes, over the"):
        extract(bomb, filename="bomb.docx")
    many = zip_package(
        {"[Content_Types].xml": CONTENT_TYPES, **{f"p{n}": b"" for n in range(5_001)}},
        compress=False,
    )
    with pytest.raises(ExtractionError, match=r"5,002 parts is over the 5,000-part limit"):
        extract(many, filename="many.xlsx")


def test_a_parse_past_its_time_limit_is_stopped(monkeypatch):
    monkeypatch.setattr(office, "PARSE_TIMEOUT_SECONDS", 0.001)
    with pytest.raises(ExtractionError, match=r"\.docx file took over 0\.001 seconds to read"):
        extract(docx_file(), filename="slow.docx")


def test_a_reader_that_dies_without_an_answer_is_an_error(monkeypatch):
    monkeypatch.setattr(office.sys, "executable", "/bin/false")
    with pytest.raises(ExtractionError, match=r"reader stopped without an answer \(exit code 1"):
        extract(pptx_file(), filename="deck.pptx")


@pytest.mark.parametrize("name", ["a.docm", "b.xlsm", "c.pptm", "d.XLTM"])
def test_macro_enabled_files_are_not_read(name):
    with pytest.raises(SkipItem, match=r"macro-enabled Office file \(\.\w+\): not read; save it"):
        kind_of(name)


def test_office_kinds_go_by_the_extension():
    assert [kind_of(n) for n in ("a.DOCX", "b.pptx", "c.xlsx", "d.csv", "e.tsv")] == [
        "docx",
        "pptx",
        "xlsx",
        "csv",
        "tsv",
    ]
    with pytest.raises(SkipItem, match=r"unsupported file type \(\.doc\)"):
        kind_of("old.doc")
