"""Prepare (premise, hypothesis, label) pairs for training an entailment cross-encoder
(`python -m training.entailment` runs this, then the trainer `train_entailment.py`).

Pure file-in, file-out code over the public NLI sets (a folder with one subfolder per set) and
SciFact train (a folder with `claims_train.jsonl` and `corpus.jsonl`), both given as
arguments: no Django, no database, no torch, so it runs (and is tested) in lode's own venv.

Pair order is the gate's: the premise is the *evidence* (the cited spans joined with a space,
`retrieval.answer.gate`), the hypothesis is the *claim*; both in the gate's normal form
(`retrieval.text.nfc_collapsed`). Label 0 is entailment, so the exported model's single
logit (column 0, which fastembed reads) is the entailment score.

SciFact claims are split into train / dev / kept-apart **by claim group**: claims that cite a
common abstract (a claim and its negated twin cite the same one) always land in the same part,
so no kept-apart claim shares an abstract — or a rationale — with a training claim. The
kept-apart claims never reach the trainer; `lode_eval_gate --claims kept_apart_claims.jsonl`
measures the model on them.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from retrieval.text.normalise import nfc_collapsed
from training.files import iter_jsonl

# Index = class id in the trained head. Entailment must be 0: the export reads it as the
# single logit (see train_entailment.py), and lode's seam reads column 0.
LABELS = ("entailment", "neutral", "contradiction")
SCIFACT_LABELS = {"SUPPORT": "entailment", "CONTRADICT": "contradiction"}

PARTS = ("train", "dev", "kept_apart")

# Licences as each dataset's README states them. A model trained on a set
# inherits whatever its terms allow; the model folder's lode_model.json repeats this list.
LICENCES: dict[str, str] = {
    "snli": "CC BY-SA 4.0 (SNLI 1.0; cite Bowman et al. 2015)",
    "sick": "CC BY-NC-SA 3.0 — non-commercial (cite Marelli et al. 2014)",
    "climate-fever": "none stated — research data (cite Diggelmann et al. 2020)",
    "healthver": "none stated — research data (cite Sarrouti et al. 2021)",
    "covid-fact": "none stated — research data (cite Saakyan et al. 2021)",
    "scifact": "CC BY-NC 2.0 — non-commercial (cite Wadden et al. 2020)",
}

# Training sources by default. COVID-Fact is left out: its README reports that its 2:1
# machine-made REFUTED majority taught a MiniLM cross-encoder "scientific wording → refuted".
DEFAULT_NLI_SOURCES = ("snli", "sick", "climate-fever", "healthver")
NLI_SOURCES = (*DEFAULT_NLI_SOURCES, "covid-fact")


@dataclass(frozen=True)
class Pair:
    premise: str  # the evidence
    hypothesis: str  # the claim
    label: str  # one of LABELS
    source: str  # a key of LICENCES
    group: str  # what must not straddle a split (a claim, a premise)

    def as_row(self) -> dict[str, str]:
        return asdict(self)


def make_pair(premise: str, hypothesis: str, label: str, source: str, group: str) -> Pair | None:
    """A Pair in the gate's normal form, or None when either side is empty after it."""
    if label not in LABELS:
        raise ValueError(f"unknown label {label!r}")
    premise, hypothesis = nfc_collapsed(premise), nfc_collapsed(hypothesis)
    if not premise or not hypothesis:
        return None
    return Pair(premise, hypothesis, label, source, group)


# --- the NLI sets ----------------------------------------------------------------------------

_PTB_SPACING = (
    (re.compile(r" ([.,;:!?%)\]}])"), r"\1"),
    (re.compile(r"([(\[{$]) "), r"\1"),
    (re.compile(r" (n't|'s|'re|'ve|'ll|'d|'m)\b", re.IGNORECASE), r"\1"),
    (re.compile(r"`` ?"), '"'),
    (re.compile(r" ?''"), '"'),
)


def detokenise_ptb(text: str) -> str:
    """Undo the Penn Treebank spacing of the SNLI copy here ("do n't" → "don't", " ." → "."),
    so its pairs look like the prose the gate sees."""
    text = text.strip()
    for pattern, replacement in _PTB_SPACING:
        text = pattern.sub(replacement, text)
    return text


def _lines(path: Path) -> list[str]:
    return path.read_text("utf-8").split("\n")[:-1]  # every file ends with a newline


def snli_pairs(folder: Path, split: str = "dev") -> Iterator[Pair]:
    """SNLI's `split` (dev by default: test is kept apart for evaluation); pairs that share a
    premise share a group."""
    premises = _lines(folder / f"s1.{split}")
    hypotheses = _lines(folder / f"s2.{split}")
    labels = _lines(folder / f"labels.{split}")
    if not len(premises) == len(hypotheses) == len(labels):
        raise ValueError(f"{folder}: s1/s2/labels.{split} differ in length")
    for premise, hypothesis, label in zip(premises, hypotheses, labels, strict=True):
        pair = make_pair(
            detokenise_ptb(premise),
            detokenise_ptb(hypothesis),
            label.strip(),
            "snli",
            "snli:" + _digest(premise),
        )
        if pair:
            yield pair


def sick_pairs(path: Path, sets: Iterable[str] = ("TRAIN", "TRIAL")) -> Iterator[Pair]:
    """SICK rows of the SemEval `sets` (TEST is kept apart), A → B labels."""
    wanted = set(sets)
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if row["SemEval_set"] in wanted:
                pair = make_pair(
                    row["sentence_A"],
                    row["sentence_B"],
                    row["entailment_label"].lower(),
                    "sick",
                    "sick:" + _digest(row["sentence_A"]),
                )
                if pair:
                    yield pair


_CLIMATE_LABELS = {
    "SUPPORTS": "entailment",
    "NOT_ENOUGH_INFO": "neutral",
    "REFUTES": "contradiction",
}


def climate_fever_pairs(path: Path) -> Iterator[Pair]:
    """Each evidence sentence against its claim, by the evidence's own label."""
    for row in iter_jsonl(path):
        for evidence in row["evidences"]:
            pair = make_pair(
                evidence["evidence"],
                row["claim"],
                _CLIMATE_LABELS[evidence["evidence_label"]],
                "climate-fever",
                f"climate-fever:{row['claim_id']}",
            )
            if pair:
                yield pair


_HEALTHVER_LABELS = {"Supports": "entailment", "Neutral": "neutral", "Refutes": "contradiction"}


def healthver_pairs(path: Path) -> Iterator[Pair]:
    """HealthVer's CSV (use the dev file for training: test is kept apart)."""
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            pair = make_pair(
                row["evidence"],
                row["claim"],
                _HEALTHVER_LABELS[row["label"]],
                "healthver",
                "healthver:" + _digest(row["claim"]),
            )
            if pair:
                yield pair


_COVID_FACT_LABELS = {"SUPPORTED": "entailment", "REFUTED": "contradiction"}


def covid_fact_pairs(path: Path) -> Iterator[Pair]:
    """COVID-Fact: the evidence sentences joined in order against the claim (two-way)."""
    for row in iter_jsonl(path):
        evidence = " ".join(row["evidence"])
        pair = make_pair(
            evidence,
            row["claim"],
            _COVID_FACT_LABELS[row["label"]],
            "covid-fact",
            "covid-fact:" + _digest(evidence),
        )
        if pair:
            yield pair


def nli_pairs(nli_dir: Path, source: str) -> list[Pair]:
    """The training pairs of one NLI set, in file order (its evaluation split left out)."""
    if source == "snli":
        return list(snli_pairs(nli_dir / "snli", "dev"))
    if source == "sick":
        return list(sick_pairs(nli_dir / "sick" / "SICK.txt"))
    if source == "climate-fever":
        return list(climate_fever_pairs(nli_dir / "climate-fever" / "climate-fever.jsonl"))
    if source == "healthver":
        return list(healthver_pairs(nli_dir / "healthver" / "healthver_dev.csv"))
    if source == "covid-fact":
        return list(covid_fact_pairs(nli_dir / "covid-fact" / "COVIDFACT_dataset.jsonl"))
    raise ValueError(f"unknown NLI source {source!r}; choose from {', '.join(NLI_SOURCES)}")


# --- SciFact ---------------------------------------------------------------------------------


def load_scifact_corpus(path: Path) -> dict[int, list[str]]:
    """{doc_id: [sentence, ...]}, sentences trimmed (some upstream ones keep a newline)."""
    return {int(row["doc_id"]): [s.strip() for s in row["abstract"]] for row in iter_jsonl(path)}


def claim_groups(claims: list[dict[str, Any]]) -> dict[int, int]:
    """{claim id: group id}: claims citing a common abstract, directly or through a chain of
    others, share a group (the smallest claim id in it)."""
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]  # path halving keeps chains short
            node = parent[node]
        return node

    for row in claims:
        nodes = [f"claim:{row['id']}"] + [f"doc:{d}" for d in _docs_of(row)]
        for node in nodes[1:]:
            parent[root(node)] = root(nodes[0])
    members: dict[str, list[int]] = {}
    for row in claims:
        members.setdefault(root(f"claim:{row['id']}"), []).append(int(row["id"]))
    return {claim_id: min(ids) for ids in members.values() for claim_id in ids}


def split_claims(
    claims: list[dict[str, Any]], *, kept_apart: float, dev: float, seed: int
) -> dict[int, str]:
    """{claim id: "train" | "dev" | "kept_apart"}, whole claim groups at a time, in a seeded
    shuffle of the groups: kept-apart first until it holds `kept_apart` of the claims, then dev
    until `dev` more, the rest train."""
    if not (0 <= kept_apart < 1 and 0 <= dev < 1 and kept_apart + dev < 1):
        raise ValueError("kept_apart and dev are fractions whose sum is below 1")
    groups: dict[int, list[int]] = {}
    for claim_id, group in claim_groups(claims).items():
        groups.setdefault(group, []).append(claim_id)
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    total = len(claims)
    quotas = (("kept_apart", kept_apart * total), ("dev", (kept_apart + dev) * total))
    part_of: dict[int, str] = {}
    assigned = 0
    for group in order:
        part = next((name for name, limit in quotas if assigned < limit), "train")
        for claim_id in groups[group]:
            part_of[claim_id] = part
        assigned += len(groups[group])
    return part_of


def _word_set(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def closest_sentences(
    claim: str, sentences: list[str], indexes: Iterable[int], k: int
) -> list[int]:
    """The `k` of `indexes` whose sentences share the most words with the claim (Jaccard),
    ties by position: hard neutrals, the sentences an answerer would be tempted to quote."""
    claim_words = _word_set(claim)

    def overlap(index: int) -> float:
        words = _word_set(sentences[index])
        return len(words & claim_words) / (len(words | claim_words) or 1)

    return sorted(indexes, key=lambda i: (-overlap(i), i))[:k]


def scifact_pairs(
    claims: Iterable[dict[str, Any]], corpus: dict[int, list[str]], *, neutral_per_claim: int
) -> list[Pair]:
    """For each claim: one pair per rationale (its sentences joined, as the gate joins spans;
    SUPPORT → entailment, CONTRADICT → contradiction), and up to `neutral_per_claim` neutral
    pairs from the sentences of its cited abstracts that are in none of its rationales — the
    ones closest to the claim in words. A claim without evidence (NEI) gets only neutrals."""
    pairs: list[Pair] = []
    for row in claims:
        group = f"scifact:{row['id']}"
        in_rationale: set[tuple[int, int]] = set()
        for doc_key, rationales in (row.get("evidence") or {}).items():
            sentences = corpus[int(doc_key)]
            for rationale in rationales:
                label = SCIFACT_LABELS[rationale["label"]]
                premise = " ".join(sentences[i] for i in rationale["sentences"])
                in_rationale.update((int(doc_key), i) for i in rationale["sentences"])
                if pair := make_pair(premise, row["claim"], label, "scifact", group):
                    pairs.append(pair)
        candidates = [
            (doc_id, i)
            for doc_id in row["cited_doc_ids"]
            for i in range(len(corpus[doc_id]))
            if (doc_id, i) not in in_rationale and corpus[doc_id][i]
        ]
        flat = [corpus[doc_id][i] for doc_id, i in candidates]
        for index in closest_sentences(row["claim"], flat, range(len(flat)), neutral_per_claim):
            if pair := make_pair(flat[index], row["claim"], "neutral", "scifact", group):
                pairs.append(pair)
    return pairs


# --- synthetic contradictions -----------------------------------------------------------------
#
# SciFact's CONTRADICT claims are mostly a supported claim with one edit: an antonym ("more
# stable" → "less stable"), a negation, a verb turned round. A small model trained on topical
# pairs scores those as entailed (the evidence is on topic). Pairing an entailed claim with a
# one-edit negation of it, against the same premise, teaches the edit rather than the topic.
# Training pairs only: dev and kept-apart pairs are never synthesised.

_ANTONYMS = {
    "increase": "decrease",
    "increases": "decreases",
    "increased": "decreased",
    "increasing": "decreasing",
    "decrease": "increase",
    "decreases": "increases",
    "decreased": "increased",
    "decreasing": "increasing",
    "reduces": "increases",
    "reduced": "increased",
    "reduce": "increase",
    "higher": "lower",
    "lower": "higher",
    "more": "less",
    "less": "more",
    "greater": "smaller",
    "positive": "negative",
    "positively": "negatively",
    "negative": "positive",
    "negatively": "positively",
    "promotes": "inhibits",
    "inhibits": "promotes",
    "activates": "inhibits",
    "enhances": "impairs",
    "impairs": "enhances",
    "improves": "worsens",
    "improved": "worsened",
    "upregulates": "downregulates",
    "downregulates": "upregulates",
    "up-regulates": "down-regulates",
    "down-regulates": "up-regulates",
    "required": "dispensable",
    "essential": "dispensable",
    "beneficial": "harmful",
    "effective": "ineffective",
    "safe": "unsafe",
}
_ANTONYM_RE = re.compile(r"\b(" + "|".join(map(re.escape, _ANTONYMS)) + r")\b", re.IGNORECASE)
_NOT_RE = re.compile(r"\b(not|never) ", re.IGNORECASE)
_AUXILIARY_RE = re.compile(r"\b(is|are|was|were|can|will|could|should|may|might|must)\b")
_THIRD_PERSON_VERBS = (
    "affects|causes|contributes|correlates|depends|determines|drives|induces|leads|mediates|"
    "predicts|prevents|protects|regulates|requires|results|triggers|binds|blocks|controls|"
    "confers|exhibits|shows|has|occurs|involves|influences|modulates|alters|interacts"
)
_VERB_RE = re.compile(rf"\b({_THIRD_PERSON_VERBS})\b")


def negated_claim(claim: str) -> str | None:
    """`claim` with one edit that makes it false given evidence that entails it, or None when
    no rule applies: an existing negation removed, else an antonym swapped, else "not" after
    an auxiliary ("can" → "cannot"), else "X causes" → "X does not cause"."""
    if match := _NOT_RE.search(claim):
        return claim[: match.start()] + claim[match.end() :]
    if match := _ANTONYM_RE.search(claim):
        word = match.group(0)
        opposite = _ANTONYMS[word.lower()]
        if word[0].isupper():
            opposite = opposite[0].upper() + opposite[1:]
        return claim[: match.start()] + opposite + claim[match.end() :]
    if match := _AUXILIARY_RE.search(claim):
        word = match.group(0)
        negated = "cannot" if word == "can" else f"{word} not"
        return claim[: match.start()] + negated + claim[match.end() :]
    if match := _VERB_RE.search(claim):
        verb = match.group(0)
        base = "have" if verb == "has" else verb[:-1]
        return f"{claim[: match.start()]}does not {base}{claim[match.end() :]}"
    return None


NEGATED_SOURCES = ("scifact", "healthver", "climate-fever")


def negated_pairs(pairs: Iterable[Pair], sources: Iterable[str] = NEGATED_SOURCES) -> list[Pair]:
    """A contradiction for each entailment pair of `sources` whose claim a rule can negate:
    the same premise, the negated claim, the same group (so it never straddles a split)."""
    wanted = set(sources)
    out: list[Pair] = []
    for pair in pairs:
        if pair.label == "entailment" and pair.source in wanted:
            negated = negated_claim(pair.hypothesis)
            if negated and negated != pair.hypothesis:
                made = make_pair(pair.premise, negated, "contradiction", pair.source, pair.group)
                if made:
                    out.append(made)
    return out


# --- sampling and writing --------------------------------------------------------------------


def sample(pairs: list[Pair], limit: int | None, seed: int) -> list[Pair]:
    """Up to `limit` pairs in a seeded draw that keeps each label's share (all when no limit)."""
    if limit is None or len(pairs) <= limit:
        return list(pairs)
    rng = random.Random(seed)
    by_label: dict[str, list[Pair]] = {}
    for pair in pairs:
        by_label.setdefault(pair.label, []).append(pair)
    taken: list[Pair] = []
    for label in sorted(by_label):
        group = by_label[label]
        share = round(limit * len(group) / len(pairs))
        taken.extend(rng.sample(group, min(share, len(group))))
    return taken


@dataclass(frozen=True)
class Prepared:
    """What `prepare` wrote, by part, and the files it wrote them to."""

    counts: dict[str, dict[str, dict[str, int]]]  # part → source → label → pairs
    files: dict[str, Path]
    split: dict[str, list[int]]  # part → SciFact claim ids


def prepare(
    *,
    nli_dir: Path,
    scifact_dir: Path,
    out_dir: Path,
    sources: Iterable[str] = DEFAULT_NLI_SOURCES,
    max_pairs_per_source: int | None = None,
    scifact_repeat: int = 1,
    neutral_per_claim: int = 2,
    negations: bool = False,
    kept_apart: float = 0.25,
    dev: float = 0.1,
    seed: int = 13,
) -> Prepared:
    """Write the training pairs (`train.jsonl`, shuffled), the dev pairs the trainer reports on
    (`dev.jsonl`: SciFact dev claims only), the kept-apart pairs and claims
    (`kept_apart_pairs.jsonl`; `kept_apart_claims.jsonl` and `dev_claims.jsonl` are the
    original claim lines, for `lode_eval_gate --claims`), `split.json` and `manifest.json`
    (counts, licences, settings) into `out_dir`."""
    if scifact_repeat < 1:
        raise ValueError("scifact_repeat must be at least 1")
    claims_path = scifact_dir / "claims_train.jsonl"
    corpus_path = scifact_dir / "corpus.jsonl"
    claim_lines = [line for line in claims_path.read_text("utf-8").splitlines() if line.strip()]
    claims = [json.loads(line) for line in claim_lines]
    corpus = load_scifact_corpus(corpus_path)
    part_of = split_claims(claims, kept_apart=kept_apart, dev=dev, seed=seed)

    by_part: dict[str, list[Pair]] = {part: [] for part in PARTS}
    for part in PARTS:
        chosen = [row for row in claims if part_of[int(row["id"])] == part]
        by_part[part] = scifact_pairs(chosen, corpus, neutral_per_claim=neutral_per_claim)
    train = by_part["train"] * scifact_repeat
    sources = list(dict.fromkeys(sources))
    for number, source in enumerate(sources):
        train += sample(nli_pairs(nli_dir, source), max_pairs_per_source, seed + number)
    synthetic = negated_pairs(train) if negations else []
    train += synthetic
    random.Random(seed).shuffle(train)

    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "train": out_dir / "train.jsonl",
        "dev": out_dir / "dev.jsonl",
        "kept_apart_pairs": out_dir / "kept_apart_pairs.jsonl",
        "kept_apart_claims": out_dir / "kept_apart_claims.jsonl",
        "dev_claims": out_dir / "dev_claims.jsonl",
        "split": out_dir / "split.json",
        "manifest": out_dir / "manifest.json",
    }
    write_pairs(files["train"], train)
    write_pairs(files["dev"], by_part["dev"])
    write_pairs(files["kept_apart_pairs"], by_part["kept_apart"])
    for part, key in (("kept_apart", "kept_apart_claims"), ("dev", "dev_claims")):
        lines = [
            line
            for line, row in zip(claim_lines, claims, strict=True)
            if part_of[row["id"]] == part
        ]
        files[key].write_text("".join(f"{line}\n" for line in lines), "utf-8")
    split = {part: sorted(c for c, p in part_of.items() if p == part) for part in PARTS}
    files["split"].write_text(json.dumps(split) + "\n", "utf-8")
    counts = {
        "train": count_pairs(train),
        "dev": count_pairs(by_part["dev"]),
        "kept_apart": count_pairs(by_part["kept_apart"]),
    }
    used = sorted({*sources, "scifact"})
    manifest = {
        "pair_order": "premise = evidence, hypothesis = claim (the gate's order)",
        "labels": list(LABELS),
        "seed": seed,
        "sources": used,
        "licences": {source: LICENCES[source] for source in used},
        "max_pairs_per_source": max_pairs_per_source,
        "scifact_repeat": scifact_repeat,
        "neutral_per_claim": neutral_per_claim,
        "negated_contradictions": {
            "on": negations,
            "from": list(NEGATED_SOURCES),
            "pairs": count_pairs(synthetic),
        },
        "split": {
            "by": "SciFact claim groups (claims citing a common abstract stay together)",
            "kept_apart_fraction": kept_apart,
            "dev_fraction": dev,
            "claims": {part: len(ids) for part, ids in split.items()},
        },
        "counts": counts,
        "inputs": {
            "nli_dir": str(nli_dir),
            "scifact_claims": str(claims_path),
            "scifact_claims_sha256": _file_digest(claims_path),
        },
    }
    files["manifest"].write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")
    return Prepared(counts=counts, files=files, split=split)


def count_pairs(pairs: Iterable[Pair]) -> dict[str, dict[str, int]]:
    """{source: {label: n}}."""
    counts: dict[str, Counter[str]] = {}
    for pair in pairs:
        counts.setdefault(pair.source, Counter())[pair.label] += 1
    return {source: dict(sorted(c.items())) for source, c in sorted(counts.items())}


def write_pairs(path: Path, pairs: Iterable[Pair]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for pair in pairs:
            handle.write(json.dumps(pair.as_row(), ensure_ascii=False) + "\n")


def read_pairs(path: Path) -> list[Pair]:
    return [Pair(**row) for row in iter_jsonl(path)]


def _docs_of(row: dict[str, Any]) -> list[int]:
    return sorted(
        {int(d) for d in row.get("cited_doc_ids", [])} | {int(d) for d in row.get("evidence") or {}}
    )


def _digest(text: str) -> str:
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:16]


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
