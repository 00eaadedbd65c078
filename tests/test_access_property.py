"""A property: whatever the memberships and wherever the documents, no
search, ask, evidence opening or public link hands a user a passage of a space they are not
a member of.

Hypothesis draws a few users, a few shared spaces, a role (or none) for every (user, space),
and documents spread over the shared and personal spaces, each with a made-up word of its
own (its *token*). Then, for every user:

* a search for every token, across all their spaces and narrowed to each space (a space
  they are not in must raise `NoAccess`): every hit is in a space they belong to (in the one
  asked for, when narrowed), and a token of a document they may see is found;
* an ask for a visible and an invisible token together (and narrowed to each of their
  spaces): every document and passage the answer or its stored trace names is theirs to
  see, and no other invisible token appears anywhere in it;
* opening the evidence of every passage in the world: verified exactly for the passages of
  their spaces, "unavailable" for every other;
* the public links (made on random documents, some spaces with links turned off, some
  documents moved out afterwards) resolve only to their own document, in their own space,
  with links on.

Examples run lexical-only inside a rolled-back transaction (few and fast: the database is
real, so is the FTS index); `test_hybrid_world_leaks_nothing` runs one fixed world with the
dense leg (embedded Chroma, the real embedding model) the same way.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notes.models import Document
from retrieval.answer.ask import ask
from retrieval.eligibility import NoAccess
from retrieval.models import AskTrace, Passage
from retrieval.search.evidence import EvidenceStatus, open_evidence
from retrieval.search.pipeline import search
from spaces import public
from spaces.models import Membership, PublicLink, Role, Space, personal_space
from tests.access_world import world_note

pytestmark = pytest.mark.django_db

ROLE_CHOICES = (None, Role.VIEWER, Role.EDITOR, Role.ADMIN)
# Made-up words: never a real word, never a stem or prefix of another token here.
SYLLABLES = ("zor", "blik", "quam", "vex", "drun", "pliv", "sarn", "tupo", "gryl", "moxe")


def token(number: int) -> str:
    """A distinct made-up word for document `number` (0 → "zorzorq", 1 → "zorblikq", …)."""
    first, second = divmod(number, len(SYLLABLES))
    return f"{SYLLABLES[first % len(SYLLABLES)]}{SYLLABLES[second]}q"


@dataclass(frozen=True)
class Plan:
    """What hypothesis drew: `roles[u][s]` is user u's role in shared space s (or None);
    `documents` is (owner u, space) where space is ("shared", s) or ("personal", u);
    `links` are (document index, space has links on, document moved away afterwards)."""

    users: int
    spaces: int
    roles: tuple[tuple[str | None, ...], ...]
    documents: tuple[tuple[int, tuple[str, int]], ...]
    links: tuple[tuple[int, bool, bool], ...]


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    users = draw(st.integers(2, 4))
    spaces = draw(st.integers(1, 3))
    roles = tuple(
        tuple(draw(st.sampled_from(ROLE_CHOICES)) for _ in range(spaces)) for _ in range(users)
    )
    where = st.one_of(
        st.tuples(st.just("shared"), st.integers(0, spaces - 1)),
        st.tuples(st.just("personal"), st.integers(0, users - 1)),
    )
    documents = tuple(
        draw(st.lists(st.tuples(st.integers(0, users - 1), where), min_size=1, max_size=6))
    )
    links = tuple(
        draw(
            st.lists(
                st.tuples(st.integers(0, len(documents) - 1), st.booleans(), st.booleans()),
                max_size=3,
            )
        )
    )
    return Plan(users=users, spaces=spaces, roles=roles, documents=documents, links=links)


@dataclass
class Built:
    users: list[User]
    spaces: list[Space]
    documents: list[Document] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    links: list[PublicLink] = field(default_factory=list)

    @property
    def document_ids(self) -> list[int]:
        return [document.pk for document in self.documents]

    def documents_in(self, space_ids: set[int]) -> list[Document]:
        return [
            d for d in Document.objects.filter(pk__in=self.document_ids) if d.space_id in space_ids
        ]

    def member_space_ids(self, user: User) -> set[int]:
        return set(Membership.objects.filter(user=user).values_list("space_id", flat=True))

    def space_of_passage(self) -> dict[int, int]:
        return dict(
            Passage.objects.filter(document_id__in=self.document_ids).values_list(
                "pk", "document__space_id"
            )
        )


def build(plan: Plan) -> Built:
    """The users, spaces, memberships, documents and public links `plan` describes. Every
    shared space gets a creator-admin who is none of the drawn users' business: a space may
    have no drawn member at all."""
    founder = User.objects.create_user("founder", "founder@example.com", "pw")
    users = [
        User.objects.create_user(f"u{i}", f"u{i}@example.com", "pw") for i in range(plan.users)
    ]
    spaces = []
    for number in range(plan.spaces):
        space = Space.objects.create(name=f"Shared {number}", created_by=founder)
        Membership.objects.create(space=space, user=founder, role=Role.ADMIN)
        spaces.append(space)
    for user, roles in zip(users, plan.roles, strict=True):
        for space, role in zip(spaces, roles, strict=True):
            if role is not None:
                Membership.objects.create(space=space, user=user, role=role)
    built = Built(users=users, spaces=spaces)
    for number, (owner, (kind, index)) in enumerate(plan.documents):
        space = spaces[index] if kind == "shared" else personal_space(users[index])
        word = token(number)
        document = world_note(
            users[owner],
            space,
            f"Note {word}",
            f"# Note {word}\n\nThe {word} paragraph says where the {word} is kept.\n",
        )
        built.documents.append(document)
        built.tokens.append(word)
    for document_index, links_on, moved in plan.links:
        document = built.documents[document_index]
        Space.objects.filter(pk=document.space_id).update(public_links_enabled=links_on)
        link = PublicLink.objects.create(
            space_id=document.space_id, kind=PublicLink.Kind.VERSION, version=document.head
        )
        built.links.append(link)
        if moved:
            elsewhere = personal_space(founder)
            Document.objects.filter(pk=document.pk).update(space=elsewhere)
            document.refresh_from_db()
    return built


def ids_named(data: Any, key: str) -> Iterable[int]:
    """Every integer stored under `key` anywhere in a JSON-like value."""
    if isinstance(data, dict):
        for name, value in data.items():
            if name == key and isinstance(value, int):
                yield value
            else:
                yield from ids_named(value, key)
    elif isinstance(data, list):
        for item in data:
            yield from ids_named(item, key)


def check_world(built: Built, *, mode: str) -> list[str]:
    """Every way a user of `built` could see a passage outside their spaces, as lines."""
    problems: list[str] = []
    passage_space = built.space_of_passage()
    document_space = {d.pk: d.space_id for d in Document.objects.filter(pk__in=built.document_ids)}
    token_space = {
        word: document_space[d.pk] for word, d in zip(built.tokens, built.documents, strict=True)
    }
    all_spaces = set(document_space.values()) | {s.pk for s in built.spaces}
    for user in built.users:
        mine = built.member_space_ids(user)
        visible_tokens = [w for w, s in token_space.items() if s in mine]
        hidden_tokens = [w for w, s in token_space.items() if s not in mine]
        # Search: across all spaces, then narrowed to each.
        for word, word_space in token_space.items():
            result = search(user=user, query=word, mode=mode, rerank="off")
            assert not result.error, result.error
            spaces_hit = {hit.passage.document.space_id for hit in result.hits}
            if spaces_hit - mine:
                problems.append(f"{user} searching {word!r} got spaces {spaces_hit - mine}")
            if word_space in mine and not result.hits:
                problems.append(f"{user} searching {word!r} found nothing (it is theirs)")
            for hit in result.hits:
                outcome = open_evidence(
                    user,
                    hit.passage.document_id,
                    hit.passage.version_id,
                    hit.passage.pk,
                    hit.passage.version.sha256,
                )
                if outcome.status != EvidenceStatus.VERIFIED_CURRENT:
                    problems.append(f"{user}: the evidence of hit {hit.passage.pk} does not open")
            # Narrowed: to the token's own space and to one other of theirs (its hits must
            # all be of the space asked for), and to a space they are not in (refused).
            others = sorted(mine - {word_space})[:1]
            strangers = sorted(all_spaces - mine)[:1]
            for space_id in [*([word_space] if word_space in mine else []), *others, *strangers]:
                try:
                    narrowed = search(
                        user=user, query=word, mode=mode, rerank="off", space_id=space_id
                    )
                except NoAccess:
                    if space_id in mine:
                        problems.append(f"{user} refused their own space {space_id}")
                    continue
                if space_id not in mine:
                    problems.append(f"{user} searched space {space_id} they are not in")
                outside = {h.passage.document.space_id for h in narrowed.hits} - {space_id}
                if outside:
                    problems.append(f"{user} in space {space_id} got hits of {outside}")
        # Ask: one visible and one hidden token, across all spaces and in each of theirs.
        question_words = visible_tokens[:1] + hidden_tokens[:1]
        question = f"Where is the {' '.join(question_words) or 'nothing'} kept?"
        for space_id in [None, *sorted(mine)]:
            outcome = ask(user=user, question=question, mode=mode, space_id=space_id)
            allowed = mine if space_id is None else {space_id}
            stored = AskTrace.objects.get(pk=outcome.trace_id)
            data = [outcome.as_dict(), stored.answer, stored.trace]
            for document_id in ids_named(data, "document_id"):
                if document_id in document_space and document_space[document_id] not in allowed:
                    problems.append(f"{user} asking in {space_id} got document {document_id}")
            for passage_id in ids_named(data, "passage_id"):
                if passage_id in passage_space and passage_space[passage_id] not in allowed:
                    problems.append(f"{user} asking in {space_id} got passage {passage_id}")
            text = json.dumps(data)
            for word, word_space in token_space.items():
                if word_space not in allowed and word not in question_words and word in text:
                    problems.append(f"{user} asking in {space_id} saw {word!r}")
        # Evidence: every passage of the world, opened by this user.
        for passage in Passage.objects.filter(document_id__in=built.document_ids).select_related(
            "version"
        ):
            outcome = open_evidence(
                user, passage.document_id, passage.version_id, passage.pk, passage.version.sha256
            )
            ours = passage_space[passage.pk] in mine
            opened = outcome.passage is not None or outcome.document is not None
            if not ours and (opened or outcome.status != EvidenceStatus.UNAVAILABLE):
                problems.append(f"{user} opened evidence {passage.pk} of another space")
            if ours and passage.is_head and outcome.status != EvidenceStatus.VERIFIED_CURRENT:
                problems.append(f"{user} could not open their own evidence {passage.pk}")
    # Public links: only a live link to a document still in its space, with links on.
    for link in built.links:
        resolved = public.link_resolve(link.token)
        document = Document.objects.select_related("space").get(pk=link.version.document_id)
        should = document.space_id == link.space_id and document.space.public_links_enabled
        if should != (resolved is not None):
            problems.append(f"link {link.pk}: resolved={resolved is not None}, expected {should}")
        if resolved is not None and resolved.version.document.space_id != resolved.space_id:
            problems.append(f"link {link.pk} shows a document of another space")
    return problems


@pytest.mark.slow  # ~25 s: fifteen worlds, each searched, asked and opened by every user
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=plans())
def test_random_memberships_never_leak(plan: Plan) -> None:
    with transaction.atomic():
        built = build(plan)
        problems = check_world(built, mode="lexical")
        transaction.set_rollback(True)
    assert not problems, "\n".join(problems)


def test_the_property_can_fail(monkeypatch) -> None:
    """With the space check switched off (every user's audience is every space), the same
    checks report a leak: the property is not vacuous."""
    from retrieval import eligibility

    plan = Plan(
        users=2,
        spaces=1,
        roles=((Role.VIEWER,), (None,)),
        documents=((0, ("shared", 0)), (1, ("personal", 1))),
        links=(),
    )
    built = build(plan)
    everything = frozenset(Space.objects.values_list("pk", flat=True))
    real = eligibility.member_space_ids
    monkeypatch.setattr(
        eligibility, "member_space_ids", lambda user_id: everything if user_id else real(user_id)
    )
    problems = check_world(built, mode="lexical")
    assert any("got spaces" in line for line in problems), problems


@pytest.mark.slow
def test_hybrid_world_leaks_nothing(private_vectors) -> None:
    """One seeded world, searched and asked in hybrid mode: the dense leg's Chroma filter
    carries the space, so the same checks hold with meaning-only neighbours in play."""
    from retrieval.index.sync import sync_vectors

    rng = random.Random(15)
    users, spaces = 3, 2
    plan = Plan(
        users=users,
        spaces=spaces,
        roles=tuple(tuple(rng.choice(ROLE_CHOICES) for _ in range(spaces)) for _ in range(users)),
        documents=tuple(
            (
                rng.randrange(users),
                ("shared", rng.randrange(spaces))
                if rng.random() < 0.6
                else ("personal", rng.randrange(users)),
            )
            for _ in range(6)
        ),
        links=((0, True, False), (1, True, True)),
    )
    built = build(plan)
    sync_vectors()
    problems = check_world(built, mode="hybrid")
    assert not problems, "\n".join(problems)
    # The dense leg really ran: a meaning-only query gets neighbours, of the user's spaces.
    for user in built.users:
        result = search(user=user, query="where is it kept", mode="hybrid", rerank="off")
        assert not result.degraded, result.degraded
        mine = built.member_space_ids(user)
        assert result.dense_candidates > 0 or not built.documents_in(mine)
        assert {hit.passage.document.space_id for hit in result.hits} <= mine
