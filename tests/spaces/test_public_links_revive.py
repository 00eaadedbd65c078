"""Turning a space's public links back on brings back only the earlier links its admin ticks
(none by default): the others are revoked, and their tokens open the same 404 as a token that
never existed. The same through the space's settings page, the turn-on page, the API and the
Django admin."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.sites import site
from django.contrib.auth.models import User
from django.contrib.messages.storage.cookie import CookieStorage
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client, RequestFactory

from notes import services as note_services
from notes.models import Document
from retrieval.models import AskTrace
from spaces import public, services
from spaces.models import Membership, PublicLink, Role, Space

UNKNOWN_TOKEN = "A" * 43


@pytest.fixture
def team(alice, bob, carol) -> Space:
    """alice admin, bob viewer, carol editor; public links on."""
    space = Space.objects.create(name="Team Kestrel", created_by=alice, public_links_enabled=True)
    Membership.objects.create(space=space, user=alice, role=Role.ADMIN)
    Membership.objects.create(space=space, user=bob, role=Role.VIEWER)
    Membership.objects.create(space=space, user=carol, role=Role.EDITOR)
    return space


@pytest.fixture
def runbook(carol, team) -> Document:
    return note_services.note_create(
        owner=carol,
        title="Kestrel runbook",
        body="# Kestrel runbook\n\nRestart the relay.\n",
        space=team,
    )


@pytest.fixture
def earlier(alice, carol, team, runbook) -> list[PublicLink]:
    """Two links made while public links were on (a note version by carol, an answer by
    alice), then public links turned off."""
    answer = AskTrace.objects.create(
        user=alice,
        space=team,
        question="How do we restart the relay?",
        decision="ABSTAIN_NO_EVIDENCE",
        answerer="extractive",
        answer={"question": "How do we restart the relay?", "decision": "ABSTAIN_NO_EVIDENCE"},
    )
    links = [
        public.link_create(by=carol, version=runbook.head),
        public.link_create(by=alice, answer=answer),
    ]
    services.space_update(by=alice, space=team, public_links_enabled=False)
    return links


def client_for(user: User, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def opens(link: PublicLink) -> bool:
    return Client().get(f"/p/{link.token}").status_code == 200


def dead_like_unknown(link: PublicLink) -> bool:
    """The link's page is byte for byte the page of a token that never existed."""
    dead, unknown = Client().get(f"/p/{link.token}"), Client().get(f"/p/{UNKNOWN_TOKEN}")
    return dead.status_code == unknown.status_code == 404 and dead.content == unknown.content


def test_turning_public_links_back_on_revives_no_earlier_link_by_default(alice, team, earlier):
    assert not any(opens(link) for link in earlier)
    services.space_update(by=alice, space=team, public_links_enabled=True)
    assert all(dead_like_unknown(link) for link in earlier)
    revoked = PublicLink.objects.filter(pk__in=[link.pk for link in earlier])
    assert set(revoked.values_list("revoked_by", flat=True)) == {alice.pk}
    # Turning them off and on again later does not bring them back either.
    services.space_update(by=alice, space=team, public_links_enabled=False)
    services.space_update(by=alice, space=team, public_links_enabled=True)
    assert not any(opens(link) for link in earlier)


def test_only_the_links_the_admin_chooses_come_back(alice, team, earlier):
    kept, dropped = earlier
    services.space_update(by=alice, space=team, public_links_enabled=True, revive_links=[kept.pk])
    assert opens(kept)
    assert dead_like_unknown(dropped)


def test_a_link_of_another_space_cannot_be_revived_and_nothing_changes(
    alice, team, earlier, runbook
):
    other = Space.objects.create(name="Elsewhere", created_by=alice, public_links_enabled=True)
    Membership.objects.create(space=other, user=alice, role=Role.ADMIN)
    elsewhere = note_services.note_create(owner=alice, title="Else", body="Else.\n", space=other)
    foreign = public.link_create(by=alice, version=elsewhere.head)
    with pytest.raises(ValidationError, match="Not an earlier public link of this space"):
        services.space_update(
            by=alice, space=team, public_links_enabled=True, revive_links=[foreign.pk]
        )
    team.refresh_from_db()
    assert not team.public_links_enabled
    assert PublicLink.objects.filter(revoked_at__isnull=False).count() == 0


def test_reviving_is_refused_unless_public_links_are_being_turned_on(alice, team, earlier):
    with pytest.raises(ValidationError, match="only be brought back while turning"):
        services.space_update(by=alice, space=team, name="Kestrel", revive_links=[earlier[0].pk])
    services.space_update(by=alice, space=team, public_links_enabled=True)
    with pytest.raises(ValidationError):
        services.space_update(
            by=alice, space=team, public_links_enabled=True, revive_links=[earlier[0].pk]
        )


def test_only_an_admin_turns_them_back_on(carol, team, earlier):
    with pytest.raises(PermissionDenied):
        services.space_update(
            by=carol, space=team, public_links_enabled=True, revive_links=[earlier[0].pk]
        )
    assert not any(opens(link) for link in earlier)


# --- the pages ---------------------------------------------------------------------------------


def settings_form(space: Space, **changes) -> dict:
    return {"name": space.name, "description": "", "public_links_enabled": "on", **changes}


def test_ticking_public_links_on_asks_first_and_saves_the_rest(alice, team, earlier):
    client = client_for(alice)
    response = client.post(f"/spaces/{team.pk}/settings", settings_form(team, name="Kestrel"))
    assert response.status_code == 302
    assert response["Location"] == f"/share/spaces/{team.pk}/links/turn-on"
    team.refresh_from_db()
    assert team.name == "Kestrel" and not team.public_links_enabled
    assert not PublicLink.objects.filter(revoked_at__isnull=False).exists()

    page = client.get(response["Location"])
    html = page.content.decode()
    assert page.status_code == 200
    assert html.count('name="revive"') == 2
    assert " checked" not in html  # none ticked
    assert "Note “Kestrel runbook”, version 1" in html
    assert "Answer: “How do we restart the relay?”" in html
    assert "by carol" in html and "by alice" in html
    assert earlier[0].created_at.strftime("%Y-%m-%d") in html


def test_the_turn_on_page_brings_back_what_is_ticked(alice, team, earlier):
    kept, dropped = earlier
    response = client_for(alice).post(
        f"/share/spaces/{team.pk}/links/turn-on", {"revive": [str(kept.pk)]}, follow=True
    )
    assert response.redirect_chain[-1][0] == f"/share/spaces/{team.pk}/links"
    html = response.content.decode()
    assert "Earlier links brought back: 1." in html
    assert "Earlier links revoked for good (they open nothing): 1." in html
    team.refresh_from_db()
    assert team.public_links_enabled
    assert opens(kept) and dead_like_unknown(dropped)


def test_the_turn_on_page_with_nothing_ticked_revives_nothing(alice, team, earlier):
    client_for(alice).post(f"/share/spaces/{team.pk}/links/turn-on", {})
    team.refresh_from_db()
    assert team.public_links_enabled
    assert all(dead_like_unknown(link) for link in earlier)


def test_a_stale_choice_is_a_clear_error_and_changes_nothing(alice, team, earlier):
    public.link_revoke(by=alice, link=earlier[0])  # revoked meanwhile, elsewhere
    response = client_for(alice).post(
        f"/share/spaces/{team.pk}/links/turn-on", {"revive": [str(earlier[0].pk)]}
    )
    assert response.status_code == 400
    assert "no longer one of this space&#x27;s earlier links" in response.content.decode()
    team.refresh_from_db()
    assert not team.public_links_enabled
    assert PublicLink.objects.get(pk=earlier[1].pk).revoked_at is None


def test_the_turn_on_form_needs_its_csrf_token(alice, team, earlier):
    client = client_for(alice, enforce_csrf_checks=True)
    response = client.post(f"/share/spaces/{team.pk}/links/turn-on", {})
    assert response.status_code == 403
    team.refresh_from_db()
    assert not team.public_links_enabled
    assert (
        'name="csrfmiddlewaretoken"'
        in client.get(f"/share/spaces/{team.pk}/links/turn-on").content.decode()
    )


def test_editors_viewers_and_outsiders_cannot_use_the_turn_on_page(bob, carol, dave, team, earlier):
    url = f"/share/spaces/{team.pk}/links/turn-on"
    for member in (bob, carol):
        assert client_for(member).get(url).status_code == 403
        assert client_for(member).post(url, {"revive": [str(earlier[0].pk)]}).status_code == 403
    outsider = client_for(dave)
    assert outsider.get(url).status_code == 404
    assert "Kestrel" not in outsider.post(url, {}).content.decode()
    team.refresh_from_db()
    assert not team.public_links_enabled
    assert not any(opens(link) for link in earlier)


def test_with_public_links_on_the_turn_on_page_goes_to_the_links_page(alice, team):
    response = client_for(alice).get(f"/share/spaces/{team.pk}/links/turn-on")
    assert response.status_code == 302
    assert response["Location"] == f"/share/spaces/{team.pk}/links"


def test_without_earlier_links_the_settings_page_turns_them_on_at_once(alice, team):
    services.space_update(by=alice, space=team, public_links_enabled=False)
    response = client_for(alice).post(f"/spaces/{team.pk}/settings", settings_form(team))
    assert response["Location"] == f"/spaces/{team.pk}/"
    team.refresh_from_db()
    assert team.public_links_enabled


# --- the API -----------------------------------------------------------------------------------


def api(client: Client, method: str, path: str, body: object = None):
    kwargs = {} if body is None else {"data": json.dumps(body), "content_type": "application/json"}
    return getattr(client, method)(f"/api/spaces{path}", **kwargs)


def test_the_api_lists_earlier_links_and_revives_only_those_named(alice, team, earlier):
    kept, dropped = earlier
    client = client_for(alice)
    listed = api(client, "get", f"/{team.pk}/public-links").json()
    assert [row["id"] for row in listed] == [dropped.pk, kept.pk]  # newest first
    assert listed[1]["shows"] == "Note “Kestrel runbook”, version 1"
    assert listed[1]["created_by"] == "carol" and listed[1]["opens"] is False

    response = api(
        client,
        "patch",
        f"/{team.pk}",
        {"public_links_enabled": True, "revive_public_links": [kept.pk]},
    )
    assert response.status_code == 200 and response.json()["public_links_enabled"] is True
    assert opens(kept) and dead_like_unknown(dropped)
    assert [row["id"] for row in api(client, "get", f"/{team.pk}/public-links").json()] == [kept.pk]


def test_the_api_revives_none_unless_asked_and_refuses_unknown_ids(alice, team, earlier):
    client = client_for(alice)
    bad = api(
        client,
        "patch",
        f"/{team.pk}",
        {"public_links_enabled": True, "revive_public_links": [10**9]},
    )
    assert bad.status_code == 404 and "Not an earlier public link" in bad.json()["detail"]
    team.refresh_from_db()
    assert not team.public_links_enabled
    assert api(client, "patch", f"/{team.pk}", {"public_links_enabled": True}).status_code == 200
    assert all(dead_like_unknown(link) for link in earlier)


def test_a_member_sees_only_their_own_links_and_an_outsider_nothing(
    bob, carol, dave, team, earlier
):
    assert [
        row["id"] for row in api(client_for(carol), "get", f"/{team.pk}/public-links").json()
    ] == [earlier[0].pk]
    assert api(client_for(bob), "get", f"/{team.pk}/public-links").json() == []
    assert api(client_for(dave), "get", f"/{team.pk}/public-links").status_code == 404


# --- the Django admin --------------------------------------------------------------------------


def test_turning_them_on_in_the_django_admin_revives_none(alice, team, earlier):
    alice.is_staff = alice.is_superuser = True
    alice.save()
    request = RequestFactory().post("/admin/spaces/space/")
    request.user = alice
    request._messages = CookieStorage(request)
    team.refresh_from_db()
    model_admin = site._registry[Space]
    form_class = model_admin.get_form(request, team, change=True)
    form = form_class(
        {"name": team.name, "description": "", "public_links_enabled": "on"}, instance=team
    )
    assert form.is_valid(), form.errors
    model_admin.save_model(request, form.save(commit=False), form, change=True)
    team.refresh_from_db()
    assert team.public_links_enabled
    assert [m.message for m in request._messages] == [
        "Public links are on; the 2 earlier link(s) stay revoked."
    ]
    assert all(dead_like_unknown(link) for link in earlier)
