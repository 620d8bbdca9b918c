"""Closed forms and simulated moments of the remediation statistics: RIP noise radius and
direction (Algorithm 1, Corollary 8), per-coordinate σ, the Fréchet distance and distinct-n."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gate.stats.rip import (
    cor8_noise,
    cor8_scale,
    isotropic_noise,
    replica_coordinate_sigma,
    replica_sigma,
)
from gate.stats.utility import distinct_n, frechet_distance

DRAWS = 6000


def within(values: np.ndarray, expected: float, sd: float, k: float = 5.0) -> bool:
    """Is the sample mean within k standard errors of ``expected``?"""
    return abs(float(values.mean()) - expected) <= k * sd / math.sqrt(values.size)


def test_isotropic_radius_is_laplace_and_direction_uniform() -> None:
    rng = np.random.default_rng(20)
    d, sigma, eta = 6, 0.4, 0.25
    b = (7.5 / eta) ** 2 * sigma
    x = np.array(
        [isotropic_noise(dimension=d, sigma=sigma, eta=eta, rng=rng) for _ in range(DRAWS)]
    )
    r = np.linalg.norm(x, axis=1)
    # |r| ~ Exp(b): mean b, sd b; r^2 has mean 2 b^2 and sd sqrt(24 - 4) b^2
    assert within(r, b, b)
    assert within(r**2, 2 * b**2, math.sqrt(20) * b**2)
    u = x / r[:, None]
    # uniform on the sphere: E[U] = 0, E[U_i^2] = 1/d, E[U_i U_j] = 0 (sd of U_i is 1/sqrt(d))
    for i in range(d):
        assert within(u[:, i], 0.0, 1 / math.sqrt(d))
        assert within(u[:, i] ** 2, 1 / d, math.sqrt(2 / (d * (d + 2))))
    assert within(u[:, 0] * u[:, 1], 0.0, 1 / d)
    # the sign of r is symmetric: the projection on a fixed axis is as often + as -
    assert abs((x[:, 0] > 0).mean() - 0.5) < 5 * 0.5 / math.sqrt(DRAWS)


def test_cor8_radius_and_scaled_direction() -> None:
    rng = np.random.default_rng(21)
    sigma = np.array([0.1, 1.0, 3.0, 0.5])
    d, eta = sigma.size, 0.3
    b = cor8_scale(eta=eta)
    assert b == pytest.approx((6.16 / 0.3) ** 2)
    x = np.array([cor8_noise(sigma=sigma, eta=eta, rng=rng) for _ in range(DRAWS)])
    radius = np.sqrt((x**2 / (d * sigma**2)).sum(axis=1))  # ||X||_{σ,2} = |r|
    assert within(radius, b, b)
    # X_i / (|r| σ_i) = sqrt(d) Z_i / ||Z||: mean 0, mean square 1 in every coordinate
    scaled = x / (radius[:, None] * sigma)
    for i in range(d):
        assert within(scaled[:, i] ** 2, 1.0, math.sqrt(2 * d / (d + 2)))
        assert within(scaled[:, i], 0.0, 1.0)


def test_replica_sigmas_by_hand() -> None:
    replicas = np.array([[1.0, 2.0, 5.0], [3.0, 2.0, 5.0], [2.0, 2.0, 8.0]])
    # coordinate 0: mean 2, squares 1+1+0 = 2, /(B-1) = 1; coordinate 1: constant; 2: mean 6,
    # squares 1+1+4 = 6, /2 = 3
    np.testing.assert_allclose(
        replica_coordinate_sigma(replicas, floor=1e-6), [1.0, 1e-6, math.sqrt(3.0)]
    )
    assert replica_sigma(replicas) == pytest.approx(math.sqrt((2 + 0 + 6) / 2))
    with pytest.raises(ValueError, match="replicas must be a"):
        replica_coordinate_sigma(np.ones((1, 3)))


def test_frechet_distance_closed_forms() -> None:
    rng = np.random.default_rng(22)
    a = rng.normal(size=(400, 3))
    assert frechet_distance(a=a, b=a) == pytest.approx(0.0, abs=1e-8)
    # a shift adds |shift|^2 and nothing else
    shift = np.array([1.0, -2.0, 0.5])
    assert frechet_distance(a=a, b=a + shift) == pytest.approx(float(shift @ shift), rel=1e-9)
    # 1-d: (m1 - m2)^2 + (s1 - s2)^2 with sample moments
    x, y = np.array([[0.0], [2.0]]), np.array([[1.0], [4.0], [7.0]])
    s1, s2 = np.std(x, ddof=1), np.std(y, ddof=1)
    assert frechet_distance(a=x, b=y) == pytest.approx((1.0 - 4.0) ** 2 + (s1 - s2) ** 2)
    with pytest.raises(ValueError, match=">= 2 rows"):
        frechet_distance(a=x[:1], b=y)


def test_distinct_n_by_hand() -> None:
    # bigrams: (a b) (b a) (a b) | (a b) -> 4 bigrams, 2 distinct
    assert distinct_n(["a b a b", "a b"], n=2) == pytest.approx(2 / 4)
    assert distinct_n(["x y z"], n=1) == 1.0
    assert distinct_n(["one"], n=2) == 0.0
    with pytest.raises(ValueError, match="n must be"):
        distinct_n(["a"], n=0)
