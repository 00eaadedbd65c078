"""Sources over the API: the same selectors and tasks as the pages.

    GET  /api/sources                 the sources of your spaces (`?space=ID`: of one), each
                                      with its last scan; a space you are not in is 404
    POST /api/sources/{id}/refresh    queue a refresh (202) of a source of a space where you
                                      are an editor or admin (a viewer: 403; a space you are
                                      not in: 404); 409 when it is disabled or already being
                                      scanned
    POST /api/sources/{id}/webhook    push-triggered refresh, signed (externals/webhooks.py)

The first two use the API's normal authentication (session with CSRF, or a bearer token).
The webhook has `auth=None`: senders (a git hook, CI) hold the source's secret, not a user's
session, so the HMAC over the raw body is its authentication. Ninja views are exempt from
Django's CSRF middleware and only its session auth checks CSRF, so it needs nothing else.
"""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError

from externals import selectors
from externals.folders import source_scan_refusal
from externals.models import ScanRecord, Source
from externals.pipeline import scan_running_since
from externals.webhooks import receive_webhook
from lode_site.errors import NO_ACCESS
from lode_site.ids import DbId
from notes.api import SPACE_PARAM
from retrieval import eligibility
from spaces.models import Role

router = Router(tags=["sources"])


class ScanOut(Schema):
    id: int
    status: str
    trigger: str
    started_at: datetime
    finished_at: datetime | None
    items_seen: int
    items_new: int
    items_changed: int
    items_unchanged: int
    items_pruned: int
    items_failed: int
    items_rejected: int
    items_skipped: int
    error: str


class SourceOut(Schema):
    id: int
    space: int = Field(description="The id of the space the source (and its externals) is in.")
    name: str
    kind: str
    location: str
    trust_tier: str
    no_egress: bool
    enabled: bool
    stale_after_days: int
    has_webhook_secret: bool
    external_count: int
    last_scan: ScanOut | None


class QueuedOut(Schema):
    """A queued (or, for the webhook, duplicate) refresh: always names its source; the
    webhook also echoes the sender's delivery id."""

    status: str
    source_id: int
    delivery: str | None = None


class DetailOut(Schema):
    detail: str


def _scan_out(scan: ScanRecord | None) -> ScanOut | None:
    if scan is None:
        return None
    return ScanOut(
        id=scan.pk,
        status=scan.status,
        trigger=scan.trigger,
        started_at=scan.started_at,
        finished_at=scan.finished_at,
        items_seen=scan.items_seen,
        items_new=scan.items_new,
        items_changed=scan.items_changed,
        items_unchanged=scan.items_unchanged,
        items_pruned=scan.items_pruned,
        items_failed=scan.items_failed,
        items_rejected=scan.items_rejected,
        items_skipped=scan.items_skipped,
        error=scan.error,
    )


def _source_out(source: Source, scan: ScanRecord | None) -> SourceOut:
    return SourceOut(
        id=source.pk,
        space=source.space_id,
        name=source.name,
        kind=source.kind,
        location=source.location,
        trust_tier=source.trust_tier,
        no_egress=source.no_egress,
        enabled=source.enabled,
        stale_after_days=source.stale_after_days,
        # Never the secret itself: it is shown once, when created or rotated.
        has_webhook_secret=bool(source.webhook_secret),
        external_count=getattr(source, "external_count", 0),
        last_scan=_scan_out(scan),
    )


@router.get("/", response={200: list[SourceOut], 404: DetailOut})
def list_sources(request: HttpRequest, space: DbId | None = SPACE_PARAM):
    try:
        sources = list(selectors.sources_for_user(request.auth, space_id=space))
    except eligibility.NoAccess:
        raise HttpError(404, NO_ACCESS) from None
    scans = selectors.latest_scans(sources)
    return [_source_out(source, scans.get(source.pk)) for source in sources]


@router.post(
    "/{id:source_id}/refresh",
    response={202: QueuedOut, 403: DetailOut, 404: DetailOut, 409: DetailOut},
)
def refresh_source(request: HttpRequest, source_id: DbId):
    try:
        source = selectors.source_get(request.auth, source_id)
    except Source.DoesNotExist:
        raise HttpError(404, NO_ACCESS) from None
    if not selectors.may(request.auth, source.space_id, Role.EDITOR):
        raise PermissionDenied("Only editors and admins of this space can scan its sources.")
    if not source.enabled:
        return Status(409, DetailOut(detail="The source is disabled."))
    refusal = source_scan_refusal(source)
    if refusal:  # a folder outside the roots now, or gone: say so instead of queueing
        return Status(409, DetailOut(detail=refusal))
    from externals.tasks import enqueue_refresh

    since = scan_running_since(source)
    if since is not None:  # one scan per source at a time
        return Status(
            409,
            DetailOut(
                detail=f"Already scanning: a scan of this source has been running since "
                f"{since.isoformat()}; refresh again once it has finished."
            ),
        )

    enqueue_refresh(source, "manual")
    return Status(202, QueuedOut(status="queued", source_id=source.pk))


# The webhook's headers, declared so a client (and a schema-driven test) knows a delivery
# needs them: a missing or malformed timestamp is the 400, a missing signature the 401.
_WEBHOOK_HEADERS = {
    "parameters": [
        {
            "name": "X-Lode-Timestamp",
            "in": "header",
            "required": True,
            "description": "Unix seconds when the delivery was signed (within five minutes).",
            "schema": {"type": "string", "pattern": "^[0-9]{1,12}$"},
        },
        {
            "name": "X-Lode-Signature",
            "in": "header",
            "required": True,
            "description": 'sha256=<hex HMAC-SHA256(secret, "<timestamp>." + raw body)>',
            "schema": {"type": "string"},
        },
        {
            "name": "X-Lode-Delivery",
            "in": "header",
            "required": False,
            "description": "The sender's id for this delivery (repeats are answered 200).",
            "schema": {"type": "string"},
        },
    ]
}


@router.post(
    "/{source_id}/webhook",
    auth=None,
    openapi_extra=_WEBHOOK_HEADERS,
    url_name="source_webhook",  # the source page shows this URL (externals/views.py)
    response={
        200: QueuedOut,
        202: QueuedOut,
        400: DetailOut,
        401: DetailOut,
        409: DetailOut,
        413: DetailOut,
        429: DetailOut,
        503: DetailOut,
    },
)
def source_webhook(request: HttpRequest, source_id: int, response: HttpResponse):
    """Signed push: `X-Lode-Timestamp: <unix seconds>` and `X-Lode-Signature:
    sha256=<hex HMAC-SHA256(secret, "<timestamp>." + raw body)>`, optional `X-Lode-Delivery`
    id. 202 queued (or folded into a refresh already queued), 200 duplicate delivery (the
    same id, or the same signature under any id); 401 for an unknown source or a bad
    signature (the same answer), a missing signature or a timestamp more than five minutes
    off; 400 missing timestamp; 409 disabled source (correctly signed); 413 body too large;
    429 a refused delivery from an address with too many refused deliveries (see
    `Retry-After`; correctly signed deliveries are still taken)."""
    outcome = receive_webhook(request, source_id)
    for name, value in outcome.headers.items():
        response[name] = value
    return Status(outcome.status, outcome.body)
