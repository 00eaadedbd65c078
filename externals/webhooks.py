"""Push-triggered re-indexing: a signed POST asks for a source's refresh.

    POST /api/sources/<id>/webhook
    X-Lode-Timestamp: <unix seconds when the request was signed>
    X-Lode-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>." + the raw body, keyed by
                      the source's secret>
    X-Lode-Delivery:  <the sender's delivery id>  (optional; makes retries idempotent)

The timestamp is inside the signature and must be within `TIMESTAMP_TOLERANCE_SECONDS` of the
server's clock, and within that window each accepted signature is remembered (its SHA-256 on
the `WebhookDelivery` row, in the database rather than the evictable cache), so a captured
request replayed later, under any delivery id or none, queues nothing.

The endpoint is unauthenticated except for the signature. So that source ids cannot be
enumerated, an unknown source, a source without a secret and a wrong signature get the same
answer (`REFUSED`) after the same HMAC work; checks that do not depend on the source (body
size, timestamp, a missing signature) come first and say precisely what is wrong. The answers
are listed on `receive_webhook`.

Refused deliveries are logged on the `lode.webhooks` logger and counted per client address
(`lode_site.throttle.client_address`) in the Django cache, writing no database row, so a flood
of bad requests costs no writes. Accepted deliveries are recorded as `WebhookDelivery` rows
(idempotency and audit); a duplicate is acknowledged without a row.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.http import HttpRequest

from externals.models import Source, WebhookDelivery
from lode_site.throttle import client_address

logger = logging.getLogger("lode.webhooks")

SIGNATURE_HEADER = "X-Lode-Signature"
TIMESTAMP_HEADER = "X-Lode-Timestamp"
DELIVERY_HEADER = "X-Lode-Delivery"
SIGNATURE_PREFIX = "sha256="
TIMESTAMP_TOLERANCE_SECONDS = 300
# Refused deliveries are counted per client address in windows of this length.
FAILURE_WINDOW_SECONDS = 300
DELIVERY_ID_MAX = WebhookDelivery._meta.get_field("delivery_id").max_length
REMOTE_ADDR_MAX = WebhookDelivery._meta.get_field("remote_addr").max_length
# Compared against when there is no secret to check (unknown source, none set), so that
# answer costs the same HMAC work as a wrong signature.
_NO_SECRET = "lode-webhook-no-secret"
REFUSED_DETAIL = "unknown source or bad signature"


@dataclass(frozen=True)
class WebhookOutcome:
    """What to answer: the HTTP status, a small JSON body and any extra headers."""

    status: int
    body: dict[str, object] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


def max_body_bytes() -> int:
    return settings.LODE_WEBHOOK_MAX_BODY_BYTES


def signed_payload(timestamp: int | str, body: bytes) -> bytes:
    """What the HMAC covers: the timestamp, a dot, then the raw body."""
    return f"{timestamp}.".encode() + body


def sign(secret: str, body: bytes, timestamp: int | str) -> str:
    """The `X-Lode-Signature` value a sender puts on `body` sent with `X-Lode-Timestamp:
    timestamp` (also what tests send)."""
    digest = hmac.new(secret.encode(), signed_payload(timestamp, body), hashlib.sha256)
    return f"{SIGNATURE_PREFIX}{digest.hexdigest()}"


def signature_valid(secret: str, body: bytes, timestamp: int | str, header: str) -> bool:
    """Constant-time check of `header` against the HMAC of timestamp and body; an empty
    secret never verifies (a source without a secret cannot be pushed to)."""
    expected = sign(secret or _NO_SECRET, body, timestamp).encode()
    matches = hmac.compare_digest(expected, header.strip().encode())
    return bool(secret) and header.startswith(SIGNATURE_PREFIX) and matches


def _content_length(request: HttpRequest) -> int:
    try:
        return max(int(request.META.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return 0


def _parse_timestamp(raw: str) -> int | None:
    raw = raw.strip()
    if not raw.isascii() or not raw.isdigit() or len(raw) > 12:
        return None
    return int(raw)


# --- refused deliveries: counted, logged, rate-limited --------------------------------------


def _failure_key(remote_addr: str, now: float) -> str:
    window = int(now // FAILURE_WINDOW_SECONDS)
    address = hashlib.sha256(remote_addr.encode()).hexdigest()[:32]  # any characters, fixed size
    return f"lode:webhook-failures:{address}:{window}"


def _retry_after(now: float) -> int:
    return int(FAILURE_WINDOW_SECONDS - now % FAILURE_WINDOW_SECONDS) + 1


def failures_exhausted(remote_addr: str, now: float | None = None) -> bool:
    """Whether `remote_addr` used up its refused deliveries for the current window."""
    now = time.time() if now is None else now
    count = cache.get(_failure_key(remote_addr, now), 0)
    return count >= settings.LODE_WEBHOOK_MAX_FAILURES


def _count_failure(remote_addr: str, now: float) -> int:
    # get + set is not atomic across processes: under a concurrent flood a few more
    # failures than the limit may get through, which is all the limit has to guarantee.
    key = _failure_key(remote_addr, now)
    count = cache.get(key, 0) + 1
    cache.set(key, count, timeout=FAILURE_WINDOW_SECONDS + 5)
    return count


def _refuse(
    status: int,
    detail: str,
    *,
    reason: str,
    source_id: int,
    delivery_id: str,
    remote_addr: str,
    now: float,
) -> WebhookOutcome:
    """Answer a refused delivery: log why (once the limit trips, say so and stop logging
    for the window), count it against the address, write nothing to the database."""
    count = _count_failure(remote_addr, now)
    limit = settings.LODE_WEBHOOK_MAX_FAILURES
    if count <= limit:
        logger.warning(
            "webhook for source %s refused: %s (delivery %r from %s)",
            source_id,
            reason,
            delivery_id[:DELIVERY_ID_MAX],
            remote_addr,
        )
    if count == limit:
        logger.warning(
            "webhook deliveries from %s refused for the next %s s: %s failed in this window",
            remote_addr,
            _retry_after(now),
            count,
        )
    return WebhookOutcome(status, {"detail": detail})


def _refuse_unsigned(
    status: int,
    detail: str,
    *,
    reason: str,
    source_id: int,
    delivery_id: str,
    remote_addr: str,
    now: float,
) -> WebhookOutcome:
    """Refuse a delivery that is not correctly signed: 429 once its address has used up
    its refused deliveries for the window (nothing more logged or counted), else
    `_refuse`."""
    if failures_exhausted(remote_addr, now):
        return WebhookOutcome(
            429,
            {"detail": "too many refused webhook deliveries from this address; retry later"},
            {"Retry-After": str(_retry_after(now))},
        )
    return _refuse(
        status,
        detail,
        reason=reason,
        source_id=source_id,
        delivery_id=delivery_id,
        remote_addr=remote_addr,
        now=now,
    )


def receive_webhook(request: HttpRequest, source_id: int) -> WebhookOutcome:
    """Check one push delivery and, if it is good and new, queue the source's refresh.

    Takes the request itself because the protocol is its raw body and three headers; the
    endpoint only turns the outcome into a response. Answers:

    - 429: a refused delivery from an address that had `LODE_WEBHOOK_MAX_FAILURES` refused
      deliveries in the current five-minute window (`Retry-After` says when it ends). The
      signature is checked first (an HMAC over at most 1 MB is cheap), so a correctly signed
      delivery is taken even from an address that junk traffic has used up — behind the TLS
      proxy every sender may share one;
    - 413: the body is larger than `LODE_WEBHOOK_MAX_BODY_BYTES` (read no further);
    - 400: no or malformed `X-Lode-Timestamp`, or a delivery id longer than the column allows;
    - 401: the timestamp is outside the window, the signature is missing, or `REFUSED`;
    - 409: correctly signed, but the source is disabled;
    - 200 `{"status": "duplicate"}`: the delivery id, or the signature, was already accepted —
      nothing is queued, so neither a sender retrying after a timeout nor a replay queues a
      second refresh;
    - 202 `{"status": "queued"}`: a refresh was queued (`externals.tasks.enqueue_refresh`,
      trigger "webhook"), or one already pending for the source will cover this push (at most
      one pending refresh per source).

    Both carry `source_id` (the source the delivery was signed for, as `POST .../refresh`
    answers) and `delivery` (the sender's id, "" when none was sent). Only a correctly signed
    delivery gets them, so they tell a sender nothing it did not already hold the secret for.
    """
    now = time.time()
    remote_addr = client_address(request)[:REMOTE_ADDR_MAX]
    delivery_id = (request.headers.get(DELIVERY_HEADER) or "").strip()
    meta = {"source_id": source_id, "delivery_id": delivery_id, "remote_addr": remote_addr}
    # Only failures are rate-limited (`_refuse_unsigned`), once they are known to be
    # failures: a correctly signed delivery passes whatever its address did before.

    # Checks that do not depend on the source: precise messages reveal nothing about it.
    # Refuse on the declared length before reading anything; Django's stream never yields
    # more than CONTENT_LENGTH, so the check bounds what `request.body` reads.
    limit = max_body_bytes()
    if _content_length(request) > limit:
        message = f"body larger than {limit} bytes"
        return _refuse_unsigned(413, message, reason=message, now=now, **meta)
    timestamp = _parse_timestamp(request.headers.get(TIMESTAMP_HEADER) or "")
    if timestamp is None:
        message = f"{TIMESTAMP_HEADER} is missing or not a whole number of unix seconds"
        return _refuse_unsigned(400, message, reason=message, now=now, **meta)
    if abs(now - timestamp) > TIMESTAMP_TOLERANCE_SECONDS:
        message = (
            f"{TIMESTAMP_HEADER} is more than {TIMESTAMP_TOLERANCE_SECONDS} seconds from the "
            "server's clock; sign each delivery when sending it"
        )
        reason = "timestamp outside the window"
        return _refuse_unsigned(401, message, reason=reason, now=now, **meta)
    signature = request.headers.get(SIGNATURE_HEADER) or ""
    if not signature:
        message = f"missing {SIGNATURE_HEADER}"
        return _refuse_unsigned(401, message, reason="missing signature", now=now, **meta)

    body = request.body
    source = Source.objects.filter(pk=source_id).first()
    secret = source.webhook_secret if source is not None else ""
    # Always one HMAC, so an unknown id takes as long to refuse as a wrong signature.
    valid = signature_valid(secret, body, timestamp, signature)
    if source is None or not valid:
        if source is None:
            reason = "unknown source"
        elif not secret:
            reason = "source has no webhook secret"
        else:
            reason = "bad signature"
        return _refuse_unsigned(401, REFUSED_DETAIL, reason=reason, now=now, **meta)
    if not source.enabled:
        return _refuse(409, "the source is disabled", reason="source disabled", now=now, **meta)
    if len(delivery_id) > DELIVERY_ID_MAX:
        message = f"delivery id longer than {DELIVERY_ID_MAX}"
        return _refuse(400, message, reason=message, now=now, **meta)
    digest = signature_digest(signature)
    return _accept(source, delivery_id=delivery_id, remote_addr=remote_addr, digest=digest)


def signature_digest(signature: str) -> str:
    """What is remembered of an accepted signature (fixed size, and not the signature)."""
    return hashlib.sha256(signature.strip().encode()).hexdigest()


def _accept(source: Source, *, delivery_id: str, remote_addr: str, digest: str) -> WebhookOutcome:
    """A correctly signed delivery: acknowledge a duplicate id or signature, else record
    and queue."""
    meta = {"delivery_id": delivery_id, "remote_addr": remote_addr, "digest": digest}
    answer = {"source_id": source.pk, "delivery": delivery_id}
    duplicate = WebhookOutcome(200, {"status": "duplicate", **answer})
    # A duplicate writes no row either: a captured request replayed within its five
    # minutes must not be able to fill the table.
    if _already_accepted(source, delivery_id, digest):
        logger.info("webhook delivery %r for source %s: duplicate", delivery_id, source.pk)
        return duplicate
    try:
        with transaction.atomic():
            accepted = _record(source, reason="refresh queued", accepted=True, **meta)
    except IntegrityError:  # the same id or signature accepted concurrently: already queued
        return duplicate
    from externals.tasks import enqueue_refresh  # lazily: the task module imports the pipeline

    try:
        # False when a refresh of the source is pending already: it runs after this push
        # and covers it, so the delivery is answered as queued all the same.
        enqueue_refresh(source, "webhook")
    except Exception:
        # Nothing was queued: forget the acceptance so the sender's retry (same id) is
        # taken, and say so with a status senders retry on.
        logger.exception("could not queue the webhook refresh of source %s", source.pk)
        WebhookDelivery.objects.filter(pk=accepted.pk).update(
            accepted=False, reason="could not queue the refresh"
        )
        return WebhookOutcome(503, {"detail": "could not queue the refresh; retry later"})
    return WebhookOutcome(202, {"status": "queued", **answer})


def _record(
    source: Source,
    *,
    delivery_id: str,
    remote_addr: str,
    digest: str,
    reason: str,
    accepted: bool = False,
) -> WebhookDelivery:
    return WebhookDelivery.objects.create(
        source=source,
        delivery_id=delivery_id[:DELIVERY_ID_MAX],
        remote_addr=remote_addr[:REMOTE_ADDR_MAX],
        signature_digest=digest,
        reason=reason,
        accepted=accepted,
    )


def _already_accepted(source: Source, delivery_id: str, digest: str) -> bool:
    """Whether this delivery id (if any) or this signature was accepted for the source.
    The id is the sender's (not signed); the signature is what a replay cannot change."""
    same = Q(signature_digest=digest)
    if delivery_id:
        same |= Q(delivery_id=delivery_id)
    return WebhookDelivery.objects.filter(same, source=source, accepted=True).exists()
