"""Office and data files as Markdown text: Word (.docx), PowerPoint (.pptx), Excel (.xlsx)
and CSV/TSV, so their headings, slides and sheets cut passages like a Markdown file's.

- Word: paragraphs in document order; heading styles (and Title) become `#` headings, list
  paragraphs `-`/`1.` items (indented by level), tables Markdown tables. Headers, footers,
  comments, footnotes, text boxes and pictures are not read.
- PowerPoint: one `## Slide N: title` section per slide, then its text (a text box of
  several paragraphs as a list), its tables, and its speaker notes under `Notes:`.
- Excel: one `## Sheet: name` section per worksheet with its cells as a table (the values
  Excel last calculated; formulas are never evaluated). Empty rows are left out.
- CSV: the whole file as one table. Its encoding is UTF-8 (a BOM dropped) or UTF-16 with a
  BOM; anything else is an error naming the first bad byte, never a guessed or replaced
  character that a citation would then quote. The dialect (`,` `;` tab `|`) is sniffed from
  the first lines.

Bounds: every table keeps at most `MAX_TABLE_ROWS` rows and `MAX_TABLE_COLUMNS` columns,
every cell `MAX_CELL_CHARS` characters, the whole text `MAX_TEXT_CHARS`; what is cut is
said in the text. Table cells are one line each with `|` escaped, so a cell never breaks
its table. The three Office formats are ZIP packages: before anything parses one, its
entry count and declared unpacked size are checked (a ZIP bomb is refused; the reader
never unpacks past a declared size), and then it is parsed in a child process with a wall
clock limit (`PARSE_TIMEOUT_SECONDS`) and a memory limit (`PARSE_MEMORY_BYTES`), so a
pathological file costs one refused item, never a stuck or swollen server process.
Macro-enabled files (.docm, .pptm, .xlsm …) are not read at all (`extract.kind_of`); a
macro inside a .docx/.pptx/.xlsx is never run, only the document's text is read.

Run as `python -m externals.office KIND` (KIND: docx, pptx or xlsx) it is that child: the
file's bytes on stdin, one JSON object on stdout.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Iterator
from datetime import date, datetime, time
from typing import Any

logger = logging.getLogger("lode.externals")

MAX_TABLE_ROWS = 1_000
MAX_TABLE_COLUMNS = 50
MAX_CELL_CHARS = 500
MAX_TEXT_CHARS = 2_000_000
# Rows of a sheet looked at (empty ones included) before the rest is left unread.
MAX_SHEET_ROWS_SCANNED = 100_000
MAX_ZIP_ENTRIES = 5_000
# An Office package's XML is typically 5–20 times its zipped size; a 2 MB file unpacking
# to more than this is a ZIP bomb or not worth what parsing it would cost.
MAX_UNPACKED_BYTES = 64 * 1024 * 1024
PARSE_TIMEOUT_SECONDS = 20.0
PARSE_MEMORY_BYTES = 1024 * 1024 * 1024
# How much of a CSV the dialect is sniffed from: the sniffer's regular expressions are
# quadratic in the worst case, so it gets a few lines, never the file.
CSV_SNIFF_LINES = 20
CSV_SNIFF_CHARS = 4_096
CSV_DELIMITERS = ",;\t|"

# The first bytes of an OLE2 compound file: a legacy .doc/.xls/.ppt, or an Office file
# saved with a password (encryption wraps the ZIP package in one).
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_FORMAT_NAMES = {"docx": "Word", "pptx": "PowerPoint", "xlsx": "Excel"}
_HEADING_STYLE_RE = re.compile(r"^heading (\d)$", re.IGNORECASE)
_PIPE_RE = re.compile(r"(\\*)\|")


class Unreadable(Exception):
    """The file is not readable as its format; the message says why, in plain words."""


class NotText(Exception):
    """The file holds binary data (a NUL character), not text lode indexes."""


def without_nul(text: str) -> str:
    return text.replace("\x00", "")


# --- Markdown pieces ----------------------------------------------------------------------


def cell_text(value: object) -> str:
    """A value as one table cell: one line, at most `MAX_CELL_CHARS`, `|` escaped (with the
    backslashes before it doubled, so the pipe stays escaped whatever precedes it)."""
    text = " ".join(without_nul(_value_text(value)).split())
    if len(text) > MAX_CELL_CHARS:
        text = text[: MAX_CELL_CHARS - 1] + "…"
    return _PIPE_RE.sub(lambda match: match.group(1) * 2 + "\\|", text)


def _value_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == time(0) else value.isoformat(" ")
    if isinstance(value, date | time):
        return value.isoformat()
    return str(value)


def markdown_table(rows: list[list[str]]) -> str:
    """Rows of cell texts (already `cell_text`) as a Markdown table, the first row its header;
    short rows are padded so every row has the table's width."""
    width = max((len(row) for row in rows), default=0)
    if width == 0:
        return ""
    lines = []
    for index, row in enumerate(rows):
        cells = [*row, *[""] * (width - len(row))]
        lines.append("| " + " | ".join(cells) + " |")
        if index == 0:
            lines.append("|" + " --- |" * width)
    return "\n".join(lines)


def one_line(text: str) -> str:
    return " ".join(without_nul(text).split())


def _cut_note(rows_cut: int, columns_cut: bool, what: str) -> str:
    parts = []
    if rows_cut:
        parts.append(f"only the first {rows_cut:,} rows")
    if columns_cut:
        parts.append(f"only the first {MAX_TABLE_COLUMNS:,} columns")
    if not parts:
        return ""
    return f"(Cut: {' and '.join(parts)} of this {what} are included.)"


def bounded_table(
    rows: Iterable[list[object]], what: str, max_chars: int = MAX_TEXT_CHARS
) -> list[str]:
    """The blocks for one table: the table, then a note of what was cut, if anything. Rows
    whose every cell is empty are left out; empty columns at the right are dropped. At most
    `MAX_TABLE_ROWS` rows, and no more than about `max_chars` characters of table."""
    kept: list[list[str]] = []
    size = 0
    rows_cut = 0
    columns_cut = False
    for row in rows:
        if len(kept) >= MAX_TABLE_ROWS or size >= max_chars:
            rows_cut = len(kept)
            break
        if len(row) > MAX_TABLE_COLUMNS:
            columns_cut = columns_cut or any(
                _value_text(value).strip() for value in row[MAX_TABLE_COLUMNS:]
            )
            row = row[:MAX_TABLE_COLUMNS]
        cells = [cell_text(value) for value in row]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            kept.append(cells)
            size += sum(len(cell) + 3 for cell in cells) + 2
    blocks = [markdown_table(kept)] if kept else []
    note = _cut_note(rows_cut, columns_cut, what)
    return [*blocks, note] if note else blocks


class TextBudget:
    """Collects blocks (paragraphs, headings, tables) until `MAX_TEXT_CHARS`; past it, the
    rest of the document is dropped and the text says so."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = MAX_TEXT_CHARS if limit is None else limit
        self.blocks: list[str] = []
        self.size = 0
        self.full = False

    def add(self, block: str) -> bool:
        """Add one block; False once the budget is spent (the caller may stop reading)."""
        if self.full:
            return False
        block = block.strip("\n")
        if not block.strip():
            return True
        if self.size + len(block) + 2 > self.limit:
            self.full = True
            self.blocks.append(
                f"(Cut: the rest of this file is not included; its text stops at "
                f"{self.limit:,} characters.)"
            )
            return False
        self.blocks.append(block)
        self.size += len(block) + 2
        return True

    def remaining(self) -> int:
        """Characters a table may still take, leaving room for the notes after it."""
        return max(self.limit - self.size - 1_000, 0)

    def text(self) -> str:
        return "\n\n".join(self.blocks) + "\n" if self.blocks else ""


# --- Word ---------------------------------------------------------------------------------


def docx_markdown(data: bytes) -> tuple[str, str]:
    """(Markdown text, title property) of a .docx file."""
    import docx
    from docx.table import Table

    document = docx.Document(io.BytesIO(data))
    budget = TextBudget()
    pending_list: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            if pending_list and not budget.add("\n".join(pending_list)):
                break
            pending_list = []
            table = bounded_table(_docx_rows(block), "table", budget.remaining())
            if not all(budget.add(part) for part in table):
                break
            continue
        text = one_line(block.text)
        if not text:
            continue
        item = _docx_list_item(block, text)
        if item is not None:
            pending_list.append(item)
            continue
        if pending_list and not budget.add("\n".join(pending_list)):
            break
        pending_list = []
        if not budget.add(_docx_heading(block, text)):
            break
    if pending_list:
        budget.add("\n".join(pending_list))
    return budget.text(), document.core_properties.title or ""


def _style_name(paragraph: Any) -> str:
    try:
        style = paragraph.style
    except (KeyError, ValueError):  # a style id the styles part does not define
        return ""
    return (style.name or "") if style is not None else ""


def _docx_heading(paragraph: Any, text: str) -> str:
    style = _style_name(paragraph)
    if style.lower() == "title":
        return f"# {text}"
    heading = _HEADING_STYLE_RE.match(style)
    if heading:
        return f"{'#' * min(int(heading.group(1)), 6)} {text}"
    return text


def _docx_list_item(paragraph: Any, text: str) -> str | None:
    """The paragraph as a Markdown list item, or None when it is not in a list (numbering
    properties, or a List Bullet / List Number style)."""
    style = _style_name(paragraph).lower()
    properties = paragraph._p.pPr
    numbering = properties.numPr if properties is not None else None
    if numbering is None and not style.startswith("list"):
        return None
    level = 0
    if numbering is not None and numbering.ilvl is not None and numbering.ilvl.val is not None:
        level = min(int(numbering.ilvl.val), 8)
    marker = "1." if "number" in style else "-"
    return f"{'  ' * level}{marker} {text}"


def _docx_rows(table: Any) -> Iterator[list[object]]:
    for row in table.rows:
        yield [cell.text for cell in row.cells]


# --- PowerPoint ---------------------------------------------------------------------------


def pptx_markdown(data: bytes) -> tuple[str, str]:
    """(Markdown text, title) of a .pptx file: a `## Slide N: title` section per slide; the
    title is the title property, or the first slide's title."""
    import pptx

    presentation = pptx.Presentation(io.BytesIO(data))
    budget = TextBudget()
    first_title = ""
    for number, slide in enumerate(presentation.slides, start=1):
        title_shape = slide.shapes.title
        title = one_line(title_shape.text_frame.text) if title_shape is not None else ""
        first_title = first_title or title
        if not budget.add(f"## Slide {number}: {title}" if title else f"## Slide {number}"):
            break
        skip = title_shape.shape_id if title_shape is not None else None
        blocks = [
            block
            for shape in slide.shapes
            if shape.shape_id != skip
            for block in _shape_blocks(shape, budget.remaining())
        ]
        if slide.has_notes_slide:
            frame = slide.notes_slide.notes_text_frame
            notes = [one_line(p.text) for p in frame.paragraphs] if frame is not None else []
            notes = [line for line in notes if line]
            if notes:
                blocks.append("Notes:\n\n" + "\n\n".join(notes))
        if not all(budget.add(block) for block in blocks):
            break
    return budget.text(), presentation.core_properties.title or first_title


def _shape_blocks(shape: Any, max_chars: int, depth: int = 0) -> list[str]:
    """The Markdown blocks of one shape: a group's shapes in order, a table, or a text frame
    (one paragraph as it is, several as a list indented by their level)."""
    from pptx.shapes.group import GroupShape

    # By class, not `shape_type`, which raises for shapes python-pptx has no type for.
    if isinstance(shape, GroupShape):
        if depth >= 20:  # groups nest without limit in the file format
            return []
        return [
            block for inner in shape.shapes for block in _shape_blocks(inner, max_chars, depth + 1)
        ]
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = ([cell.text for cell in row.cells] for row in shape.table.rows)
        return bounded_table(rows, "table", max_chars)
    if not getattr(shape, "has_text_frame", False) or not shape.has_text_frame:
        return []
    paragraphs = [
        (min(paragraph.level, 8), one_line(paragraph.text))
        for paragraph in shape.text_frame.paragraphs
    ]
    paragraphs = [(level, text) for level, text in paragraphs if text]
    if len(paragraphs) == 1:
        return [paragraphs[0][1]]
    if not paragraphs:
        return []
    return ["\n".join(f"{'  ' * level}- {text}" for level, text in paragraphs)]


# --- Excel --------------------------------------------------------------------------------


def xlsx_markdown(data: bytes) -> tuple[str, str]:
    """(Markdown text, title property) of a .xlsx file: a `## Sheet: name` section per
    worksheet."""
    import openpyxl

    workbook = openpyxl.load_workbook(
        io.BytesIO(data), read_only=True, data_only=True, keep_links=False
    )
    try:
        budget = TextBudget()
        for sheet in workbook.worksheets:
            if not budget.add(f"## Sheet: {one_line(sheet.title)}"):
                break
            rows = _sheet_rows(sheet)
            blocks = bounded_table(rows, "sheet", budget.remaining()) or ["(This sheet is empty.)"]
            if not all(budget.add(block) for block in blocks):
                break
        title = workbook.properties.title or ""
    finally:
        workbook.close()
    return budget.text(), title


def _sheet_rows(sheet: Any) -> Iterator[list[object]]:
    """The sheet's rows (one column past the bound, so a cut can be seen), reading at most
    `MAX_SHEET_ROWS_SCANNED`: a sheet of a million formatted empty rows is not walked."""
    rows = sheet.iter_rows(max_col=MAX_TABLE_COLUMNS + 1, values_only=True)
    for scanned, row in enumerate(rows):
        if scanned >= MAX_SHEET_ROWS_SCANNED:
            return
        yield list(row)


# --- CSV ----------------------------------------------------------------------------------


def decode_csv(data: bytes) -> str:
    """UTF-8 (BOM dropped) or UTF-16 with a BOM; otherwise an error naming the first bad
    byte (a spreadsheet's "CSV" export in a legacy code page has to be saved as UTF-8). A
    NUL character makes the file binary, as it does a text file."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise Unreadable(f"not valid UTF-16: byte {exc.start}") from None
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            bad = data[exc.start : exc.start + 1].hex()
            raise Unreadable(
                f"not valid UTF-8: byte {exc.start} ({bad}); save the CSV file as UTF-8"
            ) from None
    if "\x00" in text:
        raise NotText("binary file (NUL bytes)")
    return text


def csv_dialect(text: str) -> type[csv.Dialect]:
    """The dialect sniffed from the first lines, or Excel's (commas) when they say nothing."""
    sample = "\n".join(text[:CSV_SNIFF_CHARS].splitlines()[:CSV_SNIFF_LINES])
    try:
        return csv.Sniffer().sniff(sample, delimiters=CSV_DELIMITERS)
    except csv.Error:
        return csv.excel


def csv_markdown(data: bytes, *, tab_separated: bool = False) -> str:
    """The file as one Markdown table (bounded like every table)."""
    text = decode_csv(data)
    dialect = csv.excel_tab if tab_separated else csv_dialect(text)
    reader = csv.reader(io.StringIO(text, newline=""), dialect)
    budget = TextBudget()
    try:
        blocks = bounded_table(reader, "file", budget.remaining())
    except csv.Error as exc:
        if "field limit" in str(exc):
            limit = csv.field_size_limit()
            raise Unreadable(
                f"not a readable CSV file: line {reader.line_num} has a cell longer than "
                f"{limit:,} characters"
            ) from None
        raise Unreadable(f"not a readable CSV file: line {reader.line_num}: {exc}") from None
    for block in blocks:
        budget.add(block)
    return budget.text()


# --- Office packages, parsed in a bounded child process ------------------------------------

_CONVERTERS = {"docx": docx_markdown, "pptx": pptx_markdown, "xlsx": xlsx_markdown}


def check_package(data: bytes, kind: str) -> None:
    """Refuse what is not a ZIP package, or one that unpacks to too much, before parsing."""
    suffix = f".{kind}"
    if data.startswith(_OLE_MAGIC):
        raise Unreadable(
            f"not a {suffix} file: it is password-protected or an old binary Office file "
            f"(.doc, .xls, .ppt); save it as {suffix} without a password"
        )
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            entries = package.infolist()
    except (zipfile.BadZipFile, ValueError, EOFError):
        raise Unreadable(
            f"not a readable {suffix} file: it is not a ZIP package, as {suffix} files are; "
            "it is damaged, cut short, or another kind of file renamed"
        ) from None
    if not any(entry.filename == "[Content_Types].xml" for entry in entries):
        raise Unreadable(
            f"not a readable {suffix} file: a ZIP archive, but not an Office document (it has "
            "no [Content_Types].xml)"
        )
    if len(entries) > MAX_ZIP_ENTRIES:
        raise Unreadable(
            f"{suffix} package of {len(entries):,} parts is over the {MAX_ZIP_ENTRIES:,}-part "
            "limit; not read"
        )
    unpacked = sum(entry.file_size for entry in entries)
    if unpacked > MAX_UNPACKED_BYTES:
        raise Unreadable(
            f"{suffix} package unpacks to {unpacked:,} bytes, over the "
            f"{MAX_UNPACKED_BYTES:,}-byte limit; not read"
        )


def office_markdown(data: bytes, kind: str) -> tuple[str, str]:
    """(Markdown text, title) of a .docx/.pptx/.xlsx file, parsed by a child process under
    the time and memory bounds; every failure is an `Unreadable` that says what went wrong."""
    check_package(data, kind)
    answer = run_child("externals.office", kind, data, PARSE_TIMEOUT_SECONDS, f".{kind} file")
    return answer["text"], answer["title"]


def run_child(module: str, kind: str, data: bytes, seconds: float, what: str) -> dict[str, Any]:
    """Run `python -m MODULE KIND` (this interpreter, isolated) on `data` and return the JSON
    object it prints; `Unreadable` when it answers with an error, runs past `seconds` (it is
    killed) or dies without an answer (say, out of memory). `what` names the file in errors."""
    command = [sys.executable, "-I", "-m", module, kind]
    try:
        finished = subprocess.run(command, input=data, capture_output=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        raise Unreadable(f"{what} took over {seconds:g} seconds to read; stopped") from None
    try:
        answer = json.loads(finished.stdout)
    except ValueError:
        logger.warning("%s reader exited %s: %s", kind, finished.returncode, finished.stderr[-999:])
        raise Unreadable(
            f"the {what} reader stopped without an answer (exit code {finished.returncode}; "
            "out of memory or crashed)"
        ) from None
    if "error" in answer:
        raise Unreadable(answer["error"])
    return answer


def limit_child(seconds: float) -> None:
    """A child's own ceilings: memory (address space) and CPU seconds, as a backstop to the
    parent's wall-clock timeout of `seconds`."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (PARSE_MEMORY_BYTES, PARSE_MEMORY_BYTES))
    cpu = int(seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


def child_answer(kind: str, data: bytes) -> dict[str, str]:
    """What the child prints: the text and title, or the error to report."""
    name = _FORMAT_NAMES[kind]
    try:
        text, title = _CONVERTERS[kind](data)
    except MemoryError:
        return {"error": f"the {name} file needs more than the memory allowed to read it"}
    except Exception as exc:  # the libraries raise many types on damaged files
        reason = f"{type(exc).__name__}: {exc}"[:500]
        return {"error": f"not a readable {name} (.{kind}) file: {reason}"}
    return {"text": without_nul(text), "title": title}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in _CONVERTERS:
        print(f"usage: python -m externals.office {{{','.join(_CONVERTERS)}}}", file=sys.stderr)
        return 2
    limit_child(PARSE_TIMEOUT_SECONDS)
    answer = child_answer(argv[0], sys.stdin.buffer.read())
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
