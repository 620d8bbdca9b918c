"""The ``pii`` class's reading of numbers in any grouping: its cost on real-length e-mails
and its agreement with the numbers the e-mails write (README numbers).

    .venv/bin/python bench/bench_number_runs.py --records 1500

``records`` e-mails (``gate.demo.corpora.email_threads``: 200–800 words with signatures,
quoted replies, phone numbers and addresses) are read for three sets of numbers: the
national numbers of the phone numbers the e-mails write (each should be found in the
e-mail that writes it), 3,000 random 10-digit numbers, and 500 random German IBANs
(letters read too). Printed: best of ``--repeats`` seconds per set, and the pairs found.
"""

from __future__ import annotations

import argparse
import re
import time

import numpy as np

from gate.demo.corpora import email_threads, make_faker
from gate.features.number_runs import numbers_held

_PHONE = re.compile(r"\(?\b(\d{3})\)?[ .-](\d{3})[ .-](\d{4})\b")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    texts = [r["text"] for r in email_threads(args.records, rng=rng, fake=make_faker(args.seed))]
    written = {("".join(m.groups()), i) for i, t in enumerate(texts) for m in _PHONE.finditer(t)}
    phones = sorted({number for number, _ in written})
    print(f"{len(texts)} e-mails, {sum(map(len, texts)) / 1e6:.1f} M characters")
    sets = {
        f"{len(phones)} phone numbers the e-mails write": (phones, False),
        "3,000 random 10-digit numbers": (
            [str(n) for n in rng.integers(10**9, 10**10, 3000)],
            False,
        ),
        "500 random IBANs (letters read)": (
            [f"DE{n:020d}" for n in rng.integers(0, 10**18, 500)],
            True,
        ),
    }
    for name, (numbers, letters) in sets.items():
        best = np.inf
        for _ in range(args.repeats):
            start = time.perf_counter()
            held, which = numbers_held(texts, numbers, letters=letters)
            best = min(best, time.perf_counter() - start)
        found = {(numbers[n], int(t)) for t, n in zip(held, which, strict=True)}
        extra = f", {len(written - found)} written numbers missed" if name.endswith("write") else ""
        print(f"{name}: {best:.2f} s, {held.size} (text, number) pairs{extra}")


if __name__ == "__main__":
    main()
