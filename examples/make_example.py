"""Make the bundled example release (committed under examples/bundle/).

Faker-made customers write support chats that carry names, e-mails, phone numbers and
account numbers. Users are split into train/holdout by `gate split` (Bernoulli(1/2),
seed 7, the earlier unkeyed draw), and a deliberately leaky generator, an order-3 word
Markov chain fitted on the train records, writes the candidate synthetic release.

    .venv/bin/python examples/make_example.py            # rewrites examples/bundle/
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import numpy as np

from gate.data.split import UNKEYED, split_source
from gate.demo.corpora import leaky_release, make_faker, support_records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "bundle"))
    parser.add_argument("--users", type=int, default=240)
    parser.add_argument("--synthetic", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--public-users", type=int, default=120)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    fake = make_faker(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    source = out / "source.jsonl"
    with open(source, "w", encoding="utf-8") as handle:
        for record in support_records(args.users, rng=rng, fake=fake):
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")

    # the earlier, unkeyed draw: the bundle was made before gate split keyed its draw by
    # the users' names, and the README's numbers are this release's (the report says so)
    split = split_source(source, p=0.5, seed=7, by="user_id", out_dir=out / "split", method=UNKEYED)
    train_texts = [
        json.loads(line)["text"]
        for line in (out / "split" / split.manifest.train.path).read_text().splitlines()
    ]
    with open(out / "synthetic.jsonl", "w", encoding="utf-8") as handle:
        for i, text in enumerate(leaky_release(train_texts, args.synthetic, rng)):
            handle.write(json.dumps({"record_id": f"s{i:04d}", "text": text}) + "\n")
    # Public text for the canary audit (prefixes and base LM): other Faker-made customers,
    # in neither train nor holdout; a separate seed leaves the files above unchanged.
    public_rng = np.random.default_rng(args.seed + 1)
    public = out / "canary-source.jsonl"
    with open(public, "w", encoding="utf-8") as handle:
        for record in support_records(
            args.public_users,
            rng=public_rng,
            fake=make_faker(args.seed + 1, today=datetime.date(2026, 11, 25)),
        ):
            record = {**record, "user_id": "public-" + record["user_id"]}
            record["record_id"] = "public-" + record["record_id"]
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"wrote {source}, {out / 'split'}, {out / 'synthetic.jsonl'}, {public}")


if __name__ == "__main__":
    main()
