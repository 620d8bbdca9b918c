"""Benchmark of one remediation round (train + sample + utility + gate) (README numbers).

    .venv/bin/python bench/bench_remediation.py --records 2000
    .venv/bin/python bench/bench_remediation.py --records 10000 --epochs 2 --dp-epochs 2

A Faker support-chat corpus of about ``2 × records`` records is split with ``gate split``
(p = 1/2), so train holds about ``records`` records. ``gate remediate`` then runs with
``policies/remediate.yaml`` (the standard audits: ngram, pii with spaCy, semantic,
membership) and the reference generator, with the epochs given here and the DP-SGD schedule
``[8]``, in its own process (wall time and peak RSS by os.wait4). The per-phase seconds of
every round come from its ``remediation.json``.

Round 0 with few epochs rarely memorises, so it may pass and end the loop before a DP-SGD
round; the DP-SGD training of the same epochs is then timed on its own (same corpus,
same generator settings) so that both kinds of training are always reported. Training
time is linear in epochs: the per-epoch figure scales the default epochs of the policy.
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
import yaml

from gate.demo.corpora import make_faker, support_records

ROOT = Path(__file__).resolve().parents[1]


def write_corpus(path: Path, records: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    fake = make_faker(seed)
    rows: list[dict[str, str]] = []
    batch = 0
    while len(rows) < 2 * records:  # two records per user on average
        for r in support_records(1000, rng=rng, fake=fake):
            r["user_id"] = f"b{batch}-{r['user_id']}"
            r["record_id"] = f"b{batch}-{r['record_id']}"
            rows.append(r)
        batch += 1
    rows = rows[: 2 * records]
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    words = sum(len(r["text"].split()) for r in rows) / len(rows)
    print(f"corpus: {len(rows)} records, {words:.0f} words/record", flush=True)
    return len(rows)


def write_policy(path: Path, *, epochs: int, dp_epochs: int, sample_size: int) -> None:
    policy = yaml.safe_load((ROOT / "policies" / "remediate.yaml").read_text())
    policy["remediation"]["epochs"] = epochs
    policy["remediation"]["sample_size"] = sample_size
    policy["remediation"]["dpsgd"]["epsilons"] = [8]
    policy["remediation"]["dpsgd"]["epochs"] = dp_epochs
    path.write_text(yaml.safe_dump(policy, sort_keys=False))


def run(cmd: list[str]) -> tuple[float, float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss / 1024**2, os.waitstatus_to_exitcode(status)


def time_dp_fit(policy: Path, manifest: Path, *, epochs: int) -> dict[str, float]:
    """DP-SGD training at ε = 8 of the same generator on the same train users."""
    from gate.data.bundle import load_source
    from gate.generators.base import DpSgdSpec
    from gate.generators.reference import ReferenceGenerator
    from gate.policy.loader import load_policy
    from gate.quiet import quiet_libraries
    from gate.remediation.schedule import default_delta
    from gate.remediation.setup import remediation_setup

    quiet_libraries(verbose=False)
    loaded = load_policy(policy)
    setup = remediation_setup(loaded, generator=None, method=None)
    records = load_source(
        membership=loaded.policy.membership, text=loaded.policy.text, manifest=manifest
    )
    users = setup.train_users(records.frame)
    generator = ReferenceGenerator(setup.generator_config, seed=0)
    spec = DpSgdSpec(epsilon=8.0, delta=default_delta(delta=None, train_users=len(users)))
    start = time.perf_counter()
    report = generator.fit(users, epochs=epochs, privacy=spec)
    seconds = time.perf_counter() - start
    assert report.privacy is not None
    return {"seconds": seconds, "users": len(users), "epsilon": report.privacy.epsilon}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=2000, help="train records (about)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs of round 0")
    parser.add_argument("--dp-epochs", type=int, default=4, help="epochs of the DP-SGD round")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        write_corpus(tmp / "source.jsonl", args.records, args.seed)
        gate = [sys.executable, "-m", "gate"]
        subprocess.run(
            [
                *gate,
                "split",
                "--source",
                str(tmp / "source.jsonl"),
                "--seed",
                str(args.seed),
                "--out",
                str(tmp / "split"),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        manifest = tmp / "split" / "split-manifest.json"
        policy = tmp / "policy.yaml"
        train = json.loads(manifest.read_text())["train"]["records"]
        # a release as large as train, as the README's numbers were measured
        write_policy(policy, epochs=args.epochs, dp_epochs=args.dp_epochs, sample_size=train)
        wall, rss, code = run(
            [
                *gate,
                "remediate",
                "--quiet",
                "--no-mlflow",
                "--policy",
                str(policy),
                "--manifest",
                str(manifest),
                "--out",
                str(tmp / "out"),
                "--seed",
                str(args.seed),
            ]
        )
        if code not in (0, 1):
            raise SystemExit(f"gate remediate exited {code}")
        report = json.loads((tmp / "out" / "remediation.json").read_text())
        print(f"gate remediate: {wall:.0f} s wall, peak RSS {rss:.2f} GB, exit {code}")
        rounds = report["rounds"]
        for r in rounds:
            s = r["seconds"]
            total = s["train"] + s["sample"] + s["utility"] + s["gate"]
            epochs = args.epochs if r["method"] == "none" else args.dp_epochs
            print(
                f"round {r['round']} ({r['method']}, {r['release']['records']} records): "
                f"train {s['train']:.0f} s ({s['train'] / epochs:.1f} s/epoch), "
                f"sample {s['sample']:.0f} s, utility {s['utility']:.0f} s, "
                f"gate {s['gate']:.0f} s; round {total:.0f} s; {r['status']}",
                flush=True,
            )
        if not any(r["method"] == "dpsgd" for r in rounds):
            dp = time_dp_fit(policy, manifest, epochs=args.dp_epochs)
            print(
                f"DP-SGD training alone (ε = 8, {dp['users']:.0f} users, accountant ε "
                f"{dp['epsilon']:.2f}): {dp['seconds']:.0f} s "
                f"({dp['seconds'] / args.dp_epochs:.1f} s/epoch)"
            )


if __name__ == "__main__":
    main()
