"""Re-identification privacy (RIP).

*Provable Re-Identification Privacy* (anonymous conference submission, under review):
Definition 1 (§3.3), Theorem 4 (§3.4), Theorem 7, Corollary 8 and Algorithm 1 (§4);
see docs/methods.md §5.

η-RIP (Definition 1, k = n/2): no adversary identifies membership with accuracy above
1/2 + η. Pure functions: the η↔ε conversions (Theorem 4, and its (ε, δ) form), the
empirical η̂ from a membership classifier, and the noise of Corollary 8 and Algorithm 1
(the caller passes the Generator).

The noise follows Theorem 7, which both are derived from: X has density proportional to
``exp(-‖x‖/(cσ))`` on R^d, so ``X = r·U`` with ``U`` uniform on the norm's unit sphere and
the radius ``r = ‖X‖ ~ Gamma(d, cσ)`` (its density is proportional to
``r^(d-1) exp(-r/(cσ))``). Algorithm 1 and Corollary 8 as printed draw ``r`` from a Laplace
law, which has that density only for d = 1: in d dimensions such noise puts about
``r/√d`` along any one direction, and a user whose influence is one direction is then
identified far above ``1/2 + η`` (``tests/test_stats_remediation.py`` simulates it: accuracy
0.95 for a claimed η = 0.3 at the reference generator's 1.4 M parameters).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from gate.stats._validate import (
    StatsError,
    check_alpha,
    check_count,
    check_eta,
    check_nonnegative,
    check_probability,
    check_scores,
)
from gate.stats.binomial import clopper_pearson

COR8_CONSTANT = 6.16  # Corollary 8 (numerically optimised Thm 7 with M = 2)
ALG1_CONSTANT = 7.5  # Algorithm 1 / Theorem 7


def eta_from_epsilon(*, epsilon: float) -> float:
    """ε-DP implies η-RIP with ``η = 1/(1 + e^-ε) - 1/2``, tight (Theorem 4)."""
    check_nonnegative("epsilon", epsilon, allow_inf=True)
    if math.isinf(epsilon):
        return 0.5
    return 1.0 / (1.0 + math.exp(-epsilon)) - 0.5


def eta_from_epsilon_delta(*, epsilon: float, delta: float) -> float:
    """(ε, δ)-DP implies η-RIP with ``η = (e^ε - 1 + 2δ) / (2(e^ε + 1))``, i.e. Theorem 4's
    η plus ``δ/(e^ε + 1)``, capped at 1/2; tight.

    A membership test of an (ε, δ)-DP mechanism has ``TPR ≤ e^ε·FPR + δ`` and
    ``1 - FPR ≤ e^ε·(1 - TPR) + δ`` (Kairouz, Oh and Viswanath, 2015, *The Composition
    Theorem for Differential Privacy*, Theorem 2.1); the two lines meet at
    ``FPR = (1 - δ)/(e^ε + 1)``, where the accuracy on a balanced sample,
    ``(1 + TPR - FPR)/2``, is largest. The mechanism that reveals membership with
    probability δ and otherwise answers by ε-randomised response attains it. δ = 0 is
    :func:`eta_from_epsilon`.
    """
    check_nonnegative("epsilon", epsilon, allow_inf=True)
    check_probability("delta", delta)
    if math.isinf(epsilon):
        return 0.5
    return min(0.5, eta_from_epsilon(epsilon=epsilon) + delta / (math.exp(epsilon) + 1.0))


def epsilon_from_eta(*, eta: float) -> float:
    """Inverse of :func:`eta_from_epsilon`: ``ε = ln((1/2 + η)/(1/2 - η))``."""
    check_eta(eta)
    return math.log((0.5 + eta) / (0.5 - eta))


class RipEstimate(NamedTuple):
    """η̂ = accuracy - 1/2 on a balanced evaluation sample, with the one-sided lower
    Clopper-Pearson bound on accuracy (minus 1/2, floored at 0)."""

    eta: float
    eta_lower: float
    correct: int
    trials: int
    alpha: float


def rip_eta_estimate(*, correct: int, trials: int, alpha: float = 0.05) -> RipEstimate:
    """Empirical η from a membership classifier's correct guesses on a balanced sample."""
    check_count("trials", trials, minimum=1)
    check_count("correct", correct, maximum=trials)
    check_alpha(alpha)
    lower = clopper_pearson(successes=correct, trials=trials, alpha=alpha, side="lower").lower
    return RipEstimate(
        eta=correct / trials - 0.5,
        eta_lower=max(0.0, lower - 0.5),
        correct=correct,
        trials=trials,
        alpha=alpha,
    )


def rip_eta_from_scores(
    *, scores: np.ndarray, is_train: np.ndarray, rng: np.random.Generator, alpha: float = 0.05
) -> RipEstimate:
    """η̂ of the best threshold classifier on the scores, chosen without spending alpha.

    A balanced sample (equal train and holdout counts, drawn at random) is split in half:
    the threshold that maximises accuracy on one half is applied to the other, whose
    accuracy gives η̂ and its bound.
    """
    check_alpha(alpha)
    s, y = check_scores(scores, is_train)
    train_idx, hold_idx = np.nonzero(y)[0], np.nonzero(~y)[0]
    m = min(train_idx.size, hold_idx.size)
    if m < 2:
        raise StatsError(
            f"need at least 2 train and 2 holdout records; found {train_idx.size}, {hold_idx.size}"
        )
    train_idx = rng.choice(train_idx, size=m, replace=False)
    hold_idx = rng.choice(hold_idx, size=m, replace=False)
    half = m // 2
    choose = np.r_[train_idx[:half], hold_idx[:half]]
    evaluate = np.r_[train_idx[half:], hold_idx[half:]]
    threshold = _best_threshold(s[choose], y[choose])
    predicted = s[evaluate] > threshold
    correct = int((predicted == y[evaluate]).sum())
    return rip_eta_estimate(correct=correct, trials=evaluate.size, alpha=alpha)


def rip_eta_ceiling(*, train: int, holdout: int, alpha: float = 0.05) -> float:
    """The largest η̂ lower bound :func:`rip_eta_from_scores` can report with ``train`` and
    ``holdout`` scored records: every guess correct on its evaluation half, 2(m - ⌊m/2⌋)
    trials with m = min(train, holdout), i.e. max(0, α^(1/trials) - 1/2). A threshold on
    η̂ at or above it can never fail."""
    check_count("train", train)
    check_count("holdout", holdout)
    m = min(train, holdout)
    if m < 2:
        return 0.0
    trials = 2 * (m - m // 2)
    return rip_eta_estimate(correct=trials, trials=trials, alpha=alpha).eta_lower


def _best_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    """Threshold ``t`` maximising accuracy of ``score > t``."""
    order = np.argsort(scores, kind="stable")
    s, y = scores[order], labels[order]
    cuts = np.r_[np.nonzero(np.diff(s))[0], s.size - 1]  # last index of each distinct value
    # accuracy of "score > s[j]" = holdout at or below + train above
    hold_below = np.cumsum(~y)[cuts]
    train_above = y.sum() - np.cumsum(y)[cuts]
    correct = hold_below + train_above
    best = int(np.argmax(np.r_[y.sum(), correct]))  # index 0: threshold below every score
    return -np.inf if best == 0 else float(s[cuts[best - 1]])


def cor8_noise(*, sigma: np.ndarray, eta: float, rng: np.random.Generator) -> np.ndarray:
    """Noise ``X = r U`` of Corollary 8 for η-RIP: Theorem 7 with M = 2 in the norm
    ``‖x‖_{σ,2} = sqrt(Σ x_i²/(d σ_i²))``.

    ``σ_i² >= Var(θ_i)`` over random half-subsets; ``Y_i ~ N(0, σ_i²)``,
    ``U = Y/‖Y‖_{σ,2}`` (uniform on that norm's unit sphere), and
    ``r ~ Gamma(d, scale (6.16/η)²)``, so that X has density proportional to
    ``exp(-‖x‖_{σ,2}/(6.16/η)²)`` as the theorem requires (the corollary's Laplace radius
    has it only for d = 1; see the module). Returns X; release ``θ + X``.
    """
    check_eta(eta, open_low=True)
    sd = np.asarray(sigma, dtype=np.float64)
    if sd.ndim != 1 or sd.size == 0:
        raise StatsError(f"sigma must be a non-empty 1-d array; found shape {sd.shape}")
    bad = np.flatnonzero(~(np.isfinite(sd) & (sd > 0)))
    if bad.size:
        raise StatsError(
            f"sigma must hold positive finite numbers; found {sd[bad[0]].item()!r} at position "
            f"{bad[0]} ({bad.size} such)"
        )
    y = rng.normal(0.0, sd)
    norm = math.sqrt(float(np.sum(y**2 / (sd.size * sd**2))))
    r = rng.gamma(shape=sd.size, scale=cor8_scale(eta=eta))
    return r * y / norm


def cor8_scale(*, eta: float) -> float:
    """Scale ``(6.16/η)²`` of Corollary 8's radius law (in ‖·‖_{σ,2} units)."""
    check_eta(eta, open_low=True)
    return (COR8_CONSTANT / eta) ** 2


def isotropic_scale(*, sigma: float, eta: float) -> float:
    """Scale ``(7.5/η)² σ`` of Algorithm 1's radius law (Theorem 7, M = 2, Euclidean)."""
    check_nonnegative("sigma", sigma)
    check_eta(eta, open_low=True)
    return (ALG1_CONSTANT / eta) ** 2 * sigma


def replica_sigma(replicas: np.ndarray) -> float:
    """Algorithm 1's ``σ² = Σ_b ‖θ^(b) - θ̄‖² / (B - 1)``, returned as σ."""
    theta = _replica_matrix(replicas)
    centred = theta - theta.mean(axis=0)
    return math.sqrt(float((centred**2).sum()) / (theta.shape[0] - 1))


def _replica_matrix(replicas: np.ndarray) -> np.ndarray:
    """The replicas' parameters as a (B, d) float array.

    Raises:
        StatsError: fewer than 2 replicas, or a parameter that is not finite (a replica
            that diverged bounds no spread; the noise would be scaled by the others').
    """
    theta = np.asarray(replicas, dtype=np.float64)
    if theta.ndim != 2 or theta.shape[0] < 2:
        raise StatsError(f"replicas must be a (B >= 2, d) array; found shape {theta.shape}")
    bad = np.argwhere(~np.isfinite(theta))
    if bad.size:
        b, i = (int(v) for v in bad[0])
        raise StatsError(
            f"replicas must be finite; found {theta[b, i]} in replica {b}, coordinate {i} "
            f"({len(bad)} such values): a replica that diverged bounds no spread"
        )
    return theta


def isotropic_noise(
    *, dimension: int, sigma: float, eta: float, rng: np.random.Generator
) -> np.ndarray:
    """Noise of Algorithm 1 for η-RIP: ``r ~ Gamma(d, (7.5/η)² σ)`` times ``U`` uniform on
    the unit sphere, the density ``exp(-‖x‖/((7.5/η)² σ))`` of Theorem 7 (the algorithm's
    Laplace radius has it only for d = 1; see the module).

    Raises:
        ValueError: ``sigma`` is 0 (no noise at all: a spread of 0 measured on a few
            replicas is no bound on the spread), or an argument is out of range.
    """
    check_count("dimension", dimension, minimum=1)
    scale = isotropic_scale(sigma=sigma, eta=eta)
    if not sigma > 0:
        raise StatsError("sigma must be > 0 (a zero spread would add no noise); found 0")
    u = rng.normal(size=dimension)
    u /= np.linalg.norm(u)
    return rng.gamma(shape=dimension, scale=scale) * u


def replica_coordinate_sigma(replicas: np.ndarray, *, floor: float = 1e-12) -> np.ndarray:
    """Corollary 8's per-coordinate ``σ_i`` from B models on random halves:
    ``σ_i² = Σ_b (θ_i^(b) − θ̄_i)² / (B − 1)``. A coordinate that no replica moved (an
    embedding row of a byte only users outside every replica wrote) is no evidence that it
    cannot move: it gets the median of the other coordinates' σ_i, and every σ_i at least
    ``floor``.

    Raises:
        ValueError: no coordinate moved in any replica (nothing to scale the noise by).
    """
    theta = _replica_matrix(replicas)
    check_nonnegative("floor", floor)
    sigma = theta.std(axis=0, ddof=1)
    moved = sigma > 0
    if not moved.any():
        raise StatsError("no coordinate differs between the replicas: their spread is 0")
    sigma = np.where(moved, sigma, float(np.median(sigma[moved])))
    return np.maximum(sigma, floor)
