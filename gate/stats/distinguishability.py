"""Empirical ε of the candidate-set distinguishability game.

Li, W., Grivet Sébert, A., Xu, Q., McIver, A., Dras, M. (2026). *Beyond Theoretical Bounds:
Empirical Privacy Loss Calibration for Text Rewriting Under Local Differential Privacy*
(TeDA), arXiv:2603.22968: the game of §3.1-3.3, the estimator of App. A (eqs. 10-12) and
App. D (Algorithm 1). See docs/methods.md §7.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from gate.stats._validate import StatsError, check_count, check_probability
from gate.stats.binomial import clopper_pearson

# |λ| of transition sampling beyond which λ times a set's summed cosine distance (at most
# 2 per candidate) could overflow to -inf and the draw would repeat a taken record
MAX_TRANSITION_LAMBDA = 1e6

# Elements of the (trials x records) working matrices per block of trials.
_BLOCK_ELEMENTS = 1 << 22


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


def transition_candidate_sets(
    *,
    embeddings: np.ndarray | None,
    n: int,
    candidates: int,
    trials: int,
    transition_lambda: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Disjoint candidate sets by probabilistic transition sampling (TeDA, App. C, eqs. 13-17).

    ``v₁`` is uniform over the records not yet used; each next candidate ``x`` is drawn
    with probability ``∝ exp(λ L(x))``, ``L(x) = Σ_{s∈S} ln P(x|s)`` and
    ``P(x|s) = softmax_x(-d(x, s))`` with ``d`` the cosine distance. The softmax normaliser
    depends on ``s`` only, so ``λ L(x) = -λ Σ_s d(x, s) + const`` and the draw is a
    Gumbel-max over that score. λ < 0 favours diverse sets, λ = 0 is uniform, λ > 0
    similar ones.

    Sets never share a record: a release is one draw of the rewriting mechanism, so a
    record (and its rewrite) in two trials would make their outcomes dependent and the
    binomial interval of the estimator too narrow. With disjoint sets and rewrites that do
    not depend on their sources, the trials are independent Bernoulli(1/k). Hence at most
    ``n // k`` sets; fewer are returned when the pool runs out. Sets are drawn in blocks
    and a set that reuses a record of an earlier set of its block is dropped (the
    choice depends on the records' embeddings only, never on the rewrites).

    Args:
        embeddings: (n, dim) unit-norm rows (cosine similarity = dot product); unused
            when λ = 0.
        n: records to draw from (>= ``candidates``).
        candidates: k >= 2.
        trials: T >= 1, the number of sets wanted.
        transition_lambda: λ.
        rng: randomness of every draw.

    Returns:
        (min(T, available), k) record indices; column 0 is ``v₁``, in drawing order.
    """
    check_count("candidates", candidates, minimum=2)
    check_count("trials", trials, minimum=1)
    check_count("n", n, minimum=candidates)
    if not abs(transition_lambda) <= MAX_TRANSITION_LAMBDA:
        raise StatsError(
            f"transition_lambda must lie within +-{MAX_TRANSITION_LAMBDA:g}; found "
            f"{transition_lambda!r}"
        )
    wanted = min(trials, n // candidates)
    if transition_lambda == 0:
        return rng.permutation(n)[: wanted * candidates].reshape(wanted, candidates)
    if embeddings is None or embeddings.shape[0] != n:
        raise StatsError(
            f"embeddings must have {n} rows for transition_lambda != 0; found "
            f"{None if embeddings is None else embeddings.shape}"
        )
    e = np.ascontiguousarray(embeddings, dtype=np.float32)
    used = np.zeros(n, dtype=bool)
    kept: list[np.ndarray] = []
    have = 0
    while have < wanted:
        available = np.flatnonzero(~used)
        if available.size < candidates:
            break
        block = max(1, min(wanted - have, available.size // (4 * candidates), _BLOCK_ELEMENTS // n))
        rows = np.arange(block)
        chosen = available[rng.integers(available.size, size=block)]
        sets = np.empty((block, candidates), dtype=np.int64)
        sets[:, 0] = chosen
        score = np.zeros((block, n))  # Σ_s -d(x, s) over the set so far
        taken = np.broadcast_to(used, (block, n)).copy()
        taken[rows, chosen] = True
        for t in range(1, candidates):
            score += (e[chosen] @ e.T).astype(np.float64) - 1.0
            logits = transition_lambda * score + rng.gumbel(size=(block, n))
            logits[taken] = -np.inf
            chosen = np.argmax(logits, axis=1)
            taken[rows, chosen] = True
            sets[:, t] = chosen
        # keep the sets none of whose records an earlier set of the block drew (the first
        # set is always kept, so every block makes progress)
        flat = sets.ravel()
        first = np.full(n, flat.size)
        np.minimum.at(first, flat, np.arange(flat.size))
        owner = first[sets] // candidates
        sets = sets[(owner == np.arange(block)[:, None]).all(axis=1)][: wanted - have]
        used[sets.ravel()] = True
        kept.append(sets)
        have += sets.shape[0]
    return np.concatenate(kept) if kept else np.empty((0, candidates), dtype=np.int64)


def pick_candidates(similarity: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The attack's pick per trial: the candidate of largest similarity (rows of a
    (T, k) array), ties broken at random, never by position."""
    s = np.asarray(similarity, dtype=np.float64)
    if s.ndim != 2 or np.isnan(s).any():
        raise StatsError(f"similarity must be a (trials, k) array without NaN; found {s.shape}")
    noise = rng.random(s.shape)
    best = s == s.max(axis=1, keepdims=True)
    return np.argmax(np.where(best, noise, -1.0), axis=1)
