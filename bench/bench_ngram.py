"""Benchmark of the n-gram disclosure path (tokenise, hash, rarity, disclosure).

    .venv/bin/python bench/bench_ngram.py --records 10000
    .venv/bin/python bench/bench_ngram.py --records 100000
    .venv/bin/python bench/bench_ngram.py --records 10000 --reference
    .venv/bin/python bench/bench_ngram.py --records 30000 --json bench/ngram-scaling.jsonl

``--json FILE`` appends the run's numbers as one JSON line (``bench/plot_ngram_scaling.py``
draws them).

``--path spill`` runs the local engine's out-of-core path (chunks of ``--chunk-mb`` of
text, hash partitions on disk); ``--path spark`` the spark engine on ``--spark-master``
(session start-up outside the clock; peak RSS is this driver process's, not the JVM's).
``--path check`` writes the corpus as a bundle of JSON Lines files (one user per record)
and runs the whole product on it: one ``gate check --no-mlflow`` process with an
n-gram-only policy on the local engine (``--check-engine spark``: the spark engine; peak
RSS is then the driver's, not the JVM's) (reading, validating and normalising the bundle,
the audit, GX, the evidence); wall time and peak RSS are that process's.

``--reference`` also runs a plain-Python implementation of the same counts (a dict from
each n-gram, as a tuple of tokens, to the set of users holding it; written here, not in
the product), checks that it gives the same rare and disclosed features and the same
per-user counts c_u (hence the same T and H), and prints the speed ratio.

Corpus: ``records`` train + ``records`` holdout + ``records`` synthetic documents of ~100
Zipf-distributed words (vocabulary 50k); the synthetic documents copy a 20-token span of a
random train document into otherwise fresh text (a leaky release). n = 8..16, k = 1.
Peak memory is the process's peak resident set size from the end of the corpus generation
(the texts, still resident, count; the generator's temporaries do not).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from gate.features.ngram import ngram_disclosures
from gate.features.ngram_spill import spilled_ngram_disclosures
from gate.features.tokenize import split_corpus, tokenize
from gate.policy.models import EngineSettings, NgramFeatures
from gate.progress import NullProgress
from gate.stats.feature_match import feature_match_test


def make_corpus(records: int, rng: np.random.Generator) -> tuple[list[str], list[str]]:
    vocab = np.array([f"w{i}" for i in range(50_000)])
    docs = []
    for start in range(0, 3 * records, 10_000):  # bounded temporaries
        rows = min(10_000, 3 * records - start)
        ranks = np.minimum(rng.zipf(1.3, size=(rows, 100)), vocab.size) - 1
        docs += [" ".join(row) for row in vocab[ranks]]
    source, synthetic = docs[: 2 * records], docs[2 * records :]
    spans = rng.integers(0, records, size=records)
    for i, j in enumerate(spans):
        words = source[j].split()
        synthetic[i] = " ".join(words[40:60]) + " " + synthetic[i]
    return source, synthetic


def reset_peak_rss() -> None:
    """Start the peak resident set size (VmHWM) afresh: the run's peak, not the corpus
    generator's (Linux)."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
        handle.write("5")


def peak_rss_gb() -> float:
    """Peak resident set size since :func:`reset_peak_rss` (the texts, still resident,
    count)."""
    with open("/proc/self/status", encoding="ascii") as handle:
        line = next(line for line in handle if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024**2


CHECK_POLICY = """version: 1
name: bench-ngram
audits:
  disclosure:
    features: [{class: ngram, n_min: 8, n_max: 16, max_users: 1}]
    thresholds: {max_epsilon: 0.5}
engine: {engine}
"""


def write_bundle(
    source: list[str], synthetic: list[str], records: int, out: Path, engine: str = "{name: local}"
) -> None:
    """train (the first ``records`` source texts), holdout and synthetic JSON Lines files
    (one user per record) and an n-gram-only policy whose ``engine:`` block is ``engine``."""
    for name, texts, first in (
        ("train", source[:records], 0),
        ("holdout", source[records:], records),
        ("synthetic", synthetic, 0),
    ):
        with open(out / f"{name}.jsonl", "w", encoding="utf-8") as handle:
            for i, text in enumerate(texts, start=first):
                row = {"record_id": f"r{i}", "text": text}
                if name != "synthetic":
                    row["user_id"] = f"u{i}"
                handle.write(json.dumps(row) + "\n")
    (out / "policy.yaml").write_text(CHECK_POLICY.replace("{engine}", engine), encoding="utf-8")


def run_check(out: Path) -> tuple[float, float, int, dict]:
    """``gate check`` on the bundle in ``out``: wall seconds, peak RSS (GB), exit code and
    the disclosure audit's metrics."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gate", "check", "--quiet", "--no-mlflow"]
        + ["--policy", str(out / "policy.yaml"), "--out", str(out / "report")]
        + [f"--{name}={out / f'{name}.jsonl'}" for name in ("train", "holdout", "synthetic")],
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"gate check exited {code}")
    report = json.loads((out / "report" / "report.json").read_text(encoding="utf-8"))
    return wall, usage.ru_maxrss / 1024**2, code, report["audits"]["disclosure"]["metrics"]


def reference_counts(
    source: list[str],
    synthetic: list[str],
    users: np.ndarray,
    *,
    n_min: int,
    n_max: int,
    max_users: int,
) -> tuple[int, int, np.ndarray]:
    """Rare features, disclosed features and c_u, one token tuple at a time."""
    holders: dict[tuple[str, ...], set[int]] = defaultdict(set)
    for text, user in zip(source, users.tolist(), strict=True):
        tokens = text.split()
        for n in range(n_min, n_max + 1):
            for i in range(len(tokens) - n + 1):
                holders[tuple(tokens[i : i + n])].add(user)
    released: set[tuple[str, ...]] = set()
    for text in synthetic:
        tokens = text.split()
        for n in range(n_min, n_max + 1):
            for i in range(len(tokens) - n + 1):
                released.add(tuple(tokens[i : i + n]))
    counts = np.zeros(int(users.max()) + 1, dtype=np.int64)
    rare = disclosed = 0
    for gram, holding in holders.items():
        if len(holding) <= max_users:
            rare += 1
            if gram in released:
                disclosed += 1
                for user in holding:
                    counts[user] += 1
    return rare, disclosed, counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--json", help="append the numbers to this JSON-lines file")
    parser.add_argument("--shards", type=int, default=None, help="default: by corpus size")
    parser.add_argument(
        "--path",
        choices=("memory", "spill", "spark", "check"),
        default="memory",
        help="in memory, chunks and hash partitions on disk (bounded memory), the spark "
        "engine, or a whole gate check process on the corpus written as files",
    )
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument(
        "--check-engine",
        choices=("local", "spark"),
        default="local",
        help="the engine of --path check (spark: --spark-master, --spark-conf)",
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of the Spark session (repeatable), e.g. spark.driver.memory=12g",
    )
    parser.add_argument("--chunk-mb", type=float, default=8, help="text per chunk of --path spill")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    source, synthetic = make_corpus(args.records, rng)
    users = np.arange(len(source))
    is_train = np.arange(len(source)) < args.records
    corpus_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    print(f"corpus generated in {time.perf_counter() - t0:.1f} s (peak RSS {corpus_gb:.2f} GB)")
    if args.path == "check":
        engine = "{name: local}"
        if args.check_engine == "spark":
            conf = dict(item.split("=", 1) for item in args.spark_conf)
            engine = json.dumps(
                {"name": "spark", "spark_master": args.spark_master, "spark_conf": conf}
            )
        check_bundle(source, synthetic, args.records, engine)
        return
    reset_peak_rss()

    t0 = time.perf_counter()
    if args.path == "memory":
        corpus = tokenize(source + synthetic)
        src, syn = split_corpus(corpus, len(source))
        tokens = corpus.ids.size
        del corpus
        t_tok = time.perf_counter() - t0
        t1 = time.perf_counter()
        found = ngram_disclosures(
            src, syn, users=users, n_min=8, n_max=16, max_users=1, shards=args.shards
        )
        t_ngram = time.perf_counter() - t1
    elif args.path == "spark":
        from gate.engines.spark import SparkEngine

        settings = EngineSettings(
            name="spark",
            spark_master=args.spark_master,
            spark_conf=dict(item.split("=", 1) for item in args.spark_conf),
        )
        with SparkEngine(settings) as engine:
            engine.session  # noqa: B018 (start-up, outside the clock)
            t0 = time.perf_counter()
            found = engine.ngram_disclosures(
                source,
                synthetic,
                users=users,
                config=NgramFeatures(n_min=8, n_max=16, max_users=1),
                progress=NullProgress(),
            )
            t_tok, t_ngram = 0.0, time.perf_counter() - t0
        tokens = 0
    else:
        found = spilled_ngram_disclosures(
            source,
            synthetic,
            users=users,
            n_min=8,
            n_max=16,
            max_users=1,
            chunk_chars=int(args.chunk_mb * 2**20),
        )
        t_tok, t_ngram = 0.0, time.perf_counter() - t0  # tokenising is part of the spill
        tokens = 0
    t2 = time.perf_counter()
    test = feature_match_test(counts=found.user_counts, is_train=is_train)
    t_test = time.perf_counter() - t2
    total = time.perf_counter() - t0
    if args.path != "memory":  # counted after the clock stopped
        tokens = sum(len(text.split()) for text in source) + sum(len(t.split()) for t in synthetic)
    peak_gb = peak_rss_gb()
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
    if args.json:
        with open(args.json, "a", encoding="utf-8") as handle:
            row = {
                "records": args.records,
                "shards": args.shards,
                "path": args.path,
                "chunk_mb": args.chunk_mb if args.path == "spill" else None,
                **({"spark_conf": args.spark_conf} if args.path == "spark" else {}),
                "tokens": int(tokens),
                "tokenise_s": round(t_tok, 3),
                "ngrams_s": round(t_ngram, 3),
                "test_s": round(t_test, 3),
                "total_s": round(total, 3),
                "peak_rss_gb": round(peak_gb, 3),
                "corpus_peak_rss_gb": round(corpus_gb, 3),
            }
            handle.write(json.dumps(row) + "\n")
    if args.reference:
        t0 = time.perf_counter()
        rare, disclosed, counts = reference_counts(
            source, synthetic, users, n_min=8, n_max=16, max_users=1
        )
        t_ref = time.perf_counter() - t0
        ours = t_tok + t_ngram
        same = (
            rare == found.rare_features
            and disclosed == found.disclosed_features
            and np.array_equal(counts, found.user_counts)
        )
        print(
            f"plain-Python reference: {t_ref:.1f} s against {ours:.2f} s for tokenise + n-grams "
            f"({t_ref / ours:.0f}x); rare {rare:,}, disclosed {disclosed:,}, "
            f"T = {counts[is_train].sum():,}, H = {counts[~is_train].sum():,}; "
            f"{'identical' if same else 'DIFFERENT'} counts"
        )
        if not same:
            raise SystemExit(1)


def check_bundle(source: list[str], synthetic: list[str], records: int, engine: str) -> None:
    tokens = sum(len(text.split()) for text in source) + sum(len(t.split()) for t in synthetic)
    with tempfile.TemporaryDirectory(prefix="bench-ngram-") as tmp:
        out = Path(tmp)
        write_bundle(source, synthetic, records, out, engine)
        size = sum(f.stat().st_size for f in out.glob("*.jsonl"))
        source.clear()
        synthetic.clear()
        wall, peak, code, metrics = run_check(out)
    print(
        f"gate check, {records} + {records} + {records} records ({size / 2**20:,.0f} MB of JSON "
        f"Lines, {tokens / 1e6:.1f} M tokens): {wall:.1f} s ({tokens / wall / 1e6:.2f} M "
        f"tokens/s), peak RSS {peak:.2f} GB, exit {code}; "
        f"T = {metrics['ngram.train_disclosures']:,.0f}, "
        f"H = {metrics['ngram.holdout_disclosures']:,.0f}, "
        f"eps_exact = {metrics['ngram.epsilon_lower_exact']:.3f}"
    )


if __name__ == "__main__":
    main()
