"""Pages say, in plain words, when meaning search is behind the notes: on search results and
on a note's page right after it is saved, counted over the viewer's own spaces only, silent
(after one query) when nothing is pending.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from notes import services
from retrieval.eligibility import audience_for
from retrieval.index.sync import sync_vectors
from retrieval.models import Passage
from retrieval.search.pipeline import pending_notice
from tests.factories import sections

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_vectors")]

NOTICE = "New and changed notes are still being indexed for meaning search"


def waiting(count: int) -> str:
    return f"({count} passage{'s' if count != 1 else ''} waiting)"


def bobs_backlog(bob) -> None:
    services.note_create(
        owner=bob, title="Bob's import", body=sections(*(f"Row {i} of bob." for i in range(7)))
    )


def test_a_just_saved_note_says_it_is_not_yet_searchable_by_meaning(
    alice_client, alice, bob
) -> None:
    bobs_backlog(bob)
    response = alice_client.post(
        "/notes/new", {"title": "Bread", "body": "Bake bread at 220 degrees.", "tags": ""}
    )
    assert response.status_code == 302
    page = alice_client.get(response["Location"]).content.decode()
    assert NOTICE in page
    assert f"{waiting(1)}; keyword search already finds them." in page
    assert waiting(8) not in page and waiting(7) not in page  # bob's backlog is his own

    # Her note embedded, bob's backlog still waiting: nothing to say to alice.
    sync_vectors(Passage.objects.filter(document__owner=alice).values_list("pk", flat=True))
    page = alice_client.get(response["Location"]).content.decode()
    assert NOTICE not in page and "pending-notice" not in page
    assert pending_notice(audience_for(bob.pk)) is not None


def test_search_results_say_how_many_of_the_viewers_passages_wait(
    alice_client, bob_client, alice, bob
) -> None:
    services.note_create(owner=alice, title="Bread", body=sections("Bake bread.", "Cool bread."))
    bobs_backlog(bob)
    page = alice_client.get("/search", {"q": "bread"}).content.decode()
    assert f"{NOTICE} {waiting(2)}; keyword search already finds them." in page
    assert "Bake" in page  # keywords find the note already
    page = bob_client.get("/search", {"q": "bread"}).content.decode()
    assert f"{NOTICE} {waiting(7)}" in page

    sync_vectors()
    for client in (alice_client, bob_client):
        page = client.get("/search", {"q": "bread"}).content.decode()
        assert NOTICE not in page


def test_nothing_pending_in_the_viewers_spaces_is_silent_after_one_query(alice, bob) -> None:
    audience = audience_for(alice.pk)
    with CaptureQueriesContext(connection) as queries:
        assert pending_notice(audience) is None
    assert len(queries) == 1
    bobs_backlog(bob)  # pending, but not in any space alice sees
    assert pending_notice(audience) is None
    assert pending_notice(audience_for(bob.pk)) == (
        f"{NOTICE} {waiting(7)}; keyword search already finds them."
    )
