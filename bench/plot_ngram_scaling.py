"""Plot the n-gram path's time and peak memory against corpus size (README figure).

    .venv/bin/python bench/plot_ngram_scaling.py bench/ngram-scaling.jsonl \
        bench/ngram-scaling-spark.jsonl docs/bench-ngram-scaling.png

Reads the JSON lines ``bench/bench_ngram.py --json`` appends (one or more files) and fits
the scaling exponent of time in tokens by least squares on log-log axes. Spark runs are
drawn for time only: the peak RSS measured is the driver's, not the JVM's.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from matplotlib.figure import Figure


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+")
    parser.add_argument("out")
    args = parser.parse_args()
    rows = []
    for name in args.runs:
        with open(name, encoding="utf-8") as handle:
            rows += [json.loads(line) for line in handle if line.strip()]
    rows.sort(key=lambda r: r["tokens"])
    fig = Figure(figsize=(10, 4))
    left, right = fig.subplots(1, 2)
    labels = {"memory": "in memory", "spill": "spilled to disk", "spark": "Spark local[2]"}
    for path, style in (("memory", "o-"), ("spill", "s-"), ("spark", "^-")):
        runs = [r for r in rows if r.get("path", "memory") == path]
        if not runs:
            continue
        tokens = np.array([r["tokens"] for r in runs], dtype=float)
        total = np.array([r["total_s"] for r in runs])
        peak = np.array([r["peak_rss_gb"] for r in runs])
        slope = np.polyfit(np.log(tokens), np.log(total), 1)[0] if len(runs) > 1 else np.nan
        left.loglog(tokens / 1e6, total, style, label=f"{labels[path]} (slope {slope:.2f})")
        if path != "spark":
            right.plot(tokens / 1e6, peak, style, label=labels[path])
        print(f"{path}: time ~ tokens^{slope:.3f} over {len(runs)} runs")
    corpus = [r for r in rows if r.get("path", "memory") == "spill"] or rows
    right.plot(
        [r["tokens"] / 1e6 for r in corpus],
        [r["corpus_peak_rss_gb"] for r in corpus],
        "k:",
        label="the benchmark's corpus alone (Python strings)",
    )
    left.set_xlabel("tokens of train + holdout + release (millions)")
    left.set_ylabel("seconds (tokenise, n-grams 8-16, test)")
    left.set_title("n-gram disclosure path: time")
    left.legend(loc="lower right")
    right.axhline(8, color="grey", lw=0.8, ls="--")
    right.legend(loc="upper left")
    right.set_xlabel("tokens (millions)")
    right.set_ylabel("peak RSS (GB)")
    right.set_title("peak memory of the process")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
