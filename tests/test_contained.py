"""Texts found whole inside longer texts (:mod:`gate.features.contained`): hand-made cases
and a comparison with a plain-Python search on random texts."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

from gate.features.contained import PREFIX_CHARACTERS, containing_rows


def _pairs(candidates: list[str], rows: list[str], **kwargs: int) -> set[tuple[int, int]]:
    found, where = containing_rows(pa.array(candidates), pa.array(rows), **kwargs)
    return set(zip(found.tolist(), where.tolist(), strict=True))


def test_a_text_inside_a_template_or_packed_with_another_is_found() -> None:
    words = "one two three four five six seven eight nine"
    candidates = [words, "a b c d e f g h", "short one", words.replace("nine", "ten")]
    rows = [
        f"### Note: {words.replace(' ', ', ', 2)}! end",  # punctuation between its words
        "nothing here",
        "x a b c d e f g h",
        f"{words} ten",
        "a b c d e f g",  # one word short
        f"{words}\n\na b c d e f g h",  # two packed into one row
    ]
    assert _pairs(candidates, rows, min_words=8) == {(0, 0), (1, 2), (0, 3), (0, 5), (1, 5)}


def test_words_between_or_a_word_joined_to_its_neighbour_is_not_the_text() -> None:
    text = "one two three four five six seven eight nine"
    rows = [text.replace("five", "five and"), "zero" + text, text.replace(" ", "")]
    assert _pairs([text], rows, min_words=8) == set()


def test_a_candidate_under_min_words_is_not_looked_for() -> None:
    text = "one two three four five six seven eight nine"
    assert _pairs([text], [f"x {text} y"], min_words=10) == set()
    assert _pairs([text], [f"x {text} y"], min_words=9) == {(0, 0)}
    with pytest.raises(ValueError, match="min_words must be >= anchor >= 1; found min_words=4"):
        containing_rows(pa.array([text]), pa.array([text]), min_words=4)


def test_an_opening_of_long_words_or_a_shared_one_is_still_found() -> None:
    """An opening cut inside its first words cannot be tested, so the text is tokenised
    whole; many candidates that open alike each find their own rows."""
    long_words = " ".join(["x" * 60] * 4 + ["a", "b", "c", "d", "e", "f", "g", "h"])
    assert len(long_words) > PREFIX_CHARACTERS
    shared = "dear sir or madam i am writing to"
    candidates = [long_words] + [f"{shared} ask about order {i} of mine" for i in range(50)]
    rows = [f"q {long_words} r"] + [f"> {shared} ask about order {i} of mine" for i in (7, 31)]
    assert _pairs(candidates, rows, min_words=8) == {(0, 0), (8, 1), (32, 2)}


def test_agrees_with_a_plain_python_search_on_random_texts() -> None:
    rng = np.random.default_rng(3)
    vocabulary = ["a", "b", "c", "dd", "e"]

    def text(n: int) -> list[str]:
        return [vocabulary[i] for i in rng.integers(0, len(vocabulary), n)]

    candidates = [text(int(rng.integers(6, 14))) for _ in range(60)]
    rows = [text(int(rng.integers(0, 40))) for _ in range(80)]
    for r, row in enumerate(rows[:30]):  # plant some candidates
        c = candidates[int(rng.integers(0, 60))]
        at = int(rng.integers(0, len(row) + 1))
        rows[r] = row[:at] + c + row[at:]
    expected = set()
    for c, words in enumerate(candidates):
        if len(words) < 8:
            continue
        pattern = re.compile(r"(?:^| )" + re.escape(" ".join(words)) + r"(?: |$)")
        expected |= {(c, r) for r, row in enumerate(rows) if pattern.search(" ".join(row))}
    found = _pairs([" ".join(c) for c in candidates], [" ".join(r) for r in rows], min_words=8)
    assert found == expected and len(expected) >= 15


def test_records_of_one_template_are_paired_with_their_own_rows_only() -> None:
    """A review: records that differ in one word none of a few evenly spaced anchors
    covered paired every row with every record (10k records: 8 GB); each record's anchor
    is now its rarest n-gram, which holds the word that tells it apart."""
    template = [f"w{i}" for i in range(48)]

    def record(i: int) -> str:
        return " ".join([*template[:8], f"id{i}", *template[9:]])

    candidates = [record(i) for i in range(300)] + [record(7).replace("w30", "w30,")]
    rows = [f"### Response: {record(i)}</s>" for i in range(0, 300, 3)] + [record(7)]
    expected = {(i, i // 3) for i in range(0, 300, 3)} | {(7, 100), (300, 100)}
    assert _pairs(candidates, rows, min_words=16) == expected  # 300: 7's words


def test_an_opening_of_long_words_in_a_short_text_is_not_looked_for() -> None:
    assert _pairs(["x" * 200 + " a b"], ["q " + "x" * 200 + " a b c"], min_words=8) == set()
