"""Push-triggered re-indexing (issue 6, item 6): a signed POST asks for a source's refresh.

    POST /api/sources/<id>/webhook
    X-Lode-Signature: sha256=<hex HMAC-SHA256 of the raw body, keyed by the source's secret>
    X-Lode-Delivery:  <the sender's delivery id>  (optional; makes retries idempotent)

The endpoint is unauthenticated except for the signature, so the signature is the whole
check and every request leaves a `WebhookDelivery` row (accepted or not, with the reason and
remote address) for audit. Answers:

- 404: no such source, or the source is disabled (the same answer either way; someone
  else's source is indistinguishable from a missing one until the signature is checked);
- 413: the body is larger than `LODE_WEBHOOK_MAX_BODY_BYTES` (read no further);
- 401: the signature is missing or wrong, or the source has no secret (a warning is logged);
- 400: a delivery id longer than the column allows (it would be truncated into a collision);
- 200 `{"status": "duplicate"}`: the delivery id was already accepted — nothing is queued,
  so a sender retrying after a timeout does not queue a second refresh;
- 202 `{"status": "queued"}`: a refresh was queued (`externals.tasks.enqueue_refresh`,
  trigger "webhook").

The signature covers the body only, as GitHub's does: the delivery id is for idempotency of
honest retries, not replay protection (a captured request can be replayed with a new id, and
at worst queues another refresh of content the sender could read anyway).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpRequest

from externals.models import Source, WebhookDelivery

logger = logging.getLogger("lode.webhooks")

SIGNATURE_HEADER = "X-Lode-Signature"
DELIVERY_HEADER = "X-Lode-Delivery"
SIGNATURE_PREFIX = "sha256="
# A push only needs to say "something changed"; the refresh reads the source itself.
DELIVERY_ID_MAX = WebhookDelivery._meta.get_field("delivery_id").max_length
REMOTE_ADDR_MAX = WebhookDelivery._meta.get_field("remote_addr").max_length


@dataclass(frozen=True)
class WebhookOutcome:
    """What to answer: the HTTP status and a small JSON body."""

    status: int
    body: dict[str, object] = field(default_factory=dict)


def max_body_bytes() -> int:
    return settings.LODE_WEBHOOK_MAX_BODY_BYTES


def sign(secret: str, body: bytes) -> str:
    """The `X-Lode-Signature` value a sender puts on `body` (also what tests send)."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_PREFIX}{digest}"


def signature_valid(secret: str, body: bytes, header: str) -> bool:
    """Constant-time check of `header` against the body's HMAC; an empty secret never
    verifies (a source without a secret cannot be pushed to)."""
    if not secret or not header.startswith(SIGNATURE_PREFIX):
        return False
    return hmac.compare_digest(sign(secret, body).encode(), header.strip().encode())


def _record(
    source: Source, *, delivery_id: str, remote_addr: str, reason: str, accepted: bool = False
) -> WebhookDelivery:
    return WebhookDelivery.objects.create(
        source=source,
        delivery_id=delivery_id[:DELIVERY_ID_MAX],
        remote_addr=remote_addr[:REMOTE_ADDR_MAX],
        reason=reason,
        accepted=accepted,
    )


def _refuse(
    source: Source, status: int, reason: str, *, delivery_id: str, remote_addr: str
) -> WebhookOutcome:
    _record(source, delivery_id=delivery_id, remote_addr=remote_addr, reason=reason)
    return WebhookOutcome(status, {"detail": reason})


def _content_length(request: HttpRequest) -> int:
    try:
        return max(int(request.META.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return 0


def receive_webhook(request: HttpRequest, source_id: int) -> WebhookOutcome:
    """Check one push delivery and, if it is good and new, queue the source's refresh.

    Takes the request itself because the protocol is its raw body and two headers; the
    endpoint only turns the outcome into a response.
    """
    remote_addr = request.META.get("REMOTE_ADDR", "") or ""
    delivery_id = (request.headers.get(DELIVERY_HEADER) or "").strip()
    source = Source.objects.filter(pk=source_id).first()
    if source is None:
        return WebhookOutcome(404, {"detail": "Not Found"})
    meta = {"delivery_id": delivery_id, "remote_addr": remote_addr}
    if not source.enabled:
        _record(source, reason="source disabled", **meta)
        return WebhookOutcome(404, {"detail": "Not Found"})
    # Refuse on the declared length before reading anything; Django's stream never yields
    # more than CONTENT_LENGTH, so the check bounds what `request.body` reads.
    limit = max_body_bytes()
    if _content_length(request) > limit:
        return _refuse(source, 413, f"body larger than {limit} bytes", **meta)
    body = request.body
    signature = request.headers.get(SIGNATURE_HEADER) or ""
    if not signature_valid(source.webhook_secret, body, signature):
        reason = "missing signature" if not signature else "bad signature"
        if not source.webhook_secret:
            reason = "source has no webhook secret"
        logger.warning(
            "webhook for source %s refused: %s (delivery %r from %s)",
            source.pk,
            reason,
            delivery_id,
            remote_addr,
        )
        return _refuse(source, 401, reason, **meta)
    if len(delivery_id) > DELIVERY_ID_MAX:
        return _refuse(source, 400, f"delivery id longer than {DELIVERY_ID_MAX}", **meta)
    if delivery_id and _already_accepted(source, delivery_id):
        _record(source, reason="duplicate delivery", **meta)
        return WebhookOutcome(200, {"status": "duplicate", "delivery": delivery_id})
    try:
        with transaction.atomic():
            accepted = _record(source, reason="refresh queued", accepted=True, **meta)
    except IntegrityError:  # the same id accepted concurrently: the other request queued it
        _record(source, reason="duplicate delivery", **meta)
        return WebhookOutcome(200, {"status": "duplicate", "delivery": delivery_id})
    from externals.tasks import enqueue_refresh  # lazily: the task module imports the pipeline

    try:
        enqueue_refresh(source, "webhook")
    except Exception:
        # Nothing was queued: forget the acceptance so the sender's retry (same id) is
        # taken, and say so with a status senders retry on.
        logger.exception("could not queue the webhook refresh of source %s", source.pk)
        WebhookDelivery.objects.filter(pk=accepted.pk).update(
            accepted=False, reason="could not queue the refresh"
        )
        return WebhookOutcome(503, {"detail": "could not queue the refresh; retry later"})
    return WebhookOutcome(202, {"status": "queued", "delivery": delivery_id})


def _already_accepted(source: Source, delivery_id: str) -> bool:
    return WebhookDelivery.objects.filter(
        source=source, delivery_id=delivery_id, accepted=True
    ).exists()
