"""Utility of a synthetic release against held-out records (pure functions, no I/O).

* Fréchet distance between two Gaussians fitted to embeddings (the FID/FBD form of
  Heusel et al., 2017, *GANs Trained by a Two Time-Scale Update Rule Converge to a Local
  Nash Equilibrium*, eq. 6): ``‖μ₁ − μ₂‖² + tr(Σ₁ + Σ₂ − 2 (Σ₁ Σ₂)^{1/2})``.
* distinct-n (Li et al., 2016, *A Diversity-Promoting Objective Function for Neural
  Conversation Models*, §4.1): distinct n-grams over all n-grams of the release.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import linalg

from gate.stats._validate import StatsError


def frechet_distance(*, a: np.ndarray, b: np.ndarray) -> float:
    """Fréchet distance between Gaussians fitted to the rows of ``a`` and ``b``.

    Args:
        a: (n, d) embeddings of one set (n >= 2).
        b: (m, d) embeddings of the other (m >= 2).

    Returns:
        ``‖μ_a − μ_b‖² + tr(Σ_a + Σ_b − 2 (Σ_a Σ_b)^{1/2})`` (>= 0; 0 for equal moments).
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise StatsError(f"a and b must be (n, d) and (m, d); found {x.shape} and {y.shape}")
    if x.shape[0] < 2 or y.shape[0] < 2:
        raise StatsError(f"a and b need >= 2 rows each; found {x.shape[0]} and {y.shape[0]}")
    mu = x.mean(axis=0) - y.mean(axis=0)
    cov_a = np.atleast_2d(np.cov(x, rowvar=False))
    cov_b = np.atleast_2d(np.cov(y, rowvar=False))
    root = linalg.sqrtm(cov_a @ cov_b)
    root = np.real(root)  # imaginary parts are round-off of a PSD product's root
    value = float(mu @ mu + np.trace(cov_a) + np.trace(cov_b) - 2.0 * np.trace(root))
    return max(value, 0.0)


def distinct_n(texts: Sequence[str], *, n: int = 2) -> float:
    """Distinct whitespace-token n-grams over all n-grams of ``texts`` (0 if there are none).

    Uses scikit-learn's n-gram counting (sparse, vectorised).
    """
    if n < 1:
        raise StatsError(f"n must be >= 1; found {n}")
    from sklearn.feature_extraction.text import CountVectorizer

    vectorizer = CountVectorizer(
        ngram_range=(n, n), tokenizer=str.split, token_pattern=None, lowercase=False
    )
    try:
        counts = vectorizer.fit_transform(list(texts))
    except ValueError as exc:
        if "empty vocabulary" in str(exc):  # no n-gram at all
            return 0.0
        raise
    total = float(counts.sum())
    return 0.0 if total == 0 else counts.shape[1] / total
