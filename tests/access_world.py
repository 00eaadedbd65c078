"""The little world every access test is run against.

Four users and one shared space "Team Orrery":

* alice — admin of Team (and of her personal space);
* carol — editor of Team;
* bob — viewer of Team;
* dave — a member of nothing but his own personal space;

plus the anonymous visitor, who belongs to no space at all.

Each object in the world carries one made-up word used nowhere else (its *secret word*) in
its title and its text, so a test can tell, from any response body, whether something of a
space the viewer is not a member of leaked into it: `forbidden_words(role)`.

Objects are created through the same services the app uses where those services can place
them in a space; while a service still creates in the owner's personal space the object is
moved with an `update()` (the space column is what every reader checks), so the world means
the same before and after the services learn about spaces.
"""

from __future__ import annotations

import inspect
import tempfile
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import models

from externals.annotations import annotation_create
from externals.models import Annotation, Source
from notes import services
from notes.models import Document, Version
from retrieval.answer.types import AskOutcome, Decision
from retrieval.models import AskTrace, Passage
from spaces.models import Membership, PublicLink, Role, Space, personal_space
from tests import factories

PASSWORD = "correct horse battery staple"
ROLES: tuple[str, ...] = ("alice", "carol", "bob", "dave", "anonymous")
USERS: tuple[str, ...] = ("alice", "carol", "bob", "dave")
TEAM_ROLES: dict[str, str] = {"alice": Role.ADMIN, "carol": Role.EDITOR, "bob": Role.VIEWER}
# A word every world document contains, so one search reaches all of them.
COMMON_WORD = "matrixprobe"


@dataclass
class World:
    """The users, spaces and objects of one access test, and each object's secret word."""

    users: dict[str, User]
    team: Space
    personal: dict[str, Space]
    objects: dict[str, models.Model] = field(default_factory=dict)
    # object key → (secret word, id of the space it belongs to)
    secrets: dict[str, tuple[str, int]] = field(default_factory=dict)

    def user(self, role: str) -> User | None:
        return self.users.get(role)

    def member_space_ids(self, role: str) -> set[int]:
        """The spaces `role` belongs to, as the world set them up (anonymous: none)."""
        user = self.users.get(role)
        if user is None:
            return set()
        return set(Membership.objects.filter(user=user).values_list("space_id", flat=True))

    def forbidden_words(self, role: str, *, exposed: tuple[str, ...] = ()) -> dict[str, str]:
        """Secret word → object key for every object `role` may not see (`exposed`: object
        keys a response is allowed to show anyway, such as a public link's one target)."""
        mine = self.member_space_ids(role)
        return {
            word: key
            for key, (word, space_id) in self.secrets.items()
            if space_id not in mine and key not in exposed
        }

    def content_words(self, *, outside_space_id: int) -> dict[str, str]:
        """Secret word → key of every document or answer (not space names: a member's
        header lists their spaces) outside the space `outside_space_id`."""
        return {
            word: key
            for key, (word, space_id) in self.secrets.items()
            if space_id != outside_space_id and not isinstance(self.objects[key], Space)
        }

    def space_of(self, key: str) -> int:
        return self.secrets[key][1]


def _accepts(function: Any, name: str) -> bool:
    return name in inspect.signature(function).parameters


def _put_in_space(document: Document, space: Space) -> Document:
    """`document` (and nothing else) in `space`, whatever its creator's default was."""
    if document.space_id != space.pk:
        Document.objects.filter(pk=document.pk).update(space=space)
        document.refresh_from_db()
    return document


def world_note(owner: User, space: Space, title: str, body: str) -> Document:
    """A note by `owner` in `space` (through `note_create`, with its `space` keyword when it
    has one and `owner` may write there; otherwise written in their personal space and
    moved: a test world may want a note of someone who has since lost the role)."""
    if _accepts(services.note_create, "space"):
        try:
            document = services.note_create(owner=owner, title=title, body=body, space=space)
        except PermissionDenied:
            document = services.note_create(owner=owner, title=title, body=body)
    else:
        document = services.note_create(owner=owner, title=title, body=body)
    return _put_in_space(document, space)


def head_passage(document: Document) -> Passage:
    return (
        Passage.objects.filter(document=document, is_head=True)
        .select_related("version", "document")
        .order_by("position")
        .first()
    )


def stored_answer(user: User, space: Space | None, question: str) -> AskTrace:
    """A stored answer (an abstention: it quotes nothing) asked by `user` in `space` (None:
    across all the asker's spaces, private to the asker)."""
    outcome = AskOutcome(
        question=question, decision=Decision.ABSTAIN_NO_EVIDENCE, answerer="extractive"
    )
    outcome.message = "Your notes don't answer this."
    trace = AskTrace.objects.create(
        user=user,
        space=space,
        question=question,
        decision=str(outcome.decision),
        answerer=outcome.answerer,
        answer=outcome.as_dict(),
    )
    return trace


def build_world() -> World:
    """alice, carol, bob, dave; Team with its members; one object of each kind in Team, a
    note and a private answer in alice's personal space, a note in dave's."""
    users = {
        name: User.objects.create_user(name, f"{name}@example.com", PASSWORD) for name in USERS
    }
    personal = {name: personal_space(user) for name, user in users.items()}
    team = Space.objects.create(
        name="Team Orrery", created_by=users["alice"], public_links_enabled=True
    )
    for name, role in TEAM_ROLES.items():
        Membership.objects.create(space=team, user=users[name], role=role)
    world = World(users=users, team=team, personal=personal)
    alice = users["alice"]

    def keep(key: str, obj: models.Model, word: str, space: Space) -> None:
        world.objects[key] = obj
        world.secrets[key] = (word, space.pk)

    keep("team", team, "orrery", team)
    # An empty shared space with the same members: one that may be deleted.
    spare = Space.objects.create(name="Bivouac", created_by=users["alice"])
    for name, role in TEAM_ROLES.items():
        Membership.objects.create(space=spare, user=users[name], role=role)
    keep("spare", spare, "bivouac", spare)
    keep(
        "team_note",
        world_note(
            alice,
            team,
            "Quasar handbook",
            f"# Quasar handbook\n\nThe quasar rota for the team. {COMMON_WORD}\n\n"
            "## Second part\n\nAnother quasar paragraph, edited later.\n",
        ),
        "quasar",
        team,
    )
    keep(
        "public_note",
        world_note(alice, team, "Walrus notes", f"The walrus page is public. {COMMON_WORD}\n"),
        "walrus",
        team,
    )
    keep(
        "alice_note",
        world_note(
            alice,
            personal["alice"],
            "Zephyr diary",
            f"# Zephyr diary\n\nPrivate zephyr thoughts. {COMMON_WORD}\n",
        ),
        "zephyr",
        personal["alice"],
    )
    keep(
        "dave_note",
        world_note(
            users["dave"],
            personal["dave"],
            "Yodel list",
            f"Dave's yodel list. {COMMON_WORD}\n",
        ),
        "yodel",
        personal["dave"],
    )
    # A second version, so history, compare and restore have something to work with.
    for key in ("team_note", "alice_note"):
        document: Document = world.objects[key]
        first_version = document.versions.order_by("created_at", "id").first()
        services.version_create(
            document=document,
            title=document.title,
            body=f"{first_version.body}\nRevised. {COMMON_WORD}\n",
            user=alice,
        )
        document.refresh_from_db()
        world.objects[f"{key}_first_version"] = first_version
    # Notes in the trash, for restoring.
    for key, space, title, word in (
        ("team_trash", team, "Turnip notes", "turnip"),
        ("alice_trash", personal["alice"], "Parsnip notes", "parsnip"),
    ):
        trashed = world_note(alice, space, title, f"The {word} list. {COMMON_WORD}\n")
        services.note_delete(document=trashed, user=alice)
        trashed.refresh_from_db()
        keep(key, trashed, word, space)

    source = Source.objects.create(
        owner=alice,
        space=team,
        name="Bramble docs",
        kind=Source.Kind.FOLDER,
        # A real folder inside the test settings' allowed roots, so a refresh is accepted.
        location=tempfile.mkdtemp(prefix="bramble-"),
    )
    keep("team_source", source, "bramble", team)
    external = factories.make_source_external(
        source,
        path="gazebo.md",
        title="Gazebo manual",
        bodies=(f"Gazebo assembly: bolt the gazebo roof first. {COMMON_WORD}\n",),
    )
    keep("team_external", _put_in_space(external, team), "gazebo", team)

    body = external.head.body
    quote = "bolt the gazebo roof"
    start = body.index(quote)
    annotation = annotation_create(
        owner=alice,
        version=external.head,
        start=start,
        end=start + len(quote),
        quote=quote,
        text=f"Marzipan reminder: check the bolts. {COMMON_WORD}",
        document=external,
    )
    # Written by carol (the author may delete it, as may the space's admin), in Team.
    Annotation.objects.filter(pk=annotation.pk).update(owner=users["carol"])
    Document.objects.filter(pk=annotation.note_document_id).update(owner=users["carol"], space=team)
    annotation.refresh_from_db()
    keep("team_annotation", annotation, "marzipan", team)

    keep("team_answer", stored_answer(alice, team, "Where is the kumquat kept?"), "kumquat", team)
    keep(
        "alice_answer",
        stored_answer(alice, None, "Is the nectarine ripe yet?"),
        "nectarine",
        personal["alice"],
    )
    public_note: Document = world.objects["public_note"]
    link = PublicLink.objects.create(
        space=team, kind=PublicLink.Kind.VERSION, version=public_note.head, created_by=alice
    )
    world.objects["team_link"] = link
    return world


def version_of(obj: models.Model) -> Version | None:
    """The version a URL about `obj` names: a document's head, a link's version."""
    if isinstance(obj, Document):
        return obj.head
    if isinstance(obj, Annotation):
        return obj.version
    if isinstance(obj, PublicLink):
        return obj.version
    return None
