"""Saddlepoint approximation of the tail of an integer-weighted Bernoulli sum.

``S = sum_w w * Binomial(m_w, q)`` has cumulant generating function
``K(s) = sum_w m_w log(1 - q + q e^{s w})``. The Lugannani–Rice formula with Daniels'
second continuity correction for lattice variables (Daniels 1987, *Int. Stat. Review*
55(1), eq. 2.9; Butler 2007, *Saddlepoint Approximations with Applications*, §1.2.5,
``Pr_2``) approximates ``P(S >= k)`` to a relative error that is typically well under 1 %
in the tails. It costs one root solve over the distinct weights, so it serves as a
*predictor*: :func:`gate.stats.feature_match.exact_rate_lower_bound` uses it to place the
exact tail evaluations, and every number the gate reports is verified with the exact tail.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special, stats

from gate.stats._validate import check_finite, check_probability, check_weights


def _lattice(weights: np.ndarray, multiplicities: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    w, m = check_weights(weights, multiplicities)
    span = int(np.gcd.reduce(w)) if w.size else 1
    return w // span, m.astype(np.float64), span


def saddlepoint_sf(
    *, weights: np.ndarray, multiplicities: np.ndarray, q: float, threshold: float
) -> float:
    """Approximate ``P(sum_w w * Binomial(m_w, q) >= threshold)`` (Daniels 1987, ``Pr_2``).

    Args:
        weights: distinct positive integer weights ``w``.
        multiplicities: ``m_w >= 1``, records per weight.
        q: success probability in [0, 1].
        threshold: the tail's lower end.

    Returns:
        ``1 - Φ(w̃) - φ(w̃)(1/w̃ - 1/ũ)`` with ``K'(s̃) = k - 1/2``,
        ``w̃ = sgn(s̃) sqrt(2(s̃(k - 1/2) - K(s̃)))``, ``ũ = 2 sinh(s̃/2) sqrt(K''(s̃))`` on the
        lattice of span ``gcd(w)``; exact (0 or 1) outside the support; clipped to [0, 1].
    """
    check_probability("q", q)
    check_finite("threshold", threshold)
    w, m, span = _lattice(weights, multiplicities)
    k = math.ceil(threshold / span)
    top = int((w * m).sum())
    if k <= 0 or (q == 1.0 and k <= top):
        return 1.0
    if k > top or q == 0.0:
        return 0.0
    x = k - 0.5
    logit = math.log(q) - math.log1p(-q)
    wf = w.astype(np.float64)

    def k1(s: float) -> float:
        return float((m * wf * special.expit(s * wf + logit)).sum())

    mean = q * float((m * wf).sum())
    variance = q * (1 - q) * float((m * wf * wf).sum())
    if abs(x - mean) < 1e-9 * max(1.0, math.sqrt(variance)):
        return 0.5
    lo, hi = (-1.0, 0.0) if x < mean else (0.0, 1.0)
    scale = 1.0 / max(1.0, math.sqrt(variance))
    lo, hi = lo * scale, hi * scale
    while k1(lo) > x:
        lo *= 2.0
    while k1(hi) < x:
        hi *= 2.0
    s = optimize.brentq(lambda t: k1(t) - x, lo, hi, xtol=1e-14, rtol=1e-12)
    t = s * wf
    pi = special.expit(t + logit)
    k2 = float((m * wf * wf * pi * (1.0 - pi)).sum())
    # s x - K(s) = sum_w m_w (t pi - log(1 - q + q e^t)) + s (x - K'(s)), summed per weight
    # so that no large terms cancel; log(1 - q + q e^t) as logaddexp (no overflow at large t)
    # or log1p(q expm1(t)) (no cancellation at small t).
    log_mgf = np.where(
        np.abs(t) < 1.0,
        np.log1p(q * np.expm1(np.minimum(t, 1.0))),
        np.logaddexp(math.log1p(-q), math.log(q) + t),
    )
    half_w2 = float((m * (t * pi - log_mgf)).sum()) + s * (x - k1(s))
    w_tilde = math.copysign(math.sqrt(max(0.0, 2.0 * half_w2)), s)
    u_tilde = 2.0 * math.sinh(s / 2.0) * math.sqrt(k2)
    if abs(w_tilde) < 1e-3 or u_tilde == 0.0:
        # next to the mean 1/w - 1/u cancels: the normal tail at the corrected point
        return float(stats.norm.sf((x - mean) / math.sqrt(variance)))
    tail = float(stats.norm.sf(w_tilde)) - float(stats.norm.pdf(w_tilde)) * (
        1.0 / w_tilde - 1.0 / u_tilde
    )
    return min(1.0, max(0.0, tail))


def saddlepoint_rate(
    *,
    weights: np.ndarray,
    multiplicities: np.ndarray,
    statistic: float,
    alpha: float,
    lower: float = 0.0,
) -> float | None:
    """The rate ``q`` at which the saddlepoint tail ``P_q(S >= T)`` equals ``alpha``, searched
    above ``lower``; None when the approximation does not cross ``alpha`` there."""
    check_probability("alpha", alpha, open_low=True, open_high=True)  # a target level
    check_finite("statistic", statistic)
    target = math.log(alpha)

    def excess(q: float) -> float:
        tail = saddlepoint_sf(
            weights=weights, multiplicities=multiplicities, q=q, threshold=statistic
        )
        return math.log(max(tail, 1e-300)) - target

    lo, hi = max(lower, 1e-12), 1.0 - 1e-12
    if not (excess(lo) < 0 < excess(hi)):
        return None
    return float(optimize.brentq(excess, lo, hi, xtol=1e-12, rtol=1e-12))
