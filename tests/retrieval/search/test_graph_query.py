"""The restricted graph query: discovery, the validator (a negative test
for each refusal), neighbours, the bounded deterministic shortest path, eligibility along a
path, evidence hydration within its budget, and one generation per query."""

from __future__ import annotations

import threading

import jsonschema
import pytest
from django.db import connection

from notes import services
from retrieval.eligibility import audience_for
from retrieval.index.edges import current_generation
from retrieval.models import Edge
from retrieval.search import graph_query
from retrieval.search.graph_query import (
    EVIDENCE_BUDGET,
    MAX_EVIDENCE,
    MAX_ROWS,
    QUERY_JSON_SCHEMA,
    Candidate,
    GraphQueryError,
    discover,
    run,
    validate,
)
from spaces import services as space_services
from tests import factories

pytestmark = pytest.mark.django_db


def candidate(document, index: int = 0) -> Candidate:
    return Candidate(
        lookup=document.title,
        lookup_index=index,
        document_id=document.pk,
        title=document.title,
        kind=document.kind,
        match="title",
        url="",
    )


def neighbours(seed: int, direction: str = "out", kind: str = "links_to") -> dict:
    return {
        "lookups": ["x"],
        "query": {"op": "neighbours", "seed": seed, "direction": direction, "kind": kind},
    }


def path(start: int, goal: int, **extra) -> dict:
    return {"lookups": ["x", "y"], "query": {"op": "path", "from": start, "to": goal, **extra}}


def execute(user, raw: dict, *documents):
    cands = [candidate(d) for d in documents]
    audience = audience_for(user.pk)
    return run(audience, validate(raw, cands), cands)


# --- discovery --------------------------------------------------------------------------------


def test_discovery_puts_exact_title_and_path_before_search(alice, bob):
    mentions = factories.note(alice, "Release notes", "We changed deploy.md and Deploy Guide.")
    guide = factories.note(alice, "Deploy Guide", "How to deploy.")
    by_path = services.note_create(
        owner=alice, title="Deployment", body="steps", external_key="ops/deploy.md"
    )
    factories.note(bob, "Deploy Guide", "bob's, invisible to alice")
    audience = audience_for(alice.pk)
    found = discover(audience, ["deploy guide", "ops/deploy.md"])
    first = [c for c in found if c.lookup_index == 0]
    second = [c for c in found if c.lookup_index == 1]
    assert (first[0].document_id, first[0].match) == (guide.pk, "title")
    assert (second[0].document_id, second[0].match) == (by_path.pk, "path")
    assert all(c.document_id != mentions.pk or c.match == "search" for c in found)
    assert all(len([c for c in found if c.lookup_index == i]) <= 4 for i in (0, 1))
    bobs = {d.pk for d in services.Document.objects.filter(owner=bob)}
    assert not bobs & {c.document_id for c in found}
    assert first[0].url == f"/notes/{guide.pk}" and "deploy" in first[0].excerpt.lower()


def test_discovery_bounds_candidates_per_lookup(alice):
    for i in range(7):
        factories.note(alice, f"Cache note {i}", "cache eviction cache")
    found = discover(audience_for(alice.pk), ["cache"])
    assert 1 <= len(found) <= 4
    assert len({c.document_id for c in found}) == len(found)


# --- the validator: a negative test for each refusal -------------------------------------------


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (neighbours(1, kind="cites"), "query.kind"),  # unknown kind
        (path(1, 2, kinds=["links_to", "cites"]), "query.kinds"),  # unknown kind in a list
        ({**neighbours(1), "limit": 50}, "limit: unknown property"),  # extra property
        (
            {"lookups": ["x"], "query": {**neighbours(1)["query"], "sql": "DROP"}},
            "query.sql: unknown property",
        ),
        (path(1, 2, max_hops=5), "1 to 4 hops"),  # more hops
        (path(1, 2, max_hops=0), "1 to 4 hops"),
        (neighbours(1, direction="both"), "query.direction"),  # malformed parameter
        (path(1, 2, kinds=[]), "query.kinds"),
        (path(1, 2, kinds=["links_to", "links_to"]), "repeated"),
        ({"lookups": ["a", "b", "c", "d"], "query": neighbours(1)["query"]}, "at most 3"),
        ({"lookups": [], "query": neighbours(1)["query"]}, "at least one"),  # empty lookups
        ({"lookups": ["  "], "query": neighbours(1)["query"]}, "must not be empty"),
        ({"query": neighbours(1)["query"]}, "lookups: required"),
        ({"lookups": ["x"], "query": {**neighbours(1)["query"], "seed": "1"}}, "query.seed"),
        ({"lookups": ["x"], "query": {**neighbours(1)["query"], "seed": 1.5}}, "query.seed"),
        ({"lookups": ["x"], "query": {**neighbours(1)["query"], "seed": True}}, "query.seed"),
        ({"lookups": ["x"], "query": {**neighbours(1)["query"], "seed": -3}}, "query.seed"),
        (path("1", 2), "query.from"),  # non-integer seed
        ({"lookups": ["x"], "query": {"op": "walk", "seed": 1}}, "query"),
        ({"lookups": ["x"], "query": {"seed": 1}}, '"op"'),
        ("not an object", "JSON object"),
    ],
)
def test_malformed_queries_are_refused_with_a_clear_message(alice, raw, words):
    with pytest.raises(GraphQueryError) as refused:
        validate(raw, [Candidate("x", 0, 1, "t", "note", "title", "")])
    assert words in refused.value.message
    assert refused.value.message.startswith("Invalid graph query")


def test_seeds_outside_the_discovered_set_are_refused(alice, bob):
    mine = factories.note(alice, "Mine", "m")
    other = factories.note(alice, "Other", "o")
    bobs = factories.note(bob, "Bobs", "b")
    for raw in (neighbours(other.pk), neighbours(bobs.pk), path(mine.pk, other.pk)):
        with pytest.raises(GraphQueryError, match="Seeds must come from discovery"):
            validate(raw, [candidate(mine)])
    # And `run` re-checks, whatever object a caller hands it.
    valid = validate(neighbours(mine.pk), [candidate(mine)])
    with pytest.raises(GraphQueryError):
        run(audience_for(alice.pk), valid, [candidate(other)])


def test_the_written_json_schema_agrees_with_the_validator():
    """What the schema in the module accepts and refuses is what `parse` does, on samples."""
    good = [
        neighbours(3),
        neighbours(3, direction="in", kind="mentions"),
        path(1, 2),
        path(1, 2, max_hops=1, kinds=["related"]),
        path(1, 2, follow="out"),
        {**path(1, 2), "space": 7},
    ]
    bad = [
        neighbours(3, kind="cites"),
        {**neighbours(3), "x": 1},
        path(1, 2, max_hops=5),
        {"lookups": ["a", "b", "c", "d"], "query": neighbours(1)["query"]},
        {"lookups": [], "query": neighbours(1)["query"]},
        path("1", 2),
        path(1, 2, follow="in"),
        neighbours(True),
    ]
    for raw in good:
        jsonschema.validate(raw, QUERY_JSON_SCHEMA)
        graph_query.parse(raw)
    for raw in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(raw, QUERY_JSON_SCHEMA)
        with pytest.raises(GraphQueryError):
            graph_query.parse(raw)
    query = QUERY_JSON_SCHEMA["properties"]["query"]["oneOf"]
    assert query[0]["properties"]["kind"]["enum"] == [str(k) for k in Edge.Kind.values]


# --- neighbours -------------------------------------------------------------------------------


def test_neighbours_out_and_in_with_kind_basis_and_tier(alice):
    target = factories.note(alice, "Backup Policy", "Snapshots are kept for 35 days.")
    body = "Restore per [[Backup Policy]] before noon. The Backup Policy rules."
    source = factories.note(alice, "Restore runbook", body)
    out = execute(alice, neighbours(source.pk), source)
    [row] = out.rows
    assert (row.source.id, row.target.id, row.kind) == (source.pk, target.pk, "links_to")
    assert row.basis["rule"] == "wiki-link" and row.basis["span"]["unit"] == "code points"
    assert row.tier == "note" and not row.inferred
    assert out.generation == current_generation() > 0
    into = execute(alice, neighbours(target.pk, direction="in"), target)
    assert [r.source.id for r in into.rows] == [source.pk]
    # An inferred edge: none here (linked), so the "in" mentions query is empty.
    assert execute(alice, neighbours(target.pk, "in", "mentions"), target).rows == []


def test_inferred_edges_carry_the_bottom_tier(alice):
    target = factories.note(alice, "Incident Process", "Page the on-call.")
    source = factories.note(alice, "Pager notes", "Follow the incident process when paged.")
    result = execute(alice, neighbours(source.pk, kind="mentions"), source)
    [row] = result.rows
    assert row.target.id == target.pk and row.inferred and row.tier == "inferred"
    assert row.basis["inferred"] is True


def test_neighbours_stop_at_twenty_rows(alice):
    for i in range(MAX_ROWS + 3):
        factories.note(alice, f"Leaf {i:02d}", "leaf")
    hub = factories.note(alice, "Hub", " ".join(f"[[Leaf {i:02d}]]" for i in range(MAX_ROWS + 3)))
    result = execute(alice, neighbours(hub.pk), hub)
    assert len(result.rows) == MAX_ROWS and result.truncated
    ids = [r.target.id for r in result.rows]
    assert ids == sorted(ids)


def test_contains_in_lists_the_source_of_an_external(alice):
    source = factories.make_source(alice, "Handbook")
    external = factories.make_source_external(source, path="guide.md")
    result = execute(alice, neighbours(external.pk, "in", "contains"), external)
    [row] = result.rows
    assert (row.source.type, row.source.id, row.source.title) == ("source", source.pk, "Handbook")
    assert row.tier == external.trust_tier


# --- paths ------------------------------------------------------------------------------------


def test_shortest_path_is_deterministic_in_a_diamond(alice):
    """A → {B, C} → D: two shortest paths. The tie rule picks the one through the lower
    id (C, created first) although A's text names B first; the same answer every time."""
    d = factories.note(alice, "Delta", "the end")
    c = factories.note(alice, "Charlie", "to [[Delta]]")
    b = factories.note(alice, "Bravo", "to [[Delta]]")
    a = factories.note(alice, "Alpha", "first [[Bravo]] then [[Charlie]]")
    assert c.pk < b.pk
    results = [execute(alice, path(a.pk, d.pk), a, d) for _ in range(3)]
    for result in results:
        hops = [(r.source.id, r.target.id, r.hop) for r in result.rows]
        assert hops == [(a.pk, c.pk, 1), (c.pk, d.pk, 2)]
    # Without the lower branch's last edge, the other shortest path is found.
    services.note_update(
        document=c, user=alice, base_version_id=c.head_id, title="Charlie", body="nothing"
    )
    result = execute(alice, path(a.pk, d.pk), a, d)
    assert [(r.source.id, r.target.id) for r in result.rows] == [(a.pk, b.pk), (b.pk, d.pk)]


def test_path_is_bounded_by_max_hops_and_can_keep_to_the_arrows(alice):
    chain = [factories.note(alice, "N4", "end")]
    for name in ("N3", "N2", "N1", "N0"):
        chain.insert(0, factories.note(alice, name, f"next [[{chain[0].title}]]"))
    start, goal = chain[0], chain[4]
    assert len(execute(alice, path(start.pk, goal.pk), start, goal).rows) == 4
    short = execute(alice, path(start.pk, goal.pk, max_hops=3), start, goal)
    assert short.rows == [] and "at most 3 hops" in short.message
    # Against every arrow: found by default, each hop saying so; not with follow "out".
    backwards = execute(alice, path(goal.pk, start.pk), start, goal)
    assert [r.direction for r in backwards.rows] == ["backward"] * 4
    assert [r.arrives.id for r in backwards.rows] == [d.pk for d in reversed(chain[:4])]
    along = execute(alice, path(goal.pk, start.pk, follow="out"), start, goal)
    assert along.rows == [] and "along their arrows" in along.message
    only_mentions = execute(alice, path(start.pk, goal.pk, kinds=["mentions"]), start, goal)
    assert only_mentions.rows == []


def test_path_through_a_document_that_links_to_both_ends(alice):
    """Deploy runbook and Incident response link nowhere; Backup runbook links to both. The
    path goes against the first link's arrow and along the second, and says so."""
    deploy = factories.note(alice, "Deploy runbook", "Blue-green switch.")
    incident = factories.note(alice, "Incident response", "Page the on-call.")
    backup = factories.note(
        alice, "Backup runbook", "Read [[Deploy runbook]]; on failure [[Incident response]]."
    )
    result = execute(alice, path(deploy.pk, incident.pk), deploy, incident)
    steps = [(r.departs.id, r.arrives.id, r.direction, r.hop) for r in result.rows]
    assert steps == [
        (deploy.pk, backup.pk, "backward", 1),
        (backup.pk, incident.pk, "forward", 2),
    ]
    # The edges themselves keep their own ends: both are written in Backup runbook.
    assert {r.source.id for r in result.rows} == {backup.pk}
    rows = result.as_dict()["rows"]
    assert [r["direction"] for r in rows] == ["backward", "forward"]
    assert execute(alice, path(deploy.pk, incident.pk, follow="out"), deploy, incident).rows == []


def test_basis_names_the_version_number_not_its_row_id(alice):
    for i in range(4):  # versions of other notes first, so row ids run ahead of numbers
        factories.note(alice, f"Filler {i}", "filler")
    target = factories.note(alice, "Backup Policy", "Kept 35 days.")
    source = factories.note(alice, "Restore runbook", "See [[Backup Policy]].")
    [row] = execute(alice, neighbours(source.pk), source).rows
    assert row.basis["version_id"] == source.head_id != 1
    assert row.basis["version_number"] == source.head.number == 1
    assert target.pk != source.pk


def test_a_path_never_passes_through_a_document_the_user_cannot_see(alice, bob):
    shared = space_services.space_create(by=alice, name="Ops")
    space_services.member_add(by=alice, space=shared, username="bob")

    def note(title, body, space=shared):
        return services.note_create(owner=alice, title=title, body=body, space=space)

    goal = note("Goal", "the end")
    note("Q", "[[Goal]]")
    note("P", "[[Q]]")
    note("Private hop", "[[Goal]]", space=None)  # alice's personal space
    start = note("Start", "[[Private hop]] and [[P]]")
    alices = execute(alice, path(start.pk, goal.pk), start, goal)
    assert [r.target.title for r in alices.rows] == ["Private hop", "Goal"]
    bobs = execute(bob, path(start.pk, goal.pk), start, goal)
    assert [r.target.title for r in bobs.rows] == ["P", "Q", "Goal"]
    assert all(n.title != "Private hop" for n in bobs.nodes)
    assert all(e.title != "Private hop" for e in bobs.evidence)


# --- evidence ---------------------------------------------------------------------------------


def test_evidence_is_at_most_four_passages_within_the_budget_with_verified_links(
    alice, alice_client
):
    long = "word " * 400
    for i in range(6):
        factories.note(alice, f"Part {i}", f"{long}")
    hub = factories.note(
        alice, "Index", "\n\n".join(f"{long}\n\nSee [[Part {i}]] here." for i in range(6))
    )
    result = execute(alice, neighbours(hub.pk), hub)
    assert len(result.rows) == 6
    assert 1 <= len(result.evidence) <= MAX_EVIDENCE
    assert result.evidence_chars <= EVIDENCE_BUDGET
    assert len({e.passage_id for e in result.evidence}) == len(result.evidence)
    first = result.evidence[0]
    assert "[[Part 0]]" in first.text  # cut around the link's span
    response = alice_client.get(first.evidence_url)
    assert response.status_code == 200
    assert result.as_dict()["evidence_chars"] == result.evidence_chars


# --- one generation per query -----------------------------------------------------------------


def test_the_generation_and_edges_are_read_in_one_transaction(alice, monkeypatch):
    target = factories.note(alice, "T", "t")
    source = factories.note(alice, "S", "[[T]]")
    seen = []
    real = graph_query.current_generation

    def spy():
        seen.append(connection.in_atomic_block)
        return real()

    monkeypatch.setattr(graph_query, "current_generation", spy)
    result = execute(alice, neighbours(source.pk), source)
    assert seen == [True] and result.rows[0].target.id == target.pk


# SQLite: lode's transactions are IMMEDIATE (one writer), so no write can commit while the
# query's transaction is open; the in-memory test database cannot even try from a thread.
postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="concurrent snapshots are PostgreSQL's"
)


class _NoSnapshot:
    def __enter__(self):
        return None

    def __exit__(self, *exc_info):
        return None


@postgresql_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("snapshot", [True, False])
def test_a_write_committed_during_a_query_is_not_seen(alice, monkeypatch, snapshot):
    """A save that commits between the query's generation read and its edge read (from
    another connection) is invisible to it: same generation, old edges. The next query sees
    both. Without the one-transaction snapshot (the control) the query does see it: the
    test can fail."""
    if not snapshot:
        monkeypatch.setattr(graph_query, "_Snapshot", _NoSnapshot)
    factories.note(alice, "Old target", "o")
    factories.note(alice, "New target", "n")
    source = factories.note(alice, "Source", "[[Old target]]")
    real = graph_query.current_generation

    def write_meanwhile() -> None:
        services.note_update(
            document=source,
            user=alice,
            base_version_id=source.head_id,
            title="Source",
            body="[[Old target]] [[New target]]",
        )
        connection.close()

    def generation_then_write():
        value = real()
        writer = threading.Thread(target=write_meanwhile)
        writer.start()
        writer.join(timeout=60)
        assert not writer.is_alive()
        return value

    monkeypatch.setattr(graph_query, "current_generation", generation_then_write)
    during = execute(alice, neighbours(source.pk), source)
    monkeypatch.setattr(graph_query, "current_generation", real)
    after = execute(alice, neighbours(source.pk), source)
    titles = sorted(r.target.title for r in during.rows)
    assert titles == (["Old target"] if snapshot else ["New target", "Old target"])
    assert sorted(r.target.title for r in after.rows) == ["New target", "Old target"]
    assert after.generation > during.generation
