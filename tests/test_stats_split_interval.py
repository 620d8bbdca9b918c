"""Statements over an interval of an unknown p (a declared split; Berger and Boos 1994):
the interval, the feature-match test, the excess and the one-run bound over it, checked
against closed forms and by simulation."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats

from gate.stats._validate import StatsError
from gate.stats.excess import phantom_excess
from gate.stats.feature_match import (
    epsilon_from_rate,
    exact_rate_lower_bound,
    feature_match_test,
    feature_match_test_for_interval,
)
from gate.stats.one_run import one_run_epsilon_from_scores, one_run_p_value
from gate.stats.split_balance import ShareInterval, train_share_interval


def test_train_share_interval_is_the_clopper_pearson_interval() -> None:
    share = train_share_interval(train_users=530, total_users=1000, gamma=0.01)
    reference = stats.binomtest(530, 1000).proportion_ci(confidence_level=0.99, method="exact")
    assert share.low == pytest.approx(reference.low, abs=1e-12)
    assert share.high == pytest.approx(reference.high, abs=1e-12)
    assert (share.gamma, share.train_users, share.total_users) == (0.01, 530, 1000)
    # by hand: the ends are the beta quantiles of the Clopper-Pearson interval
    assert share.low == pytest.approx(stats.beta.ppf(0.005, 530, 471))
    assert share.high == pytest.approx(stats.beta.ppf(0.995, 531, 470))


@pytest.mark.parametrize(
    ("train", "total", "gamma", "message"),
    [
        (0, 10, 0.01, "train_users must be in \\[1, total_users - 1\\]"),
        (10, 10, 0.01, "train_users must be in \\[1, total_users - 1\\]"),
        (3, 10, 0.0, "gamma"),
        (3, 10, 1.0, "gamma"),
        (11, 10, 0.01, "train_users"),
    ],
)
def test_train_share_interval_refuses(train: int, total: int, gamma: float, message: str) -> None:
    with pytest.raises(StatsError, match=message):
        train_share_interval(train_users=train, total_users=total, gamma=gamma)


def _counts(rng: np.random.Generator, users: int) -> np.ndarray:
    return np.where(rng.random(users) < 0.3, rng.poisson(2, users) + 1, 0)


def test_feature_match_over_an_interval_is_the_worst_end_plus_gamma() -> None:
    rng = np.random.default_rng(3)
    counts = _counts(rng, 400)
    is_train = rng.random(400) < 0.5
    is_train[counts > 0] |= rng.random(int((counts > 0).sum())) < 0.5  # some leakage
    share = train_share_interval(train_users=int(is_train.sum()), total_users=400, gamma=0.01)
    found = feature_match_test_for_interval(
        counts=counts, is_train=is_train, share=share, alpha=0.05
    )
    at_high = feature_match_test(counts=counts, is_train=is_train, p=share.high, alpha=0.04)
    assert found.p == share.high and found.alpha == 0.05 and found.gamma == 0.01
    assert found.p_value_exact == pytest.approx(min(1.0, at_high.p_value_exact + 0.01))
    assert found.p_value == pytest.approx(min(1.0, at_high.p_value + 0.01))
    t = float(counts[is_train].sum())
    p_hat = exact_rate_lower_bound(counts=counts, statistic=t, alpha=0.04)
    assert found.p_lower_exact == pytest.approx(p_hat)
    assert found.epsilon_lower_exact == pytest.approx(epsilon_from_rate(rate=p_hat, p=share.high))
    assert found.epsilon_lower_exact > 0
    # the interval's upper end is the worst p: every p inside gives a larger epsilon-hat
    for p in np.linspace(share.low, share.high, 7):
        inside = epsilon_from_rate(rate=p_hat, p=float(p))
        assert inside >= found.epsilon_lower_exact * (1 - 1e-9)
        tail = feature_match_test(counts=counts, is_train=is_train, p=float(p), alpha=0.04)
        assert tail.p_value_exact <= at_high.p_value_exact + 1e-12
    # rejecting zero learning at alpha: the tail at the upper end below alpha - gamma
    assert found.rejects_zero_learning_exact == (at_high.p_value_exact < 0.04)


def test_feature_match_over_an_interval_refuses_a_gamma_of_alpha() -> None:
    share = ShareInterval(low=0.4, high=0.6, gamma=0.05, train_users=50, total_users=100)
    with pytest.raises(StatsError, match=re.escape("share.gamma must be below alpha = 0.05")):
        feature_match_test_for_interval(
            counts=np.ones(4, dtype=np.int64), is_train=np.array([1, 0, 1, 0], bool), share=share
        )


def test_excess_over_an_interval_by_hand() -> None:
    counts = np.array([3, 1, 2, 0, 4, 1, 1, 2], dtype=np.int64)
    is_train = np.array([1, 1, 1, 0, 1, 0, 1, 0], dtype=bool)
    share = ShareInterval(low=0.3, high=0.7, gamma=0.01, train_users=5, total_users=8)
    test = feature_match_test_for_interval(
        counts=counts, is_train=is_train, share=share, alpha=0.05
    )
    excess = phantom_excess(counts=counts, is_train=is_train, alpha=0.05, test=test, share=share)
    t, h, d = 11.0, 3.0, 14.0
    assert (excess.train, excess.holdout) == (t, h)
    assert excess.estimate == pytest.approx(t - h * (5 / 8) / (3 / 8))  # the split's share
    assert excess.lower == pytest.approx((test.p_lower_exact - 0.7) * d / 0.3)
    holdout_rate = exact_rate_lower_bound(counts=counts, statistic=h, alpha=0.04)
    assert excess.upper == pytest.approx((1 - holdout_rate - 0.3) * d / 0.7)
    # a test of the policy's p given with an interval is refused
    known = feature_match_test(counts=counts, is_train=is_train, p=0.5, alpha=0.05)
    with pytest.raises(StatsError, match="gamma"):
        phantom_excess(counts=counts, is_train=is_train, alpha=0.05, test=known, share=share)


def _draws(
    *, users: int, drawn_p: float, draws: int, seed: int, learnt: float = 0.0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per draw: users' counts and train flags, membership drawn with ``drawn_p``. With
    ``learnt`` = epsilon > 0, a user's features are disclosed with probability ``a`` in
    train and ``b`` = 0.3 in holdout, the largest ``a`` that keeps disclosure epsilon-DP
    (``a <= e^eps b`` and ``1 - b <= e^eps (1 - a)``); with 0, alike on both sides."""
    rng = np.random.default_rng(seed)
    b = 0.3
    a = min(math.exp(learnt) * b, 1 - (1 - b) * math.exp(-learnt))
    out = []
    for _ in range(draws):
        is_train = rng.random(users) < drawn_p
        features = rng.poisson(2, users) + 1
        disclosed = rng.random(users) < np.where(is_train, a, b)
        out.append((np.where(disclosed, features, 0), is_train))
    return out


def test_a_split_drawn_with_another_p_keeps_its_level_over_the_interval() -> None:
    """Nothing learnt, users put in train with p = 0.56 while the policy says 0.5: taking
    0.5 finds leakage far more often than alpha; over the interval, at most alpha."""
    alpha, rejected_assumed, rejected_interval = 0.05, 0, 0
    draws = _draws(users=600, drawn_p=0.56, draws=200, seed=11)
    for counts, is_train in draws:
        assumed = feature_match_test(counts=counts, is_train=is_train, p=0.5, alpha=alpha)
        rejected_assumed += assumed.epsilon_lower_exact > 0
        share = train_share_interval(
            train_users=int(is_train.sum()), total_users=is_train.size, gamma=0.2 * alpha
        )
        bounded = feature_match_test_for_interval(
            counts=counts, is_train=is_train, share=share, alpha=alpha
        )
        rejected_interval += bounded.rejects_zero_learning_exact
        assert bounded.rejects_zero_learning_exact == (bounded.epsilon_lower_exact > 0)
    assert rejected_assumed >= 60  # about 0.4 of the draws
    # at most alpha: the (1 - 0.001) Clopper-Pearson upper bound on the rate is below 0.05
    assert stats.beta.ppf(0.999, rejected_interval + 1, len(draws) - rejected_interval) < alpha


def test_an_epsilon_dp_release_stays_under_its_epsilon_over_the_interval() -> None:
    """Disclosure 1-DP in each user's membership, drawn with p = 0.6: taken at the
    policy's 0.5, epsilon-hat exceeds 1 in most draws; over the interval, in at most alpha."""
    alpha, epsilon, over_assumed, over_interval = 0.05, 1.0, 0, 0
    draws = _draws(users=600, drawn_p=0.6, draws=200, seed=12, learnt=epsilon)
    for counts, is_train in draws:
        assumed = feature_match_test(counts=counts, is_train=is_train, p=0.5, alpha=alpha)
        over_assumed += assumed.epsilon_lower_exact > epsilon
        share = train_share_interval(
            train_users=int(is_train.sum()), total_users=is_train.size, gamma=0.2 * alpha
        )
        bounded = feature_match_test_for_interval(
            counts=counts, is_train=is_train, share=share, alpha=alpha
        )
        over_interval += bounded.epsilon_lower_exact > epsilon
        assert bounded.epsilon_lower_exact > 0  # the leak is still found
    assert over_assumed >= 100
    assert stats.beta.ppf(0.999, over_interval + 1, len(draws) - over_interval) < alpha


def _sum_sf(k_plus: int, q_plus: float, k_minus: int, q_minus: float, v: int) -> float:
    pmf = np.convolve(
        stats.binom.pmf(np.arange(k_plus + 1), k_plus, q_plus),
        stats.binom.pmf(np.arange(k_minus + 1), k_minus, q_minus),
    )
    return float(pmf[v:].sum())


def test_one_run_p_value_over_an_interval_takes_each_guess_at_its_worst_end() -> None:
    eps, lo, hi = 0.7, 0.45, 0.58
    q_plus = hi * math.exp(eps) / (hi * math.exp(eps) + 1 - hi)
    q_minus = (1 - lo) * math.exp(eps) / ((1 - lo) * math.exp(eps) + lo)
    value = one_run_p_value(epsilon=eps, k_plus=30, k_minus=20, correct=38, p_interval=(lo, hi))
    assert value == pytest.approx(_sum_sf(30, q_plus, 20, q_minus, 38), rel=1e-9)
    for p in np.linspace(lo, hi, 9):  # the largest p-value over the interval, or above it
        inside = one_run_p_value(epsilon=eps, k_plus=30, k_minus=20, correct=38, p=float(p))
        assert inside <= value + 1e-12
    assert one_run_p_value(
        epsilon=eps, k_plus=30, k_minus=20, correct=38, p_interval=(0.5, 0.5)
    ) == pytest.approx(one_run_p_value(epsilon=eps, k_plus=30, k_minus=20, correct=38, p=0.5))
    with pytest.raises(StatsError, match=re.escape("delta > 0 needs p = 0.5 known")):
        one_run_p_value(
            epsilon=eps, k_plus=30, k_minus=20, correct=38, delta=1e-5, p_interval=(lo, hi)
        )
    with pytest.raises(StatsError, match="low <= high"):
        one_run_p_value(epsilon=eps, k_plus=3, k_minus=2, correct=3, p_interval=(hi, lo))


def test_one_run_bound_over_an_interval_is_smaller_and_spends_gamma() -> None:
    rng = np.random.default_rng(5)
    is_train = rng.random(2000) < 0.5
    scores = is_train + rng.normal(0, 0.6, 2000)
    share = train_share_interval(train_users=int(is_train.sum()), total_users=2000, gamma=0.01)
    known = one_run_epsilon_from_scores(
        scores=scores,
        is_train=is_train,
        rng=np.random.default_rng(1),
        alpha=0.05,
        selection="bonferroni",
    )
    bounded = one_run_epsilon_from_scores(
        **{"scores": scores, "is_train": is_train, "alpha": 0.05, "selection": "bonferroni"},
        rng=np.random.default_rng(1),
        share=share,
    )
    assert 0 < bounded.epsilon_lower < known.epsilon_lower
    assert bounded.alpha == 0.05
    with pytest.raises(StatsError, match=re.escape("share.gamma must be below alpha")):
        one_run_epsilon_from_scores(
            scores=scores,
            is_train=is_train,
            rng=np.random.default_rng(1),
            alpha=0.01,
            share=share,
        )


def test_feature_match_over_an_interval_without_the_exact_tail_gives_nan() -> None:
    share = ShareInterval(low=0.4, high=0.6, gamma=0.01, train_users=50, total_users=100)
    found = feature_match_test_for_interval(
        counts=np.array([2, 1, 0, 3]),
        is_train=np.array([1, 1, 0, 0], bool),
        share=share,
        exact=False,
    )
    assert math.isnan(found.p_value_exact) and math.isnan(found.epsilon_lower_exact)
    assert 0 < found.p_value <= 1
