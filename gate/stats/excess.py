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
    feature_match_test_for_interval,
)
from gate.stats.split_balance import ShareInterval


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
    share: ShareInterval | None = None,
) -> ExcessResult:
    """Phantom-adjusted excess of train disclosures with its confidence bounds.

    Args:
        counts: c_i, disclosed rare features per record.
        is_train: train flags.
        p: membership probability, in (0, 1).
        alpha: level of each one-sided bound, in (0, 1).
        test: the feature-match test of the same counts, p and alpha, if already computed
            (its exact p̂ is the expensive part).
        share: an interval of an unknown p (a declared split); ``p`` is then unused. The
            lower bound takes the interval's upper end and the upper bound its lower end
            (the excess ``(q - p) D/(1 - p)`` falls as p grows), both at ``alpha -
            share.gamma`` (Berger and Boos 1994; :func:`feature_match_test_for_interval`),
            and the estimate takes the split's train share.

    Returns:
        T, H, the excess, its lower and upper bounds, and the phantom rate ``H / (T + H)``
        (NaN when nothing is disclosed).
    """
    check_probability("p", p, open_low=True, open_high=True)
    check_alpha(alpha)
    if share is None:
        p_low = p_high = p_point = p
        level, gamma = alpha, 0.0
        if test is None:
            test = feature_match_test(counts=counts, is_train=is_train, p=p, alpha=alpha)
    else:
        p_low, p_high = share.low, share.high
        p_point = share.train_users / share.total_users
        level, gamma = alpha - share.gamma, share.gamma
        if test is None:
            test = feature_match_test_for_interval(
                counts=counts, is_train=is_train, share=share, alpha=alpha
            )
    if (test.p, test.alpha, test.gamma) != (p_high, alpha, gamma):
        raise StatsError(
            f"test was computed with p={test.p}, alpha={test.alpha}, gamma={test.gamma}; "
            f"found p={p_high}, alpha={alpha}, gamma={gamma}"
        )
    t, h, d = test.statistic, test.holdout_statistic, test.c1
    if d == 0:
        return ExcessResult(0.0, 0.0, 0.0, 0.0, 0.0, float("nan"), alpha)
    # Upper bound on q: the lower bound on the holdout rate 1 - q, from the holdout side.
    c = np.asarray(counts, dtype=np.int64)
    holdout_rate_lower = exact_rate_lower_bound(counts=c, statistic=h, alpha=level)
    q_upper = 1.0 - holdout_rate_lower
    return ExcessResult(
        train=t,
        holdout=h,
        estimate=t - h * p_point / (1.0 - p_point),
        lower=(test.p_lower_exact - p_high) * d / (1.0 - p_high),
        upper=(q_upper - p_low) * d / (1.0 - p_low),
        phantom_rate=h / d,
        alpha=alpha,
    )
