"""Argument validation for the statistics: errors name the parameter, range and value."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


class StatsError(ValueError):
    """An estimator's argument outside its domain. The message names the parameter, the
    allowed range and the value found: numbers and shapes, never a record's text."""


def is_number(value: object) -> bool:
    """A real number; not a boolean (``True`` is 1 to Python, never a level or a rate)."""
    return isinstance(value, int | float | np.floating | np.integer) and not isinstance(
        value, bool | np.bool_
    )


def check_probability(
    name: str, value: float, *, open_low: bool = False, open_high: bool = False
) -> float:
    """Require ``value`` in [0, 1], with either end open on request."""
    low, high = ("(" if open_low else "["), (")" if open_high else "]")
    ok = is_number(value) and not math.isnan(value)
    if ok:
        ok = (value > 0 if open_low else value >= 0) and (value < 1 if open_high else value <= 1)
    if not ok:
        raise StatsError(f"{name} must be in {low}0, 1{high}; found {value!r}")
    return float(value)


def check_count(name: str, value: Any, *, minimum: int = 0, maximum: int | None = None) -> int:
    """Require an integer count in [minimum, maximum]."""
    is_int = isinstance(value, int | np.integer) and not isinstance(value, bool)
    if not is_int or value < minimum or (maximum is not None and value > maximum):
        upper = "inf" if maximum is None else str(maximum)
        raise StatsError(f"{name} must be an integer in [{minimum}, {upper}]; found {value!r}")
    return int(value)


def check_nonnegative(name: str, value: float, *, allow_inf: bool = False) -> float:
    """Require ``value`` in [0, inf), or [0, inf] with ``allow_inf``."""
    ok = is_number(value) and not math.isnan(value)
    if ok:
        ok = value >= 0 and (allow_inf or math.isfinite(value))
    if not ok:
        upper = "inf]" if allow_inf else "inf)"
        raise StatsError(f"{name} must be in [0, {upper}; found {value!r}")
    return float(value)


def check_finite(name: str, value: float) -> float:
    """Require a finite number."""
    if not (is_number(value) and math.isfinite(value)):
        raise StatsError(f"{name} must be a finite number; found {value!r}")
    return float(value)


def check_epsilons(epsilon: Any) -> np.ndarray:
    """ε, a number or an array of numbers, each in [0, inf], as float64 (a review: the
    string "1" was read as 1, "a" reached NumPy's own error)."""
    array = np.asarray(epsilon)
    numeric = array.dtype != bool and (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    )
    if not numeric or np.isnan(array).any() or (array < 0).any():
        raise StatsError(f"epsilon must be in [0, inf]; found {epsilon!r}")
    return array.astype(np.float64)


MIN_ALPHA = 1e-12  # the exact tails carry an absolute error of up to ~1e-15


def check_alpha(alpha: float) -> float:
    """Significance levels live in [MIN_ALPHA, 1): below, the exact tails' bounded error
    (:mod:`gate.stats.weighted_tail`) is no longer negligible against the level."""
    value = check_probability("alpha", alpha, open_low=True, open_high=True)
    if value < MIN_ALPHA:
        raise StatsError(
            f"alpha must be in [{MIN_ALPHA:g}, 1) (the exact tails' error is ~1e-15); "
            f"found {alpha!r}"
        )
    return value


def split_alpha(alpha: float, *, parts: int, split: str) -> float:
    """``alpha / parts``, the level of each of ``parts`` statements that share ``alpha``
    (Bonferroni), checked as a level: the error names the split (``split``: what the
    parts are) and the smallest ``alpha`` it allows, not only a level never passed."""
    check_alpha(alpha)
    level = alpha / max(1, parts)
    if level < MIN_ALPHA:
        raise StatsError(
            f"alpha / {parts} {split} = {level:g} is below the smallest level, "
            f"{MIN_ALPHA:g}; found alpha = {alpha!r}, needs >= {MIN_ALPHA * parts:g}"
        )
    return level


def check_weights(weights: Any, multiplicities: Any) -> tuple[np.ndarray, np.ndarray]:
    """Distinct positive integer weights and their multiplicities (>= 1), 1-d, one length."""
    w = check_integers("weights", weights)
    m = check_integers("multiplicities", multiplicities)
    if w.shape != m.shape or w.ndim != 1:
        raise StatsError(
            f"weights and multiplicities must be 1-d arrays of one length; found shapes "
            f"{w.shape} and {m.shape}"
        )
    if w.size and (w.min() < 1 or m.min() < 1):
        raise StatsError(
            f"weights and multiplicities must be >= 1; found min weight {w.min()}, "
            f"min multiplicity {m.min()}"
        )
    return w, m


def check_integers(name: str, values: Any) -> np.ndarray:
    """``values`` as int64, refusing fractions (an int64 cast would truncate 1.9 to 1)."""
    array = np.asarray(values)
    if array.dtype == bool or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise StatsError(f"{name} must be integers; found dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.floating):
        flat = array.ravel()
        fractional = np.flatnonzero(~np.isfinite(flat) | (flat != np.round(flat)))
        if fractional.size:
            raise StatsError(
                f"{name} must be integers; found {flat[fractional[0]].item()!r} at position "
                f"{fractional[0]}"
            )
    return array.astype(np.int64)


def check_eta(eta: float, *, open_low: bool = False) -> float:
    """Require a RIP level η in [0, 0.5), or (0, 0.5) with ``open_low`` (Definition 2:
    at 0.5 the adversary guesses at chance)."""
    ok = is_number(eta) and not math.isnan(eta)
    ok = ok and (eta > 0 if open_low else eta >= 0) and eta < 0.5
    if not ok:
        low = "(" if open_low else "["
        raise StatsError(f"eta must be in {low}0, 0.5); found {eta!r}")
    return float(eta)


def check_labels(is_train: Any) -> np.ndarray:
    """Boolean membership labels (booleans, or 0/1)."""
    y = np.asarray(is_train)
    if y.dtype != bool:
        if not np.isin(y, (0, 1)).all():
            found = y[~np.isin(y, (0, 1))].ravel()[:1].tolist()[0]
            raise StatsError(f"is_train must hold booleans (or 0/1); found {found!r}")
        y = y.astype(bool)
    return y


def check_scores(scores: Any, is_train: Any) -> tuple[np.ndarray, np.ndarray]:
    """1-d finite float scores and boolean membership labels of one length."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(is_train)
    if s.ndim != 1 or s.shape != y.shape:
        raise StatsError(
            f"scores and is_train must be 1-d of one length; found {s.shape}, {y.shape}"
        )
    y = check_labels(y)
    bad = np.flatnonzero(~np.isfinite(s))
    if bad.size:  # ±inf ties would not group (inf - inf is NaN); NaN has no order
        raise StatsError(
            f"scores must be finite; found {s[bad[0]]} at position {bad[0]} ({bad.size} non-finite)"
        )
    return s, y
