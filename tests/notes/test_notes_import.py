"""The import services: `lode_load_beir` writes through
`notes.services.notes_import`, the bulk form of the same services a note saved on its page
goes through, and must write exactly what the one-note path (`note_import` →
`note_create`) writes, and exactly what the loader wrote before it was moved onto them.
"""

from __future__ import annotations

import hashlib
import json
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django_tasks_db.models import DBTaskResult

from notes import services
from notes.management.commands.lode_load_beir import load_beir, read_corpus
from notes.models import Document
from retrieval.index.sync import sync_pending_vectors
from retrieval.index.vectors import pending_count
from retrieval.models import Passage
from tests import factories

FIXTURE = Path(__file__).parents[1] / "fixtures" / "beir-mini"
# The content digest (`digest` below) of loading FIXTURE, computed with the loader of commit
# 0a0b34a, before it wrote through the services (it had its own bulk mirror of them).
# Change it only with a deliberate change of what a note or its passages are.
DIGEST_BEFORE_THE_SERVICES = "f0f126c3d21d61af9d154b5eaf7b683d189416322f506279e10a0cbe6bf8221f"
# What identifies a passage's content, plus whether it is at head.
PASSAGE_FIELDS = (*factories.PASSAGE_FIELDS, "is_head")

pytestmark = pytest.mark.django_db


def load(owner: User, corpus: Path = FIXTURE, **options: object) -> str:
    out = StringIO()
    call_command(
        "lode_load_beir",
        str(corpus),
        user=owner.username,
        no_progress=True,
        stdout=out,
        stderr=StringIO(),
        **options,
    )
    return out.getvalue()


def written(owner: User) -> dict[str, list]:
    """Every note of `owner` by key: the document, its head version, its passages and tags
    — everything but ids and times."""
    result = {}
    for document in Document.objects.filter(owner=owner).select_related("head"):
        head = document.head
        result[document.external_key] = [
            document.kind,
            document.title,
            document.trust_tier,
            document.source_name,
            head.number,
            head.title,
            head.sha256,
            head.byte_size,
            head.extractor_name,
            head.extractor_version,
            head.source_path,
            head.source_sha256,
            head.created_by_id == owner.pk,
            [
                list(row)
                for row in Passage.objects.filter(version=head)
                .order_by("position")
                .values_list(*PASSAGE_FIELDS)
            ],
            sorted([row.tag.name, row.from_body] for row in document.documenttag_set.all()),
        ]
    return result


def digest(rows: dict[str, list]) -> str:
    ordered = [[key, *rows[key]] for key in sorted(rows)]
    return hashlib.sha256(json.dumps(ordered, sort_keys=True).encode()).hexdigest()


def test_the_loader_writes_what_it_wrote_before(alice):
    load(alice)
    rows = written(alice)
    assert len(rows) == 20
    assert sum(len(row[13]) for row in rows.values()) == 21  # passages
    assert digest(rows) == DIGEST_BEFORE_THE_SERVICES


def test_the_bulk_path_writes_what_the_one_note_path_writes(alice, bob, tmp_path):
    corpus = tmp_path / "tagged"
    corpus.mkdir()
    lines = (FIXTURE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    # Hashtags too, so the bulk tag rows are compared with `_set_tags`'s.
    lines.append(json.dumps({"_id": "t1", "title": "Tagged", "text": "About #ops and #Dev."}))
    lines.append(json.dumps({"_id": "t2", "title": "", "text": "Only #ops here."}))
    (corpus / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")

    load(alice, corpus, source="mini")
    for note in read_corpus(corpus / "corpus.jsonl", []):
        imported = services.note_import(owner=bob, note=note, source_name="mini")
        assert imported.outcome == "created"

    bulk, one_by_one = written(alice), written(bob)
    assert len(bulk) == 22
    assert bulk == one_by_one
    assert bulk["beir:t1"][-1] == [["dev", True], ["ops", True]]


def test_notes_import_reports_each_note_in_order(alice):
    first = services.NoteImport("k1", "One", "The first body.")
    kept = services.NoteImport("k2", "Two", "The second body.")
    services.notes_import(owner=alice, notes=[first, kept])
    deleted = Document.objects.get(owner=alice, external_key="k2")
    Document.objects.filter(pk=deleted.pk).update(deleted_at=deleted.created_at)

    results = services.notes_import(
        owner=alice,
        notes=[
            services.NoteImport("k1", "One", "The first body, edited."),
            services.NoteImport("bad", "Bad", "a\x00b"),
            kept,
            services.NoteImport("k3", "Three", "A new one."),
        ],
        source_name="again",
    )
    assert [(r.external_key, r.outcome) for r in results] == [
        ("k1", "updated"),
        ("bad", None),
        ("k2", None),
        ("k3", "created"),
    ]
    assert results[1].reason == "Notes cannot contain NUL characters."
    assert results[2].reason.startswith("the note was deleted in lode")
    assert all(r.passages == 1 for r in results if r.outcome in ("updated", "created"))
    edited = Document.objects.get(owner=alice, external_key="k1")
    assert (edited.head.number, edited.source_name) == (2, "again")
    assert services.notes_import(owner=alice, notes=[first])[0].outcome == "updated"
    assert services.notes_import(owner=alice, notes=[first])[0].outcome == "unchanged"


def test_notes_import_refuses_a_key_twice_in_one_batch(alice):
    twice = [services.NoteImport("k", "A", "a"), services.NoteImport("k", "B", "b")]
    with pytest.raises(ValueError, match="twice"):
        services.notes_import(owner=alice, notes=twice)
    assert not Document.objects.filter(owner=alice).exists()


def test_the_loader_queues_the_vector_work_of_the_notes_it_creates(
    alice, private_vectors, django_capture_on_commit_callbacks
):
    """A note saved on its page queues its embedding when it commits; the bulk loader
    queues one sweep of the pending passages instead — once, however many batches it
    writes, and not for a re-run that creates nothing."""

    def sweeps() -> int:
        return DBTaskResult.objects.filter(task_path=sync_pending_vectors.module_path).count()

    with django_capture_on_commit_callbacks(execute=True):
        stats = load_beir(FIXTURE, owner=alice, progress=False, batch_size=7)  # 3 batches
    assert stats.created == 20
    assert Passage.objects.filter(document__owner=alice, is_head=True).count() == 21
    assert pending_count() == 21  # nothing embedded yet: the sweep has work to do
    assert sweeps() == 1
    DBTaskResult.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True):
        load(alice)
    assert sweeps() == 0
