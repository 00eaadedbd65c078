"""Spaces: who may see which documents.

Every document, source (and so its externals and snapshots), annotation (through its note
document) and stored answer belongs to a space. A user sees exactly the documents of the
spaces they are a member of; `retrieval.eligibility` is the one place that turns this into
a condition. Every user has one personal space (`Space.personal_of`), created with the
account, of which they are the only member and admin. Anyone may create a shared space and
add members with a role:

* viewer — search, open, ask;
* editor — also write notes, add sources, annotate, move documents in and out;
* admin — also manage members, the space's sources and its no-egress and public-link
  settings.

Public read-only links (`PublicLink`) show one note version or one stored answer to anyone
holding the token, only when the space's admin has turned them on.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, models, transaction
from django.utils import timezone
from django.utils.text import Truncator

PERSONAL_SPACE_NAME = "Personal"


class Role(models.TextChoices):
    """Ordered weakest first: a role includes every right of the ones before it."""

    VIEWER = "viewer", "Viewer"
    EDITOR = "editor", "Editor"
    ADMIN = "admin", "Admin"


ROLE_RANK = {Role.VIEWER: 0, Role.EDITOR: 1, Role.ADMIN: 2}


def role_at_least(role: str | None, needed: str) -> bool:
    """Whether `role` (None: not a member) carries the rights of `needed`."""
    return role is not None and ROLE_RANK[Role(role)] >= ROLE_RANK[Role(needed)]


class Space(models.Model):
    name = models.CharField(max_length=100)
    # Set for a user's personal space (exactly one each); null for shared spaces.
    personal_of = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="personal_space",
    )
    description = models.CharField(max_length=500, blank=True, default="")
    # Never send this space's documents off the machine (to a cloud answerer or judge), on
    # top of each document's and source's own flag.
    no_egress = models.BooleanField(default=False)
    # Off by default: only then may members create public read-only links to its content.
    public_links_enabled = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["personal_of_id", "name", "id"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_personal(self) -> bool:
        return self.personal_of_id is not None


class Membership(models.Model):
    space = models.ForeignKey(Space, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="space_memberships"
    )
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.VIEWER)
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["space_id", "user_id"]
        constraints = [
            models.UniqueConstraint(fields=["space", "user"], name="membership_unique_user")
        ]
        indexes = [models.Index(fields=["user", "space"])]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.space_id} ({self.role})"


def personal_space(user: models.Model) -> Space:
    """`user`'s personal space, created (with the user as its admin) if it does not exist.

    Idempotent under concurrency: the one-to-one column makes a second insert fail, and the
    loser reads the winner's row."""
    found = Space.objects.filter(personal_of_id=user.pk).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            space = Space.objects.create(
                name=PERSONAL_SPACE_NAME, personal_of_id=user.pk, created_by_id=user.pk
            )
            Membership.objects.create(space=space, user_id=user.pk, role=Role.ADMIN)
            return space
    except IntegrityError:
        return Space.objects.get(personal_of_id=user.pk)


def personal_space_id(user_id: int) -> int:
    """The id of the personal space of the user with id `user_id` (created if missing)."""
    found = Space.objects.filter(personal_of_id=user_id).values_list("pk", flat=True).first()
    if found is not None:
        return found
    return personal_space(get_user_model()(pk=user_id)).pk


def heir_of(space_id: int, user_id: int) -> int | None:
    """Who inherits `user_id`'s content in `space_id` when their account is deleted: another
    member, an admin first, then an editor, then a viewer, the longest-standing first. None
    for a personal space or a shared one nobody else is in (nobody is left to read it)."""
    rank = models.Case(
        models.When(role=Role.ADMIN, then=models.Value(0)),
        models.When(role=Role.EDITOR, then=models.Value(1)),
        default=models.Value(2),
        output_field=models.IntegerField(),
    )
    return (
        Membership.objects.filter(space_id=space_id)
        .exclude(user_id=user_id)
        .order_by(rank, "added_at", "pk")
        .values_list("user_id", flat=True)
        .first()
    )


def hand_over_or_cascade(collector: Any, field: Any, sub_objs: Any, using: str) -> None:
    """`on_delete` for what a user owns (documents, sources, annotations, stored answers):
    deleting the account takes what was only theirs, but what they wrote in a shared space
    stays with the space, handed to `heir_of` that space (deleting an account must not
    delete a team's notes). A row whose unique key the heir already holds (a source
    name, an import key) cannot be handed over and goes with the account."""
    heirs: dict[tuple[int, int], int | None] = {}
    handed: dict[int, list[Any]] = defaultdict(list)
    doomed: list[Any] = []
    for obj in sub_objs:
        space_id = _space_of(obj)
        owner_id = getattr(obj, field.attname)
        key = (space_id, owner_id)
        if key not in heirs:
            heirs[key] = heir_of(space_id, owner_id) if space_id is not None else None
        heir = heirs[key]
        if heir is None or _heir_holds_key(obj, heir):
            doomed.append(obj)
        else:
            handed[heir].append(obj)
    for heir, objs in handed.items():
        collector.add_field_update(field, heir, objs)
    if doomed:
        models.CASCADE(collector, field, doomed, using)


def _space_of(obj: Any) -> int | None:
    if hasattr(obj, "space_id"):
        return obj.space_id
    document = getattr(obj, "document", None)  # an annotation: its external's space
    return document.space_id if document is not None else None


def _heir_holds_key(obj: Any, heir_id: int) -> bool:
    """Whether handing `obj` to `heir_id` would break a per-owner unique key."""
    model = type(obj)
    if model._meta.label == "externals.Source":
        return model.objects.filter(owner_id=heir_id, name=obj.name).exists()
    if model._meta.label == "notes.Document" and obj.external_key:
        return model.objects.filter(owner_id=heir_id, external_key=obj.external_key).exists()
    return False


class DocumentMove(models.Model):
    """One explicit move of a document from one space to another."""

    document = models.ForeignKey("notes.Document", on_delete=models.CASCADE, related_name="moves")
    from_space = models.ForeignKey(
        Space, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    to_space = models.ForeignKey(
        Space, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Names kept as they were, so the record still reads when a space is deleted.
    from_space_name = models.CharField(max_length=100)
    to_space_name = models.CharField(max_length=100)
    moved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    moved_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-moved_at", "-id"]

    def __str__(self) -> str:
        return f"document {self.document_id}: {self.from_space_name} → {self.to_space_name}"


def live_link_q(now=None) -> models.Q:
    """The condition on PublicLink of a link that is neither revoked nor expired (the rule
    `PublicLink.is_live` applies to one row)."""
    now = now or timezone.now()
    return models.Q(revoked_at__isnull=True) & (
        models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
    )


def new_link_token() -> str:
    # 32 random bytes: unguessable, URL-safe.
    return secrets.token_urlsafe(32)


class PublicLink(models.Model):
    """An unguessable, revocable, optionally expiring read-only link to exactly one note
    version or one stored answer."""

    class Kind(models.TextChoices):
        VERSION = "version", "Note version"
        ANSWER = "answer", "Stored answer"

    space = models.ForeignKey(Space, on_delete=models.CASCADE, related_name="public_links")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    token = models.CharField(max_length=64, unique=True, default=new_link_token, editable=False)
    version = models.ForeignKey(
        "notes.Version", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    answer = models.ForeignKey(
        "retrieval.AskTrace", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(kind="version", version__isnull=False, answer__isnull=True)
                    | models.Q(kind="answer", answer__isnull=False, version__isnull=True)
                ),
                name="public_link_one_target",
            )
        ]

    def __str__(self) -> str:
        return f"public link {self.pk} ({self.kind})"

    def is_live(self, *, now=None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    def target_words(self) -> str:
        """What the link shows, in words: 'Note “Runbook”, version 3' or 'Answer: “How do
        we…”' (the question cut to 80 characters). The pages and the API say it alike."""
        if self.kind == self.Kind.VERSION and self.version is not None:
            return f"Note “{self.version.document.title}”, version {self.version.number}"
        if self.answer is not None:
            return f"Answer: “{Truncator(self.answer.question).chars(80)}”"
        return "Nothing any more"


class PublicLinkView(models.Model):
    """One opening of a public link: when, and a keyed hash of the client address (never the
    address itself)."""

    link = models.ForeignKey(PublicLink, on_delete=models.CASCADE, related_name="views")
    viewed_at = models.DateTimeField(auto_now_add=True, db_index=True)
    client_hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["-viewed_at", "-id"]

    def __str__(self) -> str:
        return f"view of link {self.link_id} at {self.viewed_at:%Y-%m-%d %H:%M}"
