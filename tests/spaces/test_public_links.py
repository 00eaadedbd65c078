"""Public read-only links: who may create and revoke them, what a live link
shows (exactly its content, evidence verified on opening), and what a dead one shows
(nothing, the same for every reason); no cookies, noindex, rate limit, view log."""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client, RequestFactory
from django.utils import timezone

from notes import services
from notes.models import Document, Version
from retrieval.answer.types import ShownClaim, ShownSupport
from retrieval.eligibility import NO_LONGER_VISIBLE
from retrieval.models import AskTrace
from spaces import public
from spaces.admin_public import PublicLinkAdmin
from spaces.models import Membership, PublicLink, PublicLinkView, Role, Space, personal_space
from tests import factories

SPACE_NAME = "Team Zeta"
NOTE_BODY = (
    "# Failover drill\n\nPromote the replica with pg_ctl promote, then repoint the "
    "pooler.\n\n## Checks\n\nConfirm the replication lag is zero before promoting.\n"
)
QUOTE = "Promote the replica with pg_ctl promote"
SECRET_WORD = "quixotrombone"  # only in the other note of the space
QUESTION = "How do we fail over the database?"


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def team(alice, bob, carol) -> Space:
    """alice admin, bob viewer, carol editor; public links on."""
    space = Space.objects.create(name=SPACE_NAME, created_by=alice, public_links_enabled=True)
    Membership.objects.create(space=space, user=alice, role=Role.ADMIN)
    Membership.objects.create(space=space, user=bob, role=Role.VIEWER)
    Membership.objects.create(space=space, user=carol, role=Role.EDITOR)
    return space


@pytest.fixture
def drill(alice, team) -> Document:
    return services.note_create(owner=alice, title="Failover drill", body=NOTE_BODY, space=team)


@pytest.fixture
def other_note(alice, team) -> Document:
    return services.note_create(
        owner=alice,
        title="Vendor contacts",
        body=f"Call the {SECRET_WORD} hotline for the storage array.\n",
        space=team,
    )


def support_dict(note: Document, span: str) -> dict:
    version = note.head
    start = version.body.index(span)
    return ShownSupport(
        version_id=version.pk,
        version_number=version.number,
        document_id=note.pk,
        document_title=note.title,
        kind=note.kind,
        trust_tier=note.trust_tier,
        quoted_span=span,
        start=start,
        end=start + len(span),
        segments=((span, True),),
        evidence_url="",
        version_created_at=version.created_at.isoformat(),
    ).as_dict()


def make_answer(user: User, space: Space | None, note: Document) -> AskTrace:
    """A stored answer shaped like the ask pipeline's (claims of ShownClaim.as_dict())."""
    claim = {
        **ShownClaim(text="Promote the replica, then repoint the pooler.", support=()).as_dict(),
        "support": [support_dict(note, QUOTE)],
    }
    return AskTrace.objects.create(
        user=user,
        space=space,
        question=QUESTION,
        decision="ANSWER",
        answerer="extractive",
        answer={"question": QUESTION, "decision": "ANSWER", "claims": [claim], "dropped": []},
    )


@pytest.fixture
def answer(alice, team, drill, other_note) -> AskTrace:
    return make_answer(alice, team, drill)


def new_version(note: Document, user: User, body: str) -> None:
    note.refresh_from_db()
    services.note_update(
        document=note, user=user, base_version_id=note.head_id, title=note.title, body=body
    )


def open_public(link: PublicLink, client: Client | None = None, **extra):
    return (client or Client()).get(f"/p/{link.token}", **extra)


# --- creating ----------------------------------------------------------------------------------


def test_editors_and_admins_publish_a_version_viewers_and_outsiders_cannot(
    alice, bob, carol, dave, drill
):
    assert public.link_create(by=alice, version=drill.head).space_id == drill.space_id
    assert public.link_create(by=carol, version=drill.head).kind == PublicLink.Kind.VERSION
    for user in (bob, dave):
        with pytest.raises(PermissionDenied, match="Only editors and admins"):
            public.link_create(by=user, version=drill.head)
    assert PublicLink.objects.count() == 2


def test_a_space_with_public_links_off_refuses_and_says_the_admin_can_turn_them_on(
    alice, team, drill
):
    Space.objects.filter(pk=team.pk).update(public_links_enabled=False)
    drill.refresh_from_db()
    with pytest.raises(PermissionDenied, match="An admin of the space can turn them on"):
        public.link_create(by=alice, version=drill.head)
    assert not PublicLink.objects.exists()


def test_externals_and_deleted_notes_are_not_publishable(alice, drill):
    space = personal_space(alice)
    Space.objects.filter(pk=space.pk).update(public_links_enabled=True)
    external = factories.make_external(alice)
    assert external.space_id == space.pk
    with pytest.raises(PermissionDenied, match="Externals are other people's content"):
        public.link_create(by=alice, version=external.head)
    Document.objects.filter(pk=drill.pk).update(deleted_at=timezone.now())
    with pytest.raises(PermissionDenied, match="in the trash"):
        public.link_create(by=alice, version=Version.objects.get(pk=drill.head_id))
    assert not PublicLink.objects.exists()


def test_an_answer_asked_across_all_spaces_is_never_publishable(alice, drill):
    private = make_answer(alice, None, drill)
    with pytest.raises(PermissionDenied, match="asked across all your spaces"):
        public.link_create(by=alice, answer=private)


def test_an_answer_asked_in_a_space_needs_an_editor_there(alice, bob, carol, answer):
    with pytest.raises(PermissionDenied):
        public.link_create(by=bob, answer=answer)
    link = public.link_create(by=carol, answer=answer)
    assert (link.kind, link.space_id) == (PublicLink.Kind.ANSWER, answer.space_id)


def test_expiry_must_be_in_the_future_and_an_expired_link_is_dead(alice, drill):
    with pytest.raises(ValidationError):
        public.link_create(
            by=alice, version=drill.head, expires_at=timezone.now() - timedelta(seconds=1)
        )
    link = public.link_create(
        by=alice, version=drill.head, expires_at=timezone.now() + timedelta(days=1)
    )
    assert open_public(link).status_code == 200
    PublicLink.objects.filter(pk=link.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert public.link_resolve(link.token) is None
    assert open_public(link).status_code == 404


# --- revoking ----------------------------------------------------------------------------------


def test_the_creator_or_a_space_admin_revokes_nobody_else(alice, bob, carol, dave, drill, team):
    Membership.objects.create(
        space=team, user=User.objects.create_user("erin", "e@example.com", "pw"), role="editor"
    )
    erin = User.objects.get(username="erin")
    by_carol = public.link_create(by=carol, version=drill.head)
    for user in (bob, dave, erin):
        with pytest.raises(PermissionDenied, match="creator or an admin"):
            public.link_revoke(by=user, link=by_carol)
    public.link_revoke(by=carol, link=by_carol)
    by_carol.refresh_from_db()
    assert by_carol.revoked_by == carol and by_carol.revoked_at is not None
    by_erin = public.link_create(by=erin, version=drill.head)
    public.link_revoke(by=alice, link=by_erin)
    assert public.link_resolve(by_erin.token) is None
    assert open_public(by_erin).status_code == 404


def test_a_creator_removed_from_the_space_can_no_longer_revoke(carol, drill, team):
    link = public.link_create(by=carol, version=drill.head)
    Membership.objects.filter(space=team, user=carol).delete()
    assert not public.may_revoke(carol, link)


# --- dead links all look the same --------------------------------------------------------------


def test_revoked_expired_disabled_moved_and_unknown_links_are_one_identical_page(
    alice, drill, team
):
    links = [public.link_create(by=alice, version=drill.head) for _ in range(3)]
    public.link_revoke(by=alice, link=links[0])
    PublicLink.objects.filter(pk=links[1].pk).update(expires_at=timezone.now())
    unknown = Client().get("/p/" + "A" * 43)
    bodies = {open_public(links[0]).content, open_public(links[1]).content, unknown.content}
    bodies.add(Client().get("/p/short").content)
    bodies.add(Client().get("/p/" + "x" * 200).content)
    assert open_public(links[2]).status_code == 200
    Space.objects.filter(pk=team.pk).update(public_links_enabled=False)
    bodies.add(open_public(links[2]).content)
    Space.objects.filter(pk=team.pk).update(public_links_enabled=True)
    assert open_public(links[2]).status_code == 200
    Document.objects.filter(pk=drill.pk).update(space=personal_space(alice))
    moved = open_public(links[2])
    bodies.add(moved.content)
    assert len(bodies) == 1
    assert moved.status_code == unknown.status_code == 404
    page = unknown.content.decode()
    assert "This link is not available" in page
    assert "Failover" not in page and SPACE_NAME not in page
    # Only the two openings that were served are logged.
    assert list(PublicLinkView.objects.values_list("link_id", flat=True)) == [links[2].pk] * 2


def test_a_deleted_note_takes_its_links_with_it(alice, drill):
    link = public.link_create(by=alice, version=drill.head)
    services.note_delete(document=drill, user=alice)
    assert open_public(link).status_code == 404


# --- headers, cookies, no login ----------------------------------------------------------------


@pytest.mark.parametrize("signed_in", [False, True])
def test_the_page_needs_no_login_sets_no_cookie_and_is_noindex(signed_in, alice, bob, drill):
    link = public.link_create(by=alice, version=drill.head)
    client = client_for(bob) if signed_in else Client()
    response = open_public(link, client)
    assert response.status_code == 200
    assert "Set-Cookie" not in response.headers and not response.cookies
    assert response["X-Robots-Tag"] == "noindex, nofollow"
    assert response["Referrer-Policy"] == "no-referrer"
    assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]
    html = response.content.decode()
    assert '<meta name="robots" content="noindex' in html
    assert "csrfmiddlewaretoken" not in html and "<form" not in html and "<script" not in html
    dead = Client().get("/p/" + "B" * 43)
    assert dead["X-Robots-Tag"] == "noindex, nofollow" and "Set-Cookie" not in dead.headers


def test_only_get(alice, drill):
    link = public.link_create(by=alice, version=drill.head)
    assert Client().post(f"/p/{link.token}").status_code == 405


# --- exactly the content -----------------------------------------------------------------------


def assert_nothing_else(html: str, alice: User) -> None:
    """Nothing of the rest of the space or the app: no other note, no space name, no
    creator, no link into lode (the only local URL is the stylesheet)."""
    assert SECRET_WORD not in html and "Vendor contacts" not in html
    assert SPACE_NAME not in html and alice.username not in html
    for path in ('href="/notes', 'href="/search', 'href="/ask', 'href="/evidence', 'href="/"'):
        assert path not in html
    assert 'action="' not in html


def test_a_version_page_shows_title_number_date_and_rendered_body_only(alice, drill, other_note):
    link = public.link_create(by=alice, version=drill.head)
    html = open_public(link).content.decode()
    assert "<h1>Failover drill</h1>" in html
    assert "Version 1" in html and drill.head.created_at.strftime("%Y-%m-%d") in html
    assert "<h2>Checks</h2>" in html  # rendered through the sanitiser, not shown as source
    assert "pg_ctl promote" in html
    assert_nothing_else(html, alice)


def test_an_older_version_link_keeps_showing_that_version(alice, drill):
    link = public.link_create(by=alice, version=drill.head)
    new_version(drill, alice, "Rewritten entirely.\n")
    html = open_public(link).content.decode()
    assert "pg_ctl promote" in html and "Rewritten entirely" not in html


def test_note_markup_is_sanitised_on_the_public_page(alice, team):
    note = services.note_create(
        owner=alice,
        title="Hostile",
        body="<script>alert(1)</script>\n\n[x](javascript:alert(1))\n\n[[Vendor contacts]]\n",
        space=team,
    )
    html = open_public(public.link_create(by=alice, version=note.head)).content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)" in html
    assert 'href="javascript' not in html
    assert 'class="wikilink"' in html and '<a class="wikilink' not in html  # never linked


def test_an_answer_page_shows_the_question_claims_and_verified_quotes_only(
    alice, answer, other_note
):
    link = public.link_create(by=alice, answer=answer)
    html = open_public(link).content.decode()
    assert QUESTION in html
    assert "Promote the replica, then repoint the pooler." in html
    assert f"<mark>{QUOTE}</mark>" in html
    assert "✓ verified" in html and "Failover drill · version 1" in html
    assert "no longer verifies" not in html
    assert "repoint the pooler.\n\n## Checks" not in html  # the quote, not the whole note
    assert_nothing_else(html, alice)


def test_an_abstention_says_the_notes_did_not_answer(alice, team, drill):
    trace = make_answer(alice, team, drill)
    trace.answer = {"question": QUESTION, "decision": "ABSTAIN_NO_EVIDENCE", "claims": []}
    trace.decision = "ABSTAIN_NO_EVIDENCE"
    trace.save()
    html = open_public(public.link_create(by=alice, answer=trace)).content.decode()
    assert "did not answer this question" in html and QUESTION in html


def test_tampered_evidence_no_longer_verifies_and_its_quote_is_not_shown(alice, drill, answer):
    link = public.link_create(by=alice, answer=answer)
    Version.objects.filter(pk=drill.head_id).update(
        body=NOTE_BODY.replace("pg_ctl promote", "pg_ctl demote")
    )
    html = open_public(link).content.decode()
    assert "no longer verifies" in html
    assert QUOTE not in html and "✓ verified" not in html


def test_a_tampered_hash_also_fails_verification(alice, drill, answer):
    link = public.link_create(by=alice, answer=answer)
    Version.objects.filter(pk=drill.head_id).update(sha256="0" * 64)
    html = open_public(link).content.decode()
    assert "no longer verifies" in html and QUOTE not in html


def test_evidence_moved_out_of_the_space_hides_the_claim_whole(alice, drill, answer):
    link = public.link_create(by=alice, answer=answer)
    Document.objects.filter(pk=drill.pk).update(space=personal_space(alice))
    html = open_public(link).content.decode()
    assert NO_LONGER_VISIBLE in html and QUOTE not in html and "Failover drill" not in html
    assert "Promote the replica, then repoint the pooler." not in html


def test_a_stored_answer_citing_another_space_shows_nothing_of_it(alice, team, drill):
    private = services.note_create(owner=alice, title="Diary", body="My private plan is here.\n")
    trace = make_answer(alice, team, drill)
    trace.answer["claims"][0]["support"].append(support_dict(private, "private plan"))
    trace.save()
    html = open_public(public.link_create(by=alice, answer=trace)).content.decode()
    assert "private plan" not in html and "Diary" not in html
    # The claim cites a note outside the space, so none of it is shown, not even its quote
    # from the space's own note.
    assert NO_LONGER_VISIBLE in html and QUOTE not in html


def test_a_superseded_version_still_verifies_and_says_so(alice, drill, answer):
    link = public.link_create(by=alice, answer=answer)
    new_version(drill, alice, "New text.\n")
    html = open_public(link).content.decode()
    assert f"<mark>{QUOTE}</mark>" in html and "the current version is 2" in html


def test_a_tampered_version_body_is_not_shown_on_its_page(alice, drill):
    link = public.link_create(by=alice, version=drill.head)
    Version.objects.filter(pk=drill.head_id).update(body="Injected text.\n")
    html = open_public(link).content.decode()
    assert "no longer matches its own content hash" in html and "Injected" not in html


# --- rate limit and view log -------------------------------------------------------------------


@pytest.fixture
def frozen_clock(monkeypatch):
    monkeypatch.setattr(public, "now", lambda: 1_000_000.0)


def test_views_over_the_per_address_limit_get_429_with_retry_after(
    settings, frozen_clock, alice, drill
):
    settings.LODE_PUBLIC_LINK_VIEWS_PER_MINUTE = 3
    link = public.link_create(by=alice, version=drill.head)
    for _ in range(3):
        assert open_public(link, REMOTE_ADDR="203.0.113.7").status_code == 200
    refused = open_public(link, REMOTE_ADDR="203.0.113.7")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert (
        refused["X-Robots-Tag"] == "noindex, nofollow" and "pg_ctl" not in refused.content.decode()
    )
    # Unknown tokens are throttled too (guessing costs the same as reading).
    assert Client().get("/p/" + "C" * 43, REMOTE_ADDR="203.0.113.7").status_code == 429
    assert open_public(link, REMOTE_ADDR="198.51.100.9").status_code == 200
    assert PublicLinkView.objects.count() == 4  # refused openings are not views


def test_the_total_cap_holds_across_addresses(settings, frozen_clock, alice, drill):
    settings.LODE_PUBLIC_LINK_TOTAL_VIEWS_PER_MINUTE = 2
    link = public.link_create(by=alice, version=drill.head)
    assert open_public(link, REMOTE_ADDR="192.0.2.1").status_code == 200
    assert open_public(link, REMOTE_ADDR="192.0.2.2").status_code == 200
    assert open_public(link, REMOTE_ADDR="192.0.2.3").status_code == 429


def test_every_view_is_logged_with_a_keyed_hash_not_the_address(settings, alice, drill):
    link = public.link_create(by=alice, version=drill.head)
    open_public(link, REMOTE_ADDR="203.0.113.42")
    open_public(link, REMOTE_ADDR="203.0.113.42")
    views = list(PublicLinkView.objects.filter(link=link))
    assert len(views) == 2 and all(v.viewed_at for v in views)
    expected = hmac.new(settings.SECRET_KEY.encode(), b"203.0.113.42", hashlib.sha256).hexdigest()
    assert {v.client_hash for v in views} == {expected}
    assert "203.0.113.42" not in expected
    assert expected != hashlib.sha256(b"203.0.113.42").hexdigest()  # keyed, not a bare hash


# --- managing links in the web ------------------------------------------------------------------


def test_an_editor_creates_a_link_from_the_form_and_sees_it_on_the_links_page(carol, drill, team):
    client = client_for(carol)
    response = client.post(
        "/share/links/new",
        {"kind": "version", "target_id": drill.head_id, "expires_in_days": "7"},
    )
    link = PublicLink.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/share/spaces/{team.pk}/links?created={link.pk}"
    assert link.created_by == carol and link.expires_at > timezone.now() + timedelta(days=6)
    page = client.get(response["Location"]).content.decode()
    assert f"/p/{link.token}" in page and "just-created" in page


def test_a_viewer_is_told_why_not_and_nothing_is_created(bob, drill, team):
    client = client_for(bob)
    response = client.post("/share/links/new", {"kind": "version", "target_id": drill.head_id})
    assert response.status_code == 403 and not PublicLink.objects.exists()
    assert "Only editors and admins" in response.content.decode()


def test_an_outsider_gets_no_access_for_every_management_url(alice, dave, drill, answer, team):
    link = public.link_create(by=alice, version=drill.head)
    client = client_for(dave)
    for data in (
        {"kind": "version", "target_id": drill.head_id},
        {"kind": "answer", "target_id": answer.pk},
        {"kind": "version", "target_id": 999999},
    ):
        response = client.post("/share/links/new", data)
        assert response.status_code == 404 and "Failover" not in response.content.decode()
    assert client.get(f"/share/spaces/{team.pk}/links").status_code == 404
    assert client.post(f"/share/links/{link.pk}/revoke").status_code == 404
    assert PublicLink.objects.count() == 1 and public.link_resolve(link.token) is not None


def test_a_private_answer_form_post_is_refused_with_the_reason(alice, drill):
    private = make_answer(alice, None, drill)
    client = client_for(alice)
    response = client.post("/share/links/new", {"kind": "answer", "target_id": private.pk})
    assert response.status_code == 403 and not PublicLink.objects.exists()
    assert "asked across all your spaces" in response.content.decode()


def test_the_target_may_be_named_by_its_kind(alice, answer):
    response = client_for(alice).post("/share/links/new", {"kind": "answer", "answer": answer.pk})
    assert response.status_code == 302 and PublicLink.objects.get().answer == answer


def test_a_member_cannot_revoke_someone_elses_link_from_the_page(alice, carol, drill):
    link = public.link_create(by=alice, version=drill.head)
    response = client_for(carol).post(f"/share/links/{link.pk}/revoke")
    assert response.status_code == 403 and "creator or an admin" in response.content.decode()
    assert public.link_resolve(link.token) is not None


def test_admins_see_every_live_link_members_their_own(alice, bob, carol, drill, team, answer):
    by_alice = public.link_create(by=alice, answer=answer)
    by_carol = public.link_create(by=carol, version=drill.head)
    revoked = public.link_create(by=carol, version=drill.head)
    public.link_revoke(by=carol, link=revoked)
    url = f"/share/spaces/{team.pk}/links"
    admin_page = client_for(alice).get(url).content.decode()
    assert by_alice.token in admin_page and by_carol.token in admin_page
    assert revoked.token not in admin_page
    carol_page = client_for(carol).get(url).content.decode()
    assert by_carol.token in carol_page and by_alice.token not in carol_page
    bob_page = client_for(bob).get(url).content.decode()
    assert by_alice.token not in bob_page and by_carol.token not in bob_page


def test_revoking_from_the_page(alice, carol, drill, team):
    link = public.link_create(by=carol, version=drill.head)
    response = client_for(alice).post(f"/share/links/{link.pk}/revoke")
    assert response.status_code == 302
    link.refresh_from_db()
    assert link.revoked_by == alice and open_public(link).status_code == 404


def test_the_include_form_renders_for_an_editor(carol, drill, team):
    from django.template.loader import render_to_string

    html = render_to_string(
        "spaces/_public_link_form.html",
        {
            "public_link_kind": "version",
            "public_link_target_id": drill.head_id,
            "public_link_space": team,
            "public_link_role": "editor",
        },
        request=RequestFactory().get("/"),
    )
    assert 'action="/share/links/new"' in html and f'value="{drill.head_id}"' in html
    assert "csrfmiddlewaretoken" in html
    viewer = render_to_string(
        "spaces/_public_link_form.html",
        {"public_link_kind": "version", "public_link_space": team, "public_link_role": "viewer"},
    )
    assert "<form" not in viewer and "Only editors and admins" in viewer


# --- admin -------------------------------------------------------------------------------------


def test_admin_revokes_selected_and_staff_see_only_spaces_they_administer(
    alice, carol, drill, team
):
    from django.contrib import admin as django_admin

    link = public.link_create(by=carol, version=drill.head)
    model_admin = PublicLinkAdmin(PublicLink, django_admin.site)
    request = RequestFactory().get("/admin/")
    carol.is_staff = True
    carol.save()
    request.user = carol  # an editor, not an admin of the space
    assert list(model_admin.get_queryset(request)) == []
    alice.is_staff = True
    alice.save()
    request.user = alice
    queryset = model_admin.get_queryset(request)
    assert list(queryset) == [link]
    model_admin.message_user = lambda *args, **kwargs: None
    model_admin.revoke_selected(request, queryset)
    link.refresh_from_db()
    assert link.revoked_by == alice and public.link_resolve(link.token) is None
