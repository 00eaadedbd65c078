"""The externals admin: staff only; sources' trust tier, no-egress, enabled and stale age are
editable (and reach the source's externals at once); the webhook secret is never rendered;
scan records, items, deliveries and snapshots are read-only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from externals.models import ScanRecord, Source, SourceItem, WebhookDelivery
from externals.pipeline import scan_source
from externals.services import SOURCE_TIER_VALUES
from notes.models import Document, TrustTier

pytestmark = pytest.mark.django_db

SECRET = "top-secret-webhook-key-do-not-render"


@pytest.fixture
def source(alice, tmp_path: Path) -> Source:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "guide.md").write_text("# Guide\n\nTurn the key twice.\n", encoding="utf-8")
    (root / ".env").write_text("TOKEN=abc\n", encoding="utf-8")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02" * 50)
    source = Source.objects.create(
        owner=alice,
        name="Alice docs",
        kind=Source.Kind.FOLDER,
        location=str(root),
        webhook_secret=SECRET,
    )
    scan_source(source)
    WebhookDelivery.objects.create(source=source, delivery_id="d-1", reason="bad signature")
    return source


ADMIN_PAGES = [
    "/admin/externals/source/",
    "/admin/externals/source/{source}/change/",
    "/admin/externals/source/snapshots/",
    "/admin/externals/scanrecord/",
    "/admin/externals/scanrecord/{scan}/change/",
    "/admin/externals/sourceitem/",
    "/admin/externals/sourceitem/{item}/change/",
    "/admin/externals/webhookdelivery/",
]


def _urls(source: Source) -> list[str]:
    ids = {
        "source": source.pk,
        "scan": source.scans.first().pk,
        "item": source.items.first().pk,
    }
    return [url.format(**ids) for url in ADMIN_PAGES]


def test_admin_pages_are_staff_only(source, alice_client):
    for url in _urls(source):
        response = alice_client.get(url)
        assert response.status_code == 302, url
        assert "/admin/login/" in response["Location"]
        assert Client().get(url).status_code == 302


def test_admin_pages_render_and_never_show_the_secret(source, staff_client):
    for url in _urls(source):
        response = staff_client.get(url)
        assert response.status_code == 200, url
        assert SECRET not in response.content.decode(), url
    change = staff_client.get(f"/admin/externals/source/{source.pk}/change/").content.decode()
    assert "webhook secret set" in change.lower()
    assert 'name="webhook_secret"' not in change


def test_changelist_shows_the_settings_and_last_scan(source, staff_client):
    page = staff_client.get("/admin/externals/source/").content.decode()
    assert "Alice docs" in page
    assert "Succeeded" in page  # the last scan's status
    assert f"snapshots/?source={source.pk}" in page


def test_scan_record_shows_rejected_and_skipped(source, staff_client):
    scan = source.scans.first()
    assert scan.items_rejected == 1 and scan.items_skipped == 1
    page = staff_client.get(f"/admin/externals/scanrecord/{scan.pk}/change/").content.decode()
    assert ".env" in page
    assert "blob.bin" in page


def test_editing_trust_and_no_egress_reaches_the_externals(source, staff_client):
    document = Document.objects.get(source_items__source=source)
    assert (document.trust_tier, document.no_egress) == (TrustTier.EXTERNAL_CURRENT, False)
    response = staff_client.post(
        f"/admin/externals/source/{source.pk}/change/",
        {
            "trust_tier": TrustTier.EXTERNAL_STALE,
            "no_egress": "on",
            "enabled": "",
            "stale_after_days": "7",
            # Not a form field: must be ignored.
            "webhook_secret": "attacker-chosen",
            "name": "Renamed",
            "location": "/etc",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    source.refresh_from_db()
    assert (source.trust_tier, source.no_egress, source.enabled, source.stale_after_days) == (
        TrustTier.EXTERNAL_STALE,
        True,
        False,
        7,
    )
    assert (source.webhook_secret, source.name, source.location.endswith("docs")) == (
        SECRET,
        "Alice docs",
        True,
    )
    document.refresh_from_db()
    assert (document.trust_tier, document.no_egress) == (TrustTier.EXTERNAL_STALE, True)


def test_sources_cannot_be_added_or_deleted_here(source, staff_client):
    assert staff_client.get("/admin/externals/source/add/").status_code == 403
    assert staff_client.get(f"/admin/externals/source/{source.pk}/delete/").status_code == 403


def test_records_are_read_only(source, staff_client):
    scan = source.scans.first()
    item = source.items.first()
    delivery = source.deliveries.first()
    for url in (
        f"/admin/externals/scanrecord/{scan.pk}/change/",
        f"/admin/externals/sourceitem/{item.pk}/change/",
        f"/admin/externals/webhookdelivery/{delivery.pk}/change/",
    ):
        assert (
            staff_client.post(url, {"status": "failed", "path": "x", "accepted": "on"}).status_code
            == 403
        )
        assert staff_client.get(url.replace("/change/", "/delete/")).status_code == 403
    assert ScanRecord.objects.get(pk=scan.pk).status == "ok"
    assert SourceItem.objects.get(pk=item.pk).path == item.path
    assert WebhookDelivery.objects.get(pk=delivery.pk).accepted is False
    for model in ("scanrecord", "sourceitem", "webhookdelivery"):
        assert staff_client.get(f"/admin/externals/{model}/add/").status_code == 403


def test_snapshots_list_external_versions_per_source(source, bob, tmp_path, staff_client):
    other_root = tmp_path / "other"
    other_root.mkdir()
    (other_root / "bob.md").write_text("# Bob\n\nBob's page.\n", encoding="utf-8")
    other = Source.objects.create(
        owner=bob, name="Bob docs", kind=Source.Kind.FOLDER, location=str(other_root)
    )
    scan_source(other)
    everything = staff_client.get("/admin/externals/source/snapshots/").content.decode()
    assert "guide" in everything.lower() and "bob" in everything.lower()
    mine = staff_client.get(f"/admin/externals/source/snapshots/?source={source.pk}")
    text = mine.content.decode()
    assert "Snapshots of Alice docs" in text
    assert "guide" in text.lower()
    assert "Bob&#x27;s" not in text and "bob.md" not in text
    version = Document.objects.get(source_items__source=source).head
    assert f"/admin/notes/version/{version.pk}/change/" in text


def test_the_trust_tier_offers_only_the_tiers_a_source_may_carry(source, staff_client):
    for url in (f"/admin/externals/source/{source.pk}/change/", "/admin/externals/source/"):
        page = staff_client.get(url).content.decode()
        offered = set(re.findall(r'<option value="([a-z_]+)"', page))
        tiers = {tier.value for tier in TrustTier}
        assert offered & tiers == set(SOURCE_TIER_VALUES), url
    listed = staff_client.get("/admin/externals/source/").content.decode()
    assert TrustTier.NOTE.label not in listed  # nor in the list's filter
    stale = staff_client.get("/admin/externals/source/?trust_tier__exact=external_stale")
    assert "Alice docs" not in stale.content.decode()


@pytest.mark.parametrize("tier", [TrustTier.NOTE, TrustTier.ANNOTATION, "made-up"])
def test_a_tier_a_source_may_not_carry_is_refused_and_nothing_changes(source, staff_client, tier):
    change = staff_client.post(
        f"/admin/externals/source/{source.pk}/change/",
        {"trust_tier": tier, "enabled": "on", "stale_after_days": "30"},
    )
    assert change.status_code == 200  # the form again, with its error
    assert "Select a valid choice" in change.content.decode()
    listed = staff_client.post(
        "/admin/externals/source/",
        {
            "form-TOTAL_FORMS": "1",
            "form-INITIAL_FORMS": "1",
            "form-0-id": str(source.pk),
            "form-0-trust_tier": tier,
            "form-0-enabled": "on",
            "_save": "Save",
        },
    )
    assert listed.status_code == 200
    source.refresh_from_db()
    assert source.trust_tier == TrustTier.EXTERNAL_CURRENT
    document = Document.objects.get(source_items__source=source)
    assert document.trust_tier == TrustTier.EXTERNAL_CURRENT


def test_webhook_deliveries_are_called_that(source, staff_client):
    page = staff_client.get("/admin/").content.decode()
    assert "Webhook deliveries" in page and "deliverys" not in page
