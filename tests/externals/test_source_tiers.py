"""A source carries an external tier only: "inferred" is an edge's tier, refused on edit and
lowered to a stale external snapshot for sources saved before the rule."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError

from externals import services
from notes.models import Document, TrustTier

lowering = importlib.import_module("externals.migrations.0013_source_tier_not_inferred")


def test_a_source_cannot_take_an_edge_or_note_tier(source) -> None:
    for tier in (TrustTier.INFERRED, TrustTier.NOTE, TrustTier.ANNOTATION):
        with pytest.raises(ValidationError) as refused:
            services.source_update(
                source=source,
                name=source.name,
                trust_tier=tier.value,
                no_egress=source.no_egress,
                stale_after_days=source.stale_after_days,
                enabled=source.enabled,
            )
        assert "trust_tier" in refused.value.message_dict
    assert set(services.SOURCE_TIER_VALUES) == {
        TrustTier.EXTERNAL_CURRENT.value,
        TrustTier.EXTERNAL_STALE.value,
    }


def test_inferred_sources_and_their_externals_become_stale_snapshots(source, external, alice_note):
    type(source).objects.filter(pk=source.pk).update(trust_tier="inferred")
    Document.objects.filter(pk=external.pk).update(trust_tier="inferred")
    lowering.lower_inferred_sources(apps, None)
    source.refresh_from_db()
    external.refresh_from_db()
    alice_note.refresh_from_db()
    assert source.trust_tier == external.trust_tier == TrustTier.EXTERNAL_STALE
    assert alice_note.trust_tier == TrustTier.NOTE
