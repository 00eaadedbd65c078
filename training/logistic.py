"""The two logistic fits the training commands share, both scikit-learn's
`LogisticRegression`, and the standardisation their features go through.

Both fits minimise ``Σ wᵢ·lossᵢ + (l2 / 2)·‖β‖²`` with the sample weights summing to 1 and the
intercept (when there is one) not penalised: scikit-learn's objective with ``C = 1 / l2`` and
the weights as ``sample_weight``. The Newton solver (``newton-cholesky``) reaches the optimum
to float precision, so a fit depends only on its data and ``l2``.
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression

TOLERANCE = 1e-10
MAX_ITERATIONS = 500


def _model(l2: float, *, intercept: bool) -> LogisticRegression:
    return LogisticRegression(
        C=1.0 / l2,
        fit_intercept=intercept,
        solver="newton-cholesky",
        tol=TOLERANCE,
        max_iter=MAX_ITERATIONS,
    )


def fit_logistic(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float
) -> tuple[np.ndarray, float]:
    """Weighted logistic regression of 0/1 labels `y` on (standardised) `x`, L2 `l2` on the
    weights and not on the intercept. Returns (weights, intercept)."""
    model = _model(l2, intercept=True).fit(x, y, sample_weight=w / w.sum())
    return model.coef_[0].copy(), float(model.intercept_[0])


def fit_pairwise(diffs: np.ndarray, l2: float, weights: np.ndarray | None = None) -> np.ndarray:
    """Weights of a linear scorer from pair differences (positive − negative of one query):
    logistic loss on ``w·d`` with no bias, L2 `l2`, each pair weighted by `weights` (None:
    alike). Every pair's label is "the first ranks higher"; a difference and its negation
    with labels 1 and 0 carry the same loss, so scikit-learn fits the two halves, each at
    half the pair's weight, and the objective is the pairwise one unchanged."""
    n = len(diffs)
    if weights is None:
        weights = np.full(n, 1.0 / max(n, 1))
    x = np.vstack([diffs, -diffs])
    y = np.concatenate([np.ones(n), np.zeros(n)])
    sample_weight = np.concatenate([weights, weights]) / (2.0 * weights.sum())
    model = _model(l2, intercept=False).fit(x, y, sample_weight=sample_weight)
    return model.coef_[0].copy()


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def standardiser(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and standard deviations of `x`; a constant column's scale is 1."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-12] = 1.0
    return mean, scale
