"""LBF and the (ε, δ) profile: the M1/M2 answers of Stomakhin, F. (2025), *Framework for
Privacy-Preserving Synthesis of Textual Data*, Master's thesis, University of Tartu, §3.2-3.7
(M1/M2 examples in §3.5, Theorem 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.stats.lbf import (
    attack_profile,
    censor,
    delta_at_epsilon,
    epsilon_at_delta,
    epsilon_delta_curve,
    lbf_profile,
    restricted_delta_at_epsilon,
)


def m1():
    """X = {1..10}, Y = {2..10}; M1 samples one element uniformly."""
    return lbf_profile(counts_x=np.ones(10), counts_y=np.r_[0.0, np.ones(9)])


def m2():
    """M2 outputs 1 w.p. 1/10, else a uniform element of the dataset."""
    fx = np.r_[0.1 + 0.9 / 10, np.full(9, 0.9 / 10)]
    fy = np.r_[0.1, np.full(9, 0.9 / 9)]
    return lbf_profile(counts_x=fx, counts_y=fy)


def test_m1_known_answers() -> None:
    profile = m1()
    assert delta_at_epsilon(profile, epsilon=math.log(10 / 9)) == pytest.approx(0.1)
    assert profile.delta_floor == pytest.approx(0.1)
    assert epsilon_at_delta(profile, delta=0.05) == math.inf  # below the floor
    assert epsilon_at_delta(profile, delta=0.1) == pytest.approx(math.log(10 / 9))
    assert delta_at_epsilon(profile, epsilon=100.0) == pytest.approx(0.1)  # δ(∞) = floor


def test_m2_known_answers() -> None:
    profile = m2()
    assert epsilon_at_delta(profile, delta=0.0) == pytest.approx(math.log(19 / 10))
    assert delta_at_epsilon(profile, epsilon=math.log(10 / 9)) == pytest.approx(19 / 100)
    assert profile.delta_floor == 0.0


def test_curve_is_a_non_increasing_step_function() -> None:
    curve = epsilon_delta_curve(m2())
    np.testing.assert_allclose(curve.epsilon, [0.0, math.log(10 / 9), math.log(1.9)], rtol=1e-12)
    np.testing.assert_allclose(curve.delta, [0.9, 0.19, 0.0], atol=1e-12)


def test_hand_case_three_outputs() -> None:
    """f_X = (1/2, 1/4, 1/4), f_Y = (1/4, 1/4, 1/2): LBF_XY = (ln 2, 0, -ln 2).
    δ(0) = max(1/2, 1/2) = 1/2; δ(ln 2) = 0 (nothing strictly above)."""
    profile = lbf_profile(counts_x=np.array([2, 1, 1]), counts_y=np.array([1, 1, 2]))
    assert delta_at_epsilon(profile, epsilon=0.0) == pytest.approx(0.5)
    assert delta_at_epsilon(profile, epsilon=0.5) == pytest.approx(0.5)
    assert delta_at_epsilon(profile, epsilon=math.log(2)) == pytest.approx(0.0)
    assert epsilon_at_delta(profile, delta=0.0) == pytest.approx(math.log(2))


def test_vectorised_matches_direct_definition() -> None:
    rng = np.random.default_rng(0)
    cx = rng.integers(0, 20, size=200).astype(float)
    cy = rng.integers(0, 20, size=200).astype(float)
    profile = lbf_profile(counts_x=cx, counts_y=cy)
    fx, fy = cx / cx.sum(), cy / cy.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        lbf = np.log(fx) - np.log(fy)
    for eps in (0.0, 0.1, 0.5, 1.0, 3.0):
        direct = max(fx[lbf > eps + 1e-9].sum(), fy[-lbf > eps + 1e-9].sum())
        assert delta_at_epsilon(profile, epsilon=eps) == pytest.approx(direct, abs=1e-12)


def test_attack_profile_of_a_binary_attack() -> None:
    """A(M(X)) = 1 w.p. 0.6, A(M(Y)) = 1 w.p. 0.3: LBFs ln 2 (output 1) and ln(7/4)
    (output 0, Y side): ε at δ = 0 is ln 2."""
    profile = attack_profile(positive_rate_x=0.6, positive_rate_y=0.3)
    assert epsilon_at_delta(profile, delta=0.0) == pytest.approx(math.log(2))
    assert delta_at_epsilon(profile, epsilon=math.log(7 / 4)) == pytest.approx(0.6)


def _censored(cx: np.ndarray, cy: np.ndarray, threshold: int):
    merged_x, merged_y = censor(counts_x=cx, counts_y=cy, threshold=threshold)
    return lbf_profile(counts_x=merged_x, counts_y=merged_y)


def test_censoring_can_move_the_curve_either_way() -> None:
    """Here censoring lowers δ(ε) everywhere; on a review's counts it doubles δ(0.5) (the
    token carries the mass of an output above e^ε and one below): no direction holds."""
    cx = np.array([50, 40, 3, 1, 0, 2], dtype=float)
    cy = np.array([50, 40, 0, 2, 3, 1], dtype=float)
    before, after = lbf_profile(counts_x=cx, counts_y=cy), _censored(cx, cy, 3)
    assert after.delta_floor < before.delta_floor
    for eps in (0.0, 0.5, 1.0):
        assert delta_at_epsilon(after, epsilon=eps) <= delta_at_epsilon(before, epsilon=eps) + 1e-12
    cx, cy = np.array([10.0, 10, 80]), np.array([1.0, 9, 80])
    assert delta_at_epsilon(lbf_profile(counts_x=cx, counts_y=cy), epsilon=0.5) == pytest.approx(
        0.1
    )
    assert delta_at_epsilon(_censored(cx, cy, 10), epsilon=0.5) == pytest.approx(0.2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=2, max_size=30))
def test_profile_properties(pairs) -> None:
    cx = np.array([a for a, _ in pairs], dtype=float)
    cy = np.array([b for _, b in pairs], dtype=float)
    if cx.sum() == 0 or cy.sum() == 0:
        return
    profile = lbf_profile(counts_x=cx, counts_y=cy)
    grid = np.linspace(0, 5, 30)
    deltas = np.asarray(delta_at_epsilon(profile, epsilon=grid))
    assert ((deltas >= 0) & (deltas <= 1)).all()
    assert (np.diff(deltas) <= 1e-12).all()
    # Theorem 5 as METHODS.md §5 writes it: the larger of the two sides' mass whose LBF
    # exceeds ε (an infinite LBF included), computed here output by output
    fx, fy = cx / cx.sum(), cy / cy.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        lbf = np.log(fx) - np.log(fy)  # ±inf where one side is 0; nan where both are
    lbf = np.where((fx == 0) & (fy == 0), 0.0, lbf)
    for epsilon, delta in zip(grid, deltas, strict=True):
        cut = epsilon + 1e-9
        direct = max(fx[lbf > cut].sum(), fy[-lbf > cut].sum())
        assert delta == pytest.approx(direct, abs=1e-9), epsilon
    eps = epsilon_at_delta(profile, delta=0.2) if profile.delta_floor <= 0.2 else math.inf
    if math.isfinite(eps):
        assert delta_at_epsilon(profile, epsilon=eps) <= 0.2 + 1e-12


def test_validation() -> None:
    with pytest.raises(ValueError, match="counts_x must be non-negative"):
        lbf_profile(counts_x=np.array([-1.0, 1]), counts_y=np.ones(2))
    with pytest.raises(ValueError, match="counts_x must be finite numbers; found inf"):
        lbf_profile(counts_x=np.array([np.inf, 1.0]), counts_y=np.ones(2))
    with pytest.raises(ValueError, match="counts_y must have positive total mass"):
        lbf_profile(counts_x=np.ones(2), counts_y=np.zeros(2))
    with pytest.raises(ValueError, match="must align"):
        lbf_profile(counts_x=np.ones(2), counts_y=np.ones(3))
    with pytest.raises(ValueError, match=r"epsilon must be in \[0, inf\]"):
        delta_at_epsilon(m1(), epsilon=-0.1)
    with pytest.raises(ValueError, match=r"delta must be in \[0, 1\]; found 1.5"):
        epsilon_at_delta(m1(), delta=1.5)
    # a review: NaN in the outputs mask was read as True, negative counts were censored
    with pytest.raises(ValueError, match="outputs must be a boolean mask; found dtype float64"):
        restricted_delta_at_epsilon(
            counts_x=np.ones(2), counts_y=np.ones(2), outputs=np.array([np.nan, 0]), epsilon=1
        )
    with pytest.raises(ValueError, match=r"counts_x must be non-negative numbers; found min -3\.0"):
        censor(counts_x=np.array([-3.0, 5.0]), counts_y=np.ones(2), threshold=1)
    with pytest.raises(ValueError, match="counts_y must be finite numbers; found nan"):
        censor(counts_x=np.ones(2), counts_y=np.array([np.nan, 1.0]), threshold=1)
