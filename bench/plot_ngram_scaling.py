"""Plot the n-gram path's time and peak memory against corpus size (README figure).

    .venv/bin/python bench/plot_ngram_scaling.py bench/ngram-scaling.jsonl docs/bench-ngram-scaling.png

Reads the JSON lines ``bench/bench_ngram.py --json`` appends and fits the scaling exponent
of time in tokens by least squares on log-log axes.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from matplotlib.figure import Figure


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs")
    parser.add_argument("out")
    args = parser.parse_args()
    with open(args.runs, encoding="utf-8") as handle:
        rows = sorted(
            (json.loads(line) for line in handle if line.strip()), key=lambda r: r["tokens"]
        )
    tokens = np.array([r["tokens"] for r in rows], dtype=float)
    total = np.array([r["total_s"] for r in rows])
    ngrams = np.array([r["ngrams_s"] for r in rows])
    peak = np.array([r["peak_rss_gb"] for r in rows])
    corpus = np.array([r["corpus_peak_rss_gb"] for r in rows])
    slope, _ = np.polyfit(np.log(tokens), np.log(total), 1)
    fig = Figure(figsize=(10, 4))
    left, right = fig.subplots(1, 2)
    left.loglog(tokens / 1e6, total, "o-", label=f"tokenise + n-grams + test (slope {slope:.2f})")
    left.loglog(tokens / 1e6, ngrams, "s--", label="n-grams 8-16")
    left.set_xlabel("tokens of train + holdout + release (millions)")
    left.set_ylabel("seconds")
    left.set_title("n-gram disclosure path: time")
    left.legend()
    right.plot(tokens / 1e6, peak, "o-", label="whole process")
    right.plot(tokens / 1e6, corpus, "s--", label="after generating the corpus (Python strings)")
    right.legend()
    right.set_xlabel("tokens (millions)")
    right.set_ylabel("peak RSS (GB)")
    right.set_title("peak memory (in-memory path)")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"time ~ tokens^{slope:.3f}; wrote {args.out}")


if __name__ == "__main__":
    main()
