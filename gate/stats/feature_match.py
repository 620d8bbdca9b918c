"""Feature-match test of zero learning and of ε-DP, with lower bounds on ε.

*Phantoms and Disclosures: a Causal Framework for Auditing Synthetic Data* (2026), §5.1
(eqs. 1-8), Lemma 1, Theorems 1-2, Appendices B-C; see docs/methods.md §2.

Records ``i`` of ``D = train ∪ holdout`` carry ``c_i`` rare features that the release
discloses; ``S_i ~ Bern(p)`` marks train. The statistic is ``T = sum_i S_i c_i``.
Under zero learning ``T ~ sum_i c_i Bern(p)`` given the ``c_i``; under ε-DP it is
stochastically dominated by ``sum_i c_i Bern(q_ε)``, ``q_ε = p e^ε / (p e^ε + 1 - p)``.
Hoeffding's inequality gives the paper's bounds (eqs. 4-8); the exact tail of the weighted sum
(:mod:`gate.stats.weighted_tail`) gives valid and tighter ones. Both are returned: the
caller (the policy) decides which one gates.
"""

from __future__ import annotations

import functools
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, NamedTuple

import numpy as np
from scipy import optimize, stats

from gate.stats._validate import (
    StatsError,
    check_alpha,
    check_count,
    check_integers,
    check_labels,
    check_nonnegative,
    check_probability,
    is_number,
)
from gate.stats.saddlepoint import saddlepoint_rate
from gate.stats.split_balance import ShareInterval
from gate.stats.weighted_tail import (
    tail_grain,
    weight_multiplicities,
    weighted_bernoulli_sf,
)

_PREDICTION_MARGIN = 1e-4  # relative level margin of the saddlepoint prediction of p̂
# the prediction is returned only if its exact tail is within this of alpha (relative):
# on few or very unequal counts the saddlepoint can land far below the bound
_ACCEPTED_LOG_EXCESS = math.log1p(-1e-3)


class FeatureMatchResult(NamedTuple):
    """The feature-match test and its confidence statements (all at level ``alpha``).

    Attributes:
        statistic: T, weighted train disclosures.
        holdout_statistic: H = C1 - T, weighted holdout disclosures (phantoms).
        c1: sum of c_i. c2: sum of c_i².
        expected: p * C1, the mean of T under zero learning.
        critical_value: Hoeffding critical value tau; reject zero learning if T > tau.
        p_value / p_value_exact: p-values of zero learning (Hoeffding / exact tail; the
            exact tail carries a bounded truncation slack of about 1e-20 per step, so in the
            far tail it is the smaller of the two, both valid).
        p_lower / p_lower_exact: lower confidence bounds on the train rate (p̂).
        epsilon_lower / epsilon_lower_exact: lower confidence bounds on ε (Theorem 2).
        lattice_grain: 1 when the exact tail is exact; ``g > 1`` when the counts are too
            large for its lattice and it is computed with the larger ones rounded to
            multiples of ``g`` and the rounding error bounded
            (:func:`gate.stats.weighted_tail.tail_grain` at p and at the exact p̂): an
            upper bound on the tail, so the p-value and bounds stay valid, and conservative.
        gamma: 0 when p is known. Otherwise the part of ``alpha`` spent on a confidence
            interval of an unknown p (:func:`feature_match_test_for_interval`): ``p`` is
            then the interval's upper end, the p-values include ``gamma``, and p̂ is at
            level ``alpha - gamma``.
    """

    statistic: float
    holdout_statistic: float
    c1: float
    c2: float
    p: float
    alpha: float
    expected: float
    critical_value: float
    p_value: float
    p_lower: float
    epsilon_lower: float
    p_value_exact: float
    p_lower_exact: float
    epsilon_lower_exact: float
    lattice_grain: int = 1
    gamma: float = 0.0

    @property
    def rejects_zero_learning(self) -> bool:
        """Whether the Hoeffding p-value is below alpha (strictly, as the exact test's)."""
        return self.p_value < self.alpha

    @property
    def rejects_zero_learning_exact(self) -> bool:
        """Whether the exact p-value is below alpha, strictly: at a p-value of exactly
        alpha (an atom of the discrete null, three train users of three at p = 1/2 and
        alpha = 1/8) p itself is the largest rate rejected, so p̂ = p and ε̂ = 0, and a
        rule of ``<=`` rejected with ε̂ = 0 (a review). Strict, an atom of exactly alpha
        does not reject, and the level stays <= alpha. Within the tail's rounding (about
        1e-16) and p̂'s conservative search (up to 1e-3 of alpha in level) the two can
        still differ, ε̂ towards 0 (a later review)."""
        return self.p_value_exact < self.alpha


def rate_from_epsilon(*, epsilon: float, p: float) -> float:
    """``q_ε = p e^ε / (p e^ε + 1 - p)``: the largest train rate ε-DP allows (§5.1.2,
    eq. 8 and Theorem 1)."""
    check_nonnegative("epsilon", epsilon, allow_inf=True)
    check_probability("p", p, open_low=True, open_high=True)
    if math.isinf(epsilon):
        return 1.0
    return 1.0 / (1.0 + (1.0 - p) / p * math.exp(-epsilon))


def epsilon_from_rate(*, rate: float, p: float) -> float:
    """Inverse of :func:`rate_from_epsilon`: ``ln(r (1-p) / (p (1-r)))`` if ``r > p``, else 0
    (Theorem 2; with p = 1/2, ``ln(r / (1 - r))``)."""
    check_probability("rate", rate)
    check_probability("p", p, open_low=True, open_high=True)
    if rate <= p:
        return 0.0
    if rate >= 1.0:
        return math.inf
    return math.log(rate * (1.0 - p) / (p * (1.0 - rate)))


def largest_rate_lower_bound(
    *, train_users: int, alpha: float, estimator: Literal["exact", "hoeffding"]
) -> float:
    """The largest p̂ the feature-match test can give with ``train_users`` train users,
    whatever the release discloses: every train user discloses and no holdout user does.

    Exact tail: ``P_q(S >= C1)`` is the chance that all m disclosing users are in train,
    ``q^m``, so p̂ is ``alpha^(1/m)``, largest at m = ``train_users`` (a holdout disclosure
    only lowers it). Hoeffding: ``p̂ = 1 - sqrt(C2 ln(1/alpha) / 2) / C1`` with
    ``C2 / C1^2 >= 1/m`` (equal counts), so at most ``1 - sqrt(ln(1/alpha) / (2m))``.
    A threshold on ε̂ at or above ``epsilon_from_rate`` of this can never fail.
    """
    check_alpha(alpha)
    _check_estimator(estimator)
    if check_count("train_users", train_users) == 0:
        return 0.0
    if estimator == "exact":
        return alpha ** (1.0 / train_users)
    return max(0.0, 1.0 - math.sqrt(math.log(1.0 / alpha) / (2.0 * train_users)))


def train_users_to_exceed(
    *, rate: float, alpha: float, estimator: Literal["exact", "hoeffding"]
) -> int:
    """The fewest train users with which :func:`largest_rate_lower_bound` exceeds ``rate``
    (in (0, 1))."""
    check_alpha(alpha)
    _check_estimator(estimator)
    check_probability("rate", rate, open_low=True, open_high=True)
    if estimator == "exact":  # alpha^(1/n) > rate  <=>  n > ln(alpha) / ln(rate)
        n = math.floor(math.log(alpha) / math.log(rate)) + 1
    else:  # 1 - sqrt(ln(1/alpha) / (2n)) > rate  <=>  n > ln(1/alpha) / (2 (1-rate)^2)
        n = math.floor(math.log(1.0 / alpha) / (2.0 * (1.0 - rate) ** 2)) + 1
    for _ in range(8):  # rounding at the boundary (beyond it, floats cannot tell n apart)
        if largest_rate_lower_bound(train_users=n, alpha=alpha, estimator=estimator) > rate:
            break
        n += 1
    return n


def _check_estimator(estimator: str) -> None:
    """A review: any other name than "exact" was taken for Hoeffding's."""
    if estimator not in ("exact", "hoeffding"):
        raise StatsError(f"estimator must be 'exact' or 'hoeffding'; found {estimator!r}")


def hoeffding_margin(*, c2: float, alpha: float) -> float:
    """``sqrt(C2 ln(1/alpha) / 2)``: Hoeffding's one-sided deviation at level alpha."""
    check_nonnegative("c2", c2)
    check_alpha(alpha)
    return math.sqrt(c2 * math.log(1.0 / alpha) / 2.0)


def _as_counts(counts: np.ndarray, is_train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(counts)
    s = np.asarray(is_train)
    if c.ndim != 1 or s.shape != c.shape:
        raise StatsError(
            f"counts and is_train must be 1-d arrays of one length; found shapes "
            f"{c.shape} and {s.shape}"
        )
    return _checked_counts(c), check_labels(s)


MAX_TOTAL_COUNT = 2**53  # sums above it are no longer exact in float64, nor int64-safe


def _checked_counts(counts: Any) -> np.ndarray:
    """``counts`` as non-negative int64 whose sum is at most :data:`MAX_TOTAL_COUNT` (a
    review's counts summing past 2**63 wrapped around: a p-value of 0.018 for a tail of
    0.75, and ε̂ = inf)."""
    c = check_integers("counts", counts)
    if c.size and c.min() < 0:
        raise StatsError(f"counts must be non-negative integers; found {c.min()}")
    total = float(c.sum(dtype=np.float64))
    if total > MAX_TOTAL_COUNT:
        raise StatsError(f"counts must sum to at most 2**53; found a sum of {total:.3g}")
    return c


def exact_tail(*, counts: np.ndarray, q: float, threshold: float) -> float:
    """``P(sum_i c_i Bern(q) >= threshold)``, exact up to a bounded 1e-15 error."""
    weights, mult = weight_multiplicities(np.asarray(counts))
    return weighted_bernoulli_sf(weights=weights, multiplicities=mult, q=q, threshold=threshold)


def exact_rate_lower_bound(
    *, counts: np.ndarray, statistic: float, alpha: float, start: float = 0.0
) -> float:
    """Exact p̂: the infimum of the train rates q not rejected, ``P_q(S >= T) > alpha``.

    The tail is increasing in q, so the set of non-rejected rates is an interval
    ``(p̂, 1]``. The saddlepoint approximation (:mod:`gate.stats.saddlepoint`) predicts the
    rate whose tail is ``alpha (1 - 1e-4)``; if the exact tail there is within
    ``[alpha (1 - 1e-3), alpha]``, that rate is returned (one exact evaluation). Otherwise
    Brent's method on the exact log tail finds p̂ on the side of the prediction where it
    lies (on few or very unequal counts the saddlepoint can be far off). Either way the
    value returned is from the conservative side: its exact tail is verified to be <= alpha.

    Args:
        counts: c_i, non-negative integers.
        statistic: T.
        alpha: level, in (0, 1).
        start: a rate known to be rejected (e.g. Hoeffding's p̂), to shorten the search.
    """
    check_alpha(alpha)
    weights, mult = weight_multiplicities(_checked_counts(counts))
    c1 = float((weights * mult).sum())
    if not (is_number(statistic) and 0 <= statistic <= c1):
        raise StatsError(
            f"statistic must be a number in [0, sum of counts = {c1:g}]; found {statistic!r}"
        )
    if statistic == 0 or c1 == 0:
        return 0.0
    if weights.size == 1:  # one weight: a binomial, Clopper-Pearson in closed form
        n, k = int(mult[0]), math.ceil(statistic / weights[0])
        if k > n:
            return 1.0
        bound = float(stats.beta.ppf(alpha, k, n - k + 1))

        def rejected(q: float) -> bool:  # the same exact tail as below decides
            tail = weighted_bernoulli_sf(
                weights=weights, multiplicities=mult, q=q, threshold=statistic
            )
            return tail <= alpha

        if rejected(bound):
            return bound
        low = 0.0  # ppf's rounding (or the tail's error): bisect down to a rejected rate
        for _ in range(64):
            middle = (low + bound) / 2
            low, bound = (middle, bound) if rejected(middle) else (low, middle)
        return low

    @functools.cache  # the search may ask for a rate twice
    def log_excess(q: float) -> float:
        tail = weighted_bernoulli_sf(weights=weights, multiplicities=mult, q=q, threshold=statistic)
        return math.log(max(tail, 1e-300)) - math.log(alpha)

    # ``lo`` is a rejected rate: 0 (T > 0 is impossible at q = 0) or Hoeffding's p̂, which
    # the exact tail's error can leave unrejected at tiny alpha (checked before Brent).
    lo = min(max(start, 0.0), 1.0)
    hi = 1.0
    # The saddlepoint root at a level a hair below alpha is, in practice, a rejected rate
    # within ~1e-4 (relative, in level) of the exact bound: one exact evaluation verifies
    # it, and keeps it if its tail is within 1e-3 of alpha (_ACCEPTED_LOG_EXCESS).
    predicted = saddlepoint_rate(
        weights=weights,
        multiplicities=mult,
        statistic=statistic,
        alpha=alpha * (1.0 - _PREDICTION_MARGIN),
        lower=lo,
    )
    if predicted is not None:
        excess = log_excess(predicted)
        if _ACCEPTED_LOG_EXCESS <= excess <= 0:
            return predicted
        if excess > 0:
            hi = predicted  # not rejected: an upper end for the search below
        else:
            lo = predicted  # rejected, but its tail is well below alpha: search above it
    # Bracket around the normal approximation (a few exact evaluations), then Brent.
    c2 = float((weights.astype(np.float64) ** 2 * mult).sum())
    z = float(stats.norm.isf(alpha))
    guess = _normal_rate_bound(statistic=statistic, c1=c1, c2=c2, z=z)
    step = max(1e-6, z * math.sqrt(max(guess * (1 - guess), 1e-12) * c2) / c1 / 4)
    probe = min(max(guess, lo + step / 4), hi)
    for _ in range(60):
        if probe >= hi:
            break
        if log_excess(probe) <= 0:
            lo = probe
            probe = min(hi, probe + step)
        else:
            hi = probe
            break
        if lo >= 1.0:
            return 1.0
        step *= 2
    else:
        return lo
    xtol = 1e-8
    if lo == start and lo > 0 and log_excess(lo) > 0:
        lo = 0.0
    root = optimize.brentq(log_excess, lo, hi, xtol=xtol, rtol=1e-10)
    candidate = max(lo, root - 2 * xtol)
    if log_excess(candidate) <= 0:
        return candidate
    return lo if log_excess(lo) <= 0 else 0.0


def _normal_rate_bound(*, statistic: float, c1: float, c2: float, z: float) -> float:
    """Root of ``T - q C1 = z sqrt(q (1-q) C2)`` in q (the CLT version of p̂), or T/C1."""
    # (T - q C1)^2 = z^2 C2 (q - q^2)  ->  a q^2 + b q + c = 0
    a = c1 * c1 + z * z * c2
    b = -2 * statistic * c1 - z * z * c2
    c = statistic * statistic
    disc = b * b - 4 * a * c
    if disc < 0:
        return statistic / c1
    return min(1.0, max(0.0, (-b - math.sqrt(disc)) / (2 * a)))


def feature_match_test(
    *,
    counts: np.ndarray,
    is_train: np.ndarray,
    p: float = 0.5,
    alpha: float = 0.05,
    exact: bool = True,
) -> FeatureMatchResult:
    """Feature-match test of zero learning and the ε lower bounds.

    *Phantoms and Disclosures* (2026), §5.1: critical value eq. (5), p̂ of Lemma 1
    (eqs. 6-7), ε̂ of Theorem 2; the exact tail is the gate's addition (docs/methods.md §2).

    Args:
        counts: c_i, disclosed rare features per record of D.
        is_train: S_i, True for train records.
        p: membership probability, in (0, 1).
        alpha: level of every statement, in (0, 1).
        exact: also compute the exact-tail p-value, p̂ and ε̂ (else they are NaN).

    Returns:
        Hoeffding: ``tau = p C1 + sqrt(C2 ln(1/alpha)/2)``, p-value
        ``exp(-2 max(0, T - p C1)^2 / C2)``, ``p̂ = (T - sqrt(C2 ln(1/alpha)/2)) / C1``
        (floored at 0), ``ε̂ = ln(p̂ (1-p) / (p (1-p̂)))`` if ``p̂ > p`` else 0; and the same
        from the exact tail of ``sum_i c_i Bern(q)``.
    """
    check_probability("p", p, open_low=True, open_high=True)
    check_alpha(alpha)
    c, s = _as_counts(counts, is_train)
    t = float(c[s].sum())
    c1 = float(c.sum())
    c2 = float((c.astype(np.float64) ** 2).sum())
    expected = p * c1
    margin = hoeffding_margin(c2=c2, alpha=alpha)
    if c1 == 0:
        p_value, p_lower = 1.0, 0.0
    else:
        p_value = math.exp(-2.0 * max(0.0, t - expected) ** 2 / c2) if t > expected else 1.0
        p_lower = min(1.0, max(0.0, (t - margin) / c1))
    epsilon = epsilon_from_rate(rate=p_lower, p=p)

    grain = 1
    if not exact:
        p_value_x = p_lower_x = epsilon_x = math.nan
    elif c1 == 0:
        p_value_x, p_lower_x, epsilon_x = 1.0, 0.0, 0.0
    else:
        # two independent exact computations; the FFTs release the GIL, so they overlap
        with ThreadPoolExecutor(max_workers=2) as pool:
            p_value_job = pool.submit(exact_tail, counts=c, q=p, threshold=t)
            p_lower_job = pool.submit(
                exact_rate_lower_bound, counts=c, statistic=t, alpha=alpha, start=p_lower
            )
            p_value_x = min(p_value, p_value_job.result())
            p_lower_x = max(p_lower, p_lower_job.result())
        epsilon_x = epsilon_from_rate(rate=p_lower_x, p=p)
        weights, mult = weight_multiplicities(c)
        grain = max(
            tail_grain(weights=weights, multiplicities=mult, q=rate)
            for rate in (p, min(p_lower_x, 1.0))
        )
    return FeatureMatchResult(
        statistic=t,
        holdout_statistic=c1 - t,
        c1=c1,
        c2=c2,
        p=p,
        alpha=alpha,
        expected=expected,
        critical_value=expected + margin,
        p_value=p_value,
        p_lower=p_lower,
        epsilon_lower=epsilon,
        p_value_exact=p_value_x,
        p_lower_exact=p_lower_x,
        epsilon_lower_exact=epsilon_x,
        lattice_grain=grain,
    )


def feature_match_test_for_interval(
    *,
    counts: np.ndarray,
    is_train: np.ndarray,
    share: ShareInterval,
    alpha: float = 0.05,
    exact: bool = True,
) -> FeatureMatchResult:
    """The feature-match test when p is known only to lie in ``[share.low, share.high]``
    with probability ``>= 1 - share.gamma`` (a declared split: users put in train at
    random, with a p that nobody recorded).

    Berger and Boos (1994), *P values maximized over a confidence set for the nuisance
    parameter*, JASA 89(427): 1012-1016: the p-value is the largest over the interval plus
    ``gamma``, valid at every level whatever p is. The tail ``P_p(sum_i c_i Bern(p) >= T)``
    grows with p, so the largest is at ``share.high``. p̂ bounds the train rate itself,
    whatever p, so it is computed at ``alpha - gamma``; ``ε̂ = ln(p̂ (1-p)/(p (1-p̂)))``
    falls as p grows, so ``share.high`` gives the smallest ε̂ over the interval. Either
    statement fails only if the interval misses p (probability <= gamma) or p̂ misses the
    rate (<= alpha - gamma): at most alpha together.

    Args:
        counts: c_i, disclosed rare features per record of D.
        is_train: S_i, True for train records.
        share: the interval of p (:func:`gate.stats.split_balance.train_share_interval`).
        alpha: level of every statement, in (0, 1); must exceed ``share.gamma``.
        exact: also compute the exact-tail p-value, p̂ and ε̂ (else they are NaN).
    """
    check_alpha(alpha)
    if not share.gamma < alpha:
        raise StatsError(
            f"share.gamma must be below alpha = {alpha:g} (it is part of alpha); found "
            f"{share.gamma!r}"
        )
    level = check_alpha(alpha - share.gamma)
    test = feature_match_test(
        counts=counts, is_train=is_train, p=share.high, alpha=level, exact=exact
    )
    return test._replace(
        alpha=alpha,
        p_value=min(1.0, test.p_value + share.gamma),
        # not exact: NaN stays NaN (min(1.0, nan) is 1.0)
        p_value_exact=test.p_value_exact + share.gamma
        if math.isnan(test.p_value_exact)
        else min(1.0, test.p_value_exact + share.gamma),
        gamma=share.gamma,
    )
