"""ROC analysis of membership scores.

The disclosure-score membership inference attack of *Phantoms and Disclosures: a Causal
Framework for Auditing Synthetic Data* (2026), §4 ("Membership inference attacks": AUC) and
§5.2 (user inference attack); its ε lower bound (Theorem 3) is in :mod:`gate.stats.one_run`.
See docs/methods.md §4.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import stats

from gate.stats._validate import StatsError, check_count, check_probability, check_scores


class RocCurve(NamedTuple):
    """ROC points at every distinct threshold, from (0, 0) to (1, 1)."""

    fpr: np.ndarray
    tpr: np.ndarray
    thresholds: np.ndarray


class RocResult(NamedTuple):
    auc: float
    p_value: float  # one-sided: train scores stochastically larger
    n_train: int
    n_holdout: int
    curve: RocCurve
    p_value_method: str = "mann-whitney"  # see auc_p_value


PERMUTATION_LIMIT = 5000  # users above the lowest score up to which ties are permuted
PERMUTATIONS = 9999
EXACT_MANN_WHITNEY = 8  # the smaller group's size up to which the U null is exact (as scipy's)
EXACT_PAIRS = 2**22  # ... and the pairs n1 n0 (the null's values; 2^22 take up to 0.4 s)
_CHUNK = 250


def _checked_groups(scores: np.ndarray, is_train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s, y = check_scores(scores, is_train)
    if y.all() or not y.any():
        raise StatsError(
            f"need both train and holdout records; found {int(y.sum())} train, "
            f"{int((~y).sum())} holdout"
        )
    return s, y


def auc_exceedance_under_null(
    *,
    scores: np.ndarray,
    is_train: np.ndarray,
    threshold: float,
    rng: np.random.Generator | None = None,
) -> tuple[float, str]:
    """``P(AUC > threshold)`` when membership is random: the chance that a release which
    leaks nothing exceeds a policy's ``max_auc`` with these scores and these numbers of
    train and holdout users, and the method that gave it (as :func:`auc_p_value` chooses):

    * every score tied: the AUC is 1/2;
    * two distinct scores: exact; the number of train users among those with the higher
      score is hypergeometric, and the AUC increases with it;
    * ties, and at most ``PERMUTATION_LIMIT`` users above the lowest score: the share of
      ``PERMUTATIONS`` permutations of the labels (from ``rng``) whose AUC exceeds it;
    * no ties, at most ``EXACT_MANN_WHITNEY`` users in one group, ``EXACT_PAIRS`` pairs,
      and label sets few enough to count exactly in float64 (2^53): exact, from U's null
      distribution (:func:`mann_whitney_null_counts`; a review found the normal
      approximation 0.083 where the exact chance is 0.100, 4 + 4 users and ``max_auc``
      0.8);
    * otherwise the normal approximation of the Mann-Whitney U statistic, with a
      continuity correction without ties and the correction for ties (Lehmann 1975,
      *Nonparametrics*, §1.4): ``Var U = n1 n0 / 12 ((n + 1) - sum(t^3 - t) / (n (n -
      1)))`` over the groups of ``t`` tied scores. A review found it 0.041 where 20,000
      permutations gave 0 (3 of 300 users scoring above the others, whose AUC cannot
      exceed 0.51).
    """
    check_probability("threshold", threshold)
    s, y = _checked_groups(scores, is_train)
    n, n1 = s.size, int(y.sum())
    n0 = n - n1
    design, distinct = _null_design(s)
    if design == "all tied":
        return (0.0 if threshold >= 0.5 else 1.0), design
    if design == "exact":
        top = int((s == distinct[1]).sum())
        trained = np.arange(max(0, top - n0), min(top, n1) + 1)  # train users on top
        above = trained * (n0 - top + trained)  # pairs with the train user on top
        tied = trained * (top - trained) + (n1 - trained) * (n0 - top + trained)
        exceeds = (above + 0.5 * tied) / (n1 * n0) > threshold
        return float(stats.hypergeom.pmf(trained[exceeds], n, n1, top).sum()), design
    if design == "permutation":
        if rng is None:
            raise StatsError("rng is required for the permutation estimate of tied scores")
        bound = threshold * n1 * n0 + n1 * (n1 + 1) / 2.0  # the rank sum at that AUC
        sums = _permuted_rank_sums(s, y, s > distinct[0], rng)
        tolerance = 1e-9 * max(1.0, abs(bound))
        return float((sums > bound + tolerance).mean()), f"permutation ({PERMUTATIONS} draws)"
    exceeded = _least_u_above(threshold, pairs=n1 * n0)
    exact = min(n1, n0) <= EXACT_MANN_WHITNEY and n1 * n0 <= EXACT_PAIRS
    if distinct.size == s.size and exact and math.comb(n, min(n1, n0)) <= 2**53:
        counts = mann_whitney_null_counts(n1=n1, n0=n0)
        tail = counts[min(max(exceeded, 0), counts.size) :].sum()
        return float(tail / counts.sum()), "exact"
    _, ties = np.unique(s, return_counts=True)
    tie_sum = float((ties.astype(np.float64) ** 3 - ties).sum())
    variance = n1 * n0 / 12.0 * ((n + 1) - tie_sum / (n * (n - 1)))
    # without ties U is an integer: P(U >= exceeded), corrected for continuity as scipy's
    # p-value is (a review: uncorrected, 0.083 where the exact chance is 0.100 at 4 + 4)
    level = exceeded - 0.5 if distinct.size == s.size else threshold * n1 * n0
    chance = stats.norm.sf((level - 0.5 * n1 * n0) / np.sqrt(variance))
    return float(chance), "normal approximation"


def _least_u_above(threshold: float, *, pairs: int) -> int:
    """The least integer U whose AUC ``U / pairs`` exceeds ``threshold`` as the audit
    compares them (``threshold * pairs`` can fall a hair below an integer: 0.7 * 90 is
    62.99999999999999, and U = 63 is AUC 0.7, which does not exceed it: a review)."""
    u = math.floor(threshold * pairs) + 1
    while u > 0 and (u - 1) / pairs > threshold:
        u -= 1
    while u / pairs <= threshold:
        u += 1
    return u


def mann_whitney_null_counts(*, n1: int, n0: int) -> np.ndarray:
    """How many of the ``C(n1 + n0, n1)`` equally likely label sets give each value
    ``u = 0 .. n1 n0`` of the Mann-Whitney U statistic (no ties), as float64.

    They are the coefficients of the Gaussian binomial ``[n1 + n0 choose m]_q = prod_{i=1}^m
    (1 - q^{N+i}) / (1 - q^i)``, ``m = min(n1, n0)``, ``N = max(n1, n0)`` (Mann & Whitney
    1947; Andrews, *The Theory of Partitions*, Thm 3.1): m products, each exact division
    by ``1 - q^i`` a running sum with stride i. Exact while ``C(n1 + n0, m)`` is at most
    2^53; above, the running sums cancel (a review: negative counts at 8 + 957 users).
    """
    m, big = sorted((check_count("n1", n1, minimum=1), check_count("n0", n0, minimum=1)))
    poly = np.zeros(m * big + 1)
    poly[0] = 1.0
    length = 1
    for i in range(1, m + 1):
        length += big
        times = poly[:length].copy()
        times[big + i : length] -= poly[: length - big - i]  # times (1 - q^(N+i))
        for start in range(i):  # over (1 - q^i): b[k] = a[k] + b[k - i]
            times[start:length:i] = np.cumsum(times[start:length:i])
        poly[:length] = times
    return poly


def roc_curve(*, scores: np.ndarray, is_train: np.ndarray) -> RocCurve:
    """ROC points, one per distinct score (ties move both rates at once)."""
    s, y = _checked_groups(scores, is_train)
    order = np.argsort(-s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    last_of_group = np.r_[np.diff(s_sorted) != 0, True]
    tp = np.cumsum(y_sorted)[last_of_group]
    fp = np.cumsum(~y_sorted)[last_of_group]
    tpr = np.r_[0.0, tp / y.sum()]
    fpr = np.r_[0.0, fp / (~y).sum()]
    thresholds = np.r_[np.inf, s_sorted[last_of_group]]
    return RocCurve(fpr=fpr, tpr=tpr, thresholds=thresholds)


def auc_p_value(
    *, scores: np.ndarray, is_train: np.ndarray, rng: np.random.Generator | None = None
) -> tuple[float, str]:
    """One-sided p-value of "train scores are not larger" under random membership, and
    the method that gave it.

    * every score tied: 1;
    * two distinct scores: exact; the number of train users among those with the higher
      score is hypergeometric under the null;
    * ties, and at most ``PERMUTATION_LIMIT`` users above the lowest score: a Monte Carlo
      permutation test (``PERMUTATIONS`` draws from ``rng``, p = (1 + #{U* >= U}) /
      (1 + draws), valid at any sample size). The normal approximation is too optimistic
      when few users have a non-zero score;
    * otherwise scipy's Mann-Whitney U test (exact without ties for small samples,
      asymptotic with tie correction).
    """
    s, y = _checked_groups(scores, is_train)
    design, distinct = _null_design(s)
    if design == "all tied":
        return 1.0, design
    n, n1 = s.size, int(y.sum())
    if design == "exact":
        top = s == distinct[1]
        observed = int((top & y).sum())
        return float(stats.hypergeom.sf(observed - 1, n, n1, int(top.sum()))), design
    if design == "permutation":
        if rng is None:
            raise StatsError("rng is required for the permutation p-value of tied scores")
        p_value = _permutation_p_value(s, y, s > distinct[0], rng)
        return p_value, f"permutation ({PERMUTATIONS} draws)"
    p = stats.mannwhitneyu(s[y], s[~y], alternative="greater", method="auto").pvalue
    return float(p), "mann-whitney"


def _null_design(s: np.ndarray) -> tuple[str, np.ndarray]:
    """How the null distribution of the AUC is computed for scores ``s`` (one choice for
    the p-value and the chance of exceeding a threshold), and the distinct scores:
    ``all tied``; ``exact`` (two distinct scores); ``permutation`` (ties, and at most
    ``PERMUTATION_LIMIT`` users above the lowest score); else ``asymptotic``."""
    distinct = np.unique(s)
    if distinct.size <= 2:
        return ("all tied" if distinct.size == 1 else "exact"), distinct
    if distinct.size < s.size and int((s > distinct[0]).sum()) <= PERMUTATION_LIMIT:
        return "permutation", distinct
    return "asymptotic", distinct


def _permutation_p_value(
    s: np.ndarray, y: np.ndarray, above: np.ndarray, rng: np.random.Generator
) -> float:
    """The share of label permutations (:func:`_permuted_rank_sums`) whose rank sum of
    train users is at least the observed one, one added to both counts."""
    observed = float(stats.rankdata(s)[y].sum())
    tolerance = 1e-9 * max(1.0, abs(observed))
    at_least = int((_permuted_rank_sums(s, y, above, rng) >= observed - tolerance).sum())
    return (1.0 + at_least) / (1.0 + PERMUTATIONS)


def _permuted_rank_sums(
    s: np.ndarray, y: np.ndarray, above: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """The rank sums of train users under ``PERMUTATIONS`` permutations of the labels
    (the statistic: U up to a constant), drawn only over the users above the lowest
    score: the number of train users among them is hypergeometric, and which ones a
    uniform subset."""
    ranks = stats.rankdata(s)
    n, n1 = s.size, int(y.sum())
    high = ranks[above]
    low_rank = (n - high.size + 1) / 2.0  # midrank of the users at the lowest score
    sums = np.empty(PERMUTATIONS)
    for done in range(0, PERMUTATIONS, _CHUNK):
        k = min(_CHUNK, PERMUTATIONS - done)
        counts = rng.hypergeometric(n1, n - n1, high.size, size=k)
        shuffled = rng.permuted(np.broadcast_to(high, (k, high.size)), axis=1)
        prefix = np.concatenate([np.zeros((k, 1)), np.cumsum(shuffled, axis=1)], axis=1)
        sums[done : done + k] = prefix[np.arange(k), counts] + (n1 - counts) * low_rank
    return sums


def roc_auc(
    *, scores: np.ndarray, is_train: np.ndarray, rng: np.random.Generator | None = None
) -> RocResult:
    """AUC = U / (n_train n_holdout) with ties counted 1/2, and the one-sided p-value of
    "train scores are not larger" (:func:`auc_p_value`; ``rng`` is needed when scores are
    tied and few users score above the lowest value)."""
    s, y = _checked_groups(scores, is_train)
    n1, n0 = int(y.sum()), int((~y).sum())
    ranks = stats.rankdata(s)
    u = float(ranks[y].sum() - n1 * (n1 + 1) / 2.0)
    p_value, method = auc_p_value(scores=s, is_train=y, rng=rng)
    return RocResult(
        auc=u / (n1 * n0),
        p_value=p_value,
        n_train=n1,
        n_holdout=n0,
        curve=roc_curve(scores=s, is_train=y),
        p_value_method=method,
    )


def tpr_at_fpr(curve: RocCurve, *, fpr: float) -> float:
    """Largest TPR among thresholds whose FPR is at most ``fpr`` (no interpolation)."""
    check_probability("fpr", fpr)
    ok = curve.fpr <= fpr + 1e-12
    return float(curve.tpr[ok].max())


class TwoSampleResult(NamedTuple):
    """Train vs holdout nearest-synthetic similarity: AUC (probability that a train value
    exceeds a holdout one), one-sided Mann-Whitney p-value, and the difference of medians."""

    auc: float
    p_value: float
    median_difference: float
    n_train: int
    n_holdout: int


def similarity_two_sample(
    *,
    train_similarity: np.ndarray,
    holdout_similarity: np.ndarray,
    rng: np.random.Generator | None = None,
) -> TwoSampleResult:
    """Are train records closer to the release than holdout records?

    The two-sample test of nearest-synthetic similarity of *Phantoms and Disclosures* (2026),
    §6.2-6.3 and App. A.3, here as a one-sided Mann-Whitney test (docs/methods.md §4).
    """
    a = np.asarray(train_similarity, dtype=np.float64)
    b = np.asarray(holdout_similarity, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1 or a.size == 0 or b.size == 0:
        raise StatsError(
            f"both samples must be non-empty 1-d arrays; found shapes {a.shape} and {b.shape}"
        )
    result = roc_auc(
        scores=np.r_[a, b],
        is_train=np.r_[np.ones(a.size, bool), np.zeros(b.size, bool)],
        rng=rng,
    )
    return TwoSampleResult(
        auc=result.auc,
        p_value=result.p_value,
        median_difference=float(np.median(a) - np.median(b)),
        n_train=a.size,
        n_holdout=b.size,
    )
