"""Benchmark: do answers answer?

    .venv/bin/python bench/answer_quality.py --scifact-data /work/scifact-data [--queries 809]
    .venv/bin/python bench/answer_quality.py --part notes          # the notes corpus only
    .venv/bin/python bench/answer_quality.py --part corpora        # every corpus but school
    .venv/bin/python bench/answer_quality.py --part ward --splits tune   # one corpus, one half
    .venv/bin/python bench/answer_quality.py --part scifact --scifact-data DIR

Parts, each in its own child process (a Django process has one data folder):

* **notes**, **lab**, **cafe**, **ward**, **lawfirm**, **school** — a notes corpus each
  (`CORPORA`): `bench/data/notes_corpus/` (a small ops team's runbooks, meeting notes, design
  docs, one engineer's personal notes), `lab_corpus/` (a research group's protocols, lab
  meetings, equipment, a student's notes), `cafe_corpus/` (a café-bakery's procedures, staff
  meetings, suppliers, the owner's notes), `ward_corpus/` (a hospital ward's handovers,
  meetings, procedures), `lawfirm_corpus/` (a law firm's matter notes, partners' meetings,
  procedures) and `school_corpus/` (a primary school office's notes: the **unread** corpus,
  kept whole for the final figures); `.md` and `.txt`, loaded as notes of the user named like
  the part into a fresh temporary data folder and embedded with the bundled model (or
  `--<part>-data DIR`, reused: loaded once). `--part corpora` and `all` leave the school
  corpus out: it runs only as `--part school`, for the final figures. Each corpus has its own
  folder, so one corpus's word statistics never weigh on another's. `--splits` asks only the
  rows of those splits.
  - retrieval, every mode (lexical, semantic, hybrid with the reranker off, hybrid with the
    learned reranker): **recall@5** of the passage that answers — a top-5 hit whose passage
    overlaps the `answer` text of the corpus's answerable set (`bench/data/questions/`) in its
    file;
  - `ask()` (extractive answerer, `--mode`, default hybrid, the configured reranker) on the
    answerable sets (answer rate; *right* answers: a shown claim's quote overlaps the answer
    text) and the near-topic unanswerable sets (**false answers**), each per split (`tune`:
    what fitting may see; `holdout`, `fresh`, `fresh2`, `unread`: kept apart). The false
    answers of a split in the corpus's `unprinted` splits are counted, never printed;
  - per split and per intent (each answerable row's `intent`, bench/data/questions/README.md):
    Answers right and wrong (an Answer whose quotes miss the answer text); whether the
    *first thing shown* carries the answer (the first shown claim, or the *Best match* when the
    outcome's `tier` is `best_match`); for `latest` rows, right without a superseded value
    (`latest_right`) and Answers quoting a `superseded` text (`superseded_shown`); for
    `procedure` rows, Answers quoting every step (`steps_complete`) and quoting them in
    document order (`steps_in_order`); for near-topic unanswerable rows, Answers (false
    answers) and Best matches shown.
* **scifact** — a data folder with SciFact loaded and embedded for user `eval`
  (`--scifact-data`, see bench/README.md; the traces these asks store are deleted at the end):
  - the first `--queries` SciFact train queries: answer rate, and answers citing an abstract
    the qrels mark relevant (all of an answer's claims, and at least one);
  - `scifact_answerable` (answer rate, right answers: a claim cites the answering abstract)
    and `scifact_unanswerable` (false answers), per split;
  - the off-topic sets `bench/data/offtopic_questions.txt` (in-sample for the coverage rule)
    and `offtopic_questions_holdout.txt`: false answers;
  - ask latency p50/p95 over every ask of the part.

An ask *answers* when its decision is ANSWER or ANSWER_WITH_CONFLICTS with at least one shown
claim. Prints a summary per part and writes `bench/out/answer_quality_<part>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, SCIFACT

OUT = ROOT / "bench" / "out"
DATA = ROOT / "bench" / "data"
QUESTIONS = DATA / "questions"
OFFTOPIC = DATA / "offtopic_questions.txt"
OFFTOPIC_HOLDOUT = DATA / "offtopic_questions_holdout.txt"
ANSWERED = ("ANSWER", "ANSWER_WITH_CONFLICTS")
# `fresh` and `fresh2`: notes sets kept apart whole (bench/data/questions/README.md). `fresh`
# has been seen (its false answers were printed once); `fresh2` has never been run. `unread`:
# a whole corpus nobody tunes on or looks at until the final figures.
SPLITS = ("tune", "holdout", "fresh", "fresh2", "unread")
# What an answerable row asks for (its `intent`), in the order they are reported.
INTENTS = (
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
)


@dataclass(frozen=True)
class NotesCorpus:
    """A folder of notes and the question sets written over it."""

    name: str  # the part, the user that owns the notes, the prefix of their external keys
    folder: Path
    answerable: tuple[str, ...]  # question files (stems) under QUESTIONS
    unanswerable: tuple[str, ...]
    # Splits whose false answers are counted but never printed: they judge a change made
    # without looking at them (the rows stay in the JSON, for when a set is retired).
    unprinted: frozenset[str]
    # Kept whole for the final figures: run only when named (`--part NAME`), never by
    # `--part corpora` or `all`.
    final_only: bool = False


CORPORA = {
    c.name: c
    for c in (
        NotesCorpus(
            "notes",
            DATA / "notes_corpus",
            ("notes_answerable", "notes_fresh_answerable", "notes_fresh2_answerable"),
            ("notes_unanswerable", "notes_fresh_unanswerable", "notes_fresh2_unanswerable"),
            frozenset({"fresh2"}),
        ),
        # Written last, from the corpora alone; their holdout halves have never been printed.
        NotesCorpus(
            "lab",
            DATA / "lab_corpus",
            ("lab_answerable",),
            ("lab_unanswerable",),
            frozenset({"holdout"}),
        ),
        NotesCorpus(
            "cafe",
            DATA / "cafe_corpus",
            ("cafe_answerable",),
            ("cafe_unanswerable",),
            frozenset({"holdout"}),
        ),
        # Domains far from the others, labelled by intent; the school corpus is read by
        # nobody until the final figures, so none of its rows is ever printed.
        NotesCorpus(
            "ward",
            DATA / "ward_corpus",
            ("ward_answerable",),
            ("ward_unanswerable",),
            frozenset({"holdout"}),
        ),
        NotesCorpus(
            "lawfirm",
            DATA / "lawfirm_corpus",
            ("lawfirm_answerable",),
            ("lawfirm_unanswerable",),
            frozenset({"holdout"}),
        ),
        NotesCorpus(
            "school",
            DATA / "school_corpus",
            ("school_answerable",),
            ("school_unanswerable",),
            frozenset({"unread"}),
            final_only=True,
        ),
    )
}
# (label, search mode, reranker) for the retrieval table.
RETRIEVAL_MODES = (
    ("lexical", "lexical", "off"),
    ("semantic", "semantic", "off"),
    ("hybrid", "hybrid", "off"),
    ("hybrid+learned", "hybrid", "learned"),
)
RECALL_K = 5


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_lines(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def setup_django(data_dir: str) -> None:
    os.environ.pop("DATABASE_URL", None)
    os.environ["LODE_DATA_DIR"] = data_dir
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()


def percentile(values: list[float], pct: float) -> float:
    from retrieval.search.evaluation import percentile as _percentile

    return round(_percentile(values, pct), 1) if values else 0.0


# --- asking -------------------------------------------------------------------------------------


def ask_row(user: Any, question: str, *, mode: str) -> dict[str, Any]:
    """One `ask()` with the extractive answerer, reduced to what the figures need."""
    from retrieval.answer.answerers import ExtractiveAnswerer
    from retrieval.answer.ask import ask

    started = time.perf_counter()
    outcome = ask(user=user, question=question, answerer=ExtractiveAnswerer(), mode=mode)
    ms = (time.perf_counter() - started) * 1000
    claim_spans = [spans(claim) for claim in outcome.claims]
    supports = [span for claim in claim_spans for span in claim]
    claims = [[s.document_id for s in claim.support] for claim in outcome.claims]
    answered = str(outcome.decision) in ANSWERED and bool(outcome.claims)
    gate = gate_rows(outcome.trace_id)
    # Read with getattr: an AskOutcome without tiers has neither field (no best match then).
    tier = getattr(outcome, "tier", None)
    best_match = getattr(outcome, "best_match", None)
    return {
        "question": question,
        "ms": round(ms, 2),
        "decision": str(outcome.decision),
        "tier": str(tier) if tier is not None else "",
        "answered": answered,
        "claims": claims,
        "supports": supports,
        "claim_spans": claim_spans,
        "best_match_spans": spans(best_match) if best_match is not None else [],
        "first_claim": outcome.claims[0].text if outcome.claims else "",
        "dropped": [v.reason for v in outcome.dropped],
        "error": outcome.error,
        "gate": gate,
    }


def spans(claim: Any) -> list[dict[str, Any]]:
    """Where a shown claim's quotes sit: [{document_id, start, end, span}], in shown order."""
    return [
        {"document_id": s.document_id, "start": s.start, "end": s.end, "span": s.quoted_span}
        for s in claim.support
    ]


def gate_rows(trace_id: int | None) -> list[dict[str, Any]]:
    """Each claim the gate judged, from the stored trace: whether it passed the faithfulness
    steps, its relevance score, and where its quotes sit ({document, start, end}) — what the
    threshold calibration replays (a claim passing faithfulness is shown iff its relevance
    score reaches the threshold)."""
    from notes.models import Version
    from retrieval.models import AskTrace

    if trace_id is None:
        return []
    verdicts = AskTrace.objects.get(pk=trace_id).trace.get("gate") or []
    version_ids = {s["version_id"] for v in verdicts for s in v["claim"]["support"]}
    versions = {
        pk: (doc, body)
        for pk, doc, body in Version.objects.filter(pk__in=version_ids).values_list(
            "pk", "document_id", "body"
        )
    }
    rows = []
    for verdict in verdicts:
        faithful = verdict["passed"] or verdict["step"] == "relevance"
        quotes = []
        for support in verdict["claim"]["support"]:
            doc, body = versions.get(support["version_id"], (None, ""))
            at = body.find(support["quoted_span"])
            quotes.append(
                {"document_id": doc, "start": at, "end": at + len(support["quoted_span"])}
            )
        rows.append(
            {
                "faithful": faithful,
                "score": verdict.get("relevance_score"),
                # Dropped by its shape (answer_shape): never shown, whatever the threshold.
                "shape_problem": verdict.get("shape_problem", ""),
                # The section rule held: shown at any threshold (relevance.section_answers).
                "section_match": verdict.get("section_match", False),
                "quotes": quotes,
            }
        )
    return rows


def rate(rows: list[dict[str, Any]], key: str = "answered") -> dict[str, Any]:
    hits = sum(1 for r in rows if r.get(key))
    return {"n": len(rows), key: hits, "rate": round(hits / len(rows), 4) if rows else 0.0}


def by_split(rows: list[dict[str, Any]], key: str = "answered") -> dict[str, Any]:
    present = {r["split"] for r in rows}
    return {
        split: rate([r for r in rows if r["split"] == split], key)
        for split in SPLITS
        if split in present
    }


# --- notes ------------------------------------------------------------------------------------


def note_title(path: Path, text: str) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem.replace("-", " ").replace("_", " ")


def load_notes_corpus(corpus: NotesCorpus, user: Any) -> dict[str, int]:
    """Every file of the corpus as a note of `user` (once); {relative path: doc id}."""
    from notes import services
    from notes.models import Document

    keys = {}
    for path in sorted(corpus.folder.rglob("*")):
        if not path.is_file() or path.suffix not in (".md", ".txt"):
            continue
        rel = path.relative_to(corpus.folder).as_posix()
        key = f"{corpus.name}:{rel}"
        existing = Document.objects.filter(owner=user, external_key=key).first()
        if existing is None:
            text = path.read_text(encoding="utf-8")
            existing = services.note_create(
                owner=user,
                title=note_title(path, text),
                body=text,
                external_key=key,
                source_name=f"{corpus.name}_corpus",
            )
        keys[rel] = existing.pk
    return keys


def answer_range(document_id: int, answer: str) -> tuple[int, int] | None:
    """Where `answer` sits in the document's head body (code points), or None."""
    from notes.models import Document

    body = Document.objects.select_related("head").get(pk=document_id).head.body
    at = body.find(answer)
    if at < 0:
        collapsed = " ".join(answer.split())
        at = " ".join(body.split()).find(collapsed)
        return None if at < 0 else (-1, -1)  # present only modulo whitespace: not pinned
    return at, at + len(answer)


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def quotes_text(quotes: list[dict[str, Any]], document_id: int, at: tuple[int, int] | None) -> bool:
    """Whether one of `quotes` overlaps the text at `at` of `document_id`."""
    return at is not None and any(
        q["document_id"] == document_id and overlaps((q["start"], q["end"]), at) for q in quotes
    )


def first_shown(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The quotes of what the page leads with: an Answer's first claim, else the Best match."""
    if r["answered"]:
        return r["claim_spans"][0]
    if r["tier"] == "best_match":
        return r["best_match_spans"]
    return []


def score_answerable(r: dict[str, Any], row: dict[str, Any]) -> None:
    """Judge one ask of an answerable row (`row` carries its resolved ranges) into `r`."""
    doc, at = row["doc"], row["range"]
    r["intent"] = row.get("intent", "")
    r["right"] = r["answered"] and quotes_text(r["supports"], doc, at)
    r["wrong"] = r["answered"] and not r["right"]
    r["right_document"] = r["answered"] and any(s["document_id"] == doc for s in r["supports"])
    r["first_carries"] = quotes_text(first_shown(r), doc, at)
    if "superseded_ranges" in row:
        # A stale value shown beside the current one still misleads: not latest-right.
        r["superseded_shown"] = r["answered"] and any(
            quotes_text(r["supports"], old_doc, old_at)
            for old_doc, old_at in row["superseded_ranges"]
        )
        r["latest_right"] = r["right"] and not r["superseded_shown"]
    if "step_ranges" in row:
        # For each step, the first shown quote (in shown order) that carries it.
        first = [
            next(
                (i for i, q in enumerate(r["supports"]) if quotes_text([q], doc, step)),
                None,
            )
            for step in row["step_ranges"]
        ]
        r["steps_complete"] = r["answered"] and None not in first
        r["steps_in_order"] = r["steps_complete"] and first == sorted(first)  # type: ignore[type-var]


INTENT_FIGURES = (
    "answered",
    "right",
    "wrong",
    "first_carries",
    "latest_right",
    "superseded_shown",
    "steps_complete",
    "steps_in_order",
)


def by_split_and_intent(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    """{split: {intent: {"n", and a count per figure the rows of that intent carry}}}."""
    table: dict[str, dict[str, dict[str, int]]] = {}
    for split in SPLITS:
        for intent in INTENTS:
            group = [r for r in rows if r["split"] == split and r.get("intent") == intent]
            if group:
                table.setdefault(split, {})[intent] = {
                    "n": len(group),
                    **{
                        key: sum(1 for r in group if r[key])
                        for key in INTENT_FIGURES
                        if key in group[0]
                    },
                }
    return table


def corpus_part(corpus: NotesCorpus, args: argparse.Namespace) -> dict[str, Any]:
    data_dir = getattr(args, f"{corpus.name}_data") or tempfile.mkdtemp(
        prefix=f"lode-{corpus.name}-bench-"
    )
    setup_django(data_dir)
    from django.core.management import call_command

    from notes.management.commands.lode_import_markdown import ensure_user
    from retrieval.eligibility import member_space_ids
    from retrieval.index.vectors import pending_count
    from retrieval.search.pipeline import search

    call_command("migrate", verbosity=0)
    user = ensure_user(corpus.name)
    docs = load_notes_corpus(corpus, user)
    if pending_count(member_space_ids(user.pk)):
        call_command("lode_embed_pending", verbosity=0)
    wanted = set(args.splits or SPLITS)
    answerable = [
        row
        for name in corpus.answerable
        for row in read_jsonl(QUESTIONS / f"{name}.jsonl")
        if row["split"] in wanted
    ]
    unanswerable = [
        row
        for name in corpus.unanswerable
        for row in read_jsonl(QUESTIONS / f"{name}.jsonl")
        if row["split"] in wanted
    ]
    for row in answerable:
        row["doc"] = docs[row["file"]]
        row["range"] = answer_range(row["doc"], row["answer"])
        if "superseded" in row:
            row["superseded_ranges"] = [
                (docs[old["file"]], answer_range(docs[old["file"]], old["text"]))
                for old in row["superseded"]
            ]
        if "steps" in row:
            row["step_ranges"] = [answer_range(row["doc"], step) for step in row["steps"]]

    retrieval: dict[str, Any] = {}
    for label, mode, rerank in RETRIEVAL_MODES:
        found = []
        for row in answerable:
            result = search(
                user=user,
                query=row["question"],
                mode=mode,
                rerank=rerank,
                limit=RECALL_K,
                highlight=False,
            )
            hit = any(
                h.passage.document_id == row["doc"]
                and row["range"] is not None
                and overlaps((h.passage.start, h.passage.end), row["range"])
                for h in result.hits[:RECALL_K]
            )
            found.append({"split": row["split"], "found": hit})
        retrieval[label] = {"all": rate(found, "found"), **by_split(found, "found")}

    ans_rows, un_rows = [], []
    for row in answerable:
        r = ask_row(user, row["question"], mode=args.mode)
        r["split"] = row["split"]
        r["doc"], r["range"] = row["doc"], row["range"]
        score_answerable(r, row)
        ans_rows.append(r)
    for row in unanswerable:
        r = ask_row(user, row["question"], mode=args.mode)
        r["split"] = row["split"]
        r["best_match_shown"] = not r["answered"] and r["tier"] == "best_match"
        un_rows.append(r)
    times = [r["ms"] for r in ans_rows + un_rows]
    return {
        "part": corpus.name,
        "corpus": corpus.folder.relative_to(ROOT).as_posix(),
        "mode": args.mode,
        "documents": len(docs),
        "retrieval_recall_at_5": retrieval,
        "answerable": {
            "answered": by_split(ans_rows),
            "right": by_split(ans_rows, "right"),
            "right_document": by_split(ans_rows, "right_document"),
            "first_carries": by_split(ans_rows, "first_carries"),
        },
        "by_intent": by_split_and_intent(ans_rows),
        "unanswerable_false_answers": by_split(un_rows),
        "unanswerable_best_match_shown": by_split(un_rows, "best_match_shown"),
        "latency_ms": {"p50": percentile(times, 50), "p95": percentile(times, 95)},
        "false_answers": [
            {"question": r["question"], "split": r["split"], "claim": r["first_claim"]}
            for r in un_rows
            if r["answered"]
        ],
        "missed": [
            {"question": r["question"], "split": r["split"], "decision": r["decision"]}
            for r in ans_rows
            if not r["answered"]
        ],
        "rows": {"answerable": ans_rows, "unanswerable": un_rows},
    }


# --- scifact ----------------------------------------------------------------------------------


def add_keys(row: dict[str, Any], key_of: dict[int, str]) -> None:
    """Name each gate quote's document by its BEIR id (what the qrels speak of)."""
    for verdict in row["gate"]:
        for quote in verdict["quotes"]:
            quote["key"] = key_of.get(quote["document_id"], "")


def scifact_part(args: argparse.Namespace) -> dict[str, Any]:
    if not args.scifact_data:
        raise SystemExit("--scifact-data DIR is required for the scifact part (bench/README.md)")
    setup_django(str(Path(args.scifact_data).resolve()))
    from notes.management.commands.lode_import_markdown import ensure_user
    from notes.models import Document
    from retrieval.eligibility import member_space_ids
    from retrieval.index.vectors import pending_count
    from retrieval.models import AskTrace
    from retrieval.search import evaluation

    user = ensure_user("eval")
    first_new_trace = AskTrace.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    key_of = {
        pk: key.removeprefix("beir:")
        for pk, key in Document.objects.filter(owner=user).values_list("pk", "external_key")
    }
    if not key_of:
        raise SystemExit(f"no SciFact documents for user eval in {args.scifact_data}")
    try:
        qrels = evaluation.load_qrels(SCIFACT / "qrels" / "train.tsv")
        train = [
            (qid, text)
            for qid, text in evaluation.load_queries(SCIFACT / "queries.jsonl").items()
            if qid in qrels
        ][: args.queries]
        train_rows = []
        for qid, text in train:
            r = ask_row(user, text, mode=args.mode)
            relevant = set(qrels.get(qid, {}))
            r["relevant"] = sorted(relevant)
            add_keys(r, key_of)
            cited = [{key_of.get(d, "") for d in claim} for claim in r["claims"]]
            r["cites_relevant"] = r["answered"] and any(c & relevant for c in cited)
            r["all_claims_relevant"] = r["answered"] and all(c & relevant for c in cited)
            train_rows.append(r)
        answered = [r for r in train_rows if r["answered"]]

        sets: dict[str, Any] = {}
        sa_rows = []
        for row in read_jsonl(QUESTIONS / "scifact_answerable.jsonl"):
            r = ask_row(user, row["question"], mode=args.mode)
            r["split"] = row["split"]
            r["relevant"] = [str(row["doc_id"])]
            add_keys(r, key_of)
            cited = {key_of.get(s["document_id"], "") for s in r["supports"]}
            r["right"] = r["answered"] and str(row["doc_id"]) in cited
            sa_rows.append(r)
        sets["answerable"] = {"answered": by_split(sa_rows), "right": by_split(sa_rows, "right")}
        su_rows = []
        for row in read_jsonl(QUESTIONS / "scifact_unanswerable.jsonl"):
            r = ask_row(user, row["question"], mode=args.mode)
            r["split"] = row["split"]
            su_rows.append(r)
        sets["unanswerable_false_answers"] = by_split(su_rows)
        off = [ask_row(user, q, mode=args.mode) for q in read_lines(OFFTOPIC)]
        off_holdout = [ask_row(user, q, mode=args.mode) for q in read_lines(OFFTOPIC_HOLDOUT)]
        times = [r["ms"] for r in train_rows + sa_rows + su_rows + off + off_holdout]
        return {
            "part": "scifact",
            "mode": args.mode,
            "documents": len(key_of),
            "passages_without_vectors": pending_count(member_space_ids(user.pk)),
            "train": {
                **rate(train_rows),
                "answers_citing_a_relevant_abstract": sum(r["cites_relevant"] for r in answered),
                "answers_all_claims_relevant": sum(r["all_claims_relevant"] for r in answered),
            },
            **sets,
            "offtopic_false_answers": {"in_sample": rate(off), "holdout": rate(off_holdout)},
            "latency_ms": {"p50": percentile(times, 50), "p95": percentile(times, 95)},
            "false_answers": [
                {
                    "question": r["question"],
                    "split": r.get("split", "offtopic"),
                    "claim": r["first_claim"],
                }
                for r in su_rows + off + off_holdout
                if r["answered"]
            ],
            "train_uncited": [
                {"question": r["question"], "claim": r["first_claim"]}
                for r in answered
                if not r["cites_relevant"]
            ][:40],
            "rows": {"train": train_rows, "answerable": sa_rows, "unanswerable": su_rows},
        }
    finally:
        AskTrace.objects.filter(pk__gt=first_new_trace).delete()


# --- printing ---------------------------------------------------------------------------------


def pct(block: dict[str, Any], key: str = "answered") -> str:
    return f"{block[key]}/{block['n']} ({block['rate']:.1%})"


def show(report: dict[str, Any]) -> None:
    unprinted: frozenset[str] = frozenset()
    if report["part"] in CORPORA:
        unprinted = CORPORA[report["part"]].unprinted
        print(
            f"\n== {report['part']} corpus ({report['corpus']}): {report['documents']} "
            f"documents, ask mode {report['mode']}"
        )
        print(f"retrieval recall@{RECALL_K} of the answering passage:")
        for label, block in report["retrieval_recall_at_5"].items():
            splits = "   ".join(
                f"{split} {pct(block[split], 'found')}" for split in SPLITS if split in block
            )
            print(f"  {label:<15} all {pct(block['all'], 'found')}   {splits}")
        a = report["answerable"]
        for split in a["answered"]:
            print(
                f"answerable {split:<8} answered {pct(a['answered'][split])}   right quote "
                f"{pct(a['right'][split], 'right')}   right note "
                f"{pct(a['right_document'][split], 'right_document')}"
                + (
                    f"   first shown carries it {pct(a['first_carries'][split], 'first_carries')}"
                    if split in a.get("first_carries", {})
                    else ""
                )
            )
        best = report.get("unanswerable_best_match_shown", {})
        for split, block in report["unanswerable_false_answers"].items():
            shown = (
                f"   best match shown {pct(best[split], 'best_match_shown')}"
                if split in best
                else ""
            )
            print(f"near-topic unanswerable {split:<8} false answers {pct(block)}{shown}")
        show_intents(report.get("by_intent", {}))
    else:
        t = report["train"]
        print(
            f"\n== SciFact: {report['documents']} abstracts, ask mode {report['mode']} "
            f"({report['passages_without_vectors']} passages without a vector)"
        )
        print(
            f"train queries answered {t['answered']}/{t['n']} ({t['rate']:.1%}); answers citing "
            f"a qrels-relevant abstract {t['answers_citing_a_relevant_abstract']}/{t['answered']}"
            f" ({t['answers_citing_a_relevant_abstract'] / max(t['answered'], 1):.1%}); every "
            f"claim relevant {t['answers_all_claims_relevant']}/{t['answered']}"
        )
        a = report["answerable"]
        for split in a["answered"]:
            print(
                f"answerable {split:<8} answered {pct(a['answered'][split])}   right abstract "
                f"{pct(a['right'][split], 'right')}"
            )
        for split, block in report["unanswerable_false_answers"].items():
            print(f"near-topic unanswerable {split:<8} false answers {pct(block)}")
        off = report["offtopic_false_answers"]
        print(
            f"off-topic false answers: in-sample {pct(off['in_sample'])}, "
            f"held-out {pct(off['holdout'])}"
        )
    lat = report["latency_ms"]
    print(f"ask latency p50 {lat['p50']} ms, p95 {lat['p95']} ms")
    shown = [row for row in report["false_answers"] if row["split"] not in unprinted]
    for row in shown[:30]:
        print(f"   FALSE ANSWER [{row['split']}] {row['question']!r} → {row['claim'][:100]!r}")


# Column labels of the per-intent table, by figure.
INTENT_LABELS = {
    "right": "right",
    "wrong": "wrong",
    "first_carries": "first shown",
    "latest_right": "latest right",
    "superseded_shown": "superseded shown",
    "steps_complete": "all steps",
    "steps_in_order": "in order",
}


def show_intents(table: dict[str, dict[str, dict[str, int]]]) -> None:
    """Counts only (never a question), so kept-apart splits print like the others."""
    for split, intents in table.items():
        print(f"per intent, {split} (answered right / wrong / first thing shown carries it):")
        for intent, counts in intents.items():
            figures = "  ".join(
                f"{label} {counts[key]}" for key, label in INTENT_LABELS.items() if key in counts
            )
            print(f"  {intent:<11} n {counts['n']:>3}  {figures}")


def run_child(part: str, args: argparse.Namespace) -> dict[str, Any]:
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"answer_quality_{part}.json"
    command = [
        sys.executable,
        __file__,
        "--part",
        part,
        "--child",
        "--mode",
        args.mode,
        "--queries",
        str(args.queries),
    ]
    if args.scifact_data:
        command += ["--scifact-data", args.scifact_data]
    if args.splits:
        command += ["--splits", *args.splits]
    for name in CORPORA:
        if getattr(args, f"{name}_data"):
            command += [f"--{name}-data", getattr(args, f"{name}_data")]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    subprocess.run(command, cwd=ROOT, env=env, check=True)
    return json.loads(out.read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--part",
        choices=(*CORPORA, "corpora", "scifact", "all"),
        default="all",
        help="one part; 'corpora': every notes corpus but the unread one; 'all': those and scifact",
    )
    parser.add_argument("--scifact-data", default=None, help="SciFact loaded+embedded (SQLite)")
    for name in CORPORA:
        parser.add_argument(
            f"--{name}-data", default=None, help=f"reuse this data folder for the {name} corpus"
        )
    parser.add_argument("--mode", choices=("lexical", "hybrid", "semantic"), default="hybrid")
    parser.add_argument("--queries", type=int, default=809, help="SciFact train queries")
    parser.add_argument(
        "--splits",
        nargs="+",
        choices=SPLITS,
        default=None,
        help="notes corpora: ask only the rows of these splits (default: every split)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        report = (
            corpus_part(CORPORA[args.part], args) if args.part in CORPORA else scifact_part(args)
        )
        (OUT / f"answer_quality_{args.part}.json").write_text(
            json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        return
    parts: tuple[str, ...] = (args.part,)
    if args.part in ("corpora", "all"):
        everyday = tuple(name for name, corpus in CORPORA.items() if not corpus.final_only)
        parts = (*everyday, "scifact") if args.part == "all" else everyday
    for part in parts:
        show(run_child(part, args))


if __name__ == "__main__":
    main()
