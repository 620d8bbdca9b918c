"""Faker-made support chats with PII, and three kinds of release made from them.

* a **leaky** release: an order-3 word Markov chain fitted on train regurgitates long
  spans of train records;
* a **phantom-only** control: the same chain fitted on a public part of the corpus that is
  neither train nor holdout (disclosures happen, but they are phantoms);
* a **rewrite** release: every train record paraphrased (synonyms, filler words) so that
  almost no 8-gram survives, while its meaning, and its embedding, stay close.

Needs the ``faker`` package (extras ``examples`` or ``dev``). Every random step takes the
caller's ``numpy.random.Generator``.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from typing import Any

import numpy as np

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


def make_faker(seed: int, *, today: datetime.date = datetime.date(2026, 11, 22)) -> Any:
    """A seeded en_US Faker whose dates (``date_this_year``, ``date_of_birth``) count from
    ``today``, not from the day it runs: the same seed writes the same records on any day
    (the bundled example's were written on 2026-11-22, its canary source on 2026-11-25)."""
    from faker import Faker
    from faker.providers import BaseProvider
    from faker.providers.date_time import change_year

    class FixedToday(BaseProvider):  # Faker's own two methods, with today fixed
        def date_this_year(self) -> datetime.date:
            start = today.replace(month=1, day=1)
            return self.generator.date_between_dates(start, today)

        def date_of_birth(self, *, minimum_age: int, maximum_age: int) -> datetime.date:
            start = change_year(today, -(maximum_age + 1))
            end = change_year(today, -minimum_age)
            born = self.generator.date_time_ad(start_datetime=start, end_datetime=end).date()
            return born if born != start else born + datetime.timedelta(days=1)

    fake = Faker("en_US")
    fake.add_provider(FixedToday)
    fake.seed_instance(seed)
    return fake


def support_records(
    n_users: int, *, rng: np.random.Generator, fake: Any, max_records: int = 3
) -> list[dict[str, str]]:
    """Support chats: each user writes 1..max_records messages carrying its PII."""
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
        for r in range(int(rng.integers(1, max_records + 1))):
            fields = dict(
                person,
                amount=f"{rng.uniform(5, 900):.2f}",
                date=fake.date_this_year().isoformat(),
                order=f"A{int(rng.integers(10**6, 10**7))}",
            )
            parts = [OPENERS[rng.integers(len(OPENERS))]]
            parts += [DETAILS[i] for i in rng.choice(len(DETAILS), size=3, replace=False)]
            parts.append(fake.paragraph(nb_sentences=2))
            parts.append(CLOSERS[rng.integers(len(CLOSERS))])
            records.append(
                {
                    "record_id": f"r{u:05d}-{r}",
                    "user_id": f"u{u:05d}",
                    "text": " ".join(p.format(**fields) for p in parts),
                }
            )
    return records


def email_threads(
    n_users: int, *, rng: np.random.Generator, fake: Any, min_words: int = 200, max_words: int = 800
) -> list[dict[str, str]]:
    """Real-length e-mails, one per sender: a greeting, paragraphs of prose with PII
    (phones, e-mail addresses, street addresses, names, dates), a signature block, and a
    quoted earlier message of the thread from another person, ``min_words..max_words``
    words in all (what teams actually publish synthetic versions of)."""
    records = []
    for u in range(n_users):
        sender, other = fake.name(), fake.name()
        phone, email = fake.phone_number(), fake.email()
        target = int(rng.integers(min_words, max_words + 1))
        body = [f"Hi {other.split()[0]},", ""]
        words = 0
        while words < int(target * 0.75):
            sentences = [fake.sentence(nb_words=int(rng.integers(8, 20))) for _ in range(4)]
            detail = DETAILS[rng.integers(len(DETAILS))].format(
                name=sender,
                email=email,
                phone=phone,
                account=fake.bban(),
                card4=f"{int(rng.integers(0, 10_000)):04d}",
                address=fake.street_address(),
                city=fake.city(),
                relative=fake.first_name(),
                dob=fake.date_of_birth(minimum_age=18, maximum_age=90).isoformat(),
                amount=f"{rng.uniform(5, 900):.2f}",
                date=fake.date_this_year().isoformat(),
                order=f"A{int(rng.integers(10**6, 10**7))}",
            )
            sentences.insert(int(rng.integers(0, 5)), detail)
            paragraph = " ".join(sentences)
            body.append(paragraph)
            body.append("")
            words += len(paragraph.split())
        body += [
            "Best regards,",
            sender,
            fake.job(),
            fake.company(),
            f"{fake.street_address()}, {fake.city()}, {fake.state_abbr()} {fake.postcode()}",
            f"Phone: {phone} | Mobile: {fake.phone_number()}",
            email,
            "",
            f"On {fake.date_this_year().isoformat()}, {other} <{fake.email()}> wrote:",
        ]
        quoted = fake.paragraph(nb_sentences=int(rng.integers(3, 9)))
        body += [f"> {line}" for line in quoted.split(". ")]
        records.append({"record_id": f"e{u:05d}", "user_id": f"u{u:05d}", "text": "\n".join(body)})
    return records


class MarkovChain:
    """Order-k word Markov chain: a small generator that memorises its training text."""

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


SYNONYMS = {
    "help": "assistance",
    "account": "profile",
    "issue": "problem",
    "recent": "latest",
    "order": "purchase",
    "reach": "contact",
    "call": "phone",
    "after": "past",
    "number": "no.",
    "card": "credit card",
    "ends": "finishes",
    "moved": "relocated",
    "month": "mo.",
    "statement": "bill",
    "still": "nevertheless",
    "goes": "is sent",
    "old": "previous",
    "place": "address",
    "charge": "payment",
    "made": "done",
    "daughter": "child",
    "tried": "attempted",
    "locked": "blocked",
    "send": "transfer",
    "refund": "reimbursement",
    "born": "delivered",
    "verify": "confirm",
    "package": "parcel",
    "left": "dropped",
    "nobody": "no one",
    "home": "in",
    "thanks": "thank you",
    "looking": "hoping",
    "forward": "ahead",
    "hearing": "a reply",
    "soon": "shortly",
    "please": "kindly",
    "back": "again",
    "unclear": "confusing",
    "regards": "best",
    "hello": "greetings",
    "hi": "hey",
    "good": "lovely",
    "morning": "day",
    "name": "name's",
    "writing": "messaging",
    "need": "require",
    "team": "crew",
}
FILLERS = ["basically", "honestly", "well", "so", "really", "just"]


def paraphrase(text: str, rng: np.random.Generator, *, filler_every: int = 4) -> str:
    """A crude rewrite: synonyms for common words and a filler word every few tokens, so
    no run of ``filler_every + 1`` original tokens survives while the meaning stays."""
    out = []
    for i, word in enumerate(text.split()):
        bare = word.strip(".,!?").lower()
        swapped = SYNONYMS.get(bare)
        out.append(word.replace(word.strip(".,!?"), swapped) if swapped else word)
        if (i + 1) % filler_every == 0:
            out.append(FILLERS[rng.integers(len(FILLERS))])
    return " ".join(out)


def leaky_release(
    train_texts: list[str], n: int, rng: np.random.Generator, *, max_words: int = 80
) -> list[str]:
    chain = MarkovChain(train_texts, order=3)
    return [chain.sample(rng, max_words=max_words) for _ in range(n)]


def rewrite_release(train_texts: list[str], rng: np.random.Generator) -> list[str]:
    return [paraphrase(t, rng) for t in train_texts]
