"""Every table column has a header a screen reader can read (the note
history's Restore column had an empty `<th>`). A header may be visually hidden, never empty."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.urls import reverse

from notes import services
from tests.factories import make_source, make_source_external

pytestmark = pytest.mark.django_db


class HeaderTexts(HTMLParser):
    """The text of each `<th>` of a page, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.headers: list[str] = []
        self._inside = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "th":
            self._inside = True
            self.headers.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "th":
            self._inside = False

    def handle_data(self, data: str) -> None:
        if self._inside:
            self.headers[-1] += data


def headers(response) -> list[str]:
    assert response.status_code == 200
    parser = HeaderTexts()
    parser.feed(response.content.decode())
    return [text.strip() for text in parser.headers]


def test_history_restore_column_has_a_header(alice_client, alice, alice_note):
    services.note_update(
        document=alice_note,
        user=alice,
        base_version_id=alice_note.head_id,
        title=alice_note.title,
        body=alice_note.head.body + "\nOne more line.\n",
    )
    found = headers(alice_client.get(reverse("notes:history", args=[alice_note.pk])))
    # "From" and "To" pick two versions to compare (more than one version exists here).
    assert found == ["From", "To", "Version", "Title", "Saved", "Size", "Restore"]


def test_no_table_of_the_app_has_an_empty_header(alice_client, alice):
    source = make_source(alice)
    external = make_source_external(source)
    for url in [
        reverse("externals:sources"),
        reverse("externals:source", args=[source.pk]),
        reverse("externals:external", args=[external.pk]),
        reverse("search-help"),
    ]:
        found = headers(alice_client.get(url))
        assert found and all(found), (url, found)
