"""The hand-written question sets (`bench/data/questions/`) are well formed.

Pure: no database, no network. The checks that need SciFact read `../shared/data` when it is
there and are skipped otherwise (the data is not part of the repository).

What is checked: every file parses; every row has its fields with the right types; ids are
unique across all twelve sets; no question repeats in any set once case and punctuation are
ignored; each of the four first sets and the four sets over the lab and cafe corpora
(written 2026-12-03) has at least 100 rows, split half and half (±1) by the even/odd rule the
README states, the lab and cafe sets spread over at least 30 files; the four fresh notes sets
(two written 2026-12-02 as `fresh`, two later that day as `fresh2`) have at least 80
unanswerable and 60 answerable rows, every one of them in its one split, spread over many
files; every notes answer occurs verbatim in its file of its corpus; every `near` file exists;
every SciFact document, sentence index and claim exists, and the sentences of an answerable
row are one SUPPORT rationale of its claim.

Every notes answerable row also names its `intent` (`INTENTS`). The three sets written over the
ward, law firm and school corpora are checked harder: each has at least 70 answerable rows with
at least 15 `latest`, 10 `procedure` and 10 `decision` rows and 3 of every other intent, and at
least 60 near-topic unanswerable rows; every `latest` row lists the older `superseded` texts and
every `procedure` row its `steps`, each found verbatim in its file and the steps in document
order; the ward and law firm sets alternate tune/holdout, the school sets are wholly `unread`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = ROOT / "bench" / "data" / "questions"
NOTES_CORPUS = ROOT / "bench" / "data" / "notes_corpus"
# Each notes-like set's corpus: the prefix of its name names the folder.
CORPORA = {
    name: ROOT / "bench" / "data" / f"{name}_corpus"
    for name in ("notes", "lab", "cafe", "ward", "lawfirm", "school")
}
SCIFACT_CLAIMS = ROOT.parent / "shared" / "data" / "scifact-claims"

# The sets split into tune/holdout halves by the even/odd rule.
SETS = (
    "notes_answerable",
    "notes_unanswerable",
    "scifact_answerable",
    "scifact_unanswerable",
    "lab_answerable",
    "lab_unanswerable",
    "cafe_answerable",
    "cafe_unanswerable",
    "ward_answerable",
    "ward_unanswerable",
    "lawfirm_answerable",
    "lawfirm_unanswerable",
)
# The sets over the second and third notes corpora.
NEW_CORPUS_SETS = ("lab_answerable", "lab_unanswerable", "cafe_answerable", "cafe_unanswerable")
# The kept-apart notes sets, each whole in one split nobody tunes on: `fresh` (run once; its
# false answers have been printed) and `fresh2` (never run).
FRESH_SPLIT = {
    "notes_fresh_answerable": "fresh",
    "notes_fresh_unanswerable": "fresh",
    "notes_fresh2_answerable": "fresh2",
    "notes_fresh2_unanswerable": "fresh2",
}
FRESH_SETS = tuple(FRESH_SPLIT)
# The sets over the corpus nobody reads until the final figures: every row `unread`.
UNREAD_SETS = ("school_answerable", "school_unanswerable")
# The sets over the ward, law firm and school corpora, labelled by intent with its checks.
INTENT_SETS = ("ward_answerable", "lawfirm_answerable", "school_answerable")
INTENT_UNANSWERABLE_SETS = ("ward_unanswerable", "lawfirm_unanswerable", "school_unanswerable")
ALL_SETS = SETS + FRESH_SETS + UNREAD_SETS
NOTES_ANSWERABLE_SETS = (
    "notes_answerable",
    "notes_fresh_answerable",
    "notes_fresh2_answerable",
    "lab_answerable",
    "cafe_answerable",
    *INTENT_SETS,
)
NOTES_UNANSWERABLE_SETS = (
    "notes_unanswerable",
    "notes_fresh_unanswerable",
    "notes_fresh2_unanswerable",
    "lab_unanswerable",
    "cafe_unanswerable",
    *INTENT_UNANSWERABLE_SETS,
)
MIN_ROWS: dict[str, int] = {
    **dict.fromkeys(SETS, 100),
    **dict.fromkeys(INTENT_SETS, 70),
    **dict.fromkeys(INTENT_UNANSWERABLE_SETS, 60),
    **{name: 60 for name in FRESH_SETS if name.endswith("_answerable")},
    **{name: 80 for name in FRESH_SETS if name.endswith("_unanswerable")},
}
SPLITS: dict[str, frozenset[str]] = {
    **dict.fromkeys(SETS, frozenset({"tune", "holdout"})),
    **{name: frozenset({split}) for name, split in FRESH_SPLIT.items()},
    **dict.fromkeys(UNREAD_SETS, frozenset({"unread"})),
}
# How many different corpus files each fresh set must cover, so it is not one topic's.
FRESH_MIN_FILES = {
    **{name: 25 for name in FRESH_SETS if name.endswith("_answerable")},
    **{name: 30 for name in FRESH_SETS if name.endswith("_unanswerable")},
}
ID_PREFIXES = {
    "notes_fresh_answerable": "notes-fa-",
    "notes_fresh_unanswerable": "notes-fu-",
    "notes_fresh2_answerable": "notes-ga-",
    "notes_fresh2_unanswerable": "notes-gu-",
    "lab_answerable": "lab-a-",
    "lab_unanswerable": "lab-u-",
    "cafe_answerable": "cafe-a-",
    "cafe_unanswerable": "cafe-u-",
    "ward_answerable": "ward-a-",
    "ward_unanswerable": "ward-u-",
    "lawfirm_answerable": "lawfirm-a-",
    "lawfirm_unanswerable": "lawfirm-u-",
    "school_answerable": "school-a-",
    "school_unanswerable": "school-u-",
}
ANSWER_TYPES = frozenset(
    {"how_many", "when", "who", "which", "what", "how", "why", "yes_no", "where"}
)
# What a question asks for; `bench/answer_quality.py` reports every figure per intent.
INTENTS = frozenset(
    {
        "fact",
        "amount",
        "date",
        "who",
        "procedure",
        "decision",
        "latest",
        "yesno",
        "comparison",
        "list",
        "relational",
    }
)
# The fewest rows of each intent an intent-labelled answerable set has.
MIN_PER_INTENT = {**dict.fromkeys(INTENTS, 3), "latest": 15, "procedure": 10, "decision": 10}
# Fields each set needs beyond id/question/split, with their type.
FIELDS: dict[str, dict[str, type]] = {
    "notes_answerable": {"file": str, "answer": str, "type": str},
    "notes_unanswerable": {"near": str, "why": str},
    "notes_fresh_answerable": {"file": str, "answer": str, "type": str},
    "notes_fresh_unanswerable": {"near": str, "why": str},
    "notes_fresh2_answerable": {"file": str, "answer": str, "type": str},
    "notes_fresh2_unanswerable": {"near": str, "why": str},
    "lab_answerable": {"file": str, "answer": str, "type": str},
    "lab_unanswerable": {"near": str, "why": str},
    "cafe_answerable": {"file": str, "answer": str, "type": str},
    "cafe_unanswerable": {"near": str, "why": str},
    **{key: {"file": str, "answer": str, "intent": str} for key in INTENT_SETS},
    **{key: {"near": str, "why": str} for key in INTENT_UNANSWERABLE_SETS},
    "scifact_answerable": {"doc_id": int, "sentences": list, "claim_id": int},
    "scifact_unanswerable": {"near_doc_id": int, "why": str},
}

needs_scifact = pytest.mark.skipif(
    not SCIFACT_CLAIMS.is_dir(), reason="SciFact train data is not checked out"
)


def load(name: str) -> list[dict[str, Any]]:
    """The rows of one set; a line that is not a JSON object fails with its line number."""
    rows = []
    path = QUESTIONS / f"{name}.jsonl"
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        row = json.loads(line)
        assert isinstance(row, dict), f"{path.name}:{number} is not a JSON object"
        rows.append(row)
    return rows


def note_text(relative: str, set_name: str = "notes") -> str:
    """A file's text in the corpus of `set_name`, refusing paths that leave its folder."""
    folder = CORPORA[set_name.split("_", 1)[0]]
    path = (folder / relative).resolve()
    assert path.is_relative_to(folder.resolve()), relative
    return path.read_text(encoding="utf-8")


def normalised(question: str) -> str:
    """A question case-folded, without punctuation and with single spaces, for duplicate checks."""
    return " ".join(re.sub(r"[^\w\s]", "", question.casefold()).split())


@pytest.mark.parametrize("name", ALL_SETS)
def test_rows_have_their_fields(name: str) -> None:
    rows = load(name)
    assert len(rows) >= MIN_ROWS[name]
    for row in rows:
        for field, kind in {"id": str, "question": str, "split": str, **FIELDS[name]}.items():
            assert isinstance(row.get(field), kind), (row.get("id"), field)
        assert row["question"].strip() == row["question"] and row["question"], row["id"]
        assert row["split"] in SPLITS[name], row["id"]


@pytest.mark.parametrize("name", SETS)
def test_split_is_even_tune_odd_holdout(name: str) -> None:
    rows = load(name)
    assert [row["split"] for row in rows] == [
        "tune" if index % 2 == 0 else "holdout" for index in range(len(rows))
    ]
    counts = Counter(row["split"] for row in rows)
    assert abs(counts["tune"] - counts["holdout"]) <= 1


def test_ids_and_questions_are_unique_across_sets() -> None:
    ids = [row["id"] for name in ALL_SETS for row in load(name)]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    # A fresh question that repeats an old one (even with other case or punctuation) would not
    # be fresh, so the check runs over all the sets together, not set by set.
    questions = [normalised(row["question"]) for name in ALL_SETS for row in load(name)]
    duplicated = [q for q, n in Counter(questions).items() if n > 1]
    assert not duplicated, duplicated


def test_fresh_sets_are_kept_apart_and_spread() -> None:
    for name in FRESH_SETS:
        rows = load(name)
        assert {row["split"] for row in rows} == {FRESH_SPLIT[name]}, name
        file_field = "file" if name.endswith("_answerable") else "near"
        assert len({row[file_field] for row in rows}) >= FRESH_MIN_FILES[name], name
        assert all(row["id"].startswith(ID_PREFIXES[name]) for row in rows), name


@pytest.mark.parametrize("name", NOTES_ANSWERABLE_SETS)
def test_notes_answers_occur_verbatim_in_their_file(name: str) -> None:
    for row in load(name):
        assert "type" not in FIELDS[name] or row["type"] in ANSWER_TYPES, row["id"]
        assert row.get("intent") in INTENTS, row["id"]
        text = note_text(row["file"], name)
        assert row["answer"].strip(), row["id"]
        assert row["answer"] in text, (row["id"], row["file"], row["answer"])


@pytest.mark.parametrize("name", ("notes_answerable", "lab_answerable", "cafe_answerable"))
def test_notes_question_types_are_split_evenly(name: str) -> None:
    rows = load(name)
    by_split = {
        split: Counter(row["type"] for row in rows if row["split"] == split)
        for split in ("tune", "holdout")
    }
    for answer_type in ANSWER_TYPES:
        assert abs(by_split["tune"][answer_type] - by_split["holdout"][answer_type]) <= 1, (
            answer_type
        )


@pytest.mark.parametrize("name", NOTES_UNANSWERABLE_SETS)
def test_notes_unanswerable_near_files_exist(name: str) -> None:
    for row in load(name):
        assert note_text(row["near"], name).strip(), row["id"]
        assert row["why"].strip(), row["id"]


def test_new_corpus_sets_are_spread_and_named() -> None:
    for name in NEW_CORPUS_SETS + INTENT_SETS + INTENT_UNANSWERABLE_SETS:
        rows = load(name)
        file_field = "file" if name.endswith("_answerable") else "near"
        assert len({row[file_field] for row in rows}) >= 30, name
        assert all(row["id"].startswith(ID_PREFIXES[name]) for row in rows), name


@pytest.mark.parametrize("corpus", ("lab", "cafe", "ward", "lawfirm", "school"))
def test_new_corpus_shape(corpus: str) -> None:
    files = sorted(p for p in CORPORA[corpus].rglob("*") if p.is_file())
    assert 30 <= len(files) <= 60
    assert {p.suffix for p in files} == {".md", ".txt"}


@pytest.mark.parametrize("corpus", ("ward", "lawfirm", "school"))
def test_intent_corpus_has_short_notes_front_matter_and_steps(corpus: str) -> None:
    texts = [p.read_text("utf-8") for p in CORPORA[corpus].rglob("*") if p.is_file()]
    # Very short notes (at most three lines of text) are part of what an answerer must handle.
    assert sum(1 for t in texts if len([ln for ln in t.splitlines() if ln.strip()]) <= 3) >= 3
    assert sum(1 for t in texts if t.startswith("---\n")) >= 3
    assert sum(1 for t in texts if re.search(r"^1\. .*\n(?:.*\n)*?2\. ", t, re.M)) >= 8
    assert sum(1 for t in texts if "| --- |" in t) >= 3


@pytest.mark.parametrize("name", INTENT_SETS)
def test_intent_sets_cover_every_intent(name: str) -> None:
    counts = Counter(row["intent"] for row in load(name))
    for intent, least in MIN_PER_INTENT.items():
        assert counts[intent] >= least, (intent, counts[intent])


@pytest.mark.parametrize("name", NOTES_ANSWERABLE_SETS)
def test_superseded_and_steps_occur_verbatim_and_in_order(name: str) -> None:
    intent_set = name in INTENT_SETS
    for row in load(name):
        # An older value and the current answer are different texts.
        for old in row.get("superseded", []):
            assert old["text"].strip() and old["text"] != row["answer"], row["id"]
            assert old["text"] in note_text(old["file"], name), (row["id"], old)
        if "steps" in row:
            text = note_text(row["file"], name)
            at = [text.find(step) for step in row["steps"]]
            assert len(row["steps"]) >= 3 and min(at) >= 0, (row["id"], at)
            assert at == sorted(at) and len(set(at)) == len(at), (row["id"], at)
        if intent_set and row["intent"] == "latest":
            assert row.get("superseded"), row["id"]
        if intent_set and row["intent"] == "procedure":
            assert row.get("steps"), row["id"]


@pytest.mark.parametrize("name", ("ward_answerable", "lawfirm_answerable"))
def test_intents_are_split_evenly(name: str) -> None:
    rows = load(name)
    by_split = {
        split: Counter(row["intent"] for row in rows if row["split"] == split)
        for split in ("tune", "holdout")
    }
    for intent in INTENTS:
        assert abs(by_split["tune"][intent] - by_split["holdout"][intent]) <= 1, intent


def test_unread_sets_are_unread_whole() -> None:
    for name in UNREAD_SETS:
        assert {row["split"] for row in load(name)} == {"unread"}, name


def test_notes_corpus_shape() -> None:
    files = sorted(p for p in NOTES_CORPUS.rglob("*") if p.is_file())
    assert 40 <= len(files) <= 60
    assert {p.suffix for p in files} == {".md", ".txt"}
    # The credentials note is marked as fake test data on its first line.
    first_line = (NOTES_CORPUS / "personal" / "credentials-FAKE.md").read_text("utf-8")
    assert first_line.splitlines()[0].startswith("<!-- FAKE TEST DATA")


def _scifact() -> tuple[dict[int, list[str]], dict[int, dict[str, Any]]]:
    abstracts = {}
    with (SCIFACT_CLAIMS / "corpus.jsonl").open(encoding="utf-8") as corpus:
        for line in corpus:
            doc = json.loads(line)
            abstracts[doc["doc_id"]] = doc["abstract"]
    claims = {}
    with (SCIFACT_CLAIMS / "claims_train.jsonl").open(encoding="utf-8") as claims_file:
        for line in claims_file:
            claim = json.loads(line)
            claims[claim["id"]] = claim
    return abstracts, claims


@needs_scifact
def test_scifact_answerable_sentences_are_a_support_rationale() -> None:
    abstracts, claims = _scifact()
    for row in load("scifact_answerable"):
        abstract = abstracts.get(row["doc_id"])
        assert abstract is not None, row["id"]
        assert row["sentences"], row["id"]
        assert all(0 <= index < len(abstract) for index in row["sentences"]), row["id"]
        rationales = claims[row["claim_id"]]["evidence"].get(str(row["doc_id"]), [])
        assert any(
            rationale["label"] == "SUPPORT" and set(row["sentences"]) <= set(rationale["sentences"])
            for rationale in rationales
        ), row["id"]


@needs_scifact
def test_scifact_unanswerable_near_documents_exist() -> None:
    abstracts, _ = _scifact()
    rows = load("scifact_unanswerable")
    for row in rows:
        assert row["near_doc_id"] in abstracts, row["id"]
        assert row["why"].strip(), row["id"]
    # The two examples the set was written around are in it, next to the abstracts it describes.
    near = {row["question"]: row["near_doc_id"] for row in rows}
    assert near["How many medical schools are there in Nigeria?"] == 3662510
    assert near["How many people donated blood in Australia last year?"] == 11349166
