"""Phantom-adjusted excess disclosures.

Phantom disclosures (disclosures of holdout records) and their rate as the baseline for
train disclosures: *Phantoms and Disclosures: a Causal Framework for Auditing Synthetic
Data* (2026), §2.1 and §4. The excess and its interval, built on the exact bounds of the
feature-match test (§5.1 of that paper), are the gate's own; see docs/methods.md §3.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gate.stats._validate import StatsError, check_alpha, check_probability
from gate.stats.feature_match import (
    FeatureMatchResult,
    exact_rate_lower_bound,
    feature_match_test,
)


class ExcessResult(NamedTuple):
    """``excess = T - H p/(1-p)`` with one-sided confidence bounds, each at level alpha.

    With ``D = T + H`` disclosures, ``excess = (T - p D)/(1 - p)``: 0 in expectation under
    zero learning. If the records' true train rate is ``q``, the excess estimates
    ``(q - p) D/(1 - p)``; the bounds map the exact bounds on ``q`` through that line, so
    ``lower > 0`` when the exact feature-match test rejects zero learning (up to the
    rounding of its tail and p̂'s conservative search near alpha: ``FeatureMatchResult``).
    """

    train: float
    holdout: float
    estimate: float
    lower: float
    upper: float
    phantom_rate: float
    alpha: float


def phantom_excess(
    *,
    counts: np.ndarray,
    is_train: np.ndarray,
    p: float = 0.5,
    alpha: float = 0.05,
    test: FeatureMatchResult | None = None,
) -> ExcessResult:
    """Phantom-adjusted excess of train disclosures with its confidence bounds.

    Args:
        counts: c_i, disclosed rare features per record.
        is_train: train flags.
        p: membership probability, in (0, 1).
        alpha: level of each one-sided bound, in (0, 1).
        test: the feature-match test of the same counts, p and alpha, if already computed
            (its exact p̂ is the expensive part).

    Returns:
        T, H, the excess, its lower and upper bounds, and the phantom rate ``H / (T + H)``
        (NaN when nothing is disclosed).
    """
    check_probability("p", p, open_low=True, open_high=True)
    check_alpha(alpha)
    if test is None:
        test = feature_match_test(counts=counts, is_train=is_train, p=p, alpha=alpha)
    elif (test.p, test.alpha) != (p, alpha):
        raise StatsError(
            f"test was computed with p={test.p}, alpha={test.alpha}; found p={p}, alpha={alpha}"
        )
    t, h, d = test.statistic, test.holdout_statistic, test.c1
    scale = d / (1.0 - p)
    if d == 0:
        return ExcessResult(0.0, 0.0, 0.0, 0.0, 0.0, float("nan"), alpha)
    # Upper bound on q: the lower bound on the holdout rate 1 - q, from the holdout side.
    c = np.asarray(counts, dtype=np.int64)
    holdout_rate_lower = exact_rate_lower_bound(counts=c, statistic=h, alpha=alpha)
    q_upper = 1.0 - holdout_rate_lower
    return ExcessResult(
        train=t,
        holdout=h,
        estimate=t - h * p / (1.0 - p),
        lower=(test.p_lower_exact - p) * scale,
        upper=(q_upper - p) * scale,
        phantom_rate=h / d,
        alpha=alpha,
    )
