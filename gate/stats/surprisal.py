"""Statistics of the surprisal attack on a released model.

Stomakhin, F. (2025). *Framework for Privacy-Preserving Synthesis of Textual Data*, §6:
surprisal ``S(x) = -Σ_t ln P(x_{t+1} | x_{<=t}; M)`` (§6.2), the median difference and the
threshold likelihood ratio ``LR(τ) = P(S > τ | excluded) / P(S > τ | included)`` (§6.3).
See docs/methods.md §8.
"""

from __future__ import annotations

import numpy as np

from gate.stats._validate import StatsError


def _values(name: str, values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise StatsError(f"{name} must be a non-empty 1-d array; found shape {v.shape}")
    if not np.isfinite(v).all():
        raise StatsError(f"{name} must be finite; found {v[~np.isfinite(v)][:3].tolist()}")
    return v


def threshold_likelihood_ratio(
    *, included: np.ndarray, excluded: np.ndarray, thresholds: np.ndarray
) -> np.ndarray:
    """``LR(τ) = P(S > τ | excluded) / P(S > τ | included)`` for each τ (empirical shares).

    ``inf`` where no included value exceeds τ but an excluded one does; ``nan`` where
    neither does (Stomakhin 2025, §6.3, Figure 16).
    """
    inc = np.sort(_values("included", included))
    exc = np.sort(_values("excluded", excluded))
    tau = np.asarray(thresholds, dtype=np.float64)
    above_inc = (inc.size - np.searchsorted(inc, tau, side="right")) / inc.size
    above_exc = (exc.size - np.searchsorted(exc, tau, side="right")) / exc.size
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(
            above_inc > 0,
            above_exc / np.where(above_inc > 0, above_inc, 1.0),
            np.where(above_exc > 0, np.inf, np.nan),
        )


def median_difference(*, included: np.ndarray, excluded: np.ndarray) -> float:
    """Median surprisal of excluded minus included (positive: members are less surprising)."""
    return float(
        np.median(_values("excluded", excluded)) - np.median(_values("included", included))
    )
