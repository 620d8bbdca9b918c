"""The saddlepoint tail (Daniels 1987, Pr_2) against closed forms and the exact tail, and the
exact p̂ that it predicts (verified with the exact tail)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import gate.stats.feature_match as feature_match
from gate.stats.feature_match import exact_rate_lower_bound, exact_tail
from gate.stats.saddlepoint import saddlepoint_rate, saddlepoint_sf
from gate.stats.weighted_tail import weight_multiplicities, weighted_bernoulli_sf


@pytest.mark.parametrize(("n", "k"), [(121, 70), (121, 116), (30, 20), (1000, 540)])
def test_binomial_tail_matches_scipy(n: int, k: int) -> None:
    """One weight: S ~ Bin(n, 1/2); Daniels' Pr_2 is within 1 % of the exact tail."""
    approx = saddlepoint_sf(weights=np.array([1]), multiplicities=np.array([n]), q=0.5, threshold=k)
    assert approx == pytest.approx(stats.binom.sf(k - 1, n, 0.5), rel=1e-2)


def test_lattice_span_is_the_gcd_of_the_weights() -> None:
    """Weights 3 and 6: S/3 ~ Bin(4, q) + 2 Bin(2, q); P(S >= 16) = P(S/3 >= 6)."""
    w, m = np.array([3, 6]), np.array([4, 2])
    exact = weighted_bernoulli_sf(weights=w, multiplicities=m, q=0.4, threshold=16)
    approx = saddlepoint_sf(weights=w, multiplicities=m, q=0.4, threshold=16)
    assert approx == pytest.approx(exact, rel=5e-2)
    assert saddlepoint_sf(weights=w, multiplicities=m, q=0.4, threshold=16) == approx
    assert saddlepoint_sf(weights=w, multiplicities=m, q=0.4, threshold=18) == approx


def test_support_ends_are_exact() -> None:
    w, m = np.array([1, 2]), np.array([3, 2])  # support 0..7
    assert saddlepoint_sf(weights=w, multiplicities=m, q=0.3, threshold=0) == 1.0
    assert saddlepoint_sf(weights=w, multiplicities=m, q=0.3, threshold=8) == 0.0
    assert saddlepoint_sf(weights=w, multiplicities=m, q=0.0, threshold=1) == 0.0
    assert saddlepoint_sf(weights=w, multiplicities=m, q=1.0, threshold=7) == 1.0


def test_weights_are_validated_like_the_exact_tail() -> None:
    for bad_w, bad_m, message in (
        (np.array([0, 2]), np.array([1, 1]), "must be >= 1; found min weight 0"),
        (np.array([1, 2]), np.array([1]), "must be 1-d arrays of one length"),
    ):
        for tail in (saddlepoint_sf, weighted_bernoulli_sf):
            with pytest.raises(ValueError, match=message):
                tail(weights=bad_w, multiplicities=bad_m, q=0.5, threshold=1)


@pytest.mark.parametrize("kind", ["geometric", "zipf"])
def test_heavy_tailed_counts_agree_with_the_exact_tail(kind: str) -> None:
    rng = np.random.default_rng(3)
    counts = (
        np.minimum(rng.geometric(0.3, size=20_000), 1000)
        if kind == "geometric"
        else np.minimum(rng.zipf(2.0, size=20_000), 1000)
    )
    w, m = weight_multiplicities(counts)
    t = 0.53 * float((w * m).sum())
    checked = 0
    for q in np.linspace(0.5, 0.525, 11):  # the upper tail, where p̂ is predicted
        exact = weighted_bernoulli_sf(weights=w, multiplicities=m, q=q, threshold=t)
        if 1e-10 < exact < 0.3:
            checked += 1
            assert saddlepoint_sf(weights=w, multiplicities=m, q=q, threshold=t) == pytest.approx(
                exact, rel=1e-3
            )
    assert checked >= 3


def test_rate_is_the_root_of_the_approximate_tail() -> None:
    w, m = np.array([1, 2, 5]), np.array([200, 60, 10])
    t = 230.0
    q = saddlepoint_rate(weights=w, multiplicities=m, statistic=t, alpha=0.05)
    assert q is not None and 0.5 < q < 1
    assert saddlepoint_sf(weights=w, multiplicities=m, q=q, threshold=t) == pytest.approx(
        0.05, rel=1e-8
    )
    # a statistic at the top of the support is reached only as q -> 1
    assert saddlepoint_rate(weights=w, multiplicities=m, statistic=1e9, alpha=0.05) is None


def _exact_infimum(counts: np.ndarray, t: float, alpha: float) -> float:
    """The boundary by plain bisection on the exact tail (50 steps)."""
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if exact_tail(counts=counts, q=mid, threshold=t) <= alpha:
            lo = mid
        else:
            hi = mid
    return lo


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_predicted_bound_is_verified_and_close_to_the_exact_boundary(seed: int) -> None:
    rng = np.random.default_rng(seed)
    counts = np.minimum(rng.zipf(2.0, size=3000), 200)
    train = rng.random(3000) < 0.55
    t = float(counts[train].sum())
    p_hat = exact_rate_lower_bound(counts=counts, statistic=t, alpha=0.05)
    assert exact_tail(counts=counts, q=p_hat, threshold=t) <= 0.05
    assert p_hat == pytest.approx(_exact_infimum(counts, t, 0.05), abs=1e-5)


def test_search_below_a_prediction_that_fails_verification(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A prediction at a level above alpha is not rejected; the exact search takes over and
    still returns the verified boundary."""
    rng = np.random.default_rng(7)
    counts = rng.integers(0, 9, size=400)
    train = rng.random(400) < 0.6
    t = float(counts[train].sum())
    monkeypatch.setattr(feature_match, "_PREDICTION_MARGIN", -0.05)
    p_hat = exact_rate_lower_bound(counts=counts, statistic=t, alpha=0.05)
    assert exact_tail(counts=counts, q=p_hat, threshold=t) <= 0.05
    assert exact_tail(counts=counts, q=p_hat + 1e-6, threshold=t) > 0.05
    assert math.isfinite(p_hat)
