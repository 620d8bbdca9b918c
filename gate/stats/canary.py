"""Membership signals of canaries from a synthetic release alone (Canary's Echo).

Meeus et al. (2025), *The Canary's Echo: Auditing Privacy Risks of LLM-Generated Synthetic
Text*, §3.1.2 and Appendix A: the attacker sees only the release S and the canary. Signals:

* a 2-gram model of S with Laplace smoothing,
  ``P(w_j | w_{j-1}) = (C(w_{j-1}, w_j) + 1) / (C(w_{j-1}) + V)``; the signal is
  ``log P(s) = sum_{j>=2} log P(w_j | w_{j-1})`` (§3.1.2, "n-gram model");
* the mean of the top-k similarities of the canary to the records of S (Algorithm 2;
  Jaccard similarity of token sets here, cosine of embeddings in the caller);
* RMIA: ``beta = alpha_target / mean_m alpha_ref_m`` over reference releases, in log space.

Canaries are made in-distribution prefix + suffix whose perplexity under a base LM lies in
``[0.9, 1.1] * P_target`` (§3.2); :func:`search_temperature` is the search on the sampling
temperature. Pure numpy/scipy, no I/O. See docs/methods.md §8.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy import sparse
from scipy.special import logsumexp

from gate.stats._validate import StatsError, check_count, check_probability


def _check_offsets(name: str, ids: np.ndarray, starts: np.ndarray) -> None:
    if starts.ndim != 1 or starts.size < 1 or starts[0] != 0 or starts[-1] != ids.size:
        raise StatsError(
            f"{name}: starts must run from 0 to len(ids) = {ids.size}; found "
            f"{starts[:1].tolist()}..{starts[-1:].tolist()}"
        )
    if np.any(np.diff(starts) < 0):
        at = int(np.flatnonzero(np.diff(starts) < 0)[0])
        raise StatsError(
            f"{name}: starts must be non-decreasing; found {int(starts[at])} then "
            f"{int(starts[at + 1])} at positions {at}, {at + 1}"
        )


def _bigram_keys(
    ids: np.ndarray, starts: np.ndarray, vocabulary: int
) -> tuple[np.ndarray, np.ndarray]:
    """Keys ``prev * vocabulary + next`` of the bigrams inside each document, and the
    document of each bigram (a bigram never spans two documents)."""
    if ids.size < 2:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    doc = np.repeat(np.arange(starts.size - 1, dtype=np.int64), np.diff(starts))
    inside = doc[1:] == doc[:-1]
    keys = ids[:-1][inside] * np.int64(vocabulary) + ids[1:][inside]
    return keys, doc[1:][inside]


def bigram_log_probabilities(
    *,
    corpus_ids: np.ndarray,
    corpus_starts: np.ndarray,
    query_ids: np.ndarray,
    query_starts: np.ndarray,
    vocabulary: int,
) -> np.ndarray:
    """Log-probability of each query sequence under the Laplace-smoothed 2-gram model of
    the corpus (Meeus et al., 2025, §3.1.2).

    ``C(a, b)`` counts the bigrams ``a b`` inside the corpus's documents, ``C(a)`` the
    bigrams that start with ``a``; ``V = vocabulary``. A query of fewer than two tokens has
    log-probability 0 (the product over j >= 2 is empty).

    Args:
        corpus_ids: token ids (0 <= id < vocabulary) of the corpus, documents concatenated.
        corpus_starts: offsets of the corpus documents (``len = n_docs + 1``).
        query_ids: token ids of the queries (same vocabulary).
        query_starts: offsets of the queries.
        vocabulary: V, the number of token types (of the corpus and the queries).

    Returns:
        float64 array, one log-probability per query.
    """
    vocabulary = check_count("vocabulary", vocabulary, minimum=1)
    corpus_ids = np.asarray(corpus_ids, dtype=np.int64)
    query_ids = np.asarray(query_ids, dtype=np.int64)
    corpus_starts = np.asarray(corpus_starts, dtype=np.int64)
    query_starts = np.asarray(query_starts, dtype=np.int64)
    _check_offsets("corpus", corpus_ids, corpus_starts)
    _check_offsets("queries", query_ids, query_starts)
    for name, ids in (("corpus_ids", corpus_ids), ("query_ids", query_ids)):
        if ids.size and (ids.min() < 0 or ids.max() >= vocabulary):
            raise StatsError(
                f"{name} must lie in [0, {vocabulary}); found [{ids.min()}, {ids.max()}]"
            )
    keys, _ = _bigram_keys(corpus_ids, corpus_starts, vocabulary)
    pair_keys, pair_counts = np.unique(keys, return_counts=True)
    context_counts = np.bincount(keys // vocabulary, minlength=vocabulary)
    q_keys, q_doc = _bigram_keys(query_ids, query_starts, vocabulary)
    pos = np.searchsorted(pair_keys, q_keys)
    pos_ok = np.minimum(pos, max(pair_keys.size - 1, 0))
    found = (
        (pos < pair_keys.size) & (pair_keys[pos_ok] == q_keys)
        if pair_keys.size
        else np.zeros(q_keys.size, bool)
    )
    pair = np.where(found, pair_counts[pos_ok] if pair_keys.size else 0, 0)
    context = context_counts[q_keys // vocabulary]
    log_p = np.log(pair + 1.0) - np.log(context + float(vocabulary))
    return np.bincount(q_doc, weights=log_p, minlength=query_starts.size - 1)


def token_set_matrix(ids: np.ndarray, starts: np.ndarray, *, vocabulary: int) -> sparse.csr_matrix:
    """Binary document x token-type matrix (the set of tokens of each document)."""
    ids = np.asarray(ids, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    _check_offsets("documents", ids, starts)
    docs = np.repeat(np.arange(starts.size - 1, dtype=np.int64), np.diff(starts))
    matrix = sparse.csr_matrix(
        (np.ones(ids.size, dtype=np.float32), (docs, ids)),
        shape=(starts.size - 1, vocabulary),
    )
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return matrix


class TopKSimilarity(NamedTuple):
    mean: np.ndarray  # (n_queries,) mean of the top-k similarities
    best: np.ndarray  # (n_queries,) index of the most similar corpus document


def top_k_mean_jaccard(
    queries: sparse.csr_matrix, corpus: sparse.csr_matrix, *, k: int, block: int = 256
) -> TopKSimilarity:
    """Mean of the ``k`` largest Jaccard similarities of each query's token set to the
    corpus documents' token sets (Meeus et al., 2025, Algorithm 2 with SIM_Jac).

    ``|A ∩ B|`` comes from one sparse product per block of queries; documents sharing no
    token have similarity 0. With fewer than ``k`` documents the mean is over all of them.
    """
    k = check_count("k", k, minimum=1)
    if queries.shape[1] != corpus.shape[1]:
        raise StatsError(
            f"queries and corpus must share a vocabulary; found {queries.shape[1]} and "
            f"{corpus.shape[1]} token types"
        )
    n_corpus = corpus.shape[0]
    if n_corpus == 0:
        raise StatsError("the corpus is empty")
    k = min(k, n_corpus)
    q_sizes = np.asarray(queries.sum(axis=1)).ravel()
    c_sizes = np.asarray(corpus.sum(axis=1)).ravel()
    corpus_t = corpus.T.tocsc()
    means = np.empty(queries.shape[0])
    best = np.empty(queries.shape[0], dtype=np.int64)
    for start in range(0, queries.shape[0], block):
        inter = (queries[start : start + block] @ corpus_t).toarray()
        union = q_sizes[start : start + block, None] + c_sizes[None, :] - inter
        sims = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
        top = np.partition(sims, n_corpus - k, axis=1)[:, n_corpus - k :]
        means[start : start + block] = top.mean(axis=1)
        best[start : start + block] = sims.argmax(axis=1)
    return TopKSimilarity(mean=means, best=best)


def rmia_log_scores(*, target: np.ndarray, references: np.ndarray) -> np.ndarray:
    """``log beta = log alpha_target - log(mean_m alpha_ref_m)`` from log-signals (RMIA as
    in Meeus et al., 2025, Appendix A), computed with log-sum-exp.

    Args:
        target: (n,) log alpha of each canary on the target release.
        references: (M, n) log alpha on each of M >= 1 reference releases.
    """
    target = np.asarray(target, dtype=np.float64)
    references = np.asarray(references, dtype=np.float64)
    if references.ndim != 2 or references.shape[1] != target.size or references.shape[0] < 1:
        raise StatsError(
            f"references must have shape (M >= 1, {target.size}); found {references.shape}"
        )
    return target - (logsumexp(references, axis=0) - math.log(references.shape[0]))


def balanced_reference_membership(
    canaries: int, *, references: int, rng: np.random.Generator
) -> np.ndarray:
    """(references, canaries) boolean matrix: each canary is a member of exactly half of
    the reference releases (a random half, drawn independently per canary)."""
    canaries = check_count("canaries", canaries, minimum=1)
    references = check_count("references", references, minimum=2)
    if references % 2:
        raise StatsError(f"references must be even; found {references}")
    ranks = np.argsort(rng.random((references, canaries)), axis=0)
    return ranks < references // 2


def member_flags(canaries: int, *, rng: np.random.Generator, p: float = 0.5) -> np.ndarray:
    """Independent Bernoulli(p) membership of each canary (the one-run setting)."""
    canaries = check_count("canaries", canaries, minimum=1)
    p = check_probability("p", p, open_low=True, open_high=True)
    return rng.random(canaries) < p


def in_perplexity_window(
    perplexity: np.ndarray, *, target: float, tolerance: float = 0.1
) -> np.ndarray:
    """Is each perplexity within ``[(1 - tolerance) target, (1 + tolerance) target]``
    (§3.2: ``[0.9, 1.1] * P_target``)?"""
    if not target > 0:
        raise StatsError(f"target must be > 0; found {target!r}")
    check_probability("tolerance", tolerance, open_high=True)
    p = np.asarray(perplexity, dtype=np.float64)
    return (p >= (1 - tolerance) * target) & (p <= (1 + tolerance) * target)


class TemperatureSearch(NamedTuple):
    temperature: float
    perplexity: float  # the measured typical perplexity at that temperature
    evaluations: int
    hit: bool  # the typical perplexity is inside the window


def search_temperature(
    measure: Callable[[float], float],
    *,
    target: float,
    low: float = 0.25,
    high: float = 8.0,
    steps: int = 12,
    tolerance: float = 0.1,
) -> TemperatureSearch:
    """Bisection on log-temperature for a typical perplexity of ``target``.

    Sampling at a higher temperature gives higher-perplexity text under the model that
    samples it, so ``measure(temperature)`` (for example the median perplexity of a batch
    of suffixes) is increasing in expectation; the search keeps the closest temperature
    and stops as soon as the measurement is inside the window.

    Args:
        measure: temperature -> typical perplexity of text sampled at it.
        target: P_target, > 0.
        low, high: temperature range searched.
        steps: most measurements after the two ends.
        tolerance: half-width of the window, relative to the target.
    """
    if not 0 < low < high:
        raise StatsError(f"need 0 < low < high; found low={low!r}, high={high!r}")
    steps = check_count("steps", steps, minimum=1)
    best = (math.inf, low, math.nan)
    evaluations = 0

    def probe(t: float) -> float:
        nonlocal best, evaluations
        value = float(measure(t))
        evaluations += 1
        gap = abs(math.log(value / target)) if value > 0 else math.inf
        if gap < best[0]:
            best = (gap, t, value)
        return value

    def done(value: float) -> bool:
        return bool(in_perplexity_window(np.array([value]), target=target, tolerance=tolerance)[0])

    at_low = probe(low)
    if done(at_low) or at_low > target:
        return TemperatureSearch(best[1], best[2], evaluations, done(best[2]))
    at_high = probe(high)
    if done(at_high) or at_high < target:
        return TemperatureSearch(best[1], best[2], evaluations, done(best[2]))
    lo, hi = math.log(low), math.log(high)
    for _ in range(steps):
        mid = (lo + hi) / 2
        value = probe(math.exp(mid))
        if done(value):
            break
        if value < target:
            lo = mid
        else:
            hi = mid
    return TemperatureSearch(best[1], best[2], evaluations, done(best[2]))
