"""Benchmark of the canary audit (README numbers).

    .venv/bin/python bench/bench_canary.py signals --release 10000 100000 --canaries 1000
    .venv/bin/python bench/bench_canary.py audit --records 2000

``signals``: the release-only signals of ``--canaries`` canaries (16 words) against a
release of real-length support e-mails (four Faker support chats joined: about 250 words
per record): the 2-gram model and the top-25 Jaccard (vectorised, no loop over tokens),
and at the smallest size the MiniLM embedding signal. Best of 3 (embedding: 1 run).

``audit``: ``gate canary`` end to end with ``policies/canary.yaml`` on a Faker corpus of
about ``2 × records`` records split by ``gate split --canary-fraction 0.1``, in its own
process (wall time and peak RSS by os.wait4); the per-phase seconds come from report.json.
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

from gate.demo.corpora import make_faker, support_records

ROOT = Path(__file__).resolve().parents[1]


def corpus_rows(records: int, seed: int) -> list[dict[str, str]]:
    rng = np.random.default_rng(seed)
    fake = make_faker(seed)
    rows: list[dict[str, str]] = []
    batch = 0
    while len(rows) < records:
        for r in support_records(1000, rng=rng, fake=fake):
            r["user_id"] = f"b{batch}-{r['user_id']}"
            r["record_id"] = f"b{batch}-{r['record_id']}"
            rows.append(r)
        batch += 1
    return rows[:records]


def emails(n: int, seed: int) -> list[str]:
    """Real-length records: four support chats per record (about 250 words)."""
    chats = [r["text"] for r in corpus_rows(min(4 * n, 40_000), seed)]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(chats), size=(n, 4))
    return [" ".join(chats[j] for j in row) for row in picks]


def bench_signals(sizes: list[int], canaries: int) -> None:
    from gate.canary.signals import release_signals

    pool = emails(max(sizes), seed=1)
    rng = np.random.default_rng(2)
    words = " ".join(pool[:200]).split()
    starts = rng.integers(0, len(words) - 16, size=canaries)
    canary_texts = [" ".join(words[s : s + 16]) for s in starts]
    print(
        f"{canaries} canaries of 16 words; records of {np.mean([len(t.split()) for t in pool[:500]]):.0f} words"
    )
    for n in sizes:
        release = pool[:n]
        for signal in ("bigram", "jaccard"):
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                release_signals(canary_texts, release, signals=(signal,), top_k=25)
                times.append(time.perf_counter() - t0)
            print(f"release {n:>7,} records  {signal:<9} {min(times):7.2f} s", flush=True)
        if n == min(sizes):
            t0 = time.perf_counter()
            release_signals(canary_texts, release, signals=("embedding",), top_k=25)
            print(
                f"release {n:>7,} records  embedding {time.perf_counter() - t0:7.2f} s", flush=True
            )


def bench_audit(records: int, epochs: int | None) -> None:
    import yaml

    with tempfile.TemporaryDirectory(prefix="gate-bench-canary-") as tmp:
        work = Path(tmp)
        rows = corpus_rows(2 * records, seed=3)
        source = work / "source.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        gate = str(Path(sys.executable).parent / "gate")
        subprocess.run(
            [
                gate,
                "split",
                "--source",
                str(source),
                "--seed",
                "1",
                "--out",
                str(work / "split"),
                "--canary-fraction",
                "0.1",
            ],
            check=True,
        )
        policy = yaml.safe_load((ROOT / "policies" / "canary.yaml").read_text())
        if epochs is not None:
            policy["remediation"]["epochs"] = epochs
        policy_path = work / "canary.yaml"
        policy_path.write_text(yaml.safe_dump(policy), encoding="utf-8")
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [
                gate,
                "canary",
                "--quiet",
                "--no-mlflow",
                "--policy",
                str(policy_path),
                "--manifest",
                str(work / "split" / "split-manifest.json"),
                "--out",
                str(work / "out"),
            ],
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        report = json.loads((work / "out" / "report.json").read_text())
        details = report["audits"]["canary"]["details"]
        metrics = report["audits"]["canary"]["metrics"]
        print(
            f"records {records}: exit {os.waitstatus_to_exitcode(status)}, wall {wall:.0f} s, "
            f"peak RSS {usage.ru_maxrss / 1e6:.2f} GB, trainings {details['trainings']}, "
            f"phases {details['seconds']}, target fit {details['target']['seconds']} s "
            f"({details['target']['examples']} examples)"
        )
        for name, value in metrics.items():
            if name.endswith((".auc", ".epsilon_lower")):
                print(f"  {name}: {value:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    signals = sub.add_parser("signals")
    signals.add_argument("--release", type=int, nargs="+", default=[10_000, 100_000])
    signals.add_argument("--canaries", type=int, default=1000)
    audit = sub.add_parser("audit")
    audit.add_argument("--records", type=int, default=2000)
    audit.add_argument("--epochs", type=int, default=None)
    args = parser.parse_args()
    if args.what == "signals":
        bench_signals(args.release, args.canaries)
    else:
        bench_audit(args.records, args.epochs)


if __name__ == "__main__":
    main()
