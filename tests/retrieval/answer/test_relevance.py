"""The relevance step: features of a question × claim pair, the fitted model in
retrieval/data/relevance.json, the gate step that drops a verified quote that does not answer
the question, its degraded paths (dead embedding model, unreadable weights) and the LLM judge's
relevance question. The fit itself is tested in tests/training/."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from notes import services
from notes.models import Document
from retrieval.answer.ask import claim_candidate, gate_claims
from retrieval.answer.gate import (
    NOT_AN_ANSWER,
    STEP_COUPLING,
    STEP_RELEVANCE,
    relevance_verdict,
)
from retrieval.answer.relevance import scoring
from retrieval.answer.relevance.candidate import Candidate
from retrieval.answer.relevance.claim_types import answer_types, is_decision, is_step, number_near
from retrieval.answer.relevance.egress_floor import item_relevance
from retrieval.answer.relevance.features import FALLBACK_FEATURE_NAMES, FEATURE_NAMES, features
from retrieval.answer.relevance.model import (
    FALLBACK_MODEL,
    FULL_MODEL,
    RELEVANCE_FILE,
    RelevanceModel,
    RelevanceUnavailable,
    load_model,
    read_model,
)
from retrieval.answer.relevance.question import question_profile
from retrieval.answer.relevance.rarity import DF_CAP, IdfTable
from retrieval.answer.relevance.scoring import score_candidates, score_pairs
from retrieval.answer.relevance.section_rule import section_answers
from retrieval.answer.types import Claim, ClaimVerdict, EvidencePack, Support
from retrieval.eligibility import audience_for
from retrieval.models import EgressLog
from tests.factories import ScriptedAnswerer, pack_of

NIGERIA = "How many medical schools are there in Nigeria?"
# A near-topic quote: verified, on topic, and no answer.
SUB_SAHARAN = (
    "Of the 47 countries of sub-Saharan Africa surveyed, nine had only one medical school "
    "and eleven had none."
)
NIGERIA_ANSWER = "Nigeria has 44 accredited medical schools, the most of any African country."

BACKUP_ANSWER = (
    "The nightly backups run at 03:30 UTC since the ops sync of 15 September; they used to "
    "start at 02:00 UTC."
)
BESIDE_THE_POINT = "The bucket has versioning enabled."
RUNBOOK = (
    "# Backups\n\n"
    f"## Schedule\n\n{BACKUP_ANSWER}\n\n"
    f"## Storage\n\nBackups are kept for thirty days in the ops bucket. {BESIDE_THE_POINT}\n"
)
# A small library around the runbook, so words are weighed by a realistic rarity.
LIBRARY = {
    "PgBouncer runbook": (
        "# PgBouncer runbook\n\nPgBouncer listens on port 6432 on every application host. "
        "The pool mode is transaction.\n\n## Restart\n\nRestart it with systemctl.\n"
    ),
    "Redis": "# Redis\n\nThe cache uses maxmemory-policy allkeys-lru. Sentinels watch it.\n",
    "Deploy runbook": (
        "# Deploy runbook\n\nRotate the staging certs with certbot before Friday.\n\n"
        "## Timeouts\n\nThe staging timeout is 30 seconds.\n"
    ),
    "Banana bread": "# Banana bread\n\nBake at 180 degrees for fifty minutes.\n",
}


def column(name: str) -> int:
    return FEATURE_NAMES.index(name)


# --- the question's type ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "kind", "focus"),
    [
        (NIGERIA, "count", ("school",)),
        ("How many people donated blood in Australia last year?", "count", ("peopl",)),
        ("How much memory does redis get?", "count", ("memori",)),
        ("How long is the retention?", "count", ()),
        ("When do the nightly backups run now?", "time", ()),
        ("What time does the backup start?", "time", ("time",)),
        ("Who is on call this week?", "person", ()),
        ("Which team owns the failover?", "person", ("team",)),
        ("Where are the backups stored?", "place", ()),
        ("Which host runs pgbouncer?", "place", ("host",)),
        ("Why did the replica lag?", "reason", ()),
        ("Which port does pgbouncer listen on?", "count", ("port",)),
        ("Which storage engine do we use?", "focus", ("engin",)),
        ("What did we decide about backups?", "", ()),
        ("How do I promote the replica during a failover?", "", ()),
        ("Vitamin D deficiency increases the risk of fractures.", "", ()),
    ],
)
def test_question_kind_and_focus(question, kind, focus):
    profile = question_profile(question)
    assert (profile.kind, profile.focus) == (kind, focus)


def test_content_words_drop_question_glue_and_time_of_asking_fillers():
    profile = question_profile("When do the nightly backups run now, currently?")
    assert profile.content_stems == ("night", "backup", "run")


@pytest.mark.parametrize(
    ("question", "intent"),
    [
        ("What did we decide about backups?", "decision"),
        ("What was the outcome on Redis persistence?", "decision"),
        ("Which option did we choose for search?", "decision"),
        ("By when do we have to decide on ShipBridge?", ""),  # a time question first
        ("How do I promote the replica during a failover?", "procedure"),
        ("how do we fence the old primary", "procedure"),
        ("How to roll back a deploy", "procedure"),
        ("How should I name the incident slack channel?", "procedure"),
        ("How does the replica catch up?", ""),  # how something works, not what to do
        ("How many replicas do we run?", ""),
        ("What is our RTO?", ""),
    ],
)
def test_question_intent(question, intent):
    assert question_profile(question).intent == intent


@pytest.mark.parametrize(
    ("text", "step"),
    [
        ("Run `pg_ctl promote` on the standby host.", True),
        ("Stop writes on the primary and fence it.", True),
        ("Point PgBouncer at the new primary and reload it.", True),
        ("The replica was promoted at 14:02 by Mei.", False),
        ("Promotion takes about a minute.", False),
    ],
)
def test_a_step_reads_as_an_instruction(text, step):
    assert is_step(text) is step


@pytest.mark.parametrize(
    ("text", "context", "decision"),
    [
        ("The nightly backups moved from 02:00 to 03:30 UTC.", "Ops sync > Decisions", True),
        ("Backup alerts went to email only.", "Ops sync > Backups", False),
        ("We agreed to keep six full backups.", "Ops sync > Backups", True),
        ("Backups are kept for 30 days in the S3 bucket.", "Backup runbook", True),  # "kept"
        ("Restore drills run every quarter.", "Backup runbook", False),
    ],
)
def test_a_decision_is_recorded_under_its_heading_or_said(text, context, decision):
    assert is_decision(text, context) is decision


def test_intent_features_fire_only_for_their_intent():
    step = Candidate("Run `pg_ctl promote` on the standby host.", heading_path="Promote")
    decided = Candidate("Backups moved to 03:30 UTC.", heading_path="Decisions")
    procedure = features(
        question_profile("How do I promote the replica?"), [step], IdfTable(), None
    )
    assert procedure[0, column("procedure")] == 1.0 and procedure[0, column("step_match")] == 1.0
    assert procedure[0, column("decision_match")] == 0.0
    decision = features(
        question_profile("What did we decide about backups?"), [decided, step], IdfTable(), None
    )
    assert decision[0, column("decision")] == 1.0 and decision[0, column("decision_match")] == 1.0
    assert decision[1, column("decision_match")] == 0.0 and decision[1, column("step_match")] == 0.0


# --- the claim's answer types -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "present", "absent"),
    [
        ("There are 44 medical schools.", {"count"}, {"time"}),
        ("Nine countries had one school.", {"count"}, set()),
        ("Backups moved from 02:00 to 03:30 UTC.", {"time", "count"}, set()),
        ("The audit is due on 2026-11-30.", {"time"}, set()),
        ("Maintenance happens every Tuesday night.", {"time"}, {"count"}),
        ("Ask @maria about it.", {"person"}, set()),
        ("The on-call engineer owns the failover.", {"person"}, set()),
        ("Dumps are written to /var/backups/pg.", {"place"}, set()),
        ("It runs on db-01.internal.example.com.", {"place"}, set()),
        ("It failed because the certificate expired.", {"reason"}, set()),
        ("Use the replica.", set(), {"count", "time", "person", "place", "reason"}),
    ],
)
def test_answer_types(text, present, absent):
    found = answer_types(text)
    assert present <= found and not (absent & found)


def test_a_digit_inside_a_word_is_not_a_number():
    assert "count" not in answer_types("Copy it to s3 with the ext4 tools.")


def test_number_near_the_counted_thing():
    assert number_near("Nigeria has 44 accredited medical schools.", ["school"])
    assert not number_near(
        "In 2019 the ministry said that the new accredited private medical schools", ["school"]
    )
    assert not number_near("There are 44 hospitals.", ["school"])


# --- features -----------------------------------------------------------------------------------


def test_coverage_idf_coverage_and_the_rarest_missing_word():
    profile = question_profile(NIGERIA)  # medic, school, nigeria
    idf = IdfTable(passages=1000, df={"medic": 100, "school": 100, "nigeria": 1})
    x = features(
        profile, [Candidate(SUB_SAHARAN), Candidate(NIGERIA_ANSWER)], idf, [(0.5, 0.5), (0.7, 0.7)]
    )
    near, answer = x[0], x[1]
    assert near[column("coverage")] == pytest.approx(2 / 3)
    assert answer[column("coverage")] == pytest.approx(1.0)
    # "Nigeria" is the rare word: missing it costs far more than a third of the weight.
    assert near[column("idf_coverage")] < 0.5 < near[column("coverage")]
    assert near[column("missing_max_idf")] == pytest.approx(1.0)
    assert answer[column("missing_max_idf")] == 0.0
    assert near[column("cosine")] == 0.5 and answer[column("cosine")] == 0.7
    # A how-many question: both count schools ("only one medical school" is a count too, of
    # another thing: the lexical cue cannot tell); what gives the near one away is "Nigeria".
    assert near[column("typed")] == answer[column("typed")] == 1.0
    assert near[column("type_match")] == answer[column("type_match")] == 1.0
    assert near[column("count_near")] == answer[column("count_near")] == 1.0
    elsewhere = features(profile, [Candidate("Nigeria has 44 hospitals.")], idf, None)
    assert elsewhere[0, column("count_near")] == 0.0


def test_a_missing_answer_type_is_seen():
    x = features(
        question_profile("When do the nightly backups run?"),
        [Candidate("The backups are stored in the ops bucket.")],
        IdfTable(),
        None,
    )
    assert x[0, column("typed")] == 1.0 and x[0, column("type_match")] == 0.0
    assert x[0, column("cosine")] == 0.0  # no embedding: the column is empty


def test_heading_match_counts_words_of_the_heading_path_and_title():
    profile = question_profile("How do I promote the replica during a failover?")
    in_heading = Candidate(
        "Run pg_ctl promote on the standby.",
        title="PostgreSQL failover",
        heading_path="Promote the replica",
    )
    bare = Candidate("Run pg_ctl promote on the standby.")
    x = features(profile, [in_heading, bare], IdfTable(), None)
    assert x[0, column("heading_coverage")] == 1.0  # promot, replica, failov ("during": glue)
    assert x[1, column("heading_coverage")] == 0.0
    assert x[0, column("context_idf_coverage")] > x[1, column("context_idf_coverage")]
    assert x[0, column("coverage")] == x[1, column("coverage")]  # the sentence alone is equal


def test_focus_in_text_or_only_in_the_heading():
    profile = question_profile("Which port does pgbouncer listen on?")
    x = features(
        profile,
        [
            Candidate("pgbouncer listens on port 6432."),
            Candidate("It listens on 6432.", heading_path="Port"),
            Candidate("pgbouncer pools connections."),
        ],
        IdfTable(),
        None,
    )
    assert list(x[:, column("has_focus")]) == [1.0, 1.0, 1.0]
    assert list(x[:, column("focus_in_text")]) == [1.0, 0.0, 0.0]
    assert list(x[:, column("focus_in_context")]) == [0.0, 1.0, 0.0]


def test_rank_feature_reads_pinned_as_the_best_rank():
    x = features(
        question_profile("backups"),
        [Candidate("backups", rank=0), Candidate("backups", rank=1), Candidate("backups", rank=4)],
        IdfTable(),
        None,
    )
    assert list(x[:, column("rank_rr")]) == [1.0, 1.0, 0.25]


def test_idf_table_caps_counts_and_weighs_unknown_words_as_rarest():
    table = IdfTable(passages=10_000, df={"common": 9_000, "rare": 2})
    assert table.idf("common") == pytest.approx(math.log(10_001 / (DF_CAP + 0.5)))
    assert table.idf("unseen") > table.idf("rare") > table.idf("common") > 0
    assert IdfTable().idf("anything") == 1.0


# --- the model file -----------------------------------------------------------------------------


def test_the_shipped_model_loads_with_the_files_thresholds_and_features():
    data = json.loads(RELEVANCE_FILE.read_text(encoding="utf-8"))
    model = load_model()
    assert model.full.threshold == data["models"][FULL_MODEL]["threshold"]
    assert model.fallback.threshold == data["models"][FALLBACK_MODEL]["threshold"]
    assert model.full.feature_names == FEATURE_NAMES
    assert model.fallback.feature_names == FALLBACK_FEATURE_NAMES
    assert model.version == data["version"] and data["fitted_on"]["split"] == "tune"
    assert 0.0 < model.full.threshold < 1.0


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: "{not json",
        lambda d: json.dumps({**d, "models": {}}),
        lambda d: json.dumps(
            {**d, "models": {**d["models"], "full": {**d["models"]["full"], "weights": [1.0]}}}
        ),
        lambda d: json.dumps(
            {**d, "models": {**d["models"], "full": {**d["models"]["full"], "threshold": 1.5}}}
        ),
        lambda d: json.dumps(
            {
                **d,
                "models": {
                    **d["models"],
                    "full": {**d["models"]["full"], "feature_names": ["cosine"]},
                },
            }
        ),
    ],
)
def test_a_damaged_weights_file_is_unavailable_not_a_crash(tmp_path, damage):
    data = json.loads(RELEVANCE_FILE.read_text(encoding="utf-8"))
    path = tmp_path / "relevance.json"
    path.write_text(damage(data), encoding="utf-8")
    with pytest.raises(RelevanceUnavailable):
        read_model(path)


# --- scoring with the real model ------------------------------------------------------------------


def test_the_near_topic_quote_fails_while_a_true_answer_passes():
    idf = IdfTable(passages=5000, df={"medic": 300, "school": 120, "nigeria": 2})
    title = "Medical education in Africa"
    issue_quote = (
        "PARTICIPANTS Nine sub-Saharan African countries with an HIV prevalence of 5% or greater "
        "and with at least one medical school."
    )
    candidates = [Candidate(t, title=title, rank=1) for t in (issue_quote, SUB_SAHARAN)]
    candidates.append(Candidate(NIGERIA_ANSWER, title=title, rank=1))
    scored = score_pairs(NIGERIA, candidates, idf=idf)
    assert scored.model == FULL_MODEL and scored.note == ""
    *near, answer = scored.scores
    assert max(near) < scored.threshold <= answer


def test_score_candidates_ranks_the_answer_first_one_score_each():
    candidates = [
        Candidate("Backups are kept for thirty days in the ops bucket.", rank=2),
        Candidate(BACKUP_ANSWER, rank=1),
        Candidate(BESIDE_THE_POINT, rank=2),
    ]
    scores = score_candidates("When do the nightly backups run now?", candidates)
    assert len(scores) == 3 and all(0.0 <= s <= 1.0 for s in scores)
    assert max(range(3), key=scores.__getitem__) == 1
    assert score_candidates("When do backups run?", []) == []


# --- the gate step ------------------------------------------------------------------------------


def passed(text: str) -> ClaimVerdict:
    return ClaimVerdict(
        claim=Claim(text=text, support=(Support(version_id=1, quoted_span=text),)),
        passed=True,
        step=STEP_COUPLING,
        reason="every payload word of the claim is in span 1",
    )


def test_relevance_verdict_is_pure_and_records_the_score():
    kept = relevance_verdict(passed("a"), 0.8, 0.5)
    assert kept.passed and kept.step == STEP_COUPLING and kept.relevance_score == 0.8
    dropped = relevance_verdict(passed("a"), 0.2, 0.5)
    assert not dropped.passed and dropped.step == STEP_RELEVANCE
    assert dropped.reason.startswith(NOT_AN_ANSWER)
    assert "0.20" in dropped.reason and "0.50" in dropped.reason
    assert dropped.relevance_score == 0.2
    assert not relevance_verdict(passed("a"), math.nan, 0.5).passed  # fail closed
    failed = ClaimVerdict(claim=passed("a").claim, passed=False, step="verbatim", reason="x")
    assert relevance_verdict(failed, 0.9, 0.5) is failed


def test_a_verdict_round_trips_with_its_relevance_score_and_omits_it_when_none():
    verdict = relevance_verdict(passed("a"), 0.75, 0.5)
    assert ClaimVerdict.from_dict(json.loads(json.dumps(verdict.as_dict()))) == verdict
    assert "relevance_score" not in passed("a").as_dict()


def test_a_section_match_keeps_a_claim_below_the_threshold_and_says_so():
    kept = relevance_verdict(passed("a"), 0.2, 0.5, section_match=True)
    assert kept.passed and kept.section_match and kept.relevance_score == 0.2
    assert ClaimVerdict.from_dict(json.loads(json.dumps(kept.as_dict()))) == kept
    assert "section_match" not in relevance_verdict(passed("a"), 0.8, 0.5).as_dict()
    # recorded above the threshold too, so an offline replay at any threshold keeps it
    assert relevance_verdict(passed("a"), 0.8, 0.5, section_match=True).section_match
    # no usable score still fails closed
    assert not relevance_verdict(passed("a"), math.nan, 0.5, section_match=True).passed


PROMOTE_STEP = Candidate(
    text="Run `pg_ctl promote` on the standby host.",
    title="Database runbook",
    heading_path="Failover > Promote the replica",
)


@pytest.mark.parametrize(
    ("question", "candidate", "expected"),
    [
        ("How do I promote the replica during a failover?", PROMOTE_STEP, True),
        ("How to promote the replica?", PROMOTE_STEP, True),
        # one question word the headings do not hold: a near-topic question, not this section
        ("How do I promote the replica in staging?", PROMOTE_STEP, False),
        ("How do I promote the Redis replica?", PROMOTE_STEP, False),
        # not a procedure question
        ("Why do we promote the replica during a failover?", PROMOTE_STEP, False),
        ("When was the replica promoted?", PROMOTE_STEP, False),
        # a single content word names too little to pin a section
        ("How do I promote?", PROMOTE_STEP, False),
        # not a step
        (
            "How do I promote the replica during a failover?",
            replace(PROMOTE_STEP, text="The replica lags by a few seconds."),
            False,
        ),
        # the words only in the title, which every section of the document shares
        (
            "How do I promote the replica?",
            replace(PROMOTE_STEP, title="Promote the replica", heading_path="Rollback"),
            False,
        ),
        ("How do I promote the replica?", replace(PROMOTE_STEP, heading_path=""), False),
    ],
)
def test_a_procedure_question_is_answered_by_a_step_of_the_section_named_for_it(
    question: str, candidate: Candidate, expected: bool
):
    assert section_answers(question_profile(question), candidate) is expected


@pytest.fixture
def backups(alice) -> Document:
    for title, body in LIBRARY.items():
        services.note_create(owner=alice, title=title, body=body)
    return services.note_create(owner=alice, title="Backups", body=RUNBOOK)


def backup_claims(document: Document) -> list[Claim]:
    return [
        Claim(text=t, support=(Support(version_id=document.head_id, quoted_span=t),))
        for t in (BACKUP_ANSWER, BESIDE_THE_POINT)
    ]


def ranked_pack(document: Document) -> EvidencePack:
    """The document's passages as a pack, ranked 1, 2, … in document order."""
    pack = pack_of(document)
    pack.items = [replace(item, rank=i) for i, item in enumerate(pack.items, start=1)]
    return pack


def run_gate_step(alice, document: Document, question: str, notes: list[str]):
    pack = ranked_pack(document)
    bodies = {document.head_id: document.head.body}
    return gate_claims(
        backup_claims(document),
        bodies,
        scorer=None,
        egress=None,
        question=question,
        pack=pack,
        audience=audience_for(alice.pk),
        notes=notes,
    )


@pytest.mark.django_db
def test_gate_claims_drops_a_verified_quote_that_does_not_answer(alice, backups):
    notes: list[str] = []
    answer, beside = run_gate_step(alice, backups, "When do the nightly backups run now?", notes)
    threshold = load_model().full.threshold
    assert answer.passed and answer.relevance_score >= threshold
    assert not beside.passed and beside.step == STEP_RELEVANCE
    assert beside.reason.startswith(NOT_AN_ANSWER) and beside.relevance_score < threshold
    assert f"{threshold:.2f}" in beside.reason
    assert notes == []


@pytest.mark.django_db
def test_a_claim_takes_the_heading_path_and_rank_of_the_item_it_quotes(alice, backups):
    pack = ranked_pack(backups)
    claims = backup_claims(backups)
    bodies = {backups.head_id: backups.head.body}
    first = claim_candidate(claims[0], pack, bodies)
    second = claim_candidate(claims[1], pack, bodies)
    assert first.title == "Backups" and "Schedule" in first.heading_path
    assert "Storage" in second.heading_path and second.rank > first.rank
    orphan = Claim(text="x", support=(Support(version_id=999_999, quoted_span="x"),))
    assert claim_candidate(orphan, pack, bodies).rank == len(pack.items) + 1


@pytest.mark.django_db
def test_a_dead_embedding_model_degrades_to_the_fallback_model_and_says_so(
    alice, backups, settings, tmp_path
):
    from retrieval.index.embeddings import reset_embedders

    settings.LODE_MODEL_DIR = str(tmp_path / "no-model-here")
    reset_embedders()
    try:
        notes: list[str] = []
        answer, beside = run_gate_step(
            alice, backups, "When do the nightly backups run now?", notes
        )
    finally:
        reset_embedders()
    fallback = load_model().fallback
    assert len(notes) == 1 and "without the embedding model" in notes[0]
    assert "model folder missing" in notes[0]
    for verdict in (answer, beside):
        score = verdict.relevance_score
        assert score is not None and verdict.passed == (score >= fallback.threshold)
    # Without the embedding the fallback is stricter (its threshold was chosen on data too):
    # it still tells the answer from the quote beside the point, and says which model dropped.
    assert answer.relevance_score > beside.relevance_score
    assert not beside.passed and "no-embedding model" in beside.reason


@pytest.mark.django_db
def test_unreadable_weights_fail_closed(alice, backups, monkeypatch):
    def broken() -> RelevanceModel:
        raise RelevanceUnavailable("the relevance weights (relevance.json) are unreadable")

    monkeypatch.setattr("retrieval.answer.ask.load_model", broken)
    notes: list[str] = []
    verdicts = run_gate_step(alice, backups, "When do the nightly backups run now?", notes)
    assert all(not v.passed and v.step == STEP_RELEVANCE for v in verdicts)
    assert all("could not check that it answers the question" in v.reason for v in verdicts)
    assert notes and "unavailable" in notes[0]


@pytest.mark.django_db
def test_the_ask_drops_the_near_topic_claim_and_shows_the_answer(alice, backups):
    from retrieval.answer.ask import ask

    claims = backup_claims(backups)
    outcome = ask(
        user=alice,
        question="When do the nightly backups run now?",
        answerer=ScriptedAnswerer(claims),
        mode="lexical",
    )
    assert [c.text for c in outcome.claims] == [claims[0].text]
    (dropped,) = outcome.dropped
    assert dropped.step == STEP_RELEVANCE and dropped.reason.startswith(NOT_AN_ANSWER)
    stored = outcome_trace_gate(outcome.trace_id)
    assert [v["step"] for v in stored] == [STEP_COUPLING, STEP_RELEVANCE]
    assert all(isinstance(v["relevance_score"], float) for v in stored)


def outcome_trace_gate(trace_id: int) -> list[dict]:
    from retrieval.models import AskTrace

    return AskTrace.objects.get(pk=trace_id).trace["gate"]


# --- the LLM judge's relevance question ----------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(("reply", "shown"), [('{"answers": true}', 1), ('{"answers": false}', 0)])
def test_the_llm_judge_is_asked_whether_the_claim_answers(
    alice, backups, fake_llm, settings, reply, shown
):
    from retrieval.answer.ask import ask

    settings.LODE_ENTAILMENT = "llm-judge"
    answer = backup_claims(backups)[0]  # couples: only the relevance question is asked
    fake_llm.reply(reply)
    outcome = ask(
        user=alice,
        question="When do the nightly backups run now?",
        answerer=ScriptedAnswerer([answer]),
        mode="lexical",
    )
    (request,) = fake_llm.requests
    assert "Does the statement answer the question?" in request.message("user")
    assert answer.text in request.message("user")
    assert request.json["response_format"]["json_schema"]["name"] == "relevance_judgement"
    assert EgressLog.objects.get().purpose == "judge"
    assert len(outcome.claims) == shown
    if not shown:
        (dropped,) = outcome.dropped
        assert dropped.step == STEP_RELEVANCE
        assert dropped.reason.startswith(f"{NOT_AN_ANSWER}: the LLM judge")


@pytest.mark.django_db
def test_a_failing_relevance_judge_drops_the_claim(alice, backups, fake_llm, settings):
    from retrieval.answer.ask import ask

    settings.LODE_ENTAILMENT = "llm-judge"
    fake_llm.reply('{"something": "else"}')
    outcome = ask(
        user=alice,
        question="When do the nightly backups run now?",
        answerer=ScriptedAnswerer([backup_claims(backups)[0]]),
        mode="lexical",
    )
    assert outcome.claims == []
    (dropped,) = outcome.dropped
    assert dropped.step == STEP_RELEVANCE and "the LLM judge" in dropped.reason


@pytest.mark.django_db
def test_an_embedding_failing_mid_inference_falls_back_like_a_dead_model(monkeypatch):
    def failing(question: str, texts: list[str]) -> list[float]:
        raise RuntimeError("onnxruntime: bad allocation")

    monkeypatch.setattr(scoring, "embedding_cosines", failing)
    scored = scoring.score_pairs(
        "When do the nightly backups run?", [Candidate(text="Backups run at 03:30 UTC.")]
    )
    assert scored.model == FALLBACK_MODEL and "bad allocation" in scored.note
    assert len(scored.scores) == 1 and 0.0 < scored.scores[0] < 1.0


def test_an_override_moves_the_fallback_threshold_by_the_same_log_odds(settings):
    model = load_model()
    settings.LODE_RELEVANCE_THRESHOLD = None
    assert scoring.threshold_of(model.fallback, model.full) == model.fallback.threshold
    settings.LODE_RELEVANCE_THRESHOLD = 0.6
    assert scoring.threshold_of(model.full, model.full) == pytest.approx(0.6)
    moved = scoring.threshold_of(model.fallback, model.full)
    logit = scoring._logit
    assert logit(moved) - logit(model.fallback.threshold) == pytest.approx(
        logit(0.6) - logit(model.full.threshold)
    )
    # The fallback stays stricter than the full model whatever the override.
    assert moved > 0.6


@pytest.mark.django_db
def test_item_relevance_scores_every_item_even_behind_a_long_pinned_note(alice):
    body = "\n\n".join(f"Filler paragraph number {n} about nothing much." for n in range(200))
    pinned = services.note_create(owner=alice, title="Long pinned note", body=body)
    answer = services.note_create(
        owner=alice, title="Backups", body="The nightly backups run at 03:30 UTC."
    )
    pack = pack_of(pinned, answer)
    scores = item_relevance(
        "When do the nightly backups run?", pack.items, audience=audience_for(alice.pk)
    )
    answering = pack.items[-1].passage_id
    assert answering in scores and all(math.isfinite(v) for v in scores.values())
    assert scores[answering] == max(scores.values())


def test_the_embedded_text_carries_the_heading_path_never_the_title():
    from retrieval.answer.relevance.features import embedding_text

    step = Candidate("Run `pg_ctl promote`.", title="Database runbook", heading_path="Promote")
    assert embedding_text(step) == "Promote\nRun `pg_ctl promote`."
    assert embedding_text(Candidate("Plain.", title="Title")) == "Plain."


def test_cosine_pairs_embed_each_distinct_text_once_in_one_call():
    from retrieval.answer.relevance.features import cosine_pairs

    calls: list[list[str]] = []

    def cosines_of(texts: list[str]) -> list[float]:
        calls.append(texts)
        return [len(t) / 100 for t in texts]

    step = Candidate("Run it.", heading_path="Promote")
    plain = Candidate("Plain.")
    pairs = cosine_pairs([step, plain, plain], cosines_of)
    assert calls == [["Run it.", "Plain.", "Promote\nRun it."]]
    assert pairs == [(0.07, 0.15), (0.06, 0.06), (0.06, 0.06)]  # "Promote\nRun it.": 15
