"""The semantic class's distinctive-match search against its neighbour-density search
(README numbers).

    .venv/bin/python bench/bench_distinctive.py --source 20000 60000

``source`` record embeddings of three records per user and half as many release
embeddings, drawn as in ``bench/bench_knn.py`` (384-dimensional, clustered), exact search:
the seconds of ``neighbour_density`` (10 neighbours of other users, which rarity needs)
and of ``distinctive_matches`` (each source record's nearest release record and nearest
record of another user).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_knn import clustered

from gate.features.distinctive_matches import distinctive_matches
from gate.features.embeddings import knn_search, neighbour_density


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=int, nargs="+", default=[20_000, 60_000])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    centres, mixing = rng.normal(size=(2000, 32)), rng.normal(size=(32, 384))
    for n in args.source:
        source = clustered(n, rng, centres, mixing)
        release = clustered(n // 2, rng, centres, mixing)
        users = np.arange(n) // 3
        start = time.perf_counter()
        neighbour_density(source, neighbours=10, groups=users)
        density = time.perf_counter() - start
        start = time.perf_counter()
        distinctive_matches(
            source_windows=source,
            source_owner=np.arange(n),
            source_users=users,
            release_windows=release,
            release_owner=np.arange(n // 2),
            threshold=0.9,
            search=lambda queries, base, width: knn_search(queries, base, k=width, method="exact"),
        )
        matches = time.perf_counter() - start
        print(
            f"{n} source, {n // 2} release: neighbour density {density:.1f} s, "
            f"distinctive matches {matches:.1f} s"
        )


if __name__ == "__main__":
    main()
