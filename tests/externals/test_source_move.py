"""Moving a source to another space from its page: an editor of both spaces moves it with
its externals and their annotations, each move recorded; a viewer of the target space is
refused in plain words, a viewer of the source's space gets 403, a stranger 404."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from externals.annotations import annotation_create
from externals.models import Source
from notes.models import Document
from spaces import services as space_services
from spaces.models import DocumentMove, Role, Space, personal_space
from tests.factories import make_source, make_source_external


@pytest.fixture
def team(alice, bob, carol) -> Space:
    """alice admin, carol editor, bob viewer."""
    space = space_services.space_create(by=alice, name="Team")
    space_services.member_add(by=alice, space=space, username=bob.username, role=Role.VIEWER)
    space_services.member_add(by=alice, space=space, username=carol.username, role=Role.EDITOR)
    return space


@pytest.fixture
def folder_source(alice) -> Source:
    return make_source(alice, name="Runbooks")


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def move_url(source: Source) -> str:
    return reverse("externals:source-move", args=[source.pk])


def test_an_editor_moves_a_folder_source_into_a_shared_space(alice, alice_client, team):
    source = make_source(alice, name="Runbooks")
    first = make_source_external(source, path="a.md")
    second = make_source_external(source, path="b.md", title="Other")
    annotation = annotation_create(
        owner=alice, version=first.head, start=0, end=6, quote="Rotate", text="Why?"
    )
    page = alice_client.get(reverse("externals:source", args=[source.pk])).content.decode()
    form = re.search(r'<form class="move-form source-move".*?</form>', page, re.S).group(0)
    assert f'action="{move_url(source)}"' in form and "csrfmiddlewaretoken" in form
    assert re.findall(r'<option value="(\d+)">', form) == [str(team.pk)]

    response = alice_client.post(move_url(source), {"to_space": team.pk}, follow=True)
    assert "Moved “Runbooks” to Team, with 3 documents." in response.content.decode()
    source.refresh_from_db()
    assert source.space_id == team.pk
    moved = {first.pk, second.pk, annotation.note_document_id}
    assert set(Document.objects.filter(space=team).values_list("pk", flat=True)) == moved
    recorded = DocumentMove.objects.filter(to_space=team, moved_by=alice)
    assert set(recorded.values_list("document_id", flat=True)) == moved
    assert set(recorded.values_list("from_space_name", flat=True)) == {personal_space(alice).name}


def test_an_editor_of_both_spaces_moves_it_back_out(carol, team, alice):
    source = make_source(alice, name="Team docs", space=team)
    make_source_external(source)
    response = client_for(carol).post(move_url(source), {"to_space": personal_space(carol).pk})
    assert response.status_code == 302
    source.refresh_from_db()
    assert source.space_id == personal_space(carol).pk


def test_a_viewer_of_the_target_space_is_refused_in_plain_words(bob, team):
    source = make_source(bob, name="Bob's docs")
    external = make_source_external(source)
    page = client_for(bob).get(reverse("externals:source", args=[source.pk])).content.decode()
    assert "source-move" not in page  # Team is not offered: bob only views it
    response = client_for(bob).post(move_url(source), {"to_space": team.pk}, follow=True)
    assert "You need to be an editor of the space you move it to." in response.content.decode()
    source.refresh_from_db()
    external.refresh_from_db()
    assert source.space_id == external.space_id == personal_space(bob).pk
    assert not DocumentMove.objects.exists()


def test_a_viewer_of_the_sources_space_gets_403_and_no_control(alice, bob, team):
    source = make_source(alice, name="Team docs", space=team)
    make_source_external(source)
    page = client_for(bob).get(reverse("externals:source", args=[source.pk])).content.decode()
    assert "source-move" not in page
    response = client_for(bob).post(move_url(source), {"to_space": personal_space(bob).pk})
    assert response.status_code == 403
    source.refresh_from_db()
    assert source.space_id == team.pk and not DocumentMove.objects.exists()


def test_a_stranger_gets_404_and_a_space_one_is_not_in_is_refused(alice, dave, folder_source):
    response = client_for(dave).post(move_url(folder_source), {"to_space": personal_space(dave).pk})
    assert response.status_code == 404
    response = Client().post(move_url(folder_source), {"to_space": personal_space(alice).pk})
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    # alice names dave's personal space: not one of hers.
    response = client_for(alice).post(
        move_url(folder_source), {"to_space": personal_space(dave).pk}, follow=True
    )
    assert "You are not a member of that space." in response.content.decode()
    response = client_for(alice).post(move_url(folder_source), {"to_space": "x"}, follow=True)
    assert "Choose a space to move the source to." in response.content.decode()
    folder_source.refresh_from_db()
    assert folder_source.space_id == personal_space(alice).pk


def test_moving_needs_csrf(alice, team, folder_source):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post(move_url(folder_source), {"to_space": team.pk}).status_code == 403
    folder_source.refresh_from_db()
    assert folder_source.space_id == personal_space(alice).pk
