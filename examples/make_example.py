"""Make the bundled example release (committed under examples/bundle/).

Faker-made customers write support chats that carry names, e-mails, phone numbers and
account numbers. Users are split into train/holdout by `gate split` (Bernoulli(1/2),
seed 7), and a deliberately leaky generator, an order-3 word Markov chain fitted on the
train records, writes the candidate synthetic release.

    python examples/make_example.py            # rewrites examples/bundle/
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from faker import Faker

from gate.data.split import split_source

OPENERS = [
    "Hi, this is {name} and I need help with my account.",
    "Hello support team, {name} here.",
    "Good morning, my name is {name}.",
    "Hey, {name} writing about an issue with a recent order.",
]
DETAILS = [
    "You can reach me at {email} or call {phone} after five.",
    "My account number is {account} and the card ends in {card4}.",
    "I moved to {address} last month and the statement still goes to the old place.",
    "The charge of {amount} dollars on {date} was not made by me.",
    "My daughter {relative} tried to log in from {city} and got locked out.",
    "Please send the refund for order {order} to {email}.",
    "I was born on {dob}, in case you need to verify who I am.",
    "The package for order {order} was left at {address} but nobody was home.",
]
CLOSERS = [
    "Thanks for your help.",
    "Looking forward to hearing from you soon.",
    "Please call me back at {phone} if anything is unclear.",
    "Regards, {name}.",
]


def make_records(n_users: int, rng: np.random.Generator, fake: Faker) -> list[dict[str, str]]:
    records = []
    for u in range(n_users):
        person = {
            "name": fake.name(),
            "email": fake.email(),
            "phone": fake.phone_number(),
            "account": fake.bban(),
            "card4": f"{int(rng.integers(0, 10_000)):04d}",
            "address": fake.street_address(),
            "city": fake.city(),
            "relative": fake.first_name_female(),
            "dob": fake.date_of_birth(minimum_age=18, maximum_age=90).isoformat(),
        }
        for r in range(int(rng.integers(1, 4))):
            fields = dict(
                person,
                amount=f"{rng.uniform(5, 900):.2f}",
                date=fake.date_this_year().isoformat(),
                order=f"A{int(rng.integers(10**6, 10**7))}",
            )
            parts = [OPENERS[rng.integers(len(OPENERS))]]
            for i in rng.choice(len(DETAILS), size=3, replace=False):
                parts.append(DETAILS[i])
            parts.append(fake.paragraph(nb_sentences=2))
            parts.append(CLOSERS[rng.integers(len(CLOSERS))])
            records.append(
                {
                    "record_id": f"r{u:04d}-{r}",
                    "user_id": f"u{u:04d}",
                    "text": " ".join(p.format(**fields) for p in parts),
                }
            )
    return records


class MarkovChain:
    """Order-k word Markov chain: the leaky reference generator of the example."""

    def __init__(self, texts: list[str], order: int = 3) -> None:
        self.order = order
        self.next_words: dict[tuple[str, ...], list[str]] = defaultdict(list)
        self.starts: list[tuple[str, ...]] = []
        for text in texts:
            words = text.split()
            if len(words) <= order:
                continue
            self.starts.append(tuple(words[:order]))
            for i in range(len(words) - order):
                self.next_words[tuple(words[i : i + order])].append(words[i + order])

    def sample(self, rng: np.random.Generator, max_words: int = 80) -> str:
        state = self.starts[rng.integers(len(self.starts))]
        words = list(state)
        while len(words) < max_words:
            options = self.next_words.get(tuple(words[-self.order :]))
            if not options:
                break
            words.append(options[rng.integers(len(options))])
        return " ".join(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "bundle"))
    parser.add_argument("--users", type=int, default=240)
    parser.add_argument("--synthetic", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    fake = Faker("en_US")
    fake.seed_instance(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    source = out / "source.jsonl"
    with open(source, "w", encoding="utf-8") as handle:
        for record in make_records(args.users, rng, fake):
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")

    split = split_source(source, p=0.5, seed=7, by="user_id", out_dir=out / "split")
    train_texts = [
        json.loads(line)["text"]
        for line in (out / "split" / split.manifest.train.path).read_text().splitlines()
    ]
    chain = MarkovChain(train_texts, order=3)
    with open(out / "synthetic.jsonl", "w", encoding="utf-8") as handle:
        for i in range(args.synthetic):
            record = {"record_id": f"s{i:04d}", "text": chain.sample(rng)}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"wrote {source}, {out / 'split'}, {out / 'synthetic.jsonl'}")


if __name__ == "__main__":
    main()
