"""Public read-only links: one note version or one stored answer, shown to
anyone holding an unguessable token, only while the space's admin allows it.

The rules live here, not in the views, so the web page, the admin and the tests all apply the
same ones:

* **Creating** (`link_create`) publishes space content outside the space, so it needs an
  editor or admin of the space (a viewer may read but not publish), a space whose admin
  turned public links on, and a target that is the space's own: a live *note* version (never
  an external's snapshot: externals are other people's content, mirrored for the space, not
  the space's to republish), or a stored answer asked *in* the space (an answer asked across
  all of someone's spaces may quote their private notes, so it is never publishable).
* **Resolving** (`link_resolve`) answers a link only while it is live: not revoked, not
  expired, its space still allowing public links, and its target still in that space (a note
  moved out or deleted takes its links with it). It never says which of these failed: the
  page of a dead link is the page of a token that never existed.
* **Hiding** (`verified_claims`): the reader of a public link is anonymous, so a claim is
  shown only while every document it cites is still stored, not in the trash and in the
  space the answer was published from (`eligibility.citable_in_public_link`); otherwise the
  claim is replaced by `eligibility.NO_LONGER_VISIBLE` and nothing of its text, quotes or
  titles is shown (DESIGN.md invariant 14).
* **Verifying** (`verified_supports`) re-checks every evidence span of an answer against the
  stored version on every opening, as the evidence page does (`retrieval.search.evidence`):
  the version still in the link's space and not deleted, its body still hashing to its
  SHA-256, the span still at its offsets, and for a current version read from a file, the
  file still holding the indexed bytes. The quote shown is read from the verified body, never
  from the stored answer's copy.
* **Rate limit and log** (`view_refusal`, `record_view`): every opening is counted per client
  address and in total (a sliding window per address, a fixed one for the total), and every
  served view is stored with a keyed hash of the address, never the address.

Layer: "search" (it reads `retrieval.search.evidence` for the source-file check).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from notes.models import Document, Version
from retrieval.eligibility import NO_LONGER_VISIBLE, can, citable_in_public_link, role_in
from retrieval.models import AskTrace
from retrieval.search.evidence import check_source, source_size_limit
from retrieval.text.normalise import nfc_collapsed
from spaces.models import PublicLink, PublicLinkView, Role, Space, live_link_q

# --- messages (shown to the member who tried; never to a public visitor) ----------------------

DISABLED_MESSAGE = (
    "Public links are turned off for the space “{space}”. An admin of the space can turn "
    "them on on the space's page."
)
ROLE_MESSAGE = (
    "Only editors and admins of the space “{space}” can create public links: a public link "
    "publishes its content to anyone who has the URL."
)
EXTERNAL_MESSAGE = (
    "Only note versions can be published. Externals are other people's content, mirrored "
    "into the space, so lode does not republish them."
)
DELETED_MESSAGE = "This note is in the trash; restore it before publishing it."
PRIVATE_ANSWER_MESSAGE = (
    "This answer was asked across all your spaces, so it may quote notes only you can see: "
    "it cannot be published. Ask again inside one space to publish the answer."
)
EXPIRY_MESSAGE = "A link's expiry must be in the future."
REVOKE_MESSAGE = "Only the link's creator or an admin of its space can revoke it."

# Longest number of days a link may be given to live from the form (the admin may set any
# date); a link without expiry lives until revoked.
MAX_EXPIRY_DAYS = 365
# Tokens are `secrets.token_urlsafe(32)` (43 characters); anything that could not be one is
# refused before the database is asked.
TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{20,64}")

# Rate limits (settings override them; see `view_refusal`).
DEFAULT_VIEWS_PER_MINUTE = 60
DEFAULT_TOTAL_VIEWS_PER_MINUTE = 1200
WINDOW_SECONDS = 60.0
CACHE_PREFIX = "lode:public-views"


# --- creating, revoking, resolving ------------------------------------------------------------


def _check_enabled(space: Space) -> None:
    if not space.public_links_enabled:
        raise PermissionDenied(DISABLED_MESSAGE.format(space=space.name))


def _check_editor(user: AbstractBaseUser, space: Space) -> None:
    if not can(user.pk, space.pk, Role.EDITOR):
        raise PermissionDenied(ROLE_MESSAGE.format(space=space.name))


def link_create(
    *,
    by: AbstractBaseUser,
    version: Version | None = None,
    answer: AskTrace | None = None,
    expires_at: datetime | None = None,
) -> PublicLink:
    """A new public link to `version` (of a note) or `answer` (a stored answer asked in a
    space), created by `by`, an editor or admin of the target's space.

    Raises PermissionDenied (with a message for `by`) when the space does not allow public
    links, `by` is not an editor there, or the target may not be published; ValidationError
    for an expiry that is not in the future. The caller must already have checked that `by`
    may see the target at all (and answered "no access" otherwise).
    """
    if (version is None) == (answer is None):
        raise ValueError("give exactly one of version and answer")
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationError(EXPIRY_MESSAGE)
    if version is not None:
        document = version.document
        space = document.space
        _check_editor(by, space)
        _check_enabled(space)
        if document.kind != Document.Kind.NOTE:
            raise PermissionDenied(EXTERNAL_MESSAGE)
        if document.deleted_at is not None:
            raise PermissionDenied(DELETED_MESSAGE)
        return PublicLink.objects.create(
            space=space,
            kind=PublicLink.Kind.VERSION,
            version=version,
            created_by=by,
            expires_at=expires_at,
        )
    if answer.space_id is None:
        raise PermissionDenied(PRIVATE_ANSWER_MESSAGE)
    space = answer.space
    _check_editor(by, space)
    _check_enabled(space)
    return PublicLink.objects.create(
        space=space,
        kind=PublicLink.Kind.ANSWER,
        answer=answer,
        created_by=by,
        expires_at=expires_at,
    )


def may_revoke(user: AbstractBaseUser, link: PublicLink) -> bool:
    """Whether `user` may revoke `link`: an admin of its space, or its creator while still a
    member of the space (someone removed from a space manages nothing in it)."""
    role = role_in(user.pk, link.space_id)
    if role is None:
        return False
    return role == Role.ADMIN or (link.created_by_id is not None and link.created_by_id == user.pk)


def link_revoke(*, by: AbstractBaseUser, link: PublicLink) -> PublicLink:
    """Revoke `link` (PermissionDenied unless `may_revoke`). Revoking a revoked link keeps
    the first revocation's time and author."""
    if not may_revoke(by, link):
        raise PermissionDenied(REVOKE_MESSAGE)
    if link.revoked_at is None:
        link.revoked_at = timezone.now()
        link.revoked_by = by
        link.save(update_fields=["revoked_at", "revoked_by"])
    return link


def live_q(now: datetime | None = None) -> Q:
    """The condition on PublicLink of a link that is neither revoked nor expired."""
    return live_link_q(now)


def live_links(space: Space, *, created_by: AbstractBaseUser | None = None) -> QuerySet[PublicLink]:
    """The space's live links (all of them for its admins; `created_by` narrows to one
    member's own), newest first, with what the list page shows."""
    links = PublicLink.objects.filter(live_q(), space=space)
    if created_by is not None:
        links = links.filter(created_by_id=created_by.pk)
    return links.select_related("version__document", "answer", "created_by").order_by(
        "-created_at", "-id"
    )


def earlier_links(space: Space) -> QuerySet[PublicLink]:
    """The links that turning the space's public links back on could bring back: its live
    links while public links are off (none while they are on), newest first. Which of them
    do come back is the admin's choice (`spaces.services.space_update`'s `revive_links`);
    the rest are revoked."""
    if space.public_links_enabled:
        return PublicLink.objects.none()
    return live_links(space)


def link_resolve(token: str) -> PublicLink | None:
    """The live link whose token is `token`, with its target loaded, or None — the same None
    for an unknown, revoked or expired token, a space that turned public links off, and a
    target no longer in the space. One indexed lookup by the token column."""
    if not isinstance(token, str) or not TOKEN_RE.fullmatch(token):
        return None
    link = (
        PublicLink.objects.filter(live_q(), token=token, space__public_links_enabled=True)
        .select_related("space", "version__document", "answer")
        .first()
    )
    if link is None or not hmac.compare_digest(link.token, token):
        return None
    if link.kind == PublicLink.Kind.VERSION:
        document = link.version.document if link.version is not None else None
        if (
            document is None
            or document.space_id != link.space_id
            or document.deleted_at is not None
            or document.kind != Document.Kind.NOTE
        ):
            return None
    elif link.answer is None or link.answer.space_id != link.space_id:
        return None
    return link


def public_url(link: PublicLink) -> str:
    """The path of the link's public page."""
    return reverse("public-link", kwargs={"token": link.token})


# --- verifying an answer's evidence on opening ------------------------------------------------


@dataclass(frozen=True)
class PublicSupport:
    """One evidence span of a published answer as its public page shows it.

    `verified` is False when the span could not be verified now (its version deleted, moved
    out of the space, changed behind lode's back, or the span no longer at its place); then
    `quote` is "" and nothing of the stored copy is shown. `superseded_by` is the number of
    the note's newer version when the cited one is no longer current; `source_changed` says
    the current version's file no longer holds the indexed bytes (the stored text is still
    what was cited, and is shown, labelled)."""

    verified: bool
    quote: str = ""
    document_title: str = ""
    version_number: int | None = None
    version_created_at: datetime | None = None
    superseded_by: int | None = None
    source_changed: bool = False


@dataclass(frozen=True)
class PublicClaim:
    """A published claim with its spans verified now; `hidden` when it cites a document the
    public page no longer shows (`text` is then `NO_LONGER_VISIBLE`, `supports` empty)."""

    text: str
    supports: tuple[PublicSupport, ...]
    hidden: bool = False

    @property
    def all_verified(self) -> bool:
        return all(s.verified for s in self.supports)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _verify(support: dict, versions: dict[int, Version], heads: dict[int, int]) -> PublicSupport:
    try:
        version = versions.get(int(support["version_id"]))
        start, end = int(support["start"]), int(support["end"])
        quoted = str(support["quoted_span"])
        document_id = int(support["document_id"])
    except (KeyError, TypeError, ValueError):
        return PublicSupport(verified=False)
    if version is None or version.document_id != document_id:
        return PublicSupport(verified=False)
    body = version.body
    if _sha256(body) != version.sha256:
        return PublicSupport(verified=False)
    if not (0 <= start < end <= len(body)) or nfc_collapsed(body[start:end]) != nfc_collapsed(
        quoted
    ):
        return PublicSupport(verified=False)
    document = version.document
    head_number = heads.get(document.head_id) if document.head_id else None
    superseded_by = head_number if document.head_id != version.pk else None
    source_changed = False
    if superseded_by is None and version.source_path:
        check = check_source(
            version.source_path, version.source_sha256, limit=source_size_limit(document)
        )
        source_changed = not check.matches
    return PublicSupport(
        verified=True,
        quote=body[start:end],
        document_title=document.title,
        version_number=version.number,
        version_created_at=version.created_at,
        superseded_by=superseded_by,
        source_changed=source_changed,
    )


def verified_claims(link: PublicLink) -> list[PublicClaim]:
    """The published answer's claims, each evidence span verified now (see the module
    docstring). A claim citing any document that is gone, in the trash or no longer in the
    link's space is hidden whole; only versions of live documents in the link's space are
    read, so a span citing anything else could never verify either."""
    answer = link.answer.answer or {}
    claims = [c for c in answer.get("claims", []) if isinstance(c, dict)]
    supports = [s for c in claims for s in c.get("support", []) if isinstance(s, dict)]
    wanted = set()
    for support in supports:
        try:
            wanted.add(int(support["version_id"]))
        except (KeyError, TypeError, ValueError):
            continue
    versions = {
        v.pk: v
        for v in Version.objects.filter(
            pk__in=wanted,
            document__space_id=link.space_id,
            document__deleted_at__isnull=True,
        ).select_related("document")
    }
    head_ids = {v.document.head_id for v in versions.values() if v.document.head_id}
    heads = dict(Version.objects.filter(pk__in=head_ids).values_list("pk", "number"))
    citable = citable_in_public_link(
        link.space_id,
        version_ids=[s.get("version_id") for s in supports],
        document_ids=[s.get("document_id") for s in supports],
    )
    shown: list[PublicClaim] = []
    for claim in claims:
        cited = [s for s in claim.get("support", []) if isinstance(s, dict)]
        if not citable.shows(
            versions=[s.get("version_id") for s in cited],
            documents=[s.get("document_id") for s in cited],
        ):
            shown.append(PublicClaim(text=NO_LONGER_VISIBLE, supports=(), hidden=True))
            continue
        shown.append(
            PublicClaim(
                text=str(claim.get("text", "")),
                supports=tuple(_verify(s, versions, heads) for s in cited),
            )
        )
    return shown


def version_intact(version: Version) -> bool:
    """Whether a published version's stored body still hashes to its SHA-256 (a body
    changed behind lode's back is not shown)."""
    return _sha256(version.body) == version.sha256


# --- rate limit and view log ------------------------------------------------------------------


def now() -> float:
    """Wall-clock seconds, shared between processes through the cache (tests replace it)."""
    return time.time()


def _address_key(address: str) -> str:
    return f"{CACHE_PREFIX}:ip:{client_hash(address)}"


def view_refusal(address: str) -> int | None:
    """Count one opening from `address`; None when it may be served, else the seconds after
    which to try again (for `Retry-After`).

    Per address: at most `LODE_PUBLIC_LINK_VIEWS_PER_MINUTE` openings in any 60 seconds (a
    sliding window, the login throttle's shape). In total: at most
    `LODE_PUBLIC_LINK_TOTAL_VIEWS_PER_MINUTE` in each clock minute (a counter, so it stays
    cheap under a flood of addresses). Refused openings are counted too: a client hammering
    a refused address stays refused. Unknown tokens count like real ones, so guessing tokens
    is throttled the same way as reading."""
    per_address = getattr(settings, "LODE_PUBLIC_LINK_VIEWS_PER_MINUTE", DEFAULT_VIEWS_PER_MINUTE)
    total = getattr(
        settings, "LODE_PUBLIC_LINK_TOTAL_VIEWS_PER_MINUTE", DEFAULT_TOTAL_VIEWS_PER_MINUTE
    )
    at = now()
    minute = int(at // WINDOW_SECONDS)
    total_key = f"{CACHE_PREFIX}:total:{minute}"
    cache.add(total_key, 0, timeout=int(WINDOW_SECONDS) * 2)
    try:
        total_count = cache.incr(total_key)
    except ValueError:  # expired between add and incr
        cache.set(total_key, 1, timeout=int(WINDOW_SECONDS) * 2)
        total_count = 1
    key = _address_key(address)
    recent = sorted(t for t in (cache.get(key) or []) if at - WINDOW_SECONDS < t <= at)
    recent = [*recent, at][-per_address - 1 :]
    cache.set(key, recent, timeout=int(WINDOW_SECONDS) + 60)
    waits = []
    if len(recent) > per_address:
        waits.append(recent[-per_address - 1] + WINDOW_SECONDS - at)
    if total_count > total:
        waits.append((minute + 1) * WINDOW_SECONDS - at)
    if not waits:
        return None
    return max(1, math.ceil(max(waits)))


def client_hash(address: str) -> str:
    """HMAC-SHA256 of the client address keyed by SECRET_KEY: views from one address can be
    told apart from others', and the address cannot be read back (nor, without the key,
    found by hashing every address)."""
    return hmac.new(
        settings.SECRET_KEY.encode("utf-8"), address.encode("utf-8"), hashlib.sha256
    ).hexdigest()


def record_view(link: PublicLink, client_address: str) -> PublicLinkView:
    """Log one served opening of `link` (time and keyed address hash)."""
    return PublicLinkView.objects.create(link=link, client_hash=client_hash(client_address))
