"""Turn the raw bytes of a mirrored file or page into the text a snapshot stores (issue 6, item 1).

Each extractor is deterministic for a given library version, and the name and version are
recorded on every snapshot (`Version.extractor_name`/`extractor_version`), so a snapshot can
always be explained and a library upgrade can be told apart from a content change.

- Markdown and plain text: strict UTF-8 (a decode error names its byte offset, never a
  silently replaced character that a citation would then quote), a leading BOM dropped; a
  file with a NUL byte anywhere is binary (skipped).
- HTML: trafilatura (main-content extraction, Markdown output so headings still cut
  passages); nothing extracted is an error, not an empty snapshot that would clear the page.
- PDF: pypdf, page by page, pages joined with a blank line; `pages` gives where each page
  starts in the text so every passage knows its page.
- Extracted (PDF, HTML) text never holds a NUL character: it is removed (SQLite's string
  functions stop at one, which would break search's context windows).

`SkipItem` means "not text lode indexes" (binary, an unknown type) and is not a failure;
`ExtractionError` is a failure: the previous snapshot stays searchable.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import PurePosixPath

TEXT_EXTENSIONS = frozenset({".md", ".markdown", ".mdown", ".txt", ".text"})
HTML_EXTENSIONS = frozenset({".html", ".htm", ".xhtml"})
PDF_EXTENSIONS = frozenset({".pdf"})

TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown"})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
PDF_TYPES = frozenset({"application/pdf"})

# Between two PDF pages in the snapshot text: a blank line, so pages never merge a paragraph.
PAGE_SEPARATOR = "\n\n"

TEXT_EXTRACTOR = "utf8-text"
TEXT_EXTRACTOR_VERSION = "1"


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


def _library_version(name: str) -> str:
    try:
        return package_version(name)
    except PackageNotFoundError:  # pragma: no cover - both are pinned dependencies
        return "unknown"


def media_type(content_type: str) -> str:
    """`text/html; charset=utf-8` → `text/html`."""
    return content_type.split(";", 1)[0].strip().lower()


def kind_of(filename: str, content_type: str = "") -> str:
    """The extractor for an input: "text", "html" or "pdf"; `SkipItem` for anything else.

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
    suffix = PurePosixPath(filename).suffix.lower()
    if suffix in HTML_EXTENSIONS:
        return "html"
    if suffix in PDF_EXTENSIONS:
        return "pdf"
    if suffix in TEXT_EXTENSIONS:
        return "text"
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


def extract_text(data: bytes) -> Extracted:
    return Extracted(decode_utf8(data), TEXT_EXTRACTOR, TEXT_EXTRACTOR_VERSION)


def extract_html(data: bytes) -> Extracted:
    """Main content of an HTML page via trafilatura, as Markdown."""
    import trafilatura

    try:
        text = trafilatura.extract(
            data, output_format="markdown", include_comments=False, favor_recall=True
        )
        metadata = trafilatura.extract_metadata(data)
    except Exception as exc:  # the library's own failure modes are many and undocumented
        raise ExtractionError(f"trafilatura failed: {type(exc).__name__}: {exc}") from None
    if not text or not text.strip():
        raise ExtractionError("trafilatura found no main text in this page")
    title = (metadata.title or "").strip() if metadata is not None else ""
    # The bytes had no NUL (`looks_binary`), but entities such as &#0; can still make one.
    text, title = without_nul(text), without_nul(title)
    if not text.strip():
        raise ExtractionError("trafilatura found no main text in this page")
    return Extracted(text, "trafilatura", _library_version("trafilatura"), None, title[:500])


def extract_pdf(data: bytes) -> Extracted:
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
    return Extracted(PAGE_SEPARATOR.join(parts), "pypdf", _library_version("pypdf"), pages)


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
    if looks_binary(data):
        raise SkipItem("binary file (NUL bytes)")
    if kind == "html":
        return extract_html(data)
    return extract_text(data)
