"""Text normalisation (``normalize_text``) on real-length e-mails: the cost of each step
of the ``text`` policy on texts that are not ASCII (README numbers).

    .venv/bin/python bench/bench_normalize.py --records 20000

``records`` e-mails of 200–800 words (``gate.demo.corpora.email_threads``), each with one
curly apostrophe so that none takes the ASCII fast path, are normalised under the default
policy (strip invisible characters, fold confusables, NFKC) and with each step switched
off; the best of three runs per policy is printed with records/s and MB/s. A copy whose
Latin letters are written as Cyrillic lookalikes shows the fold's cost where it has most
to do, and a transliteration into Cyrillic letters its cost on a corpus in another script
(whose words it reads and leaves). ``markup: html`` is timed on the plain e-mails (none
holds a ``<`` or ``&``), on the e-mails as light HTML (a ``<div>``, a ``<br>`` per line) and
as an HTML client might write them (a paragraph per line, a ``<span>`` per word,
``&nbsp;`` between words). ``display_order`` (a default step) is timed on the e-mails
written backwards between a right-to-left override and its end, and with their words in
reverse order between right-to-left marks (each displayed as the e-mail).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from gate.data.confusables import ascii_lookalikes
from gate.data.normalize import normalize_text
from gate.demo.corpora import email_threads, make_faker
from gate.policy.models import TextPolicy

# Latin letters as Cyrillic ones, most of which look like no Latin letter: words as a
# Russian corpus has them (each holds a letter without an ASCII lookalike, so it is left).
TRANSLITERATION = str.maketrans(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "абцдефгхийклмнопярстуввхызАБЦДЕФГХИЙКЛМНОПЯРСТУВВХЫЗ",
)

POLICIES = {
    "default (strip, fold, NFKC)": TextPolicy(),
    "no fold (strip, NFKC)": TextPolicy(fold_confusables=False),
    "fold only": TextPolicy(strip_invisible=False, normalization="none"),
    "NFKC only": TextPolicy(strip_invisible=False, fold_confusables=False),
}


def light_html(text: str) -> str:
    return "<div>" + "<br>".join(text.split("\n")) + "</div>"


def span_html(text: str) -> str:
    return "".join(
        "<p>" + "&nbsp;".join(f"<span>{w}</span>" for w in line.split()) + "</p>"
        for line in text.split("\n")
    )


def backwards(text: str) -> str:
    """Each line written backwards, displayed forwards (no bracket mirrored: timing only)."""
    return "\n".join("\u202e" + line[::-1] + "\u202c" for line in text.split("\n"))


def words_reversed(text: str) -> str:
    """Each line's words in reverse order between right-to-left marks."""
    return "\n".join(
        "\u200f" + "\u200f \u200f".join(w + "\u200e" for w in line.split(" ")[::-1])
        for line in text.split("\n")
    )


def best_of(texts: pd.Series, policy: TextPolicy, repeats: int = 3) -> float:
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        normalize_text(texts, policy)
        seconds.append(time.perf_counter() - start)
    return min(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    records = email_threads(args.records, rng=rng, fake=make_faker(0))
    texts = pd.Series([r["text"].replace("'", "\u2019", 1) + " \u2019" for r in records])
    cyrillic = pd.Series([t.translate(str.maketrans("aeopcxy", "аеорсху")) for t in texts])
    russian = pd.Series([t.translate(TRANSLITERATION) for t in texts])
    ascii_lookalikes()  # the table is built once per process: not part of a run
    megabytes = texts.str.len().sum() / 1e6
    print(f"{len(texts)} e-mails, {megabytes:.1f} M characters, mean {texts.str.len().mean():.0f}")
    for name, policy in POLICIES.items():
        seconds = best_of(texts, policy)
        print(
            f"{name:32s} {seconds:7.2f} s  {len(texts) / seconds:9.0f} rec/s  "
            f"{megabytes / seconds:6.1f} M chars/s"
        )
    markup = TextPolicy(markup="html")
    for corpus, series in (
        ("plain", texts),
        ("light HTML", texts.map(light_html)),
        ("span per word", texts.map(span_html)),
    ):
        seconds = best_of(series, markup)
        print(
            f"markup: html, {corpus:14s} {seconds:7.2f} s  {len(texts) / seconds:9.0f} rec/s  "
            f"{series.str.len().sum() / 1e6 / seconds:6.1f} M chars/s"
        )
    for corpus, series in (
        ("backwards", texts.map(backwards)),
        ("words reversed", texts.map(words_reversed)),
    ):
        seconds = best_of(series, POLICIES["default (strip, fold, NFKC)"])
        print(
            f"display order, {corpus:14s} {seconds:7.2f} s  {len(texts) / seconds:9.0f} rec/s  "
            f"{series.str.len().sum() / 1e6 / seconds:6.1f} M chars/s"
        )
    for corpus, series in (("Cyrillic lookalikes", cyrillic), ("Cyrillic script", russian)):
        for name in ("default (strip, fold, NFKC)", "no fold (strip, NFKC)"):
            seconds = best_of(series, POLICIES[name])
            print(f"{corpus}, {name:11s} {seconds:7.2f} s  {len(texts) / seconds:9.0f} rec/s")


if __name__ == "__main__":
    main()
