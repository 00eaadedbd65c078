"""The one sanitiser: note markdown → safe HTML.

markdown-it-py runs with raw HTML disabled (so `<script>` in a note comes out as text) and
its link validation on (no `javascript:`/`vbscript:`/`data:` links); bleach then allows only
a fixed set of tags, attributes and URL schemes as a second, independent layer.
"""

from __future__ import annotations

import bleach
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

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
        "li",
        "ol",
        "p",
        "pre",
        "s",
        "strong",
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
    "a": ["href", "title"],
    "img": ["src", "alt", "title"],
}
ALLOWED_PROTOCOLS = frozenset({"http", "https", "mailto"})

_markdown = (
    MarkdownIt("commonmark", {"html": False, "linkify": False})
    .enable("table")
    .enable("strikethrough")
)
_cleaner = bleach.Cleaner(
    tags=ALLOWED_TAGS,
    attributes=ALLOWED_ATTRIBUTES,
    protocols=ALLOWED_PROTOCOLS,
    strip=True,
    strip_comments=True,
)


def _rel_noopener(attrs: dict, new: bool = False) -> dict:
    attrs[(None, "rel")] = "noopener noreferrer nofollow"
    return attrs


_linker = bleach.linkifier.Linker(
    callbacks=[_rel_noopener], skip_tags=["pre", "code"], parse_email=False
)


def render_markdown(body: str) -> SafeString:
    """Render note markdown to HTML that is safe to insert into a page."""
    html = _markdown.render(body)
    cleaned = _cleaner.clean(html)
    # Safe: every byte passed through bleach's allow-list above.
    return mark_safe(_linker.linkify(cleaned))
