"""Make the bundled rewrite release (examples/bundle/rewrites.jsonl) from the committed
train split: each train record rewritten by light edits (synonyms for common words and a
filler word every four tokens), with ``source_id`` naming the record it rewrites. Names,
numbers and addresses survive, so the distinguishability audit should re-identify the
sources. Deterministic (no Faker): the same file on every machine.

    .venv/bin/python examples/make_rewrites.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gate.demo.corpora import paraphrase

BUNDLE = Path(__file__).parent / "bundle"


def main() -> None:
    rng = np.random.default_rng(11)
    rows = [json.loads(line) for line in (BUNDLE / "split" / "train.jsonl").open()]
    with (BUNDLE / "rewrites.jsonl").open("w", encoding="utf-8") as out:
        for i, row in enumerate(rows):
            record = {
                "record_id": f"w{i:04d}",
                "source_id": row["record_id"],
                "text": paraphrase(row["text"], rng),
            }
            out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
