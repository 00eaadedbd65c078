"""Roles over notes, sources, externals, snapshots and annotations.

One shared space "Team": alice is its admin, carol an editor, bob a viewer; dave is in no
space but his own. Every notes/externals page and API endpoint is tried by each of them on
an object in Team and on one in alice's personal space:

* reads — any member (200); anyone else the no-access 404, which names nothing;
* writes — the role each needs (editor: notes, adding sources, scan now, annotating;
  admin: a source's settings, enabling, deleting, its webhook secret; an annotation's
  author or an admin: deleting it); a member without it 403; a non-member 404.

Also: documents a scan creates land in the source's space and inherit the space's
no-egress; `--space` on the import commands; lists, badges and the current space; admin
for staff who are not superusers.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client

from externals.annotations import annotation_create
from externals.models import Annotation, Source
from externals.pipeline import scan_source
from externals.services import upload_create
from lode_site.errors import NO_ACCESS
from notes import services
from notes.models import Document
from spaces.current import SESSION_KEY
from spaces.models import Membership, Role, Space, personal_space
from tests import factories

NO_ACCESS_HEADING = "You don't have access to this"
TEAM_TITLE = "Team incident runbook"
PRIVATE_TITLE = "Alice private diary"
SOURCE_NAME = "Team wiki"
PEOPLE = ("alice", "carol", "bob", "dave")


@dataclass
class World:
    """The people, their clients and the objects every test tries."""

    users: dict[str, User]
    clients: dict[str, Client]
    team: Space
    team_note: Document
    private_note: Document
    team_source: Source
    team_external: Document
    private_source: Source
    private_external: Document


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def world(alice, bob) -> World:
    carol = User.objects.create_user("carol", "carol@example.com", "pw")
    dave = User.objects.create_user("dave", "dave@example.com", "pw")
    users = {"alice": alice, "carol": carol, "bob": bob, "dave": dave}
    team = Space.objects.create(name="Team", created_by=alice)
    for user, role in ((alice, Role.ADMIN), (carol, Role.EDITOR), (bob, Role.VIEWER)):
        Membership.objects.create(space=team, user=user, role=role)
    team_note = services.note_create(
        owner=alice, title=TEAM_TITLE, body="Page the on-call first. #ops\n", space=team
    )
    services.note_update(
        document=team_note,
        user=alice,
        base_version_id=team_note.head_id,
        title=TEAM_TITLE,
        body="Page the on-call first, then the lead. #ops\n",
    )
    team_note.refresh_from_db()
    private_note = services.note_create(owner=alice, title=PRIVATE_TITLE, body="Mine alone.\n")
    # A real folder inside the test settings' allowed roots, so an editor's scan is queued.
    team_source = factories.make_source(
        alice, SOURCE_NAME, space=team, location=tempfile.mkdtemp(prefix="team-docs-")
    )
    team_external = factories.make_source_external(
        team_source, bodies=(factories.EXTERNAL_BODY, factories.EXTERNAL_BODY + "More.\n")
    )
    private_source = factories.make_source(alice, "Alice bookmarks")
    private_external = factories.make_source_external(private_source, title="Bookmarks")
    return World(
        users=users,
        clients={name: _client(user) for name, user in users.items()},
        team=team,
        team_note=team_note,
        private_note=private_note,
        team_source=team_source,
        team_external=team_external,
        private_source=private_source,
        private_external=private_external,
    )


def _annotate(world: World, who: str, text: str = "Check this") -> Annotation:
    external = world.team_external
    body = external.head.body
    start = body.index(factories.EXTERNAL_QUOTE)
    return annotation_create(
        owner=world.users[who],
        version=external.head,
        start=start,
        end=start + len(factories.EXTERNAL_QUOTE),
        quote=factories.EXTERNAL_QUOTE,
        text=text,
        document=external,
    )


def assert_no_access(response, *secrets: str) -> None:
    """The no-access answer: 404, the page (or JSON) that names nothing."""
    assert response.status_code == 404
    content = response.content.decode()
    if response["Content-Type"].startswith("application/json"):
        assert response.json() == {"detail": NO_ACCESS}
    else:
        assert NO_ACCESS_HEADING in content
    for secret in secrets:
        assert secret not in content


# --- reads ------------------------------------------------------------------------------------


def _read_urls(world: World, *, private: bool) -> list[str]:
    note = world.private_note if private else world.team_note
    external = world.private_external if private else world.team_external
    source = world.private_source if private else world.team_source
    first = note.versions.order_by("number").first()
    snapshot = external.versions.order_by("number").first()
    return [
        f"/notes/{note.pk}",
        f"/notes/{note.pk}/history",
        f"/notes/{note.pk}/compare",
        f"/notes/{note.pk}/versions/{first.pk}",
        f"/sources/{source.pk}/",
        f"/sources/{source.pk}/scan-status/",
        f"/externals/{external.pk}/",
        f"/externals/{external.pk}/snapshots/{snapshot.pk}/",
        f"/api/notes/{note.pk}",
        f"/api/notes/{note.pk}/versions",
        f"/api/notes/{note.pk}/versions/{first.pk}",
    ]


@pytest.mark.parametrize("who", PEOPLE)
def test_every_member_reads_team_objects_and_a_non_member_gets_no_access(world, who):
    for url in _read_urls(world, private=False):
        response = world.clients[who].get(url)
        if who == "dave":
            assert_no_access(response, TEAM_TITLE, SOURCE_NAME, "Team")
        else:
            assert response.status_code == 200, (who, url, response.status_code)


@pytest.mark.parametrize("who", PEOPLE)
def test_only_alice_reads_her_personal_objects(world, who):
    for url in _read_urls(world, private=True):
        response = world.clients[who].get(url)
        if who == "alice":
            assert response.status_code == 200, (url, response.status_code)
        else:
            assert_no_access(response, PRIVATE_TITLE, "Alice bookmarks", "Bookmarks")


def _page_text(response, note_id: int) -> str:
    """The page without what differs per request anyway: CSRF tokens and its own path."""
    text = re.sub(
        r'(X-CSRFToken": "|value=")[A-Za-z0-9]{32,}', r"\1TOKEN", response.content.decode()
    )
    return text.replace(f"/notes/{note_id}", "/notes/ID")


def test_no_access_looks_the_same_as_a_missing_id(world):
    dave = world.clients["dave"]
    hidden = dave.get(f"/notes/{world.team_note.pk}")
    missing = dave.get("/notes/999999")
    assert hidden.status_code == missing.status_code == 404
    assert _page_text(hidden, world.team_note.pk) == _page_text(missing, 999999)
    hidden = dave.get(f"/api/notes/{world.team_note.pk}")
    missing = dave.get("/api/notes/999999")
    assert hidden.json() == missing.json() == {"detail": NO_ACCESS}


def test_lists_cover_every_space_and_name_each_items_space(world):
    bob = world.clients["bob"]
    page = bob.get("/notes/").content.decode()
    assert TEAM_TITLE in page and PRIVATE_TITLE not in page
    assert 'class="badge space-badge"' in page and ">Team<" in page
    sources = bob.get("/sources/").content.decode()
    assert SOURCE_NAME in sources and "Alice bookmarks" not in sources
    assert ">Team<" in sources
    api = bob.get("/api/notes/").json()
    assert [n["title"] for n in api] == [TEAM_TITLE]
    assert api[0]["space"] == world.team.pk
    assert [s["name"] for s in bob.get("/api/sources/").json()] == [SOURCE_NAME]


def test_a_single_space_user_sees_no_badges(world):
    page = world.clients["dave"].get("/notes/").content.decode()
    assert "space-badge" not in page


def test_the_current_space_narrows_the_lists(world):
    alice = world.clients["alice"]
    session = alice.session
    session[SESSION_KEY] = world.team.pk
    session.save()
    page = alice.get("/notes/").content.decode()
    assert TEAM_TITLE in page and PRIVATE_TITLE not in page
    sources = alice.get("/sources/").content.decode()
    assert SOURCE_NAME in sources and "Alice bookmarks" not in sources


def test_a_tag_filter_matches_tag_names_across_owners(world):
    services.note_create(
        owner=world.users["carol"], title="Carol on ops", body="#ops too\n", space=world.team
    )
    titles = {n["title"] for n in world.clients["bob"].get("/api/notes/?tag=ops").json()}
    assert titles == {TEAM_TITLE, "Carol on ops"}


@pytest.mark.parametrize("who", PEOPLE)
def test_api_list_space_parameter(world, who):
    client = world.clients[who]
    for url in (f"/api/notes/?space={world.team.pk}", f"/api/sources/?space={world.team.pk}"):
        response = client.get(url)
        if who == "dave":
            assert_no_access(response, TEAM_TITLE, SOURCE_NAME)
        else:
            assert response.status_code == 200
            assert len(response.json()) == 1
    # Someone else's personal space is never theirs to list.
    alice_personal = personal_space(world.users["alice"]).pk
    response = client.get(f"/api/notes/?space={alice_personal}")
    if who == "alice":
        assert [n["title"] for n in response.json()] == [PRIVATE_TITLE]
    else:
        assert_no_access(response, PRIVATE_TITLE)


# --- note writes ------------------------------------------------------------------------------

# Who may write a Team note: admin and editor; bob is a viewer (403), dave no member (404).
WRITE_OUTCOME = {"alice": "ok", "carol": "ok", "bob": 403, "dave": 404}


def _expect(response, outcome: str | int, ok_codes: tuple[int, ...]) -> None:
    if outcome == "ok":
        assert response.status_code in ok_codes, response.status_code
    elif outcome == 404:
        assert_no_access(response, TEAM_TITLE, SOURCE_NAME)
    else:
        assert response.status_code == outcome


@pytest.mark.parametrize("who", PEOPLE)
def test_note_pages_writes_need_editor(world, who):
    note = world.team_note
    client = world.clients[who]
    outcome = WRITE_OUTCOME[who]
    before = factories.note_state(note)
    _expect(client.get(f"/notes/{note.pk}/edit"), outcome, (200,))
    _expect(client.get(f"/notes/{note.pk}/delete"), outcome, (200,))
    response = client.post(
        f"/notes/{note.pk}/edit",
        {"title": TEAM_TITLE, "body": f"Edited by {who}\n", "base_version": note.head_id},
    )
    _expect(response, outcome, (302,))
    if outcome != "ok":
        assert factories.note_state(note) == before
        first = note.versions.order_by("number").first()
        response = client.post(
            f"/notes/{note.pk}/versions/{first.pk}/restore", {"base_version": note.head_id}
        )
        _expect(response, outcome, ())
        _expect(client.post(f"/notes/{note.pk}/delete"), outcome, ())
        assert factories.note_state(note) == before
        return
    note.refresh_from_db()
    first = note.versions.order_by("number").first()
    response = client.post(
        f"/notes/{note.pk}/versions/{first.pk}/restore", {"base_version": note.head_id}
    )
    assert response.status_code == 302
    assert client.post(f"/notes/{note.pk}/delete").status_code == 302
    note.refresh_from_db()
    assert note.deleted_at is not None
    assert client.post(f"/notes/trash/{note.pk}/restore").status_code == 302
    note.refresh_from_db()
    assert note.deleted_at is None


@pytest.mark.parametrize("who", PEOPLE)
def test_restoring_from_the_trash_needs_editor(world, who):
    note = world.team_note
    services.note_delete(document=note, user=world.users["alice"])
    trash = world.clients[who].get("/notes/trash").content.decode()
    if who == "dave":
        assert TEAM_TITLE not in trash
    else:
        assert TEAM_TITLE in trash
        assert (f"/notes/trash/{note.pk}/restore" in trash) == (WRITE_OUTCOME[who] == "ok")
    response = world.clients[who].post(f"/notes/trash/{note.pk}/restore")
    _expect(response, WRITE_OUTCOME[who], (302,))
    note.refresh_from_db()
    assert (note.deleted_at is None) == (WRITE_OUTCOME[who] == "ok")


@pytest.mark.parametrize("who", PEOPLE)
def test_creating_a_note_in_team_needs_editor(world, who):
    response = world.clients[who].post(
        "/notes/new", {"title": f"New by {who}", "body": "x", "space": world.team.pk}
    )
    _expect(response, WRITE_OUTCOME[who], (302,))
    created = Document.objects.filter(title=f"New by {who}").first()
    if WRITE_OUTCOME[who] == "ok":
        assert created is not None and created.space_id == world.team.pk
    else:
        assert created is None


def _space_select(page: str) -> str:
    """The create form's space select (the header's switcher has one too)."""
    found = re.search(r'<select name="space"[^>]*id="id_space"[^>]*>(.*?)</select>', page, re.S)
    assert found, "no space select in the form"
    return found.group(1)


def test_create_form_offers_only_writable_spaces_and_defaults_to_personal(world):
    page = world.clients["bob"].get("/notes/new").content.decode()
    assert f'value="{world.team.pk}"' not in _space_select(page)  # bob only views Team
    page = world.clients["carol"].get("/notes/new").content.decode()
    assert f'value="{world.team.pk}"' in _space_select(page)
    response = world.clients["carol"].post("/notes/new", {"title": "No space given", "body": "x"})
    assert response.status_code == 302
    note = Document.objects.get(title="No space given")
    assert note.space_id == personal_space(world.users["carol"]).pk


def test_create_defaults_to_the_current_space_where_the_user_edits(world):
    carol = world.clients["carol"]
    session = carol.session
    session[SESSION_KEY] = world.team.pk
    session.save()
    page = carol.get("/notes/new").content.decode()
    assert f'<option value="{world.team.pk}" selected>' in _space_select(page)


def test_a_viewer_sees_no_write_buttons(world):
    note = world.team_note
    bob = world.clients["bob"]
    detail = bob.get(f"/notes/{note.pk}").content.decode()
    assert f"/notes/{note.pk}/edit" not in detail and f"/notes/{note.pk}/delete" not in detail
    history = bob.get(f"/notes/{note.pk}/history").content.decode()
    assert "/restore" not in history
    carol_detail = world.clients["carol"].get(f"/notes/{note.pk}").content.decode()
    assert f"/notes/{note.pk}/edit" in carol_detail


@pytest.mark.parametrize("who", PEOPLE)
def test_note_api_writes_need_editor(world, who):
    note = world.team_note
    client = world.clients[who]
    outcome = WRITE_OUTCOME[who]
    before = factories.note_state(note)
    response = client.put(
        f"/api/notes/{note.pk}",
        {"title": TEAM_TITLE, "body": f"API edit by {who}", "base_version_id": note.head_id},
        content_type="application/json",
    )
    _expect(response, outcome, (200,))
    if outcome == 403:
        assert "detail" in response.json()
    note.refresh_from_db()
    first = note.versions.order_by("number").first()
    response = client.post(
        f"/api/notes/{note.pk}/versions/{first.pk}/restore",
        {"base_version_id": note.head_id},
        content_type="application/json",
    )
    _expect(response, outcome, (200,))
    response = client.post(
        "/api/notes/",
        {"title": f"API new by {who}", "space": world.team.pk},
        content_type="application/json",
    )
    _expect(response, outcome, (201,))
    if outcome == "ok":
        assert response.json()["space"] == world.team.pk
    response = client.delete(f"/api/notes/{note.pk}")
    _expect(response, outcome, (204,))
    if outcome != "ok":
        assert factories.note_state(note) == before


def test_note_services_check_the_role(world):
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        services.note_create(owner=world.users["bob"], title="x", body="y", space=world.team)
    with pytest.raises(PermissionDenied):
        services.note_create(owner=world.users["dave"], title="x", body="y", space=world.team)
    with pytest.raises(PermissionDenied):
        services.note_delete(document=world.team_note, user=world.users["bob"])
    services.note_delete(document=world.team_note, user=world.users["carol"])


# --- sources ----------------------------------------------------------------------------------

# A source's settings, enabling, deleting and webhook secret: admin only.
ADMIN_OUTCOME = {"alice": "ok", "carol": 403, "bob": 403, "dave": 404}


@pytest.mark.parametrize("who", PEOPLE)
def test_source_management_needs_admin(world, who):
    source = world.team_source
    client = world.clients[who]
    outcome = ADMIN_OUTCOME[who]
    _expect(client.get(f"/sources/{source.pk}/edit/"), outcome, (200,))
    _expect(client.get(f"/sources/{source.pk}/delete/"), outcome, (200,))
    response = client.post(
        f"/sources/{source.pk}/edit/",
        {
            "edit-name": "Renamed wiki",
            "edit-trust_tier": source.trust_tier,
            "edit-stale_after_days": "30",
            "edit-enabled": "on",
        },
    )
    _expect(response, outcome, (302,))
    source.refresh_from_db()
    assert (source.name == "Renamed wiki") == (outcome == "ok")
    _expect(client.post(f"/sources/{source.pk}/enabled/", {"enabled": "0"}), outcome, (302,))
    source.refresh_from_db()
    assert source.enabled == (outcome != "ok")
    secret_before = source.webhook_secret
    _expect(client.post(f"/sources/{source.pk}/webhook-secret/"), outcome, (200,))
    source.refresh_from_db()
    assert (source.webhook_secret != secret_before) == (outcome == "ok")
    _expect(client.post(f"/sources/{source.pk}/delete/"), outcome, (302,))
    assert Source.objects.filter(pk=source.pk).exists() == (outcome != "ok")


@pytest.mark.parametrize("who", PEOPLE)
def test_scan_now_needs_editor(world, who):
    # The test settings' database task backend only queues the refresh.
    source = world.team_source
    outcome = WRITE_OUTCOME[who]
    _expect(world.clients[who].post(f"/sources/{source.pk}/scan/"), outcome, (302,))
    response = world.clients[who].post(f"/api/sources/{source.pk}/refresh")
    _expect(response, outcome, (202,))


@pytest.mark.parametrize("who", PEOPLE)
def test_adding_a_source_to_team_needs_editor(world, who, settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    response = world.clients[who].post(
        "/sources/add/upload/",
        {
            "upload-space": world.team.pk,
            "upload-name": f"Upload by {who}",
            "upload-trust_tier": "external",
            "upload-stale_after_days": "30",
            "upload-file": SimpleUploadedFile("guide.md", b"# Guide\n\nRotate the certs.\n"),
        },
    )
    _expect(response, WRITE_OUTCOME[who], (302,))
    source = Source.objects.filter(name=f"Upload by {who}").first()
    if WRITE_OUTCOME[who] == "ok":
        assert source is not None and source.space_id == world.team.pk
        # The scan's document belongs to the source's space.
        assert {d.space_id for d in Document.objects.filter(source_items__source=source)} == {
            world.team.pk
        }
    else:
        assert source is None


def test_a_viewer_sees_no_source_buttons_and_an_editor_only_scan(world):
    source = world.team_source
    bob = world.clients["bob"].get(f"/sources/{source.pk}/").content.decode()
    for action in ("scan/", "edit/", "enabled/", "delete/", "webhook-secret/"):
        assert f"/sources/{source.pk}/{action}" not in bob
    carol = world.clients["carol"].get(f"/sources/{source.pk}/").content.decode()
    assert f"/sources/{source.pk}/scan/" in carol
    assert f"/sources/{source.pk}/edit/" not in carol
    alice = world.clients["alice"].get(f"/sources/{source.pk}/").content.decode()
    assert f"/sources/{source.pk}/edit/" in alice and f"/sources/{source.pk}/delete/" in alice


def test_scanned_documents_land_in_the_source_space_and_keep_its_no_egress(
    world, settings, tmp_path
):
    settings.DATA_DIR = tmp_path / "data"
    Space.objects.filter(pk=world.team.pk).update(no_egress=True)
    source = upload_create(
        owner=world.users["carol"],
        name="Carol upload",
        filename="notes.md",
        data=b"# Notes\n\nSomething to mirror.\n",
        space=world.team,
    )
    documents = list(Document.objects.filter(source_items__source=source))
    assert len(documents) == 1
    assert documents[0].space_id == world.team.pk
    assert documents[0].no_egress  # the space withholds, though the source does not
    assert not source.no_egress
    # A rescan keeps both (sync_source_flags must not clear the space's flag).
    scan_source(source, trigger="manual")
    documents[0].refresh_from_db()
    assert documents[0].no_egress and documents[0].space_id == world.team.pk
    # Once the space allows egress, the next sync follows the source again.
    Space.objects.filter(pk=world.team.pk).update(no_egress=False)
    scan_source(source, trigger="manual")
    documents[0].refresh_from_db()
    assert not documents[0].no_egress


def test_a_personal_upload_lands_in_the_personal_space(world, settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    source = upload_create(
        owner=world.users["bob"], name="Bob upload", filename="b.md", data=b"# B\n\nText.\n"
    )
    assert source.space_id == personal_space(world.users["bob"]).pk
    document = Document.objects.get(source_items__source=source)
    assert document.space_id == source.space_id


# --- annotations ------------------------------------------------------------------------------


@pytest.mark.parametrize("who", PEOPLE)
def test_annotating_needs_editor(world, who):
    external = world.team_external
    body = external.head.body
    start = body.index(factories.EXTERNAL_QUOTE)
    response = world.clients[who].post(
        f"/externals/{external.pk}/annotations/",
        {
            "version": external.head_id,
            "start": start,
            "end": start + len(factories.EXTERNAL_QUOTE),
            "quote": factories.EXTERNAL_QUOTE,
            "text": f"Note by {who}",
        },
    )
    _expect(response, WRITE_OUTCOME[who], (302,))
    annotation = Annotation.objects.filter(owner=world.users[who]).first()
    if WRITE_OUTCOME[who] == "ok":
        assert annotation is not None
        assert annotation.note_document.space_id == world.team.pk
    else:
        assert annotation is None


def test_every_member_sees_every_annotation_and_only_editors_get_the_form(world):
    _annotate(world, "carol", "Carol's remark")
    url = f"/externals/{world.team_external.pk}/"
    bob = world.clients["bob"].get(url).content.decode()
    assert "Carol&#x27;s remark" in bob
    assert 'id="annotation-form"' not in bob
    carol = world.clients["carol"].get(url).content.decode()
    assert 'id="annotation-form"' in carol


@pytest.mark.parametrize(
    ("author", "who", "outcome"),
    [
        ("carol", "carol", "ok"),  # the author
        ("carol", "alice", "ok"),  # an admin of the space
        ("alice", "carol", 403),  # an editor, not the author
        ("carol", "bob", 403),  # a viewer
        ("carol", "dave", 404),  # not a member
    ],
)
def test_deleting_an_annotation_needs_its_author_or_an_admin(world, author, who, outcome):
    annotation = _annotate(world, author)
    url = f"/externals/{world.team_external.pk}/annotations/{annotation.pk}/delete/"
    client = world.clients[who]
    _expect(client.get(url), outcome, (200,))
    _expect(client.post(url), outcome, (302,))
    annotation.note_document.refresh_from_db()
    assert (annotation.note_document.deleted_at is not None) == (outcome == "ok")
    page = client.get(f"/externals/{world.team_external.pk}/").content.decode()
    if outcome == 403:
        assert url not in page  # no Delete link where deleting is refused


# --- imports ----------------------------------------------------------------------------------


def _markdown_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "md"
    folder.mkdir()
    (folder / "one.md").write_text("# Imported one\n\nBody.\n", encoding="utf-8")
    return folder


def test_import_markdown_space_option(world, tmp_path):
    folder = _markdown_folder(tmp_path)
    call_command(
        "lode_import_markdown", str(folder), user="carol", space=world.team.pk, no_progress=True
    )
    note = Document.objects.get(title="Imported one")
    assert note.space_id == world.team.pk and note.owner == world.users["carol"]
    assert "Imported one" in world.clients["bob"].get("/notes/").content.decode()


@pytest.mark.parametrize("who", ["bob", "dave"])
def test_import_into_a_space_needs_editor(world, tmp_path, who):
    folder = _markdown_folder(tmp_path)
    with pytest.raises(CommandError, match="--space"):
        call_command(
            "lode_import_markdown", str(folder), user=who, space=world.team.pk, no_progress=True
        )
    assert not Document.objects.filter(title="Imported one").exists()


def test_import_without_space_goes_to_the_personal_space(world, tmp_path):
    call_command("lode_import_markdown", str(_markdown_folder(tmp_path)), user="dave")
    note = Document.objects.get(title="Imported one")
    assert note.space_id == personal_space(world.users["dave"]).pk


def test_load_beir_space_option(world, tmp_path):
    corpus = tmp_path / "tiny"
    corpus.mkdir()
    (corpus / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "Beir one", "text": "Some text."}\n', encoding="utf-8"
    )
    call_command("lode_load_beir", str(corpus), user="carol", space=world.team.pk, no_progress=True)
    assert Document.objects.get(title="Beir one").space_id == world.team.pk
    with pytest.raises(CommandError, match="--space"):
        call_command("lode_load_beir", str(corpus), user="bob", space=world.team.pk)


# --- admin ------------------------------------------------------------------------------------


def test_admin_for_staff_shows_only_their_spaces(world):
    staff = factories.staff_client(world.users["bob"], superuser=False)
    from django.contrib.auth.models import Permission

    bob = world.users["bob"]
    bob.user_permissions.set(
        Permission.objects.filter(
            codename__in=["view_document", "view_source", "view_annotation", "view_version"]
        )
    )
    documents = staff.get("/admin/notes/document/").content.decode()
    assert TEAM_TITLE in documents and PRIVATE_TITLE not in documents
    assert staff.get(f"/admin/notes/document/{world.private_note.pk}/change/").status_code in (
        302,
        404,
    )
    sources = staff.get("/admin/externals/source/").content.decode()
    assert SOURCE_NAME in sources and "Alice bookmarks" not in sources
    root = factories.staff_client()
    assert PRIVATE_TITLE in root.get("/admin/notes/document/").content.decode()


def test_an_annotations_note_is_written_only_by_its_author_or_an_admin(world):
    """Through the notes pages too: an editor cannot edit or delete someone else's
    annotation words (the annotation rule), its author and the space's admin can."""
    alices = _annotate(world, "alice", "Alice's words").note_document
    carols = _annotate(world, "carol", "Carol's words").note_document
    carol = world.clients["carol"]
    assert carol.get(f"/notes/{alices.pk}/edit").status_code == 403
    assert carol.post(f"/notes/{alices.pk}/delete").status_code == 403
    assert f"/notes/{alices.pk}/edit" not in carol.get(f"/notes/{alices.pk}").content.decode()
    assert carol.get(f"/notes/{carols.pk}/edit").status_code == 200
    assert world.clients["alice"].post(f"/notes/{carols.pk}/delete").status_code == 302
    trash = carol.get("/notes/trash").content.decode()
    assert f"/notes/trash/{carols.pk}/restore" in trash  # her own words
