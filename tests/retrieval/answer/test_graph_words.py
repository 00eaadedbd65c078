"""Graph questions in words: the offline rules on a small real graph, and
the two model stages against a fake model server (tests/fake_llm.py) scripted with good,
malformed and out-of-bounds outputs — direction swapped, unknown seed, five hops."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import pytest

from notes import services
from notes.models import Document
from retrieval.answer.graph_words import (
    LOOKUP_SYSTEM_PROMPT,
    PROMPT_VERSION,
    QUERY_SYSTEM_PROMPT,
    SHAPES_MESSAGE,
    RuleMatch,
    WordsError,
    ask_graph,
    match_rules,
)
from retrieval.eligibility import NoAccess
from retrieval.models import EgressLog
from spaces import services as space_services
from tests import factories

pytestmark = pytest.mark.django_db


@dataclass
class Graph:
    policy: Document
    runbook: Document
    deploy: Document
    checklist: Document
    ops: Document


@pytest.fixture
def graph(alice) -> Graph:
    """runbook → policy, runbook → deploy → checklist; ops mentions policy (unlinked)."""
    policy = factories.note(alice, "Backup Policy", "Snapshots are kept for 35 days.")
    checklist = factories.note(alice, "Release Checklist", "Tick every box before shipping.")
    deploy = factories.note(alice, "Deploy Guide", "Ship only with [[Release Checklist]] done.")
    runbook = factories.note(
        alice,
        "Restore runbook",
        "Restore per [[Backup Policy]] before noon. Redeploy with [[Deploy Guide]].",
    )
    ops = factories.note(alice, "Ops overview", "Check the backup policy before restoring.")
    return Graph(policy, runbook, deploy, checklist, ops)


def row_pairs(outcome) -> list[tuple[int, int]]:
    return [(r["from"]["id"], r["to"]["id"]) for r in outcome.result["rows"]]


# --- the rules -------------------------------------------------------------------------------


IN = ("neighbours", "in", "links_to")
OUT = ("neighbours", "out", "links_to")
PATH = ("path", "", "")


@pytest.mark.parametrize(
    ("question", "rule", "shape", "subjects"),
    [
        ("What links to Backup Policy?", "links-in", IN, ("Backup Policy",)),
        ("which notes link to [[Backup Policy|the policy]]", "links-in", IN, ("Backup Policy",)),
        ("What depends on Deploy Guide", "depends-in", IN, ("Deploy Guide",)),
        ("backlinks of “Deploy Guide”", "backlinks", IN, ("Deploy Guide",)),
        ("What mentions X?", "mentions-in", ("neighbours", "in", "mentions"), ("X",)),
        ("What does Restore runbook link to?", "links-out", OUT, ("Restore runbook",)),
        ("what does the deploy guide depend on", "links-out", OUT, ("the deploy guide",)),
        ("What does `docs/deploy.md` reference?", "references-out", OUT, ("docs/deploy.md",)),
        ("How is A connected to B C?", "connected", PATH, ("A", "B C")),
        ('path from "Build and test" to "Deploy"', "path", PATH, ("Build and test", "Deploy")),
        (
            "How are Backup Policy and Deploy related?",
            "connected-and",
            PATH,
            ("Backup Policy", "Deploy"),
        ),
    ],
)
def test_rule_shapes_take_their_subjects_literally(question, rule, shape, subjects):
    assert match_rules(question) == RuleMatch(rule, shape[0], shape[1], shape[2], subjects)


@pytest.mark.parametrize(
    "question",
    [
        "What is the backup policy?",
        "Summarise the restore runbook",
        "links",
        "what links to",
        "How long are snapshots kept?",
    ],
)
def test_other_questions_match_no_rule(question):
    assert match_rules(question) is None


def test_offline_what_links_to(alice, graph, offline):
    outcome = ask_graph(user=alice, question="What links to Backup Policy?")
    assert outcome.answered and outcome.path == "rules" and outcome.rule == "links-in"
    assert outcome.query == {
        "op": "neighbours",
        "seed": graph.policy.pk,
        "direction": "in",
        "kind": "links_to",
    }
    # Only the declared link: the unlinked mention in "Ops overview" is another kind.
    assert row_pairs(outcome) == [(graph.runbook.pk, graph.policy.pk)]
    assert outcome.result["generation"] >= 1
    [evidence] = outcome.result["evidence"]
    assert "[[Backup Policy]]" in evidence["text"] and evidence["evidence_url"]
    assert outcome.trace == {"prompt_version": PROMPT_VERSION}
    assert not EgressLog.objects.exists()  # offline: nothing left the machine


def test_offline_what_does_x_link_to_goes_the_other_way(alice, graph, offline):
    outcome = ask_graph(user=alice, question="what does [[Restore runbook]] link to")
    assert outcome.answered and outcome.query["direction"] == "out"
    assert row_pairs(outcome) == sorted(
        [(graph.runbook.pk, graph.policy.pk), (graph.runbook.pk, graph.deploy.pk)],
        key=lambda pair: pair[1],
    )


def test_offline_what_mentions_shows_inferred_edges(alice, graph, offline):
    outcome = ask_graph(user=alice, question="What mentions Backup Policy?")
    assert outcome.answered and outcome.query["kind"] == "mentions"
    [row] = outcome.result["rows"]
    assert row["from"]["id"] == graph.ops.pk and row["inferred"] is True


def test_offline_how_is_x_connected_to_y(alice, graph, offline):
    outcome = ask_graph(
        user=alice, question='How is "Restore runbook" connected to "Release Checklist"?'
    )
    assert outcome.answered and outcome.rule == "connected"
    assert outcome.query["op"] == "path" and outcome.query["max_hops"] == 4
    assert row_pairs(outcome) == [
        (graph.runbook.pk, graph.deploy.pk),
        (graph.deploy.pk, graph.checklist.pk),
    ]
    assert [r["hop"] for r in outcome.result["rows"]] == [1, 2]


def test_offline_connected_through_a_note_that_links_to_both(alice, graph, offline):
    """Neither Deploy Guide nor Backup Policy links to the other; Restore runbook links to
    both. The path goes against the first link's arrow, and its rows say so."""
    outcome = ask_graph(user=alice, question='How is "Deploy Guide" connected to "Backup Policy"?')
    assert outcome.answered and outcome.rule == "connected"
    rows = outcome.result["rows"]
    assert [(r["from"]["id"], r["to"]["id"], r["direction"]) for r in rows] == [
        (graph.runbook.pk, graph.deploy.pk, "backward"),
        (graph.runbook.pk, graph.policy.pk, "forward"),
    ]


def test_offline_path_longer_than_four_hops_is_not_found(alice, offline):
    notes = [factories.note(alice, "Step 6", "the end")]
    for number in range(5, 0, -1):
        notes.insert(0, factories.note(alice, f"Step {number}", f"then [[Step {number + 1}]]"))
    four = ask_graph(user=alice, question="path from Step 1 to Step 5")
    assert four.answered and len(four.result["rows"]) == 4
    five = ask_graph(user=alice, question="path from Step 1 to Step 6")
    assert five.answered and five.result["rows"] == []
    assert "at most 4 hops" in five.result["message"]


def test_offline_refuses_other_questions_with_the_shapes(alice, graph, offline):
    outcome = ask_graph(user=alice, question="How long are snapshots kept?")
    assert not outcome.answered and outcome.path == "rules"
    assert outcome.message == SHAPES_MESSAGE
    assert outcome.message.startswith("I can answer questions of these shapes:")
    assert outcome.query is None and outcome.result is None


def test_offline_never_guesses_a_seed_from_search(alice, graph, offline):
    outcome = ask_graph(user=alice, question="What links to the backup rules?")
    assert not outcome.answered and outcome.result is None and outcome.query is None
    assert 'No document is titled "the backup rules"' in outcome.message


def test_offline_ambiguous_title_is_refused_unless_a_space_is_named(alice, offline):
    factories.note(alice, "Pager", "personal pager notes")
    ops = space_services.space_create(by=alice, name="Ops")
    services.note_create(owner=alice, title="Pager", body="ops pager", space=ops)
    services.note_create(owner=alice, title="Rota", body="Carry the [[Pager]].", space=ops)
    outcome = ask_graph(user=alice, question="what links to Pager")
    assert not outcome.answered and "names 2 documents" in outcome.message
    in_ops = ask_graph(user=alice, question="what links to Pager", space_id=ops.pk)
    assert in_ops.answered and [r["from"]["title"] for r in in_ops.result["rows"]] == ["Rota"]


def test_offline_eligibility_another_users_graph_is_invisible(alice, bob, graph, offline):
    mine = factories.note(bob, "Backup Policy", "bob's own policy")
    factories.note(bob, "Bob runbook", "See [[Backup Policy]].")
    outcome = ask_graph(user=bob, question="What links to Backup Policy?")
    assert outcome.answered and outcome.query["seed"] == mine.pk
    assert [r["from"]["title"] for r in outcome.result["rows"]] == ["Bob runbook"]
    assert graph.policy.pk not in {c["document_id"] for c in outcome.candidates}
    with pytest.raises(NoAccess):
        ask_graph(user=bob, question="What links to Backup Policy?", space_id=graph.policy.space_id)


def test_empty_and_too_long_questions_are_errors(alice, settings, offline):
    with pytest.raises(WordsError):
        ask_graph(user=alice, question="   ")
    settings.LODE_MAX_QUERY_CHARS = 20
    with pytest.raises(WordsError, match="limited to 20"):
        ask_graph(user=alice, question="what links to " + "x" * 30)


# --- the model path (a fake model server on 127.0.0.1) ---------------------------------------


def lookups(*names: str) -> dict:
    return {"lookups": list(names)}


def neighbours(seed: int, direction: str = "in", kind: str = "links_to") -> dict:
    return {"query": {"op": "neighbours", "seed": seed, "direction": direction, "kind": kind}}


def test_model_two_stages_good_output(alice, graph, fake_llm):
    fake_llm.reply(lookups("Backup Policy")).reply(neighbours(graph.policy.pk))
    outcome = ask_graph(user=alice, question="What links to Backup Policy?")
    assert outcome.answered and outcome.path == "model" and outcome.rule == "links-in"
    assert row_pairs(outcome) == [(graph.runbook.pk, graph.policy.pk)]
    rows = list(EgressLog.objects.order_by("id"))
    assert [r.purpose for r in rows] == ["tool", "tool"]
    stages = outcome.trace["stages"]
    assert outcome.trace["prompt_version"] == PROMPT_VERSION
    assert [s["stage"] for s in stages] == ["lookups", "query"]
    assert [s["request_sha256"] for s in stages] == [r.request_sha256 for r in rows]
    # Stage 1 sends the question only; stage 2 the real candidates, with ids and excerpts.
    first, second = fake_llm.requests
    assert rows[0].items == []
    assert first.message("system") == LOOKUP_SYSTEM_PROMPT
    assert "What links to Backup Policy?" in first.message("user")
    user = second.message("user")
    assert f"id={graph.policy.pk} " in user and '"Backup Policy"' in user
    assert "Snapshots are kept for 35 days." in user
    assert {i["document_id"] for i in rows[1].items} >= {graph.policy.pk}
    # The worked examples fix the direction: both questions, side by side.
    system = second.message("system")
    assert system == QUERY_SYSTEM_PROMPT
    assert "Q: What links to Backup Policy?" in system
    assert "Q: What does Backup Policy link to?" in system
    # The model is asked for the graph query's own schema.
    schema = second.json["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["query"]["oneOf"][0]["properties"]["op"] == {"const": "neighbours"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_model_egress_row_is_committed_before_each_request(alice, graph, fake_llm):
    """Seen from the fake server's own connection as each request arrives: only a committed
    row is visible there (a transactional test, so the test's transaction hides nothing)."""
    seen: list[list[str]] = []

    def check(received) -> None:
        digest = hashlib.sha256(received.body).hexdigest()
        seen.append(
            list(EgressLog.objects.filter(request_sha256=digest).values_list("purpose", flat=True))
        )

    fake_llm.on_request = check
    fake_llm.reply(lookups("Backup Policy")).reply(neighbours(graph.policy.pk))
    outcome = ask_graph(user=alice, question="What links to Backup Policy?")
    assert fake_llm.callback_errors == [] and outcome.answered
    assert seen == [["tool"], ["tool"]]


def test_model_question_no_rule_knows_runs_as_validated(alice, graph, fake_llm):
    fake_llm.reply(lookups("restore runbook")).reply(neighbours(graph.runbook.pk, "out"))
    outcome = ask_graph(user=alice, question="Where does the restore runbook send its readers?")
    assert outcome.answered and outcome.rule == ""
    assert outcome.query == neighbours(graph.runbook.pk, "out")["query"]
    assert {pair[1] for pair in row_pairs(outcome)} == {graph.policy.pk, graph.deploy.pk}


def test_model_path_question(alice, graph, fake_llm):
    fake_llm.reply(lookups("Restore runbook", "Release Checklist")).reply(
        {
            "query": {
                "op": "path",
                "from": graph.runbook.pk,
                "to": graph.checklist.pk,
                "max_hops": 3,
                "kinds": ["links_to"],
            }
        }
    )
    outcome = ask_graph(
        user=alice, question="How is Restore runbook connected to Release Checklist?"
    )
    assert outcome.answered and [r["hop"] for r in outcome.result["rows"]] == [1, 2]


def test_model_malformed_json_is_refused_and_nothing_runs(alice, graph, fake_llm):
    fake_llm.reply('{"lookups": ["Backup Policy"]}').reply('{"query": {"op": "neighbours", "seed"')
    outcome = ask_graph(user=alice, question="What links to Backup Policy?")
    assert not outcome.answered and outcome.result is None and outcome.query is None
    assert outcome.message.startswith("The model could not produce a query:")
    assert "JSON" in outcome.message
    assert outcome.trace["stages"][1]["error"]


def test_model_malformed_lookups_are_refused(alice, graph, fake_llm):
    fake_llm.reply("I think you mean the backup policy.")
    outcome = ask_graph(user=alice, question="What links to Backup Policy?")
    assert not outcome.answered and len(fake_llm.requests) == 1
    assert outcome.message.startswith("The model could not propose lookups:")


def test_model_lookups_breaking_the_schema_are_refused(alice, graph, fake_llm):
    fake_llm.reply(lookups("a", "b", "c", "d"))
    outcome = ask_graph(user=alice, question="What links to Backup Policy?")
    assert not outcome.answered and "is too long" in outcome.message  # maxItems is 3
    assert len(fake_llm.requests) == 1


NEIGHBOURS_IN = {"op": "neighbours", "seed": 0, "direction": "in", "kind": "links_to"}


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({**NEIGHBOURS_IN, "depth": 2}, "unknown property"),
        ({**NEIGHBOURS_IN, "kind": "owns"}, "query.kind"),
        ({**NEIGHBOURS_IN, "seed": "0"}, "query.seed"),
        ({"op": "walk", "seed": 0}, "query"),
    ],
)  # fmt: skip
def test_model_schema_violations_get_the_validators_message(alice, graph, fake_llm, query, message):
    query = {k: (graph.runbook.pk if v == 0 else v) for k, v in query.items()}
    fake_llm.reply(lookups("Restore runbook")).reply({"query": query})
    outcome = ask_graph(user=alice, question="Where does the restore runbook point readers?")
    assert not outcome.answered and outcome.result is None
    assert outcome.message.startswith("The query was refused: Invalid graph query")
    assert message in outcome.message


def test_model_envelope_with_extra_keys_is_refused(alice, graph, fake_llm):
    answer = {**neighbours(graph.policy.pk), "sql": "DROP TABLE"}
    fake_llm.reply(lookups("Backup Policy")).reply(answer)
    outcome = ask_graph(user=alice, question="Which notes cite the backup policy?")
    assert not outcome.answered and outcome.result is None
    assert 'exactly {"query": {...}}' in outcome.message


def test_model_direction_swapped_is_refused_with_its_query_shown(alice, graph, fake_llm):
    """ "What links to X?" answered with direction "out" ("what does X link to"): valid JSON,
    a valid query, the wrong question. The rule shape of the question catches it."""
    fake_llm.reply(lookups("Backup Policy")).reply(neighbours(graph.policy.pk, "out"))
    outcome = ask_graph(user=alice, question="What links to Backup Policy?")
    assert not outcome.answered and outcome.result is None
    assert outcome.query == neighbours(graph.policy.pk, "out")["query"]
    assert 'direction "out"' in outcome.message and "not run" in outcome.message
    assert 'what links to "Backup Policy"' in outcome.message


def test_model_op_contradicting_the_rule_is_refused(alice, graph, fake_llm):
    fake_llm.reply(lookups("Restore runbook", "Release Checklist")).reply(
        neighbours(graph.runbook.pk, "out")
    )
    outcome = ask_graph(user=alice, question="path from Restore runbook to Release Checklist")
    assert not outcome.answered and "a path between two documents" in outcome.message


def test_model_unknown_seed_is_refused(alice, bob, graph, fake_llm):
    theirs = factories.note(bob, "Bob secret plan", "bob only")
    for seed in (theirs.pk, 90001):  # another user's document; the prompt's example id
        fake_llm.reply(lookups("Backup Policy")).reply(neighbours(seed))
        outcome = ask_graph(user=alice, question="What links to Backup Policy?")
        assert not outcome.answered and outcome.result is None
        assert f"query.seed: {seed} is not one of the documents the lookups found" in (
            outcome.message
        )
        assert "Bob secret plan" not in json.dumps(outcome.as_dict())


def test_model_five_hops_is_refused(alice, graph, fake_llm):
    fake_llm.reply(lookups("Restore runbook", "Release Checklist")).reply(
        {"query": {"op": "path", "from": graph.runbook.pk, "to": graph.checklist.pk, "max_hops": 5}}
    )
    outcome = ask_graph(
        user=alice, question="How is Restore runbook connected to Release Checklist?"
    )
    assert not outcome.answered and outcome.result is None
    assert "a path has 1 to 4 hops" in outcome.message


def test_model_endpoint_failure_is_a_refusal_with_one_row_per_attempt(alice, graph, fake_llm):
    fake_llm.fail(500).fail(500).fail(500)
    outcome = ask_graph(user=alice, question="What links to Backup Policy?")
    assert not outcome.answered and "failed after 3 attempts" in outcome.message
    assert EgressLog.objects.count() == 3 and len(fake_llm.requests) == 3


def test_model_no_egress_candidates_are_withheld(alice, graph, fake_llm):
    secret = factories.note(
        alice, "Backup vendor contract", "Contract ZEBRA-7781 for backups.", no_egress=True
    )
    fake_llm.reply(lookups("Backup Policy", "Backup vendor contract")).reply(neighbours(secret.pk))
    outcome = ask_graph(user=alice, question="What links to the backup vendor contract?")
    sent = b"".join(r.body for r in fake_llm.requests)
    assert (
        b"ZEBRA-7781" not in sent
        and b"Backup vendor contract" not in sent.split(b"BEGIN CANDIDATES")[1]
    )
    assert {"document_id": secret.pk, "label": "present, withheld from cloud synthesis"} in (
        outcome.withheld
    )
    # The model never saw it, so it cannot be the seed.
    assert not outcome.answered and "is not one of the documents" in outcome.message
    row = EgressLog.objects.order_by("id").last()
    assert secret.pk not in {i["document_id"] for i in row.items} and row.withheld_count >= 1


def test_model_every_candidate_withheld_falls_back_to_the_rules(alice, fake_llm):
    secret = factories.note(alice, "Vendor contract", "private", no_egress=True)
    factories.note(alice, "Vendor list", "See [[Vendor contract]].")
    Document.objects.filter(title="Vendor list").update(no_egress=True)
    fake_llm.reply(lookups("Vendor contract"))
    outcome = ask_graph(user=alice, question="what links to Vendor contract")
    assert len(fake_llm.requests) == 1  # stage 2 never sent
    assert outcome.answered and outcome.path == "rules" and outcome.query["seed"] == secret.pk
    assert "fallback" in outcome.trace and outcome.trace["stages"][0]["stage"] == "lookups"


def test_model_requests_are_redacted(alice, fake_llm):
    target = factories.note(alice, "Vault notes", "db_password = S3cr3t-Value-991x")
    fake_llm.reply(lookups("Vault notes")).reply(neighbours(target.pk))
    outcome = ask_graph(user=alice, question="What links to Vault notes?", inputs=True)
    assert outcome.answered
    sent = b"".join(r.body for r in fake_llm.requests)
    assert b"S3cr3t-Value-991x" not in sent and b"[REDACTED:" in sent
    assert EgressLog.objects.order_by("id").last().redaction_count >= 1
    # inputs=True: the complete (redacted) messages of each stage come back.
    assert [m["role"] for m in outcome.trace["stages"][1]["messages"]] == ["system", "user"]


def test_model_lookups_that_find_nothing_stop_before_stage_two(alice, graph, fake_llm):
    fake_llm.reply(lookups("Quarterly zeppelin inventory"))
    outcome = ask_graph(user=alice, question="What links to the zeppelin inventory?")
    assert not outcome.answered and len(fake_llm.requests) == 1
    assert outcome.message.startswith("Nothing you can see matches the lookups")
    assert EgressLog.objects.count() == 1
