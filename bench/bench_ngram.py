"""Benchmark of the n-gram disclosure path (tokenise, hash, rarity, disclosure).

    .venv/bin/python bench/bench_ngram.py --records 10000
    .venv/bin/python bench/bench_ngram.py --records 100000

Corpus: ``records`` train + ``records`` holdout + ``records`` synthetic documents of ~100
Zipf-distributed words (vocabulary 50k); the synthetic documents copy a 20-token span of a
random train document into otherwise fresh text (a leaky release). n = 8..16, k = 1.
Peak memory is the process's maximum resident set size.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from gate.features.ngram import ngram_disclosures
from gate.features.tokenize import split_corpus, tokenize
from gate.stats.feature_match import feature_match_test


def make_corpus(records: int, rng: np.random.Generator) -> tuple[list[str], list[str]]:
    vocab = np.array([f"w{i}" for i in range(50_000)])
    ranks = np.minimum(rng.zipf(1.3, size=(3 * records, 100)), vocab.size) - 1
    docs = [" ".join(row) for row in vocab[ranks]]
    source, synthetic = docs[: 2 * records], docs[2 * records :]
    spans = rng.integers(0, records, size=records)
    for i, j in enumerate(spans):
        words = source[j].split()
        synthetic[i] = " ".join(words[40:60]) + " " + synthetic[i]
    return source, synthetic


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    source, synthetic = make_corpus(args.records, rng)
    users = np.arange(len(source))
    is_train = np.arange(len(source)) < args.records
    print(f"corpus generated in {time.perf_counter() - t0:.1f} s")

    t0 = time.perf_counter()
    corpus = tokenize(source + synthetic)
    src, syn = split_corpus(corpus, len(source))
    t_tok = time.perf_counter() - t0
    t1 = time.perf_counter()
    found = ngram_disclosures(src, syn, users=users, n_min=8, n_max=16, max_users=1)
    t_ngram = time.perf_counter() - t1
    t2 = time.perf_counter()
    test = feature_match_test(counts=found.user_counts, is_train=is_train)
    t_test = time.perf_counter() - t2
    total = time.perf_counter() - t0
    tokens = corpus.ids.size
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    docs = len(source) + len(synthetic)
    print(
        f"{args.records} + {args.records} + {args.records} records, {tokens / 1e6:.1f} M tokens: "
        f"tokenise {t_tok:.1f} s, n-grams 8-16 {t_ngram:.1f} s, test {t_test:.2f} s, "
        f"total {total:.1f} s ({tokens / total / 1e6:.2f} M tokens/s, {docs / total:,.0f} records/s), "
        f"peak RSS {peak_gb:.2f} GB"
    )
    print(
        f"rare {found.rare_features:,}, disclosed {found.disclosed_features:,}, "
        f"T = {test.statistic:,.0f}, H = {test.holdout_statistic:,.0f}, "
        f"eps_exact = {test.epsilon_lower_exact:.3f}"
    )


if __name__ == "__main__":
    main()
