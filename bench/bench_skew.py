"""Memory of the local engine's out-of-core n-gram path when a few n-grams fill the corpus.

    .venv/bin/python bench/bench_skew.py --records 1000000
    .venv/bin/python bench/bench_skew.py --records 2000000 --footer 30
    .venv/bin/python bench/bench_skew.py --records 10000 --one-token 16000000
    .venv/bin/python bench/bench_skew.py --records 10000 --signature 320000 --block-records 10000
    .venv/bin/python bench/bench_skew.py --records 10000 --long-record 32000000

Corpus: ``records`` train + ``records`` holdout + ``records`` release documents (one user
each) of 12 Zipf-distributed words followed by the same footer of ``--footer`` words (a
disclaimer in every e-mail); every tenth release document also copies 10 words of a train
document (a leak to find). Every 8-gram of the footer occurs in every document, so all
its occurrences meet in one hash partition: before partitions were read in blocks, that
partition grew with the corpus. Prints wall time, the peak of the memory numpy and Python
allocate during the count (``tracemalloc``; the corpus itself is allocated before it
starts) and the counts (the same whatever the partitions and blocks).

With ``--one-token N``, one user's train records also hold N tokens of one word repeated
(records of 1,000 of it), and the release copies 50 of them: every n-gram of that text
is rare (one user holds it) and repeated, so none is settled as common.

With ``--signature R``, one user's R train records of 12 Zipf words end in the same
20-word signature (a prolific sender, a bot), and 50 release records copy it: each
n-gram of the signature is rare and occurs in R records.

With ``--long-record N``, one user's single train record holds N Zipf words (a book, a
log, a mailbox exported as one text) and the release copies 50 words of it.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from gate.features.ngram_spill import spilled_ngram_disclosures
from gate.stats.feature_match import feature_match_test


def zipf_words(rng: np.random.Generator, shape: int | tuple[int, ...]) -> np.ndarray:
    """Words ``w0`` .. ``w49999`` drawn by a Zipf law of exponent 1.3."""
    vocab = np.array([f"w{i}" for i in range(50_000)])
    return vocab[np.minimum(rng.zipf(1.3, size=shape), vocab.size) - 1]


def make_corpus(records: int, footer: int, rng: np.random.Generator) -> tuple[list[str], list[str]]:
    tail = " " + " ".join(f"disclaimer{i}" for i in range(footer))
    docs: list[str] = []
    for start in range(0, 3 * records, 100_000):  # bounded temporaries
        rows = min(100_000, 3 * records - start)
        docs += [" ".join(row) + tail for row in zipf_words(rng, (rows, 12))]
    source, release = docs[: 2 * records], docs[2 * records :]
    for i in range(0, records, 10):
        words = source[int(rng.integers(0, records))].split()
        release[i] = " ".join(words[1:11]) + " " + release[i]
    return source, release


def add_one_token(
    source: list[str], release: list[str], users: np.ndarray, tokens: int
) -> tuple[list[str], list[str], np.ndarray]:
    """One user's records of one word repeated, ``tokens`` in all, and a release copying
    50 of them."""
    repeated = [" ".join(["again"] * 1000)] * (tokens // 1000)
    holder = np.full(len(repeated), users.max() + 1, dtype=np.int64)
    return repeated + source, [*release, " ".join(["again"] * 50)], np.r_[holder, users]


def add_signature(
    source: list[str],
    release: list[str],
    users: np.ndarray,
    records: int,
    rng: np.random.Generator,
) -> tuple[list[str], list[str], np.ndarray]:
    """One user's ``records`` records ending in one signature, and 50 release records
    copying it."""
    signature = " " + " ".join(f"sig{i}" for i in range(20))
    mine = [" ".join(row) + signature for row in zipf_words(rng, (records, 12))]
    holder = np.full(records, users.max() + 1, dtype=np.int64)
    copies = [f"{text}{signature}" for text in release[:50]]
    return mine + source, copies + release[50:], np.r_[holder, users]


def add_long_record(
    source: list[str],
    release: list[str],
    users: np.ndarray,
    tokens: int,
    rng: np.random.Generator,
) -> tuple[list[str], list[str], np.ndarray]:
    """One user's single record of ``tokens`` Zipf words, and a release record copying 50
    of them from its middle."""
    words = zipf_words(rng, tokens)
    copied = " ".join(words[tokens // 2 : tokens // 2 + 50])
    return [" ".join(words), *source], [*release, copied], np.r_[users.max() + 1, users]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--footer", type=int, default=30, help="words of the common footer")
    parser.add_argument("--block-records", type=int, default=None, help="default: the engine's")
    parser.add_argument("--one-token", type=int, default=0, help="tokens of one word repeated")
    parser.add_argument("--signature", type=int, default=0, help="one user's signed records")
    parser.add_argument("--long-record", type=int, default=0, help="tokens of one record")
    args = parser.parse_args()
    source, release = make_corpus(args.records, args.footer, np.random.default_rng(0))
    users = np.arange(len(source))
    is_train = users < args.records
    if args.one_token:
        source, release, users = add_one_token(source, release, users, args.one_token)
        is_train = np.r_[is_train, True]  # the last user code holds the repeated word
    if args.signature:
        source, release, users = add_signature(
            source, release, users, args.signature, np.random.default_rng(1)
        )
        is_train = np.r_[is_train, True]  # the last user code holds the signature
    if args.long_record:
        source, release, users = add_long_record(
            source, release, users, args.long_record, np.random.default_rng(2)
        )
        is_train = np.r_[is_train, True]  # the last user code holds the long record
    options = {} if args.block_records is None else {"block_records": args.block_records}
    tracemalloc.start()
    started = time.perf_counter()
    found = spilled_ngram_disclosures(
        source,
        release,
        users=users,
        n_min=8,
        n_max=16,
        max_users=1,
        **options,  # type: ignore[arg-type]
    )
    wall = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    test = feature_match_test(counts=found.user_counts, is_train=is_train)
    tokens = sum(len(t.split()) for t in source) + sum(len(t.split()) for t in release)
    print(
        f"{args.records:,} + {args.records:,} + {args.records:,} records, footer of "
        f"{args.footer} words, {args.one_token:,} tokens of one word, "
        f"{args.signature:,} signed records, a record of {args.long_record:,} tokens, "
        f"{tokens / 1e6:.0f} M tokens: {wall:.1f} s, peak allocated "
        f"during the count {peak / 2**20:,.0f} MiB; rare {found.rare_features:,}, "
        f"disclosed {found.disclosed_features:,}, T = {test.statistic:,.0f}, "
        f"H = {test.holdout_statistic:,.0f}"
    )


if __name__ == "__main__":
    main()
