"""Benchmarks of the statistical core (numbers go in the README).

    .venv/bin/python bench/bench_stats.py

Exact tail: 10^6 users with disclosure counts up to 10^3, two count distributions
(geometric: most users have few disclosures; Zipf(2): heavy tail, ~800 distinct weights).
One-run ε: 10^6 scored users, split-half threshold selection.
"""

from __future__ import annotations

import platform
import time

import numpy as np

from gate.stats.feature_match import exact_tail, feature_match_test
from gate.stats.one_run import one_run_epsilon_from_scores
from gate.stats.roc import roc_auc


def timed(label: str, fn, repeats: int = 3) -> None:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    print(f"{label:<62} {min(times):8.3f} s  (best of {repeats}) -> {out}")


def main() -> None:
    rng = np.random.default_rng(0)
    n = 10**6
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    counts = {
        "geometric(0.3), cap 1000": np.minimum(rng.geometric(0.3, size=n), 1000),
        "zipf(2), cap 1000": np.minimum(rng.zipf(2.0, size=n), 1000),
    }
    train = rng.random(n) < 0.52
    for name, c in counts.items():
        t = float(c[train].sum())
        distinct = np.unique(c).size
        timed(
            f"exact tail P(S >= T), {name} [{distinct} weights]",
            lambda c=c, t=t: f"{exact_tail(counts=c, q=0.5, threshold=t):.3g}",
        )
        timed(
            f"feature-match test incl. exact p̂ (saddlepoint-placed), {name}",
            lambda c=c: (
                f"eps_exact={feature_match_test(counts=c, is_train=train).epsilon_lower_exact:.4f}"
            ),
        )
    scores = rng.normal(size=n) + 0.1 * train
    timed(
        "one-run ε̂, 10^6 scored users (split half, 35-point grid, thresholds carried)",
        lambda: (
            f"{one_run_epsilon_from_scores(scores=scores, is_train=train, rng=np.random.default_rng(1)).epsilon_lower:.4f}"
        ),
    )
    timed(
        "AUC + Mann-Whitney + ROC, 10^6 users",
        lambda: f"{roc_auc(scores=scores, is_train=train).auc:.4f}",
    )


if __name__ == "__main__":
    main()
