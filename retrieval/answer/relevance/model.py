"""The fitted relevance model: two logistic regressions (with and without the embedding
features) read from retrieval/data/relevance.json once per process. Its thresholds are chosen
on data, never by hand: by the fit (training/fit_relevance.py), then on whole asks
(bench/relevance_threshold.py). Damage to the file is `RelevanceUnavailable`, and the gate then
fails closed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.answer.relevance.features import FALLBACK_FEATURE_NAMES, FEATURE_NAMES

RELEVANCE_FILE = Path(__file__).resolve().parent.parent.parent / "data" / "relevance.json"

FULL_MODEL = "full"
FALLBACK_MODEL = "no-embedding"


class RelevanceUnavailable(Exception):
    """The relevance model cannot be used (its weights file is missing or damaged); str() is a
    short user-facing reason. The gate then drops claims at this step: fail closed."""


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function, overflow-free


@dataclass(frozen=True)
class LogisticModel:
    """Standardised features → logistic regression; `threshold` on its probability."""

    feature_names: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    intercept: float
    threshold: float

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """P(the pair answers) for each row of `x` (columns in `self.feature_names` order)."""
        return _sigmoid(((x - self.mean) / self.scale) @ self.weights + self.intercept)

    def as_dict(self) -> dict[str, Any]:
        return {
            "feature_names": list(self.feature_names),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "weights": self.weights.tolist(),
            "intercept": self.intercept,
            "threshold": self.threshold,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], expected: tuple[str, ...]) -> LogisticModel:
        names = tuple(data["feature_names"])
        if names != expected:
            raise RelevanceUnavailable(
                "the relevance weights were fitted on other features; re-run "
                "training/fit_relevance.py"
            )
        arrays = [np.asarray(data[k], dtype=np.float64) for k in ("mean", "scale", "weights")]
        intercept, threshold = float(data["intercept"]), float(data["threshold"])
        width = len(names)
        if (
            any(a.shape != (width,) or not np.all(np.isfinite(a)) for a in arrays)
            or np.any(arrays[1] <= 0)
            or not math.isfinite(intercept)
            or not 0.0 < threshold < 1.0
        ):
            raise RelevanceUnavailable("the relevance weights have the wrong shape or value")
        mean, scale, weights = arrays
        return cls(names, mean, scale, weights, intercept, threshold)


@dataclass(frozen=True)
class RelevanceModel:
    """The fitted pair of models (with and without the embedding feature) and the file's
    metadata (version, what it was fitted on, the fit's report)."""

    full: LogisticModel
    fallback: LogisticModel
    version: str
    meta: Mapping[str, Any] = field(default_factory=dict)

    def model(self, name: str) -> LogisticModel:
        return self.full if name == FULL_MODEL else self.fallback


def read_model(path: Path) -> RelevanceModel:
    """The model in `path`; any damage is `RelevanceUnavailable`."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        models = data["models"]
        full = LogisticModel.from_dict(models[FULL_MODEL], FEATURE_NAMES)
        fallback = LogisticModel.from_dict(models[FALLBACK_MODEL], FALLBACK_FEATURE_NAMES)
        version = str(data["version"])
    except RelevanceUnavailable:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RelevanceUnavailable(
            f"the relevance weights ({path.name}) are unreadable ({type(exc).__name__})"
        ) from exc
    meta = {k: v for k, v in data.items() if k != "models"}
    return RelevanceModel(full=full, fallback=fallback, version=version, meta=meta)


@cache
def _shipped_model() -> RelevanceModel:
    return read_model(RELEVANCE_FILE)


def load_model() -> RelevanceModel:
    """The shipped model (`retrieval/data/relevance.json`), read once per process."""
    return _shipped_model()
