"""Exact vs approximate (IVF) nearest-neighbour search of the semantic class (README numbers).

    .venv/bin/python bench/bench_knn.py --base 200000 --queries 20000
    .venv/bin/python bench/bench_knn.py --base 1000000 --queries 200000 --no-exact --nprobe 32

Base and queries are L2-normalised 384-dimensional vectors (the MiniLM dimension) with the
low intrinsic dimension of text embeddings: a mixture of 2,000 clusters in 32 dimensions,
mapped linearly to 384, plus isotropic noise (uniform points on the sphere would make any
approximate search look hopeless, and are nothing like a corpus). Recall@10 of the IVF
search is measured against the exact search on all queries and compared with the estimate
``knn_search`` reports; ``--no-exact`` skips the exact search (only the estimate).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gate.features.embeddings import knn_search


def clustered(
    n: int, rng: np.random.Generator, centres: np.ndarray, mixing: np.ndarray
) -> np.ndarray:
    z = centres[rng.integers(0, centres.shape[0], size=n)]
    z = z + 0.7 * rng.normal(size=z.shape).astype(np.float32)
    x = z @ mixing + 0.02 * rng.normal(size=(n, mixing.shape[1])).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--nprobe", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--no-exact", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(2000, 32)).astype(np.float32)
    mixing = rng.normal(size=(32, 384)).astype(np.float32) / np.sqrt(32)
    base = clustered(args.base, rng, centres, mixing)
    queries = clustered(args.queries, rng, centres, mixing)
    truth = None
    print(f"base {args.base:,}, queries {args.queries:,}, k = {args.k}", flush=True)
    if not args.no_exact:
        t0 = time.perf_counter()
        truth, _, _ = knn_search(queries, base, k=args.k, method="exact")
        exact = time.perf_counter() - t0
        print(f"exact {exact:.1f} s", flush=True)
    for nprobe in args.nprobe:
        t0 = time.perf_counter()
        sims, _, search = knn_search(queries, base, k=args.k, method="ivf", nprobe=nprobe)
        took = time.perf_counter() - t0
        line = (
            f"ivf nlist {search.nlist}, nprobe {nprobe}: {took:.1f} s (training, search and the "
            f"recall estimate), estimated recall@{args.k} {search.recall:.4f} on "
            f"{search.recall_queries} queries"
        )
        if truth is not None:
            recall = (sims >= truth[:, -1:] - 1e-6).mean()  # as close as the true k-th
            line += f"; measured on all queries {recall:.4f}; {exact / took:.1f}x faster"
        print(line, flush=True)


if __name__ == "__main__":
    main()
