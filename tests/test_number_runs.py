"""Numbers read through any grouping (gate/features/number_runs.py), on hand-made texts."""

from __future__ import annotations

import numpy as np
import pytest

import gate.features.number_runs as number_runs
from gate.features.number_runs import ACCOUNT_TYPES, NUMBER_TYPES, numbers_held
from gate.features.pii import normalise

SSN, PHONE = "123456789", "7755682052"


@pytest.mark.parametrize(
    "text",
    [
        "SSN 123-45-6789 on file",
        "SSN 123456789.",
        "123 45 6789",
        "123/45/6789",
        "123 \u2013 45 \u2013 6789",
        "1 2 3 4 5 6 7 8 9",
        "123-45-\n6789",
        "123\u200b45\u00ad6789",
        "123&#8209;45&nbsp;6789",
        "\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19",  # full-width digits
        "\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669",  # Arabic-Indic digits
        "ref 91234567890",  # inside a longer run
    ],
)
def test_a_number_in_any_grouping_is_held(text: str) -> None:
    texts, which = numbers_held(["nothing here", text], [SSN])
    assert texts.tolist() == [1] and which.tolist() == [0]


@pytest.mark.parametrize(
    "text",
    [
        "1234 x 56789",
        "1234a56789",
        "1234    56789",  # four blanks: more than a grouping
        "123-45-678",
        "12345678",
    ],
)
def test_letters_long_gaps_and_other_digits_are_not_the_number(text: str) -> None:
    assert numbers_held([text], [SSN])[0].size == 0


@pytest.mark.parametrize(
    "text",
    [
        "one two three, four five, six seven eight nine",
        "One-two-three four-five SIX SEVEN EIGHT NINE",
        "1 2 three 4 five 6789",
        "one double three? no: one two three, four five, six seven eight nine",
    ],
)
def test_a_number_spelled_out_in_words_is_held(text: str) -> None:
    texts, which = numbers_held([text], [SSN])
    assert texts.tolist() == [0] and which.tolist() == [0]


def test_an_account_number_holding_a_digit_word_is_still_held() -> None:
    """A review: with letters read, a digit word inside an account number (``FIVE``) had
    become a digit and the number, held before, was lost; both readings are searched."""
    texts = ["IBAN GB12 FIVE 1234 5678 90", "acct OH 12 34 56 78"]
    held, which = numbers_held(texts, ["GB12FIVE1234567890", "OH12345678"], letters=True)
    assert held.tolist() == [0, 1] and which.tolist() == [0, 1]
    assert numbers_held(["five five five one two three four"], ["5551234"], letters=True)[
        0
    ].tolist() == [0]


def test_spelled_digits_keep_their_positions_and_read_only_whole_words() -> None:
    """Words read as digits are padded to their length (runs and texts keep their
    places); a digit word inside another word (phone, someone, none) is not a digit."""
    text = "Phone someone: oh double seven, TRIPLE-five nine; none_one"
    read = number_runs._spelled_digits(text)
    assert len(read) == len(text)
    assert read.replace("\u200b", "") == "Phone someone: 0 77, 555 9; none_one"
    assert numbers_held(["call oh double seven triple five nine"], ["0775559"])[0].tolist() == [0]
    # a repeat over other blanks, a line break, a hyphen or a character reference
    for between in ("  ", "\n", "\u00a0", "\u2010", "&nbsp;"):
        text = f"oh double{between}seven triple five nine"
        assert numbers_held([text], ["0775559"])[0].tolist() == [0], repr(between)
    assert number_runs._spelled_digits("redouble five _double five").replace("\u200b", "") == (
        "redouble 5 _double 5"
    )


def test_texts_are_read_apart() -> None:
    """A run never joins the end of one text to the start of the next, whatever they hold."""
    texts = ["call 775-568", "2052 today", "a\x00775-568-2052", "775-568-2052\n"]
    held, which = numbers_held(texts, [PHONE])
    assert held.tolist() == [2, 3] and which.tolist() == [0, 0]


def test_every_number_that_reads_as_the_same_digits_is_reported() -> None:
    """A phone and an SSN value can have the same digits: both are held."""
    held, which = numbers_held(["x 775 568 2052", "123-45-6789"], [PHONE, SSN, PHONE, SSN])
    assert list(zip(held.tolist(), which.tolist(), strict=True)) == [(0, 0), (0, 2), (1, 1), (1, 3)]


def test_reading_in_chunks_gives_the_same_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    numbers = [str(n) for n in rng.integers(10**6, 10**7, 40)]
    texts = [
        f"see {numbers[i][:3]}-{numbers[i][3:]} and {rng.integers(0, 10**5)}" if i % 3 else "none"
        for i in rng.integers(0, 40, 300)
    ]
    whole = numbers_held(texts, numbers)
    monkeypatch.setattr(number_runs, "_CHUNK_CHARACTERS", 64)
    chunked = numbers_held(texts, numbers)
    assert whole[0].size > 150
    assert [a.tolist() for a in whole] == [a.tolist() for a in chunked]


IBAN = "DE89370400440532013000"


@pytest.mark.parametrize(
    "text",
    [
        "IBAN DE89 3704 0044 0532 0130 00.",
        "IBAN: DE89 3704\n0044 0532 0130 00",
        "de89.3704.0044.0532.0130.00",
        "DE 89 3704 0044 0532 0130 00",
        "DE8937 0400 4405 3201 3000",
        "to DE89/3704/0044/0532/0130/00 please",
    ],
)
def test_an_account_number_in_any_grouping_is_held(text: str) -> None:
    assert numbers_held([text], [IBAN], letters=True)[0].tolist() == [0]
    assert numbers_held([text], [IBAN[4:]])[0].tolist() == [0]  # its digits, as a number


@pytest.mark.parametrize(
    "text",
    ["DE89 3704 0044 0532 0130 01", "DE89 3704 0044 0532 0130", "DE89 3704 - ! 0044 0532 0130 00"],
)
def test_other_account_numbers_are_not_held(text: str) -> None:
    assert numbers_held([text], [IBAN], letters=True)[0].size == 0


def test_account_numbers_need_letters_read() -> None:
    with pytest.raises(ValueError, match=r"numbers\[0\] must be at least 7 ASCII digits"):
        numbers_held(["x"], [IBAN])
    with pytest.raises(ValueError, match="upper-case letters and digits; found 'de89"):
        numbers_held(["x"], [IBAN.lower()], letters=True)


@pytest.mark.parametrize(
    "bad", ["123456", "12345678a", "\uff11\uff12\uff13\uff14\uff15\uff16\uff17"]
)
def test_numbers_that_are_not_ascii_digits_of_minimal_length_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match=r"numbers\[1\] must be at least 7 ASCII digits"):
        numbers_held(["x"], [SSN, bad])


def test_empty_inputs() -> None:
    assert [a.size for a in numbers_held([], [SSN])] == [0, 0]
    assert [a.size for a in numbers_held(["123456789"], [])] == [0, 0]
    assert [a.size for a in numbers_held(["", "no digits"], [SSN])] == [0, 0]


@pytest.mark.parametrize(
    ("kind", "raw"),
    [
        ("PHONE_NUMBER", "(775) 568-2052"),
        ("CREDIT_CARD", "4111 1111 1111 1111"),
        ("US_SSN", "123-45-6789"),
    ],
)
def test_the_number_types_normalise_to_their_digits(kind: str, raw: str) -> None:
    assert kind in NUMBER_TYPES
    assert normalise(kind, raw) == "".join(c for c in raw if c.isdigit())


@pytest.mark.parametrize(
    ("kind", "raw"),
    [("IBAN_CODE", "de89 3704 0044 0532 0130 00"), ("US_BANK_NUMBER", "0123-4567-89")],
)
def test_the_account_types_normalise_to_upper_case_letters_and_digits(kind: str, raw: str) -> None:
    assert kind in ACCOUNT_TYPES
    assert normalise(kind, raw) == "".join(c for c in raw if c.isalnum()).upper()
