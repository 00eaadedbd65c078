"""The one sanitiser: note markdown → safe HTML, rendered once per version, in parts.

markdown-it-py runs with raw HTML disabled (so `<script>` in a note comes out as text), its
link validation on (no `javascript:`/`vbscript:`/`data:` links) and linkify-it turning bare
URLs in text into links (never inside code or an existing link). nh3 (the ammonia
sanitiser) then allows only a fixed set of tags, attributes and URL schemes as a second,
independent layer, and puts `rel="noopener noreferrer nofollow"` on every link. bleach is
not used: its html5lib tree walker is quadratic in the children of one element, so a
one-line table of hundreds of thousands of cells ran for minutes; nh3 and linkify are linear.

Task lists and footnotes come from mdit-py-plugins. `[[Title]]`/`[[Title|label]]` wiki links
become a placeholder that is the same for every reader, so the per-version cache stays
shared; `link_wiki` resolves the placeholders against the reader's own notes at request
time, so nobody's note is ever linked from another's.

Large notes are shown in parts (`split_parts`), each cached by the version's SHA-256,
`RENDERER_VERSION` and the parser and sanitiser versions, so a page request renders at most
one bounded part, once. A part is bounded by its source length, its costly inline marks, the
table cells it renders and its structure (nesting depth, links, footnotes, headings, tokens);
a part over a bound is shown as escaped text under a notice. Images load only from lode's own
origin, a `data:image/…` URL or a host in `LODE_REMOTE_IMAGE_HOSTS`; any other becomes a link,
so a note cannot put a tracking pixel in front of the people it is shared with.
"""

from __future__ import annotations

import bisect
import functools
import html as html_lib
import itertools
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version as package_version
from typing import NamedTuple
from urllib.parse import urlsplit

import nh3
from django.conf import settings
from django.core.cache import caches
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.common.utils import mdTrim
from markdown_it.renderer import RendererHTML
from markdown_it.rules_block.state_block import StateBlock
from markdown_it.rules_block.table import escapedSplit, getLine
from markdown_it.rules_block.table import table as gfm_table
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markdown_it.utils import OptionsDict
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.tasklists import tasklists_plugin

logger = logging.getLogger("lode.rendering")

# Bump whenever the HTML for the same markdown changes (pipeline, options, allow-lists or
# the part bound): cached renderings of older versions are then never served again.
RENDERER_VERSION = 6
# The packages whose upgrade can change the HTML for the same markdown: part of the cache
# key too, so an upgraded sanitiser (say, a tightened allow-list) is never bypassed by
# HTML cached under the old one.
RENDER_PACKAGES = ",".join(
    f"{name}={package_version(name)}"
    for name in ("markdown-it-py", "mdit-py-plugins", "linkify-it-py", "nh3")
)
# Rendered parts live in their own cache (settings.CACHES["renders"]), so they never evict
# the login throttle's counters in the default cache, nor the other way round.
RENDER_CACHE = "renders"

# A part is at most PART_MAX_CHARS characters of markdown source and holds at most
# PART_MAX_MARKS of the characters that start costly inline markup. Rendering is linear, but
# markdown-it-py costs ~1 µs per plain character but 20–250 µs per table cell, link or
# emphasis (token objects; URL parsing and normalising, in Python): 50,000 characters of
# bare domains took 1.2 s, of a table with a link per row 0.6 s, of prose 0.1 s. The
# bounds keep the densest part near 0.3 s on a loaded machine (bench/note_render.py) and
# its HTML (≤ 12× the source, for bare domains turned into links) far under 1 MB.
PART_MAX_CHARS = 20_000
PART_MAX_MARKS = 1_000
# Emphasis, code, links and images, entities, strikethrough, autolinks, and the `:`/`.` of
# URLs and bare domains. Table pipes are left out: cells are counted on their own.
_MARK_CHARS = "*_`[]!&\\~<:."
_MARK_STEP = 1_024
# Table cells a part may render: ~20–40 µs each (tokens, an inline parse, nh3), so ~0.3 s
# and ~100 KB of HTML at most. Counted per table line (its column count), not per pipe: a
# row of one character under a wide header still renders a cell per column.
PART_MAX_CELLS = 10_000
# Cells never cut a part shorter than this window (the cut then falls in its second half),
# so a table of hundreds of columns and one-character rows makes parts of at least ~1,000
# characters — not tens of thousands of parts — and the renderer's own cell bound applies.
PART_MIN_CHARS = 2_000
# The last line of defence: a part whose HTML comes out longer than this (no input known
# today does: the densest, bare domains, is ~12× its source) is shown as escaped text.
PART_MAX_HTML_CHARS = 500_000

ALLOWED_TAGS = frozenset(
    [
        "a",
        "abbr",
        "b",
        "blockquote",
        "br",
        "code",
        "del",
        "em",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "i",
        "img",
        "input",  # a task list's checkbox: forced to a disabled checkbox (below)
        "li",
        "ol",
        "p",
        "pre",
        "s",
        "section",  # the footnotes at the end
        "small",  # the note under a remote image that was not loaded
        "span",  # a wiki link's placeholder (class "wikilink" only)
        "strong",
        "sup",  # a footnote reference
        "table",
        "tbody",
        "td",
        "th",
        "thead",
        "tr",
        "ul",
    ]
)
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title", "id"},
    "img": {"src", "alt", "title"},
    "li": {"id"},
    "ol": {"start"},
    "span": {"title"},
}
# The classes the renderer's plugins put on their elements, and no others: a class could
# otherwise borrow the look of the page's own controls.
ALLOWED_CLASSES = {
    "a": {"footnote-backref", "wikilink", "unresolved"},
    "hr": {"footnotes-sep"},
    "input": {"task-list-item-checkbox"},
    "li": {"task-list-item", "footnote-item"},
    "ol": {"contains-task-list", "footnotes-list"},
    "section": {"footnotes"},
    "span": {"wikilink"},
    "sup": {"footnote-ref"},
    "ul": {"contains-task-list"},
}
# A checkbox may say whether it is ticked, nothing else: whatever an <input> says, it comes
# out as a disabled checkbox without a name (a note's tick boxes are never a form field).
# Each is labelled "Task" (axe: every form control has a label); ticked or not is its state.
INPUT_ATTRIBUTE_VALUES = {"type": {"checkbox"}, "checked": {"checked"}, "disabled": {"disabled"}}
INPUT_FORCED_ATTRIBUTES = {"type": "checkbox", "disabled": "disabled", "aria-label": "Task"}
# The footnote plugin's anchors (`fn1`, `fnref1`, `fnref1:2`): the only ids a note may set,
# so no note can give an element the id of one of the page's own.
_FOOTNOTE_ID = re.compile(r"fn(?:ref)?[0-9]{1,9}(?::[0-9]{1,9})?")
ALLOWED_PROTOCOLS = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"
# The inline images markdown-it accepts (its link validation allows no other `data:` URL):
# bytes in the note itself, so nothing is fetched from anywhere.
_DATA_IMAGE = re.compile(r"data:image/(?:gif|png|jpeg|webp);", re.IGNORECASE)
# What a remote image that is not loaded says, after the link to it.
_REMOTE_IMAGE_NOTE = "(remote image, not loaded)"

# Where one render keeps the table cells it may still make and the remote hosts images may
# load from (in markdown-it's `env`, which is per call: nothing shared between threads or
# with other MarkdownIt instances).
_CELLS_LEFT = "lode_table_cells_left"
_IMAGE_HOSTS = "lode_remote_image_hosts"

# Lists and block quotes inside each other deeper than this show the part as text. A list
# level is two of markdown-it's nesting levels (the list and its item) and a paragraph and
# its text two more, so its own limit is set above what this depth needs: the parser never
# drops content (as it silently does past its limit) before the depth is checked, and its
# recursion stays bounded whatever the note holds.
MAX_NESTING_DEPTH = 20
_PARSER_MAX_NESTING = 2 * MAX_NESTING_DEPTH + 4
# What one part may hold and still be rendered formatted: counted, not timed, so every
# machine draws the same line. The links and footnotes sit above what the mark bound lets a
# part hold (~1,200 bare domains, ~1,200 footnote pieces for ~600 inline footnotes), so a
# part cut by the bounds above falls back only for markup they do not count (headings, list
# items) or for nesting; called on a whole body (`render_markdown`) they bound it alone.
# bench/render_pathological.py: the densest parts render in ~0.2 s of CPU.
PART_MAX_LINKS = 2_000  # links, bare URLs made links and images
PART_MAX_FOOTNOTES = 2_000  # footnote references and the footnotes shown for them
PART_MAX_HEADINGS = 2_000
PART_MAX_TOKENS = 40_000  # everything markdown-it makes: blocks and inline pieces


def _header_columns(state: StateBlock, line: int) -> int:
    """The column count markdown-it gives a table whose header is `line` (as its rule
    computes it: cells split at unescaped pipes, empty outer ones dropped)."""
    columns = escapedSplit(mdTrim(getLine(state, line)))
    if columns and columns[0] == "":
        columns.pop(0)
    if columns and columns[-1] == "":
        columns.pop()
    return len(columns)


def _bounded_table(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    """markdown-it's GFM table rule, making at most the cells left in this render.

    The library fills a short row up to the header's column count and caps only the empty
    cells it adds, at 65,536 per table (`MAX_AUTOCOMPLETED_CELLS`, a module global that the
    chunker's parser reads too, so it is left alone). Here the rows a table may have are
    cut so that its cells (header and rows) fit in what is left of the render's budget; the
    lines after the cut are parsed as what they are without the table (text). A table
    whose header alone does not fit is not a table.
    """
    if not gfm_table(state, start_line, end_line, True):
        return False
    cells_left = state.env.get(_CELLS_LEFT)
    if cells_left is None:  # rendered without a budget (not through render_markdown)
        return silent or gfm_table(state, start_line, end_line, False)
    columns = _header_columns(state, start_line)
    if columns > cells_left:
        return False
    if silent:
        return True
    rows = (cells_left - columns) // columns
    if not gfm_table(state, start_line, min(end_line, start_line + 2 + rows), False):
        return False
    # state.line is now the line after the table: its header and rows made these cells.
    state.env[_CELLS_LEFT] = cells_left - columns * (state.line - start_line - 1)
    return True


# The longest `[[…]]` read as a wiki link: a title (at most 500 characters, as
# notes.services allows) and a label. The closing `]]` is looked for only this far, so a
# note of many `[[` and no `]]` costs a bounded search each, not a scan to its end.
WIKI_LINK_MAX_CHARS = 1_000
WIKI_LINK_TOKEN = "wikilink"


def _wiki_link(state: StateInline, silent: bool) -> bool:
    """`[[Title]]` or `[[Title|label]]` on one line → a `wikilink` token (Obsidian's syntax).

    No `[`, `]` or line break inside, and a title that is not blank; anything else is left
    to the other rules (so `[[x](url)` is still a link).
    """
    start = state.pos
    if not state.src.startswith("[[", start):
        return False
    end = state.src.find("]]", start + 2, start + 4 + WIKI_LINK_MAX_CHARS)
    if end < 0:
        return False
    inner = state.src[start + 2 : end]
    if "[" in inner or "]" in inner or "\n" in inner:
        return False
    target, _, label = inner.partition("|")
    target = " ".join(target.split())
    if not target:
        return False
    if not silent:
        token = state.push(WIKI_LINK_TOKEN, "", 0)
        token.meta = {"target": target}
        token.content = " ".join(label.split()) or target
    state.pos = end + 2
    return True


def _render_wiki_link(
    self: object, tokens: Sequence[Token], idx: int, options: object, env: object
) -> str:
    """The placeholder `link_wiki` resolves: the target title in `title`, the label as text."""
    token = tokens[idx]
    target = html_lib.escape(token.meta["target"])
    return f'<span class="wikilink" title="{target}">{html_lib.escape(token.content)}</span>'


def remote_image_hosts() -> frozenset[str]:
    """The hosts images may load from besides lode itself (`LODE_REMOTE_IMAGE_HOSTS`)."""
    return frozenset(getattr(settings, "LODE_REMOTE_IMAGE_HOSTS", ()))


def image_source_allowed(src: str, hosts: frozenset[str]) -> bool:
    """Whether a page may load the image at `src`: a relative URL (lode's own origin), a
    `data:image/…` URL, or an `https` URL on the default port of one of `hosts`.

    A URL with a backslash, blank or control character is refused outright, and so is one
    starting with `//` (a browser reads `//host`, `///host` and `/\\host` as another site).
    """
    if not src or any(char == "\\" or char <= " " or char == "\x7f" for char in src):
        return False
    if _DATA_IMAGE.match(src):
        return True
    try:
        parts = urlsplit(src)
        port = parts.port
    except ValueError:
        return False
    if not parts.scheme and not parts.netloc:
        return not src.startswith("//")
    return (
        parts.scheme.lower() == "https"
        and parts.username is None
        and port in (None, 443)
        and (parts.hostname or "") in hosts
    )


def _mark_images_in_links(state: StateCore) -> None:
    """Mark each image inside a link's text (`[![alt](src)](url)`): not loaded, it becomes
    text rather than a link, since a link may not contain another."""
    for block in state.tokens:
        depth = 0
        for token in block.children or ():
            if token.type == "link_open":
                depth += 1
            elif token.type == "link_close":
                depth -= 1
            elif token.type == "image" and depth > 0:
                token.meta["in_link"] = True


def _render_image(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: dict
) -> str:
    """An image the page may load as `<img>`; any other as a link to it (its alt text, or
    the URL, as the link's text) followed by a note that it was not loaded."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    if image_source_allowed(src, env.get(_IMAGE_HOSTS, frozenset())):
        return RendererHTML.image(self, tokens, idx, options, env)
    text = html_lib.escape(self.renderInlineAsText(token.children or [], options, env) or src)
    note = f"<small>{_REMOTE_IMAGE_NOTE}</small>"
    if token.meta.get("in_link"):
        return f"{text} {note}"
    title = token.attrGet("title")
    title_attribute = f' title="{html_lib.escape(str(title))}"' if title else ""
    return f'<a href="{html_lib.escape(src)}"{title_attribute}>{text}</a> {note}'


_markdown = (
    MarkdownIt("commonmark", {"html": False, "linkify": True})
    .enable("table")
    .enable("strikethrough")
    .enable("linkify")
)
# Only this instance's table rule is replaced (same alternatives as the library's).
_markdown.block.ruler.at("table", _bounded_table, {"alt": ["paragraph", "reference"]})
# Bare e-mail addresses stay text, as they did before (bleach ran with parse_email=False).
_markdown.linkify.set({"fuzzy_email": False})
# Checkboxes disabled (the plugin's default): ticking one would change nothing stored.
_markdown.use(tasklists_plugin).use(footnote_plugin)
# Before "link", which would otherwise read `[[Title]]` as the text "[" and a link "[Title]".
_markdown.inline.ruler.before("link", "wikilink", _wiki_link)
_markdown.add_render_rule("wikilink", _render_wiki_link)
_markdown.options["maxNesting"] = _PARSER_MAX_NESTING
_markdown.core.ruler.push("lode_images_in_links", _mark_images_in_links)
_markdown.add_render_rule("image", _render_image)


def _allowed_attribute(tag: str, attribute: str, value: str) -> str | None:
    """nh3's per-attribute check: an `id` only if it is a footnote anchor; a `data:` URL
    only as an image's source; an image's source only if the page may load it."""
    if attribute == "id" and not _FOOTNOTE_ID.fullmatch(value):
        return None
    if tag == "img" and attribute == "src":
        return value if image_source_allowed(value, remote_image_hosts()) else None
    if attribute == "href" and _is_data_url(value):
        return None
    return value


def _is_data_url(value: str) -> bool:
    """Whether a browser reads `value` as a `data:` URL: it drops tabs and line breaks
    anywhere and blanks and control characters around it before reading the scheme."""
    cleaned = value.translate({9: None, 10: None, 13: None}).lstrip("".join(map(chr, range(33))))
    return cleaned[:5].lower() == "data:"


_cleaner = nh3.Cleaner(
    tags=set(ALLOWED_TAGS),
    attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
    attribute_filter=_allowed_attribute,
    tag_attribute_values={"input": INPUT_ATTRIBUTE_VALUES},
    set_tag_attribute_values={"input": INPUT_FORCED_ATTRIBUTES},
    allowed_classes=ALLOWED_CLASSES,
    # `data:` for images only (`_allowed_attribute` drops it anywhere else).
    url_schemes=set(ALLOWED_PROTOCOLS | {"data"}),
    link_rel=LINK_REL,
    strip_comments=True,
)


@dataclass(frozen=True)
class RenderBounds:
    """The most structure one call renders formatted (see the `PART_MAX_…` bounds)."""

    depth: int = MAX_NESTING_DEPTH
    links: int = PART_MAX_LINKS
    footnotes: int = PART_MAX_FOOTNOTES
    headings: int = PART_MAX_HEADINGS
    tokens: int = PART_MAX_TOKENS


@dataclass(frozen=True)
class Structure:
    """What parsed markdown holds, counted on its tokens (block and inline)."""

    depth: int  # lists and block quotes inside each other, at the deepest
    links: int  # links (bare URLs made links too) and images
    footnotes: int  # footnote references and the footnotes shown for them
    headings: int
    tokens: int
    cut_short: bool  # the parser reached its own nesting limit and dropped what was deeper

    def too_much(self, bounds: RenderBounds) -> str | None:
        """Why this cannot be shown formatted within `bounds` (a sentence for the reader,
        ending "showing its text"), or None when it can."""
        if self.depth > bounds.depth or self.cut_short:
            return (
                "This note is nested too deeply to display formatted (lists or quotes more "
                f"than {bounds.depth} levels deep); showing its text."
            )
        for what, count, limit in (
            ("links", self.links, bounds.links),
            ("footnotes", self.footnotes, bounds.footnotes),
            ("headings", self.headings, bounds.headings),
            ("pieces of formatting", self.tokens, bounds.tokens),
        ):
            if count > limit:
                return (
                    f"This part has too many {what} to display formatted ({count:,}; at most "
                    f"{limit:,}); showing its text."
                )
        return None


_CONTAINER_OPEN = frozenset({"bullet_list_open", "ordered_list_open", "blockquote_open"})
_CONTAINER_CLOSE = frozenset({"bullet_list_close", "ordered_list_close", "blockquote_close"})
_LINKS = frozenset({"link_open", "image"})
_FOOTNOTES = frozenset({"footnote_ref", "footnote_open"})


def structure_of(tokens: Sequence[Token]) -> Structure:
    """Count what `tokens` (markdown-it's parse of one body) hold: one pass, no rendering."""
    depth = deepest = links = footnotes = headings = count = 0
    cut_short = False
    for token in tokens:
        count += 1
        kind = token.type
        if kind in _CONTAINER_OPEN:
            depth += 1
            deepest = max(deepest, depth)
        elif kind in _CONTAINER_CLOSE:
            depth -= 1
        elif kind == "heading_open":
            headings += 1
        elif kind in _FOOTNOTES:
            footnotes += 1
        if token.nesting == 1 and token.level >= _PARSER_MAX_NESTING - 1:
            cut_short = True
        for child in token.children or ():
            count += 1
            if child.type in _LINKS:
                links += 1
            elif child.type in _FOOTNOTES:
                footnotes += 1
    return Structure(deepest, links, footnotes, headings, count, cut_short)


@dataclass(frozen=True)
class Rendering:
    """The safe HTML for some markdown, and why it is its escaped text instead (or None)."""

    html: SafeString
    shown_as_text: str | None = None


def _as_text(body: str, notice: str) -> SafeString:
    """`body` as escaped text under `notice`, through the sanitiser like any rendering."""
    escaped = html_lib.escape(body, quote=False)
    notice = html_lib.escape(notice, quote=False)
    # Safe: escaped above and passed through nh3's allow-list.
    return mark_safe(_cleaner.clean(f"<p><em>{notice}</em></p><pre>{escaped}</pre>"))


def rendering_of(
    body: str,
    *,
    max_cells: int = PART_MAX_CELLS,
    max_html_chars: int = PART_MAX_HTML_CHARS,
    bounds: RenderBounds = RenderBounds(),
) -> Rendering:
    """Render note markdown to HTML that is safe to insert into a page, or, when its
    structure is over `bounds` or its HTML over `max_html_chars`, show it as escaped text
    under a notice saying why.

    Linear in the length of `body`, with at most `max_cells` table cells (rows of a table
    past them are shown as text). Images load from lode itself and the operator's
    `LODE_REMOTE_IMAGE_HOSTS` only; others become links.
    """
    env = {_CELLS_LEFT: max_cells, _IMAGE_HOSTS: remote_image_hosts()}
    tokens = _markdown.parse(body, env)
    too_much = structure_of(tokens).too_much(bounds)
    if too_much is not None:
        return Rendering(_as_text(body, too_much), too_much)
    html = _cleaner.clean(_markdown.renderer.render(tokens, _markdown.options, env))
    if len(html) > max_html_chars:
        logger.warning(
            "rendered %d characters of markdown to %d of HTML; shown as text instead",
            len(body),
            len(html),
        )
        notice = (
            f"This part is shown as plain text: rendered, it would be {len(html):,} "
            f"characters of HTML, more than the {max_html_chars:,} a part may have."
        )
        return Rendering(_as_text(body, notice), notice)
    # Safe: every byte passed through nh3's allow-list above.
    return Rendering(mark_safe(html))


def render_markdown(
    body: str,
    *,
    max_cells: int = PART_MAX_CELLS,
    max_html_chars: int = PART_MAX_HTML_CHARS,
) -> SafeString:
    """The HTML of `rendering_of(body)`: callers showing a whole note use `rendered_part`,
    which bounds the input and caches the result."""
    return rendering_of(body, max_cells=max_cells, max_html_chars=max_html_chars).html


# A wiki link's placeholder as `_render_wiki_link` writes it and nh3 serialises it: the
# attribute escapes `&` and `"` (not `<`), the text escapes `&`, `<` and `>`. Only the
# renderer writes this: a note's own `<span …>` comes out as text (raw HTML is off).
_WIKI_PLACEHOLDER = re.compile(r'<span class="wikilink" title="([^"]*)">([^<]*)</span>')


def wiki_key(title: str) -> str:
    """How wiki links match titles: case and runs of blanks do not count."""
    return " ".join(title.split()).casefold()


def wiki_titles(html: str) -> set[str]:
    """The titles the wiki links of rendered `html` point at (as written in the note)."""
    return {html_lib.unescape(match.group(1)) for match in _WIKI_PLACEHOLDER.finditer(html)}


def link_wiki(
    html: SafeString, targets: Mapping[str, str], create_url: Callable[[str], str]
) -> SafeString:
    """Rendered `html` with each wiki link placeholder made a link for one reader.

    `targets` maps `wiki_key(title)` to the URL of the reader's note of that title; a title
    not in it links to `create_url(title)` (writing that note), marked `unresolved`. The
    result goes through the sanitiser again, so the URLs put in here are held to the same
    allow-list as the note's own.
    """

    def link(match: re.Match[str]) -> str:
        title = html_lib.unescape(match.group(1))
        label = match.group(2)  # still escaped, as nh3 wrote it
        url = targets.get(wiki_key(title))
        if url is not None:
            return (
                f'<a class="wikilink" href="{html_lib.escape(url)}" '
                f'title="{html_lib.escape(title)}">{label}</a>'
            )
        hint = f"No note titled “{title}” yet: write it"
        return (
            f'<a class="wikilink unresolved" href="{html_lib.escape(create_url(title))}" '
            f'title="{html_lib.escape(hint)}">{label}</a>'
        )

    linked, count = _WIKI_PLACEHOLDER.subn(link, html)
    if not count:
        return html  # already sanitised by render_markdown: nothing was added
    # Safe: the links added here pass the sanitiser again with the rest of the part.
    return mark_safe(_cleaner.clean(linked))


@dataclass(frozen=True)
class Part:
    """A slice `[start, end)` of a note body (code points), rendered after `prefix`.

    `prefix` repeats what the slice needs to render as it would in the whole note: the
    opening fence of a code block cut in two, or the header of a table cut between rows.
    """

    start: int
    end: int
    prefix: str = ""

    def source(self, body: str) -> str:
        return self.prefix + body[self.start : self.end]


# A fence opener or closer: up to three spaces, then ``` or ~~~ (CommonMark 4.5).
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})([^\n]*)$", re.MULTILINE)
# A table's delimiter row: cells of dashes with optional colons, separated by pipes.
_TABLE_DELIMITER = re.compile(r"^(?: {0,3}\|\s*|\s*):?-+:?(?:\s*\|\s*:?-+:?)*\s*(?:\|\s*)?$")
# Longest prefix repeated into a continuation part; a longer one would not bound the part.
_MAX_PREFIX_CHARS = 2_000


def _fence_spans(body: str) -> list[tuple[int, int, str]]:
    """(start, end, opener line) of each fenced code block; an unclosed one runs to the end."""
    spans: list[tuple[int, int, str]] = []
    opener: re.Match[str] | None = None
    for match in _FENCE.finditer(body):
        if opener is None:
            # A backtick fence's info string may not contain a backtick.
            if match.group(1)[0] == "`" and "`" in match.group(2):
                continue
            opener = match
        elif (
            match.group(1)[0] == opener.group(1)[0]
            and len(match.group(1)) >= len(opener.group(1))
            and not match.group(2).strip()
        ):
            spans.append((opener.start(), match.end(), opener.group(0)))
            opener = None
    if opener is not None:
        spans.append((opener.start(), len(body), opener.group(0)))
    return spans


def _fence_at(spans: list[tuple[int, int, str]], position: int) -> tuple[int, int, str] | None:
    """The fenced block strictly containing `position`, if any (spans are sorted and do
    not overlap, so only the last one starting before `position` can contain it)."""
    index = bisect.bisect_left(spans, (position,)) - 1
    if index >= 0 and spans[index][0] < position < spans[index][1]:
        return spans[index]
    return None


def _table_prefix(body: str, cut: int) -> str:
    """The header and delimiter rows of the table the line break at `cut` falls inside."""
    block_start = body.rfind("\n\n", 0, cut)
    block_start = 0 if block_start < 0 else block_start + 2
    header_end = body.find("\n", block_start, cut)
    if header_end < 0 or header_end - block_start > _MAX_PREFIX_CHARS:
        return ""
    delimiter_end = body.find("\n", header_end + 1, cut)
    if delimiter_end < 0 or delimiter_end - block_start > _MAX_PREFIX_CHARS:
        return ""
    if not _TABLE_DELIMITER.match(body[header_end + 1 : delimiter_end]):
        return ""
    return body[block_start : delimiter_end + 1]


def _line_has_pipe(body: str, start: int) -> bool:
    """Whether the line beginning at `start` could be a table row (it has a cell divider)."""
    line_end = body.find("\n", start)
    return body.find("|", start, len(body) if line_end < 0 else line_end) >= 0


def _cut(body: str, start: int, limit: int, fences: list[tuple[int, int, str]]) -> int:
    """Where the part beginning at `start` ends: the last block boundary before `limit`,
    else the last line break, else the last space, else `limit` itself. A cut never
    falls in the first half of the window, so every part but the last is at least half
    full and a note has at most about 2 × len / PART_MAX_CHARS parts."""
    floor = start + (limit - start) // 2
    blank = body.rfind("\n\n", floor, limit)
    if blank >= 0:
        fence = _fence_at(fences, blank + 1)
        if fence is None:
            return blank + 2
        if fence[0] > floor:
            return fence[0]  # cut before the code block rather than inside it
        # Else the code block covers the whole second half: cut it at a line break.
    newline = body.rfind("\n", floor, limit)
    if newline >= 0:
        return newline + 1
    space = body.rfind(" ", floor, limit)
    if space >= 0:
        return space + 1
    return limit


# A line that may be the delimiter row of a table of two columns or more (`|-|-|`,
# `:-- | --:`), also inside a block quote or list item; a one-column table makes one cell a
# line, which the character bound covers. Only `\n` starts a line here, as everywhere in
# this module: a body with bare `\r` line breaks relies on the renderer's own cell bound.
# No two neighbouring runs may take the same blank (`[ \t>]*\|?[ \t]*` would): the regex
# engine then retries every split of a line's indentation, and 900 list levels indented two
# spaces more each (815 KB) took 8 s to cut instead of milliseconds.
_DELIMITER_ROW = re.compile(
    r"^[ \t>]*(?:\|[ \t]*)?:?-+:?[ \t]*\|[ \t]*:?-[|:\- \t\r]*$", re.MULTILINE
)
# A blank line (or the end of the body): where a table ends at the latest.
_BLANK_LINE = re.compile(r"\n[ \t\r]*(?:\n|\Z)")
_NEWLINE = re.compile(r"\n")
# Tables at most this far apart (a blank line, a caption) and no wider share one span.
_MERGE_GAP = 64


class _Table(NamedTuple):
    """Where a table may render cells: an upper bound, never less than markdown-it makes.

    `header` is where its delimiter row starts (the header line is the one before), `rows`
    where that row ends (each line break from there on starts a row) and `stop` where the
    block ends: the next blank line. Every row renders `columns` cells however short it is.
    """

    header: int
    rows: int
    stop: int
    columns: int


def _delimiter_columns(row: str) -> int:
    """The columns a delimiter row declares: its cells between pipes, outer pipes aside."""
    row = row.strip(" \t\r>")
    return row.count("|") + 1 - row.startswith("|") - row.endswith("|")


@functools.lru_cache(maxsize=64)
def _wider_delimiter_row(columns: int) -> re.Pattern[str]:
    """A delimiter row (as markdown-it parses one) of more than `columns` columns. Each
    cell is dashes between optional colons, and every run of blanks is bounded by a pipe or
    a dash on both sides, so nothing backtracks far (as for `_DELIMITER_ROW`)."""
    first = r"^[ \t>]*(?:\|[ \t]*)?:?-+:?"
    more = r"[ \t]*\|[ \t]*:?-+:?"
    end = r"(?:[ \t]*\|[ \t\r]*|[ \t\r]*)$"
    return re.compile(rf"{first}(?:{more}){{{columns},}}{end}", re.MULTILINE)


def _table_spans(body: str) -> list[_Table]:
    """The tables of `body` in order, not overlapping. Per block (up to a blank line): a
    regex search for its first delimiter row, then one for a wider one within the block (a
    new table after a heading, say), and so on; narrower or equal ones are rows of the
    table before. So a body of 400,000 delimiter rows is one table, found in C."""
    tables: list[_Table] = []
    # Local names and tuples: a 2 MB body of tiny tables is 150,000 turns of this loop.
    next_blank, size = _BLANK_LINE.search, len(body)
    matches, stop = _DELIMITER_ROW.finditer(body), -1
    while (match := next(matches, None)) is not None:
        header, rows = match.span()
        if header < stop:
            continue  # a row of the block before: its wider rows were searched for
        if body.startswith("\n\n", rows):
            stop = rows  # no rows: the most common shape of a tiny table, without a search
        else:
            blank = next_blank(body, rows)
            stop = size if blank is None else blank.start()
        while match is not None:
            header, rows = match.span()
            row = match.group().strip(" \t\r>")
            columns = row.count("|") + 1 - row.startswith("|") - row.endswith("|")
            wider = None
            if stop - rows > columns:  # room for a row as wide as this table, at least
                wider = _wider_delimiter_row(columns).search(body, rows, stop)
            end = stop if wider is None else wider.start()
            last = tables[-1] if tables else None
            if last and header - last.stop <= _MERGE_GAP and columns <= last.columns:
                # A table just after a table as wide: one span, its few lines between
                # charged as rows (more, never fewer cells), so the cut visits one span.
                tables[-1] = _Table(last.header, last.rows, end, last.columns)
            else:
                tables.append(_Table(header, rows, end, columns))
            match = wider
        if stop - rows > _MARK_STEP:  # a long block: search on after it, not row by row
            matches = _DELIMITER_ROW.finditer(body, stop)
    return tables


def _cells_limit(
    body: str, start: int, end: int, budget: int, tables: list[_Table], stops: list[int]
) -> int:
    """Where the table cells of `[start, end)` first exceed `budget`: the start of the
    first line that does not fit, else `end`. Each table line is charged its table's
    column count (a row of one character under a 181-column header makes 181 cells), and
    each header its columns. `stops` are the tables' `stop`s, for bisecting."""
    used = 0
    at_line_start = start == 0 or body[start - 1] == "\n"
    for table in itertools.islice(tables, bisect.bisect_right(stops, start), None):
        if table.header >= end:
            break
        if table.header >= start:
            used += table.columns  # its header row
            if used > budget:
                return table.header
        low, high = max(start, table.rows), min(end, table.stop)
        if low >= high:
            continue
        first_line = 1 if low == start and at_line_start else 0
        lines = first_line + body.count("\n", low, high)
        if used + lines * table.columns <= budget:
            used += lines * table.columns
            continue
        affordable = (budget - used) // table.columns - first_line  # line breaks that fit
        if affordable < 0:
            return start
        newline = next(itertools.islice(_NEWLINE.finditer(body, low, high), affordable, None))
        return newline.end()
    return end


def _limit(
    body: str,
    start: int,
    *,
    max_chars: int,
    max_marks: int,
    max_cells: int,
    tables: list[_Table],
    stops: list[int],
) -> int:
    """The furthest end of a part beginning at `start`: `max_chars` on, or sooner, at the
    step of `_MARK_STEP` characters where its count of markup characters reaches
    `max_marks`, or at the line where its table cells exceed `max_cells` (but not before
    `PART_MIN_CHARS`). Counting is `str.count` (C) over bounded steps."""
    end = min(len(body), start + max_chars)
    marks = 0
    position = start
    while position < end:
        step_end = min(position + _MARK_STEP, end)
        marks += sum(body.count(char, position, step_end) for char in _MARK_CHARS)
        if marks >= max_marks:
            end = step_end
            break
        position = step_end
    cells_end = _cells_limit(body, start, end, max_cells, tables, stops)
    if cells_end < end:
        end = max(cells_end, min(end, start + PART_MIN_CHARS))
    return end


def split_parts(
    body: str,
    max_chars: int = PART_MAX_CHARS,
    max_marks: int = PART_MAX_MARKS,
    max_cells: int = PART_MAX_CELLS,
) -> list[Part]:
    """Cut `body` into parts of at most `max_chars` characters (plus a short prefix), about
    `max_marks` markup characters and `max_cells` table cells.

    Linear: the searches are `str.count`/`str.rfind` over bounded windows and one regex
    pass each for code fences and table delimiter rows. A note within the bounds is one
    part, rendered exactly as a whole.
    """
    tables = _table_spans(body)
    stops = [table.stop for table in tables]
    bounds = {"max_chars": max_chars, "max_marks": max_marks, "tables": tables, "stops": stops}
    if _limit(body, 0, max_cells=max_cells, **bounds) >= len(body):
        return [Part(0, len(body))]
    fences = _fence_spans(body)
    parts: list[Part] = []
    # One string object per distinct prefix, so the cached list of parts holds each once.
    prefixes: dict[str, str] = {}
    start, prefix, prefix_cells = 0, "", 0
    while start < len(body):
        limit = _limit(body, start, max_cells=max_cells - prefix_cells, **bounds)
        end = len(body) if limit >= len(body) else _cut(body, start, limit, fences)
        parts.append(Part(start, end, prefixes.setdefault(prefix, prefix)))
        # What the next part needs repeated, when this cut fell inside a block.
        prefix, prefix_cells = "", 0
        if end < len(body) and not body.startswith("\n", end) and body[end - 2 : end] != "\n\n":
            fence = _fence_at(fences, end)
            if fence is not None:
                if len(fence[2]) <= _MAX_PREFIX_CHARS:
                    prefix = fence[2] + "\n"
            elif body[end - 1] == "\n" and _line_has_pipe(body, end):
                prefix = _table_prefix(body, end - 1)
                if prefix:  # its header row renders a cell a column
                    prefix_cells = _delimiter_columns(prefix[:-1].rpartition("\n")[2])
        start = end
    return parts


@dataclass(frozen=True)
class RenderedPart:
    """One part of a version's rendering: its HTML and where it lies in the body."""

    html: SafeString
    number: int  # 1-based
    count: int
    start: int  # code points of the body this part shows
    end: int
    body_chars: int

    @property
    def has_next(self) -> bool:
        return self.number < self.count

    @property
    def next_number(self) -> int:
        return self.number + 1


class NoSuchPart(LookupError):
    """A part number outside 1..count."""

    def __init__(self, number: int, count: int) -> None:
        self.number = number
        self.count = count
        super().__init__(f"There is no part {number}: this text has {count} part(s).")


def _remember(key: str, value: object) -> None:
    """Cache `value`; a cache that cannot be written (full or read-only disk) costs a
    re-render next time, never the page."""
    try:
        caches[RENDER_CACHE].set(key, value)
    except OSError:
        logger.warning("could not cache %s", key, exc_info=True)


def _cache_key(sha256: str, what: str) -> str:
    """The key of a version's parts or part HTML: everything its HTML depends on besides
    the body (the renderer, the packages, every bound, the hosts images may load from)."""
    bounds = (
        f"{PART_MAX_CHARS}:{PART_MAX_MARKS}:{PART_MAX_CELLS}:{PART_MAX_HTML_CHARS}:"
        f"{MAX_NESTING_DEPTH}:{PART_MAX_LINKS}:{PART_MAX_FOOTNOTES}:{PART_MAX_HEADINGS}:"
        f"{PART_MAX_TOKENS}"
    )
    hosts = ",".join(sorted(remote_image_hosts()))
    return f"lode:render:{RENDERER_VERSION}:{RENDER_PACKAGES}:{bounds}:{hosts}:{sha256}:{what}"


def rendered_part(*, sha256: str, body: str, number: int = 1) -> RenderedPart:
    """Part `number` of the rendering of an immutable version (`body` with digest `sha256`).

    Both the cut points and each part's HTML are cached (in the "renders" cache) under the
    SHA-256, so a second request for the same version (any note, any user: same text, same
    HTML) renders nothing. Raises `NoSuchPart` for a number outside the parts.
    """
    renders = caches[RENDER_CACHE]
    parts_key = _cache_key(sha256, "parts")
    spans = renders.get(parts_key)
    if spans is None:
        spans = [(p.start, p.end, p.prefix) for p in split_parts(body)]
        _remember(parts_key, spans)
    if not 1 <= number <= len(spans):
        raise NoSuchPart(number, len(spans))
    start, end, prefix = spans[number - 1]
    html_key = _cache_key(sha256, f"part{number}")
    html = renders.get(html_key)
    if html is None:
        html = str(render_markdown(Part(start, end, prefix).source(body)))
        _remember(html_key, html)
    return RenderedPart(
        # Safe: produced by render_markdown (the sanitiser) above or on an earlier request.
        html=mark_safe(html),
        number=number,
        count=len(spans),
        start=start,
        end=end,
        body_chars=len(body),
    )
