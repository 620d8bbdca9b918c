"""The one-run test inverted in δ, the subjective top-N δ, surprisal statistics and the
TeDA transition sampler: hand-computed cases, closed forms and null simulations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gate.stats.distinguishability import (
    MAX_TRANSITION_LAMBDA,
    distinguishability_epsilon,
    pick_candidates,
    transition_candidate_sets,
)
from gate.stats.lbf import delta_at_epsilon, lbf_profile, top_n_delta_at_epsilon
from gate.stats.one_run import (
    one_run_delta,
    one_run_delta_from_scores,
    one_run_epsilon,
    one_run_p_value,
)
from gate.stats.surprisal import median_difference, threshold_likelihood_ratio


def test_one_run_delta_hand_computed_two_guesses() -> None:
    # k+ = 2, v = 2, m = 2, ε = 0: q = 1/2, P[B >= 2] = 1/4,
    # W = max(P[B = 1]/1, P[B <= 1]/2) = max(1/2, 3/8) = 1/2, δ = (α - 1/4)/(2·2·1/2).
    assert one_run_delta(epsilon=0.0, k_plus=2, k_minus=0, correct=2, alpha=0.5) == 0.125
    # ε = ln 3: q = 3/4, P[B >= 2] = 9/16 >= α: nothing is rejected.
    assert one_run_delta(epsilon=math.log(3), k_plus=2, k_minus=0, correct=2, alpha=0.5) == 0.0
    # no correct guess: the p-value is 1
    assert one_run_delta(epsilon=0.0, k_plus=5, k_minus=5, correct=0, alpha=0.05) == 0.0


def test_one_run_delta_is_the_edge_of_the_rejection_region() -> None:
    kw = {"k_plus": 30, "k_minus": 30, "correct": 55, "scored": 200}
    for eps in (0.0, 0.5, 1.0, 1.5):
        d = one_run_delta(epsilon=eps, alpha=0.05, **kw)
        assert d > 0
        below = one_run_p_value(epsilon=eps, delta=d * 0.999, **kw)
        above = one_run_p_value(epsilon=eps, delta=d * 1.001, **kw)
        assert below < 0.05 <= above


@pytest.mark.parametrize(
    ("kp", "km", "v", "m"), [(50, 50, 90, 400), (20, 0, 20, 100), (200, 0, 150, 1000)]
)
@pytest.mark.parametrize("delta", [1e-6, 1e-4, 1e-3])
def test_delta_at_the_one_run_epsilon_is_the_policy_delta(kp, km, v, m, delta) -> None:
    """Where the two inversions meet they agree: δ̂(ε̂(δ₀)) = δ₀ up to the bisection
    tolerance of ε̂ (and ε̂ is returned from the rejected side, so δ̂ >= δ₀)."""
    eps = one_run_epsilon(k_plus=kp, k_minus=km, correct=v, alpha=0.05, delta=delta, scored=m)
    at = one_run_delta(epsilon=eps, k_plus=kp, k_minus=km, correct=v, alpha=0.05, scored=m)
    after = one_run_delta(
        epsilon=eps + 2e-6, k_plus=kp, k_minus=km, correct=v, alpha=0.05, scored=m
    )
    assert at >= delta
    assert after <= delta
    assert at == pytest.approx(delta, rel=1e-2)


def _appendix_d_delta(*, epsilon: float, guesses: int, correct: int, scored: int, alpha: float):
    """Steinke, Nasr and Jagielski (2023), App. D: the p-value loop as the paper writes
    it, one term at a time, inverted in δ by hand (the p-value is affine in δ)."""
    from scipy.stats import binom

    q = math.exp(epsilon) / (1 + math.exp(epsilon))
    beta = binom.sf(correct - 1, guesses, q)
    slope = total = 0.0
    for i in range(1, correct + 1):
        total += binom.pmf(correct - i, guesses, q)
        if total > i * slope:
            slope = total / i
    return (alpha - beta) / (2 * scored * slope) if beta < alpha else 0.0


def test_one_run_delta_curve_is_vectorised_non_increasing_and_the_paper_s() -> None:
    grid = np.linspace(0, 3, 31)
    kw = {"k_plus": 40, "k_minus": 40, "correct": 72, "alpha": 0.05, "scored": 300}
    curve = one_run_delta(epsilon=grid, **kw)
    assert np.all(np.diff(curve) <= 1e-15)
    assert curve[0] > 0 and curve[-1] == 0  # the grid crosses the rejection's edge
    reference = [
        _appendix_d_delta(epsilon=e, guesses=80, correct=72, scored=300, alpha=0.05) for e in grid
    ]
    assert curve == pytest.approx(reference, rel=1e-9, abs=1e-15)


def test_null_scores_give_positive_delta_at_most_alpha_of_the_time() -> None:
    """Scores independent of membership: δ̂ at ε = 0 (the hardest target) exceeds 0 in at
    most α of 400 seeded draws (binomial slack of 3 standard errors)."""
    rng = np.random.default_rng(12)
    draws, alpha, users = 400, 0.05, 300
    positive = 0
    for _ in range(draws):
        labels = rng.random(users) < 0.5
        scores = rng.poisson(1.0, users).astype(float)  # heavy ties, like disclosure counts
        out = one_run_delta_from_scores(
            scores=scores, is_train=labels, rng=rng, epsilon=0.0, alpha=alpha
        )
        positive += out.delta_lower > 0
    assert positive / draws <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / draws)


def test_separating_scores_give_positive_delta_at_epsilon_one() -> None:
    rng = np.random.default_rng(3)
    labels = rng.random(400) < 0.5
    scores = labels + rng.normal(0, 0.3, 400)
    out = one_run_delta_from_scores(
        scores=scores, is_train=labels, rng=rng, epsilon=1.0, alpha=0.05
    )
    assert out.delta_lower > 0 and out.evaluated == 200


def test_top_n_attacker_m2_and_bounds() -> None:
    # M2 of Stomakhin (2025) §3.5: output 1 has the largest |LBF| (ln 1.9); an attacker who
    # knows only it gets δ(ln(10/9)) = f_X(1) = 0.19, the full δ.
    cx = np.r_[19.0, np.full(9, 9.0)]
    cy = np.r_[10.0, np.full(9, 10.0)]
    eps = math.log(10 / 9)
    assert top_n_delta_at_epsilon(counts_x=cx, counts_y=cy, top_n=1, epsilon=eps) == (
        pytest.approx(0.19)
    )
    # at ε = 0 the full δ also counts outputs 2..10 (f_Y - side): 9 × 0.1 = 0.9
    full = delta_at_epsilon(lbf_profile(counts_x=cx, counts_y=cy), epsilon=0.0)
    assert full == pytest.approx(0.9)
    assert top_n_delta_at_epsilon(counts_x=cx, counts_y=cy, top_n=1, epsilon=0.0) == (
        pytest.approx(0.19)
    )
    assert top_n_delta_at_epsilon(counts_x=cx, counts_y=cy, top_n=10, epsilon=0.0) == (
        pytest.approx(0.9)
    )
    rng = np.random.default_rng(0)
    cx, cy = rng.poisson(2, 500).astype(float), rng.poisson(2, 500).astype(float)
    grid = np.linspace(0, 2, 9)
    full = delta_at_epsilon(lbf_profile(counts_x=cx, counts_y=cy), epsilon=grid)
    for n in (1, 10, 100, 500):
        top = top_n_delta_at_epsilon(counts_x=cx, counts_y=cy, top_n=n, epsilon=grid)
        assert np.all(top <= full + 1e-12)
    assert top == pytest.approx(full)


def test_threshold_likelihood_ratio_hand_case() -> None:
    included = np.array([1.0, 2.0, 3.0, 4.0])
    excluded = np.array([2.0, 4.0, 6.0, 8.0])
    lr = threshold_likelihood_ratio(
        included=included, excluded=excluded, thresholds=np.array([0.0, 2.5, 4.5, 9.0])
    )
    # τ = 2.5: P(S > τ | excl) = 3/4, P(S > τ | incl) = 2/4; τ = 4.5: 2/4 over 0 = inf
    assert lr[0] == 1.0 and lr[1] == 1.5 and lr[2] == math.inf and math.isnan(lr[3])
    assert median_difference(included=included, excluded=excluded) == 5.0 - 2.5


def test_uniform_candidate_sets_are_disjoint_and_uniform() -> None:
    rng = np.random.default_rng(0)
    sets = transition_candidate_sets(
        embeddings=None, n=11, candidates=3, trials=100, transition_lambda=0.0, rng=rng
    )
    assert sets.shape == (3, 3) and np.unique(sets).size == 9  # at most n // k, disjoint
    firsts = np.concatenate(
        [
            transition_candidate_sets(
                embeddings=None, n=5, candidates=2, trials=1, transition_lambda=0.0, rng=rng
            )[0]
            for _ in range(5000)
        ]
    )
    assert np.bincount(firsts, minlength=5) / firsts.size == pytest.approx(
        np.full(5, 0.2), abs=0.02
    )


def test_extreme_lambdas_pick_nearest_and_farthest() -> None:
    # points on a circle: the nearest of 0 is 1 or 7; the farthest is 4
    angles = np.arange(8) * (2 * np.pi / 8)
    e = np.c_[np.cos(angles), np.sin(angles)]
    rng = np.random.default_rng(1)

    def first_gap(lam: float) -> set[int]:
        gaps = set()
        for _ in range(100):
            s = transition_candidate_sets(
                embeddings=e, n=8, candidates=2, trials=1, transition_lambda=lam, rng=rng
            )
            gaps.add(int((s[0, 1] - s[0, 0]) % 8))
        return gaps

    assert first_gap(1e4) == {1, 7}
    assert first_gap(-1e4) == {4}
    sets = transition_candidate_sets(
        embeddings=e, n=8, candidates=2, trials=10, transition_lambda=-1e4, rng=rng
    )
    assert sets.shape == (4, 2) and np.unique(sets).size == 8


def test_lambdas_at_the_bound_keep_sets_disjoint_and_beyond_it_are_refused() -> None:
    """A review: at λ = 1.7e308, λ times a set's summed distance overflowed to -inf on
    every untaken record, argmax took record 0 again, and 16 of 40 sets repeated one.
    At ±MAX_TRANSITION_LAMBDA the sets stay disjoint; beyond it λ is refused."""
    e = np.random.default_rng(2).normal(size=(200, 8))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    rng = np.random.default_rng(3)
    for lam in (MAX_TRANSITION_LAMBDA, -MAX_TRANSITION_LAMBDA):
        sets = transition_candidate_sets(
            embeddings=e, n=200, candidates=5, trials=40, transition_lambda=lam, rng=rng
        )
        assert sets.shape == (40, 5) and np.unique(sets).size == 200
    for lam in (1.7e308, -2 * MAX_TRANSITION_LAMBDA, math.inf, math.nan):
        with pytest.raises(ValueError, match=r"transition_lambda must lie within \+-1e\+06"):
            transition_candidate_sets(
                embeddings=e, n=200, candidates=5, trials=40, transition_lambda=lam, rng=rng
            )


def test_ties_are_broken_at_random_not_by_position() -> None:
    rng = np.random.default_rng(0)
    picks = pick_candidates(np.zeros((20000, 4)), rng)
    assert np.bincount(picks, minlength=4) / 20000 == pytest.approx(np.full(4, 0.25), abs=0.02)
    assert (pick_candidates(np.array([[0.1, 0.9, 0.3]]), rng) == 1).all()


def test_rewrites_independent_of_sources_give_zero_epsilon() -> None:
    """Null: an attack whose similarities ignore the target succeeds with probability 1/k,
    so ε_emp = 0 in >= 1 - α of 500 seeded games (α = alpha_conf/2, the one side used)."""
    rng = np.random.default_rng(5)
    k, trials, games, alpha_conf = 3, 400, 500, 0.1
    positive = 0
    for _ in range(games):
        position = rng.integers(k, size=trials)
        picks = pick_candidates(rng.normal(size=(trials, k)), rng)
        result = distinguishability_epsilon(
            successes=int((picks == position).sum()),
            trials=trials,
            candidates=k,
            alpha_conf=alpha_conf,
        )
        positive += result.epsilon_emp > 0
    rate = alpha_conf / 2
    assert positive / games <= rate + 3 * math.sqrt(rate * (1 - rate) / games)


def test_restricted_delta_keeps_one_sided_outputs_at_infinite_epsilon() -> None:
    # M1: output 1 only under X (LBF = +inf); an attacker watching it keeps δ = 1/10 at ε = ∞
    cx, cy = np.ones(10), np.r_[0.0, np.ones(9)]
    full = delta_at_epsilon(lbf_profile(counts_x=cx, counts_y=cy), epsilon=math.inf)
    top = top_n_delta_at_epsilon(counts_x=cx, counts_y=cy, top_n=1, epsilon=math.inf)
    assert full == pytest.approx(0.1) and top == pytest.approx(0.1)


def test_delta_of_an_odd_number_of_records_by_hand() -> None:
    """26 + 25 correct guesses of 51 evaluated records at ε = 1 (App. D's window)."""
    from gate.stats.one_run import one_run_delta

    reached = one_run_delta(epsilon=1.0, k_plus=26, k_minus=25, correct=51, alpha=0.05, scored=51)
    assert reached == pytest.approx(0.00944, abs=5e-5)


@pytest.mark.parametrize(("records", "refused"), [(19, True), (23, True), (101, False)])
def test_max_delta_0_and_a_total_leak(records: int, refused: bool) -> None:
    """A review: 10 + 9 users of a verbatim copy passed max_delta 0. Perfectly separating
    scores of 19 or 23 users give δ̂ = 0 at ε = 1 in most draws (the split of the members
    between the halves and which users a threshold reaches are random), so max_delta 0 is
    refused there; at 101 users they give 0 in under 1 % of draws and it stands."""
    from gate.audits.membership import total_leak_message
    from gate.stats.one_run import perfect_separation_draws, total_leak_passes

    def delta_lower(s: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> float:
        return one_run_delta_from_scores(scores=s, is_train=y, rng=rng, epsilon=1.0).delta_lower

    found = total_leak_passes(
        delta_lower, threshold=0.0, alpha=0.05, records=records, members=records // 2
    )
    message = total_leak_message(
        found, bound="delta", threshold_name="max_delta", threshold=0.0, alpha=0.05
    )
    assert (message is not None) == refused
    values = perfect_separation_draws(delta_lower, records=records, members=records // 2)
    assert np.all(values < 0.05 / (2 * 0.95))  # App. D: below alpha / (2(1 - alpha)) always
