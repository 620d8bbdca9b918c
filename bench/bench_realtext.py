"""The standard policy end to end on real-length e-mails (README numbers).

    .venv/bin/python bench/bench_realtext.py --records 1500

``3 × records`` senders each write one e-mail (``gate.demo.corpora.email_threads``: 200–800
words with signatures, quoted replies, phone numbers, e-mail and street addresses); a third
are train, a third holdout, and the release is ``records`` e-mails of up to 450 words from an
order-3 word Markov chain fitted on train (a leaky release). One ``gate check`` process
runs ``policies/standard.yaml`` (ngram, pii, semantic disclosure classes; ngram, pii and
embedding membership scorers) with ``--no-mlflow``; the wall time, peak RSS and the
seconds of every class and scorer recorded in the report are printed.

``--warm``: the policy's ``pii`` and ``semantic`` classes get a ``cache_dir``; the first
run fills it, and a second release (another chain sample from the same train) is gated
against the same train and holdout, as in CI, where each candidate release meets the same
private records.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from bench_audits import run_check, write_jsonl

from gate.demo.corpora import email_threads, leaky_release, make_faker

ROOT = Path(__file__).resolve().parents[1]


def seconds_of(node: object, path: str = "") -> list[tuple[str, float]]:
    """Every ``seconds`` entry of the report, with where it is."""
    found: list[tuple[str, float]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else key
            if key == "seconds" and isinstance(value, (int, float)):
                found.append((path or "total", float(value)))
            else:
                found.extend(seconds_of(value, here))
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1500)
    parser.add_argument("--policy", default=str(ROOT / "policies" / "standard.yaml"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warm", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    rows = email_threads(3 * args.records, rng=rng, fake=make_faker(args.seed))
    group = rng.permutation(len(rows)) % 3
    train = [r for r, g in zip(rows, group, strict=True) if g == 0]
    holdout = [r for r, g in zip(rows, group, strict=True) if g == 1]
    releases = [leaky_release([r["text"] for r in train], args.records, rng, max_words=450)]
    if args.warm:
        releases.append(leaky_release([r["text"] for r in train], args.records, rng, max_words=450))
    words = [len(r["text"].split()) for r in train + holdout]
    print(
        f"{len(train)} train + {len(holdout)} holdout e-mails (median {np.median(words):.0f} "
        f"words), release {args.records} e-mails; made in {time.perf_counter() - t0:.0f} s",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        write_jsonl(out / "train.jsonl", train)
        write_jsonl(out / "holdout.jsonl", holdout)
        policy = Path(args.policy)
        if args.warm:
            policy = with_caches(policy, out / "policy.yaml", out / "caches")
        for k, release in enumerate(releases):
            write_jsonl(
                out / f"release-{k}.jsonl",
                [{"record_id": f"s{i}", "text": t} for i, t in enumerate(release)],
            )
            wall, peak_gb, code = run_check(
                policy, out, out / f"release-{k}.jsonl", out / f"report-{k}"
            )
            report = json.loads((out / f"report-{k}" / "report.json").read_text())
            cache = "" if not args.warm else (" (caches filled)" if k == 0 else " (warm caches)")
            print(
                f"gate check{cache}: {wall:.1f} s wall, peak RSS {peak_gb:.2f} GB, "
                f"status {report['status']} (exit {code})"
            )
            for where, value in seconds_of(report):
                print(f"  {where:<50} {value:8.1f} s")


def with_caches(policy: Path, path: Path, caches: Path) -> Path:
    """``policy`` with a ``cache_dir`` in each ``pii`` and ``semantic`` class, written to ``path``."""
    data = yaml.safe_load(policy.read_text())
    for feature in data["audits"]["disclosure"]["features"]:
        if feature["class"] in ("pii", "semantic"):
            feature["cache_dir"] = str(caches)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


if __name__ == "__main__":
    main()
