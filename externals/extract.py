"""Turn the raw bytes of a mirrored file or page into the text a snapshot stores.

Each extractor is deterministic for a given library version, and the name and version are
recorded on every snapshot (`Version.extractor_name`/`extractor_version`), so a snapshot can
always be explained and a library upgrade can be told apart from a content change.

- Titles come from the document where it has one: a Markdown file's first `# ` heading, an
  HTML page's `<title>`, a PDF's metadata title; otherwise the scan uses the file name (or
  URL).
- Markdown and plain text: strict UTF-8 (a decode error names its byte offset, never a
  silently replaced character that a citation would then quote), a leading BOM dropped; a
  file with a NUL byte anywhere is binary (skipped).
- HTML: trafilatura (main-content extraction, Markdown output so headings still cut
  passages); nothing extracted is an error, not an empty snapshot that would clear the page.
- PDF: pypdf, page by page, pages joined with a blank line; `pages` gives where each page
  starts in the text so every passage knows its page. Parsed in a child process under a time
  and memory limit (`PDF_PARSE_TIMEOUT_SECONDS`, `externals.office.run_child`).
- Word, PowerPoint, Excel and CSV: Markdown with headings, slides and sheets as sections and
  tables as tables (`externals.office`, which also holds their size, time and memory
  bounds). Macro-enabled Office files (.docm, .xlsm, .pptm …) are skipped, never read.
- Extracted (PDF, HTML, Office) text never holds a NUL character: it is removed (SQLite's string
  functions stop at one, which would break search's context windows).

`SkipItem` means "not text lode indexes" (binary, an unknown type) and is not a failure;
`ExtractionError` is a failure: the previous snapshot stays searchable.
"""

from __future__ import annotations

import io
import json
import re
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pypdf import PdfReader

MARKDOWN_EXTENSIONS = frozenset({".md", ".markdown", ".mdown"})
TEXT_EXTENSIONS = MARKDOWN_EXTENSIONS | frozenset({".txt", ".text"})
HTML_EXTENSIONS = frozenset({".html", ".htm", ".xhtml"})
PDF_EXTENSIONS = frozenset({".pdf"})
# Office packages by extension: the kind names the converter (`externals.office`).
OFFICE_KINDS = {".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx"}
CSV_EXTENSIONS = frozenset({".csv", ".tsv"})
MACRO_ENABLED_EXTENSIONS = frozenset(
    {".docm", ".dotm", ".pptm", ".potm", ".ppsm", ".xlsm", ".xltm"}
)
# What the upload form's file picker offers (any other file is still refused with a reason).
READABLE_EXTENSIONS = (
    TEXT_EXTENSIONS | HTML_EXTENSIONS | PDF_EXTENSIONS | frozenset(OFFICE_KINDS) | CSV_EXTENSIONS
)

MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})
TEXT_TYPES = MARKDOWN_TYPES | frozenset({"text/plain"})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
PDF_TYPES = frozenset({"application/pdf"})
# A fetched file's extractor by its served type (IANA media types; the name decides for
# files on disk). Macro-enabled types are absent, so a web page serving one is refused.
OFFICE_AND_DATA_TYPES = {
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/csv": "csv",
    "text/tab-separated-values": "tsv",
}

MAX_TITLE_CHARS = 500
# A level-1 ATX heading (CommonMark: up to three spaces of indent, `#`, then a space or the
# end of the line; an optional closing run of `#` is not part of the text).
_H1_RE = re.compile(r"^ {0,3}#(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")

# Between two PDF pages in the snapshot text: a blank line, so pages never merge a paragraph.
PAGE_SEPARATOR = "\n\n"
# A PDF of many pages takes longer than an Office file; the bound stays under the 60 s after
# which gunicorn replaces a stuck worker (an upload is read inside its request).
PDF_PARSE_TIMEOUT_SECONDS = 45.0

TEXT_EXTRACTOR = "utf8-text"
# What lode asks trafilatura for beyond its defaults, part of the recorded extractor version:
# the same library with other options gives other text, so it is another extractor.
HTML_OPTIONS = "markdown-links"
TEXT_EXTRACTOR_VERSION = "1"
CSV_EXTRACTOR = "csv-table"
CSV_EXTRACTOR_VERSION = "1"
# How lode turns an Office library's reading into Markdown, part of the recorded version.
OFFICE_OPTIONS = "markdown-1"
# The library that reads each Office kind, named as the snapshot's extractor.
OFFICE_LIBRARIES = {"docx": "python-docx", "pptx": "python-pptx", "xlsx": "openpyxl"}
# Extractors whose text is Markdown (offered rendered as well as exact).
MARKDOWN_EXTRACTORS = frozenset({*OFFICE_LIBRARIES.values(), CSV_EXTRACTOR})


class ExtractionError(Exception):
    """The input should be text but could not be turned into text (a failure to report)."""


class SkipItem(Exception):
    """The input is not something lode indexes; `reason` is shown in the scan record."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Extracted:
    """Text for one snapshot and how it was obtained.

    `pages` is `[(page_number, start_code_point)]` for PDFs (1-based pages, offsets into
    `text`), None otherwise. `title` is a title found in the content (an HTML `<title>`), or
    empty.
    """

    text: str
    extractor_name: str
    extractor_version: str
    pages: list[tuple[int, int]] | None = None
    title: str = field(default="")


def library_version(name: str) -> str:
    try:
        return package_version(name)
    except PackageNotFoundError:  # pragma: no cover - both are pinned dependencies
        return "unknown"


def media_type(content_type: str) -> str:
    """`text/html; charset=utf-8` → `text/html`."""
    return content_type.split(";", 1)[0].strip().lower()


def kind_of(filename: str, content_type: str = "") -> str:
    """The extractor for an input: "text", "html", "pdf", "csv", "tsv" or an Office kind
    ("docx", "pptx", "xlsx"); `SkipItem` for anything else.

    A known content type (a fetched page) wins over the name; otherwise the extension
    decides, because a file on disk carries no type and guessing from bytes would index
    arbitrary files as text.
    """
    mime = media_type(content_type)
    if mime in HTML_TYPES:
        return "html"
    if mime in PDF_TYPES:
        return "pdf"
    if mime in TEXT_TYPES:
        return "text"
    if mime in OFFICE_AND_DATA_TYPES:
        return OFFICE_AND_DATA_TYPES[mime]
    suffix = PurePosixPath(filename).suffix.lower()
    if suffix in HTML_EXTENSIONS:
        return "html"
    if suffix in PDF_EXTENSIONS:
        return "pdf"
    if suffix in TEXT_EXTENSIONS:
        return "text"
    if suffix in OFFICE_KINDS:
        return OFFICE_KINDS[suffix]
    if suffix in CSV_EXTENSIONS:
        return suffix[1:]
    if suffix in MACRO_ENABLED_EXTENSIONS:
        raise SkipItem(
            f"macro-enabled Office file ({suffix}): not read; save it without macros "
            f"(.{suffix[1:-1]}x) to index it"
        )
    raise SkipItem(f"unsupported file type ({suffix or 'no extension'})")


def decode_utf8(data: bytes) -> str:
    """Strict UTF-8 with a leading BOM removed; the error names the first bad byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExtractionError(
            f"not valid UTF-8: byte {exc.start} ({data[exc.start : exc.start + 1].hex()})"
        ) from None
    return text.removeprefix("\ufeff")


def clean_title(title: str) -> str:
    """One line, no NUL, at most `MAX_TITLE_CHARS`: what a document's title may be."""
    return " ".join(without_nul(title).split())[:MAX_TITLE_CHARS]


def markdown_title(text: str) -> str:
    """The text of the first level-1 `# ` heading outside fenced code, or ""."""
    fence = ""
    for line in text.splitlines():
        opened = _FENCE_RE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        heading = _H1_RE.match(line)
        if heading and heading.group(1):
            title = clean_title(heading.group(1))
            if title:
                return title
    return ""


class _TitleParser(HTMLParser):
    """Collects the text of the first `<title>` element (entities decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.inside = False
        self.done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self.done:
            self.inside = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self.inside:
            self.inside, self.done = False, True

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.parts.append(data)


def html_title(data: bytes) -> str:
    """The page's `<title>` text, or "" (the page's own name for itself, which a main-content
    extractor may replace with a heading)."""
    parser = _TitleParser()
    try:
        parser.feed(data.decode("utf-8", errors="replace"))
        parser.close()
    except Exception:  # a malformed page has no usable title; its text may still extract
        return ""
    return clean_title("".join(parser.parts))


def extract_text(data: bytes, *, markdown: bool = False) -> Extracted:
    text = decode_utf8(data)
    title = markdown_title(text) if markdown else ""
    return Extracted(text, TEXT_EXTRACTOR, TEXT_EXTRACTOR_VERSION, None, title)


def extract_html(data: bytes) -> Extracted:
    """Main content of an HTML page via trafilatura, as Markdown."""
    import trafilatura

    try:
        text = trafilatura.extract(
            data,
            output_format="markdown",
            include_comments=False,
            favor_recall=True,
            # Links stay in the text as Markdown links, so the graph can follow a
            # mirrored page's links to the other pages a source mirrors.
            include_links=True,
        )
        metadata = trafilatura.extract_metadata(data)
    except Exception as exc:  # the library's own failure modes are many and undocumented
        raise ExtractionError(f"trafilatura failed: {type(exc).__name__}: {exc}") from None
    if not text or not text.strip():
        raise ExtractionError("trafilatura found no main text in this page")
    # The page's <title> first; trafilatura's guess (og:title, a heading) when it has none.
    title = html_title(data) or clean_title((metadata.title or "") if metadata is not None else "")
    # The bytes had no NUL (`looks_binary`), but entities such as &#0; can still make one.
    text = without_nul(text)
    if not text.strip():
        raise ExtractionError("trafilatura found no main text in this page")
    return Extracted(
        text, "trafilatura", f"{library_version('trafilatura')}+{HTML_OPTIONS}", None, title
    )


def extract_pdf(data: bytes) -> Extracted:
    """`read_pdf` in a child process under a time and memory limit (`externals.office`), so
    a PDF that makes pypdf loop or swell costs one failed item, never a stuck server."""
    from externals import office

    try:
        answer = office.run_child(
            "externals.extract", "pdf", data, PDF_PARSE_TIMEOUT_SECONDS, "PDF file"
        )
    except office.Unreadable as exc:
        raise ExtractionError(str(exc)) from None
    pages = [(number, start) for number, start in answer["pages"]]
    return Extracted(answer["text"], "pypdf", library_version("pypdf"), pages, answer["title"])


def read_pdf(data: bytes) -> Extracted:
    """Text of every page, in order, with the offset where each page starts."""
    from pypdf import PdfReader

    parts: list[str] = []
    pages: list[tuple[int, int]] = []
    offset = 0
    try:
        reader = PdfReader(io.BytesIO(data))
        for number, page in enumerate(reader.pages, start=1):
            # Removed per page, before the page offsets are counted (PDF strings may hold
            # NUL characters, e.g. from a font without a proper encoding).
            text = without_nul(page.extract_text() or "").strip()
            if parts:
                offset += len(PAGE_SEPARATOR)
            pages.append((number, offset))
            parts.append(text)
            offset += len(text)
    except Exception as exc:  # pypdf raises many types on damaged files
        raise ExtractionError(f"pypdf failed: {type(exc).__name__}: {exc}") from None
    return Extracted(
        PAGE_SEPARATOR.join(parts), "pypdf", library_version("pypdf"), pages, _pdf_title(reader)
    )


def _pdf_title(reader: PdfReader) -> str:
    """The document information dictionary's /Title, or "" (absent, or unreadable)."""
    try:
        metadata = reader.metadata
        title = metadata.title if metadata is not None else None
    except Exception:  # damaged metadata must not fail a PDF whose text was read
        return ""
    return clean_title(str(title)) if title else ""


def extract_office(data: bytes, kind: str) -> Extracted:
    """A Word, PowerPoint or Excel file as Markdown (`externals.office`, bounded there)."""
    from externals import office

    try:
        text, title = office.office_markdown(data, kind)
    except office.Unreadable as exc:
        raise ExtractionError(str(exc)) from None
    library = OFFICE_LIBRARIES[kind]
    text = without_nul(text)
    return Extracted(
        text,
        library,
        f"{library_version(library)}+{OFFICE_OPTIONS}",
        None,
        clean_title(title) or markdown_title(text),
    )


def extract_csv(data: bytes, *, tab_separated: bool = False) -> Extracted:
    """A CSV (or TSV) file as one Markdown table (`externals.office`)."""
    from externals import office

    try:
        text = office.csv_markdown(data, tab_separated=tab_separated)
    except office.NotText as exc:
        raise SkipItem(str(exc)) from None
    except office.Unreadable as exc:
        raise ExtractionError(str(exc)) from None
    return Extracted(text, CSV_EXTRACTOR, CSV_EXTRACTOR_VERSION)


def looks_binary(data: bytes) -> bool:
    """A NUL byte anywhere makes a text or HTML file binary: not just in the first 8 KB (git's
    heuristic), because a NUL in stored text breaks SQLite's substr()/length(), which stop
    at it, and so search's context windows. UTF-8 text never needs one."""
    return b"\x00" in data


def without_nul(text: str) -> str:
    """Extracted text with NUL characters removed. Only for derived text (PDF, HTML): the
    snapshot stores what the extractor made of the bytes, not the bytes, so dropping a
    character no reader could see loses nothing a citation could quote."""
    return text.replace("\x00", "")


def extract(data: bytes, *, filename: str, content_type: str = "") -> Extracted:
    """Text of `data` read from `filename` (served as `content_type`, if known).

    Raises `SkipItem` for binary content or an unsupported type, `ExtractionError` for
    text that cannot be decoded or an extractor that fails.
    """
    kind = kind_of(filename, content_type)
    if kind == "pdf":
        if not data.startswith(b"%PDF-"):
            raise ExtractionError("not a PDF file (no %PDF- header)")
        return extract_pdf(data)
    if kind in OFFICE_LIBRARIES:
        return extract_office(data, kind)
    if kind in ("csv", "tsv"):  # NULs judged after decoding: UTF-16 has them in every char
        return extract_csv(data, tab_separated=kind == "tsv")
    if looks_binary(data):
        raise SkipItem("binary file (NUL bytes)")
    if kind == "html":
        return extract_html(data)
    markdown = (
        media_type(content_type) in MARKDOWN_TYPES
        or PurePosixPath(filename).suffix.lower() in MARKDOWN_EXTENSIONS
    )
    return extract_text(data, markdown=markdown)


def main(argv: list[str]) -> int:
    """The PDF child (`python -m externals.extract pdf`): the file on stdin, one JSON object
    on stdout, the text with its page offsets and title, or the error."""
    if argv != ["pdf"]:
        print("usage: python -m externals.extract pdf", file=sys.stderr)
        return 2
    from externals.office import limit_child

    limit_child(PDF_PARSE_TIMEOUT_SECONDS)
    try:
        found = read_pdf(sys.stdin.buffer.read())
    except ExtractionError as exc:
        answer: dict[str, object] = {"error": str(exc)}
    except MemoryError:
        answer = {"error": "the PDF file needs more than the memory allowed to read it"}
    else:
        answer = {"text": found.text, "pages": found.pages, "title": found.title}
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
