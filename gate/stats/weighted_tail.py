"""Exact distribution of an integer-weighted sum of i.i.d. Bernoulli variables.

``S = sum_i c_i * Bern(q)`` with non-negative integer weights ``c_i``: records of equal
weight ``w`` form ``w * Binomial(m_w, q)``; the components are convolved (FFT for large
supports) in a balanced product tree. Each component and each partial sum is kept on the
window ``mean ± sqrt(C2 ln(2/tol) / 2)`` which holds all but ``tol`` of its mass by
Hoeffding's inequality, so the truncation error is bounded and added back to tail
probabilities: the returned tails are upper bounds (valid p-values), up to floating-point
error of order 1e-15 from the FFT. Sums too large for :data:`_MAX_CELLS` lattice cells
are laid on a coarser lattice, with the larger weights rounded to the nearest multiple of
:func:`lattice_grain` and the rounding error bounded by Hoeffding's inequality: the tail
is then an upper bound on the exact one, so the p-values stay valid.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import signal, stats

from gate.stats._validate import check_finite, check_probability, check_weights

_TOL = 1e-20  # mass dropped per truncation (Hoeffding-bounded)
_FFT_MIN = 256  # below this length np.convolve is faster and exact
_HEAVY_SPAN = 8  # a component this many times longer than the lighter ones is enumerated
_HEAVY_MIN_CELLS = 1 << 16  # ... if it spans more cells than this
_HEAVY_VALUES = 1 << 16  # values the enumerated components may take together
_MAX_CELLS = 1 << 22  # lattice cells the components may lay out (about 0.4 GB at work)
# P(rounding error >= delta) <= eta for each eta here (Hoeffding): the coarse tail takes the
# best of them
_ROUNDING_SLACK = 10.0 ** -np.array([2, 2.5, 3, 3.5, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30])
_HEAVY_WITH_COARSE = 16  # heavy values enumerated against a coarse lattice, at most


class LatticePmf(NamedTuple):
    """``pmf[j] = P(S = offset + j)``, plus an upper bound on the mass not represented."""

    offset: int
    pmf: np.ndarray
    dropped: float


def weight_multiplicities(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct positive weights and how many records carry each."""
    values, mult = np.unique(np.asarray(counts, dtype=np.int64), return_counts=True)
    keep = values > 0
    return values[keep], mult[keep]


def _half_width(c2: float | np.ndarray) -> float | np.ndarray:
    """Hoeffding's half-width around the mean that leaves at most ``_TOL`` outside, for a
    sum whose squared ranges add to ``c2`` (a scalar, or one per component)."""
    return np.sqrt(np.asarray(c2, dtype=np.float64) * math.log(2.0 / _TOL) / 2.0)


def _window(mean: float, c2: float, lo: int, hi: int) -> tuple[int, int]:
    half = float(_half_width(c2))
    return max(lo, math.floor(mean - half)), min(hi, math.ceil(mean + half))


def _component_cells(weights: np.ndarray, multiplicities: np.ndarray) -> np.ndarray:
    """Lattice cells each ``w * Binomial(m, q)`` lays out on its window (:func:`_window`,
    whose width does not depend on q): the leaves of the product tree, and about what each
    level of it holds until the windows of the partial sums cut them."""
    widths = np.minimum(multiplicities, np.ceil(2.0 * _half_width(multiplicities)) + 1)
    return weights.astype(np.float64) * widths + 1.0


def lattice_grain(*, weights: np.ndarray, multiplicities: np.ndarray) -> int:
    """The grain ``g`` of the lattice :func:`weighted_bernoulli_sf` lays the sum on: 1 when
    its components fit in :data:`_MAX_CELLS` cells, else the smallest power of two for which
    they do with every weight rounded up to a multiple of ``g`` (counted in units of ``g``).

    The components are laid out with the weights rounded to the nearest multiple of
    ``g``, and the rounding error is bounded by Hoeffding's inequality
    (:func:`_coarse_sf`), so the tail computed is an upper bound on the exact one: a
    valid, conservative p-value. :func:`weighted_bernoulli_sf` keeps the smallest weights
    exact while the cells allow, as rounding costs them most.
    """
    w, m = check_weights(weights, multiplicities)
    if w.size == 0 or _component_cells(w, m).sum() <= _MAX_CELLS:
        return 1
    order = np.argsort(w, kind="stable")
    w, m = w[order], m[order]
    grain = 2
    while grain < w.max():
        rounded, merged = _merged(-(-w // grain), m)  # rounded up: at least the cells
        if _component_cells(rounded, merged).sum() <= _MAX_CELLS:
            break
        grain *= 2
    return grain


def _binomial_component(weight: int, m: int, q: float) -> LatticePmf:
    k_lo, k_hi = _window(m * q, float(m), 0, m)
    ks = np.arange(k_lo, k_hi + 1)
    pmf = stats.binom.pmf(ks, m, q)
    dropped = _TOL if (k_lo > 0 or k_hi < m) else 0.0
    if weight == 1:
        return LatticePmf(k_lo, pmf, dropped)
    lattice = np.zeros((k_hi - k_lo) * weight + 1)
    lattice[::weight] = pmf
    return LatticePmf(k_lo * weight, lattice, dropped)


def _convolve(a: LatticePmf, b: LatticePmf, q: float, c1: int, c2: float) -> LatticePmf:
    if min(a.pmf.size, b.pmf.size) < _FFT_MIN:
        pmf = np.convolve(a.pmf, b.pmf)
    else:
        pmf = signal.fftconvolve(a.pmf, b.pmf)
        np.clip(pmf, 0.0, None, out=pmf)
    offset = a.offset + b.offset
    lo, hi = _window(q * c1, c2, offset, offset + pmf.size - 1)
    dropped = a.dropped + b.dropped
    if lo > offset or hi < offset + pmf.size - 1:
        pmf = pmf[lo - offset : hi - offset + 1]
        offset = lo
        dropped += _TOL
    return LatticePmf(offset, pmf, dropped)


def weighted_bernoulli_pmf(
    *, weights: np.ndarray, multiplicities: np.ndarray, q: float
) -> LatticePmf:
    """Distribution of ``sum_w w * Binomial(m_w, q)`` on its integer lattice.

    Args:
        weights: distinct positive integer weights ``w``.
        multiplicities: ``m_w >= 1``, records per weight.
        q: success probability in [0, 1].
    """
    check_probability("q", q)
    w, m = check_weights(weights, multiplicities)
    if w.size == 0:
        return LatticePmf(0, np.ones(1), 0.0)
    if q in (0.0, 1.0):
        total = int((w * m).sum()) if q == 1.0 else 0
        return LatticePmf(total, np.ones(1), 0.0)
    # Balanced product tree; each node tracks its C1 and C2 to bound its own window.
    nodes = [
        (_binomial_component(int(wi), int(mi), q), int(wi * mi), float(wi * wi * mi))
        for wi, mi in zip(w, m, strict=True)
    ]
    while len(nodes) > 1:
        nodes.sort(key=lambda node: node[0].pmf.size)
        merged = []
        for i in range(0, len(nodes) - 1, 2):
            (a, c1a, c2a), (b, c1b, c2b) = nodes[i], nodes[i + 1]
            c1, c2 = c1a + c1b, c2a + c2b
            merged.append((_convolve(a, b, q, c1, c2), c1, c2))
        if len(nodes) % 2:
            merged.append(nodes[-1])
        nodes = merged
    return nodes[0][0]


def weighted_bernoulli_sf(
    *, weights: np.ndarray, multiplicities: np.ndarray, q: float, threshold: float
) -> float:
    """``P(sum_w w * Binomial(m_w, q) >= threshold)``, an upper bound within 1e-15; or, when
    the components lighter than the enumerated ones below need more than
    :data:`_MAX_CELLS` lattice cells, an upper bound computed with the larger weights
    rounded to the nearest multiple of :func:`lattice_grain` and the rounding error bounded
    (:func:`_coarse_sf`; many users with tens of thousands of disclosures each had run out
    of memory). Weights are divided by their greatest common divisor first.

    A component that would span more lattice cells than :data:`_HEAVY_SPAN` times all
    lighter ones together (a user with millions of disclosures among users with tens) is
    not laid on the lattice: the values the heavy components take together (at most
    :data:`_HEAVY_VALUES`) are enumerated, each with its probability, against the tail
    of the light ones, ``sum_h P(heavy = h) P(light >= threshold - h)``, so memory and
    time follow the light weights, not the largest one.
    """
    check_probability("q", q)
    w, m = check_weights(weights, multiplicities)
    check_finite("threshold", threshold)
    # the support's top in floating point (an int64 sum can wrap), with a margin for rounding
    if w.size == 0 or threshold > float(np.dot(w.astype(np.float64), m)) * (1 + 1e-9) + 1:
        return 1.0 if threshold <= 0 else 0.0
    if threshold <= 0:
        return 1.0
    w, threshold = _in_units_of_gcd(w, threshold)
    heavy, grain = _plan(w, m, q)
    if grain > 1:
        return _coarse_sf(w, m, heavy, q=q, threshold=threshold, grain=grain)
    light = weighted_bernoulli_pmf(weights=w[~heavy], multiplicities=m[~heavy], q=q)
    if not heavy.any():
        first = math.ceil(threshold) - light.offset
        tail = 1.0 if first <= 0 else float(light.pmf[first:].sum())  # empty past the end
        return min(1.0, tail + light.dropped)
    values, probabilities, dropped = _heavy_values(w[heavy], m[heavy], q)
    # P(light >= t) for every t = threshold - h, from the light pmf's upper cumulative sums
    upper = np.concatenate([np.cumsum(light.pmf[::-1])[::-1], [0.0]])
    start = np.ceil(threshold - values).astype(np.int64) - light.offset
    tails = upper[np.clip(start, 0, light.pmf.size)]
    tails[start <= 0] = 1.0
    tail = float(np.dot(probabilities, tails))
    return min(1.0, tail + light.dropped + dropped)


def _heavy_components(w: np.ndarray, m: np.ndarray, q: float) -> np.ndarray:
    """Which components :func:`weighted_bernoulli_sf` enumerates instead of laying them on
    the lattice: each spanning more than :data:`_HEAVY_SPAN` times the lighter ones
    together (and :data:`_HEAVY_MIN_CELLS`), while their values stay within
    :data:`_HEAVY_VALUES`."""
    heavy = np.zeros(w.size, dtype=bool)
    half = _half_width(m)  # :func:`_window` of every binomial component at once
    k_lo = np.maximum(0, np.floor(m * q - half)).astype(np.int64)
    k_hi = np.minimum(m, np.ceil(m * q + half)).astype(np.int64)
    spans = (k_hi - k_lo) * w
    if 0.0 < q < 1.0 and spans.size and spans.max() > _HEAVY_MIN_CELLS:
        order = np.argsort(spans, kind="stable")
        # only spans above _HEAVY_MIN_CELLS can be heavy: the others are light, together
        first = int(np.searchsorted(spans[order], _HEAVY_MIN_CELLS, side="right"))
        light_span, heavy_values = int(spans[order[:first]].sum()), 1
        for i in order[first:]:
            size = int(k_hi[i] - k_lo[i]) + 1
            if spans[i] > max(_HEAVY_SPAN * light_span, _HEAVY_MIN_CELLS) and (
                heavy_values * size <= _HEAVY_VALUES
            ):
                heavy[i] = True
                heavy_values *= size
            else:
                light_span += int(spans[i])
    return heavy


def tail_grain(*, weights: np.ndarray, multiplicities: np.ndarray, q: float) -> int:
    """The grain of the lattice :func:`weighted_bernoulli_sf` uses at ``q``, in units of
    the weights' greatest common divisor: 1 (exact) when the components it does not
    enumerate fit in :data:`_MAX_CELLS` cells."""
    check_probability("q", q)
    w, m = check_weights(weights, multiplicities)
    if w.size == 0:
        return 1
    return _plan(_in_units_of_gcd(w, 0.0)[0], m, q)[1]


def _in_units_of_gcd(w: np.ndarray, threshold: float) -> tuple[np.ndarray, float]:
    """Weights and threshold divided by the weights' greatest common divisor ``d``:
    ``P(S >= t) = P(S / d >= ceil(t / d))``, exactly (one weight is then a binomial)."""
    divisor = int(np.gcd.reduce(w))
    if divisor == 1:
        return w, threshold
    return w // divisor, float(math.ceil(threshold / divisor))


def _plan(w: np.ndarray, m: np.ndarray, q: float) -> tuple[np.ndarray, int]:
    """The components enumerated and the grain of the lattice of the others: grain 1 when
    they fit in :data:`_MAX_CELLS` cells; else a coarser lattice for them, with the heavy
    ones still enumerated when they take at most :data:`_HEAVY_WITH_COARSE` values, and
    laid on the coarse lattice too when they take more."""
    if q in (0.0, 1.0):
        return np.zeros(w.size, dtype=bool), 1
    heavy = _heavy_components(w, m, q)
    grain = lattice_grain(weights=w[~heavy], multiplicities=m[~heavy]) if (~heavy).any() else 1
    if grain == 1 or not heavy.any():
        return heavy, grain
    if _heavy_value_count(w[heavy], m[heavy], q) <= _HEAVY_WITH_COARSE:
        return heavy, grain
    return np.zeros(w.size, dtype=bool), lattice_grain(weights=w, multiplicities=m)


def _heavy_value_count(w: np.ndarray, m: np.ndarray, q: float) -> int:
    """How many values :func:`_heavy_values` enumerates for these components."""
    count = 1
    for mi in m:
        k_lo, k_hi = _window(int(mi) * q, float(mi), 0, int(mi))
        count *= k_hi - k_lo + 1
    return count


def _coarse_sf(
    w: np.ndarray, m: np.ndarray, heavy: np.ndarray, *, q: float, threshold: float, grain: int
) -> float:
    """An upper bound on ``P(sum_w w * Binomial(m_w, q) >= threshold)`` within
    :data:`_MAX_CELLS` cells. Of the components not enumerated (``heavy``), the smallest
    weights stay exact as long as the cells allow (``F``); the others are rounded to the
    nearest multiple of ``grain``, ``w = grain * r + e`` with ``|e| <= grain / 2``: the sum
    is ``F + grain * C + E``, ``C = sum r * Bern(q)`` on its own lattice and ``E = sum e *
    Bern(q)`` the rounding error. For each ``delta``,
    ``P(S >= t) <= P(H + F + grain * C >= t - delta) + P(E >= delta)``, and Hoeffding's
    inequality gives ``P(E >= delta) <= eta`` for ``delta = q sum e + sqrt(sum e^2
    ln(1/eta) / 2)``; the smallest bound over :data:`_ROUNDING_SLACK` is returned. ``H``,
    the heavy components, is enumerated (:func:`_heavy_values`)."""
    light = ~heavy
    order = np.argsort(w[light], kind="stable")
    wl, ml = w[light][order], m[light][order]
    nearest = np.rint(wl / grain).astype(np.int64)
    rounded, merged = _merged(nearest, ml)
    spare = _MAX_CELLS - _component_cells(rounded, merged).sum()
    # keeping weight w exact costs its cells less its rounded ones (weights ascending)
    exact = np.cumsum(_component_cells(wl, ml) - _component_cells(nearest, ml)) <= spare
    fine = weighted_bernoulli_pmf(weights=wl[exact], multiplicities=ml[exact], q=q)
    kept, merged = _merged(nearest[~exact], ml[~exact])
    coarse = weighted_bernoulli_pmf(weights=kept, multiplicities=merged, q=q)
    error = wl[~exact] - grain * nearest[~exact]
    spread = float((error.astype(np.float64) ** 2 * ml[~exact]).sum())
    if spread == 0.0:
        deltas, slack = np.zeros(1), np.zeros(1)
    else:
        mean = q * float((error * ml[~exact]).sum())
        slack = _ROUNDING_SLACK
        deltas = mean + np.sqrt(spread * np.log(1.0 / slack) / 2.0)
    values, probabilities, dropped = (
        _heavy_values(w[heavy], m[heavy], q) if heavy.any() else (np.zeros(1), np.ones(1), 0.0)
    )
    points = threshold - values[:, None] - deltas[None, :]
    tails = _lattice_sum_tails(fine, coarse, grain, points.ravel()).reshape(points.shape)
    bounds = probabilities @ tails + slack
    return min(1.0, float(bounds.min()) + fine.dropped + coarse.dropped + dropped)


def _merged(weights: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ascending ``weights`` with equal ones merged (their multiplicities add), as runs of
    one value, without a sort; weight 0 (a weight rounded to nothing) adds nothing to the
    sum and is left out."""
    keep = weights > 0
    weights, m = weights[keep], m[keep]
    if weights.size == 0:
        return weights, m
    starts = np.flatnonzero(np.concatenate([[True], weights[1:] != weights[:-1]]))
    return weights[starts], np.add.reduceat(m, starts).astype(np.int64)


def _lattice_sum_tails(
    fine: LatticePmf, coarse: LatticePmf, grain: int, thresholds: np.ndarray
) -> np.ndarray:
    """``P(F + grain * C >= t)`` for each ``t``: ``sum_k P(C = k) P(F >= t - grain k)``, in
    blocks of thresholds (at most about 2^22 products at a time)."""
    upper = np.concatenate([np.cumsum(fine.pmf[::-1])[::-1], [0.0]])
    values = grain * (coarse.offset + np.arange(coarse.pmf.size, dtype=np.int64))
    out = np.empty(thresholds.size)
    rows = max(1, (1 << 22) // max(1, values.size))
    for first in range(0, thresholds.size, rows):
        block = thresholds[first : first + rows, None]
        start = np.ceil(block - values[None, :]).astype(np.int64) - fine.offset
        tails = upper[np.clip(start, 0, fine.pmf.size)]
        tails[start <= 0] = 1.0
        out[first : first + rows] = tails @ coarse.pmf
    return out


def _heavy_values(
    weights: np.ndarray, multiplicities: np.ndarray, q: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """The values ``sum_w w * Binomial(m_w, q)`` takes over the heavy weights, their
    probabilities and the mass left out of the windows (:func:`_window`)."""
    values = np.zeros(1, dtype=np.int64)
    probabilities = np.ones(1)
    dropped = 0.0
    for wi, mi in zip(weights, multiplicities, strict=True):
        k_lo, k_hi = _window(mi * q, float(mi), 0, int(mi))
        ks = np.arange(k_lo, k_hi + 1)
        dropped += _TOL if (k_lo > 0 or k_hi < mi) else 0.0
        values = (values[:, None] + int(wi) * ks[None, :]).ravel()
        probabilities = (probabilities[:, None] * stats.binom.pmf(ks, int(mi), q)[None, :]).ravel()
    return values, probabilities, dropped
