"""Measure the faithfulness gate on SciFact claims (`manage.py lode_eval_gate`).

The question it answers: when a claim quotes sentences that really are in the cited abstract,
how often does the gate accept it when those sentences SUPPORT the claim, and — the number
that matters most — how often when they CONTRADICT it (a false accept: a wrong claim shown
with a verbatim citation)?

Unit of evaluation: one SciFact *rationale* (a minimal set of sentences that on its own
supports or contradicts the claim). Each becomes one gate input:
`Claim(text=claim, support=(Support(version_id=doc_id, quoted_span=sentence), ...))`, one
`Support` per rationale sentence, every sentence trimmed. The version body is the abstract's
sentences, each trimmed, joined with a single space (the BEIR SciFact packaging's `text`); the
title is not part of it. The version the claim cites is the one "sent", so step 1 checks the
quoting itself. Claims with no evidence ("not enough info") are skipped.

Steps 1–2 do not depend on the entailment backend; each backend reruns the gate so the
figures per backend are complete and independent. Pure: no database, except what a backend
itself writes (the LLM judge logs its egress).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from retrieval.answer.entailment import (
    ENTAILMENT_CHOICES,
    ENTAILMENT_THRESHOLD,
    EntailmentScorer,
    EntailmentUnavailable,
    get_entailment_scorer,
)
from retrieval.answer.gate import STEP_COUPLING, STEP_ENTAILMENT, STEP_VERBATIM, check_claim
from retrieval.answer.types import Claim, ClaimVerdict, Support
from retrieval.words.opposites import ANTONYMS

LABELS = ("SUPPORT", "CONTRADICT")
BODY_JOINER = " "
EXAMPLES_KEPT = 10


@dataclass(frozen=True)
class GateItem:
    claim_id: int
    label: str  # "SUPPORT" | "CONTRADICT"
    doc_id: int
    claim: Claim
    body: str


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from exc


def load_corpus(path: Path) -> dict[int, list[str]]:
    """{doc_id: [sentence, ...]} with every sentence trimmed (some upstream sentences keep
    trailing spaces or newlines)."""
    return {int(row["doc_id"]): [s.strip() for s in row["abstract"]] for row in read_jsonl(path)}


def body_of(sentences: list[str]) -> str:
    return BODY_JOINER.join(sentences)


def build_items(
    claims_rows: Iterable[dict[str, Any]], corpus: dict[int, list[str]], *, limit: int | None
) -> tuple[list[GateItem], dict[str, int]]:
    """Gate inputs, one per rationale of the first `limit` claims that have evidence, and
    counts of what was skipped."""
    items: list[GateItem] = []
    skipped: Counter[str] = Counter()
    taken = 0
    for row in claims_rows:
        evidence = row.get("evidence") or {}
        if not evidence:
            skipped["claims without evidence"] += 1
            continue
        if limit is not None and taken >= limit:
            break
        taken += 1
        for doc_key, rationales in evidence.items():
            doc_id = int(doc_key)
            sentences = corpus.get(doc_id)
            if sentences is None:
                skipped["rationales citing a document not in the corpus"] += len(rationales)
                continue
            for rationale in rationales:
                label = rationale["label"]
                if label not in LABELS:
                    skipped[f"rationales labelled {label}"] += 1
                    continue
                support = tuple(
                    Support(version_id=doc_id, quoted_span=sentences[i])
                    for i in rationale["sentences"]
                )
                items.append(
                    GateItem(
                        claim_id=int(row["id"]),
                        label=label,
                        doc_id=doc_id,
                        claim=Claim(text=row["claim"], support=support),
                        body=body_of(sentences),
                    )
                )
    return items, dict(skipped)


def _rate(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def _reason_kind(verdict: ClaimVerdict) -> str:
    """A drop reason with its particulars (ids, scores) blanked, for a histogram."""
    if verdict.step == STEP_ENTAILMENT and verdict.entailment_score is not None:
        return "entailment: below threshold"
    return f"{verdict.step}: {re.sub(r'[0-9]+', 'N', verdict.reason)}"


def summarise(items: list[GateItem], verdicts: list[ClaimVerdict]) -> dict[str, Any]:
    """Per-step figures for one label under one backend."""
    n = len(items)
    verbatim_failed = sum(1 for v in verdicts if v.step == STEP_VERBATIM and not v.passed)
    verbatim_passed = n - verbatim_failed
    coupled = sum(1 for v in verdicts if v.step == STEP_COUPLING and v.passed)
    reached = [v for v in verdicts if v.step == STEP_ENTAILMENT]
    entailed = sum(1 for v in reached if v.passed)
    scored = [v.entailment_score for v in reached if v.entailment_score is not None]
    accepted = coupled + entailed
    claims_total = len({i.claim_id for i in items})
    claims_accepted = len({i.claim_id for i, v in zip(items, verdicts, strict=True) if v.passed})
    reasons = Counter(_reason_kind(v) for v in verdicts if not v.passed)
    examples = [
        {
            "claim_id": i.claim_id,
            "doc_id": i.doc_id,
            "claim": i.claim.text,
            "spans": [s.quoted_span for s in i.claim.support],
            "step": v.step,
            "reason": v.reason,
        }
        for i, v in zip(items, verdicts, strict=True)
        if v.passed
    ][:EXAMPLES_KEPT]
    return {
        "rationales": n,
        "claims": claims_total,
        "verbatim": {"passed": verbatim_passed, "pass_rate": _rate(verbatim_passed, n)},
        "coupling": {
            "reached": verbatim_passed,
            "passed": coupled,
            "pass_rate": _rate(coupled, verbatim_passed),
        },
        "entailment": {
            "reached": len(reached),
            "scored": len(scored),
            # Reached step 3 but got no score (the backend failed): dropped, fail closed.
            "unscored": len(reached) - len(scored),
            "accepted": entailed,
            "accept_rate": _rate(entailed, len(reached)),
            "mean_score": round(sum(scored) / len(scored), 4) if scored else None,
        },
        "accepted": accepted,
        "accept_rate": _rate(accepted, n),
        "claims_accepted": claims_accepted,
        "claims_accept_rate": _rate(claims_accepted, claims_total),
        "drop_reasons": dict(reasons.most_common()),
        "accepted_examples": examples,
    }


# --- coupling stress: perturbed rationale sentences -----------------------------------------
#
# Each rationale sentence is quoted whole as the span, and the *claim* is that sentence after
# one edit that makes it false (or, for `self_quote`, no edit). Only steps 1–2 run (no
# entailment): a perturbed claim that couples is a false accept the fast path would show as
# verified with no model in the loop, whatever the backend. `self_quote` measures the other
# side: a claim identical to its span must couple.

_INTEGER_RE = re.compile(r"\b\d+\b")
_NOT_RE = re.compile(r"\bnot ")
_NT_RE = re.compile(r"n['\u2019]t\b")
_NEGATED_COMPOUND_RE = re.compile(r"\b(\w+)-(?:in|non|un)(\w+)\b")


def _perturbations(sentence: str) -> dict[str, str]:
    edits = {"self_quote": sentence}
    if m := _INTEGER_RE.search(sentence):
        edits["number_drift"] = f"{sentence[: m.start()]}{int(m.group()) + 1}{sentence[m.end() :]}"
    if _NOT_RE.search(sentence):
        edits["negation_removed"] = _NOT_RE.sub("", sentence, count=1)
    elif _NT_RE.search(sentence):
        edits["negation_removed"] = _NT_RE.sub("", sentence, count=1)
    for word, opposite in ANTONYMS.items():
        pattern = re.compile(rf"\b{word}\b")
        if pattern.search(sentence):
            edits["antonym_swap"] = pattern.sub(opposite, sentence, count=1)
            break
    if m := _NEGATED_COMPOUND_RE.search(sentence):
        edits["compound_prefix_dropped"] = sentence.replace(
            m.group(0), f"{m.group(1)}-{m.group(2)}", 1
        )
    return edits


def coupling_stress(items: list[GateItem]) -> dict[str, dict[str, Any]]:
    """{edit: {"n", "coupled", "rate", "examples"}} over the distinct rationale sentences."""
    seen: dict[tuple[int, str], str] = {}
    for item in items:
        for support in item.claim.support:
            seen.setdefault((item.doc_id, support.quoted_span), item.body)
    results: dict[str, dict[str, Any]] = {}
    for (doc_id, sentence), body in seen.items():
        for edit, text in _perturbations(sentence).items():
            verdict = check_claim(
                Claim(text=text, support=(Support(doc_id, sentence),)), {doc_id: body}, scorer=None
            )
            row = results.setdefault(edit, {"n": 0, "coupled": 0, "examples": []})
            row["n"] += 1
            if verdict.passed:
                row["coupled"] += 1
                if edit != "self_quote" and len(row["examples"]) < EXAMPLES_KEPT:
                    row["examples"].append({"doc_id": doc_id, "claim": text, "span": sentence})
    for row in results.values():
        row["rate"] = _rate(row["coupled"], row["n"])
    return results


def backend_unavailable(name: str) -> str:
    """Why backend `name` cannot run here ("" when it can), checked before any claim is
    scored, so the report says so instead of showing every claim dropped."""
    if name == "none":
        return ""
    if name == "cross-encoder":
        if not settings.LODE_ENTAILMENT_MODEL_DIR:
            return "LODE_ENTAILMENT_MODEL_DIR is not set (no local cross-encoder folder)"
        scorer = get_entailment_scorer(name)
        assert scorer is not None
        try:
            scorer.score("probe", "probe")
        except EntailmentUnavailable as exc:
            return str(exc)
        return ""
    if name == "llm-judge":
        if not settings.LODE_LLM_BASE_URL:
            return "LODE_LLM_BASE_URL is not set (no chat endpoint to judge with)"
        try:
            import retrieval.answer.llm  # noqa: F401
        except ImportError as exc:
            return f"the LLM judge cannot be imported ({exc})"
        return ""
    return f"unknown backend; choose from {', '.join(ENTAILMENT_CHOICES)}"


def run_backend(items: list[GateItem], scorer: EntailmentScorer | None) -> list[ClaimVerdict]:
    return [check_claim(i.claim, {i.doc_id: i.body}, scorer=scorer) for i in items]


def evaluate(
    claims_path: Path, corpus_path: Path, backends: list[str], *, limit: int | None = None
) -> dict[str, Any]:
    """The report: per backend, per label, per step; `support`/`contradict` at the top level
    are the first backend that ran (the default), the rest are under `backends`."""
    corpus = load_corpus(corpus_path)
    items, skipped = build_items(read_jsonl(claims_path), corpus, limit=limit)
    by_label = {label: [i for i in items if i.label == label] for label in LABELS}
    report: dict[str, Any] = {
        "claims_file": str(claims_path),
        "corpus_file": str(corpus_path),
        "unit": "rationale (one gate input per SciFact rationale; its sentences are the spans)",
        "body": "abstract sentences, each trimmed, joined with a single space (title excluded)",
        "entailment_threshold": ENTAILMENT_THRESHOLD,
        "limit": limit,
        "skipped": skipped,
        "backends": {},
    }
    for name in backends:
        reason = backend_unavailable(name)
        if reason:
            report["backends"][name] = {"skipped": reason}
            continue
        scorer = get_entailment_scorer(name)
        report["backends"][name] = {
            label.lower(): summarise(group, run_backend(group, scorer))
            for label, group in by_label.items()
        }
    report["coupling_stress"] = coupling_stress(items)
    ran = [name for name in backends if "skipped" not in report["backends"][name]]
    report["default_backend"] = ran[0] if ran else None
    if ran:
        first = report["backends"][ran[0]]
        report["support"] = first["support"]
        report["contradict"] = first["contradict"]
        report["contradict_false_accept_rate"] = first["contradict"]["accept_rate"]
    return report


# The per-backend table: one row per backend and label (or one "skipped" row).
_TABLE_HEADER = (
    f"{'backend':<14}{'label':<11}{'n':>5}{'verbatim':>10}{'coupled':>9}"
    f"{'to NLI':>8}{'NLI ok':>8}{'accept':>8}"
)
_TABLE_LABELS = ("support", "contradict")


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def format_report(report: dict[str, Any]) -> list[str]:
    """The human-readable table the command prints."""
    lines = [
        f"{report['claims_file']} against {report['corpus_file']}",
        f"unit: {report['unit']}; body: {report['body']}; "
        f"entailment threshold {report['entailment_threshold']} (untuned)",
    ]
    lines += [f"skipped: {count} {what}" for what, count in report["skipped"].items()]
    lines.append(_TABLE_HEADER)
    for name, result in report["backends"].items():
        lines += _backend_rows(name, result)
    lines += _coupling_stress_lines(report.get("coupling_stress", {}))
    for name, result in report["backends"].items():
        lines += _unscored_warnings(name, result)
    if report.get("default_backend"):
        lines.append(
            f"CONTRADICT false-accept rate ({report['default_backend']}): "
            f"{_pct(report['contradict_false_accept_rate'])}"
        )
    return lines


def _backend_rows(name: str, result: dict[str, Any]) -> list[str]:
    """The table rows of one backend: one per label, or one saying why it was skipped."""
    if "skipped" in result:
        return [f"{name:<14}skipped: {result['skipped']}"]
    rows = []
    for label in _TABLE_LABELS:
        r = result[label]
        rows.append(
            f"{name:<14}{label:<11}{r['rationales']:>5}{_pct(r['verbatim']['pass_rate']):>10}"
            f"{_pct(r['coupling']['pass_rate']):>9}{r['entailment']['reached']:>8}"
            f"{_pct(r['entailment']['accept_rate']):>8}{_pct(r['accept_rate']):>8}"
        )
    return rows


def _coupling_stress_lines(stress: dict[str, dict[str, Any]]) -> list[str]:
    """The coupling stress block (nothing when the report has none)."""
    if not stress:
        return []
    lines = [
        "coupling stress (claim = a rationale sentence after one edit, span = the sentence; "
        "coupled = shown as verified with no model):"
    ]
    for edit, row in stress.items():
        lines.append(
            f"  {edit:<24}{row['coupled']:>5} of {row['n']:<5} coupled ({_pct(row['rate'])})"
        )
    return lines


def _unscored_warnings(name: str, result: dict[str, Any]) -> list[str]:
    """A warning per label where the backend gave no score for some rationales (never for
    "none", which scores nothing, nor for a skipped backend)."""
    if name == "none" or "skipped" in result:
        return []
    warnings = []
    for label in _TABLE_LABELS:
        e = result[label]["entailment"]
        if e["unscored"]:
            warnings.append(
                f"warning: {name} gave no score for {e['unscored']} of {e['reached']} "
                f"{label} rationales reaching entailment (dropped; see drop_reasons)"
            )
    return warnings
