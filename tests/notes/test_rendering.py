"""Note rendering (notes/rendering.py): the sanitiser, code escaped once
, parts that bound every page of a huge note, and the per-version cache.

Nothing here measures time: the bounds are sizes and counts (bench/note_render.py prints
the timings)."""

from __future__ import annotations

import hashlib
import itertools
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from notes import rendering, services
from notes.rendering import NoSuchPart, Part, render_markdown, rendered_part, split_parts

MAX_PAGE_BYTES = 1_000_000  # what one page load of a note may weigh, at most
MAX_PART_CELLS = 10_000  # table cells one part may render, at most (~0.3 s, ~100 KB)


def table_note(size: int) -> str:
    """A Markdown table of about `size` characters, with a link in every row."""
    rows = ["| name | link | notes |", "|---|---|---|"]
    total, i = 0, 0
    while total < size:
        row = f"| cell {i} | https://example.com/{i} | more text here {i} |"
        rows.append(row)
        total += len(row) + 1
        i += 1
    return "\n".join(rows) + "\n"


def table_bomb(columns: int = 181, rows: int = 362, tables: int = 13) -> str:
    """Tables of one-character rows under a wide header: markdown-it fills every row up to
    the header's column count (up to 65,536 empty cells a table), so the default 13 tables,
    18,888 characters, rendered 851,786 `<td>` (8.6 MB) in one part."""
    table = "|a" * columns + "|\n" + "|-" * columns + "|\n" + "a\n" * rows
    return "\n".join([table] * tables)


# As many columns as one part's characters allow in its header, then one-character rows.
WIDE_HEADER = "|a" * 3_000 + "|\n" + "|-" * 3_000 + "|\n" + "a\n" * 3_000

HOSTILE = {
    "table-bomb": table_bomb(),
    "wide-header": WIDE_HEADER,
    "table-320k": table_note(320_000),
    "pipes-1.8M": "|x" * 900_000,
    "wide-table": "|x" * 100_000 + "\n" + "|-" * 100_000 + "\n" + "|y" * 100_000 + "\n",
    "prose-2M": ("Lorem ipsum dolor sit amet, see https://example.org/x and words.\n\n" * 30_000)[
        :2_000_000
    ],
    "word-2M": "x" * 2_000_000,
    "bare-domains": "a.co " * 400_000,
    "emphasis": "*a* " * 500_000,
}


def sha(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


class _Text(HTMLParser):
    """Text content of the elements named `tag`, entities decoded (what a browser shows)."""

    def __init__(self, tag: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tag, self.depth, self.texts = tag, 0, []

    def handle_starttag(self, tag, attrs):
        if tag == self.tag:
            self.depth += 1
            self.texts.append("")

    def handle_endtag(self, tag):
        if tag == self.tag:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.texts[-1] += data


def texts_of(html: str, tag: str) -> list[str]:
    parser = _Text(tag)
    parser.feed(html)
    parser.close()
    return parser.texts


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {name: value or "" for name, value in attrs}))


def tags_of(html: str) -> list[tuple[str, dict[str, str]]]:
    parser = _Tags()
    parser.feed(html)
    parser.close()
    return parser.tags


# --- the sanitiser --------------------------------------------------------------------


def test_scripts_handlers_and_javascript_links_do_not_survive():
    html = render_markdown(
        "<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n"
        "[x](javascript:alert(1)) [y](JaVaScRiPt:alert(2)) ![i](data:text/html,hi)\n\n"
        '<a href="javascript:alert(1)">click</a> <iframe src=x></iframe>\n'
    )
    tags = tags_of(html)
    assert {tag for tag, _ in tags} <= {"p", "a"}  # raw HTML is text; no <img>, <script>
    for _, attrs in tags:
        assert set(attrs) <= {"href", "rel"}
        assert not attrs.get("href", "").lower().startswith(("javascript", "data"))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as text, not run


def test_sanitiser_strips_markup_that_reaches_it():
    """nh3 is an independent second layer: even HTML the markdown step let through (as if
    `html` were on) loses scripts, handlers and foreign schemes."""
    cleaned = rendering._cleaner.clean(
        '<p onclick="x()">a<script>alert(1)</script><a href="javascript:y()">b</a>'
        '<img src="http://e.com/i.png" onerror="z()"><a href="https://ok.example">c</a></p>'
    )
    assert "script" not in cleaned
    assert "onclick" not in cleaned and "onerror" not in cleaned
    assert "javascript" not in cleaned
    assert '<a href="https://ok.example" rel="noopener noreferrer nofollow">c</a>' in cleaned


@pytest.mark.parametrize(
    "markdown",
    [
        'Run `psql -c "SELECT 1 & 2 < 3"` now.\n',
        '```\npsql -c "SELECT 1 & 2 < 3" > out.txt\n```\n',
        '    curl "https://example.com/?a=1&b=2"\n',
    ],
)
def test_code_is_shown_exactly_as_written(markdown):
    """Code is escaped once: linkify never escapes it a second time (`&quot;` on screen)."""
    source = (
        'psql -c "SELECT 1 & 2 < 3"'
        if "psql" in markdown
        else 'curl "https://example.com/?a=1&b=2"'
    )
    (code,) = texts_of(render_markdown(markdown), "code")
    assert source in code
    assert "&quot;" not in code and "&amp;" not in code


def test_bare_urls_become_links_outside_code_only():
    html = render_markdown(
        "See https://example.com/a?b=1 and www.example.org, mail me at a@example.com.\n\n"
        "`https://in-code.example`\n"
    )
    assert (
        '<a href="https://example.com/a?b=1" rel="noopener noreferrer nofollow">'
        "https://example.com/a?b=1</a>" in html
    )
    assert 'href="http://www.example.org"' in html
    assert "mailto:" not in html  # bare addresses stay text
    assert "<code>https://in-code.example</code>" in html


def test_ordinary_note_is_one_part_rendered_as_a_whole():
    body = (
        "# Title\n\nSome *text* with a [link](https://example.com).\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    part = rendered_part(sha256=sha(body), body=body)
    assert (part.number, part.count, part.has_next) == (1, 1, False)
    assert part.html == render_markdown(body)
    assert "<table>" in part.html and "<h1>Title</h1>" in part.html


# --- parts ----------------------------------------------------------------------------


def assert_parts_tile(body: str, parts: list[Part], max_chars: int) -> None:
    assert parts[0].start == 0 and parts[-1].end == len(body)
    for before, after in itertools.pairwise(parts):
        assert before.end == after.start
    for part in parts:
        assert 0 < part.end - part.start <= max_chars
        assert len(part.prefix) <= 2_000


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_notes_come_in_bounded_parts(name):
    body = HOSTILE[name]
    parts = split_parts(body)
    assert len(parts) > 1
    assert_parts_tile(body, parts, rendering.PART_MAX_CHARS)
    # No part is cut needlessly short (a part ends at a cut in the second half of its bound).
    assert len(parts) <= len(body) // 1_000 + 1
    for part in (parts[0], parts[1], parts[-1]):
        html = render_markdown(part.source(body))
        assert len(html.encode()) < MAX_PAGE_BYTES // 2


def test_a_table_cut_between_rows_repeats_its_header():
    body = table_note(100_000)
    parts = split_parts(body, max_chars=10_000)
    assert len(parts) >= 10
    for part in parts[1:]:
        assert part.prefix.startswith("| name | link | notes |\n|---|---|---|\n")
        html = render_markdown(part.source(body))
        assert html.startswith("<table>") and "<th>name</th>" in html
        assert "<p>|" not in html  # never rows falling out of the table as text


def test_a_fenced_block_cut_in_two_stays_code():
    code = "\n".join(f"line {i} <b>&</b>" for i in range(3_000))
    body = f"Intro.\n\n```python\n{code}\n```\n\nAfter the code.\n"
    parts = split_parts(body, max_chars=5_000)
    assert_parts_tile(body, parts, 5_000)
    shown = ""
    for part in parts:
        html = render_markdown(part.source(body))
        shown += "".join(texts_of(html, "code"))
    for i in range(3_000):
        assert f"line {i} <b>&</b>" in shown
    assert "After the code." in render_markdown(parts[-1].source(body))


def test_many_code_blocks_are_cut_between_them():
    body = "```\ncode <x>\n\nmore\n```\n\ntext\n\n" * 40_000  # 1.2 MB, 40,000 fences
    parts = split_parts(body)
    assert_parts_tile(body, parts, rendering.PART_MAX_CHARS)
    fences = rendering._fence_spans(body)
    assert len(fences) == 40_000
    for part in parts[:-1]:
        assert rendering._fence_at(fences, part.end) is None  # never inside a block
        assert part.prefix == ""
    html = render_markdown(parts[1].source(body))
    assert html.startswith("<pre><code>code &lt;x&gt;")


def test_parts_prefer_block_boundaries():
    paragraph = "word " * 400 + "\n\n"  # 2,002 characters
    body = paragraph * 50
    parts = split_parts(body, max_chars=10_000)
    assert_parts_tile(body, parts, 10_000)
    for part in parts[:-1]:
        assert body[part.end - 2 : part.end] == "\n\n"
        assert part.prefix == ""


def test_markup_dense_text_gets_shorter_parts():
    body = "a.co " * 100_000  # a bare domain, i.e. a link, every 5 characters
    parts = split_parts(body)
    marks = sum(body.count(c, parts[0].start, parts[0].end) for c in rendering._MARK_CHARS)
    assert marks <= rendering.PART_MAX_MARKS + rendering._MARK_STEP
    assert parts[0].end - parts[0].start < rendering.PART_MAX_CHARS


def cells_of(html: str) -> int:
    return html.count("<td>") + html.count("<th>")


def visible_text(html: str) -> str:
    parser = _Text("body")
    parser.feed(f"<body>{html}</body>")
    parser.close()
    return "".join(parser.texts)


@pytest.mark.parametrize(
    "name", [pytest.param("table-bomb", marks=pytest.mark.slow), "wide-header"]
)
def test_every_part_of_a_table_bomb_renders_a_bounded_number_of_cells(name):
    """The part bound counts cells, not characters: markdown-it adds empty cells to short
    rows, so a 19 KB part bounded by characters could render 851,786 cells. Every part renders
    at most PART_MAX_CELLS cells, and no row's text is lost (rows past the bound are text)."""
    body = HOSTILE[name]
    parts = split_parts(body)
    assert_parts_tile(body, parts, rendering.PART_MAX_CHARS)
    for part in parts:
        html = render_markdown(part.source(body))
        assert cells_of(html) <= MAX_PART_CELLS
        assert len(html) < 20 * MAX_PART_CELLS  # ~10 characters a cell, at most
        assert visible_text(html).count("a") >= body.count("a", part.start, part.end)
    assert rendering.PART_MAX_CELLS <= MAX_PART_CELLS


@pytest.mark.slow
def test_a_wide_table_is_cut_into_parts_that_fit_the_cell_budget():
    """The cut, not the renderer's last-resort bound, does the work for a table whose rows
    are short but not absurd: 20 columns, rows of one cell; every part is a whole table
    (its header repeated) with all its rows as rows."""
    header = "|" + "|".join(f"c{i}" for i in range(20)) + "|\n" + "|-" * 20 + "|\n"
    body = header + "| x |\n" * 3_000  # 18,083 characters: one part by length alone
    parts = split_parts(body)
    assert len(parts) >= 60_000 // MAX_PART_CELLS
    for part in parts:
        html = render_markdown(part.source(body))
        rows = body.count("\n", part.start, part.end) - (2 if part.start == 0 else 0)
        assert cells_of(html) == 20 * (rows + 1) <= MAX_PART_CELLS
        assert "<p>" not in html  # no row fell out of its table


def test_table_spans_follow_the_widest_table_of_a_block():
    """A wider table can start inside a table's block (after a heading, which ends it): its
    lines are charged its width. Narrower delimiter-like rows are rows of the table before;
    tables close together and no wider share one span."""
    wide = "|h" * 100 + "|\n" + "|-" * 100 + "|\n"
    body = "|a|b|\n|-|-|\n|x|y|\n# Wide\n" + wide + "a\n" * 50 + "|-|-|\n" + "a\n" * 50
    spans = rendering._table_spans(body)
    assert [span.columns for span in spans] == [2, 100]
    assert spans[1].header == body.index("|-|-|-")
    assert spans[1].stop == len(body) - 1
    tiny = "|a|b|\n|-|-|\n\n" * 1_000
    assert [span.columns for span in rendering._table_spans(tiny)] == [2]
    assert rendering._table_spans(tiny)[0].stop == len(tiny) - 2


def test_the_renderer_makes_at_most_max_cells_in_one_call():
    """The last bound holds for any input (bare `\r` line breaks, tables in containers the
    cut does not look into): rows past the budget are shown as text, nothing is lost."""
    body = table_bomb(tables=2).replace("\n", "\r")
    html = render_markdown(body)
    assert 0 < cells_of(html) <= MAX_PART_CELLS
    assert visible_text(html).count("a") == body.count("a")
    assert cells_of(render_markdown(body, max_cells=500)) <= 500


def test_the_cell_bound_is_this_renderers_own():
    """The library's global cap, which the chunker's markdown-it reads too, is untouched."""
    import importlib

    from markdown_it import MarkdownIt

    table = importlib.import_module("markdown_it.rules_block.table")
    body = "|a" * 200 + "|\n" + "|-" * 200 + "|\n" + "a\n" * 60  # 12,200 cells
    assert table.MAX_AUTOCOMPLETED_CELLS == 0x10000
    assert cells_of(MarkdownIt("commonmark").enable("table").render(body)) == 12_200
    assert cells_of(render_markdown(body)) <= MAX_PART_CELLS


def test_a_part_whose_html_is_too_large_is_shown_as_text():
    body = "| a | b |\n|---|---|\n" + "| <script>x</script> | y |\n" * 200
    html = render_markdown(body, max_html_chars=2_000)
    assert "shown as plain text" in html
    assert "<table>" not in html and "<script>" not in html
    assert html.count("&lt;script&gt;x&lt;/script&gt;") == 200  # all of it, escaped
    assert "<table>" in render_markdown(body)  # within the default bound: a table


def test_no_such_part():
    body = "x" * (rendering.PART_MAX_CHARS * 2 + 1)
    for number in (0, 4):
        with pytest.raises(NoSuchPart, match="has 3 part"):
            rendered_part(sha256=sha(body), body=body, number=number)


# --- the cache ------------------------------------------------------------------------


@pytest.fixture
def render_calls(monkeypatch) -> list[int]:
    """Counts calls of the renderer (a spy around the real one)."""
    calls: list[int] = []
    real = rendering.render_markdown

    def spy(body: str):
        calls.append(len(body))
        return real(body)

    monkeypatch.setattr(rendering, "render_markdown", spy)
    return calls


def test_each_part_of_a_version_is_rendered_once(render_calls):
    body = HOSTILE["table-320k"]
    first = rendered_part(sha256=sha(body), body=body)
    again = rendered_part(sha256=sha(body), body=body)
    assert len(render_calls) == 1
    assert again == first
    rendered_part(sha256=sha(body), body=body, number=2)
    rendered_part(sha256=sha(body), body=body, number=2)
    assert len(render_calls) == 2


def test_a_new_renderer_version_renders_again(render_calls, monkeypatch):
    body = "Some *text*.\n"
    rendered_part(sha256=sha(body), body=body)
    monkeypatch.setattr(rendering, "RENDERER_VERSION", rendering.RENDERER_VERSION + 1)
    rendered_part(sha256=sha(body), body=body)
    assert len(render_calls) == 2


def test_a_new_parser_or_sanitiser_version_renders_again(render_calls, monkeypatch):
    """The key names the installed markdown-it-py, linkify-it-py and nh3, so an upgraded
    sanitiser is never bypassed by HTML cached under the old one."""
    from importlib.metadata import version

    key = rendering._cache_key("0" * 64, "part1")
    for package in ("markdown-it-py", "linkify-it-py", "nh3"):
        assert f"{package}={version(package)}" in key
    body = "Some *text*.\n"
    rendered_part(sha256=sha(body), body=body)
    monkeypatch.setattr(rendering, "RENDER_PACKAGES", "nh3=99.0")
    rendered_part(sha256=sha(body), body=body)
    assert len(render_calls) == 2


def test_renders_are_kept_in_the_renders_cache():
    from django.core.cache import caches

    body = "Some *text*.\n"
    rendered_part(sha256=sha(body), body=body)
    for what in ("parts", "part1"):
        key = rendering._cache_key(sha(body), what)
        assert caches["renders"].get(key) is not None
        assert caches["default"].get(key) is None


def test_an_unwritable_cache_costs_a_render_not_the_page(render_calls, monkeypatch):
    from django.core.cache import caches

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(caches["renders"], "set", refuse)
    body = "Some *text*.\n"
    first = rendered_part(sha256=sha(body), body=body)
    second = rendered_part(sha256=sha(body), body=body)
    assert first.html == second.html == render_markdown(body)
    assert len(render_calls) == 2


# --- the pages ------------------------------------------------------------------------

pytestmark_db = pytest.mark.django_db


@pytestmark_db
def test_huge_note_page_is_bounded_and_shows_the_rest_on_request(alice, alice_client):
    body = HOSTILE["pipes-1.8M"]
    note = services.note_create(owner=alice, title="Pipes", body=body, tags="")
    url = reverse("notes:detail", args=[note.pk])
    count = len(split_parts(body))

    page = alice_client.get(url)
    assert page.status_code == 200
    assert len(page.content) < MAX_PAGE_BYTES
    html = page.content.decode()
    assert f'href="{url}?part=2"' in html and f'hx-get="{url}?part=2"' in html
    assert "Show more" in html

    # Without JavaScript: the href is a whole page showing part 2, saying where it is.
    second = alice_client.get(url, {"part": 2})
    assert second.status_code == 200 and len(second.content) < MAX_PAGE_BYTES
    assert f"Part 2 of {count}" in second.content.decode()
    assert "<html" in second.content.decode()

    # With htmx: the part alone, ending in the control that loads the one after.
    swap = alice_client.get(url, {"part": 2}, headers={"HX-Request": "true"})
    partial = swap.content.decode()
    assert swap.status_code == 200 and "<html" not in partial
    assert f'hx-get="{url}?part=3"' in partial

    last = alice_client.get(url, {"part": count}).content.decode()
    assert "Show more" not in last
    assert "x|x" in last


@pytestmark_db
def test_page_renders_from_cache_the_second_time(alice, alice_client, render_calls):
    note = services.note_create(owner=alice, title="T", body=HOSTILE["table-320k"], tags="")
    url = reverse("notes:detail", args=[note.pk])
    first = alice_client.get(url)
    second = alice_client.get(url)
    assert first.status_code == second.status_code == 200
    assert len(render_calls) == 1
    assert first.content.count(b"<tr>") == second.content.count(b"<tr>") > 100
    # The version page of the same version (same SHA-256) needs no rendering either.
    version_url = reverse("notes:version", args=[note.pk, note.head_id])
    assert alice_client.get(version_url).status_code == 200
    assert len(render_calls) == 1


@pytestmark_db
@pytest.mark.parametrize(
    ("part", "status", "message"),
    [
        ("abc", 400, "whole number"),
        ("-1", 400, "whole number"),
        ("0", 404, "no part 0"),
        ("99", 404, "no part 99"),
        ("9" * 30, 400, "whole number"),
    ],
)
def test_bad_part_numbers_say_what_is_wrong(alice_client, alice_note, part, status, message):
    for url in (
        reverse("notes:detail", args=[alice_note.pk]),
        reverse("notes:version", args=[alice_note.pk, alice_note.head_id]),
    ):
        response = alice_client.get(url, {"part": part})
        assert response.status_code == status
        assert message in response.content.decode()


@pytestmark_db
def test_bob_cannot_read_parts_of_alices_note(alice, bob_client):
    body = HOSTILE["word-2M"][:200_000]
    note = services.note_create(owner=alice, title="Big", body=body, tags="")
    url = reverse("notes:detail", args=[note.pk])
    assert bob_client.get(url, {"part": 2}).status_code == 404
    assert bob_client.get(url, {"part": 2}, headers={"HX-Request": "true"}).status_code == 404
