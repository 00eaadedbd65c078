"""Test factories: the builders several test files need, in one place (HackSoft's
`factories.py` shape). Each writes through the same services the app uses (`note_create`,
`version_create`), so what a test builds is what the app would have written.

Fixtures that only wrap these (`staff_client`, the users) live in `tests/conftest.py`.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from datetime import timedelta

from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client
from django.utils import timezone

from externals.models import Source, SourceItem
from notes import services
from notes.models import Document, TrustTier
from retrieval.answer.pack import pack_item
from retrieval.answer.types import EvidencePack, PackItem
from retrieval.index.edges import refresh_edges
from retrieval.models import Passage

# --- ports and clients -------------------------------------------------------------------------


# The fields that make up a passage's content and place in its version (loader tests compare
# them between two ways of writing the same notes).
PASSAGE_FIELDS = (
    "position",
    "block_kind",
    "heading_path",
    "title_text",
    "start",
    "end",
    "start_line",
    "end_line",
    "parent_start",
    "parent_end",
    "text",
    "text_sha256",
)


def free_port() -> int:
    """A loopback port nothing listens on (bound, then closed at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def staff_client(user: User | None = None, *, superuser: bool = True) -> Client:
    """A client logged in as staff: `user` promoted (so the pages also show that user's own
    data), or a new user "root" when none is given. `superuser=False` leaves a plain staff
    member, for pages that must not need more than `is_staff`."""
    if user is None:
        user = User.objects.create_user("root", "root@example.com", "pw")
    user.is_staff = True
    user.is_superuser = superuser
    user.save()
    client = Client()
    client.force_login(user)
    return client


# --- notes and externals -----------------------------------------------------------------------


def note(
    owner: User,
    title: str,
    body: str,
    *,
    tags: str | Sequence[str] = (),
    no_egress: bool = False,
) -> Document:
    """A note written by `note_create`; `no_egress=True` then sets the flag the way an owner
    marking it private would (notes are created without it)."""
    document = services.note_create(owner=owner, title=title, body=body, tags=tags)
    if no_egress:
        Document.objects.filter(pk=document.pk).update(no_egress=True)
        document.refresh_from_db()
    return document


def note_state(note: Document) -> tuple[object, ...]:
    """What any write to `note` would change (head, title, deletion, versions, indexed
    passages), re-read from the database: equal before and after means nothing was written."""
    note.refresh_from_db()
    return (
        note.head_id,
        note.title,
        note.deleted_at,
        note.versions.count(),
        Passage.objects.filter(document=note, is_head=True).count(),
    )


EXTERNAL_BODY = (
    "Runbook for the cache.\n\n"
    "Set maxmemory-policy allkeys-lru on the cache before the launch.\n\n"
    "Rotate the staging certs with certbot every quarter.\n"
)
EXTERNAL_QUOTE = "maxmemory-policy allkeys-lru"  # a span of EXTERNAL_BODY to annotate


def make_external(
    owner: User,
    title: str = "Cache runbook",
    body: str = EXTERNAL_BODY,
    *,
    bodies: Sequence[str] = (),
    tier: str = TrustTier.EXTERNAL_CURRENT,
    no_egress: bool = False,
    source_name: str = "",
    external_key: str = "",
    extractor: tuple[str, str] = ("text", "1"),
    age: timedelta = timedelta(0),
    space_id: int | None = None,
) -> Document:
    """An external document written the way the refresh pipeline writes one: the document
    row (in space `space_id`, by default the owner's personal space), then one snapshot per
    body through `version_create` (created by no user).

    `bodies`, when given, replaces `body`: one snapshot each, the last is the head. `age`
    backdates every snapshot, for staleness. `extractor` is the (name, version) shown on
    the snapshot pages."""
    extractor_name, extractor_version = extractor
    with transaction.atomic():
        document = Document.objects.create(
            owner=owner,
            space_id=space_id,
            kind=Document.Kind.EXTERNAL,
            title=title,
            trust_tier=tier,
            no_egress=no_egress,
            source_name=source_name,
            external_key=external_key,
        )
        for snapshot in bodies or (body,):
            services.version_create(
                document=document,
                title=title,
                body=snapshot,
                user=None,
                extractor_name=extractor_name,
                extractor_version=extractor_version,
            )
        if age:
            document.versions.update(created_at=timezone.now() - age)
    document.refresh_from_db()
    return document


def make_source(owner: User, name: str = "Docs", **fields: object) -> Source:
    """A folder source row (no scan): `fields` override kind, location or any setting."""
    fields.setdefault("kind", Source.Kind.FOLDER)
    fields.setdefault("location", "/srv/docs")
    return Source.objects.create(owner=owner, name=name, **fields)


def make_source_external(
    source: Source,
    *,
    path: str = "guide.md",
    title: str = "Guide",
    bodies: Sequence[str] = ("Rotate the certs before Friday.\n",),
    age: timedelta = timedelta(0),
) -> Document:
    """An external mirrored from `source` at `path`, with its `SourceItem`: space, tier,
    no-egress and name come from the source, as a scan would set them; one snapshot per
    body."""
    document = make_external(
        source.owner,
        title,
        bodies=bodies,
        tier=source.trust_tier,
        no_egress=source.no_egress,
        source_name=source.name,
        external_key=f"source:{source.pk}:{path}",
        extractor=("trafilatura", "2.0.0"),
        age=age,
        space_id=source.space_id,
    )
    SourceItem.objects.create(
        source=source,
        path=path,
        document=document,
        sha256=document.head.sha256,
        byte_size=document.head.byte_size,
    )
    refresh_edges([document.pk])  # as the pipeline does once the item names its document
    return document


# --- evidence packs ----------------------------------------------------------------------------


def pack_of(*documents: Document) -> EvidencePack:
    """An evidence pack of every head passage of `documents`, in order, ranked 1, 2, …"""
    items: list[PackItem] = []
    for document in documents:
        passages = Passage.objects.filter(document=document, is_head=True).select_related(
            "version", "document"
        )
        items += [pack_item(p, rank=len(items) + 1) for p in passages.order_by("position")]
    return EvidencePack(items=items)


# --- data --------------------------------------------------------------------------------------

# Several notes sharing words at different densities, so a search for "cache" is a real
# ranking and not one lone hit (the share-link tests reproduce that order).
CACHE_NOTES: list[tuple[str, str]] = [
    ("Cache runbook", "Redis cache eviction: set maxmemory-policy allkeys-lru on the cache."),
    ("Cache sizing", "Size the cache for the working set. The cache hit ratio should stay high."),
    ("Deploy", "Rotate certs with certbot, then warm the cache after deploy."),
    ("Incident 42", "The cache stampede took the API down; add request coalescing."),
    ("Unrelated", "Bake sourdough at 250 degrees for forty minutes."),
    ("Cache glossary", "cache: a store that keeps results close. eviction: removing entries."),
]

# Queries that try to break the query parser, the FTS5 MATCH / tsquery builders, the SQL
# around them, the HTTP layer or the page's escaping. Every layer must answer each one with
# results or a clean error, never an exception or a leak of another user's rows.
HOSTILE_QUERIES: list[str] = [
    "x" * 10_000,  # over the length limit
    "!@#$%^&*()_+=[]{}|;:',.<>/?`~\\",  # every ASCII operator at once
    "!@#$%^&*()+=[]{}|;:',.<>/?`~\\",  # the same without "_" (FTS5 treats "_" as a word char)
    "NEAR(",  # FTS5 NEAR group left open
    "NEAR(a b)",  # FTS5 NEAR group
    "NEAR(rotate certs, 2)",  # FTS5 NEAR with a distance
    '"foo',  # unbalanced phrase quote, open
    'foo"',  # unbalanced phrase quote, close
    '""',  # empty phrase
    "*",  # a bare prefix operator
    "foo*",  # prefix query
    "-",  # a bare exclusion
    "--",  # SQL comment start
    "-foo",  # exclusion only: nothing to include
    '-"foo bar"',  # excluded phrase
    "AND OR NOT",  # boolean operators without operands
    "foo AND",  # dangling operator
    "OR foo",  # leading operator
    "NOT",  # operator alone
    "a\x00b",  # NUL inside a word (C strings, SQLite text)
    "\x00",  # NUL alone
    "col:foo",  # FTS5 column filter on an unknown column
    "title_text:rotate",  # FTS5 column filter on a real column
    "text:rotate",  # FTS5 column filter on the body column
    "^foo",  # FTS5 start-of-column anchor
    "{a b}",  # FTS5 column set
    "{title_text text}: rotate",  # FTS5 column set with a filter
    "rotate + certs",  # FTS5 phrase concatenation
    "(rotate",  # unbalanced group, open
    "rotate)",  # unbalanced group, close
    "😀🔥",  # astral characters only (no word characters)
    "emoji 👍🏽 rotate",  # astral character with a skin-tone modifier between words
    "שלום עולם",  # right-to-left script
    "مرحبا بالعالم",  # right-to-left script with joining letters
    "\u202erotate\u202c",  # bidi override around a word
    "\ud800",  # a lone surrogate (not encodable as UTF-8)
    "rotate \udfff certs",  # a lone surrogate between words
    "'; DROP TABLE notes_document; --",  # SQL injection
    "rotate' OR '1'='1",  # SQL injection in a quoted literal
    "%_%",  # LIKE wildcards
    "\\",  # a lone backslash (escape character)
    "$1",  # a positional SQL parameter
    "%s",  # a DB-API placeholder
    "!!rotate",  # tsquery negation, doubled
    "rotate & certs | redis",  # tsquery AND / OR
    "rotate <-> certs",  # tsquery FOLLOWED BY
    "rotate:*",  # tsquery prefix
    "   ",  # blank
    "\t\n",  # whitespace that is not a space
    "<script>alert(1)</script>",  # markup that a page must escape
]

# The ones an HTTP client can send: a lone surrogate has no UTF-8 encoding, so it cannot be
# put in a URL at all (the page and API tests send invalid UTF-8 as raw %-escapes instead).
HOSTILE_HTTP_QUERIES: list[str] = [
    query for query in HOSTILE_QUERIES if not any(0xD800 <= ord(c) <= 0xDFFF for c in query)
]
