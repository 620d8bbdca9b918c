"""The cost of ``--training-data``: loading a bundle with and without the check.

    .venv/bin/python bench/bench_training_data.py --records 100000 --repeats 3 \
        [--template shared|varied|chat]

Writes ``records`` train and ``records`` holdout records (one user each, ~100
Zipf-distributed words) and a training file that is the train file (with ``--template``,
each record inside a prompt template, without ids: ``shared``, one template, which the
check takes off every row; ``varied``, an instruction that names the row's number, so
that every record is looked for within the rows,
:func:`gate.features.contained.containing_rows`; ``chat``, a ``messages`` list of a
system, a user and an assistant turn, read by
:func:`gate.data.record_texts.texts_of_records`), then loads the
bundle (:func:`gate.data.bundle.load_bundle`, the default text reading) with and without
``training_data``, interleaved, ``repeats`` times each. Prints the median wall times,
their difference (the check: reading the training file, reading its texts as the policy
does, comparing them with the source's) and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from gate.data.bundle import load_bundle
from gate.policy.models import MembershipPolicy, TextPolicy


def write_side(path: Path, records: int, start: int, rng: np.random.Generator) -> None:
    vocab = np.array([f"w{i}" for i in range(50_000)])
    with path.open("w", encoding="utf-8") as out:
        for first in range(0, records, 10_000):
            rows = min(10_000, records - first)
            ranks = np.minimum(rng.zipf(1.3, size=(rows, 100)), vocab.size) - 1
            for i, row in enumerate(vocab[ranks], start=start + first):
                out.write(json.dumps({"user_id": f"u{i}", "text": " ".join(row)}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--template", choices=("shared", "varied", "chat"))
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="bench-training-data-") as tmp:
        files = {side: Path(tmp) / f"{side}.jsonl" for side in ("train", "holdout")}
        write_side(files["train"], args.records, 0, rng)
        write_side(files["holdout"], args.records, args.records, rng)
        trained_on = files["train"]
        if args.template:
            trained_on = Path(tmp) / "templated.jsonl"
            with files["train"].open(encoding="utf-8") as rows, trained_on.open("w") as out:
                for number, row in enumerate(rows):
                    text = json.loads(row)["text"]
                    if args.template == "chat":
                        turns = [("system", "You write messages."), ("user", "Write one.")]
                        messages = [{"role": r, "content": c} for r, c in turns]
                        messages.append({"role": "assistant", "content": text})
                        out.write(json.dumps({"messages": messages}) + "\n")
                        continue
                    task = "a message" if args.template == "shared" else f"message {number}"
                    prompt = f"### Instruction: write {task}.\n### Response: {text}</s>"
                    out.write(json.dumps({"text": prompt}) + "\n")
        synthetic = Path(tmp) / "synthetic.jsonl"
        synthetic.write_text(json.dumps({"text": "a release record"}) + "\n")
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for checked in (False, True):
                started = time.perf_counter()
                bundle = load_bundle(
                    train=files["train"],
                    holdout=files["holdout"],
                    synthetic=synthetic,
                    membership=MembershipPolicy(),
                    text=TextPolicy(),
                    training_data=trained_on if checked else None,
                )
                times[checked].append(time.perf_counter() - started)
        found = bundle.membership.training_data
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    without, with_check = (statistics.median(times[c]) for c in (False, True))
    print(
        f"{args.records:,} + {args.records:,} source records, a training file of "
        f"{args.records:,}{f' ({args.template} template)' if args.template else ''}: load_bundle {without:.2f} s without the check, {with_check:.2f} s "
        f"with it (+{with_check - without:.2f} s; runs {times}); peak RSS {peak:.2f} GB; "
        f"{found.summary() if found else '-'}"
    )


if __name__ == "__main__":
    main()
