"""Notes people expect, server side: task lists, footnotes and tables
through the one sanitiser (notes/rendering.py), hostile notes that try the new tags, `[[wiki
links]]` resolved among the reader's own notes only, and the edit form's Preview endpoint.

The browser side (the preview appearing, the keyboard shortcuts, dark mode) is in
tests/browser/test_note_preview_and_shortcuts.py."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from notes import services
from notes.rendering import render_markdown, rendered_part
from tests.factories import note

pytestmark = pytest.mark.django_db

PREVIEW = "/notes/preview"


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the text inside each element by tag name."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self._open: list[str] = []
        self.text: dict[str, list[str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))
        if tag not in {"input", "br", "hr", "img"}:
            self._open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            while self._open and self._open.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        for tag in set(self._open):
            self.text.setdefault(tag, []).append(data)


def elements(html: str) -> _Elements:
    parser = _Elements()
    parser.feed(html)
    parser.close()
    return parser


def anchors(html: str) -> list[dict[str, str]]:
    return [attrs for tag, attrs in elements(html).tags if tag == "a"]


def wiki_anchors(html: str) -> list[dict[str, str]]:
    return [a for a in anchors(html) if "wikilink" in a.get("class", "").split()]


# --- 1. task lists, footnotes, tables --------------------------------------------------------


def test_task_list_items_are_disabled_checkboxes() -> None:
    html = render_markdown("- [ ] write the runbook\n- [x] rotate the certs\n- plain item\n")
    boxes = [attrs for tag, attrs in elements(html).tags if tag == "input"]
    assert len(boxes) == 2
    assert all(box["type"] == "checkbox" and "disabled" in box for box in boxes)
    assert "checked" not in boxes[0] and "checked" in boxes[1]
    assert all("name" not in box for box in boxes)  # never a form field
    assert "[ ]" not in html and "[x]" not in html
    assert "plain item" in html


def test_footnotes_link_both_ways() -> None:
    html = render_markdown(
        "Failover needs a replica[^1] and a quorum.^[Three nodes.]\n\n[^1]: A streaming one.\n"
    )
    parsed = elements(html)
    hrefs = {a.get("href") for a in anchors(html)}
    ids = {attrs["id"] for _, attrs in parsed.tags if "id" in attrs}
    assert {"#fn1", "#fn2", "#fnref1", "#fnref2"} <= hrefs
    assert {"fn1", "fn2", "fnref1", "fnref2"} <= ids
    assert "A streaming one." in "".join(parsed.text["section"])
    assert "Three nodes." in "".join(parsed.text["section"])
    assert "[^1]" not in html


def test_tables_render_as_tables() -> None:
    html = render_markdown("| host | role |\n|---|---|\n| db1 | primary |\n| db2 | replica |\n")
    cells = [tag for tag, _ in elements(html).tags if tag in {"th", "td"}]
    assert cells == ["th", "th", "td", "td", "td", "td"]


HOSTILE_NOTE = "\n".join(
    [
        "- [ ] <input type=text name=password onfocus=alert(1) autofocus>",
        "- [x] [click](javascript:alert(1)) [[Evil|<img src=x onerror=alert(1)>]]",
        '- [ ] <span class="wikilink" title="x" onclick="alert(1)">fake</span>',
        '[[javascript:alert(1)]] [[" onmouseover="alert(1)]] [[a|b" onclick="x]]',
        "Note[^x]. ^[<script>alert(1)</script>]",
        "",
        '[^x]: <a id="nav" href="javascript:alert(2)">y</a> [z](vbscript:msgbox(1))',
        "",
        "<section onclick=alert(1)><sup id=topbar>x</sup></section>",
        "",
        "| a | <b onclick=alert(1)>b</b> |",
        "|---|---|",
        "| [c](data:text/html,<script>alert(1)</script>) | d |",
    ]
)


def _assert_harmless(html: str) -> None:
    for tag, attrs in elements(html).tags:
        assert tag not in {"script", "iframe", "svg", "style", "form", "img"}, tag
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            assert name in {
                "href",
                "title",
                "id",
                "class",
                "rel",
                "type",
                "disabled",
                "checked",
                "start",
                "alt",
                "src",
                "aria-label",
            }
            if name == "aria-label":
                assert (tag, value) == ("input", "Task"), (tag, value)  # never the note's
            if name == "href":
                assert not value.strip().lower().startswith(("javascript:", "vbscript:", "data:"))
            if name == "id":
                assert value.startswith("fn"), value  # footnote anchors only
        if tag == "input":
            assert attrs.get("type") == "checkbox" and "disabled" in attrs and "name" not in attrs


def test_hostile_note_through_the_new_tags_stays_harmless(alice: object) -> None:
    html = render_markdown(HOSTILE_NOTE)
    _assert_harmless(html)
    classes = {c for _, attrs in elements(html).tags for c in attrs.get("class", "").split()}
    assert classes <= {
        "contains-task-list",
        "task-list-item",
        "task-list-item-checkbox",
        "footnote-ref",
        "footnote-backref",
        "footnotes",
        "footnotes-list",
        "footnote-item",
        "footnotes-sep",
        "wikilink",
    }
    # The hand-written placeholder is text, not a wiki link: raw HTML stays off.
    assert "&lt;span class=" in html
    # And once the page resolves wiki links for a reader, still nothing runs.
    note(alice, "Evil", "target")
    client = Client()
    client.force_login(alice)
    hostile = note(alice, "Hostile", HOSTILE_NOTE)
    page = client.get(reverse("notes:detail", args=[hostile.pk])).content.decode()
    start = page.index(">", page.index('<div class="rendered"')) + 1  # the note's HTML
    _assert_harmless(page[start : page.index("</article>")])
    preview = client.post(PREVIEW, {"body": HOSTILE_NOTE}).content.decode()
    _assert_harmless(preview)


# --- 2. wiki links ---------------------------------------------------------------------------


def test_wiki_links_resolve_by_title_without_case(alice_client: Client, alice: object) -> None:
    target = note(alice, "Postgres Failover", "Promote the replica.")
    source = note(
        alice,
        "Runbook index",
        "See [[postgres failover]], [[POSTGRES   FAILOVER|the failover steps]] and "
        "[[Missing page]].",
    )
    page = alice_client.get(reverse("notes:detail", args=[source.pk])).content.decode()
    links = wiki_anchors(page)
    assert [a["href"] for a in links[:2]] == [reverse("notes:detail", args=[target.pk])] * 2
    assert "unresolved" not in links[0]["class"]
    missing = links[2]
    assert "unresolved" in missing["class"].split()
    assert missing["href"] == reverse("notes:create") + "?title=Missing+page"
    assert ">the failover steps</a>" in page
    # The unresolved link's form starts with the title filled in.
    form = alice_client.get(missing["href"]).content.decode()
    assert 'value="Missing page"' in form


def test_wiki_links_match_non_ascii_titles_without_case(
    alice_client: Client, alice: object
) -> None:
    target = note(alice, "Über Plan", "x")
    source = note(alice, "Index", "[[über plan]] [[ÜBER PLAN]] [[Über Plan]]")
    page = alice_client.get(reverse("notes:detail", args=[source.pk])).content.decode()
    assert [a["href"] for a in wiki_anchors(page)] == [
        reverse("notes:detail", args=[target.pk])
    ] * 3


def test_wiki_links_never_resolve_to_another_users_note(
    alice: object, bob: object, bob_client: Client
) -> None:
    secret = note(alice, "Salary review", "Alice's private note.")
    bobs = note(bob, "Bob's index", "Link: [[Salary review]] and [[Bob plan]].")
    bob_plan = note(bob, "Bob plan", "mine")
    page = bob_client.get(reverse("notes:detail", args=[bobs.pk])).content.decode()
    hrefs = [a["href"] for a in wiki_anchors(page)]
    assert reverse("notes:detail", args=[secret.pk]) not in page
    assert hrefs == [
        reverse("notes:create") + "?title=Salary+review",
        reverse("notes:detail", args=[bob_plan.pk]),
    ]
    # Same text in Alice's note (same cached rendering): hers resolves to her note.
    alices = note(alice, "Alice's index", "Link: [[Salary review]] and [[Bob plan]].")
    assert alices.head.sha256 == bobs.head.sha256
    client = Client()
    client.force_login(alice)
    page = client.get(reverse("notes:detail", args=[alices.pk])).content.decode()
    assert [a["href"] for a in wiki_anchors(page)] == [
        reverse("notes:detail", args=[secret.pk]),
        reverse("notes:create") + "?title=Bob+plan",
    ]
    # Bob's preview of the same text does not reach Alice's note either.
    preview = bob_client.post(PREVIEW, {"body": "[[Salary review]]"}).content.decode()
    assert reverse("notes:detail", args=[secret.pk]) not in preview


def test_wiki_links_skip_deleted_notes_and_follow_renames(
    alice_client: Client, alice: object
) -> None:
    old = note(alice, "Old name", "x")
    source = note(alice, "Index", "[[Old name]] [[New name]]")
    url = reverse("notes:detail", args=[source.pk])
    before = [a["href"] for a in wiki_anchors(alice_client.get(url).content.decode())]
    assert before[0] == reverse("notes:detail", args=[old.pk])
    services.note_update(
        document=old, user=alice, base_version_id=old.head_id, title="New name", body="x", tags=""
    )
    after = wiki_anchors(alice_client.get(url).content.decode())
    assert "unresolved" in after[0]["class"]
    assert after[1]["href"] == reverse("notes:detail", args=[old.pk])
    services.note_delete(document=old, user=alice)
    gone = wiki_anchors(alice_client.get(url).content.decode())
    assert all("unresolved" in a["class"] for a in gone)


def test_wiki_links_in_code_stay_text(alice_client: Client, alice: object) -> None:
    note(alice, "Target", "x")
    source = note(alice, "Code", "`[[Target]]`\n\n```\n[[Target]]\n```\n")
    page = alice_client.get(reverse("notes:detail", args=[source.pk])).content.decode()
    assert wiki_anchors(page) == []
    assert page.count("[[Target]]") == 2


def test_old_version_pages_resolve_wiki_links_too(alice_client: Client, alice: object) -> None:
    target = note(alice, "Target", "x")
    source = note(alice, "Index", "[[Target]]")
    first = source.head
    services.note_update(
        document=source, user=alice, base_version_id=first.pk, title="Index", body="now", tags=""
    )
    page = alice_client.get(reverse("notes:version", args=[source.pk, first.pk])).content.decode()
    assert [a["href"] for a in wiki_anchors(page)] == [reverse("notes:detail", args=[target.pk])]


def test_cached_rendering_holds_no_reader_specific_link(alice: object) -> None:
    """The per-version cache is shared by every reader of the same text, so what it holds
    must not name anyone's note: the placeholder does, the page resolves it."""
    target = note(alice, "Target", "x")
    source = note(alice, "Index", "[[Target]]")
    part = rendered_part(sha256=source.head.sha256, body=source.head.body)
    assert '<span class="wikilink" title="Target">Target</span>' in part.html
    assert reverse("notes:detail", args=[target.pk]) not in part.html


# --- 3. the preview endpoint -----------------------------------------------------------------


def test_preview_renders_the_posted_text_through_the_sanitiser(
    alice_client: Client, alice: object
) -> None:
    target = note(alice, "Target", "x")
    body = (
        "# Plan\n\n- [x] done\n\nSee [[target]].<script>alert(1)</script>\n\n| a |\n|---|\n| b |\n"
    )
    response = alice_client.post(PREVIEW, {"body": body}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html  # a fragment, not a page
    assert html.count('<div class="rendered">') == 1
    assert "<h1>Plan</h1>" in html and "<td>b</td>" in html
    assert [a["href"] for a in wiki_anchors(html)] == [reverse("notes:detail", args=[target.pk])]
    assert "<script>" not in html and "&lt;script&gt;" in html
    boxes = [attrs for tag, attrs in elements(html).tags if tag == "input"]
    assert len(boxes) == 1 and "disabled" in boxes[0]


def test_preview_of_empty_text_says_so(alice_client: Client) -> None:
    html = alice_client.post(PREVIEW, {"body": ""}).content.decode()
    assert "Nothing to preview yet" in html


def test_preview_needs_login_post_and_csrf(alice: object) -> None:
    anonymous = Client()
    response = anonymous.post(PREVIEW, {"body": "x"})
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    signed_in = Client(enforce_csrf_checks=True)
    signed_in.force_login(alice)
    assert signed_in.post(PREVIEW, {"body": "x"}).status_code == 403
    plain = Client()
    plain.force_login(alice)
    assert plain.get(PREVIEW).status_code == 405


def test_preview_is_bounded_by_the_note_size_limit(alice_client: Client, settings: object) -> None:
    settings.LODE_MAX_NOTE_BYTES = 10_000
    html = alice_client.post(PREVIEW, {"body": "é" * 6_000}).content.decode()
    assert "Too long to preview" in html and "12,000 bytes" in html
    assert 'class="rendered"' not in html


def test_preview_of_a_long_text_renders_its_first_part_only(alice_client: Client) -> None:
    body = "".join(f"Paragraph {i} with some words in it.\n\n" for i in range(2_000))
    html = alice_client.post(PREVIEW, {"body": body}).content.decode()
    assert "Paragraph 0 " in html and "Paragraph 1999 " not in html
    assert "The preview shows the first" in html


def test_edit_form_has_the_preview_control(alice_client: Client, alice: object) -> None:
    existing = note(alice, "Mine", "text")
    for url in (reverse("notes:create"), reverse("notes:edit", args=[existing.pk])):
        page = alice_client.get(url).content.decode()
        assert f'hx-post="{PREVIEW}"' in page
        assert 'hx-include="#id_body"' in page
        assert 'id="note-preview-body"' in page
