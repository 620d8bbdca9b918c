"""The release's other readings (``text.read_joined_words``): their cost in the ``ngram``
class on real-length e-mails, and what they catch (README numbers).

    .venv/bin/python bench/bench_readings.py --records 1500

``3 × records`` senders each write one e-mail (``gate.demo.corpora.email_threads``); a third
are train, a third holdout. Two releases of ``records`` e-mails are gated by the ``ngram``
class alone (n = 8–16, the standard policy's), with the other readings off and on: a leaky
one (an order-3 word Markov chain fitted on train, up to 450 words), a copy of train
whose spaces are replaced by ``_`` and ``__`` in turn, and a copy of train whose spaces are
deleted. Printed: the seconds the other readings take to make (the source's words and the
readings, made when the class first asks for them; best of ``--repeats``), the readings
added, the seconds of the class once they are made (best of ``--repeats``), and the train
and holdout disclosures (T, H).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from bench_audits import write_jsonl

from gate.audits.feature_classes import NgramClass
from gate.audits.feature_store import FeatureStore
from gate.data.bundle import load_bundle
from gate.demo.corpora import email_threads, leaky_release, make_faker
from gate.policy import parse_policy
from gate.policy.models import MembershipPolicy, TextPolicy
from gate.progress import NullProgress

POLICY = """\
version: 1
name: readings
audits:
  disclosure:
    features: [{class: ngram, n_min: 8, n_max: 16}]
    thresholds: {max_epsilon: 0.5}
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1500)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = email_threads(3 * args.records, rng=rng, fake=make_faker(0))
    side = rng.permutation(len(rows)) % 3
    train = [{"user_id": f"u{i}", **r} for i, r in enumerate(rows) if side[i] == 0]
    holdout = [{"user_id": f"u{i}", **r} for i, r in enumerate(rows) if side[i] == 1]
    releases = {
        "leaky (Markov chain)": leaky_release(
            [r["text"] for r in train], args.records, rng, max_words=450
        ),
        "train joined by _ and __": [
            "".join(word + ("_" if j % 2 else "__") for j, word in enumerate(r["text"].split(" ")))
            for r in train[: args.records]
        ],
        "train, spaces deleted": [r["text"].replace(" ", "") for r in train[: args.records]],
    }
    config = parse_policy(POLICY).audits.disclosure.features[0]
    once = TextPolicy(read_joined_words=False)  # the release read once
    with tempfile.TemporaryDirectory() as folder:
        paths = {"train": Path(folder) / "train.jsonl", "holdout": Path(folder) / "holdout.jsonl"}
        write_jsonl(paths["train"], train)
        write_jsonl(paths["holdout"], holdout)
        for name, texts in releases.items():
            release = Path(folder) / "release.jsonl"
            write_jsonl(release, [{"text": t} for t in texts])
            bundle = load_bundle(membership=MembershipPolicy(), synthetic=release, **paths)
            made = float("inf")
            for _ in range(args.repeats):
                fresh = replace(bundle)  # the readings are made on first use, once per bundle
                started = time.perf_counter()
                other = fresh.release_other_readings
                made = min(made, time.perf_counter() - started)
            print(
                f"{name:26s} the other readings take {made:5.2f} s to make "
                f"({0 if other is None else len(other)} readings)",
                flush=True,
            )
            bundle = fresh  # its readings made: the class below is timed without making them
            for readings in ("off", "on"):
                read = (
                    bundle if readings == "on" else replace(bundle, text=once, release_written=None)
                )
                best = float("inf")
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    found = NgramClass().disclosures(
                        read, config, FeatureStore(read, NullProgress())
                    )
                    best = min(best, time.perf_counter() - started)
                train_users = read.user_is_train
                t = int(found.user_counts[train_users].sum())
                h = int(found.user_counts[~train_users].sum())
                added = found.details.get("release_readings_added", 0)
                print(
                    f"{name:26s} readings {readings:3s}: {added:5d} added, ngram class "
                    f"{best:6.2f} s, T {t}, H {h}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
