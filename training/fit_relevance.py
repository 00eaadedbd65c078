"""Fit the relevance scorer (`retrieval.answer.relevance`) and choose its threshold on data.

    .venv/bin/python -m training.fit_relevance fit --questions bench/data/questions \\
        [--scifact ../shared/data/scifact-claims] [--notes-corpus bench/data/notes_corpus] \\
        [--lab-corpus bench/data/lab_corpus] [--cafe-corpus bench/data/cafe_corpus] \\
        [--offtopic bench/data/offtopic_questions.txt] [--cache var/relevance_embeddings.npz] \\
        --out var/relevance.json

    .venv/bin/python -m training.fit_relevance evaluate --split holdout --out var/relevance.json \\
        [the same data arguments] [--offtopic-holdout FILE] [--record]
        # once, at the end: the kept-apart figures (never used to fit)

Every input is an argument; a corpus or question set not given is left out of the fit and
named in its report. The product reads the weights from `retrieval/data/relevance.json`;
writing there (`--out retrieval/data/relevance.json`) replaces the shipped scorer.

No database: the fit builds what `ask()` would hand the gate from the files themselves.

* **Corpora.** SciFact (`corpus.jsonl` of scifact-claims: one note per abstract, body
  `# {title}\\n\\n{sentences joined by spaces}`, as `manage.py lode_load_beir` stores it) and the
  notes corpora — `notes`, `lab` and `cafe` (`NOTES_CORPORA`; every `.md`/`.txt` file, titled by
  its first `# ` heading or its file name, as bench/answer_quality.py loads it), each with its
  own BM25 statistics and IDF, as each is its own user's notes at run time. Each body is
  chunked with lode's own chunker (`retrieval.index.chunking.chunk_markdown`) into passages
  with heading paths.
* **Retrieval.** A deterministic BM25 (k1 1.2, b 0.75, the passage's title text counted twice)
  over the passages of the question's corpus, question content stems as the OR-query: the top
  `--top-k` passages (12 = `LODE_ASK_MAX_ITEMS` for the question sets; `--scifact-top-k`, 5,
  for the SciFact claims, to bound the embedding work) stand for the evidence pack, their
  1-based BM25 rank for the pack item's search rank. lode's packs come from hybrid search
  with the learned reranker; BM25 is the documented stand-in (the rank feature's weight is
  small, see the report).
* **Candidates.** Every sentence (`retrieval.text.split_sentences`, ≥ 3 tokens, the extractive
  answerer's minimum) of those passages, each once (its best rank). Labels: SciFact — a
  sentence overlapping (by more than half its length) a rationale sentence of the claim
  (SUPPORT or CONTRADICT) is positive, every other sentence negative; claims with no evidence
  (NEI) contribute negatives only. Question sets — `split == "tune"` rows only: an answerable
  question's sentence overlapping its `answer` text in its file (notes) or any sentence of
  its `doc_id` abstract containing the `answer` text (SciFact) is positive, the rest negative;
  every candidate of an unanswerable or off-topic question is negative.
* **IDF** per corpus with `relevance.corpus_idf` over the passages' title text + text stems,
  read exactly as `relevance.passage_idf` reads the user's passages at run time (the first
  `MAX_IDF_WORDS` content words, counts capped at `DF_CAP`).
* **Model.** Logistic regression with L2 on the weights (not the intercept), features
  standardised (`training.logistic.fit_logistic`, scikit-learn); every set weighs the same in
  total (the SciFact claims would otherwise outweigh the question sets 50 to 1). The L2
  strength is chosen by 5-fold cross-validation grouped by question (weighted log-loss). Two
  models: `full` and `no-embedding` (without the cosine, used when the embedding model cannot
  load).
* **Threshold.** From out-of-fold probabilities (each question scored by a model that never
  saw it): a question is *answered* when any candidate reaches the threshold. The threshold is
  the lowest at which every near-topic unanswerable tune set (`NEAR_TOPIC_SETS`) has at most
  `--max-false` (1%) of its questions answered; the lowest such threshold keeps the most
  answerable questions answered. The trade-off table is printed
  and stored in the report.

Embeddings (question and sentences, the same calls as `relevance.embedding_cosines`) are cached
in `--cache` between runs (a fit-time file outside the repository, keyed by the text's hash).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

if __name__ == "__main__":
    # Run as a script: `relevance` imports the models (through eligibility), which need Django
    # set up before they are imported.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()

from retrieval.answer.relevance.candidate import Candidate
from retrieval.answer.relevance.features import (
    FALLBACK_FEATURE_NAMES,
    FEATURE_NAMES,
    cosine_pairs,
    embedding_text,
    features,
)
from retrieval.answer.relevance.model import FALLBACK_MODEL, FULL_MODEL, LogisticModel, read_model
from retrieval.answer.relevance.question import question_profile
from retrieval.answer.relevance.rarity import DF_CAP, MAX_IDF_WORDS, IdfTable, corpus_idf
from retrieval.index.chunking import chunk_markdown
from retrieval.text.sentences import split_sentences
from retrieval.text.tokens import TOKEN_RE
from training.files import read_jsonl, write_atomically
from training.logistic import fit_logistic, sigmoid, standardiser

# The notes corpora with question sets `{name}_answerable` / `{name}_unanswerable`
# (bench/data/questions/README.md), each loaded from `--{name}-corpus`.
NOTES_CORPORA = ("notes", "lab", "cafe")

VERSION_PREFIX = "relevance-1"
MIN_SENTENCE_TOKENS = 3
BM25_K1, BM25_B = 1.2, 0.75
L2_GRID = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
FOLDS = 5
# The near-topic unanswerable sets the threshold is chosen on.
NEAR_TOPIC_SETS = (*(f"{name}_unanswerable" for name in NOTES_CORPORA), "scifact_unanswerable")
SCIFACT_CLAIMS = "scifact_claims"


# --- corpora --------------------------------------------------------------------------------


@dataclass
class Doc:
    key: str
    title: str
    body: str


@dataclass
class CorpusPassage:
    doc: str
    title: str
    heading_path: tuple[str, ...]
    start: int
    end: int
    text: str
    terms: Counter[str]
    length: int


@dataclass
class Corpus:
    """The passages of one corpus, with a BM25 index and document frequencies."""

    name: str
    docs: dict[str, Doc]
    passages: list[CorpusPassage] = field(default_factory=list)
    postings: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    df: dict[str, int] = field(default_factory=dict)
    average_length: float = 1.0

    @classmethod
    def build(cls, name: str, docs: Iterable[Doc]) -> Corpus:
        corpus = cls(name=name, docs={d.key: d for d in docs})
        stem_sets = []
        for doc in corpus.docs.values():
            for chunk in chunk_markdown(doc.body):
                title_text = _title_text(doc.title, chunk.heading_path)
                body_stems = _stem_list(chunk.text)
                title_stems = _stem_list(title_text)
                terms = Counter(body_stems + title_stems + title_stems)
                corpus.passages.append(
                    CorpusPassage(
                        doc=doc.key,
                        title=doc.title,
                        heading_path=chunk.heading_path,
                        start=chunk.start,
                        end=chunk.end,
                        text=chunk.text,
                        terms=terms,
                        length=sum(terms.values()),
                    )
                )
                stem_sets.append(frozenset(body_stems) | frozenset(title_stems))
        for pid, passage in enumerate(corpus.passages):
            for stem, count in passage.terms.items():
                corpus.postings.setdefault(stem, []).append((pid, count))
        corpus.df = dict(corpus_idf(stem_sets).df)
        lengths = [p.length for p in corpus.passages]
        corpus.average_length = (sum(lengths) / len(lengths)) if lengths else 1.0
        return corpus

    def idf_table(self, question: str) -> IdfTable:
        """What `relevance.passage_idf` would read for `question` over this corpus."""
        profile = question_profile(question)
        words = profile.content[:MAX_IDF_WORDS]
        return IdfTable(
            passages=len(self.passages),
            df={stem: min(self.df.get(stem, 0), DF_CAP) for _, stem in words},
        )

    def search(self, question: str, k: int) -> list[int]:
        """Passage indexes of the top `k` by BM25 over the question's content stems."""
        n = len(self.passages)
        scores: dict[int, float] = {}
        for stem in question_profile(question).content_stems:
            posting = self.postings.get(stem)
            if not posting:
                continue
            idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            for pid, tf in posting:
                norm = BM25_K1 * (
                    1 - BM25_B + BM25_B * self.passages[pid].length / self.average_length
                )
                scores[pid] = scores.get(pid, 0.0) + idf * tf * (BM25_K1 + 1) / (tf + norm)
        return sorted(scores, key=lambda pid: (-scores[pid], pid))[:k]


def _stem_list(text: str) -> list[str]:
    from retrieval.text.stemming import fold

    return [fold(m.group(0)) for m in TOKEN_RE.finditer(text)]


def _title_text(title: str, heading_path: tuple[str, ...]) -> str:
    """`retrieval.index.passages.title_text` (kept in step; that module needs the ORM)."""
    parts = [title.strip()] if title.strip() else []
    for heading in heading_path:
        if heading and heading.casefold() not in (p.casefold() for p in parts):
            parts.append(heading)
    return " \u203a ".join(parts)


def note_title(path: Path, text: str) -> str:
    """A notes-corpus file's title, as bench/answer_quality.py gives it."""
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem.replace("-", " ").replace("_", " ")


def notes_docs(folder: Path) -> list[Doc]:
    docs = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix in (".md", ".txt"):
            text = path.read_text(encoding="utf-8")
            docs.append(Doc(path.relative_to(folder).as_posix(), note_title(path, text), text))
    return docs


@dataclass
class SciFact:
    docs: list[Doc]
    # doc id → [(start, end)] of each abstract sentence in the body
    sentence_ranges: dict[str, list[tuple[int, int]]]


def scifact_docs(corpus_file: Path) -> SciFact:
    docs, ranges = [], {}
    for line in corpus_file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        title = " ".join(row["title"].split())
        body = f"# {title}\n\n" if title else ""
        spans = []
        for i, sentence in enumerate(s.strip() for s in row["abstract"]):
            if i:
                body += " "
            spans.append((len(body), len(body) + len(sentence)))
            body += sentence
        key = str(row["doc_id"])
        docs.append(Doc(key, title, body))
        ranges[key] = spans
    return SciFact(docs=docs, sentence_ranges=ranges)


# --- questions ------------------------------------------------------------------------------


@dataclass
class Question:
    qid: str
    set_name: str
    text: str
    corpus: str
    split: str
    # (doc key, start, end) ranges of text that answers it; empty when it is unanswerable
    gold: list[tuple[str, int, int]] = field(default_factory=list)
    answerable: bool = False
    # documents judged relevant (SciFact: the claim's cited abstracts, NEI included, as the
    # qrels have them; a question set: the answering file or abstract)
    relevant_docs: frozenset[str] = frozenset()


def read_lines(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _find(body: str, answer: str) -> tuple[int, int] | None:
    at = body.find(answer)
    if at >= 0:
        return at, at + len(answer)
    collapsed = " ".join(answer.split())
    at = " ".join(body.split()).find(collapsed)
    if at < 0:
        return None
    # Map the collapsed offset back: walk the body counting collapsed characters.
    return _uncollapse(body, at, at + len(collapsed))


def _uncollapse(body: str, start: int, end: int) -> tuple[int, int]:
    mapping: list[int] = []  # collapsed offset → body offset
    previous_space = True  # leading whitespace is dropped by the collapse
    for i, char in enumerate(body):
        if char.isspace():
            if previous_space:
                continue
            previous_space = True
        else:
            previous_space = False
        mapping.append(i)
    return mapping[start], mapping[min(end, len(mapping)) - 1] + 1


def scifact_claims(folder: Path, data: SciFact) -> list[Question]:
    questions = []
    for row in read_jsonl(folder / "claims_train.jsonl"):
        gold = []
        for doc_id, rationales in row["evidence"].items():
            for rationale in rationales:
                for index in rationale["sentences"]:
                    start, end = data.sentence_ranges[str(doc_id)][index]
                    gold.append((str(doc_id), start, end))
        questions.append(
            Question(
                qid=f"claim-{row['id']}",
                set_name=SCIFACT_CLAIMS,
                text=row["claim"],
                corpus="scifact",
                split="tune",
                gold=gold,
                answerable=bool(gold),
                relevant_docs=frozenset(str(d) for d in row["cited_doc_ids"]),
            )
        )
    return questions


def question_sets(
    folder: Path, data: Data, split: str, offtopic: Path | None
) -> tuple[list[Question], list[str]]:
    """The rows of `split` from every question set present (and the off-topic file, as
    unanswerable SciFact questions); with the names of the sets that were missing. Rows of
    the other split are skipped before anything of them is read but their `split`."""
    questions: list[Question] = []
    missing: list[str] = []
    sets = [(f"{c}_{kind}", c) for c in NOTES_CORPORA for kind in ("answerable", "unanswerable")]
    for name, corpus in (
        *sets,
        ("scifact_answerable", "scifact"),
        ("scifact_unanswerable", "scifact"),
    ):
        path = folder / f"{name}.jsonl"
        if not path.is_file() or corpus not in data.corpora:
            missing.append(name)
            continue
        for n, row in enumerate(read_jsonl(path)):
            if row.get("split") != split:
                continue  # never read the other split's rows
            question = Question(
                qid=str(row.get("id", f"{name}-{n}")),
                set_name=name,
                text=row["question"],
                corpus=corpus,
                split=split,
            )
            if not name.endswith("unanswerable"):
                question.answerable = True
                question.gold = _gold(row, corpus, data)
                question.relevant_docs = frozenset(key for key, _, _ in question.gold)
            questions.append(question)
    if offtopic is not None and offtopic.is_file() and "scifact" in data.corpora:
        for n, text in enumerate(read_lines(offtopic)):
            questions.append(Question(f"offtopic-{n}", "scifact_offtopic", text, "scifact", split))
    return questions, missing


def _gold(row: dict[str, Any], corpus: str, data: Data) -> list[tuple[str, int, int]]:
    """Where the answer is: the notes row's `answer` text in its `file`, or the SciFact row's
    rationale `sentences` of its `doc_id` abstract."""
    if corpus == "scifact":
        assert data.scifact is not None
        key = str(row["doc_id"])
        ranges = data.scifact.sentence_ranges[key]
        return [(key, *ranges[i]) for i in row["sentences"]]
    key, answer = str(row["file"]), str(row.get("answer") or "")
    doc = data.corpora[corpus].docs.get(key)
    if doc is None or not answer:
        raise SystemExit(f"question {row.get('question')!r}: no document {key} or no answer text")
    where = _find(doc.body, answer)
    if where is None:
        raise SystemExit(f"question {row['question']!r}: answer text not found in {key}")
    return [(key, *where)]


# --- candidates and features -----------------------------------------------------------------


@dataclass
class Group:
    """One question's candidates, their labels and feature rows."""

    question: Question
    candidates: list[Candidate]
    labels: np.ndarray
    docs: list[str] = field(default_factory=list)  # each candidate's document
    x: np.ndarray | None = None


def candidates_for(question: Question, corpus: Corpus, k: int) -> Group:
    from retrieval.answer.pack import headings_beyond_title  # needs Django set up (main)

    seen: set[tuple[str, int]] = set()
    candidates: list[Candidate] = []
    labels: list[float] = []
    docs: list[str] = []
    for rank, pid in enumerate(corpus.search(question.text, k), start=1):
        passage = corpus.passages[pid]
        body = corpus.docs[passage.doc].body
        for sentence in split_sentences(body, passage.start, passage.end):
            if (passage.doc, sentence.start) in seen:
                continue
            if len(TOKEN_RE.findall(sentence.text)) < MIN_SENTENCE_TOKENS:
                continue
            seen.add((passage.doc, sentence.start))
            candidates.append(
                Candidate(
                    text=sentence.text,
                    title=passage.title,
                    # As the evidence pack gives it (`headings_beyond_title`): the first
                    # heading repeating the title is left out, so a candidate here is the
                    # candidate the scorer sees at run time.
                    heading_path=" > ".join(
                        headings_beyond_title(passage.title, passage.heading_path)
                    ),
                    rank=rank,
                )
            )
            labels.append(1.0 if _positive(question, passage.doc, sentence) else 0.0)
            docs.append(passage.doc)
    return Group(question, candidates, np.asarray(labels, dtype=np.float64), docs)


def _positive(question: Question, doc: str, sentence: Any) -> bool:
    length = sentence.end - sentence.start
    for key, start, end in question.gold:
        if key != doc:
            continue
        overlap = min(end, sentence.end) - max(start, sentence.start)
        if question.set_name == SCIFACT_CLAIMS:
            if overlap > length / 2:
                return True
        elif overlap > 0:
            return True
    return False


class EmbeddingCache:
    """Question and sentence vectors by text hash, kept in an .npz between fit runs."""

    def __init__(self, path: Path | None):
        self.path = path
        self.vectors: dict[str, np.ndarray] = {}
        if path is not None and path.is_file():
            with np.load(path) as data:
                keys, matrix = data["keys"], data["vectors"]
                self.vectors = {str(k): matrix[i] for i, k in enumerate(keys)}

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]

    def fill(self, texts: Iterable[str], *, batch: int = 512) -> None:
        from retrieval.index.embeddings import get_embedder

        missing = sorted({t for t in texts if self.key(t) not in self.vectors})
        if not missing:
            return
        embedder = get_embedder()
        for i in range(0, len(missing), batch):
            part = missing[i : i + batch]
            for text, vector in zip(part, embedder.embed_passages(part), strict=True):
                self.vectors[self.key(text)] = vector
            print(f"  embedded {min(i + batch, len(missing))}/{len(missing)}", file=sys.stderr)
            if (i // batch) % 10 == 9:
                self.save()
        self.save()

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.asarray(sorted(self.vectors))
        matrix = np.stack([self.vectors[k] for k in keys]) if len(keys) else np.zeros((0, 384))
        partial = self.path.with_name(self.path.name + ".partial.npz")
        np.savez(partial, keys=keys, vectors=matrix)
        os.replace(partial, self.path)

    def cosines(self, question: str, texts: Sequence[str]) -> list[float]:
        q = self.vectors[self.key(question)]
        return [float(self.vectors[self.key(t)] @ q) for t in texts]


def featurise(groups: list[Group], corpora: dict[str, Corpus], cache: EmbeddingCache) -> None:
    texts = [g.question.text for g in groups]
    texts += [t for g in groups for c in g.candidates for t in (c.text, embedding_text(c))]
    cache.fill(texts)
    for group in groups:
        corpus = corpora[group.question.corpus]
        group.x = features(
            question_profile(group.question.text),
            group.candidates,
            corpus.idf_table(group.question.text),
            cosine_pairs(
                group.candidates,
                lambda texts, question=group.question.text: cache.cosines(question, texts),
            ),
        )


# --- the model ------------------------------------------------------------------------------


def set_weights(groups: list[Group]) -> np.ndarray:
    """One weight per candidate: every set weighs the same in total, and within a set every
    candidate the same."""
    per_set = Counter()
    for g in groups:
        per_set[g.question.set_name] += len(g.candidates)
    return np.concatenate(
        [np.full(len(g.candidates), 1.0 / per_set[g.question.set_name]) for g in groups]
    )


def stack(groups: list[Group], columns: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.vstack([g.x[:, columns] for g in groups if len(g.candidates)])
    y = np.concatenate([g.labels for g in groups if len(g.candidates)])
    return x, y, set_weights([g for g in groups if len(g.candidates)])


def fold_of(question: Question) -> int:
    return int(hashlib.sha256(question.qid.encode()).hexdigest(), 16) % FOLDS


def log_loss(p: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-(w * (y * np.log(p) + (1 - y) * np.log(1 - p))).sum() / w.sum())


@dataclass
class Fitted:
    model: LogisticModel
    l2: float
    cv_log_loss: dict[str, float]
    oof: list[np.ndarray]  # out-of-fold probabilities per group


def fit_model(groups: list[Group], names: tuple[str, ...]) -> Fitted:
    columns = [FEATURE_NAMES.index(n) for n in names]
    results: dict[float, tuple[float, list[np.ndarray]]] = {}
    for l2 in L2_GRID:
        oof = [np.zeros(len(g.candidates)) for g in groups]
        for fold in range(FOLDS):
            train = [g for g in groups if fold_of(g.question) != fold]
            x, y, w = stack(train, columns)
            mean, scale = standardiser(x)
            coef, intercept = fit_logistic((x - mean) / scale, y, w, l2)
            for i, g in enumerate(groups):
                if fold_of(g.question) == fold and len(g.candidates):
                    oof[i] = sigmoid(((g.x[:, columns] - mean) / scale) @ coef + intercept)
        x, y, w = stack(groups, columns)
        results[l2] = (log_loss(np.concatenate(oof), y, w), oof)
        print(f"  {len(names)} features, l2={l2:<6} CV log-loss {results[l2][0]:.5f}")
    best = min(results, key=lambda l2: (results[l2][0], -l2))
    x, y, w = stack(groups, columns)
    mean, scale = standardiser(x)
    coef, intercept = fit_logistic((x - mean) / scale, y, w, best)
    model = LogisticModel(names, mean, scale, coef, intercept, threshold=0.5)
    return Fitted(
        model, best, {str(k): round(v[0], 6) for k, v in results.items()}, results[best][1]
    )


# --- the threshold and the figures ---------------------------------------------------------------


def group_figures(group: Group, scores: np.ndarray, threshold: float) -> dict[str, bool]:
    """answered: some candidate reaches the threshold; right: the best-scoring candidate
    reaches it and is a positive (what an answerer quoting the top sentence would show);
    right_document: it comes from a document judged relevant (the qrels' view)."""
    if not len(scores):
        return {"answered": False, "right": False, "right_document": False, "reachable": False}
    best = int(np.argmax(scores))
    answered = bool(scores[best] >= threshold)
    return {
        "answered": answered,
        "right": answered and bool(group.labels[best] == 1),
        "right_document": answered and group.docs[best] in group.question.relevant_docs,
        "reachable": bool(group.labels.sum() > 0),
    }


def set_table(
    groups: list[Group], scores: list[np.ndarray], threshold: float
) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for group, s in zip(groups, scores, strict=True):
        row = table.setdefault(
            group.question.set_name,
            {"questions": 0, "answered": 0, "right": 0, "right_document": 0, "reachable": 0},
        )
        figures = group_figures(group, s, threshold)
        row["questions"] += 1
        for key in ("answered", "right", "right_document", "reachable"):
            row[key] += int(figures[key])
    for row in table.values():
        row["answer_rate"] = round(row["answered"] / row["questions"], 4)
        row["right_rate"] = round(row["right"] / row["questions"], 4)
        # of the answered questions, the share whose quote comes from a relevant document
        row["answers_from_relevant_document"] = (
            round(row["right_document"] / row["answered"], 4) if row["answered"] else 0.0
        )
    return table


def choose_threshold(
    groups: list[Group], scores: list[np.ndarray], max_false: float
) -> tuple[float, str]:
    """The lowest threshold at which every near-topic unanswerable set present answers at most
    `max_false` of its questions (a question is answered when its best candidate reaches the
    threshold). Without those sets, SciFact NEI claims stand in. Returns (threshold, basis)."""
    tops: dict[str, list[float]] = {}
    for group, s in zip(groups, scores, strict=True):
        if group.question.set_name in NEAR_TOPIC_SETS:
            tops.setdefault(group.question.set_name, []).append(float(s.max()) if len(s) else 0.0)
    basis = "near-topic unanswerable tune sets: " + ", ".join(sorted(tops))
    if not tops:
        tops = {
            "scifact_nei": [
                float(s.max()) if len(s) else 0.0
                for g, s in zip(groups, scores, strict=True)
                if g.question.set_name == SCIFACT_CLAIMS and not g.question.answerable
            ]
        }
        basis = "SciFact NEI claims (no near-topic question set yet)"
    threshold = 0.0
    for values in tops.values():
        allowed = math.floor(max_false * len(values))
        ordered = sorted(values, reverse=True)
        # Above the (allowed + 1)-th best score: at most `allowed` questions reach it.
        bar = ordered[allowed] if allowed < len(ordered) else 0.0
        threshold = max(threshold, bar)
    return float(np.nextafter(threshold, 1.0)), basis


def tradeoff(
    groups: list[Group], scores: list[np.ndarray], thresholds: Sequence[float]
) -> list[dict[str, Any]]:
    rows = []
    for t in thresholds:
        table = set_table(groups, scores, t)
        rows.append(
            {
                "threshold": round(t, 4),
                **{
                    name: {"answered": v["answer_rate"], "right": v["right_rate"]}
                    for name, v in sorted(table.items())
                },
            }
        )
    return rows


def print_table(title: str, table: dict[str, dict[str, Any]]) -> None:
    print(title)
    print(f"  {'set':<22} {'n':>5} {'answered':>9} {'right':>7} {'rel. doc':>9} {'reachable':>10}")
    for name, row in sorted(table.items()):
        print(
            f"  {name:<22} {row['questions']:>5} {row['answer_rate']:>9.3f} "
            f"{row['right_rate']:>7.3f} {row['answers_from_relevant_document']:>9.3f} "
            f"{row['reachable']:>10}"
        )
    print(
        "  (answered, right: shares of the set's questions; rel. doc: of the answered, the share "
        "quoting a relevant document; reachable: questions with a positive among the candidates)"
    )


def print_tradeoff(rows: list[dict[str, Any]]) -> None:
    names = sorted({k for row in rows for k in row if k != "threshold"})
    print("  threshold " + " ".join(f"{n[:20]:>21}" for n in names))
    for row in rows:
        cells = []
        for n in names:
            v = row.get(n)
            cells.append(f"{v['answered']:>10.3f}/{v['right']:<10.3f}" if v else " " * 21)
        print(f"  {row['threshold']:>9.4f} " + " ".join(cells))
    print("  (each cell: answered / right share of the set's questions)")


# --- commands ---------------------------------------------------------------------------------


@dataclass
class Data:
    corpora: dict[str, Corpus]
    scifact: SciFact | None


def load_corpora(args: argparse.Namespace) -> Data:
    corpora: dict[str, Corpus] = {}
    scifact = None
    if args.scifact:
        scifact = scifact_docs(Path(args.scifact) / "corpus.jsonl")
        corpora["scifact"] = Corpus.build("scifact", scifact.docs)
    for name in NOTES_CORPORA:
        folder = getattr(args, f"{name}_corpus")
        if folder and Path(folder).is_dir():
            corpora[name] = Corpus.build(name, notes_docs(Path(folder)))
    for name, corpus in corpora.items():
        print(f"corpus {name}: {len(corpus.docs)} documents, {len(corpus.passages)} passages")
    return Data(corpora=corpora, scifact=scifact)


def quotable(question: Question, corpus: Corpus) -> bool:
    """Whether lode could quote the answer at all: some quotable unit of an answering document
    (`split_sentences`: never code, never a heading) overlaps its gold text. A question whose
    answer is only a command in a code block ("How do I promote the replica?" → `pg_ctl
    promote …`) is neither answerable by a quote nor unanswerable: its candidates (the steps
    around the command) are not wrong answers to a question that has none."""
    for key, start, end in question.gold:
        doc = corpus.docs.get(key)
        if doc is None:
            continue
        if any(s.start < end and start < s.end for s in split_sentences(doc.body)):
            return True
    return False


def collect_groups(questions: list[Question], data: Data, args: argparse.Namespace) -> list[Group]:
    groups = []
    unquotable = []
    for q in questions:
        if q.corpus not in data.corpora:
            continue
        if (
            q.answerable
            and q.set_name != SCIFACT_CLAIMS
            and not quotable(q, data.corpora[q.corpus])
        ):
            unquotable.append(q.qid)
            continue
        k = args.scifact_top_k if q.set_name == SCIFACT_CLAIMS else args.top_k
        groups.append(candidates_for(q, data.corpora[q.corpus], k))
    if unquotable:
        print(f"left out, their answers are not quotable (code): {', '.join(unquotable)}")
    return groups


def fit(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    data = load_corpora(args)
    questions: list[Question] = []
    if data.scifact is not None and args.claims:
        questions += scifact_claims(Path(args.scifact), data.scifact)
    offtopic = Path(args.offtopic) if args.offtopic else None
    sets, missing = question_sets(Path(args.questions), data, "tune", offtopic)
    questions += sets
    if missing:
        print(f"question sets not found (fitted without them): {', '.join(missing)}")
    groups = collect_groups(questions, data, args)
    counts = Counter(g.question.set_name for g in groups)
    print("tune questions: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"candidates: {sum(len(g.candidates) for g in groups)}")
    featurise(groups, data.corpora, EmbeddingCache(Path(args.cache) if args.cache else None))

    fitted: dict[str, Fitted] = {}
    thresholds: dict[str, tuple[float, str]] = {}
    report: dict[str, Any] = {}
    for which, names in ((FULL_MODEL, FEATURE_NAMES), (FALLBACK_MODEL, FALLBACK_FEATURE_NAMES)):
        print(f"model {which}:")
        fitted[which] = f = fit_model(groups, names)
        t, basis = choose_threshold(groups, f.oof, args.max_false)
        thresholds[which] = (t, basis)
        grid = sorted({round(x, 2) for x in np.linspace(0.05, 0.95, 19)} | {round(t, 4)})
        table = set_table(groups, f.oof, t)
        print_table(f"  out-of-fold figures at the chosen threshold {t:.4f} ({basis}):", table)
        rows = tradeoff(groups, f.oof, grid)
        print_tradeoff(rows)
        in_sample = [
            f.model.probabilities(g.x[:, [FEATURE_NAMES.index(n) for n in names]])
            if len(g.candidates)
            else np.zeros(0)
            for g in groups
        ]
        report[which] = {
            "l2": f.l2,
            "cv_log_loss": f.cv_log_loss,
            "threshold_basis": basis,
            "tune_out_of_fold": table,
            "tune_in_sample": set_table(groups, in_sample, t),
            "tradeoff_out_of_fold": rows,
        }
        for name, weight in sorted(
            zip(names, f.model.weights, strict=True), key=lambda item: -abs(item[1])
        ):
            print(f"    {name:<22} {weight:+.3f}")
        print(f"    {'(intercept)':<22} {f.model.intercept:+.3f}")

    models = {}
    for which, f in fitted.items():
        m = f.model
        models[which] = LogisticModel(
            m.feature_names, m.mean, m.scale, m.weights, m.intercept, thresholds[which][0]
        ).as_dict()
    fitted_at = datetime.now(UTC).isoformat(timespec="seconds")
    payload = {
        "version": f"{VERSION_PREFIX}-{fitted_at[:10]}",
        "fitted_at": fitted_at,
        "script": "training/fit_relevance.py",
        "command": " ".join(["python -m training.fit_relevance", *(argv or sys.argv[1:])]),
        "model": "logistic regression, L2 on the weights, standardised features, "
        "sets weighted equally, L2 strength by 5-fold CV grouped by question",
        "threshold_rule": f"lowest out-of-fold threshold with at most {args.max_false:.0%} of "
        "each near-topic unanswerable tune set answered",
        "fitted_on": {
            "sets": dict(sorted(counts.items())),
            "split": "tune",
            "candidates": int(sum(len(g.candidates) for g in groups)),
            "positives": int(sum(g.labels.sum() for g in groups)),
            "retrieval": f"BM25 over lode's chunks, top {args.top_k} passages "
            f"({args.scifact_top_k} for SciFact claims)",
            "missing_sets": missing,
        },
        "idf": {"max_words": MAX_IDF_WORDS, "df_cap": DF_CAP},
        "models": models,
        "report": report,
    }
    out = Path(args.out)
    write_atomically(out, json.dumps(payload, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


def evaluate(args: argparse.Namespace) -> int:
    """Figures of the written model on one split (the holdout, once, at the end)."""
    model_path = Path(args.out)
    model = read_model(model_path)
    data = load_corpora(args)
    offtopic = args.offtopic_holdout if args.split == "holdout" else args.offtopic
    questions, missing = question_sets(
        Path(args.questions), data, args.split, Path(offtopic) if offtopic else None
    )
    if missing:
        print(f"question sets not found: {', '.join(missing)}")
    groups = collect_groups(questions, data, args)
    featurise(groups, data.corpora, EmbeddingCache(Path(args.cache) if args.cache else None))
    figures: dict[str, Any] = {}
    for which, names in ((FULL_MODEL, FEATURE_NAMES), (FALLBACK_MODEL, FALLBACK_FEATURE_NAMES)):
        m = model.model(which)
        columns = [FEATURE_NAMES.index(n) for n in names]
        scores = [
            m.probabilities(g.x[:, columns]) if len(g.candidates) else np.zeros(0) for g in groups
        ]
        table = set_table(groups, scores, m.threshold)
        print_table(f"{args.split} figures, model {which}, threshold {m.threshold:.4f}:", table)
        figures[which] = table
    if args.record:
        payload = json.loads(model_path.read_text(encoding="utf-8"))
        payload.setdefault("report", {})[f"{args.split}_evaluation"] = {
            "evaluated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "note": "evaluated once after fitting; never used to fit or to choose the threshold",
            "figures": figures,
        }
        write_atomically(model_path, json.dumps(payload, indent=2) + "\n")
        print(f"recorded in {model_path}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("command", choices=("fit", "evaluate"))
    p.add_argument("--questions", required=True, help="folder of the question sets (JSONL)")
    p.add_argument("--scifact", help="scifact-claims folder (corpus.jsonl, claims_train.jsonl)")
    p.add_argument("--no-claims", dest="claims", action="store_false", help="skip SciFact claims")
    for name in NOTES_CORPORA:
        p.add_argument(f"--{name}-corpus", help=f"folder of the {name} corpus's files")
    p.add_argument("--offtopic", help="off-topic questions, one a line (tune)")
    p.add_argument("--offtopic-holdout", help="off-topic questions, one a line (holdout)")
    p.add_argument("--cache", help="embedding cache (.npz) kept between runs")
    p.add_argument("--out", required=True, help="fit: the weights file to write; evaluate: read")
    p.add_argument("--top-k", type=int, default=12, help="passages per question (the pack)")
    p.add_argument("--scifact-top-k", type=int, default=5, help="passages per SciFact claim")
    p.add_argument("--max-false", type=float, default=0.01)
    p.add_argument("--split", default="holdout", help="evaluate: the split to report")
    p.add_argument("--record", action="store_true", help="evaluate: store the figures")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()
    return fit(args, argv) if args.command == "fit" else evaluate(args)


if __name__ == "__main__":
    sys.exit(main())
