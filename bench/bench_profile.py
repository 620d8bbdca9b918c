"""Benchmark of the profile and distinguishability audits (README numbers).

    .venv/bin/python bench/bench_profile.py game --records 10000 20000
    .venv/bin/python bench/bench_profile.py lbf --records 10000
    .venv/bin/python bench/bench_profile.py delta --users 100000 1000000

``game``: the TeDA game on ``records`` source records of real-length support e-mails
(four Faker chats joined, about 250 words) and their light-edit rewrites (synonyms and a
filler word every four tokens), k = 2, λ ∈ {-10000, 0, 10000}: transition sampling, the
embedding attack (384-d unit vectors: random ones, since encoding 2 × 20k e-mails with
MiniLM takes minutes and is the semantic class's benchmark) and the lexical attack
(character 3-5-gram TF-IDF of the real texts). Trials are disjoint, so records / 2 per λ.

``lbf``: the n-gram LBF profile (n = 3) of ``records`` such e-mails, one user each, |U| in
{1, 10, 100} with 20 random sets each and top-N in {100, 1000}.

``delta``: the one-run δ bound at ε = 1 from ``users`` scores (split-half threshold choice,
the 81-point curve).
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import numpy as np
from bench_canary import emails  # same directory (run as a script)

from gate.demo.corpora import paraphrase


def bench_game(sizes: list[int]) -> None:
    from gate.audits.distinguishability import EmbeddingAttack, LexicalAttack, RewriteGame
    from gate.progress import NullProgress
    from gate.stats.distinguishability import pick_candidates, transition_candidate_sets

    for n in sizes:
        rng = np.random.default_rng(0)
        pool = emails(n, seed=3)
        rewrites = [paraphrase(t, rng) for t in pool]
        game = RewriteGame(
            pool_texts=pool,
            rewrite_texts=rewrites,
            pool_rows=np.arange(n),
            rewrite_rows=np.arange(n),
            rewrite_pool=np.arange(n),
            store=None,  # type: ignore[arg-type]
            embedding=None,  # type: ignore[arg-type]
            progress=NullProgress(),
        )
        source = rng.normal(size=(n, 384)).astype(np.float32)
        source /= np.linalg.norm(source, axis=1, keepdims=True)
        noisy = source + 0.5 * rng.normal(size=source.shape).astype(np.float32) / np.sqrt(384)
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        game.__dict__["_index"] = SimpleNamespace(source=source, release=noisy)
        words = np.mean([len(t.split()) for t in pool])
        print(f"{n} records ({words:.0f} words each):")
        for lam in (-10000.0, 0.0, 10000.0):
            t0 = time.perf_counter()
            sets = transition_candidate_sets(
                embeddings=source, n=n, candidates=2, trials=n, transition_lambda=lam, rng=rng
            )
            t1 = time.perf_counter()
            position = rng.integers(2, size=sets.shape[0])
            targets = sets[np.arange(sets.shape[0]), position]
            timings = [f"sampling {t1 - t0:.2f} s"]
            for attack in (EmbeddingAttack(), LexicalAttack()):
                t2 = time.perf_counter()
                sims = attack.similarities(game, rewrites=targets, candidates=sets)
                rate = (pick_candidates(sims, rng) == position).mean()
                timings.append(f"{attack.name} {time.perf_counter() - t2:.2f} s (K/T {rate:.3f})")
            print(f"  lambda {lam:>8g}: {sets.shape[0]} trials; " + ", ".join(timings))


def bench_lbf(sizes: list[int]) -> None:
    from gate.features.ngram import ngram_index
    from gate.features.tokenize import tokenize
    from gate.stats.lbf import (
        delta_at_epsilon,
        epsilon_at_delta,
        lbf_profile,
        top_n_delta_at_epsilon,
    )

    for n in sizes:
        texts = emails(n, seed=4)
        rng = np.random.default_rng(0)
        t0 = time.perf_counter()
        corpus = tokenize(texts, tokenizer="word", lowercase=True)
        index = ngram_index(corpus, 3)
        _, occurrence = np.unique(index.hashes, return_inverse=True)
        counts_x = np.bincount(occurrence).astype(np.float64)
        t1 = time.perf_counter()
        for size in (1, 10, 100):
            for _ in range(20):
                removed = rng.choice(n, size=size, replace=False)
                in_u = np.isin(index.docs, removed)
                counts_y = counts_x - np.bincount(occurrence[in_u], minlength=counts_x.size)
                profile = lbf_profile(counts_x=counts_x, counts_y=counts_y)
                delta_at_epsilon(profile, epsilon=1.0)
                epsilon_at_delta(profile, delta=1e-5)
                for top in (100, 1000):
                    top_n_delta_at_epsilon(
                        counts_x=counts_x, counts_y=counts_y, top_n=top, epsilon=1.0
                    )
        t2 = time.perf_counter()
        print(
            f"{n} records, {int(counts_x.sum())} 3-grams ({counts_x.size} distinct): "
            f"counts {t1 - t0:.2f} s; 60 source sets {t2 - t1:.2f} s ({(t2 - t1) / 60:.3f} s each)"
        )


def bench_delta(sizes: list[int]) -> None:
    from gate.stats.one_run import one_run_delta, one_run_delta_from_scores

    for n in sizes:
        rng = np.random.default_rng(0)
        labels = rng.random(n) < 0.5
        scores = labels * 0.2 + rng.normal(size=n)
        t0 = time.perf_counter()
        out = one_run_delta_from_scores(
            scores=scores, is_train=labels, rng=rng, epsilon=1.0, alpha=0.05
        )
        t1 = time.perf_counter()
        one_run_delta(
            epsilon=np.linspace(0, 2, 81),
            k_plus=out.k_plus,
            k_minus=out.k_minus,
            correct=out.correct,
            alpha=0.05,
            scored=out.evaluated,
        )
        t2 = time.perf_counter()
        print(
            f"{n} users: delta bound {t1 - t0:.2f} s (delta {out.delta_lower:.3g}), "
            f"81-point curve {t2 - t1:.2f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("game").add_argument("--records", type=int, nargs="+", default=[10000, 20000])
    sub.add_parser("lbf").add_argument("--records", type=int, nargs="+", default=[10000])
    sub.add_parser("delta").add_argument("--users", type=int, nargs="+", default=[100000])
    args = parser.parse_args()
    if args.what == "game":
        bench_game(args.records)
    elif args.what == "lbf":
        bench_lbf(args.records)
    else:
        bench_delta(args.users)


if __name__ == "__main__":
    main()
