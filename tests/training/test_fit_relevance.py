"""`training/fit_relevance.py`: the relevance scorer's fit, end to end on a tiny fixture with
the bundled embedding model, writing weights the product's loader reads; and what it leaves
out of the fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval.answer.relevance.model import FULL_MODEL, read_model
from training import fit_relevance
from training.fit_relevance import Corpus, Doc, Question, quotable

RUNBOOK = (
    "# Backups\n\n"
    "## Schedule\n\nThe nightly backups run at 03:30 UTC since the ops sync of 15 September; "
    "they used to start at 02:00 UTC.\n\n"
    "## Storage\n\nBackups are kept for thirty days in the ops bucket. "
    "The bucket has versioning enabled.\n"
)


def write_fixture(root: Path) -> dict[str, Path]:
    """A five-abstract SciFact, a two-note corpus and two question sets (tune and holdout)."""
    scifact = root / "scifact"
    scifact.mkdir()
    abstracts = [
        (1, "Vitamin D and fractures", "Vitamin D lowers fracture risk in adults.|"
         "We enrolled 400 adults.|Follow-up was two years."),
        (2, "Statins and the heart", "Statins reduce cardiac events.|The trial ran in Ohio.|"
         "Dropout was low."),
        (3, "Sleep and memory", "Sleep improves memory consolidation.|"
         "Subjects slept eight hours.|Tests were verbal."),
        (4, "Coffee and liver", "Coffee protects against liver fibrosis.|"
         "Cohorts came from Italy.|Intake was self-reported."),
        (5, "Exercise and mood", "Exercise reduces depressive symptoms.|"
         "Sessions lasted one hour.|Mood was self-rated."),
    ]  # fmt: skip
    with (scifact / "corpus.jsonl").open("w") as handle:
        for doc_id, title, sentences in abstracts:
            row = {"doc_id": doc_id, "title": title, "abstract": sentences.split("|")}
            handle.write(json.dumps({**row, "structured": False}) + "\n")
    # (claim id, claim, cited abstract, rationale sentence or None for "not enough info")
    claims = [
        (1, "Vitamin D lowers the risk of fracture.", 1, 0),
        (2, "Statins reduce cardiac events.", 2, 0),
        (3, "Sleep improves memory.", 3, 0),
        (4, "Coffee protects the liver.", 4, 0),
        (5, "Exercise reduces depression.", 5, 0),
        (6, "Vitamin D trials enrolled children.", 1, None),
        (7, "Statin trials ran in Ohio.", 2, 1),
        (8, "Coffee cohorts came from Italy.", 4, 1),
        (9, "Sleep studies used verbal tests.", 3, 2),
        (10, "Exercise sessions lasted one hour.", 5, 1),
    ]
    with (scifact / "claims_train.jsonl").open("w") as handle:
        for claim_id, text, doc_id, sentence in claims:
            evidence = (
                {}
                if sentence is None
                else {str(doc_id): [{"sentences": [sentence], "label": "SUPPORT"}]}
            )
            row = {"id": claim_id, "claim": text, "evidence": evidence, "cited_doc_ids": [doc_id]}
            handle.write(json.dumps(row) + "\n")
    notes = root / "notes"
    (notes / "runbooks").mkdir(parents=True)
    (notes / "runbooks" / "backups.md").write_text(RUNBOOK)
    (notes / "runbooks" / "redis.md").write_text(
        "# Redis\n\nThe cache uses maxmemory-policy allkeys-lru. Redis listens on port 6379.\n"
    )
    questions = root / "questions"
    questions.mkdir()
    answerable = [
        ("When do the nightly backups run?", "runbooks/backups.md", "03:30 UTC", "tune"),
        ("How long are backups kept?", "runbooks/backups.md", "thirty days", "tune"),
        ("Which port does redis listen on?", "runbooks/redis.md", "port 6379", "tune"),
        ("What eviction policy does the cache use?", "runbooks/redis.md", "allkeys-lru", "holdout"),
    ]
    with (questions / "notes_answerable.jsonl").open("w") as handle:
        for question, file, answer, split in answerable:
            row = {"question": question, "file": file, "answer": answer, "split": split}
            handle.write(json.dumps(row) + "\n")
    unanswerable = [
        ("How many backups failed last year?", "tune"),
        ("Who restores the redis cache?", "tune"),
        ("Where is the backup bucket hosted?", "holdout"),
    ]
    with (questions / "notes_unanswerable.jsonl").open("w") as handle:
        for question, split in unanswerable:
            handle.write(json.dumps({"question": question, "split": split}) + "\n")
    scifact_sets = {
        "scifact_answerable": [
            {"question": "In which state did the statin trial run?", "split": "tune",
             "doc_id": 2, "sentences": [1]},
            {"question": "How long was the vitamin D follow-up?", "split": "holdout",
             "doc_id": 1, "sentences": [2]},
        ],
        "scifact_unanswerable": [
            {"question": "How many coffee drinkers were in the cohorts?", "split": "tune"},
            {"question": "Which statin dose was used?", "split": "holdout"},
        ],
    }  # fmt: skip
    for name, rows in scifact_sets.items():
        with (questions / f"{name}.jsonl").open("w") as handle:
            for n, row in enumerate(rows):
                handle.write(json.dumps({"id": f"{name}-{n}", **row}) + "\n")
    return {"scifact": scifact, "notes": notes, "questions": questions}


@pytest.mark.slow
def test_the_fit_writes_weights_the_product_loads_and_never_reads_holdout_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = write_fixture(tmp_path)
    out = tmp_path / "relevance.json"
    seen: list[str] = []
    real = fit_relevance.candidates_for

    def recording(question, corpus, k):
        seen.append(question.split)
        return real(question, corpus, k)

    monkeypatch.setattr(fit_relevance, "candidates_for", recording)
    common = [
        "--scifact", str(paths["scifact"]),
        "--questions", str(paths["questions"]),
        "--notes-corpus", str(paths["notes"]),
        "--offtopic", str(tmp_path / "none.txt"),
        "--offtopic-holdout", str(tmp_path / "none.txt"),
        "--cache", str(tmp_path / "cache.npz"),
        "--out", str(out),
        "--top-k", "3",
        "--scifact-top-k", "2",
    ]  # fmt: skip
    assert fit_relevance.main(["fit", *common]) == 0
    assert set(seen) == {"tune"}
    model = read_model(out)
    data = json.loads(out.read_text())
    assert data["fitted_on"]["sets"] == {
        "notes_answerable": 3,
        "notes_unanswerable": 2,
        "scifact_answerable": 1,
        "scifact_claims": 10,
        "scifact_unanswerable": 1,
    }
    assert data["fitted_on"]["positives"] > 0
    # The threshold is the data's: no tune near-topic question is answered out of fold.
    table = data["report"][FULL_MODEL]["tune_out_of_fold"]
    assert table["notes_unanswerable"]["answered"] == table["scifact_unanswerable"]["answered"] == 0
    assert 0.0 < model.full.threshold < 1.0 and 0.0 < model.fallback.threshold < 1.0
    assert (tmp_path / "cache.npz").is_file()
    assert data["script"] == "training/fit_relevance.py"
    assert data["command"].startswith("python -m training.fit_relevance fit --scifact")

    seen.clear()
    common += ["--split", "holdout", "--record"]
    assert fit_relevance.main(["evaluate", *common]) == 0
    assert set(seen) == {"holdout"}
    figures = json.loads(out.read_text())["report"]["holdout_evaluation"]["figures"]
    assert {name: row["questions"] for name, row in figures[FULL_MODEL].items()} == {
        "notes_answerable": 1,
        "notes_unanswerable": 1,
        "scifact_answerable": 1,
        "scifact_unanswerable": 1,
    }


def test_an_answer_only_in_a_code_block_is_not_quotable_so_the_fit_leaves_it_out():
    body = (
        "# Runbook\n\n## Promote the replica\n\n1. Stop writes on the primary.\n\n"
        "```sh\npg_ctl promote -D /var/lib/postgresql/16/main\n```\n"
    )
    corpus = Corpus.build("notes", [Doc("runbook.md", "Runbook", body)])
    command = body.index("pg_ctl")
    step = body.index("Stop writes")

    def asking(start: int, end: int) -> Question:
        gold = [("runbook.md", start, end)]
        return Question("q", "notes_answerable", "How?", "notes", "tune", gold, answerable=True)

    assert not quotable(asking(command, command + 20), corpus)
    assert quotable(asking(step, step + 11), corpus)
