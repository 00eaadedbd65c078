"""`training/logistic.py`: the two scikit-learn fits behind the shipped weights minimise the
objective their commands document, separate what is separable, and leave the intercept
unpenalised."""

from __future__ import annotations

import numpy as np
import pytest

from training.logistic import fit_logistic, fit_pairwise, sigmoid, standardiser


def separable(seed: int, n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Three features; the label is the sign of the first, the others are noise."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    x[:, 0] += np.where(x[:, 0] > 0, 1.0, -1.0)  # a margin of 2 around zero
    return x, (x[:, 0] > 0).astype(np.float64)


def logistic_gradient(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float, coef: np.ndarray, intercept: float
) -> np.ndarray:
    """The gradient of Σ wᵢ·lossᵢ (weights summing to 1) + l2/2·‖coef‖² at (coef, intercept)."""
    weights = w / w.sum()
    p = sigmoid(x @ coef + intercept)
    residual = weights * (p - y)
    return np.concatenate([x.T @ residual + l2 * coef, [residual.sum()]])


def test_fit_logistic_separates_a_separable_set() -> None:
    x, y = separable(seed=1)
    coef, intercept = fit_logistic(x, y, np.ones(len(y)), l2=0.01)
    predicted = sigmoid(x @ coef + intercept) >= 0.5
    assert (predicted == (y == 1)).all()
    assert abs(coef[0]) > 5 * max(abs(coef[1]), abs(coef[2]))


@pytest.mark.parametrize("l2", [0.001, 0.1, 3.0])
def test_fit_logistic_reaches_the_weighted_l2_optimum(l2: float) -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(300, 4))
    y = (x @ np.array([1.0, -0.5, 0.0, 0.2]) + rng.normal(size=300) > 0.3).astype(np.float64)
    w = rng.uniform(0.2, 3.0, size=300)
    coef, intercept = fit_logistic(x, y, w, l2)
    assert np.abs(logistic_gradient(x, y, w, l2, coef, intercept)).max() < 1e-8


def test_a_strong_penalty_shrinks_the_weights_but_never_the_intercept() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 2))
    y = (rng.uniform(size=400) < 0.8).astype(np.float64)  # 80% positive, unrelated to x
    coef, intercept = fit_logistic(x, y, np.ones(400), l2=1e4)
    assert np.abs(coef).max() < 1e-3
    assert sigmoid(np.array(intercept)) == pytest.approx(y.mean(), abs=1e-3)


def pairwise_gradient(diffs: np.ndarray, weights: np.ndarray, l2: float, w: np.ndarray):
    p = sigmoid(diffs @ w)
    return -(diffs * (weights * (1.0 - p))[:, None]).sum(axis=0) + l2 * w


@pytest.mark.parametrize("l2", [0.001, 0.1])
def test_fit_pairwise_reaches_the_pairwise_optimum(l2: float) -> None:
    rng = np.random.default_rng(4)
    diffs = rng.normal(size=(500, 3)) + np.array([0.8, 0.0, -0.3])
    weights = rng.uniform(0.5, 2.0, size=500)
    weights /= weights.sum()
    w = fit_pairwise(diffs, l2, weights)
    assert np.abs(pairwise_gradient(diffs, weights, l2, w)).max() < 1e-8


def test_fit_pairwise_ranks_every_positive_first_when_one_feature_tells() -> None:
    rng = np.random.default_rng(5)
    positives = rng.normal(size=(100, 3)) + np.array([2.0, 0.0, 0.0])
    negatives = rng.normal(size=(100, 3)) - np.array([2.0, 0.0, 0.0])
    diffs = positives - negatives
    w = fit_pairwise(diffs, 0.01)
    assert w[0] > 0 and (diffs @ w > 0).mean() > 0.99
    uniform = np.full(len(diffs), 1 / len(diffs))
    assert np.allclose(w, fit_pairwise(diffs, 0.01, uniform))


def test_standardiser_keeps_a_constant_column_as_it_is() -> None:
    x = np.array([[1.0, 5.0], [3.0, 5.0]])
    mean, scale = standardiser(x)
    assert mean.tolist() == [2.0, 5.0] and scale.tolist() == [1.0, 1.0]
