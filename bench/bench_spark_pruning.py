"""Rows each pruning rule hashes for the n-grams longer than ``n_min`` (README numbers).

    .venv/bin/python bench/bench_spark_pruning.py --records 10000

The local engine prunes length by length (prefix rule): the n-gram at a position is
hashed if the (n-1)-gram there occurs more than once in the source or occurs in the other
corpus. The spark engine decides every length from the ``n_min``-grams in one pass
(whole-span rule): the n-gram is hashed if all its ``n_min``-grams occur more than once
in the source, or all occur in the other corpus. Both keep every n-gram that can be
repeated or disclosed; this counts the rows each leaves to hash (and to shuffle, on
Spark) on the corpus of ``bench_ngram.py`` (leaky release; ``--corpus emails``: real-length
e-mails and a leaky release), and those both rules together would leave.
"""

from __future__ import annotations

import argparse

import numpy as np
import pyarrow as pa
from bench_ngram import make_corpus

from gate.demo.corpora import email_threads, leaky_release, make_faker
from gate.features.ngram import NgramHasher
from gate.features.tokenize import split_corpus, tokenize


def occurs_more_than_once(hashes: np.ndarray) -> np.ndarray:
    _, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    return counts[inverse] > 1


def all_flagged(flagged: np.ndarray, pos: np.ndarray, span: int) -> np.ndarray:
    unflagged = np.concatenate([[0], np.cumsum(~flagged)])
    return unflagged[pos + span] == unflagged[pos]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--n-min", type=int, default=8)
    parser.add_argument("--n-max", type=int, default=16)
    parser.add_argument(
        "--corpus",
        choices=["zipf", "emails"],
        default="zipf",
        help="zipf: bench_ngram.py's corpus (Zipf words, copied spans); emails: real-length "
        "e-mails (signatures, quoted replies) and a leaky release of an order-3 chain",
    )
    args = parser.parse_args()
    n_min, n_max = args.n_min, args.n_max
    rng = np.random.default_rng(0)
    if args.corpus == "zipf":
        source_texts, release_texts = make_corpus(args.records, rng)
    else:
        rows = email_threads(2 * args.records, rng=rng, fake=make_faker(0))
        source_texts = [r["text"] for r in rows]
        release_texts = leaky_release(
            source_texts[: args.records], args.records, rng, max_words=450
        )
    both = pa.chunked_array([pa.array(source_texts + release_texts, pa.large_string())])
    source, release = split_corpus(tokenize(both), len(source_texts))
    src, rel = NgramHasher.of(source), NgramHasher.of(release)

    def flags(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per position of each corpus (n-gram fits): repeated in the source, in the
        release (source positions), in the source (release positions)."""
        sp, rp = src.positions(n), rel.positions(n)
        sh, rh = src.hashes(sp, n), rel.hashes(rp, n)
        return sp, occurs_more_than_once(sh), np.isin(sh, rh), rp, np.isin(rh, sh)

    sp, repeated, shared, rp, in_source = flags(n_min)
    span_flags = []
    for positions, flagged, size in (
        (sp, repeated, source.ids.size),
        (sp, shared, source.ids.size),
        (rp, in_source, release.ids.size),
    ):
        at = np.zeros(size, dtype=bool)
        at[positions[flagged]] = True
        span_flags.append(at)
    print(
        f"{args.corpus}: {len(source_texts):,} source + {len(release_texts):,} release records; "
        f"{n_min}-gram rows: {sp.size + rp.size:,}"
    )
    print("n  prefix (local)  whole span (spark)  both")
    totals = np.zeros(3, dtype=np.int64)
    previous = (sp, repeated, shared, rp, in_source)
    for n in range(n_min + 1, n_max + 1):
        p_sp, p_repeated, p_shared, p_rp, p_in_source = previous
        s_fit, r_fit = src.positions(n), rel.positions(n)
        # prefix rule: the (n-1)-gram at the position (positions where the n-gram fits)
        prefix_src = np.isin(s_fit, p_sp[p_repeated | p_shared])
        prefix_rel = np.isin(r_fit, p_rp[p_in_source])
        span = n - n_min + 1
        whole_src = all_flagged(span_flags[0], s_fit, span) | all_flagged(
            span_flags[1], s_fit, span
        )
        whole_rel = all_flagged(span_flags[2], r_fit, span)
        rows = np.array(
            [
                prefix_src.sum() + prefix_rel.sum(),
                whole_src.sum() + whole_rel.sum(),
                (prefix_src & whole_src).sum() + (prefix_rel & whole_rel).sum(),
            ]
        )
        totals += rows
        print(f"{n:2d} {rows[0]:14,} {rows[1]:19,} {rows[2]:11,}")
        previous = flags(n)
    print(f"all {totals[0]:13,} {totals[1]:19,} {totals[2]:11,}")


if __name__ == "__main__":
    main()
