"""Step 3 of the faithfulness gate: does the premise (the cited spans, joined) entail the
hypothesis (the claim)? Behind one Protocol, so the gate never hard-wires a model
(MODELS.md "Cross-encoder reranker and NLI": none ships offline).

Backends, picked by `LODE_ENTAILMENT`:

* `none` (default) — no scorer. The gate then drops every claim that needs entailment, and
  says why: fail closed (seeds/lode-retrieval.md, "Entailment check").
* `cross-encoder` — fastembed's `TextCrossEncoder` loaded from a local folder
  (`LODE_ENTAILMENT_MODEL_DIR`, layout `DIR/onnx/model.onnx` plus the tokenizer files at
  `DIR`, the same layout as the reranker's), its logit squashed by a sigmoid into [0, 1].
  fastembed reads the *first* output column, so the folder must hold a single-logit model
  whose logit rises with entailment (or a re-export of an NLI head to that shape); a
  three-way MNLI head read through column 0 would score "contradiction". A relevance
  reranker (ms-marco, bge-reranker) repurposed here, as the seed does, scores *topicality*,
  not entailment: it cannot tell a sentence from its negation — which is why the threshold is
  high and why `lode_eval_gate` measures the contradict false-accept rate.
* `llm-judge` — `retrieval.llm.LLMJudge`, the chat endpoint asked to judge (an egress event,
  logged like any other).

A scorer returns a probability-like value in [0, 1] and raises `EntailmentUnavailable` (with a
short, user-facing reason) when it cannot run. Nothing is loaded until a claim actually
reaches step 3.
"""

from __future__ import annotations

import math
import threading
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings

ENTAILMENT_CHOICES = ("none", "cross-encoder", "llm-judge")

# Accept a claim at step 3 only when the score is strictly above this. UNTUNED: chosen
# conservative (fail-closed) before any labelled data, as the seed asks — a sigmoid of 0.9 is a
# logit above ~2.2. `manage.py lode_eval_gate` is the harness to tune it against; until then
# treat synthesis that passes it as "capability present, quality untuned".
ENTAILMENT_THRESHOLD = 0.9


class EntailmentUnavailable(Exception):
    """The entailment scorer cannot run; str() is a short user-facing reason."""


class EntailmentScorer(Protocol):
    name: str

    def score(self, premise: str, hypothesis: str) -> float:
        """A probability-like value in [0, 1] that `premise` entails `hypothesis`.
        Raises EntailmentUnavailable when the scorer cannot run."""
        ...


def sigmoid(logit: float) -> float:
    """The logistic function, safe for large magnitudes (no overflow warning)."""
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    z = math.exp(logit)
    return z / (1.0 + z)


class CrossEncoderEntailment:
    """A local cross-encoder folder scoring (premise, hypothesis) pairs, in the NLI pair order.
    Loaded once per process on first use, under a lock (web workers are threaded)."""

    name = "cross-encoder"

    def __init__(self, folder: Path | str | None, model_name: str):
        self.folder = Path(folder) if folder else None
        self.model_name = model_name
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                if self.folder is None:
                    raise EntailmentUnavailable(
                        "no entailment model configured (set LODE_ENTAILMENT_MODEL_DIR)"
                    )
                model_file = self.folder / "onnx" / "model.onnx"
                if not model_file.is_file():
                    raise EntailmentUnavailable(f"no entailment model at {model_file}")
                from fastembed.rerank.cross_encoder import TextCrossEncoder

                try:
                    self._model = TextCrossEncoder(
                        self.model_name, specific_model_path=str(self.folder)
                    )
                except Exception as exc:  # onnxruntime/tokenizers raise many types
                    raise EntailmentUnavailable(
                        f"entailment model at {self.folder} failed to load: {exc}"
                    ) from exc
        return self._model

    def score_logits(self, pairs: list[tuple[str, str]]) -> list[float]:
        """Raw logits for (premise, hypothesis) pairs, batched (the evaluation uses this)."""
        if not pairs:
            return []
        model = self._load()
        try:
            return [float(s) for s in model.rerank_pairs(pairs, batch_size=32)]
        except Exception as exc:
            raise EntailmentUnavailable(f"entailment model failed: {exc}") from exc

    def score(self, premise: str, hypothesis: str) -> float:
        (logit,) = self.score_logits([(premise, hypothesis)])
        if not math.isfinite(logit):
            raise EntailmentUnavailable("entailment model returned a non-finite logit")
        return sigmoid(logit)


@cache
def _cross_encoder(folder: str, model_name: str) -> CrossEncoderEntailment:
    return CrossEncoderEntailment(folder or None, model_name)


def get_entailment_scorer(name: str | None = None) -> EntailmentScorer | None:
    """The scorer called `name` (default: `settings.LODE_ENTAILMENT`), or None for "none".

    Never raises for a backend that is merely unconfigured or broken: that scorer raises
    EntailmentUnavailable when asked to score, so the gate drops the claim with the reason
    instead of the whole ask failing. An unknown name is a programming error (ValueError).
    """
    name = settings.LODE_ENTAILMENT if name is None else name
    if name == "none":
        return None
    if name == "cross-encoder":
        return _cross_encoder(
            str(settings.LODE_ENTAILMENT_MODEL_DIR or ""), settings.LODE_ENTAILMENT_MODEL_NAME
        )
    if name == "llm-judge":
        from retrieval.llm import LLMJudge  # lazy: the chat client is another module's concern

        return LLMJudge()
    raise ValueError(f"unknown entailment backend {name!r}; choose one of {ENTAILMENT_CHOICES}")
