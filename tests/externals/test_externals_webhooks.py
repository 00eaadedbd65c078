"""Push-triggered re-indexing (`POST /api/sources/<id>/webhook`, externals/webhooks.py) and
the sources API: signatures good, bad and missing, the signed timestamp and its window,
unknown and disabled sources answered alike, replayed deliveries, oversized bodies, one
user's secret against another's source, refused deliveries rate-limited and logged without
database rows, and that a good delivery queues exactly one refresh."""

from __future__ import annotations

import json
import logging
import time
from types import SimpleNamespace

import pytest
from django.test import Client

from externals import webhooks
from externals.models import ScanRecord, Source, WebhookDelivery
from externals.webhooks import REFUSED_DETAIL, sign

pytestmark = pytest.mark.django_db

ALICE_SECRET = "alice-secret-0123456789abcdef"
BOB_SECRET = "bob-secret-fedcba9876543210"
BODY = json.dumps({"ref": "refs/heads/main", "after": "abc123"}).encode()


@pytest.fixture
def queued(monkeypatch) -> list[tuple[int, str]]:
    """Every `enqueue_refresh(source, trigger)` call, instead of queuing a task."""
    from externals import tasks

    calls: list[tuple[int, str]] = []
    monkeypatch.setattr(
        tasks,
        "enqueue_refresh",
        lambda source, trigger: calls.append((source.pk, trigger)),
        raising=False,
    )
    return calls


@pytest.fixture
def alice_source(alice, tmp_path) -> Source:
    return Source.objects.create(
        owner=alice,
        name="Alice docs",
        kind=Source.Kind.FOLDER,
        location=str(tmp_path),
        webhook_secret=ALICE_SECRET,
    )


@pytest.fixture
def bob_source(bob, tmp_path) -> Source:
    return Source.objects.create(
        owner=bob,
        name="Bob docs",
        kind=Source.Kind.FOLDER,
        location=str(tmp_path),
        webhook_secret=BOB_SECRET,
    )


def push(
    source_id: int,
    body: bytes = BODY,
    *,
    secret: str | None = ALICE_SECRET,
    signature: str | None = None,
    delivery: str | None = "d-1",
    timestamp: int | str | None = None,
    client: Client | None = None,
    remote_addr: str = "203.0.113.7",
):
    """POST a delivery the way a sender does, signed now; `secret=None` sends no signature,
    `timestamp=""` no timestamp."""
    if timestamp is None:
        timestamp = int(time.time())
    headers: dict[str, str] = {}
    if timestamp != "":
        headers["X-Lode-Timestamp"] = str(timestamp)
    if signature is not None:
        headers["X-Lode-Signature"] = signature
    elif secret is not None:
        headers["X-Lode-Signature"] = sign(secret, body, timestamp)
    if delivery is not None:
        headers["X-Lode-Delivery"] = delivery
    # CSRF checks on: the webhook is exempt because the signature authenticates it.
    client = client or Client(enforce_csrf_checks=True)
    return client.post(
        f"/api/sources/{source_id}/webhook",
        body,
        content_type="application/json",
        headers=headers,
        REMOTE_ADDR=remote_addr,
    )


def deliveries(source: Source) -> list[tuple[str, bool, str, str]]:
    return [
        (d.delivery_id, d.accepted, d.reason, d.remote_addr)
        for d in WebhookDelivery.objects.filter(source=source).order_by("id")
    ]


# --- the signature -----------------------------------------------------------------------


def test_sign_matches_a_reference_hmac():
    # printf '1700000000.hello' | openssl dgst -sha256 -hmac 'key'
    assert sign("key", b"hello", 1700000000) == (
        "sha256=4d583a269f4f276a3fa80ff31b5a01879a848096983222a17893d198418939aa"
    )
    good = sign("key", b"hello", 1700000000)
    assert webhooks.signature_valid("key", b"hello", 1700000000, good)
    assert not webhooks.signature_valid("key", b"hello!", 1700000000, good)
    assert not webhooks.signature_valid("key", b"hello", 1700000001, good)  # timestamp signed
    assert not webhooks.signature_valid("", b"hello", 1, sign("", b"hello", 1))
    assert not webhooks.signature_valid("key", b"hello", 1700000000, good[len("sha256=") :])


def test_good_delivery_queues_one_refresh(alice_source, queued):
    response = push(alice_source.pk)
    assert response.status_code == 202
    assert response.json() == {"status": "queued", "source_id": alice_source.pk, "delivery": "d-1"}
    assert queued == [(alice_source.pk, "webhook")]
    assert deliveries(alice_source) == [("d-1", True, "refresh queued", "203.0.113.7")]


def test_bad_signature_is_401_logged_without_a_row(alice_source, queued, caplog):
    with caplog.at_level(logging.WARNING, logger="lode.webhooks"):
        response = push(alice_source.pk, signature="sha256=" + "0" * 64)
    assert response.status_code == 401
    assert response.json() == {"detail": REFUSED_DETAIL}
    assert queued == []
    assert deliveries(alice_source) == []
    assert any(
        "bad signature" in r.getMessage() and "203.0.113.7" in r.getMessage()
        for r in caplog.records
    )


def test_signature_over_a_different_body_is_refused(alice_source, queued):
    timestamp = int(time.time())
    response = push(
        alice_source.pk, signature=sign(ALICE_SECRET, BODY + b" ", timestamp), timestamp=timestamp
    )
    assert response.status_code == 401
    assert queued == []


def test_missing_signature_is_401(alice_source, queued, caplog):
    with caplog.at_level(logging.WARNING, logger="lode.webhooks"):
        response = push(alice_source.pk, secret=None)
    assert response.status_code == 401
    assert response.json() == {"detail": "missing X-Lode-Signature"}
    assert deliveries(alice_source) == []
    assert queued == []
    assert any("missing signature" in r.getMessage() for r in caplog.records)


def test_missing_or_malformed_timestamp_is_400(alice_source, queued):
    for bad in ("", "yesterday", "1.5", "-5", "١٢٣"):
        response = push(alice_source.pk, timestamp=bad, signature="sha256=00")
        assert response.status_code == 400, bad
        assert "X-Lode-Timestamp" in response.json()["detail"]
    assert queued == []


def test_a_timestamp_outside_five_minutes_is_refused(alice_source, queued):
    """A captured delivery cannot be replayed later, even under a new delivery id."""
    old = int(time.time()) - 301
    response = push(alice_source.pk, timestamp=old, delivery="new-id")  # correctly signed
    assert response.status_code == 401
    assert "more than 300 seconds" in response.json()["detail"]
    future = int(time.time()) + 301
    assert push(alice_source.pk, timestamp=future, delivery="other").status_code == 401
    # Inside the window it is taken.
    assert push(alice_source.pk, timestamp=int(time.time()) - 250).status_code == 202
    assert queued == [(alice_source.pk, "webhook")]


def test_a_captured_signature_cannot_be_moved_to_a_fresh_timestamp(alice_source, queued):
    captured_at = int(time.time()) - 400
    captured = sign(ALICE_SECRET, BODY, captured_at)
    response = push(alice_source.pk, signature=captured, timestamp=int(time.time()), delivery="n")
    assert response.status_code == 401
    assert response.json() == {"detail": REFUSED_DETAIL}
    assert queued == []


def test_source_without_secret_answers_like_an_unknown_source(alice_source, queued):
    Source.objects.filter(pk=alice_source.pk).update(webhook_secret="")
    response = push(alice_source.pk, secret="")
    unknown = push(alice_source.pk + 1000, secret="")
    assert (response.status_code, response.json()) == (unknown.status_code, unknown.json())
    assert response.status_code == 401
    assert queued == []


def test_unknown_source_and_bad_signature_get_the_same_answer(alice_source, queued):
    """Ids cannot be enumerated: same status, same body, same headers that matter."""
    unknown = push(alice_source.pk + 1000)
    bad = push(alice_source.pk, secret="not-the-secret")
    assert unknown.status_code == bad.status_code == 401
    assert unknown.content == bad.content
    assert unknown.json() == {"detail": REFUSED_DETAIL}
    assert unknown.get("Content-Type") == bad.get("Content-Type")
    assert queued == []
    assert WebhookDelivery.objects.count() == 0


def test_disabled_source_is_409_only_when_correctly_signed(alice_source, queued):
    Source.objects.filter(pk=alice_source.pk).update(enabled=False)
    response = push(alice_source.pk)
    assert response.status_code == 409
    assert response.json() == {"detail": "the source is disabled"}
    # Without the secret a disabled source looks like any other refusal.
    assert push(alice_source.pk, secret="guess").json() == {"detail": REFUSED_DETAIL}
    assert queued == []
    assert deliveries(alice_source) == []


def test_alices_secret_cannot_trigger_bobs_source(alice_source, bob_source, queued):
    response = push(bob_source.pk, secret=ALICE_SECRET)
    assert response.status_code == 401
    assert queued == []
    assert deliveries(bob_source) == []
    assert deliveries(alice_source) == []
    # And bob's own secret works on his own source only.
    assert push(bob_source.pk, secret=BOB_SECRET).status_code == 202
    assert push(alice_source.pk, secret=BOB_SECRET, delivery="d-2").status_code == 401
    assert queued == [(bob_source.pk, "webhook")]


def test_replayed_delivery_is_acknowledged_and_ignored(alice_source, queued):
    assert push(alice_source.pk, delivery="abc").status_code == 202
    again = push(alice_source.pk, delivery="abc")
    assert again.status_code == 200
    assert again.json()["status"] == "duplicate"
    assert queued == [(alice_source.pk, "webhook")]
    # A new id on a new push (signed anew: another body or timestamp) is taken.
    assert push(alice_source.pk, BODY + b"\n", delivery="abd").status_code == 202
    assert len(queued) == 2
    # Duplicates write no row (a replay cannot fill the table).
    assert [row[:3] for row in deliveries(alice_source)] == [
        ("abc", True, "refresh queued"),
        ("abd", True, "refresh queued"),
    ]


def test_a_refused_delivery_id_can_still_be_accepted_later(alice_source, queued):
    assert push(alice_source.pk, delivery="x", signature="sha256=00").status_code == 401
    assert push(alice_source.pk, delivery="x").status_code == 202
    assert queued == [(alice_source.pk, "webhook")]


def test_a_replayed_signature_is_a_duplicate_without_an_id(alice_source, queued):
    """A delivery without an id still goes through the duplicate check, so a captured request
    replayed within its five minutes queues no second refresh."""
    timestamp = int(time.time())
    first = push(alice_source.pk, delivery=None, timestamp=timestamp)
    assert first.status_code == 202
    for _ in range(3):
        again = push(alice_source.pk, delivery=None, timestamp=timestamp)
        assert again.status_code == 200
        assert again.json()["status"] == "duplicate"
    assert queued == [(alice_source.pk, "webhook")]
    # Deliveries signed anew (another timestamp, another body) are new pushes.
    assert push(alice_source.pk, delivery=None, timestamp=timestamp - 1).status_code == 202
    assert push(alice_source.pk, BODY + b" ", delivery=None, timestamp=timestamp).status_code == 202
    assert len(queued) == 3
    assert WebhookDelivery.objects.filter(source=alice_source).count() == 3


def test_a_replay_under_a_new_delivery_id_is_a_duplicate(alice_source, queued):
    """The delivery id is not signed: an attacker can put any id on a captured request,
    and a new id queues no further refresh."""
    timestamp = int(time.time())
    assert push(alice_source.pk, delivery="orig", timestamp=timestamp).status_code == 202
    for n in range(3):
        replay = push(alice_source.pk, delivery=f"forged-{n}", timestamp=timestamp)
        assert replay.status_code == 200
        assert replay.json()["status"] == "duplicate"
    assert queued == [(alice_source.pk, "webhook")]
    assert [row[0] for row in deliveries(alice_source)] == ["orig"]


def test_the_signature_is_remembered_per_source(alice_source, bob_source, queued):
    """Two sources sharing a secret (and a sender signing the same body at the same second)
    are two pushes."""
    Source.objects.filter(pk=bob_source.pk).update(webhook_secret=ALICE_SECRET)
    timestamp = int(time.time())
    assert push(alice_source.pk, delivery=None, timestamp=timestamp).status_code == 202
    assert push(bob_source.pk, delivery=None, timestamp=timestamp).status_code == 202
    assert queued == [(alice_source.pk, "webhook"), (bob_source.pk, "webhook")]


def test_a_concurrent_replay_is_caught_by_the_signature_constraint(
    alice_source, queued, monkeypatch
):
    timestamp = int(time.time())
    assert push(alice_source.pk, delivery="a", timestamp=timestamp).status_code == 202
    monkeypatch.setattr(webhooks, "_already_accepted", lambda *args: False)
    response = push(alice_source.pk, delivery="b", timestamp=timestamp)
    assert response.status_code == 200
    assert response.json()["status"] == "duplicate"
    assert len(queued) == 1
    assert WebhookDelivery.objects.count() == 1


def test_overlong_delivery_id_is_400(alice_source, queued):
    response = push(alice_source.pk, delivery="x" * 201)
    assert response.status_code == 400
    assert queued == []


def test_oversized_body_is_413_without_checking_the_signature(alice_source, queued, settings):
    settings.LODE_WEBHOOK_MAX_BODY_BYTES = 64
    response = push(alice_source.pk, b"x" * 65)
    assert response.status_code == 413
    assert response.json() == {"detail": "body larger than 64 bytes"}
    assert queued == []
    assert deliveries(alice_source) == []
    assert push(alice_source.pk, b"x" * 64, delivery="d-2").status_code == 202


def test_refused_deliveries_are_rate_limited_per_address(alice_source, queued, settings, caplog):
    """300 bad requests write no audit rows, at most the limit of
    log lines plus one saying the address is cut off, then 429 for the rest of the window
    for refused deliveries; a correctly signed delivery from that address is still taken
    (before: 429, so junk traffic blocked the real sender)."""
    settings.LODE_WEBHOOK_MAX_FAILURES = 5
    with caplog.at_level(logging.WARNING, logger="lode.webhooks"):
        statuses = [
            push(alice_source.pk + (n % 3) * 1000, secret="wrong", delivery=f"b{n}").status_code
            for n in range(40)
        ]
    assert statuses[:5] == [401] * 5
    assert statuses[5:] == [429] * 35
    assert WebhookDelivery.objects.count() == 0
    warnings = [r for r in caplog.records if r.name == "lode.webhooks"]
    assert len(warnings) == 6
    assert "refused for the next" in warnings[-1].getMessage()
    limited = push(alice_source.pk, secret="still wrong", delivery="bad")
    assert limited.status_code == 429
    assert 0 < int(limited["Retry-After"]) <= webhooks.FAILURE_WINDOW_SECONDS + 1
    assert "too many" in limited.json()["detail"]
    assert push(alice_source.pk, secret=None).status_code == 429  # unsigned: refused too
    assert queued == []
    assert len([r for r in caplog.records if r.name == "lode.webhooks"]) == 6
    assert push(alice_source.pk, delivery="good").status_code == 202  # correctly signed
    assert queued == [(alice_source.pk, "webhook")]
    other = push(alice_source.pk, secret="wrong", delivery="x", remote_addr="198.51.100.9")
    assert other.status_code == 401


def test_the_failure_window_ends(alice_source, queued, settings, monkeypatch):
    settings.LODE_WEBHOOK_MAX_FAILURES = 2
    now = time.time()
    monkeypatch.setattr(webhooks.time, "time", lambda: now)
    for _ in range(2):
        push(alice_source.pk, secret="wrong", timestamp=int(now))
    assert push(alice_source.pk, secret="wrong", timestamp=int(now)).status_code == 429
    later = now + webhooks.FAILURE_WINDOW_SECONDS
    monkeypatch.setattr(webhooks.time, "time", lambda: later)
    assert push(alice_source.pk, secret="wrong", timestamp=int(later)).status_code == 401


def test_behind_the_tls_proxy_failures_are_counted_per_forwarded_address(
    alice_source, queued, settings
):
    """With LODE_HTTPS every delivery arrives from the proxy's address; the limit is kept
    per client (the last X-Forwarded-For entry, which the proxy appends), so one
    sender's junk never gets every other sender answered 429."""
    settings.LODE_HTTPS = True
    settings.LODE_WEBHOOK_MAX_FAILURES = 3
    proxy = {"remote_addr": "10.0.0.2"}
    junk = Client(HTTP_X_FORWARDED_FOR="198.51.100.66", secure=True)
    for _ in range(5):
        push(alice_source.pk, secret="wrong", client=junk, **proxy)
    assert push(alice_source.pk, secret="wrong", client=junk, **proxy).status_code == 429
    # A client that lies in the header cannot escape: the proxy's entry is the last one.
    liar = Client(HTTP_X_FORWARDED_FOR="203.0.113.1, 198.51.100.66", secure=True)
    assert push(alice_source.pk, secret="wrong", client=liar, **proxy).status_code == 429
    honest = Client(HTTP_X_FORWARDED_FOR="192.0.2.44", secure=True)
    assert push(alice_source.pk, secret="wrong", client=honest, **proxy).status_code == 401
    assert push(alice_source.pk, delivery="ok", client=honest, **proxy).status_code == 202
    assert deliveries(alice_source) == [("ok", True, "refresh queued", "192.0.2.44")]


def test_failure_to_queue_is_503_and_the_retry_is_taken(alice_source, monkeypatch):
    from externals import tasks

    calls = []

    def broken(source, trigger):
        calls.append(trigger)
        if len(calls) == 1:
            raise RuntimeError("queue down")

    monkeypatch.setattr(tasks, "enqueue_refresh", broken)
    assert push(alice_source.pk, delivery="r").status_code == 503
    assert push(alice_source.pk, delivery="r").status_code == 202
    assert calls == ["webhook", "webhook"]


def test_only_post(alice_source, queued):
    assert Client().get(f"/api/sources/{alice_source.pk}/webhook").status_code == 405
    assert queued == []


def test_good_delivery_puts_exactly_one_task_on_the_real_queue(alice_source, settings):
    """Through the real `enqueue_refresh` and the database task backend: one task row."""
    from django_tasks_db.models import DBTaskResult

    from externals.tasks import refresh_source

    before = DBTaskResult.objects.filter(task_path=refresh_source.module_path).count()
    assert push(alice_source.pk, delivery="q").status_code == 202
    assert push(alice_source.pk, delivery="q").status_code == 200
    assert push(alice_source.pk, signature="sha256=00", delivery="q2").status_code == 401
    tasks = DBTaskResult.objects.filter(task_path=refresh_source.module_path)
    assert tasks.count() == before + 1
    # Nothing was scanned in the request itself.
    assert not ScanRecord.objects.filter(source=alice_source).exists()


def test_pushes_for_a_source_with_a_refresh_pending_queue_no_more(alice_source, settings):
    """At most one pending refresh per source: a distinct push while one is pending queues
    no task (nor does a busy one re-queue itself)."""
    from django_tasks_db.models import DBTaskResult

    from externals.tasks import refresh_source

    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    tasks = DBTaskResult.objects.filter(task_path=refresh_source.module_path)
    before = tasks.count()
    for n in range(5):
        response = push(alice_source.pk, BODY + str(n).encode(), delivery=f"p{n}")
        assert response.status_code == 202
        assert response.json()["status"] == "queued"
    assert tasks.count() == before + 1
    assert WebhookDelivery.objects.filter(source=alice_source, accepted=True).count() == 5
    alice_source.refresh_from_db()
    assert alice_source.refresh_queued_at is not None
    # Once the pending refresh starts, the next push queues a new one.
    refresh_source.call(alice_source.pk, "webhook")
    alice_source.refresh_from_db()
    assert alice_source.refresh_queued_at is None
    assert push(alice_source.pk, BODY + b"later", delivery="p-later").status_code == 202
    assert tasks.count() == before + 2


def test_a_busy_retry_and_pushes_share_one_pending_refresh(alice_source, settings):
    from django_tasks_db.models import DBTaskResult

    from externals.pipeline import claim_scan
    from externals.tasks import refresh_source

    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    tasks = DBTaskResult.objects.filter(task_path=refresh_source.module_path)
    before = tasks.count()
    claim_scan(alice_source)  # a scan is running
    assert push(alice_source.pk, delivery="first").status_code == 202
    assert tasks.count() == before + 1
    # That refresh runs, finds the source busy and queues itself again (still one pending).
    assert refresh_source.call(alice_source.pk, "webhook")["status"] == "deferred"
    assert tasks.count() == before + 2
    assert push(alice_source.pk, BODY + b"x", delivery="during").status_code == 202
    assert tasks.count() == before + 2  # folded into the deferred retry
    # A busy run that finds a refresh queued meanwhile (by a push) does not re-queue.
    from externals import tasks as refresh_tasks

    outcome = refresh_tasks._retry_later(alice_source, "webhook", 0, "already running")
    assert outcome["status"] == "coalesced"
    assert tasks.count() == before + 2


def test_a_failed_enqueue_leaves_nothing_pending(alice_source, monkeypatch):
    from externals import tasks

    def broken(*args, **kwargs):
        raise RuntimeError("queue down")

    monkeypatch.setattr(tasks, "refresh_source", SimpleNamespace(enqueue=broken))
    assert push(alice_source.pk, delivery="r").status_code == 503
    alice_source.refresh_from_db()
    assert alice_source.refresh_queued_at is None


# --- the sources API ---------------------------------------------------------------------


def test_sources_list_is_scoped_and_never_shows_the_secret(
    alice_client, bob_client, alice_source, bob_source
):
    response = alice_client.get("/api/sources/")
    assert response.status_code == 200
    data = response.json()
    assert [s["id"] for s in data] == [alice_source.pk]
    assert data[0]["has_webhook_secret"] is True
    assert data[0]["last_scan"] is None
    assert ALICE_SECRET not in response.content.decode()
    assert [s["id"] for s in bob_client.get("/api/sources/").json()] == [bob_source.pk]
    assert Client().get("/api/sources/").status_code == 401


def test_sources_list_shows_the_last_scan(alice_client, alice_source):
    ScanRecord.objects.create(source=alice_source, status="failed", error="gone")
    latest = ScanRecord.objects.create(source=alice_source, status="ok", items_seen=3)
    scan = alice_client.get("/api/sources/").json()[0]["last_scan"]
    assert scan["id"] == latest.pk
    assert scan["status"] == "ok"
    assert scan["items_seen"] == 3


def test_refresh_is_owner_only(alice_client, bob_client, alice_source, queued):
    assert bob_client.post(f"/api/sources/{alice_source.pk}/refresh").status_code == 404
    assert Client().post(f"/api/sources/{alice_source.pk}/refresh").status_code == 401
    assert queued == []
    response = alice_client.post(f"/api/sources/{alice_source.pk}/refresh")
    assert response.status_code == 202
    assert response.json()["source_id"] == alice_source.pk
    assert queued == [(alice_source.pk, "manual")]


def test_refresh_of_a_disabled_source_is_409(alice_client, alice_source, queued):
    Source.objects.filter(pk=alice_source.pk).update(enabled=False)
    assert alice_client.post(f"/api/sources/{alice_source.pk}/refresh").status_code == 409
    assert queued == []


def test_refresh_with_session_needs_csrf(alice, alice_source, queued):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(f"/api/sources/{alice_source.pk}/refresh").status_code == 403
    assert queued == []


def test_concurrent_duplicate_is_caught_by_the_constraint(alice_source, queued, monkeypatch):
    """Two requests with one id racing past the look-up: the unique constraint on accepted
    ids lets only one queue a refresh."""
    WebhookDelivery.objects.create(
        source=alice_source, delivery_id="race", accepted=True, reason="refresh queued"
    )
    monkeypatch.setattr(webhooks, "_already_accepted", lambda *args: False)
    response = push(alice_source.pk, delivery="race")
    assert response.status_code == 200
    assert response.json()["status"] == "duplicate"
    assert WebhookDelivery.objects.count() == 1
    assert queued == []
    assert WebhookDelivery.objects.filter(delivery_id="race", accepted=True).count() == 1


def test_webhook_url_name_is_stable():
    from django.urls import reverse

    assert reverse("api:source_webhook", kwargs={"source_id": 7}) == "/api/sources/7/webhook"
