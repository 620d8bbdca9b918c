"""End-to-end benchmark of the disclosure audits on Faker corpora (README numbers).

    .venv/bin/python bench/bench_audits.py --records 10000 --classes ngram,pii,semantic
    .venv/bin/python bench/bench_audits.py --records 100000 --classes ngram

Users of a Faker-made support-chat corpus (names, e-mails, phones, account numbers) are
split three ways: train, holdout, and a public part that is neither. Each release has
``records`` documents:

* leaky: an order-3 word Markov chain fitted on train;
* phantom: the same chain fitted on the public part (a phantom-only control);
* rewrite: every train record paraphrased (few 8-grams survive).

Every (release, class) pair runs as its own ``gate check`` process with a one-class
policy; wall time and that process's peak RSS are measured (os.wait4).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gate.demo.corpora import leaky_release, make_faker, rewrite_release, support_records

CLASS_POLICIES = {
    "ngram": "{class: ngram}",
    "pii": "{class: pii, engine: patterns}",
    "pii-spacy": "{class: pii, engine: spacy}",
    "semantic": "{class: semantic}",
}


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def make_bundles(records: int, seed: int, out: Path) -> dict[str, Path]:
    rng = np.random.default_rng(seed)
    fake = make_faker(seed)
    corpus: list[dict] = []
    users = 0
    t0 = time.perf_counter()
    while len(corpus) < 3 * records:
        batch = support_records(1000, rng=rng, fake=fake)
        for r in batch:
            r["user_id"] = f"u{users + int(r['user_id'][1:]):07d}"
            r["record_id"] = f"r{len(corpus)}"
            corpus.append(r)
        users += 1000
    group = {}
    for r in corpus:
        group.setdefault(r["user_id"], int(rng.integers(3)))
    parts: list[list[dict]] = [[], [], []]
    for r in corpus:
        parts[group[r["user_id"]]].append(r)
    train, holdout, public = (p[:records] for p in parts)
    # keep users whole: drop the users cut by the truncation
    train_users = {r["user_id"] for r in train}
    holdout = [r for r in holdout if r["user_id"] not in train_users]
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "holdout.jsonl", holdout)
    train_texts = [r["text"] for r in train]
    releases = {
        "leaky": leaky_release(train_texts, records, rng),
        "phantom": leaky_release([r["text"] for r in public], records, rng),
        "rewrite": rewrite_release(train_texts, rng),
    }
    paths = {}
    for name, texts in releases.items():
        paths[name] = out / f"{name}.jsonl"
        write_jsonl(paths[name], [{"record_id": f"s{i}", "text": t} for i, t in enumerate(texts)])
    tokens = sum(len(r["text"].split()) for r in train + holdout)
    print(
        f"corpus: {len(train)} train + {len(holdout)} holdout records, "
        f"{tokens / (len(train) + len(holdout)):.0f} tokens/record; made in {time.perf_counter() - t0:.0f} s",
        flush=True,
    )
    return paths


def run_check(policy: Path, out: Path, synthetic: Path, report: Path) -> tuple[float, float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gate",
            "check",
            "--quiet",
            "--no-mlflow",
            "--policy",
            str(policy),
            "--train",
            str(out / "train.jsonl"),
            "--holdout",
            str(out / "holdout.jsonl"),
            "--synthetic",
            str(synthetic),
            "--out",
            str(report),
        ],
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss / 1024**2, os.waitstatus_to_exitcode(status)


ENCODER_ONLY = """
import json, sys
from gate.features.embeddings import encode
texts = [json.loads(line)["text"] for f in sys.argv[1:] for line in open(f)]
encode(texts)
"""


def run_encoder_only(files: list[Path]) -> float:
    """Wall time of a process that only loads the encoder and embeds the same texts."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", ENCODER_ONLY, *map(str, files)], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--classes", default="ngram,pii,semantic")
    parser.add_argument("--releases", default="leaky,phantom,rewrite")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        releases = make_bundles(args.records, args.seed, out)
        n_source = sum(1 for _ in open(out / "train.jsonl")) + sum(
            1 for _ in open(out / "holdout.jsonl")
        )
        tokens = sum(
            len(json.loads(line)["text"].split())
            for f in ("train.jsonl", "holdout.jsonl")
            for line in open(out / f)
        )
        print(
            f"{'release':<8} {'class':<10} {'wall s':>7} {'records/s':>10} {'Mtok/s':>7} {'peak GB':>8}  verdict  T / H  eps_exact"
        )
        for release in args.releases.split(","):
            synthetic = releases[release]
            syn_tokens = sum(len(json.loads(line)["text"].split()) for line in open(synthetic))
            for cls in args.classes.split(","):
                policy = out / f"{cls}.yaml"
                name = cls.split("-")[0]
                policy.write_text(
                    "version: 1\nname: bench\naudits:\n  disclosure:\n"
                    f"    features: [{CLASS_POLICIES[cls]}]\n    thresholds: {{max_epsilon: 0.5}}\n"
                )
                report = out / f"report-{release}-{cls}"
                wall, peak, code = run_check(policy, out, synthetic, report)
                metrics = json.loads((report / "report.json").read_text())["audits"]["disclosure"][
                    "metrics"
                ]
                docs = n_source + args.records
                print(
                    f"{release:<8} {cls:<10} {wall:7.1f} {docs / wall:10,.0f} {(tokens + syn_tokens) / wall / 1e6:7.2f} "
                    f"{peak:8.2f}  {['PASS', 'FAIL', 'BAD', 'ERROR'][code]:<7} "
                    f"{metrics[f'{name}.train_disclosures']:.0f} / {metrics[f'{name}.holdout_disclosures']:.0f}  "
                    f"{metrics[f'{name}.epsilon_lower_exact']:.3f}",
                    flush=True,
                )
                if name == "semantic":
                    base = run_encoder_only([out / "train.jsonl", out / "holdout.jsonl", synthetic])
                    print(
                        f"{'':<8} {'encoder only':<10} {base:7.1f}   semantic audit adds {100 * (wall / base - 1):.0f} %",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
