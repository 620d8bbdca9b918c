"""Clopper-Pearson bounds on a binomial proportion."""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
from scipy import stats

from gate.stats._validate import StatsError, check_alpha, check_count, check_integers


class Interval(NamedTuple):
    lower: float
    upper: float


def clopper_pearson(
    *,
    successes: int,
    trials: int,
    alpha: float,
    side: Literal["two-sided", "lower", "upper"] = "two-sided",
) -> Interval:
    """Exact (Clopper-Pearson) confidence bounds for a binomial success probability.

    ``side="lower"`` gives the one-sided lower bound ``Beta.ppf(alpha, K, T-K+1)`` with the
    upper end 1; ``"two-sided"`` splits alpha over both ends. The distinguishability game
    of Li, Grivet Sébert, Xu, McIver, Dras (2026), *Beyond Theoretical Bounds: Empirical
    Privacy Loss Calibration for Text Rewriting Under Local Differential Privacy* (TeDA,
    arXiv:2603.22968), App. A eq. (11) and App. D Algorithm 1, takes the Clopper-Pearson
    lower bound; the lower end of the two-sided interval reproduces its ceiling ε ≈ 7.54
    (§4.2) and is what :mod:`gate.stats.distinguishability` uses.

    Args:
        successes: K, in [0, trials].
        trials: T >= 1.
        alpha: miss probability of the statement, in (0, 1).
        side: which bounds to compute.
    """
    check_count("trials", trials, minimum=1)
    check_count("successes", successes, maximum=trials)
    check_alpha(alpha)
    if side not in ("two-sided", "lower", "upper"):
        raise StatsError(f"side must be 'two-sided', 'lower' or 'upper'; found {side!r}")
    tail = alpha / 2 if side == "two-sided" else alpha
    lower, upper = 0.0, 1.0
    if side != "upper" and successes > 0:
        lower = float(stats.beta.ppf(tail, successes, trials - successes + 1))
    if side != "lower":
        upper = float(upper_bounds(successes=np.array([successes]), trials=trials, alpha=tail)[0])
    return Interval(lower, upper)


def upper_bounds(*, successes: np.ndarray, trials: int, alpha: float) -> np.ndarray:
    """The one-sided Clopper-Pearson upper bounds ``Beta.ppf(1 - alpha, K + 1, T - K)`` of
    every count ``K`` in ``successes`` (1 where K = T), at once."""
    check_count("trials", trials, minimum=1)
    check_alpha(alpha)
    k = check_integers("successes", successes)
    if k.size and (k.min() < 0 or k.max() > trials):
        raise StatsError(
            f"successes must be integers in [0, trials = {trials}]; found "
            f"{k.min() if k.min() < 0 else k.max()}"
        )
    bounds = np.ones(k.shape)
    below = k < trials
    bounds[below] = stats.beta.ppf(1 - alpha, k[below] + 1, trials - k[below])
    return bounds
