"""Fixtures the answer-layer tests share: three operations notes whose questions test
abstention and answering with the real extractive answerer, the deploy runbook, and a tiny
entailment model."""

from __future__ import annotations

from pathlib import Path

import pytest

from notes import services
from notes.models import Document
from tests.factories import RUNBOOK, build_tiny_cross_encoder

OPS_SYNC = (
    "# Ops sync, 2026-09-15\n\n"
    "Attendees: Priya, Mei, Daniel.\n\n"
    "## Backups\n\n"
    "Backup alerts went to email only, so nobody saw the failure on Sunday.\n\n"
    "## Decisions\n\n"
    "- The nightly backups moved from 02:00 to 03:30 UTC, after the reindex job.\n"
    "- Backup alerts page the on-call engineer from now on.\n"
)


DB_RUNBOOK = (
    "# Database runbook\n\n"
    "## Failover\n\n"
    "Fail over only when the incident commander approves it in the incident channel.\n\n"
    "### Promote the replica\n\n"
    "1. Stop writes on the primary and fence it.\n"
    "2. Run `pg_ctl promote` on the standby host.\n"
    "3. Point PgBouncer at the new primary and reload it.\n"
)


BACKUP_RUNBOOK = (
    "# Backups and restore\n\n"
    "Backups are kept for 30 days in the S3 bucket. Restore drills run every quarter, and the "
    "restore job runs from the ops host.\n"
)


@pytest.fixture
def ops_notes(alice) -> dict[str, Document]:
    return {
        "sync": services.note_create(owner=alice, title="Ops sync 2026-09-15", body=OPS_SYNC),
        "db": services.note_create(owner=alice, title="Database runbook", body=DB_RUNBOOK),
        "backups": services.note_create(owner=alice, title="Backup runbook", body=BACKUP_RUNBOOK),
    }


@pytest.fixture(scope="module")
def tiny_entailment_dir(tmp_path_factory) -> Path:
    """A tiny single-logit cross-encoder: the logit is ~40 when the pair contains the word
    "certificate", ~0 otherwise — so sigmoid ≈ 1 or ≈ 0.5."""
    folder = tmp_path_factory.mktemp("tiny-entailment")
    build_tiny_cross_encoder(folder)
    return folder


@pytest.fixture
def runbook(alice) -> Document:
    """The deploy runbook note (RUNBOOK); a module that needs another runbook overrides it."""
    return services.note_create(owner=alice, title="Deploy runbook", body=RUNBOOK)
