"""The everyday pages of notes, spaces, sources, settings and answers speak plainly: rule
names and versions, offsets, scores, thresholds, generation numbers, hashes and "single hop"
appear only inside an Advanced block (a `<details class="advanced">`), neither as words nor
as tooltips, and every version label is the number users see, never a row id."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from notes import services
from notes.models import Document
from spaces import public
from spaces.models import Space
from tests.factories import edit, make_source, make_source_external, note

pytestmark = pytest.mark.django_db

INTERNAL = re.compile(
    r"\bscores?\b|threshold|code points?|generation \d|\brule\b|wiki-link v\d|single[- ]hop"
    r"|sha-?256|characters \d+\s*[–-]\s*\d+|character \d+ of",
    re.IGNORECASE,
)
QUESTION = "Which maxmemory-policy is set on the cache?"


class _Shown(HTMLParser):
    """The words a reader meets: text outside script/style and the tooltips and labels,
    split into what is inside an Advanced block (which may hold further `<details>`) and what
    is outside."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.advanced: list[str] = []
        self._hidden = 0
        self._details: list[bool] = []  # per open <details>: is it an Advanced block

    def _keep(self, text: str) -> None:
        (self.advanced if any(self._details) else self.parts).append(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._hidden += 1
        fields = dict(attrs)
        if tag == "details":
            self._details.append("advanced" in (fields.get("class") or "").split())
        for name in ("title", "aria-label", "placeholder"):
            if fields.get(name):
                self._keep(fields[name] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._hidden -= 1
        if tag == "details" and self._details:
            self._details.pop()

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self._keep(data)


def _read(html: str) -> _Shown:
    parser = _Shown()
    parser.feed(html)
    parser.close()
    return parser


def shown_outside_advanced(html: str) -> str:
    return " ".join(" ".join(_read(html).parts).split())


def shown_under_advanced(html: str) -> str:
    return " ".join(" ".join(_read(html).advanced).split())


@pytest.fixture
def pages(alice, alice_client, carol) -> dict[str, str]:
    # Rows before these notes make every version's row id differ from its number.
    for i in range(6):
        note(carol, f"Someone else's {i}", "Unrelated text.")
    team = note(alice, "Team Falcon", "# Team Falcon\n\nPages go to the falcon pager.\n")
    service = note(
        alice,
        "Billing API",
        "# Billing API\n\nBilling API takes card payments. Ask Team Falcon.\n\n"
        "On call: see [[Team Falcon]] and [[Missing runbook]].\n",
    )
    edit(team, alice, "# Team Falcon\n\nPages go to the falcon pager alias.\n")
    # An unlinked mention: an inferred row on Team Falcon's page.
    note(alice, "Pager rota", "This week Team Falcon holds the pager.")
    note(alice, "Cache", "# Cache\n\nSet maxmemory-policy allkeys-lru on the cache.\n")
    asked = alice_client.post(reverse("ask"), {"question": QUESTION})
    assert asked.status_code == 303
    hosts = "\n\n".join(f"Host {i} runs the cache." for i in range(1500))
    long_note = note(alice, "Inventory", hosts)
    gone = note(alice, "Old plan", "Nothing here.")
    services.note_delete(document=gone, user=alice)
    space = Space.objects.get(pk=service.space_id)
    space.public_links_enabled = True
    space.save(update_fields=["public_links_enabled"])
    link = public.link_create(by=alice, version=service.head)
    source = make_source(alice, space=space)
    make_source_external(source)
    team.refresh_from_db()
    assert service.head_id != 1 and team.head.pk != team.head.number
    return {
        "note": reverse("notes:detail", args=[service.pk]),
        "linked note": reverse("notes:detail", args=[team.pk]),
        "long note part 2": reverse("notes:detail", args=[long_note.pk]) + "?part=2",
        "history": reverse("notes:history", args=[team.pk]),
        "old version": reverse("notes:version", args=[team.pk, team.versions.get(number=1).pk]),
        "version": reverse("notes:version", args=[service.pk, service.head_id]),
        "compare": reverse("notes:compare", args=[team.pk]),
        "notes": reverse("notes:list"),
        "trash": reverse("notes:trash"),
        "edit": reverse("notes:edit", args=[service.pk]),
        "spaces": reverse("spaces:list"),
        "space": reverse("spaces:detail", args=[space.pk]),
        "public links": reverse("public-links", args=[space.pk]),
        "sources": reverse("externals:sources"),
        "source": reverse("externals:source", args=[source.pk]),
        "source edit": reverse("externals:source-edit", args=[source.pk]),
        "tokens": reverse("settings-tokens"),
        "public version": public.public_url(link),
        "answer": asked["Location"],
    }


def test_everyday_pages_keep_internals_under_advanced(alice_client, pages):
    for name, url in pages.items():
        response = alice_client.get(url)
        assert response.status_code == 200, name
        shown = shown_outside_advanced(response.content.decode())
        found = sorted({m.group(0) for m in INTERNAL.finditer(shown)})
        assert not found, f"{name} ({url}) shows {found} outside Advanced"


def test_everyday_pages_show_links_and_the_answer(alice_client, pages):
    """The pages checked above hold what would carry internals: link badges (written and
    inferred) and a verified answer with its quote."""
    note_page = alice_client.get(pages["note"]).content.decode()
    assert 'title="a link written in the note"' in note_page
    linked = alice_client.get(pages["linked note"]).content.decode()
    assert 'title="inferred from the text, not a written link"' in linked
    assert "Why inferred" in linked and "Pager rota" in linked
    answer = alice_client.get(pages["answer"]).content.decode()
    assert 'data-decision="ANSWER"' in answer and "<mark>" in answer
    assert 'class="provenance"' in answer


def test_internals_are_still_there_under_advanced(alice_client, pages):
    def advanced(name: str) -> str:
        return shown_under_advanced(alice_client.get(pages[name]).content.decode())

    for name in ("note", "version"):
        assert "sha256" in advanced(name) and "bytes" in advanced(name), name
    assert "X-Lode-Signature" in advanced("source")
    links = advanced("note")
    assert "rule wiki-link v1; characters" in links and "of version 1" in links
    linked = advanced("linked note")
    assert "rule title-mention v" in linked and "inferred, not written as a link" in linked
    assert re.search(r"“Cache”, version 1: characters \d+–\d+ .*code points", advanced("answer"))


def test_version_labels_are_the_numbers_users_see(alice_client, pages, alice):
    for title, number in (("Billing API", 1), ("Team Falcon", 2)):
        document = Document.objects.get(owner=alice, title=title)
        shown = shown_outside_advanced(alice_client.get(pages["notes"]).content.decode())
        assert f"v{number} ·" in shown
        for name in ("note", "linked note", "history", "version", "old version", "public version"):
            shown = shown_outside_advanced(alice_client.get(pages[name]).content.decode())
            row_ids = {v.pk for v in document.versions.all()} - {1, 2}
            for row_id in row_ids:
                assert not re.search(rf"\bv(?:ersion)?\s*{row_id}\b", shown, re.I), (name, row_id)
    assert "Version 2" in shown_outside_advanced(
        alice_client.get(pages["linked note"]).content.decode()
    )
    assert "Part 2 of" in shown_outside_advanced(
        alice_client.get(pages["long note part 2"]).content.decode()
    )
