"""Spaces: the services' rules, the space pages and `/api/spaces`.

The cast: alice is the admin of the shared space "Team", bob a viewer in it, carol an
editor, dave a member of nothing but his own personal space.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.urls import reverse

from externals.annotations import annotation_create
from externals.models import Source
from notes import services as note_services
from notes.models import Document
from spaces import services
from spaces.current import SESSION_KEY
from spaces.models import DocumentMove, Membership, Role, Space, personal_space
from tests import factories
from tests.concurrency import postgresql_only, race

# --- the cast ------------------------------------------------------------------------------


@pytest.fixture
def team(alice, bob, carol, dave) -> Space:
    space = services.space_create(by=alice, name="  Team  ", description="Ops notes")
    services.member_add(by=alice, space=space, username="bob", role=Role.VIEWER)
    services.member_add(by=alice, space=space, username="carol", role=Role.EDITOR)
    return space


@pytest.fixture
def synced(monkeypatch) -> list[int]:
    """The document ids whose vector sync a move queued."""
    queued: list[int] = []
    monkeypatch.setattr(services, "enqueue_document_sync_on_commit", queued.append)
    return queued


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def role(space: Space, user: User) -> str | None:
    return Membership.objects.filter(space=space, user=user).values_list("role", flat=True).first()


def in_space(document: Document, space: Space) -> Document:
    Document.objects.filter(pk=document.pk).update(space=space)
    document.refresh_from_db()
    return document


# --- services: spaces ----------------------------------------------------------------------


def test_a_new_space_is_shared_with_its_creator_as_admin(team, alice):
    assert team.name == "Team" and not team.is_personal
    assert role(team, alice) == Role.ADMIN
    assert team.created_by_id == alice.pk


@pytest.mark.parametrize("name", ["", "   ", "x" * 101])
def test_a_space_name_is_one_to_a_hundred_characters(alice, name):
    with pytest.raises(ValidationError):
        services.space_create(by=alice, name=name)
    assert not Space.objects.filter(personal_of__isnull=True).exists()


def test_only_an_admin_changes_a_spaces_settings(team, alice, bob, carol, dave):
    for user in (bob, carol, dave):
        with pytest.raises(PermissionDenied):
            services.space_update(by=user, space=team, name="Mine", no_egress=True)
    services.space_update(
        by=alice, space=team, name=" Ops ", no_egress=True, public_links_enabled=True
    )
    team.refresh_from_db()
    assert (team.name, team.no_egress, team.public_links_enabled) == ("Ops", True, True)
    assert team.description == "Ops notes"  # None leaves a field alone


def test_a_personal_spaces_settings_change_but_its_name_never_empties(alice):
    mine = personal_space(alice)
    services.space_update(by=alice, space=mine, no_egress=True)
    with pytest.raises(ValidationError):
        services.space_update(by=alice, space=mine, name="  ")
    mine.refresh_from_db()
    assert mine.no_egress and mine.name == "Personal"


def test_a_space_holding_a_document_or_source_is_not_deleted(team, alice, carol):
    note = in_space(factories.note(carol, "Plan", "text"), team)
    note_services.note_delete(document=note, user=carol)  # the trash still counts
    with pytest.raises(ValidationError, match="still holds"):
        services.space_delete(by=alice, space=team)
    Document.objects.filter(pk=note.pk).update(space=personal_space(carol))
    source = factories.make_source(alice)
    Source.objects.filter(pk=source.pk).update(space=team)
    with pytest.raises(ValidationError, match="still holds"):
        services.space_delete(by=alice, space=team)
    source.delete()
    with pytest.raises(PermissionDenied):
        services.space_delete(by=carol, space=team)
    services.space_delete(by=alice, space=team)
    assert not Space.objects.filter(pk=team.pk).exists()


def test_a_personal_space_is_never_deleted_nor_left(alice):
    mine = personal_space(alice)
    with pytest.raises(ValidationError):
        services.space_delete(by=alice, space=mine)
    with pytest.raises(ValidationError):
        services.space_leave(user=alice, space=mine)
    assert role(mine, alice) == Role.ADMIN


# --- services: members ---------------------------------------------------------------------


def test_members_are_added_by_username_with_a_role(team, bob, carol, dave):
    assert role(team, bob) == Role.VIEWER and role(team, carol) == Role.EDITOR
    assert role(team, dave) is None


def test_an_unknown_username_is_refused_by_name(team, alice):
    with pytest.raises(ValidationError, match="no user named 'zed'"):
        services.member_add(by=alice, space=team, username="zed", role=Role.VIEWER)


def test_adding_twice_or_an_unknown_role_is_refused(team, alice):
    with pytest.raises(ValidationError, match="already a member"):
        services.member_add(by=alice, space=team, username="bob", role=Role.EDITOR)
    with pytest.raises(ValidationError, match="Unknown role"):
        services.member_add(by=alice, space=team, username="dave", role="owner")


def test_only_an_admin_adds_changes_or_removes_members(team, bob, carol, dave):
    for user in (bob, carol, dave):
        with pytest.raises(PermissionDenied):
            services.member_add(by=user, space=team, username="dave", role=Role.ADMIN)
        with pytest.raises(PermissionDenied):
            services.member_set_role(by=user, space=team, user_id=bob.pk, role=Role.ADMIN)
        with pytest.raises(PermissionDenied):
            services.member_remove(by=user, space=team, user_id=bob.pk)
    assert role(team, dave) is None and role(team, bob) == Role.VIEWER


def test_a_personal_space_gets_no_members(alice, bob):
    with pytest.raises(ValidationError, match="personal space"):
        services.member_add(by=alice, space=personal_space(alice), username="bob")
    assert role(personal_space(alice), bob) is None


def test_the_last_admin_can_neither_leave_be_removed_nor_be_demoted(team, alice, bob):
    with pytest.raises(ValidationError, match="at least one admin"):
        services.space_leave(user=alice, space=team)
    with pytest.raises(ValidationError, match="at least one admin"):
        services.member_remove(by=alice, space=team, user_id=alice.pk)
    with pytest.raises(ValidationError, match="at least one admin"):
        services.member_set_role(by=alice, space=team, user_id=alice.pk, role=Role.EDITOR)
    assert role(team, alice) == Role.ADMIN
    assert services.last_admin(team, alice.pk)
    # With a second admin, either may step down.
    services.member_set_role(by=alice, space=team, user_id=bob.pk, role=Role.ADMIN)
    assert not services.last_admin(team, alice.pk)
    services.space_leave(user=alice, space=team)
    assert role(team, alice) is None
    with pytest.raises(ValidationError, match="at least one admin"):
        services.space_leave(user=bob, space=team)


def test_members_leave_and_are_removed(team, alice, bob, carol):
    services.space_leave(user=bob, space=team)
    services.member_remove(by=alice, space=team, user_id=carol.pk)
    assert role(team, bob) is None and role(team, carol) is None
    with pytest.raises(PermissionDenied):
        services.space_leave(user=bob, space=team)
    with pytest.raises(ValidationError, match="not a member"):
        services.member_remove(by=alice, space=team, user_id=bob.pk)


@pytest.fixture
def slow_admin_count(monkeypatch) -> None:
    """Widen the window between counting admins and writing, so that without the space's
    row lock both racers would count two admins and both succeed."""
    counted = services._admin_count

    def slowly(space: Space) -> int:
        found = counted(space)
        time.sleep(0.3)
        return found

    monkeypatch.setattr(services, "_admin_count", slowly)


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_two_admins_demoting_each_other_at_once_leave_one_admin(slow_admin_count):
    alice = User.objects.create_user("alice", "a@example.com", "pw")
    bob = User.objects.create_user("bob", "b@example.com", "pw")
    space = services.space_create(by=alice, name="Team")
    services.member_add(by=alice, space=space, username="bob", role=Role.ADMIN)
    results = race(
        [
            lambda: services.member_set_role(
                by=alice, space=space, user_id=bob.pk, role=Role.VIEWER
            ),
            lambda: services.member_set_role(
                by=bob, space=space, user_id=alice.pk, role=Role.VIEWER
            ),
        ]
    )
    refused = [r for r in results if isinstance(r, (ValidationError, PermissionDenied))]
    assert len(refused) == 1, results
    assert Membership.objects.filter(space=space, role=Role.ADMIN).count() == 1


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_two_admins_leaving_at_once_leave_one_admin(slow_admin_count):
    alice = User.objects.create_user("alice", "a@example.com", "pw")
    bob = User.objects.create_user("bob", "b@example.com", "pw")
    space = services.space_create(by=alice, name="Team")
    services.member_add(by=alice, space=space, username="bob", role=Role.ADMIN)
    results = race(
        [
            lambda: services.space_leave(user=alice, space=space),
            lambda: services.space_leave(user=bob, space=space),
        ]
    )
    assert sum(isinstance(r, ValidationError) for r in results) == 1, results
    assert Membership.objects.filter(space=space, role=Role.ADMIN).count() == 1


# --- services: moves -----------------------------------------------------------------------


def test_an_editor_moves_a_note_and_the_move_is_recorded(team, carol, synced):
    note = factories.note(carol, "Plan", "Rotate the certs.")
    mine = personal_space(carol)
    services.document_move(by=carol, document=note, to_space=team)
    note.refresh_from_db()
    assert note.space_id == team.pk
    move = DocumentMove.objects.get(document=note)
    assert (move.from_space_id, move.to_space_id, move.moved_by_id) == (mine.pk, team.pk, carol.pk)
    assert (move.from_space_name, move.to_space_name) == ("Personal", "Team")
    assert synced == [note.pk]


def test_moving_needs_editor_on_both_sides(team, alice, bob, carol, dave, synced):
    in_team = in_space(factories.note(alice, "Shared", "text"), team)
    bobs = factories.note(bob, "Bob's", "text")
    with pytest.raises(PermissionDenied):  # bob is a viewer in Team
        services.document_move(by=bob, document=in_team, to_space=personal_space(bob))
    with pytest.raises(PermissionDenied):  # ... so he cannot move into it either
        services.document_move(by=bob, document=bobs, to_space=team)
    with pytest.raises(PermissionDenied):  # dave is not a member of Team
        services.document_move(by=dave, document=in_team, to_space=personal_space(dave))
    with pytest.raises(PermissionDenied):  # carol is not a member of bob's space
        services.document_move(by=carol, document=in_team, to_space=personal_space(bob))
    assert not DocumentMove.objects.exists() and synced == []
    in_team.refresh_from_db()
    assert in_team.space_id == team.pk


def test_an_external_or_an_annotation_does_not_move_alone(team, alice, synced):
    source = factories.make_source(alice)
    external = factories.make_source_external(source)
    annotation = annotation_create(
        owner=alice, version=external.head, start=7, end=16, quote="the certs", text="Why?"
    )
    with pytest.raises(ValidationError, match="source"):
        services.document_move(by=alice, document=external, to_space=team)
    with pytest.raises(ValidationError, match="annotation"):
        services.document_move(by=alice, document=annotation.note_document, to_space=team)
    with pytest.raises(ValidationError, match="already"):
        services.document_move(
            by=alice, document=factories.note(alice, "x", "y"), to_space=personal_space(alice)
        )
    assert not DocumentMove.objects.exists() and synced == []


def test_a_source_moves_with_its_externals_and_their_annotations(team, alice, carol, synced):
    source = factories.make_source(alice)
    first = factories.make_source_external(source, path="a.md")
    second = factories.make_source_external(source, path="b.md", title="Other")
    annotation = annotation_create(
        owner=alice, version=first.head, start=7, end=16, quote="the certs", text="Why?"
    )
    moved = services.source_move(by=alice, source=source, to_space=team)
    assert moved == 3
    source.refresh_from_db()
    assert source.space_id == team.pk
    moved_ids = {first.pk, second.pk, annotation.note_document_id}
    assert set(Document.objects.filter(space=team).values_list("pk", flat=True)) == moved_ids
    assert set(DocumentMove.objects.values_list("document_id", flat=True)) == moved_ids
    assert sorted(synced) == sorted(moved_ids)


def test_moving_a_source_needs_editor_of_both_spaces(team, alice, bob, carol, synced):
    source = factories.make_source(alice)
    Source.objects.filter(pk=source.pk).update(space=team)
    factories.make_source_external(source)
    with pytest.raises(PermissionDenied, match="editor"):  # bob only views Team
        services.source_move(by=bob, source=source, to_space=personal_space(bob))
    with pytest.raises(PermissionDenied):  # alice is no editor of carol's personal space
        services.source_move(by=alice, source=source, to_space=personal_space(carol))
    assert not DocumentMove.objects.exists() and synced == []
    # carol edits Team and her own space: the source and its external go.
    assert services.source_move(by=carol, source=source, to_space=personal_space(carol)) == 1


# --- pages ---------------------------------------------------------------------------------


def test_the_space_list_shows_each_users_spaces_and_roles(team, alice, bob, carol, dave):
    in_space(factories.note(alice, "Shared", "text"), team)
    page = client_for(bob).get(reverse("spaces:list")).content.decode()
    assert "Team" in page and "Viewer" in page and "Personal" in page
    assert 'name="csrfmiddlewaretoken"' in page
    page = client_for(alice).get(reverse("spaces:list")).content.decode()
    assert "Admin" in page
    row = page[page.index(f'data-space-id="{team.pk}"') :].split("</tr>")[0]
    assert '<td data-label="Members">3</td>' in row
    assert '<td data-label="Documents">1</td>' in row
    page = client_for(carol).get(reverse("spaces:list")).content.decode()
    assert "Team" in page and "Editor" in page
    page = client_for(dave).get(reverse("spaces:list")).content.decode()
    assert "Team" not in page


def test_creating_a_space_from_the_page(alice):
    client = client_for(alice)
    response = client.post(reverse("spaces:create"), {"name": "Research", "description": ""})
    space = Space.objects.get(name="Research")
    assert response.status_code == 302
    assert response["Location"] == reverse("spaces:detail", args=[space.pk])
    assert role(space, alice) == Role.ADMIN
    assert client.post(reverse("spaces:create"), {"name": "   "}).status_code == 400


@pytest.mark.parametrize(
    ("who", "admin_controls"), [("alice", True), ("bob", False), ("carol", False)]
)
def test_a_members_space_page(team, who, admin_controls, request):
    page = client_for(request.getfixturevalue(who)).get(reverse("spaces:detail", args=[team.pk]))
    text = page.content.decode()
    assert page.status_code == 200
    assert all(name in text for name in ("alice", "bob", "carol"))
    assert ("Invite someone" in text) is admin_controls
    assert ("Save settings" in text) is admin_controls
    assert ("No egress" in text) is admin_controls
    assert "Leave this space" in text


def test_a_non_member_gets_the_no_access_page(team, dave):
    client = client_for(dave)
    for url in (
        reverse("spaces:detail", args=[team.pk]),
        reverse("spaces:detail", args=[team.pk + 1000]),
    ):
        response = client.get(url)
        assert response.status_code == 404
        assert "have access to this" in response.content.decode()
        assert "Team" not in response.content.decode()
        assert "Ops notes" not in response.content.decode()
    for name in ("settings", "leave", "member-add", "delete"):
        response = client.post(reverse(f"spaces:{name}", args=[team.pk]), {"username": "dave"})
        assert response.status_code == 404
    for name in ("member-role", "member-remove"):
        response = client.post(
            reverse(f"spaces:{name}", args=[team.pk, team.created_by_id]),
            {f"m{team.created_by_id}-role": "viewer"},
        )
        assert response.status_code == 404
    assert role(team, dave) is None
    assert role(team, team.created_by) == Role.ADMIN
    assert Space.objects.filter(pk=team.pk).exists()


def test_the_last_admin_sees_leave_disabled_with_the_reason(team, alice):
    text = client_for(alice).get(reverse("spaces:detail", args=[team.pk])).content.decode()
    assert "You are its only admin" in text
    response = client_for(alice).post(reverse("spaces:leave", args=[team.pk]), follow=True)
    assert "at least one admin" in response.content.decode()
    assert role(team, alice) == Role.ADMIN


def test_an_admin_invites_changes_and_removes_from_the_page(team, alice, dave):
    client = client_for(alice)
    client.post(
        reverse("spaces:member-add", args=[team.pk]), {"username": "dave", "role": "editor"}
    )
    assert role(team, dave) == Role.EDITOR
    client.post(
        reverse("spaces:member-role", args=[team.pk, dave.pk]), {f"m{dave.pk}-role": "viewer"}
    )
    assert role(team, dave) == Role.VIEWER
    response = client.post(
        reverse("spaces:member-add", args=[team.pk]),
        {"username": "nobody", "role": "viewer"},
        follow=True,
    )
    assert "no user named" in response.content.decode()
    client.post(reverse("spaces:member-remove", args=[team.pk, dave.pk]))
    assert role(team, dave) is None


def test_a_viewer_or_editor_cannot_manage_members_from_the_page(team, bob, carol, dave):
    for user in (bob, carol):
        response = client_for(user).post(
            reverse("spaces:member-add", args=[team.pk]),
            {"username": "dave", "role": "admin"},
            follow=True,
        )
        assert "Only an admin" in response.content.decode()
        client_for(user).post(reverse("spaces:settings", args=[team.pk]), {"name": "Taken"})
    assert role(team, dave) is None
    team.refresh_from_db()
    assert team.name == "Team"


def test_an_admin_saves_settings_from_the_page(team, alice):
    client_for(alice).post(
        reverse("spaces:settings", args=[team.pk]),
        {"name": "Ops", "description": "", "no_egress": "on"},
    )
    team.refresh_from_db()
    assert (team.name, team.no_egress, team.public_links_enabled) == ("Ops", True, False)


def test_a_member_leaves_from_the_page(team, bob):
    response = client_for(bob).post(reverse("spaces:leave", args=[team.pk]))
    assert response.status_code == 302 and role(team, bob) is None


def test_the_switcher_sets_the_current_space_and_goes_back(team, bob, dave):
    client = client_for(bob)
    response = client.post(reverse("spaces:switch"), {"space": team.pk, "next": "/notes/"})
    assert response["Location"] == "/notes/"
    assert client.session[SESSION_KEY] == team.pk
    page = client.get(reverse("spaces:list")).content.decode()
    assert f'<option value="{team.pk}" selected>Team</option>' in page
    # The header's form posts no `next`: back to the same-origin Referer.
    response = client.post(
        reverse("spaces:switch"), {"space": "all"}, headers={"referer": "http://testserver/ask"}
    )
    assert response["Location"] == "http://testserver/ask"
    assert SESSION_KEY not in client.session


def test_the_switcher_refuses_a_foreign_space_and_an_offsite_next(team, dave):
    client = client_for(dave)
    response = client.post(
        reverse("spaces:switch"), {"space": team.pk, "next": "https://evil.example/"}
    )
    assert response["Location"] == reverse("home")
    assert SESSION_KEY not in client.session
    response = client.post(reverse("spaces:switch"), {"space": "all", "next": "//evil.example/"})
    assert response["Location"] == reverse("home")
    response = client.post(
        reverse("spaces:switch"), {"space": "all"}, headers={"referer": "https://evil.example/x"}
    )
    assert response["Location"] == reverse("home")


def test_a_no_access_page_does_not_echo_its_url(team, dave):
    client = client_for(dave)
    theirs = client.get(reverse("spaces:detail", args=[team.pk])).content.decode()
    missing = client.get(reverse("spaces:detail", args=[team.pk + 1000])).content.decode()
    token = re.compile(r'(name="csrfmiddlewaretoken" value=")[^"]+|("X-CSRFToken": ")[^"]+')
    assert token.sub(r"\1\2", theirs) == token.sub(r"\1\2", missing)


def test_the_header_switcher_lists_only_my_spaces(team, dave, bob):
    page = client_for(dave).get(reverse("notes:list")).content.decode()
    assert 'class="space-switch"' in page and ">Team</option>" not in page
    page = client_for(bob).get(reverse("notes:list")).content.decode()
    assert ">Team</option>" in page and ">All spaces</option>" in page


def test_moving_a_note_from_the_page(team, carol, bob, synced):
    note = factories.note(carol, "Plan", "text")
    url = reverse("spaces:move", args=[note.pk])
    response = client_for(carol).post(url, {"to_space": team.pk}, follow=True)
    assert "Moved “Plan” to Team." in response.content.decode()
    note.refresh_from_db()
    assert note.space_id == team.pk
    # bob (a viewer of Team) sees it now, but may not move it out.
    response = client_for(bob).post(url, {"to_space": personal_space(bob).pk}, follow=True)
    assert response.status_code == 403
    assert "editor" in response.content.decode()
    note.refresh_from_db()
    assert note.space_id == team.pk


def test_moving_someone_elses_note_is_no_access(team, carol, dave):
    note = factories.note(carol, "Plan", "text")
    response = client_for(dave).post(
        reverse("spaces:move", args=[note.pk]), {"to_space": personal_space(dave).pk}
    )
    assert response.status_code == 404
    note.refresh_from_db()
    assert note.space_id == personal_space(carol).pk


def test_pages_need_login_and_csrf(team):
    assert Client().get(reverse("spaces:list")).status_code == 302
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(team.created_by)
    response = strict.post(reverse("spaces:create"), {"name": "Sneaky"})
    assert response.status_code == 403
    assert not Space.objects.filter(name="Sneaky").exists()


# --- API -----------------------------------------------------------------------------------


def api(client: Client, method: str, path: str, body: object = None):
    kwargs = {} if body is None else {"data": json.dumps(body), "content_type": "application/json"}
    return getattr(client, method)(f"/api/spaces{path}", **kwargs)


def test_api_lists_creates_and_gets_spaces(team, alice, bob):
    listed = api(client_for(bob), "get", "/").json()
    assert [(s["name"], s["role"], s["personal"]) for s in listed] == [
        ("Personal", "admin", True),
        ("Team", "viewer", False),
    ]
    assert listed[1]["member_count"] == 3
    created = api(client_for(alice), "post", "/", {"name": "Lab"})
    assert created.status_code == 201 and created.json()["role"] == "admin"
    got = api(client_for(bob), "get", f"/{team.pk}").json()
    assert {m["username"]: m["role"] for m in got["members"]} == {
        "alice": "admin",
        "bob": "viewer",
        "carol": "editor",
    }


def test_api_hides_a_space_from_a_non_member(team, dave):
    client = client_for(dave)
    for method, path, body in [
        ("get", f"/{team.pk}", None),
        ("patch", f"/{team.pk}", {"name": "x"}),
        ("delete", f"/{team.pk}", None),
        ("post", f"/{team.pk}/members", {"username": "dave"}),
        ("post", f"/{team.pk}/leave", None),
    ]:
        response = api(client, method, path, body)
        assert response.status_code == 404, (method, path)
        assert "Team" not in response.content.decode()
        assert response.json()["detail"].startswith("No access")


def test_api_roles_and_refusals(team, alice, bob, carol, dave):
    assert api(client_for(bob), "patch", f"/{team.pk}", {"name": "B"}).status_code == 403
    assert (
        api(client_for(carol), "post", f"/{team.pk}/members", {"username": "dave"}).status_code
        == 403
    )
    admin = client_for(alice)
    missing = api(admin, "post", f"/{team.pk}/members", {"username": "zed"})
    assert missing.status_code == 404 and "no user named" in missing.json()["detail"]
    assert (
        api(
            admin, "post", f"/{team.pk}/members", {"username": "dave", "role": "editor"}
        ).status_code
        == 201
    )
    assert role(team, dave) == Role.EDITOR
    again = api(admin, "post", f"/{team.pk}/members", {"username": "dave"})
    assert again.status_code == 409 and "already a member" in again.json()["detail"]
    assert api(admin, "put", f"/{team.pk}/members/{dave.pk}", {"role": "admin"}).status_code == 200
    assert api(admin, "delete", f"/{team.pk}/members/{dave.pk}").status_code == 204
    last = api(admin, "post", f"/{team.pk}/leave")
    assert last.status_code == 409 and "at least one admin" in last.json()["detail"]
    demote = api(admin, "put", f"/{team.pk}/members/{alice.pk}", {"role": "viewer"})
    assert demote.status_code == 409
    gone = api(admin, "put", f"/{team.pk}/members/{dave.pk}", {"role": "viewer"})
    assert gone.status_code == 404 and "not a member" in gone.json()["detail"]
    assert api(admin, "patch", f"/{team.pk}", {"public_links_enabled": True}).json()[
        "public_links_enabled"
    ]
    assert api(client_for(bob), "post", f"/{team.pk}/leave").status_code == 204


def test_api_moves_a_document_and_a_source(team, alice, carol, dave, synced):
    note = factories.note(carol, "Plan", "text")
    path = f"/move/document/{note.pk}"
    assert api(client_for(dave), "post", path, {"to_space": team.pk}).status_code == 404
    moved = api(client_for(carol), "post", path, {"to_space": team.pk})
    assert moved.status_code == 200 and moved.json() == {"moved_documents": 1, "to_space": team.pk}
    foreign = api(client_for(carol), "post", path, {"to_space": personal_space(dave).pk})
    assert foreign.status_code == 404
    source = factories.make_source(alice)
    factories.make_source_external(source)
    source_path = f"/move/source/{source.pk}"
    assert api(client_for(carol), "post", source_path, {"to_space": team.pk}).status_code == 404
    moved = api(client_for(alice), "post", source_path, {"to_space": team.pk})
    assert moved.json() == {"moved_documents": 1, "to_space": team.pk}


def test_api_deletes_only_an_empty_shared_space(team, alice):
    personal = personal_space(alice)
    refused = api(client_for(alice), "delete", f"/{personal.pk}")
    assert refused.status_code == 409 and "personal space" in refused.json()["detail"]
    assert api(client_for(alice), "delete", f"/{team.pk}").status_code == 204


def test_every_spaces_endpoint_is_in_the_api_docs(alice):
    schema = client_for(alice).get("/api/openapi.json").json()
    paths = {path for path in schema["paths"] if path.startswith("/api/spaces")}
    assert paths == {
        "/api/spaces/",
        "/api/spaces/{space_id}",
        "/api/spaces/{space_id}/members",
        "/api/spaces/{space_id}/members/{user_id}",
        "/api/spaces/{space_id}/public-links",
        "/api/spaces/{space_id}/leave",
        "/api/spaces/move/document/{document_id}",
        "/api/spaces/move/source/{source_id}",
    }


# --- admin ---------------------------------------------------------------------------------


def test_staff_see_only_their_own_spaces_in_the_admin(team, alice, dave):
    client = factories.staff_client(dave, superuser=False)
    from django.contrib.auth.models import Permission

    dave.user_permissions.add(*Permission.objects.filter(content_type__app_label="spaces"))
    page = client.get("/admin/spaces/space/").content.decode()
    assert "Team" not in page
    assert client.get(f"/admin/spaces/space/{team.pk}/change/").status_code in (302, 404)
    root = factories.staff_client()
    assert "Team" in root.get("/admin/spaces/space/").content.decode()


def test_the_move_control_offers_only_spaces_i_can_write_to(team, carol, bob):
    from django.template.loader import render_to_string
    from django.test import RequestFactory

    from retrieval.eligibility import member_spaces

    note = factories.note(carol, "Plan", "text")
    request = RequestFactory().get("/notes/")
    request.user = carol
    html = render_to_string(
        "spaces/move.html#move_form",
        {"document": note, "member_spaces": list(member_spaces(carol.pk))},
        request=request,
    )
    assert f'action="{reverse("spaces:move", args=[note.pk])}"' in html
    assert f'<option value="{team.pk}">Team</option>' in html
    assert "csrfmiddlewaretoken" in html
    request.user = bob
    html = render_to_string(
        "spaces/move.html#move_form",
        {
            "document": factories.note(bob, "Mine", "x"),
            "member_spaces": list(member_spaces(bob.pk)),
        },
        request=request,
    )
    assert ">Team</option>" not in html  # bob is only a viewer there
