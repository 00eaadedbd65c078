"""Graph expansion in search and ask: links followed one hop from the
top hits' documents, only when the graph discipline rule or the user says so, never into a
document the user cannot see, inferred edges only when asked; traces record it."""

from __future__ import annotations

import json

import pytest

from notes import services
from retrieval.answer.ask import ask
from retrieval.answer.trace import Trace
from retrieval.eligibility import audience_for
from retrieval.models import AskTrace, Edge
from retrieval.plan import graph_discipline as gd
from retrieval.search.graph_expand import MAX_ADDED
from retrieval.search.pipeline import search
from spaces import services as space_services
from tests import factories
from tests.factories import (
    FALCON_SPAN,
    ON_CALL_QUESTION,
    ScriptedAnswerer,
    claim,
    service_and_team_notes,
)

pytestmark = pytest.mark.django_db


def docs(result) -> list[int]:
    return [h.passage.document_id for h in result.hits]


def run(alice, query=ON_CALL_QUESTION, **kwargs):
    return search(user=alice, query=query, mode="lexical", rerank="off", **kwargs)


def test_expansion_adds_the_linked_note_plain_search_misses(alice):
    service, team = service_and_team_notes(alice)
    plain = run(alice, follow_links=False)
    assert service.pk in docs(plain) and team.pk not in docs(plain)
    assert plain.expansion is not None and not plain.expansion.ran
    assert plain.expansion.discipline.rule == gd.RULE_NOT_ASKED

    expanded = run(alice, follow_links=True)
    assert expanded.expansion.ran and expanded.expansion.discipline.rule == gd.RULE_ASKED
    [added] = [h for h in expanded.hits if h.via is not None]
    assert added.passage.document_id == team.pk and FALCON_SPAN in added.passage.text
    via = added.via
    assert (via.seed_document_id, via.kind, via.direction) == (service.pk, "links_to", "out")
    assert not via.inferred and via.tier == "note"
    assert via.basis["rule"] == "wiki-link" and via.basis["span"]["unit"] == "code points"
    edge = Edge.objects.get(pk=via.edge_id)
    assert service.head.body[edge.start : edge.end] == "[[Team Falcon]]"
    assert via.phrase == "via link from “Billing API”"
    # Placed right after the hit it was reached from (same relevance: the direct hit first).
    seed_rank = next(h.rank for h in expanded.hits if h.passage.document_id == service.pk)
    assert added.rank == seed_rank + 1
    assert [h.rank for h in expanded.hits] == list(range(1, len(expanded.hits) + 1))
    assert any("via link from" in reason for reason in added.reasons)


def test_the_rule_decides_when_follow_links_is_none(alice):
    _, team = service_and_team_notes(alice)
    # "who is on call for" is the ownership rule: expansion runs without being asked.
    decided = run(alice, follow_links=None)
    assert decided.expansion.ran and decided.expansion.discipline.rule == gd.RULE_OWNERSHIP
    assert team.pk in docs(decided)
    # A single-hop question: skipped, and nothing added — even though the hit links out.
    single = run(alice, query="What does Billing API take from checkout?", follow_links=None)
    assert not single.expansion.ran and single.expansion.discipline.rule == gd.RULE_SINGLE_HOP
    assert all(h.via is None for h in single.hits) and team.pk not in docs(single)
    # The same question, forced.
    forced = run(alice, query="What does Billing API take from checkout?", follow_links=True)
    assert forced.expansion.ran and team.pk in docs(forced)


def test_never_adds_a_document_the_user_cannot_see(alice, bob):
    ops = space_services.space_create(by=bob, name="Ops")
    space_services.member_add(by=bob, space=ops, username=alice.username)
    secret = services.note_create(
        owner=bob, title="Ops Escalation", body="Call the duty manager on 555-0100.", space=ops
    )
    source = factories.note(
        alice, "Billing API", "On call for Billing API: escalate per [[Ops Escalation]]."
    )
    [edge] = Edge.objects.filter(origin=source, kind=Edge.Kind.LINKS_TO)
    assert edge.to_document_id == secret.pk  # resolved while alice was a member
    while_member = run(alice, follow_links=True)
    assert secret.pk in docs(while_member)

    space_services.member_remove(by=bob, space=ops, user_id=alice.pk)
    assert Edge.objects.filter(pk=edge.pk).exists()  # the edge is still there…
    after = run(alice, follow_links=True)
    assert after.expansion.ran
    assert secret.pk not in docs(after)  # …but never followed into bob's space
    assert secret.pk not in after.expansion.linked_document_ids
    # Asking in bob's space as alice is refused before anything runs; bob sees his own.
    assert secret.pk in docs(
        search(user=bob, query="duty manager", mode="lexical", rerank="off", follow_links=True)
    )


def test_inferred_edges_only_when_asked(alice):
    mentioned = factories.note(alice, "Ledger DB", "Ledger DB snapshots run at 02:00.")
    source = factories.note(alice, "Billing API", "On call for Billing API uses Ledger DB.")
    kinds = set(Edge.objects.filter(origin=source).values_list("kind", flat=True))
    assert kinds == {Edge.Kind.MENTIONS}  # an unlinked mention: inferred, no declared link
    declared_only = run(alice, query="on call billing", follow_links=True)
    assert declared_only.expansion.ran and mentioned.pk not in docs(declared_only)
    inferred = run(alice, query="on call billing", follow_links=True, follow_inferred=True)
    [added] = [h for h in inferred.hits if h.via is not None]
    assert added.passage.document_id == mentioned.pk
    assert added.via.inferred and added.via.tier == "inferred" and added.via.kind == "mentions"
    assert any("inferred edge" in reason for reason in added.reasons)


def test_inferred_hits_rank_below_declared_ones_of_the_same_seed(alice):
    factories.note(alice, "Ledger DB", "Ledger DB snapshots run at 02:00.")
    factories.note(alice, "Team Falcon", FALCON_SPAN)
    factories.note(
        alice, "Billing API", "On call for Billing API: [[Team Falcon]]. State in Ledger DB."
    )
    result = run(alice, query="on call billing", follow_links=True, follow_inferred=True)
    added = [h for h in result.hits if h.via is not None]
    assert [h.via.inferred for h in added] == [False, True]
    assert added[0].rank < added[1].rank
    assert len(added) <= MAX_ADDED


def test_filters_still_apply_to_what_expansion_adds(alice):
    service, team = service_and_team_notes(alice)
    services.note_update(
        document=team,
        user=alice,
        base_version_id=team.head_id,
        title="Team Falcon",
        body=f"# Team Falcon\n\n{FALCON_SPAN}\n",
        tags="teams",
    )
    services.note_update(
        document=service,
        user=alice,
        base_version_id=service.head_id,
        title="Billing API",
        body=service.head.body,
        tags="services",
    )
    kept = run(alice, query=f"{ON_CALL_QUESTION} tag:services", follow_links=True)
    assert kept.expansion.ran and team.pk not in docs(kept)


def test_ask_puts_expansion_in_the_pack_and_the_trace(alice):
    service, team = service_and_team_notes(alice)
    outcome = ask(
        user=alice,
        question=ON_CALL_QUESTION,
        mode="lexical",
        answerer=ScriptedAnswerer([claim(team.head_id, FALCON_SPAN)]),
        follow_links=True,
    )
    row = AskTrace.objects.get(pk=outcome.trace_id)
    trace = Trace.from_row(row)
    assert trace.settings.follow_links is True
    assert trace.pack is not None and team.pk in [i.document_id for i in trace.pack.items]
    assert trace.expansion is not None and trace.expansion["ran"]
    assert trace.expansion["rule"] == gd.RULE_ASKED
    [added] = trace.expansion["added"]
    assert added["document_id"] == team.pk and added["via"]["seed_document_id"] == service.pk
    assert trace.expansion_via()[added["passage_id"]]["kind"] == "links_to"
    # The quote from the linked note reached the gate and was checked like any other: found
    # verbatim in the version the pack sent; then the relevance step judged it (unchanged,
    # it may drop a claim sharing no word with the question).
    [verdict] = trace.gate
    assert verdict.claim.support[0].version_id == team.head_id
    assert verdict.passed or verdict.step == "relevance"
    assert team.head_id in trace.draft.sent_versions
    # JSON round trip, and an old trace (no expansion, no follow_links) still reads.
    assert Trace.from_dict(json.loads(json.dumps(row.trace))).to_dict() == row.trace
    old = dict(row.trace)
    old.pop("expansion")
    old["settings"] = {k: v for k, v in old["settings"].items() if k != "follow_links"}
    again = Trace.from_dict(old)
    assert again.expansion is None and again.settings.follow_links is None
    assert again.expansion_via() == {} and again.to_dict() == old


def test_ask_without_links_keeps_the_linked_note_out_and_says_why(alice):
    _, team = service_and_team_notes(alice)
    outcome = ask(
        user=alice,
        question="What does Billing API take from checkout?",
        mode="lexical",
        answerer=ScriptedAnswerer(),
    )
    trace = Trace.from_row(AskTrace.objects.get(pk=outcome.trace_id))
    assert trace.expansion["ran"] is False and trace.expansion["rule"] == gd.RULE_SINGLE_HOP
    assert "follow_links" not in trace.to_dict()["settings"]
    assert team.pk not in [i.document_id for i in trace.pack.items]


# --- the discipline rule, pure -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "facts", "rule"),
    [
        ("What does the checkout service depend on?", gd.Facts(), gd.RULE_RELATIONAL),
        ("How is the ledger linked to billing?", gd.Facts(), gd.RULE_RELATIONAL),
        ("Is Billing API related to Ledger DB?", gd.Facts(), gd.RULE_RELATIONAL),
        ("Compare Billing API and Ledger DB", gd.Facts(), gd.RULE_TWO_NAMED),
        (
            "billing api versus ledger db",
            gd.Facts(named_titles=("Billing API", "Ledger DB")),
            gd.RULE_TWO_NAMED,
        ),
        ("Who owns the checkout service?", gd.Facts(), gd.RULE_OWNERSHIP),
        ("Who is on call for Billing API?", gd.Facts(), gd.RULE_OWNERSHIP),
        ("Why did we pick Postgres?", gd.Facts(top_hit_links_out=True), gd.RULE_WHY),
        ("Why did we pick Postgres?", gd.Facts(top_hit_links_out=False), gd.RULE_SINGLE_HOP),
        (
            "When is the Billing API backup taken?",
            gd.Facts(
                named_titles=("Billing API",), named_links_out=True, named_missing_words=("backup",)
            ),
            gd.RULE_NAMED_LINKS_OUT,
        ),
        (
            "What port does Billing API listen on?",
            gd.Facts(named_titles=("Billing API",), named_links_out=True),
            gd.RULE_SINGLE_HOP,
        ),
        ("What is the pager alias of Team Falcon?", gd.Facts(), gd.RULE_SINGLE_HOP),
        (
            "What did ADR-021 Secrets Storage for Promotions Service decide?",
            gd.Facts(named_titles=("ADR-021 Secrets Storage for Promotions Service",)),
            gd.RULE_SINGLE_HOP,
        ),
    ],
)
def test_discipline_rules(question, facts, rule):
    decision = gd.decide(question, follow_links=None, facts=facts)
    assert decision.rule == rule
    assert decision.run is (rule != gd.RULE_SINGLE_HOP)


def test_the_user_overrides_the_rule_both_ways():
    facts = gd.Facts(top_hit_links_out=True)
    assert gd.decide("plain words", follow_links=True, facts=facts).run
    assert not gd.decide("what depends on billing", follow_links=False, facts=facts).run


def test_facts_name_visible_titles_only(alice, bob):
    from retrieval.search.graph_expand import named_documents

    factories.note(alice, "Billing API", "x")
    factories.note(bob, "Ledger DB", "y")
    found = named_documents("Is Billing API slower than Ledger DB?", audience_for(alice.pk))
    assert [d.title for d in found] == ["Billing API"]


@pytest.mark.parametrize("title_scan", [200, 1])  # read by title first, or filtered in SQL
def test_named_documents_read_by_title_keep_other_spaces_out(alice, bob, monkeypatch, title_scan):
    from retrieval.search import graph_expand

    monkeypatch.setattr(graph_expand, "TITLE_SCAN", title_scan)
    for _ in range(2):
        factories.note(bob, "Billing API", "bob's")  # same title, another space: never found
    mine = factories.note(alice, "Billing API", "alice's")
    factories.note(alice, "Ledger DB", "y")
    found = graph_expand.named_documents(
        "Is Billing API slower than Ledger DB?", audience_for(alice.pk)
    )
    assert [d.title for d in found] == ["Billing API", "Ledger DB"]
    assert found[0].pk == mine.pk


def test_links_are_looked_up_only_when_the_rule_can_read_them(alice, monkeypatch):
    """The link facts cost a query; a question the rule decides without them (no "why", no
    named note lacking words) does not look them up, and the rule decides as before."""
    from retrieval.search import graph_expand

    service, _ = service_and_team_notes(alice)
    looked: list[list[int]] = []
    real = graph_expand._linked

    def spy(audience, document_ids):
        looked.append(list(document_ids))
        return real(audience, document_ids)

    monkeypatch.setattr(graph_expand, "_linked", spy)
    single = run(alice, query="card payments from checkout", follow_links=None)
    assert single.expansion.discipline.rule == gd.RULE_SINGLE_HOP and looked == []
    # "Why": the top hit's links decide, so they are looked up (the top hit links out).
    why = run(alice, query="Why does Billing API take card payments?", follow_links=None)
    assert looked and service.pk in looked[-1]
    assert why.expansion.discipline.rule in (gd.RULE_WHY, gd.RULE_NAMED_LINKS_OUT)
    assert why.expansion.ran
    # A named note whose best passage lacks question words: its links are looked up.
    looked.clear()
    named = run(alice, query="Billing API refunds and chargebacks", follow_links=None)
    assert looked and named.expansion.discipline.rule == gd.RULE_NAMED_LINKS_OUT


def test_an_ask_the_rule_expanded_replays_the_same(alice):
    from retrieval.answer.replay import replay

    _, team = service_and_team_notes(alice)
    outcome = ask(
        user=alice, question=ON_CALL_QUESTION, mode="lexical", answerer=ScriptedAnswerer()
    )
    row = AskTrace.objects.get(pk=outcome.trace_id)
    trace = Trace.from_row(row)
    assert trace.expansion["ran"] and trace.expansion["rule"] == gd.RULE_OWNERSHIP
    assert team.pk in [i.document_id for i in trace.pack.items]
    assert replay(row) == []
