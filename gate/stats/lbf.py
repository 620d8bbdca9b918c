"""Log Bayes factors and the (ε, δ) profile from frequency statistics.

Stomakhin, F. (2025). *Framework for Privacy-Preserving Synthesis of Textual Data*.
Master's thesis, University of Tartu: §3.2 (LBF), §3.5 (Theorem 5), §3.7 (Definition 8,
Theorem 6), §4.3 (frequency statistics); see docs/methods.md §6. For two adjacent datasets
X and Y and a mechanism whose outputs ``o`` have relative frequencies ``f_X(o)``, ``f_Y(o)``:
``LBF_XY(o) = ln(f_X(o)/f_Y(o))`` and, for ε >= 0, the minimal δ is

    δ(ε) = max( Σ_{o: LBF_XY(o) > ε} f_X(o),  Σ_{o: LBF_YX(o) > ε} f_Y(o) )   (Theorem 5).

The δ floor ``δ(∞)`` is the mass of outputs possible under one dataset only (§4.3-4.4).
For k independent observations LBFs add (basic composition, §4.1); this module reports
one output.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from gate.stats._validate import StatsError, check_count, check_epsilons, check_probability


class LbfProfile(NamedTuple):
    """Sorted finite LBFs of each side with the mass above each, and the δ floor.

    ``lbf_xy`` ascending with ``mass_xy[j] = Σ f_X over finite LBF_XY > lbf_xy[j]`` (plus
    nothing else): see :func:`delta_at_epsilon` for how the floor is added.
    """

    lbf_xy: np.ndarray
    weight_xy: np.ndarray
    lbf_yx: np.ndarray
    weight_yx: np.ndarray
    floor_x: float  # f_X mass where f_Y = 0
    floor_y: float  # f_Y mass where f_X = 0

    @property
    def delta_floor(self) -> float:
        return max(self.floor_x, self.floor_y)


def _counts(counts: np.ndarray, name: str) -> np.ndarray:
    """``counts`` as a 1-d float array of finite, non-negative numbers."""
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1:
        raise StatsError(f"{name} must be a 1-d array; found shape {c.shape}")
    if c.size and not np.isfinite(c).all():
        raise StatsError(f"{name} must be finite numbers; found {float(c[~np.isfinite(c)][0])!r}")
    if c.size and c.min() < 0:
        raise StatsError(f"{name} must be non-negative numbers; found min {float(c.min())!r}")
    return c


def _frequencies(counts: np.ndarray, name: str) -> np.ndarray:
    c = _counts(counts, name)
    total = c.sum()
    if total <= 0:
        raise StatsError(f"{name} must have positive total mass; found {float(total)!r}")
    return c / total


def lbf_profile(*, counts_x: np.ndarray, counts_y: np.ndarray) -> LbfProfile:
    """Build the (ε, δ) profile from counts of the same outputs under X and Y.

    Args:
        counts_x: counts (or frequencies) of each output under X.
        counts_y: the same outputs under Y (aligned with ``counts_x``).
    """
    fx = _frequencies(counts_x, "counts_x")
    fy = _frequencies(counts_y, "counts_y")
    if fx.shape != fy.shape:
        raise StatsError(f"counts_x and counts_y must align; found shapes {fx.shape}, {fy.shape}")
    both = (fx > 0) & (fy > 0)
    with np.errstate(divide="ignore"):
        lbf = np.log(fx[both]) - np.log(fy[both])
    order = np.argsort(lbf)
    return LbfProfile(
        lbf_xy=lbf[order],
        weight_xy=fx[both][order],
        lbf_yx=-lbf[order][::-1],
        weight_yx=fy[both][order][::-1],
        floor_x=float(fx[(fx > 0) & (fy == 0)].sum()),
        floor_y=float(fy[(fy > 0) & (fx == 0)].sum()),
    )


# LBFs within this relative distance of ε count as equal to it (not "> ε"), so that
# ln(0.1/0.09) and ln(10/9) are one value despite rounding.
_TIE = 1e-12


def _mass_above(lbf: np.ndarray, weight: np.ndarray, epsilon: np.ndarray) -> np.ndarray:
    tail = np.r_[np.cumsum(weight[::-1])[::-1], 0.0]  # tail[j] = Σ weight[j:]
    cut = epsilon + _TIE * np.maximum(1.0, np.abs(epsilon))
    return tail[np.searchsorted(lbf, cut, side="right")]


def delta_at_epsilon(profile: LbfProfile, *, epsilon: float | np.ndarray) -> float | np.ndarray:
    """Minimal δ for target ε (Stomakhin 2025, §3.5 Theorem 5); vectorised over ε.

    Theorem 5's δ is the mass of outputs whose LBF exceeds ε. The least δ for which
    (ε, δ)-DP holds, the hockey-stick divergence ``Σ_o (f_X(o) − e^ε f_Y(o))_+``, is at
    most that (a review: 0.079 against 0.19 for the thesis's M2 at ε = ln(10/9)), so this
    is an upper bound on it, the thesis's and METHODS's quantity.
    """
    eps = check_epsilons(epsilon)
    dx = profile.floor_x + _mass_above(profile.lbf_xy, profile.weight_xy, eps)
    dy = profile.floor_y + _mass_above(profile.lbf_yx, profile.weight_yx, eps)
    delta = np.minimum(1.0, np.maximum(dx, dy))
    return float(delta) if delta.ndim == 0 else delta


def epsilon_at_delta(profile: LbfProfile, *, delta: float) -> float:
    """``ε(δ) = inf{ε >= 0 : δ(ε) <= δ}``; ∞ when δ is below the δ floor."""
    check_probability("delta", delta)
    if delta < profile.delta_floor:
        return math.inf
    candidates = np.unique(
        np.r_[0.0, profile.lbf_xy[profile.lbf_xy > 0], profile.lbf_yx[profile.lbf_yx > 0]]
    )
    deltas = delta_at_epsilon(profile, epsilon=candidates)
    ok = np.nonzero(np.asarray(deltas) <= delta + 1e-15)[0]
    return float(candidates[ok[0]])


class EpsilonDeltaCurve(NamedTuple):
    epsilon: np.ndarray
    delta: np.ndarray


def epsilon_delta_curve(profile: LbfProfile) -> EpsilonDeltaCurve:
    """The whole curve: δ at ε = 0 and at every positive LBF breakpoint (one sort, one sweep).

    δ(ε) is a non-increasing right-continuous step function; between consecutive
    breakpoints it is constant.
    """
    eps = np.unique(
        np.r_[0.0, profile.lbf_xy[profile.lbf_xy > 0], profile.lbf_yx[profile.lbf_yx > 0]]
    )
    return EpsilonDeltaCurve(epsilon=eps, delta=np.asarray(delta_at_epsilon(profile, epsilon=eps)))


def attack_profile(*, positive_rate_x: float, positive_rate_y: float) -> LbfProfile:
    """Profile of a binary attack function's output under X and Y (Stomakhin 2025, §3.7,
    Definition 8 and Theorem 6)."""
    a = check_probability("positive_rate_x", positive_rate_x)
    b = check_probability("positive_rate_y", positive_rate_y)
    return lbf_profile(counts_x=np.array([a, 1 - a]), counts_y=np.array([b, 1 - b]))


def censor(
    *, counts_x: np.ndarray, counts_y: np.ndarray, threshold: int
) -> tuple[np.ndarray, np.ndarray]:
    """Merge every output whose count under X and under Y is at most ``threshold`` into one
    censoring token (Stomakhin 2025, §4.4 and Figure 3a).

    The profile of the censored counts is that of an observer who sees the token in place
    of the rare outputs; it bounds the uncensored profile in neither direction. The LBF of
    the merged output lies between its members' LBFs (§3.2 Lemma 2), but δ(ε) counts the
    mass of outputs above e^ε, and the token can carry more of it than its members did:
    counts (10, 10, 80) and (1, 9, 80) give δ(0.5) = 0.1, censored at 10 they give 0.2."""
    check_count("threshold", threshold)
    cx, cy = _counts(counts_x, "counts_x"), _counts(counts_y, "counts_y")
    if cx.shape != cy.shape:
        raise StatsError(f"counts_x and counts_y must align; found shapes {cx.shape}, {cy.shape}")
    rare = (cx <= threshold) & (cy <= threshold)
    if not rare.any():
        return cx, cy
    return np.r_[cx[~rare], cx[rare].sum()], np.r_[cy[~rare], cy[rare].sum()]


def restricted_delta_at_epsilon(
    *,
    counts_x: np.ndarray,
    counts_y: np.ndarray,
    outputs: np.ndarray,
    epsilon: float | np.ndarray,
) -> float | np.ndarray:
    """δ(ε) of an attacker who watches only ``outputs`` (a boolean mask over the outputs):
    Theorem 5's sums over those outputs, with the frequencies of the whole output space
    (Stomakhin 2025, §5.4.2). Never above :func:`delta_at_epsilon`."""
    fx = _frequencies(counts_x, "counts_x")
    fy = _frequencies(counts_y, "counts_y")
    given = np.asarray(outputs)
    if given.dtype != np.bool_ and given.size:
        raise StatsError(f"outputs must be a boolean mask; found dtype {given.dtype}")
    mask = given.astype(bool)
    if not fx.shape == fy.shape == mask.shape:
        raise StatsError(
            f"counts_x, counts_y and outputs must align; found shapes {fx.shape}, "
            f"{fy.shape}, {mask.shape}"
        )
    eps = check_epsilons(epsilon)
    floor_x = float(fx[mask & (fx > 0) & (fy == 0)].sum())  # LBF_XY = +inf: above every ε
    floor_y = float(fy[mask & (fy > 0) & (fx == 0)].sum())
    both = mask & (fx > 0) & (fy > 0)
    lbf = np.log(fx[both]) - np.log(fy[both])
    order = np.argsort(lbf)
    dx = floor_x + _mass_above(lbf[order], fx[both][order], eps)
    dy = floor_y + _mass_above(-lbf[order][::-1], fy[both][order][::-1], eps)
    delta = np.minimum(1.0, np.maximum(dx, dy))
    return float(delta) if delta.ndim == 0 else delta


def top_outputs(*, counts_x: np.ndarray, counts_y: np.ndarray, top_n: int) -> np.ndarray:
    """Mask of the ``top_n`` outputs of largest ``|LBF|`` (one-sided outputs, ``|LBF| = ∞``,
    first; ties by position)."""
    check_count("top_n", top_n, minimum=1)
    fx = _frequencies(counts_x, "counts_x")
    fy = _frequencies(counts_y, "counts_y")
    with np.errstate(divide="ignore", invalid="ignore"):
        size = np.abs(np.log(fx) - np.log(fy))
    size[(fx == 0) & (fy == 0)] = -1.0  # never seen: never chosen before a seen output
    mask = np.zeros(fx.shape, dtype=bool)
    mask[np.argsort(-size, kind="stable")[:top_n]] = True
    return mask & ((fx > 0) | (fy > 0))


def top_n_delta_at_epsilon(
    *, counts_x: np.ndarray, counts_y: np.ndarray, top_n: int, epsilon: float | np.ndarray
) -> float | np.ndarray:
    """δ(ε) of an attacker who knows only the ``top_n`` outputs of largest ``|LBF|``.

    The subjective analysis of Stomakhin (2025), §5.4.2 (Figure 13): Theorem 5's sums run
    over those outputs only (outputs possible under one dataset, ``|LBF| = ∞``, first),
    with the frequencies of the whole output space. Never above :func:`delta_at_epsilon`.
    """
    outputs = top_outputs(counts_x=counts_x, counts_y=counts_y, top_n=top_n)
    return restricted_delta_at_epsilon(
        counts_x=counts_x, counts_y=counts_y, outputs=outputs, epsilon=epsilon
    )
