"""Health and repair of the graph's edges (`retrieval/index/edge_health.py`).

The shape of `test_index_health.py`: corrupt the derived edge index — delete edges, add a
bogus one, point one elsewhere, pin one to an old version, leave a deleted document's edges,
break `related` edges — see `index_health` and `lode_index health` report it, repair, and see
the stored edges be exactly what the head versions give, with the canonical digest unchanged
and a second repair changing nothing. No vectors: `related` edges are written directly here
(their computation from Chroma is tested in `test_related_edges.py`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from notes import services
from notes.models import Document, Version
from retrieval.index import edge_health
from retrieval.index.edges import derive_edges, edge_signature
from retrieval.index.health import index_health, repair_indexes
from retrieval.index.related import RELATED_RULE, RELATED_RULE_VERSION
from retrieval.models import Edge
from spaces import services as space_services
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def graph(alice) -> dict[str, Document]:
    """A small wiki: wiki links, a Markdown link to a note page, a missing link, a mention."""
    notes = {}
    notes["policy"] = factories.note(alice, "Backup Policy", "Snapshots are kept 35 days.")
    notes["team"] = factories.note(alice, "Team Heron", "Heron is on call this week.")
    notes["db"] = factories.note(
        alice,
        "Orders Database",
        "Backed up per [[Backup Policy]]; owned by [[Team Heron|Heron]]. See [[Nowhere Page]].",
    )
    notes["runbook"] = factories.note(
        alice,
        "Restore Runbook",
        f"Restore the [orders db](/notes/{notes['db'].pk}) first. The Backup Policy applies.",
    )
    services.note_update(
        document=notes["db"],
        user=alice,
        base_version_id=notes["db"].head_id,
        title="Orders Database",
        body="Backed up per [[Backup Policy]]; owned by [[Team Heron]]. See [[Nowhere Page]].",
    )
    for key, document in notes.items():
        notes[key] = Document.objects.get(pk=document.pk)
    return notes


def stored_signatures() -> Counter:
    return Counter(edge_signature(edge) for edge in Edge.objects.exclude(kind=Edge.Kind.RELATED))


def derived_signatures() -> Counter:
    return Counter(
        edge_signature(edge)
        for document in Document.objects.all()
        for edge in derive_edges(document)
    )


def run(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("lode_index", *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue()
    return 0, out.getvalue()


def related_edge(source: Document, target: Document, **fields) -> Edge:
    """A related edge as `related.py` writes it (current threshold, no manifest check needed:
    the basis names the active manifest only when one exists)."""
    from django.conf import settings

    from retrieval.index.edge_health import _related_basis

    values = dict(
        origin=source,
        kind=Edge.Kind.RELATED,
        from_document=source,
        from_version_id=source.head_id,
        to_document=target,
        rule=RELATED_RULE,
        rule_version=RELATED_RULE_VERSION,
        score=0.8,
        basis={
            "model": "test",
            "manifest": _related_basis()["manifest"],
            "threshold": float(settings.LODE_RELATED_THRESHOLD),
        },
    )
    values.update(fields)
    return Edge.objects.create(**values)


def check_detect_and_repair(
    corrupt: Callable[[], None], expected: str, finding: str, *, same_graph: bool = True
) -> None:
    """Corrupt → health reports it (`expected` in a problem, `finding` counted) → repair →
    the stored edges are exactly the derived set, canonical digest unchanged → a second
    repair changes nothing. `same_graph`: the corruption left the head versions alone, so
    the repaired figures equal the fresh ones."""
    fresh = index_health(vectors=False)
    assert fresh.healthy, fresh.problems
    assert fresh.edges.checked and fresh.edges.expected == fresh.edges.stored > 0
    assert stored_signatures() == derived_signatures()

    corrupt()
    damaged = index_health(vectors=False)
    assert not damaged.healthy
    assert any(expected in problem for problem in damaged.problems), damaged.problems
    assert getattr(damaged.edges, finding) > 0, damaged.edges
    assert damaged.canonical == fresh.canonical
    status, out = run("health", "--json", "--skip-vectors")
    assert status == 1
    data = json.loads(out)
    assert data["healthy"] is False and data["problems"] == damaged.problems
    assert data["edges"][finding] == getattr(damaged.edges, finding)
    status, out = run("health", "--skip-vectors")
    assert status == 1 and f"{finding.split('_')[-1]} {getattr(damaged.edges, finding)}" in out

    repaired = repair_indexes(vectors=False)
    assert repaired.before == damaged
    assert repaired.after.healthy, repaired.after.problems
    if same_graph:
        assert repaired.after.edges == fresh.edges
    assert repaired.canonical_unchanged
    assert repaired.after.canonical.digest == fresh.canonical.digest
    assert stored_signatures() == derived_signatures()

    again = repair_indexes(vectors=False)
    assert again.before == again.after == repaired.after
    assert again.edges.rederived == 0 and again.edges.related_removed == 0
    assert run("health", "--skip-vectors")[0] == 0


# --- declared and rule-inferred edges ----------------------------------------------------


def test_a_fresh_graph_is_healthy_and_counted(graph) -> None:
    report = index_health(vectors=False)
    assert report.healthy, report.problems
    edges = report.edges
    assert edges.stored == edges.expected == Edge.objects.count()
    assert edges.documents == Document.objects.count()
    assert (edges.missing, edges.extra, edges.altered, edges.drifted_documents) == (0, 0, 0, 0)
    kinds = set(Edge.objects.values_list("kind", flat=True))
    assert {Edge.Kind.LINKS_TO, Edge.Kind.MENTIONS} <= kinds
    rules = set(Edge.objects.values_list("rule", flat=True))
    assert {"wiki-link", "markdown-link", "title-mention"} <= rules
    status, out = run("health", "--skip-vectors")
    assert status == 0
    assert f"edges      {edges.stored} stored for {edges.documents} documents" in out


def test_deleted_edges_are_found_missing_and_rebuilt(graph) -> None:
    def corrupt() -> None:
        doomed = list(Edge.objects.filter(origin=graph["db"]).values_list("pk", flat=True)[:2])
        Edge.objects.filter(pk__in=doomed).delete()

    check_detect_and_repair(corrupt, "missing from the graph", "missing")


def test_a_bogus_edge_is_found_extra_and_removed(graph) -> None:
    def corrupt() -> None:
        Edge.objects.create(
            origin=graph["team"],
            kind=Edge.Kind.LINKS_TO,
            from_document=graph["team"],
            from_version_id=graph["team"].head_id,
            to_document=graph["policy"],
            target="Backup Policy",
            rule="wiki-link",
            rule_version="1",
            start=0,
            end=5,
        )

    check_detect_and_repair(corrupt, "not what any head version gives", "extra")


def test_an_altered_target_is_found_and_restored(graph) -> None:
    def corrupt() -> None:
        edge = Edge.objects.get(origin=graph["db"], to_document=graph["policy"])
        edge.to_document = graph["runbook"]
        edge.save()

    check_detect_and_repair(corrupt, "differ from what their link gives now", "altered")


def test_an_edge_pinned_to_an_old_version_is_found(graph) -> None:
    old = Version.objects.filter(document=graph["db"]).exclude(pk=graph["db"].head_id).get()

    def corrupt() -> None:
        Edge.objects.filter(origin=graph["db"]).update(from_version=old)

    check_detect_and_repair(corrupt, "differ from what their link gives now", "altered")


def test_edges_of_a_deleted_document_are_orphans(graph) -> None:
    """A deletion whose edge refresh never ran (a crash between the two): health finds the
    deleted document's edges and the links to it that should now be unresolved."""

    def corrupt() -> None:
        Document.objects.filter(pk=graph["db"].pk).update(deleted_at=timezone.now())

    check_detect_and_repair(corrupt, "not what any head version gives", "extra", same_graph=False)
    assert not Edge.objects.filter(origin=graph["db"]).exists()
    link = Edge.objects.get(origin=graph["runbook"], kind=Edge.Kind.LINKS_TO)
    assert link.resolution == Edge.Resolution.MISSING


def test_examples_name_what_drifted(graph) -> None:
    Edge.objects.filter(origin=graph["db"], to_document=graph["team"]).delete()
    report = index_health(vectors=False).edges
    assert report.missing == 1 and report.drifted_documents == 1
    assert report.examples["drifted_documents"] == [graph["db"].pk]
    [missing] = report.examples["missing"]
    assert f"{graph['db'].pk} links_to {graph['team'].pk} (wiki-link @" in missing


def test_health_reads_in_batches(graph, monkeypatch) -> None:
    """Documents are derived `BATCH` at a time; the result does not depend on the size."""
    whole = index_health(vectors=False).edges
    monkeypatch.setattr(edge_health, "BATCH", 1)
    monkeypatch.setattr(edge_health, "RELATED_BATCH", 1)
    related_edge(graph["policy"], graph["team"])
    related_edge(graph["team"], graph["policy"])
    small = index_health(vectors=False).edges
    assert small.documents == whole.documents and small.stored == whole.stored
    assert small.related == 2 and small.related_invalid == 0


def test_skip_edges_leaves_the_graph_out(graph) -> None:
    Edge.objects.filter(origin=graph["db"]).delete()
    report = index_health(vectors=False, edges=False)
    assert report.healthy and not report.edges.checked
    status, out = run("health", "--skip-vectors", "--skip-edges")
    assert status == 0 and "edges      not checked (--skip-edges)" in out
    repaired = repair_indexes(vectors=False, edges=False)
    assert not repaired.edges.attempted
    assert not Edge.objects.filter(origin=graph["db"]).exists()


# --- related edges -----------------------------------------------------------------------


def test_valid_related_edges_are_healthy(graph) -> None:
    related_edge(graph["policy"], graph["db"])
    report = index_health(vectors=False)
    assert report.healthy, report.problems
    assert report.edges.related == 1


@pytest.mark.parametrize(
    "breakage",
    ["deleted target", "old version", "other space", "self", "duplicate", "origin mismatch"],
)
def test_invalid_related_edges_are_found_and_removed(graph, alice, breakage) -> None:
    keep = related_edge(graph["policy"], graph["team"])
    old_db_version = (
        Version.objects.filter(document=graph["db"]).exclude(pk=graph["db"].head_id).get()
    )
    ops = space_services.space_create(by=alice, name="Ops")
    other = services.note_create(owner=alice, title="Elsewhere", body="x", space=ops)

    def corrupt() -> None:
        if breakage == "deleted target":
            # Soft-deleted through the service (its own edges leave properly), then the
            # related edge pointing at it is written as a late worker would have.
            services.note_delete(document=graph["runbook"], user=alice)
            related_edge(graph["policy"], graph["runbook"])
        elif breakage == "old version":
            related_edge(graph["db"], graph["policy"], from_version_id=old_db_version.pk)
        elif breakage == "other space":
            related_edge(graph["policy"], other)
        elif breakage == "self":
            related_edge(graph["db"], graph["db"])
        elif breakage == "duplicate":
            related_edge(graph["policy"], graph["team"])
        else:
            related_edge(graph["db"], graph["policy"], origin=graph["team"])

    if breakage == "deleted target":
        # The deletion itself is a legitimate change: take the healthy state after it.
        corrupt()
        report = index_health(vectors=False)
        assert report.edges.related_invalid == 1
        repaired = repair_indexes(vectors=False)
        assert repaired.edges.related_removed == 1
        assert repaired.after.healthy, repaired.after.problems
        assert repaired.canonical_unchanged
    else:
        check_detect_and_repair(corrupt, "related edges join", "related_invalid")
    assert list(Edge.objects.filter(kind=Edge.Kind.RELATED)) == [keep]


def test_stale_related_edges_are_reported_and_left_without_vectors(graph, settings) -> None:
    related_edge(graph["policy"], graph["team"])
    settings.LODE_RELATED_THRESHOLD = 0.55  # the threshold changed since it was computed
    report = index_health(vectors=False)
    assert report.edges.related_stale == 1
    assert any("another embedding model, threshold" in p for p in report.problems)
    repaired = repair_indexes(vectors=False)
    assert repaired.edges.related_error == "not recomputed (--skip-vectors)"
    assert repaired.after.edges.related_stale == 1  # still said, never hidden


# --- where health is shown ---------------------------------------------------------------


def test_the_admin_health_page_shows_the_edges(graph, staff_client) -> None:
    Edge.objects.filter(origin=graph["db"], to_document=graph["team"]).delete()
    plain = staff_client.get(reverse("admin:retrieval_index_health")).content.decode()
    assert 'id="index-health-edges-skipped"' in plain  # the slow check only when asked
    assert 'id="index-health-edges"' not in plain
    page = staff_client.get(reverse("admin:retrieval_index_health") + "?edges=1")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="index-health-edges"' in text
    assert "1 edges the head versions give are missing from the graph" in text
    assert "Missing / extra / altered</th><td>1 / 0 / 0" in text


def test_repair_json_reports_what_the_edge_repair_did(graph) -> None:
    Edge.objects.filter(origin=graph["db"]).delete()
    status, out = run("repair", "--json", "--skip-vectors")
    assert status == 0
    data = json.loads(out)
    assert data["healthy"] is True and data["canonical_unchanged"] is True
    assert data["edges"]["rederived"] == 1
    assert data["edges"]["written"] == Edge.objects.filter(origin=graph["db"]).count() > 0
    status, out = run("repair", "--skip-vectors")
    assert status == 0 and "edges: re-derived 0 documents" in out


def test_user_text_in_examples_is_escaped_on_the_page(alice, staff_client) -> None:
    target = factories.note(alice, "Plain", "x")
    factories.note(alice, "Linker", "[[<b>Bold</b> page]] and [[Plain]]")
    Edge.objects.filter(to_document=target).delete()
    Edge.objects.filter(kind=Edge.Kind.LINKS_TO, to_document__isnull=True).update(
        target="<script>alert(1)</script>"
    )
    url = reverse("admin:retrieval_index_health") + "?edges=1"
    text = staff_client.get(url).content.decode()
    assert "<script>alert(1)</script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_non_staff_cannot_see_edge_health(alice_client) -> None:
    assert alice_client.get(reverse("admin:retrieval_index_health")).status_code == 302
