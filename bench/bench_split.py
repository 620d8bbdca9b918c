"""`gate split` of a large JSON Lines source.

    .venv/bin/python bench/bench_split.py --records 1000000

Writes ``records`` records (three per user, ~100 Zipf-distributed words each) to a
temporary JSON Lines file, then times :func:`gate.data.split.split_source` on it (p = 0.5,
seed 1): reading and checking the source, the draw, writing train, holdout and the
manifest. Prints the wall time and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from gate.data.split import split_source


def write_source(path: Path, records: int, rng: np.random.Generator) -> int:
    vocab = np.array([f"w{i}" for i in range(50_000)])
    with path.open("w", encoding="utf-8") as out:
        for start in range(0, records, 10_000):
            rows = min(10_000, records - start)
            ranks = np.minimum(rng.zipf(1.3, size=(rows, 100)), vocab.size) - 1
            for i, row in enumerate(vocab[ranks], start=start):
                record = {"record_id": f"r{i}", "user_id": f"u{i // 3}", "text": " ".join(row)}
                out.write(json.dumps(record) + "\n")
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=300_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-split-") as tmp:
        source = Path(tmp) / "source.jsonl"
        size = write_source(source, args.records, np.random.default_rng(0))
        started = time.perf_counter()
        outcome = split_source(source, p=0.5, seed=1, by="user_id", out_dir=Path(tmp) / "split")
        wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    print(
        f"gate split of {args.records:,} records ({size / 2**20:,.0f} MB of JSON Lines): "
        f"{wall:.1f} s, peak RSS {peak:.2f} GB; train {outcome.manifest.train.records:,} "
        f"records, sha256 {outcome.manifest.train.sha256[:12]}"
    )


if __name__ == "__main__":
    main()
