"""Staleness has one rule: the badge on the pages (`services.is_stale`)
and the trust tier the refresh gives documents (`pipeline.refresh_staleness`, one query)
must agree on every snapshot, at the boundary too, on SQLite and PostgreSQL alike.

The rule (docs/features.md: a snapshot "becomes a stale external snapshot when not confirmed for the
source's stale age"): a snapshot is last confirmed at the later of its fetch and the last
scan that found the source unchanged; it is stale when that is strictly before
now − `stale_after_days` (confirmed exactly at the cutoff: still current).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from externals import pipeline, services
from externals.models import Source, SourceItem, confirmed_before, stale_cutoff
from notes.models import Document, TrustTier, Version
from tests.factories import make_source, make_source_external

NOW = datetime(2026, 12, 1, 12, 0, 0, 500_000, tzinfo=UTC)
DAYS = 30
CUTOFF = NOW - timedelta(days=DAYS)
TICK = timedelta(microseconds=1)

pytestmark = pytest.mark.django_db


@pytest.fixture
def frozen_now(monkeypatch) -> datetime:
    monkeypatch.setattr(timezone, "now", lambda: NOW)
    return NOW


@pytest.fixture
def source(alice) -> Source:
    return make_source(alice, stale_after_days=DAYS)


def external(
    source: Source, *, fetched: datetime, verified: datetime | None, path: str = "a.md"
) -> Document:
    """A mirrored external whose head was fetched at `fetched` and last found unchanged by
    a scan at `verified` (None: never re-checked)."""
    document = make_source_external(source, path=path)
    Version.objects.filter(pk=document.head_id).update(created_at=fetched)
    SourceItem.objects.filter(document=document).update(verified_at=verified)
    document.refresh_from_db()
    return document


def both_views(source: Source, document: Document) -> tuple[bool, bool]:
    """(stale on the page, stale by the tier the refresh gives it)."""
    pipeline.refresh_staleness(source)
    document.refresh_from_db()
    page = services.is_stale(document.head, source)
    return page, document.trust_tier == TrustTier.EXTERNAL_STALE


def test_a_recent_fetch_after_an_old_verification_is_current_in_both(source, frozen_now):
    """The disagreement found in review: the head was fetched yesterday, but the item's last
    verification is older than the stale age. The page called it current (the later of the
    two); the refresh query looked at `verified_at` alone and ranked it stale."""
    document = external(source, fetched=NOW - timedelta(days=1), verified=NOW - timedelta(days=40))
    assert both_views(source, document) == (False, False)


CASES = {
    # (fetched, verified): stale?
    "fetched at the cutoff, never verified": (CUTOFF, None, False),
    "fetched just before the cutoff, never verified": (CUTOFF - TICK, None, True),
    "fetched long ago, verified at the cutoff": (CUTOFF - timedelta(days=9), CUTOFF, False),
    "fetched long ago, verified just before": (CUTOFF - timedelta(days=9), CUTOFF - TICK, True),
    "fetched just before, verified just before": (CUTOFF - TICK, CUTOFF - TICK, True),
    "fetched at the cutoff, verified long before": (CUTOFF, CUTOFF - timedelta(days=9), False),
    "fetched and verified today": (NOW, NOW, False),
}


@pytest.mark.parametrize("case", CASES)
def test_page_and_ranking_agree_at_the_boundary(source, frozen_now, case):
    fetched, verified, stale = CASES[case]
    document = external(source, fetched=fetched, verified=verified)
    assert both_views(source, document) == (stale, stale)
    assert confirmed_before(fetched, verified, stale_cutoff(DAYS)) is stale


def test_the_query_and_the_python_rule_select_the_same_items(source, frozen_now):
    """All cases at once through the one queryset method: exactly the stale ones."""
    documents = {}
    for n, (case, (fetched, verified, _)) in enumerate(CASES.items()):
        documents[case] = external(source, fetched=fetched, verified=verified, path=f"{n}.md")
    selected = set(
        SourceItem.objects.confirmed_before(CUTOFF).values_list("document_id", flat=True)
    )
    assert selected == {documents[case].pk for case, (_, _, stale) in CASES.items() if stale}


def test_a_superseded_snapshot_is_judged_by_its_own_fetch(source, frozen_now):
    """A scan's verification confirms the head only: an old snapshot stays stale."""
    document = make_source_external(source, bodies=("first\n", "second\n"))
    old = document.versions.get(number=1)
    Version.objects.filter(pk=old.pk).update(created_at=CUTOFF - TICK)
    SourceItem.objects.filter(document=document).update(verified_at=NOW)
    old.refresh_from_db()
    assert services.is_stale(old, source)
    assert not services.is_stale(document.head, source)


def test_each_source_applies_its_own_stale_age(alice, frozen_now):
    strict = make_source(alice, name="strict", stale_after_days=1)
    lenient = make_source(alice, name="lenient", stale_after_days=60)
    fetched = NOW - timedelta(days=2)
    for source in (strict, lenient):
        document = make_source_external(source)
        Version.objects.filter(pk=document.head_id).update(created_at=fetched)
        document.refresh_from_db()
        pipeline.refresh_staleness(source)
        document.refresh_from_db()
        expected = source is strict
        assert services.is_stale(document.head, source) is expected
        assert (document.trust_tier == TrustTier.EXTERNAL_STALE) is expected


def test_a_source_of_another_tier_keeps_its_tier_but_shows_its_age(alice, frozen_now):
    """The refresh only moves externals between "current" and "stale"; a source whose
    owner chose another tier keeps it, while the page still says how old the snapshot is."""
    source = make_source(alice, stale_after_days=DAYS, trust_tier=TrustTier.NOTE)
    document = make_source_external(source)
    Version.objects.filter(pk=document.head_id).update(created_at=CUTOFF - TICK)
    document.refresh_from_db()
    assert pipeline.refresh_staleness(source) == 0
    document.refresh_from_db()
    assert document.trust_tier == TrustTier.NOTE
    assert services.is_stale(document.head, source)
