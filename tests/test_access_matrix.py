"""The access matrix: every page and endpoint, tried as alice (admin of
Team), carol (editor), bob (viewer), dave (no membership) and an anonymous visitor.

The routes are *generated*: the URLconf is walked recursively (`page_routes`) and the API's
OpenAPI schema read (`api_routes`), and every (route, method) must have a rule in `RULES`.
A new route without one fails `test_every_route_has_a_rule`, naming it — so nobody can add
a page that the matrix does not try. A rule names, per method, one or more `Case`s: which
world object the URL is about (tests/access_world.py builds the world) and an access class
(`MEMBER_READ`, `EDITOR_WRITE`, …) that says what each role must get:

* allowed — any 2xx or 3xx;
* a member without the role — 403;
* a non-member — 404, looking exactly like a link to nothing;
* anonymous — a redirect to the login page (pages) or 401 (API), unless public.

Every response, allowed or not, is also searched for the *secret words* of every object in a
space the role is not a member of (and a denied response for the words of the object it is
about): one found is a leak. Each request runs inside a savepoint that is rolled back, so a
delete by alice does not change what carol is tried against.

`-s` prints the totals (routes × methods × cases × roles tried, wrong outcomes, leaks).
"""

from __future__ import annotations

import functools
import json
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.db import models, transaction
from django.http import HttpResponse
from django.shortcuts import resolve_url
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, include, path

from externals.models import Annotation, Source
from notes.models import Document, TrustTier
from retrieval.models import AskTrace
from spaces.models import Membership, PublicLink, Space
from tests.access_world import (
    COMMON_WORD,
    ROLES,
    World,
    build_world,
    head_passage,
    version_of,
)

# --- the routes ---------------------------------------------------------------------------

_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")
_API_PARAM = re.compile(r"\{(\w+)\}")
# Ninja's own views: the API schema lists them with their methods (`api_routes`).
_NINJA_VIEW_MODULES = ("ninja.operation",)
# Django's admin gets its own check below (a non-superuser staff member sees only their
# spaces' rows in each changelist); its hundreds of generated URLs are not tried here.
_SKIPPED_PREFIXES = ("admin/",)


@dataclass(frozen=True)
class Route:
    """One route: `key` is how RULES names it ("/notes/<note_id>", converters dropped;
    "/api/notes/{note_id}" for the API), `pattern` the URL with its converters."""

    key: str
    pattern: str
    name: str
    view: str
    method: str | None = None  # API routes: the method; pages: None (the rule says which)

    def __str__(self) -> str:
        method = f"{self.method} " if self.method else ""
        return f"{method}{self.key} ({self.name or 'unnamed'}, {self.view})"


def page_key(pattern: str) -> str:
    return "/" + _CONVERTER.sub(r"<\1>", pattern)


def page_routes(urlconf: object | None = None) -> list[Route]:
    """Every URL pattern of `urlconf` (default: the project's), through every include,
    except admin/ and the API's own endpoints (those come from the schema)."""
    found: list[Route] = []

    def walk(patterns: Sequence[URLPattern | URLResolver], prefix: str, namespace: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                inner = namespace + (f"{entry.namespace}:" if entry.namespace else "")
                walk(entry.url_patterns, prefix + str(entry.pattern), inner)
                continue
            full = prefix + str(entry.pattern)
            if full.startswith(_SKIPPED_PREFIXES):
                continue
            callback = entry.callback
            module = getattr(callback, "__module__", "") or ""
            if module.startswith(_NINJA_VIEW_MODULES):
                continue
            name = namespace + entry.name if entry.name else ""
            view = f"{module}.{getattr(callback, '__name__', type(callback).__name__)}"
            found.append(Route(key=page_key(full), pattern=full, name=name, view=view))

    walk(get_resolver(urlconf).url_patterns, "", "")
    return found


def api_routes(schema: dict[str, Any]) -> list[Route]:
    """Every (path, method) of an OpenAPI schema."""
    found = []
    for api_path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            found.append(
                Route(
                    key=api_path,
                    pattern=api_path,
                    name=operation.get("operationId", ""),
                    view="api",
                    method=method.upper(),
                )
            )
    return found


def project_api_schema() -> dict[str, Any]:
    from lode_site.api import api

    return api.get_openapi_schema()


def missing_rules(routes: Sequence[Route], rules: dict[str, dict[str, Any]]) -> list[str]:
    """One line per route (page) or route and method (API) that `rules` says nothing about."""
    missing = []
    for route in routes:
        methods = rules.get(route.key)
        if not methods:
            missing.append(f"no rule for {route}")
        elif route.method is not None and route.method not in methods:
            missing.append(f"no rule for {route} (RULES[{route.key!r}] has {sorted(methods)})")
    return missing


def stale_rules(routes: Sequence[Route], rules: dict[str, dict[str, Any]]) -> list[str]:
    """Rules (or API methods in them) that name no existing route."""
    pages = {route.key for route in routes if route.method is None}
    api = {(route.key, route.method) for route in routes if route.method is not None}
    api_keys = {key for key, _ in api}
    stale = []
    for key, methods in rules.items():
        if key in pages:
            continue
        if key in api_keys:
            stale += [f"{method} {key}" for method in methods if (key, method) not in api]
            continue
        stale.append(f"{'/'.join(methods)} {key}")
    return stale


# --- what each role must get ----------------------------------------------------------------

OK, FORBIDDEN, HIDDEN, LOGIN, REFUSED = "ok", "403", "404", "login", "refused"
# Sent back where it came from (a redirect with a message) or 404: both reveal nothing.
BOUNCED = "bounced"
# Refused by what is stored (the last admin leaving): a 409, nothing done.
CONFLICT = "409"

# An access class: role → outcome.
MEMBER_READ = {"alice": OK, "carol": OK, "bob": OK, "dave": HIDDEN, "anonymous": LOGIN}
EDITOR_WRITE = {"alice": OK, "carol": OK, "bob": FORBIDDEN, "dave": HIDDEN, "anonymous": LOGIN}
ADMIN_MANAGE = {
    "alice": OK,
    "carol": FORBIDDEN,
    "bob": FORBIDDEN,
    "dave": HIDDEN,
    "anonymous": LOGIN,
}
# An object in alice's personal space: hers alone.
OWN = {"alice": OK, "carol": HIDDEN, "bob": HIDDEN, "dave": HIDDEN, "anonymous": LOGIN}
LOGIN_ONLY = {"alice": OK, "carol": OK, "bob": OK, "dave": OK, "anonymous": LOGIN}
PUBLIC = {role: OK for role in ROLES}
NOWHERE = {role: HIDDEN for role in ROLES}
# A signed endpoint (the webhook) tried without a signature: the same refusal for everyone.
SIGNED = {role: REFUSED for role in ROLES}
# Something of nobody's (an id no one holds): 404 for anyone signed in.
NOT_YOURS = {**NOWHERE, "anonymous": LOGIN}
# Leaving a space: any member, except its last admin.
MEMBER_LEAVE = {"alice": CONFLICT, "carol": OK, "bob": OK, "dave": HIDDEN, "anonymous": LOGIN}
# The same on a page, where the refusal is a redirect back with a message.
MEMBER_LEAVE_PAGE = {**MEMBER_LEAVE, "alice": OK}
# A form naming a space the user is not in: refused as a form error (200 or 400, like any
# invalid field) or 404 — nothing done (the write check) and nothing shown (the leak check).
FORM_ERROR = "form-error"
ASK_IN_TEAM_PAGE = {**MEMBER_READ, "dave": FORM_ERROR}
# Choosing a space in the header's switcher: a non-member is sent back, nothing chosen.
SWITCH_TO_TEAM = {**MEMBER_READ, "dave": BOUNCED}

Body = dict[str, Any] | Callable[[World, str], dict[str, Any]]


@dataclass(frozen=True)
class Case:
    """One way of trying a route: the URL is about world object `target`, `access` says
    what each role gets. `params` override URL parameters (a value, or a world object key
    prefixed with "@"); `body`/`query` are sent as they are (or built per role);
    `exposed` are object keys a response may show anyone it is ok for (a public link's
    target); `scope`, an object key of a space: allowed responses must show nothing of
    any other space (a search or ask narrowed to one space)."""

    target: str
    access: dict[str, str]
    params: dict[str, Any] = field(default_factory=dict)
    body: Body | None = None
    query: dict[str, Any] | Callable[[World, str], dict[str, Any]] | None = None
    exposed: tuple[str, ...] = ()
    scope: str | None = None


def personal_or_team(world: World, role: str, target: str) -> int:
    """Where `role` would move `target`: into Team from a personal space, else into the
    role's own personal space (anonymous: Team, it never gets that far)."""
    if world.space_of(target) != world.team.pk and role in world.personal:
        return world.team.pk
    return world.personal[role].pk if role in world.personal else world.team.pk


def move_body(target: str) -> Callable[[World, str], dict[str, Any]]:
    def body(world: World, role: str) -> dict[str, Any]:
        space_id = personal_or_team(world, role, target)
        return {"to_space": space_id, "to_space_id": space_id, "space": space_id}

    return body


def own_personal_space(world: World, role: str) -> dict[str, Any]:
    space_id = world.personal[role].pk if role in world.personal else world.team.pk
    return {"space": space_id, "space_id": space_id, "next": "/search"}


def team_space(world: World, role: str) -> dict[str, Any]:
    return {"space": world.team.pk, "space_id": world.team.pk, "next": "/search"}


def note_form(world: World, role: str) -> dict[str, Any]:
    return {"title": "Matrix probe", "body": "Written by the access matrix.", "tags": ""}


def edit_form(target: str) -> Callable[[World, str], dict[str, Any]]:
    def body(world: World, role: str) -> dict[str, Any]:
        document = world.objects[target]
        return {
            "title": "Matrix probe",
            "body": "Edited by the access matrix.",
            "tags": "",
            "base_version": document.head_id,
            "base_version_id": document.head_id,
        }

    return body


def restore_form(target: str) -> Callable[[World, str], dict[str, Any]]:
    def body(world: World, role: str) -> dict[str, Any]:
        head = world.objects[target].head_id
        return {"base_version": head, "base_version_id": head}

    return body


MATRIX_FOLDER = Path(tempfile.gettempdir()) / "lode-access-matrix-folder"


def folder_form(world: World, role: str) -> dict[str, Any]:
    """The add-a-folder form (prefix "folder"), for a folder inside the allowed roots."""
    MATRIX_FOLDER.mkdir(exist_ok=True)
    return {
        "folder-name": f"Matrix folder {role}",
        "folder-location": str(MATRIX_FOLDER),
        "folder-trust_tier": TrustTier.EXTERNAL_CURRENT,
        "folder-stale_after_days": 30,
    }


SOURCE_EDIT_FORM = {
    "edit-name": "Bramble docs",
    "edit-trust_tier": TrustTier.EXTERNAL_CURRENT,
    "edit-stale_after_days": 30,
    "edit-enabled": "on",
}


def annotation_form(world: World, role: str) -> dict[str, Any]:
    external = world.objects["team_external"]
    quote = "Gazebo assembly"
    return {
        "version": external.head_id,
        "start": 0,
        "end": len(quote),
        "quote": quote,
        "text": "Annotated by the access matrix.",
    }


def link_mention_form(target: str) -> Callable[[World, str], dict[str, Any]]:
    def body(world: World, role: str) -> dict[str, Any]:
        document = world.objects[target]
        return {"base_version": document.head_id, "start": 0, "end": 1, "target": document.pk}

    return body


def graph_page_in_team(world: World, role: str) -> dict[str, Any]:
    return {"lookup": COMMON_WORD, "op": "neighbours", "space": world.team.pk}


def graph_query_in_team(world: World, role: str) -> dict[str, Any]:
    note = world.objects["team_note"]
    return {
        "lookups": [note.title],
        "query": {"op": "neighbours", "seed": note.pk, "direction": "out", "kind": "links_to"},
        "space": world.team.pk,
    }


def share_link_form(target: str) -> Callable[[World, str], dict[str, Any]]:
    """A superset of the field names a "publish this" form may use."""

    def body(world: World, role: str) -> dict[str, Any]:
        obj = world.objects[target]
        if isinstance(obj, AskTrace):
            return {"kind": "answer", "target_id": obj.pk}
        return {"kind": "version", "target_id": version_of(obj).pk}

    return body


SEARCH_QUERY = {"q": COMMON_WORD, "mode": "lexical"}
# No secret word in it: the answer page repeats the question.
ASK_QUESTION = f"What does the {COMMON_WORD} list say?"


def team_search(world: World, role: str) -> dict[str, Any]:
    return {**SEARCH_QUERY, "space": world.team.pk}


# Keys: page routes as "/path/<param>" (converters dropped), API routes as in the OpenAPI
# schema. Values: method → the cases tried. Page routes list every method they answer
# (`test_page_route_answers_only_its_methods` checks that the others are refused).
RULES: dict[str, dict[str, tuple[Case, ...]]] = {
    # --- site, accounts, help ---------------------------------------------------------------
    "/": {"GET": (Case("team", LOGIN_ONLY),)},
    "/accounts/login/": {"GET": (Case("team", PUBLIC),), "POST": (Case("team", PUBLIC),)},
    "/accounts/logout/": {"POST": (Case("team", PUBLIC),)},
    "/accounts/password_change/": {
        "GET": (Case("team", LOGIN_ONLY),),
        "POST": (Case("team", LOGIN_ONLY),),
    },
    "/accounts/password_change/done/": {"GET": (Case("team", LOGIN_ONLY),)},
    "/accounts/password_reset/": {
        "GET": (Case("team", PUBLIC),),
        "POST": (Case("team", PUBLIC, body={"email": "nobody@example.com"}),),
    },
    "/accounts/password_reset/done/": {"GET": (Case("team", PUBLIC),)},
    "/accounts/reset/<uidb64>/<token>/": {
        "GET": (Case("team", PUBLIC, params={"uidb64": "MQ", "token": "set-password"}),),
        "POST": (Case("team", PUBLIC, params={"uidb64": "MQ", "token": "set-password"}),),
    },
    "/accounts/reset/done/": {"GET": (Case("team", PUBLIC),)},
    "/search/help": {"GET": (Case("team", LOGIN_ONLY),)},
    # Access tokens: your own only; revoking a token id that is not yours is a 404.
    "/settings/tokens": {
        "GET": (Case("team", LOGIN_ONLY),),
        "POST": (Case("team", LOGIN_ONLY, body={"name": "matrix", "scope": "read"}),),
    },
    "/settings/tokens/<token_id>/revoke": {
        "POST": (Case("alice_note", NOT_YOURS, params={"token_id": 987654}),),
    },
    # Export: anyone signed in gets a zip of what they may see (tests/notes/test_export_download.py
    # unzips it to check nobody else's notes are in it).
    "/settings/export": {"POST": (Case("team", LOGIN_ONLY),)},
    # The MCP server takes a bearer token only: a signed-in session is not one (401).
    "/mcp": {"POST": (Case("team", SIGNED),)},
    # --- the API's own pages ------------------------------------------------------------------
    # Ninja's root: nothing there, for anyone.
    "/api/": {"GET": (Case("team", NOWHERE),), "POST": (Case("team", NOWHERE),)},
    # Ninja's docs and schema views answer any method (a POST gets the same page).
    "/api/docs": {"GET": (Case("team", LOGIN_ONLY),), "POST": (Case("team", LOGIN_ONLY),)},
    "/api/openapi.json": {
        "GET": (Case("team", LOGIN_ONLY),),
        "POST": (Case("team", LOGIN_ONLY),),
    },
    # --- search, ask, evidence (pages) --------------------------------------------------------
    "/search": {
        "GET": (
            Case("team", LOGIN_ONLY, query=SEARCH_QUERY),
            Case("team", MEMBER_READ, query=team_search, scope="team"),
        )
    },
    "/ask": {
        "GET": (Case("team", LOGIN_ONLY),),
        "POST": (
            Case("team", LOGIN_ONLY, body={"question": ASK_QUESTION, "mode": "lexical"}),
            Case(
                "team",
                ASK_IN_TEAM_PAGE,
                body=lambda world, role: {
                    "question": ASK_QUESTION,
                    "mode": "lexical",
                    "space": world.team.pk,
                },
                scope="team",
            ),
        ),
    },
    "/ask/<trace_id>": {
        "GET": (Case("team_answer", MEMBER_READ), Case("alice_answer", OWN)),
    },
    "/evidence/<document_id>/<version_id>/<passage_id>/<sha256>/": {
        "GET": (Case("team_note", MEMBER_READ), Case("alice_note", OWN)),
    },
    # --- notes (pages) ------------------------------------------------------------------------
    "/notes/": {"GET": (Case("team", LOGIN_ONLY),)},
    "/notes/new": {
        "GET": (Case("team", LOGIN_ONLY),),
        "POST": (Case("team", LOGIN_ONLY, body=note_form),),
    },
    "/notes/preview": {"POST": (Case("team", LOGIN_ONLY, body={"body": "# Preview"}),)},
    # The graph: `[[` title completion (only visible titles) and "Link it" on a mention.
    "/notes/complete": {"GET": (Case("team", LOGIN_ONLY, query={"q": "no"}),)},
    "/graph/query": {
        "GET": (
            Case("team", LOGIN_ONLY, query={"lookup": COMMON_WORD, "op": "neighbours"}),
            Case("team", MEMBER_READ, query=graph_page_in_team, scope="team"),
        )
    },
    "/graph/results": {
        "GET": (
            Case("team", LOGIN_ONLY, query={"q": COMMON_WORD, "mode": "lexical"}),
            Case(
                "team",
                MEMBER_READ,
                query=lambda world, role: {
                    "q": COMMON_WORD,
                    "mode": "lexical",
                    "space": world.team.pk,
                },
                scope="team",
            ),
        )
    },
    "/graph/ask": {
        "POST": (
            Case("team", LOGIN_ONLY, body={"question": f"what links to {COMMON_WORD}"}),
            Case(
                "team",
                MEMBER_READ,
                body=lambda world, role: {
                    "question": f"what links to {COMMON_WORD}",
                    "space": world.team.pk,
                },
                scope="team",
            ),
        ),
    },
    "/api/graph/query": {
        "POST": (Case("team", MEMBER_READ, body=graph_query_in_team, scope="team"),),
    },
    "/api/graph/ask": {
        "POST": (
            Case("team", LOGIN_ONLY, body={"question": f"what links to {COMMON_WORD}"}),
            Case(
                "team",
                MEMBER_READ,
                body=lambda world, role: {
                    "question": f"what links to {COMMON_WORD}",
                    "space": world.team.pk,
                },
                scope="team",
            ),
        ),
    },
    "/notes/<note_id>/link-mention": {
        "POST": (
            Case("team_note", EDITOR_WRITE, body=link_mention_form("team_note")),
            Case("alice_note", OWN, body=link_mention_form("alice_note")),
        ),
    },
    "/notes/trash": {"GET": (Case("team", LOGIN_ONLY),)},
    "/notes/trash/<note_id>/restore": {
        "POST": (Case("team_trash", EDITOR_WRITE), Case("alice_trash", OWN)),
    },
    "/notes/<note_id>": {"GET": (Case("team_note", MEMBER_READ), Case("alice_note", OWN))},
    "/notes/<note_id>/edit": {
        "GET": (Case("team_note", EDITOR_WRITE), Case("alice_note", OWN)),
        "POST": (
            Case("team_note", EDITOR_WRITE, body=edit_form("team_note")),
            Case("alice_note", OWN, body=edit_form("alice_note")),
        ),
    },
    "/notes/<note_id>/delete": {
        "GET": (Case("team_note", EDITOR_WRITE), Case("alice_note", OWN)),
        "POST": (Case("team_note", EDITOR_WRITE), Case("alice_note", OWN)),
    },
    "/notes/<note_id>/history": {
        "GET": (Case("team_note", MEMBER_READ), Case("alice_note", OWN)),
    },
    "/notes/<note_id>/compare": {
        "GET": (Case("team_note", MEMBER_READ), Case("alice_note", OWN)),
    },
    "/notes/<note_id>/versions/<version_id>": {
        "GET": (Case("team_note", MEMBER_READ), Case("alice_note", OWN)),
    },
    "/notes/<note_id>/versions/<version_id>/restore": {
        "POST": (
            Case(
                "team_note",
                EDITOR_WRITE,
                params={"version_id": "@team_note_first_version"},
                body=restore_form("team_note"),
            ),
            Case(
                "alice_note",
                OWN,
                params={"version_id": "@alice_note_first_version"},
                body=restore_form("alice_note"),
            ),
        ),
    },
    # --- sources and externals (pages) ------------------------------------------------------
    "/sources/": {"GET": (Case("team", LOGIN_ONLY),)},
    "/sources/add/<kind>/": {
        # Into the user's default space (their personal one: no space chosen).
        "POST": (Case("team", LOGIN_ONLY, body=folder_form),),
    },
    "/sources/<source_id>/": {"GET": (Case("team_source", MEMBER_READ),)},
    "/sources/<source_id>/edit/": {
        "GET": (Case("team_source", ADMIN_MANAGE),),
        "POST": (Case("team_source", ADMIN_MANAGE, body=SOURCE_EDIT_FORM),),
    },
    "/sources/<source_id>/enabled/": {
        "POST": (Case("team_source", ADMIN_MANAGE, body={"enabled": "0"}),),
    },
    "/sources/<source_id>/delete/": {
        "GET": (Case("team_source", ADMIN_MANAGE),),
        "POST": (Case("team_source", ADMIN_MANAGE),),
    },
    "/sources/<source_id>/scan/": {"POST": (Case("team_source", EDITOR_WRITE),)},
    "/sources/<source_id>/move/": {
        "POST": (Case("team_source", EDITOR_WRITE, body=move_body("team_source")),),
    },
    "/sources/<source_id>/scan-status/": {"GET": (Case("team_source", MEMBER_READ),)},
    "/sources/<source_id>/webhook-secret/": {"POST": (Case("team_source", ADMIN_MANAGE),)},
    "/externals/<document_id>/": {"GET": (Case("team_external", MEMBER_READ),)},
    "/externals/<document_id>/snapshots/<version_id>/": {
        "GET": (Case("team_external", MEMBER_READ),),
    },
    "/externals/<document_id>/annotations/": {
        "POST": (Case("team_external", EDITOR_WRITE, body=annotation_form),),
    },
    "/externals/<document_id>/annotations/<annotation_id>/delete/": {
        # Its author (carol) or an admin of the space (alice).
        "GET": (Case("team_annotation", EDITOR_WRITE),),
        "POST": (Case("team_annotation", EDITOR_WRITE),),
    },
    # --- spaces (pages, H1) -------------------------------------------------------------------
    "/spaces/": {"GET": (Case("team", LOGIN_ONLY),)},
    "/spaces/new": {"POST": (Case("team", LOGIN_ONLY, body={"name": "Matrix space"}),)},
    "/spaces/<space_id>/": {
        "GET": (
            Case("team", MEMBER_READ),
            Case("alice_note", OWN, params={"space_id": "@personal:alice"}),
        ),
    },
    "/spaces/<space_id>/settings": {
        "POST": (
            Case(
                "team",
                ADMIN_MANAGE,
                body={"name": "Team Orrery", "description": "", "public_links_enabled": "on"},
            ),
        ),
    },
    "/spaces/<space_id>/delete": {"POST": (Case("spare", ADMIN_MANAGE),)},
    "/spaces/<space_id>/leave": {"POST": (Case("team", MEMBER_LEAVE_PAGE),)},
    "/spaces/<space_id>/members/add": {
        "POST": (Case("team", ADMIN_MANAGE, body={"username": "dave", "role": "viewer"}),),
    },
    "/spaces/<space_id>/members/<user_id>/role": {
        "POST": (
            Case(
                "team",
                ADMIN_MANAGE,
                body=lambda world, role: {f"m{world.users['bob'].pk}-role": "editor"},
            ),
        ),
    },
    # bob's membership; bob removing himself is leaving, which a viewer may do.
    "/spaces/<space_id>/members/<user_id>/remove": {
        "POST": (Case("team", {**ADMIN_MANAGE, "bob": OK}),),
    },
    "/spaces/switch": {
        "POST": (
            Case("team", LOGIN_ONLY, body=own_personal_space),
            Case("team", SWITCH_TO_TEAM, body=team_space),
        ),
    },
    "/spaces/move/<document_id>": {
        "POST": (
            Case("team_note", EDITOR_WRITE, body=move_body("team_note")),
            Case("alice_note", OWN, body=move_body("alice_note")),
        ),
    },
    # --- public links (H2) --------------------------------------------------------------------
    "/p/<token>": {
        "GET": (
            Case("team_link", PUBLIC, exposed=("public_note",)),
            # A token that names no link: the same 404 for everyone.
            Case("team_link", NOWHERE, params={"token": "x" * 43}),
        ),
    },
    "/share/links/new": {
        "POST": (
            Case("public_note", EDITOR_WRITE, body=share_link_form("public_note")),
            Case("team_answer", EDITOR_WRITE, body=share_link_form("team_answer")),
        ),
    },
    "/share/links/<link_id>/revoke": {"POST": (Case("team_link", ADMIN_MANAGE),)},
    "/share/spaces/<space_id>/links": {"GET": (Case("team", MEMBER_READ),)},
    # Bivouac's public links are off: its admin is asked which earlier links to bring back.
    "/share/spaces/<space_id>/links/turn-on": {
        "GET": (Case("spare", ADMIN_MANAGE),),
        "POST": (Case("spare", ADMIN_MANAGE, body={}),),
    },
    # --- the API: notes ---------------------------------------------------------------------
    "/api/notes/": {
        "GET": (Case("team", LOGIN_ONLY), Case("team", MEMBER_READ, query=team_search)),
        "POST": (Case("team", LOGIN_ONLY),),
    },
    "/api/notes/{note_id}": {
        "GET": (Case("team_note", MEMBER_READ), Case("alice_note", OWN)),
        "PUT": (Case("team_note", EDITOR_WRITE), Case("alice_note", OWN)),
        "DELETE": (Case("team_note", EDITOR_WRITE), Case("alice_note", OWN)),
    },
    "/api/notes/{note_id}/versions": {
        "GET": (Case("team_note", MEMBER_READ), Case("alice_note", OWN)),
    },
    "/api/notes/{note_id}/versions/{version_id}": {
        "GET": (Case("team_note", MEMBER_READ), Case("alice_note", OWN)),
    },
    "/api/notes/{note_id}/versions/{version_id}/restore": {
        "POST": (
            Case("team_note", EDITOR_WRITE, params={"version_id": "@team_note_first_version"}),
            Case("alice_note", OWN, params={"version_id": "@alice_note_first_version"}),
        ),
    },
    # --- the API: search, evidence, ask -------------------------------------------------------
    "/api/search/": {
        "GET": (
            Case("team", LOGIN_ONLY, query=SEARCH_QUERY),
            Case("team", MEMBER_READ, query=team_search, scope="team"),
        ),
    },
    "/api/evidence/{document_id}/{version_id}/{passage_id}/{sha256}": {
        "GET": (Case("team_note", MEMBER_READ), Case("alice_note", OWN)),
    },
    "/api/ask": {
        "POST": (
            Case("team", LOGIN_ONLY, body={"question": ASK_QUESTION, "mode": "lexical"}),
            Case(
                "team",
                MEMBER_READ,
                body=lambda world, role: {
                    "question": ASK_QUESTION,
                    "mode": "lexical",
                    "space": world.team.pk,
                },
                scope="team",
            ),
        ),
    },
    "/api/ask/{trace_id}": {
        "GET": (Case("team_answer", MEMBER_READ), Case("alice_answer", OWN)),
    },
    # --- the API: sources -----------------------------------------------------------------------
    "/api/sources/": {"GET": (Case("team", LOGIN_ONLY),)},
    "/api/sources/{source_id}/refresh": {"POST": (Case("team_source", EDITOR_WRITE),)},
    "/api/sources/{source_id}/webhook": {"POST": (Case("team_source", SIGNED),)},
    # --- the API: spaces (H1) -------------------------------------------------------------------
    "/api/spaces/": {
        "GET": (Case("team", LOGIN_ONLY),),
        "POST": (Case("team", LOGIN_ONLY, body={"name": "Matrix space"}),),
    },
    "/api/spaces/{space_id}": {
        "GET": (
            Case("team", MEMBER_READ),
            Case("alice_note", OWN, params={"space_id": "@personal:alice"}),
        ),
        "PATCH": (Case("team", ADMIN_MANAGE, body={"description": "Matrix"}),),
        "DELETE": (Case("spare", ADMIN_MANAGE),),
    },
    "/api/spaces/{space_id}/public-links": {"GET": (Case("team", MEMBER_READ),)},
    "/api/spaces/{space_id}/members": {
        "POST": (Case("team", ADMIN_MANAGE, body={"username": "dave", "role": "viewer"}),),
    },
    "/api/spaces/{space_id}/members/{user_id}": {
        "PUT": (Case("team", ADMIN_MANAGE, body={"role": "editor"}),),
        # bob's membership; bob removing himself is leaving, which a viewer may do.
        "DELETE": (Case("team", {**ADMIN_MANAGE, "bob": OK}),),
    },
    "/api/spaces/{space_id}/leave": {"POST": (Case("team", MEMBER_LEAVE),)},
    "/api/spaces/move/document/{document_id}": {
        "POST": (
            Case("team_note", EDITOR_WRITE, body=move_body("team_note")),
            Case("alice_note", OWN, body=move_body("alice_note")),
        ),
    },
    "/api/spaces/move/source/{source_id}": {
        # Editor of the source's space and where it goes.
        "POST": (Case("team_source", EDITOR_WRITE, body=move_body("team_source")),),
    },
}


# --- building and sending a request ---------------------------------------------------------


def _world_ref(world: World, value: Any) -> Any:
    """ "@key" → that world object; "@personal:<user>" → that user's personal space."""
    if isinstance(value, str) and value.startswith("@personal:"):
        return world.personal[value.split(":", 1)[1]]
    if isinstance(value, str) and value.startswith("@"):
        return world.objects[value[1:]]
    return value


def param_value(name: str, case: Case, world: World) -> str:
    """The value of URL parameter `name` for a request about `case.target`."""
    if name in case.params:
        value = _world_ref(world, case.params[name])
        return str(value.pk if isinstance(value, models.Model) else value)
    obj = world.objects[case.target]
    document = _document_of(obj)
    match name:
        case "space_id":
            return str(obj.pk if isinstance(obj, Space) else obj.space_id)
        case "note_id" | "document_id":
            if document is None:
                raise LookupError(f"{case.target} has no document for {{{name}}}")
            return str(document.pk)
        case "version_id":
            return str(version_of(obj).pk)
        case "passage_id":
            return str(head_passage(document).pk)
        case "sha256":
            return head_passage(document).version.sha256
        case "source_id":
            return str(obj.pk)
        case "trace_id":
            return str(obj.pk)
        case "annotation_id":
            return str(obj.pk)
        case "token":
            return obj.token
        case "link_id":
            return str(obj.pk)
        case "kind":
            return Source.Kind.FOLDER
        case "user_id":
            return str(world.users["bob"].pk)
        case "member_id" | "membership_id":
            return str(Membership.objects.get(space=world.team, user=world.users["bob"]).pk)
        case "username":
            return "bob"
    raise LookupError(
        f"no value for URL parameter {name!r}: teach param_value (tests/test_access_matrix.py)"
    )


def _document_of(obj: models.Model) -> Document | None:
    if isinstance(obj, Document):
        return obj
    if isinstance(obj, Annotation):
        return obj.document
    if isinstance(obj, PublicLink) and obj.version_id:
        return obj.version.document
    return None


def build_url(pattern: str, case: Case, world: World, *, api: bool) -> str:
    if api:
        return _API_PARAM.sub(lambda m: param_value(m.group(1), case, world), pattern)
    return "/" + _CONVERTER.sub(lambda m: param_value(m.group(1), case, world), pattern)


def schema_body(
    operation: dict[str, Any], schema: dict[str, Any], case: Case, world: World
) -> dict[str, Any]:
    """A minimal valid JSON body for `operation`: every required field of its request
    schema, ids filled from the world like URL parameters."""
    content = operation.get("requestBody", {}).get("content", {})
    body_schema = content.get("application/json", {}).get("schema")
    if not body_schema:
        return {}
    body_schema = _deref(body_schema, schema)
    body: dict[str, Any] = {}
    for name in body_schema.get("required", []):
        prop = _deref(body_schema.get("properties", {}).get(name, {}), schema)
        kind = prop.get("type") or next(
            (
                option.get("type")
                for option in prop.get("anyOf", [])
                if option.get("type") != "null"
            ),
            "string",
        )
        if name == "base_version_id":
            body[name] = world.objects[case.target].head_id
        elif name.endswith("_id") or name in {"space", "to_space"}:
            body[name] = int(param_value(name if name.endswith("_id") else "space_id", case, world))
        elif kind == "string":
            body[name] = "Matrix probe"
        elif kind == "integer":
            body[name] = 1
        elif kind == "array":
            body[name] = []
        elif kind == "boolean":
            body[name] = False
        else:
            body[name] = {}
    return body


def _deref(node: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _resolve(value: Any, world: World, role: str) -> Any:
    return value(world, role) if callable(value) else (value or {})


def fingerprint() -> tuple[object, ...]:
    """What any write a matrix request could make would change: documents (space, trash,
    head, title), memberships, spaces, sources, annotations, public links."""
    return (
        list(
            Document.objects.order_by("pk").values_list(
                "pk", "space_id", "deleted_at", "head_id", "title"
            )
        ),
        list(Membership.objects.order_by("pk").values_list("space_id", "user_id", "role")),
        list(
            Space.objects.order_by("pk").values_list(
                "pk", "name", "description", "no_egress", "public_links_enabled"
            )
        ),
        list(
            Source.objects.order_by("pk").values_list(
                "pk", "space_id", "name", "enabled", "webhook_secret"
            )
        ),
        list(Annotation.objects.order_by("pk").values_list("pk", "status")),
        list(PublicLink.objects.order_by("pk").values_list("pk", "revoked_at", "expires_at")),
        AskTrace.objects.count(),
    )


def send(
    client: Client,
    method: str,
    url: str,
    *,
    body: dict[str, Any],
    query: dict[str, Any],
    api: bool,
    changed: list[bool] | None = None,
) -> HttpResponse:
    """One request, in a savepoint rolled back afterwards (the world stays as it was).
    With `changed`, appends whether the request wrote anything `fingerprint` sees."""
    with transaction.atomic():
        before = fingerprint() if changed is not None else None
        if method == "GET":
            response = client.get(url, query)
        elif api:
            response = client.generic(
                method, url, json.dumps(body), content_type="application/json"
            )
        elif method == "POST":
            response = client.post(url, body)
        else:
            response = client.generic(method, url)
        if changed is not None:
            changed.append(fingerprint() != before)
        transaction.set_rollback(True)
    return response


def outcome_problem(role: str, expected: str, response: HttpResponse, *, api: bool) -> str | None:
    """What is wrong with `response` for `role` expecting `expected` (None: nothing)."""
    status = response.status_code
    if expected == OK:
        good = 200 <= status < 400
    elif expected == FORBIDDEN:
        good = status == 403
    elif expected == HIDDEN:
        good = status == 404
    elif expected == CONFLICT:
        good = status == 409
    elif expected == REFUSED:
        good = status in (400, 401)
    elif expected == BOUNCED:
        good = status in (302, 303, 404)
    elif expected == FORM_ERROR:
        good = status in (200, 400, 404)
    elif api:
        good = status == 401
    else:
        login = resolve_url(settings.LOGIN_URL)
        good = status == 302 and response.get("Location", "").startswith(login)
    if good:
        return None
    where = f" → {response.get('Location')}" if 300 <= status < 400 else ""
    return f"{role}: expected {expected}, got {status}{where}"


def denied(response: HttpResponse, *, api: bool) -> bool:
    """Whether `response` refused the request (403, 404, 401 or a redirect to log in)."""
    status = response.status_code
    if status in (401, 403, 404):
        return True
    login = resolve_url(settings.LOGIN_URL)
    return not api and status == 302 and response.get("Location", "").startswith(login)


def leaked_words(response: HttpResponse, words: dict[str, str]) -> list[str]:
    """The secret words (with their object) found in the body or Location of `response`."""
    if getattr(response, "streaming", False):
        text = b"".join(response.streaming_content).decode("utf-8", "replace")
    else:
        text = response.content.decode("utf-8", "replace")
    text = (text + " " + response.get("Location", "")).lower()
    return [f"{word!r} ({key})" for word, key in words.items() if word in text]


def clients_for(world: World) -> dict[str, Client]:
    clients = {}
    for role in ROLES:
        client = Client()
        user = world.user(role)
        if user is not None:
            client.force_login(user)
        clients[role] = client
    return clients


# --- the tally -------------------------------------------------------------------------------

TALLY: Counter[str] = Counter()
LEAKS: list[str] = []
WRONG: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _print_tally() -> Iterator[None]:
    yield
    # pytest may set this fixture up again for tests it reordered; print each total once.
    if TALLY["requests"] and TALLY["requests"] != TALLY["printed_at"]:
        TALLY["printed_at"] = TALLY["requests"]
        print(
            "\naccess matrix: "
            f"{TALLY['routes']} (route, method) pairs, {TALLY['cases']} cases, "
            f"{TALLY['requests']} requests (cases × roles), "
            f"{len(WRONG)} wrong outcomes, {len(LEAKS)} leaks; "
            f"admin: {TALLY['admin_changelists']} changelists × staff, "
            f"{TALLY['admin_leaks']} leaks"
        )
        for line in LEAKS:
            print("  LEAK", line)


@functools.cache
def _page_route_index() -> dict[str, Route]:
    return {route.key: route for route in page_routes()}


@functools.cache
def _project_schema() -> dict[str, Any]:
    """The API schema, built once per run (the URLconf does not change under the tests)."""
    return project_api_schema()


@functools.cache
def _api_operations() -> dict[tuple[str, str], dict[str, Any]]:
    schema = _project_schema()
    return {
        (api_path, method.upper()): operation
        for api_path, operations in schema["paths"].items()
        for method, operation in operations.items()
    }


def _rule_ids() -> list[tuple[str, str]]:
    return [(key, method) for key, methods in RULES.items() for method in methods]


# --- the tests ------------------------------------------------------------------------------


def test_every_route_has_a_rule() -> None:
    routes = page_routes() + api_routes(project_api_schema())
    missing = missing_rules(routes, RULES)
    assert not missing, "routes the access matrix has no rule for:\n" + "\n".join(missing)


def test_every_rule_names_a_route() -> None:
    """A rule for a route that does not exist (yet, or any more) — its route is missing or
    was renamed; the matrix would silently not try it."""
    routes = page_routes() + api_routes(project_api_schema())
    stale = stale_rules(routes, RULES)
    assert not stale, "rules naming no route (not built yet, or renamed):\n" + "\n".join(stale)


def _synthetic_view(request):  # pragma: no cover - never called
    return HttpResponse()


def test_the_walker_finds_a_route_without_a_rule() -> None:
    """The generator is what makes the matrix complete: a route added to a URLconf, even
    inside an include with a namespace, is found and reported with its name."""
    inner = SimpleNamespace(
        urlpatterns=[path("secret/<int:thing_id>/", _synthetic_view, name="secret")],
        app_name="extra",
    )

    urlconf = ModuleType("synthetic_urls")
    urlconf.urlpatterns = [
        path("", _synthetic_view, name="home"),
        path("extra/", include((inner.urlpatterns, "extra"))),
        path("admin/", _synthetic_view, name="skipped"),
    ]
    routes = page_routes(urlconf)
    assert [route.key for route in routes] == ["/", "/extra/secret/<thing_id>/"]
    missing = missing_rules(routes, {"/": {"GET": ()}})
    assert len(missing) == 1
    assert "/extra/secret/<thing_id>/" in missing[0] and "extra:secret" in missing[0]
    # An API method without a rule is named too, and a rule for nothing is stale.
    schema = {"paths": {"/api/things/{thing_id}": {"get": {}, "delete": {"operationId": "zap"}}}}
    missing = missing_rules(api_routes(schema), {"/api/things/{thing_id}": {"GET": ()}})
    assert len(missing) == 1 and missing[0].startswith("no rule for DELETE /api/things/{thing_id}")
    stale = stale_rules(routes, {"/": {"GET": ()}, "/gone/": {"POST": ()}})
    assert stale == ["POST /gone/"]


@pytest.mark.django_db
@pytest.mark.parametrize(("key", "method"), _rule_ids(), ids=lambda v: v)
def test_access_matrix(key: str, method: str) -> None:
    pages = _page_route_index()
    operations = _api_operations()
    api = key.startswith("/api/") and (key, method) in operations
    if not api and key not in pages:
        pytest.skip(f"{method} {key}: no such route yet (test_every_rule_names_a_route names it)")
    pattern = key if api else pages[key].pattern
    world = build_world()
    clients = clients_for(world)
    schema = _project_schema() if api else {}
    TALLY["routes"] += 1
    problems: list[str] = []
    for number, case in enumerate(RULES[key][method], start=1):
        TALLY["cases"] += 1
        url = build_url(pattern, case, world, api=api)
        for role in ROLES:
            expected = case.access[role]
            if case.body is not None:
                body = _resolve(case.body, world, role)
            elif api:
                body = schema_body(operations[(key, method)], schema, case, world)
            else:
                body = {}
            query = _resolve(case.query, world, role)
            changed: list[bool] = []
            response = send(
                clients[role], method, url, body=body, query=query, api=api, changed=changed
            )
            TALLY["requests"] += 1
            label = f"{method} {url} [case {number}: {case.target}]"
            problem = outcome_problem(role, expected, response, api=api)
            if problem:
                WRONG.append(f"{label} {problem}")
                problems.append(f"{label} {problem}")
            if expected != OK and changed[0]:
                # Denied, yet something was written (whatever the status said).
                WRONG.append(f"{label} {role}: denied, but it wrote")
                problems.append(f"{label} {role}: denied ({expected}), but it wrote")
            words = world.forbidden_words(role, exposed=case.exposed if expected == OK else ())
            if case.scope is not None and 200 <= response.status_code < 400:
                words |= world.content_words(outside_space_id=world.objects[case.scope].pk)
            if denied(response, api=api) and case.target in world.secrets:
                word, space_id = world.secrets[case.target]
                # A member refused by their role (403) may read their own space's name in the
                # reason ("Only an admin of Team …"); nothing else of the target, and nothing
                # at all for a non-member.
                member_refused = response.status_code == 403 and space_id in world.member_space_ids(
                    role
                )
                if not (member_refused and isinstance(world.objects[case.target], Space)):
                    words[word] = case.target
            leaks = leaked_words(response, words)
            if leaks:
                line = f"{label} {role} (status {response.status_code}) shows {', '.join(leaks)}"
                LEAKS.append(line)
                problems.append("LEAK " + line)
    assert not problems, "\n".join(problems)


@pytest.mark.django_db
@pytest.mark.parametrize("key", sorted(key for key in RULES if key in _page_route_index()))
def test_page_route_answers_only_its_methods(key: str) -> None:
    """Every method a page answers has a rule: GET and POST not in RULES are refused (405)
    for a signed-in admin."""
    pages = _page_route_index()
    world = build_world()
    client = clients_for(world)["alice"]
    case = next(iter(RULES[key].values()))[0]
    url = build_url(pages[key].pattern, case, world, api=False)
    for method in ("GET", "POST"):
        if method in RULES[key]:
            continue
        response = send(client, method, url, body={}, query={}, api=False)
        assert response.status_code == 405, (
            f"{method} {key} answers {response.status_code}: add it to RULES or refuse it"
        )


@pytest.mark.django_db
def test_a_denied_write_would_be_caught() -> None:
    """The write check is real: alice's delete (allowed) changes the fingerprint that a
    denied request must leave alone, and the savepoint puts everything back."""
    world = build_world()
    client = clients_for(world)["alice"]
    before = fingerprint()
    changed: list[bool] = []
    url = f"/notes/{world.objects['team_note'].pk}/delete"
    response = send(client, "POST", url, body={}, query={}, api=False, changed=changed)
    assert response.status_code == 302 and changed == [True]
    assert fingerprint() == before


# --- admin: a non-superuser staff member sees only their spaces' rows ------------------------


def _space_field(model: type[models.Model]) -> str | None:
    """How `model`'s rows reach a space (a lookup path), or None if they do not."""
    paths = {
        Space: "pk",
        Membership: "space",
        Document: "space",
        Source: "space",
        AskTrace: "space",
        PublicLink: "space",
        Annotation: "document__space",
    }
    if model in paths:
        return paths[model]
    names = {f.name for f in model._meta.get_fields()}
    for candidate in ("space", "document", "version", "source", "link", "passage"):
        if candidate in names:
            return candidate
    return None


@pytest.mark.django_db
def test_admin_changelists_show_a_staff_member_only_their_spaces() -> None:
    """bob (viewer of Team) made non-superuser staff with every view permission: no
    changelist shows him a word of alice's or dave's personal spaces; a superuser's does
    (so the check can fail)."""
    world = build_world()
    bob = world.users["bob"]
    bob.is_staff = True
    bob.save()
    bob.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    staff = Client()
    staff.force_login(bob)
    root = Client()
    root.force_login(type(bob).objects.create_superuser("root", "root@example.com", "pw"))
    hidden = world.forbidden_words("bob")
    problems = []
    seen_by_root: set[str] = set()
    for model in admin.site._registry:
        meta = model._meta
        url = f"/admin/{meta.app_label}/{meta.model_name}/"
        response = staff.get(url)
        TALLY["admin_changelists"] += 1
        if response.status_code != 200:
            problems.append(f"{url}: {response.status_code} for staff")
            continue
        leaks = leaked_words(response, hidden)
        if leaks:
            TALLY["admin_leaks"] += len(leaks)
            LEAKS.append(f"admin {url} shows bob {', '.join(leaks)}")
            problems.append(f"{url} shows bob {', '.join(leaks)}")
        seen_by_root.update(leaked_words(root.get(url), hidden))
    assert seen_by_root, "the superuser sees none of the hidden words: the check proves nothing"
    assert not problems, "\n".join(problems)
