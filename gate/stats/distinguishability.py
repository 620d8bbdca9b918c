"""Empirical ε of the candidate-set distinguishability game.

Li, W., Grivet Sébert, A., Xu, Q., McIver, A., Dras, M. (2026). *Beyond Theoretical Bounds:
Empirical Privacy Loss Calibration for Text Rewriting Under Local Differential Privacy*
(TeDA), arXiv:2603.22968: the game of §3.1-3.3, the estimator of App. A (eqs. 10-12) and
App. D (Algorithm 1). See docs/methods.md §7.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from gate.stats._validate import check_count, check_probability
from gate.stats.binomial import clopper_pearson


class DistinguishabilityResult(NamedTuple):
    successes: int
    trials: int
    candidates: int
    success_rate: float
    success_lower: float  # p̂₀, lower end of the two-sided Clopper-Pearson interval
    epsilon_emp: float
    alpha_conf: float


def distinguishability_epsilon(
    *, successes: int, trials: int, candidates: int, alpha_conf: float = 0.05, delta: float = 0.0
) -> DistinguishabilityResult:
    """``ε_emp = ln((k-1)(p̂₀ - δ)/(1 - p̂₀))``, floored at 0 (TeDA, App. A eq. (11)).

    ``p̂₀ = Beta.ppf(alpha_conf/2, K, T-K+1)`` is the lower end of the two-sided
    Clopper-Pearson interval at level ``alpha_conf``. With k = 2, T = K = 10⁴ and
    ``alpha_conf`` = 0.01 the ceiling is ≈ 7.54, the ceiling reported in TeDA §4.2.

    Args:
        successes: K, trials in which the attack picked the true source.
        trials: T >= 1.
        candidates: k >= 2, candidate-set size.
        alpha_conf: two-sided level of the interval, in (0, 1).
        delta: δ, in [0, 1).
    """
    check_count("candidates", candidates, minimum=2)
    check_probability("alpha_conf", alpha_conf, open_low=True, open_high=True)
    check_probability("delta", delta, open_high=True)
    interval = clopper_pearson(successes=successes, trials=trials, alpha=alpha_conf)
    p0 = interval.lower
    if p0 - delta <= 0:
        epsilon = 0.0
    elif p0 >= 1.0:
        epsilon = math.inf
    else:
        epsilon = max(0.0, math.log((candidates - 1) * (p0 - delta) / (1.0 - p0)))
    return DistinguishabilityResult(
        successes=successes,
        trials=trials,
        candidates=candidates,
        success_rate=successes / trials,
        success_lower=p0,
        epsilon_emp=epsilon,
        alpha_conf=alpha_conf,
    )
