"""Feature-match test (*Phantoms and Disclosures: a Causal Framework for Auditing Synthetic
Data* (2026), §5.1): known answers, null simulations, power, properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from gate.stats._validate import StatsError
from gate.stats.excess import phantom_excess
from gate.stats.feature_match import (
    epsilon_from_rate,
    exact_rate_lower_bound,
    exact_tail,
    feature_match_test,
    largest_rate_lower_bound,
    rate_from_epsilon,
    train_users_to_exceed,
)
from gate.stats.weighted_tail import (
    weight_multiplicities,
    weighted_bernoulli_pmf,
    weighted_bernoulli_sf,
)

ALPHA = 0.05


def binomial_slack(n: int, alpha: float, *, sd: float = 4) -> float:
    """Upper end of a rejection rate consistent with alpha over n draws (sd standard
    errors)."""
    return alpha + sd * math.sqrt(alpha * (1 - alpha) / n)


# ---------------------------------------------------------------- known answers


def test_methods_check_116_of_121() -> None:
    """docs/methods.md §2 (exact tail, beyond the paper): 116 of 121 with unit weights:
    Hoeffding p̂ 0.847, exact p̂ 0.915."""
    counts = np.ones(121, dtype=int)
    is_train = np.r_[np.ones(116, bool), np.zeros(5, bool)]
    r = feature_match_test(counts=counts, is_train=is_train, p=0.5, alpha=0.05)
    assert r.p_lower == pytest.approx(0.847, abs=5e-4)
    assert r.p_lower_exact == pytest.approx(0.915, abs=5e-4)
    # exact = one-sided Clopper-Pearson
    assert r.p_lower_exact == pytest.approx(stats.beta.ppf(0.05, 116, 6), abs=1e-12)


@pytest.mark.parametrize(
    ("p_hat", "epsilon"),
    [(0.590, 0.364), (0.544, 0.177), (0.556, 0.223), (0.827, 1.561), (0.654, 0.636), (0.390, 0.0)],
)
def test_table5_to_table7_conversion(p_hat: float, epsilon: float) -> None:
    """Phantoms and Disclosures (2026): Table 5's p̂ -> the ε̂ of Table 9 (App. A.5, SFT
    rows), by Theorem 2 with p = 1/2. The tables print three decimals, so the tolerance is
    the rounding of p̂ (±0.0005) propagated through dε/dp̂ = 1/(p̂(1-p̂)), plus the rounding
    of ε̂."""
    tolerance = 0.0005 / (p_hat * (1 - p_hat)) + 0.0005
    assert epsilon_from_rate(rate=p_hat, p=0.5) == pytest.approx(epsilon, abs=tolerance)


def test_hand_computed_hoeffding_case() -> None:
    """c = (1, 2, 3, 0), train = (T, T, F, T): T = 3, C1 = 6, C2 = 14, p = 1/2, alpha = 0.05.
    tau = 3 + sqrt(14 ln 20 / 2) = 3 + 4.5847 = 7.5847; p-value = 1 (T <= p C1);
    p̂ = (3 - 4.5847) / 6 < 0 -> 0; exact P(S >= 3) for S = 1 B1 + 2 B2 + 3 B3:
    outcomes (b1,b2,b3) with sum >= 3: 001,011,101,111,110 -> 5/8."""
    r = feature_match_test(
        counts=np.array([1, 2, 3, 0]), is_train=np.array([1, 1, 0, 1]), alpha=0.05
    )
    assert (r.statistic, r.c1, r.c2, r.holdout_statistic) == (3, 6, 14, 3)
    assert r.critical_value == pytest.approx(3 + math.sqrt(14 * math.log(20) / 2))
    assert r.p_value == 1.0 and r.p_lower == 0.0 and r.epsilon_lower == 0.0
    assert r.p_value_exact == pytest.approx(5 / 8, abs=1e-12)


def test_hand_computed_rejecting_case() -> None:
    """All 30 disclosures of weight 2 in train (15 records) + 10 weight-1 in train:
    T = C1 = 40, C2 = 70. Hoeffding p-value exp(-2 * 20^2 / 70) = exp(-80/7)."""
    counts = np.r_[np.full(15, 2), np.ones(10, int)]
    r = feature_match_test(counts=counts, is_train=np.ones(25, bool), alpha=0.05)
    assert r.p_value == pytest.approx(math.exp(-80 / 7))
    # exact: P(S = 40) = 2^-25
    assert r.p_value_exact == pytest.approx(2.0**-25, rel=1e-9)
    # exact p̂: q^25 = 0.05
    assert r.p_lower_exact == pytest.approx(0.05 ** (1 / 25), abs=1e-7)


def test_rate_from_epsilon_closed_form() -> None:
    assert rate_from_epsilon(epsilon=1.0, p=0.5) == pytest.approx(math.e / (math.e + 1))
    assert rate_from_epsilon(epsilon=0.0, p=0.3) == pytest.approx(0.3)


def test_epsilon_rate_round_trip_for_any_p() -> None:
    for p in (0.1, 0.5, 0.8):
        for eps in (0.0, 0.3, 2.0):
            assert epsilon_from_rate(
                rate=rate_from_epsilon(epsilon=eps, p=p), p=p
            ) == pytest.approx(eps, abs=1e-9)


def test_weighted_pmf_matches_enumeration() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        counts = rng.integers(0, 5, size=8)
        q = float(rng.uniform(0.05, 0.95))
        w, m = weight_multiplicities(counts)
        dist = weighted_bernoulli_pmf(weights=w, multiplicities=m, q=q)
        bits = (np.arange(256)[:, None] >> np.arange(8)) & 1
        sums = bits @ counts
        probs = np.prod(np.where(bits == 1, q, 1 - q), axis=1)
        expected = np.bincount(sums, weights=probs)
        got = np.zeros(expected.size)
        got[dist.offset : dist.offset + dist.pmf.size] = dist.pmf[: expected.size - dist.offset]
        np.testing.assert_allclose(got, expected, atol=1e-14)


@pytest.mark.parametrize("heavy_from", [1, 8, None])
def test_weighted_tail_with_heavy_weights_enumerated_matches_enumeration(
    heavy_from: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Components spanning more cells than the lighter ones together are enumerated
    instead of laid on the lattice (a review: one user with 5·10⁶ disclosures took 33 s
    and 0.9 GB): the same tails as summing over all 2¹⁰ membership patterns, with few
    or many components enumerated (``heavy_from``: their smallest span; None: none)."""
    import gate.stats.weighted_tail as weighted_tail

    monkeypatch.setattr(weighted_tail, "_HEAVY_MIN_CELLS", heavy_from or 1 << 60)
    monkeypatch.setattr(weighted_tail, "_HEAVY_SPAN", 1 if heavy_from else 8)
    rng = np.random.default_rng(4)
    bits = (np.arange(1024)[:, None] >> np.arange(10)) & 1
    for _ in range(30):
        counts = np.concatenate([rng.integers(0, 4, 7), rng.integers(20, 5000, 3)])
        q = float(rng.uniform(0.05, 0.95))
        w, m = weight_multiplicities(counts)
        sums = bits @ counts
        probs = np.prod(np.where(bits == 1, q, 1 - q), axis=1)
        for threshold in [*rng.integers(0, counts.sum() + 2, 8).tolist(), 0.5, counts.sum()]:
            expected = float(probs[sums >= threshold].sum())
            got = weighted_bernoulli_sf(weights=w, multiplicities=m, q=q, threshold=threshold)
            assert got == pytest.approx(expected, abs=1e-12), (counts, q, threshold)
            assert got >= expected - 1e-15


def test_one_user_with_millions_of_disclosures_is_cheap() -> None:
    """The bound with a user of 5·10⁷ disclosures: what it is without that user's weight
    on a lattice (checked against the same counts with the user at 10⁵)."""
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 20, 2000)
    is_train = rng.random(2000) < 0.5
    is_train[:2] = True
    results = []
    for big in (100_000, 50_000_000):
        counts[:2] = big, big // 3 + 1
        results.append(feature_match_test(counts=counts, is_train=is_train))
    assert results[1].lattice_grain == 1  # enumerated, not rounded
    assert results[1].p_value_exact == pytest.approx(results[0].p_value_exact, rel=1e-9)
    assert results[1].epsilon_lower_exact == pytest.approx(results[0].epsilon_lower_exact, rel=1e-6)


@pytest.mark.parametrize("cells", [64, 256, 1024])
@pytest.mark.parametrize("heavy_from", [None, 3000])
def test_a_coarse_lattice_bounds_the_exact_tail_from_above(
    cells: int, heavy_from: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts too large for the lattice's cells are rounded to multiples of a grain and the
    rounding error bounded: the tail is then at least the exact one (a valid p-value), by
    summing over all 2¹⁰ membership patterns; with the largest counts enumerated
    (``heavy_from``) or rounded too."""
    import gate.stats.weighted_tail as weighted_tail

    monkeypatch.setattr(weighted_tail, "_MAX_CELLS", cells)
    monkeypatch.setattr(weighted_tail, "_HEAVY_MIN_CELLS", heavy_from or 1 << 60)
    monkeypatch.setattr(weighted_tail, "_HEAVY_SPAN", 1 if heavy_from else 8)
    rng = np.random.default_rng(8)
    bits = (np.arange(1024)[:, None] >> np.arange(10)) & 1
    grains = set()
    for _ in range(30):
        counts = np.concatenate([rng.integers(1, 40, 6), rng.integers(300, 5000, 4)])
        q = float(rng.uniform(0.05, 0.95))
        w, m = weight_multiplicities(counts)
        grain = weighted_tail.tail_grain(weights=w, multiplicities=m, q=q)
        grains.add(grain)
        probs = np.prod(np.where(bits == 1, q, 1 - q), axis=1)
        sums = bits @ counts
        for threshold in [*rng.integers(0, counts.sum() + 2, 8).tolist(), 0.5, counts.sum()]:
            exact = float(probs[sums >= threshold].sum())
            got = weighted_bernoulli_sf(weights=w, multiplicities=m, q=q, threshold=threshold)
            assert exact - 1e-14 <= got <= 1.0, (counts, q, threshold, grain)
    assert len(grains - {1}) > 1


def test_a_coarse_tail_is_close_to_the_exact_one_with_many_users(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A review: weights rounded up moved the mean by about q N g / 2, and with 10⁶ users
    the tail was 0.77 where the exact one is 10⁻²²; rounded to the nearest multiple with
    the error bounded by Hoeffding, the coarse tail at 3 and 5 standard deviations is
    within the exact one's 0.9th power (20,000 users, counts 100-1,000, on a lattice of
    2¹⁶ cells: counts of 100 rounded to multiples of 64; 1.6 and 2.6 times the exact)."""
    import gate.stats.weighted_tail as weighted_tail

    rng = np.random.default_rng(5)
    counts = rng.integers(100, 1000, 20_000)
    w, m = weight_multiplicities(counts)
    mean, sd = 0.5 * counts.sum(), math.sqrt(0.25 * (counts.astype(float) ** 2).sum())
    thresholds = [mean + 3 * sd, mean + 5 * sd]
    monkeypatch.setattr(weighted_tail, "_MAX_CELLS", 1 << 40)
    exact = [
        weighted_bernoulli_sf(weights=w, multiplicities=m, q=0.5, threshold=t) for t in thresholds
    ]
    assert weighted_tail.tail_grain(weights=w, multiplicities=m, q=0.5) == 1
    monkeypatch.setattr(weighted_tail, "_MAX_CELLS", 1 << 16)
    assert weighted_tail.tail_grain(weights=w, multiplicities=m, q=0.5) > 1
    for t, tail in zip(thresholds, exact, strict=True):
        coarse = weighted_bernoulli_sf(weights=w, multiplicities=m, q=0.5, threshold=t)
        assert tail <= coarse <= tail**0.9, (t, tail, coarse)


def test_one_weight_or_a_common_factor_is_exact_on_its_own_lattice() -> None:
    """A review: one weight (45) for 10⁸ users was rounded, and its tail was 1 where the
    binomial's is 3.2·10⁻⁵; weights are divided by their greatest common divisor first."""
    got = weighted_bernoulli_sf(
        weights=np.array([45]), multiplicities=np.array([10**8]), q=0.5, threshold=45 * 50_020_000
    )
    assert got == pytest.approx(stats.binom.sf(50_020_000 - 1, 10**8, 0.5), rel=1e-6)
    w, m = np.array([201 * 6, 301 * 6]), np.array([50, 70])
    for t in (0, 6 * 5000, 6 * 10_000 + 1, 6 * 31_121, 6 * 31_121 + 1):
        halved = weighted_bernoulli_sf(weights=w // 6, multiplicities=m, q=0.3, threshold=t / 6)
        got = weighted_bernoulli_sf(weights=w, multiplicities=m, q=0.3, threshold=t)
        assert got == pytest.approx(halved, abs=1e-15)


def test_a_few_huge_users_among_many_large_ones_do_not_set_the_grain() -> None:
    """A review: five train users with 10¹¹ disclosures each (six values together) among
    150 with 10⁴-10⁵ laid every weight on one lattice of grain 131,072 (ε̂ 0.49); they
    are enumerated against the others' lattice of grain 4."""
    rng = np.random.default_rng(0)
    counts = np.concatenate([rng.integers(10_000, 100_000, 150), np.full(5, 10**11)])
    is_train = np.concatenate([rng.random(150) < 0.5, np.ones(5, dtype=bool)])
    is_train[:75] = True
    result = feature_match_test(counts=counts, is_train=is_train)
    without = feature_match_test(counts=counts[:150], is_train=is_train[:150])
    assert result.lattice_grain == without.lattice_grain <= 8
    assert result.epsilon_lower_exact >= without.epsilon_lower_exact


def test_thresholds_outside_the_support_and_not_finite() -> None:
    w, m = np.array([3, 1000]), np.array([2, 5])
    total = 3 * 2 + 1000 * 5
    assert weighted_bernoulli_sf(weights=w, multiplicities=m, q=0.5, threshold=total + 1) == 0
    assert weighted_bernoulli_sf(weights=w, multiplicities=m, q=0.5, threshold=0) == 1
    # a total beyond int64 (a review: the support's top wrapped, and the tail read 0)
    big = weighted_bernoulli_sf(
        weights=np.array([2**40]), multiplicities=np.array([2**24]), q=0.5, threshold=1
    )
    assert big == pytest.approx(1.0)
    for bad in (math.inf, math.nan):
        with pytest.raises(ValueError, match="threshold must be a finite number"):
            weighted_bernoulli_sf(weights=w, multiplicities=m, q=0.5, threshold=bad)


@pytest.mark.parametrize("p", [0.5, 0.3])
def test_under_the_null_a_coarse_tail_rejects_at_most_alpha(
    p: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """400 draws of random membership over 160 users (100 with 1-29 disclosures, 60 with
    200-2,999) on a lattice of 2¹² cells (grain 32): the coarse p-value is never below
    the exact one, and rejects at most alpha of the time."""
    import gate.stats.weighted_tail as weighted_tail

    rng = np.random.default_rng(11)
    counts = np.concatenate([rng.integers(1, 30, 100), rng.integers(200, 3000, 60)])
    statistics = (rng.random((400, counts.size)) < p) @ counts
    exact = [exact_tail(counts=counts, q=p, threshold=float(t)) for t in statistics]
    monkeypatch.setattr(weighted_tail, "_MAX_CELLS", 1 << 12)
    w, m = weight_multiplicities(counts)
    assert weighted_tail.tail_grain(weights=w, multiplicities=m, q=p) > 1
    coarse = np.array([exact_tail(counts=counts, q=p, threshold=float(t)) for t in statistics])
    assert (coarse >= np.array(exact) - 1e-14).all()
    assert (coarse <= ALPHA).mean() <= binomial_slack(400, ALPHA)


def test_a_coarse_lattice_is_exact_when_the_grain_divides_every_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One count, a multiple of the grain, for 50 users: the binomial tail in closed form."""
    import gate.stats.weighted_tail as weighted_tail

    monkeypatch.setattr(weighted_tail, "_MAX_CELLS", 1000)
    w, m = np.array([4096]), np.array([50])
    assert weighted_tail.lattice_grain(weights=w, multiplicities=m) > 1
    for k in (0, 10, 25, 40, 50):
        got = weighted_bernoulli_sf(weights=w, multiplicities=m, q=0.3, threshold=4096 * k)
        assert got == pytest.approx(stats.binom.sf(k - 1, 50, 0.3), rel=1e-9, abs=1e-15)


def test_copies_of_long_documents_by_a_thousand_users_are_bounded_in_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A review: 1,000 users with 10⁴-10⁵ disclosures each ran out of memory (3.36 GB at
    400 users). The tail is now laid on a coarser lattice: the test completes within
    1 GB of numpy memory, says so (``lattice_grain``), and its bounds are conservative and
    close: at 60 such users, where the exact lattice fits, forcing the coarse one lowers p̂
    by less than 10⁻³ and never raises it."""
    import tracemalloc

    import gate.stats.weighted_tail as weighted_tail

    rng = np.random.default_rng(0)
    counts = rng.integers(10_000, 100_000, 1000)
    is_train = rng.random(1000) < 0.5
    is_train[:500] = True
    tracemalloc.start()
    try:
        result = feature_match_test(counts=counts, is_train=is_train)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.lattice_grain > 1
    assert peak < 1 << 30
    assert result.p_value_exact <= ALPHA and result.epsilon_lower_exact > result.epsilon_lower
    few, few_train = counts[:60], is_train[:60]
    exact = feature_match_test(counts=few, is_train=few_train)
    assert exact.lattice_grain == 1
    monkeypatch.setattr(weighted_tail, "_MAX_CELLS", 1 << 16)
    coarse = feature_match_test(counts=few, is_train=few_train)
    assert coarse.lattice_grain > 1
    assert exact.p_lower_exact - 1e-3 < coarse.p_lower_exact <= exact.p_lower_exact
    assert coarse.p_value_exact >= exact.p_value_exact - 1e-15  # the FFT's absolute error


def test_large_weighted_tail_matches_normal_approximation() -> None:
    """Far from the edges, the exact tail agrees with the CLT to within 1%."""
    rng = np.random.default_rng(1)
    counts = rng.integers(1, 50, size=20000)
    w, m = weight_multiplicities(counts)
    mean, sd = 0.5 * counts.sum(), math.sqrt(0.25 * (counts.astype(float) ** 2).sum())
    tail = weighted_bernoulli_sf(weights=w, multiplicities=m, q=0.5, threshold=mean + 1.5 * sd)
    assert tail == pytest.approx(stats.norm.sf(1.5), rel=0.02)


# ---------------------------------------------------------------- null and DP simulations


def simulate_counts(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.minimum(rng.geometric(0.4, size=n), 30)


@pytest.mark.parametrize("p", [0.5, 0.3])
def test_zero_learning_rejects_at_most_alpha(p: float) -> None:
    """Disclosures independent of membership: both tests reject <= alpha of 2,000 draws.
    The exact test's null distribution is computed once and reused for all draws."""
    rng = np.random.default_rng(2024)
    counts = simulate_counts(rng, 300)
    draws = 2000
    train = rng.random((draws, counts.size)) < p
    t = train @ counts
    c1, c2 = counts.sum(), (counts**2).sum()
    hoeffding_p = np.where(t > p * c1, np.exp(-2 * np.maximum(0, t - p * c1) ** 2 / c2), 1.0)
    w, m = weight_multiplicities(counts)
    dist = weighted_bernoulli_pmf(weights=w, multiplicities=m, q=p)
    tails = np.r_[np.cumsum(dist.pmf[::-1])[::-1], 0.0]
    exact_p = tails[np.clip(t - dist.offset, 0, dist.pmf.size)]
    assert (hoeffding_p <= ALPHA).mean() <= binomial_slack(draws, ALPHA)
    assert (exact_p <= ALPHA).mean() <= binomial_slack(draws, ALPHA)
    # the library agrees with the vectorised computation on a few draws
    for i in range(5):
        r = feature_match_test(counts=counts, is_train=train[i], p=p, alpha=ALPHA)
        assert r.p_value == pytest.approx(hoeffding_p[i])
        assert r.p_value_exact == pytest.approx(exact_p[i], abs=1e-12)


def dp_release(rng: np.random.Generator, counts: np.ndarray, p: float, epsilon: float, draws: int):
    """Randomised response on membership: record i's features are disclosed with probability
    pi1 if train and pi0 if holdout, pi1/pi0 = e^eps, so the release is eps-DP in each
    record and, given the disclosures, P(train) = q_eps exactly (the worst case)."""
    train = rng.random((draws, counts.size)) < p
    pi0 = 0.3
    pi1 = min(1.0, pi0 * math.exp(epsilon))
    disclosed = rng.random((draws, counts.size)) < np.where(train, pi1, pi0)
    return train, disclosed * counts


@pytest.mark.parametrize(("p", "epsilon"), [(0.5, 0.5), (0.5, 1.0), (0.3, 0.8)])
def test_dp_mechanism_epsilon_hat_below_epsilon(p: float, epsilon: float) -> None:
    """For an eps-DP mechanism, ε̂ <= ε in >= 1 - alpha of draws (Hoeffding and exact).
    ε̂ > ε iff p̂ > q_ε iff tail_{q_ε}(T) <= alpha, so the exact check uses the tail at
    q_ε; the bisection itself is checked on the first draws."""
    rng = np.random.default_rng(7)
    counts = simulate_counts(rng, 200)
    draws = 2000
    train, disclosed = dp_release(rng, counts, p, epsilon, draws)
    q = rate_from_epsilon(epsilon=epsilon, p=p)
    exceed_h = exceed_x = 0
    for i in range(draws):
        c = disclosed[i]
        t, c1, c2 = c[train[i]].sum(), c.sum(), (c**2).sum()
        if c1 == 0:
            continue
        p_lower = (t - math.sqrt(c2 * math.log(1 / ALPHA) / 2)) / c1
        exceed_h += epsilon_from_rate(rate=min(1.0, max(0.0, p_lower)), p=p) > epsilon + 1e-12
        exceed_x += exact_tail(counts=c, q=q, threshold=t) <= ALPHA
    assert exceed_h / draws <= binomial_slack(draws, ALPHA)
    assert exceed_x / draws <= binomial_slack(draws, ALPHA)
    for i in range(10):
        r = feature_match_test(counts=disclosed[i], is_train=train[i], p=p, alpha=ALPHA)
        assert (r.epsilon_lower_exact > epsilon) == (
            exact_tail(counts=disclosed[i], q=q, threshold=r.statistic) <= ALPHA
        )


def test_leak_is_detected_and_epsilon_grows_with_it() -> None:
    rng = np.random.default_rng(3)
    counts = simulate_counts(rng, 2000)
    estimates = []
    for leak in (1.0, 2.0, 4.0, 8.0):
        train = rng.random(counts.size) < 0.5
        pi = np.where(train, 0.1 * leak, 0.1)
        disclosed = (rng.random(counts.size) < np.minimum(pi, 1)) * counts
        r = feature_match_test(counts=disclosed, is_train=train)
        estimates.append(r.epsilon_lower_exact)
    assert estimates[0] < 0.3
    assert estimates[1] > 0 and r.rejects_zero_learning_exact
    assert estimates == sorted(estimates)
    # ε̂ stays below the truth ln(leak)
    assert estimates[-1] < math.log(8.0)


# ---------------------------------------------------------------- exact p̂ is the boundary


def test_exact_rate_lower_bound_is_the_boundary() -> None:
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 7, size=150)
    train = rng.random(150) < 0.7
    t = float(counts[train].sum())
    p_hat = exact_rate_lower_bound(counts=counts, statistic=t, alpha=ALPHA)
    assert exact_tail(counts=counts, q=p_hat, threshold=t) <= ALPHA
    assert exact_tail(counts=counts, q=p_hat + 1e-6, threshold=t) > ALPHA


def _enumerated_tail(counts: list[int], q: float, threshold: float) -> float:
    """P(sum_i c_i Bern(q) >= T) by enumerating every subset (a few counts only)."""
    n, total = len(counts), 0.0
    for mask in range(1 << n):
        chosen = [counts[i] for i in range(n) if mask >> i & 1]
        if sum(chosen) >= threshold:
            total += q ** len(chosen) * (1 - q) ** (n - len(chosen))
    return total


@pytest.mark.parametrize(
    ("counts", "statistic", "infimum"),
    [
        # few, unequal counts: the saddlepoint prediction of p̂ lands far below the bound
        ([3, 0, 1, 2, 4, 3, 3, 0], 14, 0.5069675370),
        ([8, 0, 2, 2, 6, 6, 6, 4], 16, 0.1641795),
        ([3, 3, 1], 1, 0.0169524),
    ],
)
def test_exact_rate_lower_bound_is_the_infimum_on_few_counts(
    counts: list[int], statistic: int, infimum: float
) -> None:
    from scipy import optimize

    root = optimize.brentq(
        lambda q: _enumerated_tail(counts, q, statistic) - ALPHA, 1e-12, 1 - 1e-12, xtol=1e-13
    )
    assert root == pytest.approx(infimum, abs=1e-6)
    p_hat = exact_rate_lower_bound(counts=np.array(counts), statistic=statistic, alpha=ALPHA)
    assert root - 1e-6 <= p_hat <= root


@pytest.mark.parametrize("estimator", ["exact", "hoeffding"])
def test_the_largest_rate_bound_is_reached_by_a_copy_and_never_exceeded(estimator: str) -> None:
    """Every train user disclosing (equal counts), no holdout user: the largest p̂; no
    other outcome of a few users gives more (every assignment of random counts)."""
    rng = np.random.default_rng(3)
    for n in range(1, 9):
        ceiling = largest_rate_lower_bound(train_users=n, alpha=ALPHA, estimator=estimator)
        copy = feature_match_test(
            counts=np.r_[np.full(n, 5), np.zeros(n, int)],
            is_train=np.r_[np.ones(n, bool), np.zeros(n, bool)],
            alpha=ALPHA,
        )
        reached = copy.p_lower_exact if estimator == "exact" else copy.p_lower
        assert reached == pytest.approx(ceiling, abs=1e-7)
        for _ in range(30):
            counts = rng.integers(0, 6, size=2 * n)
            r = feature_match_test(
                counts=counts, is_train=np.r_[np.ones(n, bool), np.zeros(n, bool)], alpha=ALPHA
            )
            assert (r.p_lower_exact if estimator == "exact" else r.p_lower) <= ceiling + 1e-9
    assert largest_rate_lower_bound(train_users=4, alpha=ALPHA, estimator="exact") < 0.5
    assert train_users_to_exceed(rate=0.5, alpha=ALPHA, estimator="exact") == 5  # 2^-5 < 0.05
    # epsilon 0.5 at p = 1/2 needs p̂ > 0.6225: alpha^(1/n) > 0.6225 from n = 7
    assert (
        train_users_to_exceed(
            rate=rate_from_epsilon(epsilon=0.5, p=0.5), alpha=ALPHA, estimator="exact"
        )
        == 7
    )
    for estimator_ in ("exact", "hoeffding"):
        for rate in (0.3, 0.5, 0.9, 0.99):
            n = train_users_to_exceed(rate=rate, alpha=ALPHA, estimator=estimator_)
            assert largest_rate_lower_bound(train_users=n, alpha=ALPHA, estimator=estimator_) > rate
            assert (
                largest_rate_lower_bound(train_users=n - 1, alpha=ALPHA, estimator=estimator_)
                <= rate
            )


def test_the_exact_p_value_is_never_looser_than_hoeffding() -> None:
    """Far in the tail the exact tail's truncation slack (1e-20 per step) exceeds
    Hoeffding's bound (1.9e-140 here); the smaller valid p-value is reported."""
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 3, size=100_000)
    train = rng.random(100_000) < 0.55
    r = feature_match_test(counts=counts, is_train=train)
    assert r.p_value < 1e-100 and r.p_value_exact <= r.p_value


def test_the_exact_test_and_its_epsilon_agree() -> None:
    """A release the exact test rejects at p = 1/2 has an exact rate bound >= 1/2, so its
    ε̂ is positive (a first version returned p̂ = 0.485 here, ε̂ = 0, with p = 0.047)."""
    r = feature_match_test(
        counts=np.array([3, 0, 1, 2, 4, 3, 3, 0]),
        is_train=np.array([1, 1, 1, 0, 1, 1, 1, 1], dtype=bool),
        alpha=ALPHA,
    )
    assert r.p_value_exact == pytest.approx(0.046875) and r.rejects_zero_learning_exact
    assert r.epsilon_lower_exact == pytest.approx(math.log(0.5069675370 / 0.4930324630), abs=1e-5)
    assert (
        phantom_excess(
            counts=np.array([3, 0, 1, 2, 4, 3, 3, 0]),
            is_train=np.array([1, 1, 1, 0, 1, 1, 1, 1], dtype=bool),
            alpha=ALPHA,
        ).lower
        > 0
    )


@pytest.mark.parametrize(
    ("counts", "is_train", "p", "alpha"),
    [
        ([1, 1, 1], [1, 1, 1], 0.5, 0.125),  # P(T >= 3) = 1/8 = alpha exactly
        ([1, 2, 5], [0, 1, 1], 0.1, 0.01),  # P(T >= 7) = 0.1^2 = alpha exactly
        ([1, 1], [1, 1], 0.1, 0.01),  # the same tail, rounded up
    ],
)
def test_a_p_value_of_exactly_alpha_rejects_nothing_as_its_epsilon_says(
    counts: list[int], is_train: list[int], p: float, alpha: float
) -> None:
    """A review: at a p-value on an atom of exactly alpha the test rejected (<=) while p̂ =
    p gave ε̂ = 0 and an excess bound <= 0, and the tail's rounding decided between two
    equal atoms. The test and its bounds now agree there: no rejection."""
    c, t = np.array(counts), np.array(is_train, dtype=bool)
    r = feature_match_test(counts=c, is_train=t, p=p, alpha=alpha)
    assert r.p_value_exact == pytest.approx(alpha, rel=1e-9)
    assert not r.rejects_zero_learning_exact and r.epsilon_lower_exact == 0
    assert phantom_excess(counts=c, is_train=t, p=p, alpha=alpha).lower <= 0
    above = feature_match_test(counts=c, is_train=t, p=p, alpha=alpha * 1.001)
    assert above.rejects_zero_learning_exact and above.epsilon_lower_exact > 0


def test_inputs_a_review_found_unchecked_are_refused_by_name() -> None:
    """Counts past 2**63 had wrapped around (p-value 0.018 for a tail of 0.75, ε̂ = inf);
    a statistic beyond the counts' sum, NaN or negative counts reached scipy or were
    dropped; an estimator other than "exact" was taken for Hoeffding's."""
    with pytest.raises(StatsError, match=r"counts must sum to at most 2\*\*53"):
        feature_match_test(counts=np.array([2**62, 2**62]), is_train=np.array([True, False]))
    for statistic in (10, math.nan, -1):
        with pytest.raises(StatsError, match=r"statistic must be a number in \[0, sum"):
            exact_rate_lower_bound(counts=np.array([1, 2]), statistic=statistic, alpha=0.05)
    with pytest.raises(StatsError, match="counts must be non-negative"):
        exact_rate_lower_bound(counts=np.array([-1, 2]), statistic=1, alpha=0.05)
    with pytest.raises(StatsError, match="estimator must be 'exact' or 'hoeffding'; found 'bogus'"):
        largest_rate_lower_bound(train_users=5, alpha=0.05, estimator="bogus")  # type: ignore[arg-type]
    with pytest.raises(StatsError, match="estimator must be"):
        train_users_to_exceed(rate=0.5, alpha=0.05, estimator="Exact")  # type: ignore[arg-type]


# ---------------------------------------------------------------- properties


counts_and_flags = st.integers(min_value=1, max_value=40).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 12), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
    )
)


@settings(max_examples=60, deadline=None)
@given(counts_and_flags, st.sampled_from([0.3, 0.5, 0.7]), st.sampled_from([0.01, 0.05, 0.2]))
def test_bounds_in_range_and_exact_at_least_hoeffding(data, p, alpha) -> None:
    counts, flags = np.array(data[0]), np.array(data[1])
    r = feature_match_test(counts=counts, is_train=flags, p=p, alpha=alpha)
    for value in (r.p_value, r.p_value_exact, r.p_lower, r.p_lower_exact):
        assert 0.0 <= value <= 1.0
    assert r.epsilon_lower >= 0 and r.epsilon_lower_exact >= 0
    assert r.epsilon_lower_exact >= r.epsilon_lower - 1e-9
    # the exact tail itself (the result reports the smaller of it and Hoeffding's bound,
    # so the result alone cannot show it) is below Hoeffding's bound, and its p̂ above
    raw_p_value = exact_tail(counts=counts, q=p, threshold=r.statistic)
    assert raw_p_value <= r.p_value + 1e-12
    assert r.p_value_exact == pytest.approx(min(r.p_value, raw_p_value), rel=1e-12, abs=0)
    raw_lower = exact_rate_lower_bound(counts=counts, statistic=r.statistic, alpha=alpha)
    assert raw_lower >= r.p_lower - 1e-6
    # p̂ is the boundary of the rates the exact tail rejects, and agrees with the test
    if r.statistic > 0:
        assert exact_tail(counts=counts, q=r.p_lower_exact, threshold=r.statistic) <= alpha
    if r.statistic > 0 and r.p_lower_exact < 1 - 1e-6:
        above = exact_tail(counts=counts, q=r.p_lower_exact + 1e-6, threshold=r.statistic)
        assert above > alpha * (1 - 1e-3)
    if r.p_value_exact <= alpha * (1 - 1e-6):
        assert r.p_lower_exact >= p - 1e-9


@settings(max_examples=40, deadline=None)
@given(counts_and_flags)
def test_moving_a_disclosure_to_train_never_lowers_epsilon(data) -> None:
    counts, flags = np.array(data[0]), np.array(data[1])
    holdout_with = np.nonzero(~flags & (counts > 0))[0]
    if holdout_with.size == 0:
        return
    before = feature_match_test(counts=counts, is_train=flags)
    flags2 = flags.copy()
    flags2[holdout_with[0]] = True
    after = feature_match_test(counts=counts, is_train=flags2)
    assert after.epsilon_lower_exact >= before.epsilon_lower_exact - 1e-9
    assert after.epsilon_lower >= before.epsilon_lower - 1e-12


# ---------------------------------------------------------------- excess


def test_excess_hand_case_and_interval() -> None:
    counts = np.ones(121, dtype=int)
    flags = np.r_[np.ones(116, bool), np.zeros(5, bool)]
    e = phantom_excess(counts=counts, is_train=flags, p=0.5, alpha=0.05)
    assert (e.train, e.holdout, e.estimate) == (116, 5, 111)
    assert e.phantom_rate == pytest.approx(5 / 121)
    # lower = (p̂_exact - p) * D / (1 - p)
    assert e.lower == pytest.approx((stats.beta.ppf(0.05, 116, 6) - 0.5) * 121 / 0.5)
    upper_q = 1 - stats.beta.ppf(0.05, 5, 117)
    assert e.upper == pytest.approx((upper_q - 0.5) * 121 / 0.5)
    assert e.lower <= e.estimate <= e.upper


def test_excess_reuses_a_given_test_and_checks_it_matches() -> None:
    counts, flags = np.ones(121, dtype=int), np.r_[np.ones(116, bool), np.zeros(5, bool)]
    test = feature_match_test(counts=counts, is_train=flags)
    assert phantom_excess(counts=counts, is_train=flags, test=test) == phantom_excess(
        counts=counts, is_train=flags
    )
    with pytest.raises(
        ValueError, match=r"test was computed with p=0\.5, alpha=0\.05, gamma=0\.0; found p=0\.3"
    ):
        phantom_excess(counts=counts, is_train=flags, p=0.3, test=test)


def test_excess_p_not_half() -> None:
    e = phantom_excess(
        counts=np.ones(10, int), is_train=np.r_[np.ones(3, bool), np.zeros(7, bool)], p=0.25
    )
    assert e.estimate == pytest.approx(3 - 7 * 0.25 / 0.75)


def excess_coverage(draws: int, seed: int) -> float:
    """The share of random splits (no learning) whose phantom-adjusted excess has a
    lower bound <= 0."""
    rng = np.random.default_rng(seed)
    counts = simulate_counts(rng, 200)
    covered = sum(
        phantom_excess(counts=counts, is_train=rng.random(200) < 0.5).lower <= 0
        for _ in range(draws)
    )
    return covered / draws


def test_excess_under_null_covers_zero() -> None:
    assert excess_coverage(150, seed=11) >= 1 - binomial_slack(150, ALPHA)


@pytest.mark.slow
def test_excess_under_null_covers_zero_2000_draws() -> None:
    """At 3 standard errors over 2,000 draws (1 - alpha - 0.015): a review noted that
    150 draws at 4 allow a miss rate of 12 %."""
    assert excess_coverage(2000, seed=12) >= 1 - binomial_slack(2000, ALPHA, sd=3)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"p": 1.0}, r"p must be in \(0, 1\); found 1.0"),
        ({"p": 0}, r"p must be in \(0, 1\); found 0"),
        ({"alpha": 0.0}, r"alpha must be in \(0, 1\); found 0.0"),
        ({"alpha": float("nan")}, r"alpha must be in \(0, 1\); found nan"),
        ({"alpha": 1e-13}, r"alpha must be in \[1e-12, 1\) .*; found 1e-13"),
    ],
)
def test_feature_match_rejects_bad_arguments(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        feature_match_test(counts=np.ones(3, int), is_train=np.ones(3, bool), **kwargs)


@pytest.mark.parametrize("alpha", [1e-12, 1e-9])
@pytest.mark.parametrize("kind", ["one weight", "two weights"])
def test_the_exact_bound_at_the_smallest_levels(alpha: float, kind: str) -> None:
    """A review: near alpha = 1e-16 the search hung (one weight: a back-off of 1e-12 per
    step) or raised (two weights: Brent's bracket had one sign), for the tails' error.
    Now alpha >= 1e-12, and the bound is a rejected rate at least Hoeffding's."""
    rng = np.random.default_rng(3)
    counts = np.ones(10_000, int) if kind == "one weight" else rng.integers(1, 3, 10_000)
    is_train = np.arange(10_000) < 9_000
    result = feature_match_test(counts=counts, is_train=is_train, alpha=alpha)
    assert result.p_lower <= result.p_lower_exact < 1
    statistic = float(counts[is_train].sum())
    assert exact_tail(counts=counts, q=result.p_lower_exact, threshold=statistic) <= alpha


def test_one_weight_bound_bisects_when_the_closed_form_is_not_rejected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Clopper-Pearson's closed form (beta.ppf) is checked against the exact tail; one
    that the tail does not reject (rounding, or the tail's error at tiny alpha) is
    bisected down to the boundary: the same bound as the closed form, and rejected."""
    from gate.stats import feature_match

    counts = np.ones(200, int)
    statistic = 150.0
    expected = exact_rate_lower_bound(counts=counts, statistic=statistic, alpha=ALPHA)
    assert expected == pytest.approx(stats.beta.ppf(ALPHA, 150, 51))
    real = feature_match.stats.beta.ppf
    monkeypatch.setattr(feature_match.stats.beta, "ppf", lambda *a: real(*a) + 0.02)
    bisected = exact_rate_lower_bound(counts=counts, statistic=statistic, alpha=ALPHA)
    assert bisected == pytest.approx(expected, abs=1e-9)
    assert exact_tail(counts=counts, q=bisected, threshold=statistic) <= ALPHA


def test_feature_match_rejects_bad_arrays() -> None:
    with pytest.raises(ValueError, match="one length"):
        feature_match_test(counts=np.ones(3, int), is_train=np.ones(2, bool))
    with pytest.raises(ValueError, match="non-negative integers; found -1"):
        feature_match_test(counts=np.array([1, -1]), is_train=np.ones(2, bool))
    with pytest.raises(ValueError, match=r"counts must be integers; found 1\.5 at position 0"):
        feature_match_test(counts=np.array([1.5, 1]), is_train=np.ones(2, bool))
    with pytest.raises(ValueError, match=r"is_train must hold booleans \(or 0/1\); found 2"):
        feature_match_test(counts=np.array([1, 1]), is_train=np.array([2, 0]))
    with pytest.raises(ValueError, match="found 'yes'"):
        feature_match_test(counts=np.array([1, 1]), is_train=np.array(["yes", 0], dtype=object))
    assert feature_match_test(counts=np.array([2.0, 0.0]), is_train=[1, 0]).statistic == 2


def test_arguments_python_reads_as_numbers_but_are_not_are_refused() -> None:
    """True is 1 and 1.9 casts to 1: neither is a level, a rate or a weight."""
    with pytest.raises(ValueError, match=r"p must be in \(0, 1\); found True"):
        rate_from_epsilon(epsilon=1.0, p=True)
    with pytest.raises(ValueError, match=r"epsilon must be in \[0, inf\]; found False"):
        rate_from_epsilon(epsilon=False, p=0.5)
    with pytest.raises(ValueError, match=r"weights must be integers; found 1\.9 at position 1"):
        weighted_bernoulli_pmf(weights=np.array([1, 1.9]), multiplicities=np.array([1, 1]), q=0.5)
    with pytest.raises(ValueError, match="multiplicities must be integers; found dtype bool"):
        weighted_bernoulli_pmf(weights=np.array([1]), multiplicities=np.array([True]), q=0.5)
    with pytest.raises(ValueError, match=r"train_users must be an integer in \[0, inf\]"):
        largest_rate_lower_bound(train_users=2.5, alpha=0.05, estimator="exact")
    with pytest.raises(ValueError, match=r"train_users must be an integer .*; found -3"):
        largest_rate_lower_bound(train_users=-3, alpha=0.05, estimator="exact")


def test_conversion_validation() -> None:
    with pytest.raises(ValueError, match=r"epsilon must be in \[0, inf\]; found -1"):
        rate_from_epsilon(epsilon=-1, p=0.5)
    with pytest.raises(ValueError, match=r"rate must be in \[0, 1\]; found 1.2"):
        epsilon_from_rate(rate=1.2, p=0.5)
    with pytest.raises(ValueError, match=r"q must be in \[0, 1\]; found 2"):
        weighted_bernoulli_pmf(weights=np.array([1]), multiplicities=np.array([1]), q=2)
