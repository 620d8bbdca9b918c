"""The numbers texts hold, read through any grouping, for the ``pii`` class's release side.

A release can write a train user's phone, card or social security number or IBAN in a
form no recognizer scores above the threshold (``123456789`` where the train wrote
``123-45-6789``; ``775,568,2052``; an IBAN broken over a line; digits divided by HTML
character references) while a reader reads the same number. Here a text's digits (and,
for account numbers, its ASCII letters, in upper case) are read as runs: characters
divided by at most three separators (blanks, line breaks, dashes, dots, slashes,
underscores, brackets, plus signs, commas, colons, middle dots, bullets, bars), with soft
hyphens, zero-width characters and character references such as ``&#8209;`` not counted,
belong to one run, and a number is held by a text when it occurs inside one of the
text's runs. Digits spelled out in English words read as digits (``five five five, oh
one two``; ``double seven`` reads 77). A run may join numbers a reader keeps apart
(``2019 - 2020``); the reading is a function of the release alone, applied alike to the
train and the holdout values, so such a join counts for neither side more than the
other.

Numpy over the texts' code points (no loop over characters or records); digit words are
found by a regular expression, with a Python step per word found (a text of nothing but
digit words: about 1 s per 4 M characters).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

# the PII types whose normal form (gate.features.pii.normalise) is a number's digits,
# and those whose is an account number's upper-case letters and digits
NUMBER_TYPES = ("PHONE_NUMBER", "CREDIT_CARD", "US_SSN")
ACCOUNT_TYPES = ("IBAN_CODE", "US_BANK_NUMBER")
# shorter numbers are read only as detected (a run of six digits is too common)
MIN_LENGTH = 7
NUMBER_FORM = re.compile(rf"[0-9]{{{MIN_LENGTH},}}")  # the numbers numbers_held reads
ACCOUNT_FORM = re.compile(rf"[0-9A-Z]{{{MIN_LENGTH},}}")  # and those it reads with letters
# the longest grouping gap a run bridges, in characters
MAX_GAP = 3
# characters of text read at a time (about 50 bytes each; a longer text is read whole)
_CHUNK_CHARACTERS = 1 << 22

_ASCII_SEPARATORS = " \t\n\r\v\f-./_()+,:|"
_OTHER_SEPARATORS = frozenset("\u00a0\u00b7\u2010\u2011\u2012\u2013\u2014\u2015\u2022\u2212")
# characters a reader does not see: not counted in a gap
_INVISIBLE = frozenset("\u00ad\u200b\u200c\u200d\u2060\ufeff")
# a character reference (``&#8209;``, ``&nbsp;``): read as invisible
_REFERENCE = re.compile(r"&#?[0-9A-Za-z]{1,8};")
_DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_DIGIT_OF = {**{word: str(d) for d, word in enumerate(_DIGIT_WORDS)}, "oh": "0"}
# a word's end; its start is checked by hand (a leading \b disables the scan's
# first-letter skip: 4x slower)
_SPELLED_DIGIT = re.compile(rf"(?:{'|'.join(_DIGIT_OF)})\b")
# "double"/"triple" and up to three separators (invisible characters not counted) before
# a digit word
_REPEAT_BEFORE = re.compile(
    r"(?<!\w)(double|triple)[\u00ad\u200b-\u200d\u2060\ufeff]*"
    r"(?:[\s\-\u2010\u2011][\u00ad\u200b-\u200d\u2060\ufeff]*){0,3}\Z"
)
_REPEATS = {"double": 2, "triple": 3}
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _spelled_digits(text: str) -> str:
    """``text`` with each digit spelled out in English words (``five``, ``oh``, ``double
    seven``) written as digits, padded with zero-width spaces to the words' length
    (positions are kept)."""
    lowered = text.translate(_ASCII_LOWER)
    pieces: list[str] = []
    done = 0
    for match in _SPELLED_DIGIT.finditer(lowered):
        start = match.start()
        if start > 0 and (lowered[start - 1].isalnum() or lowered[start - 1] == "_"):
            continue  # inside a word (phone, someone)
        repeat = 1
        before = _REPEAT_BEFORE.search(lowered, max(start - 64, done), start)
        if before is not None:
            repeat, start = _REPEATS[before[1]], before.start()
        written = _DIGIT_OF[match[0]] * repeat
        pieces += [text[done:start], written, "\u200b" * (match.end() - start - len(written))]
        done = match.end()
    return "".join([*pieces, text[done:]])


def numbers_held(
    texts: Sequence[str], numbers: Sequence[str], *, letters: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Which texts hold which numbers, read through any grouping.

    Args:
        texts: the texts to read.
        numbers: ASCII digit strings of at least :data:`MIN_LENGTH` characters; with
            ``letters``, ASCII upper-case letters and digits (account numbers such as
            IBANs, read in upper case).
        letters: read letters as well as digits into runs (then the words of a sentence
            are one run: a number is held when it occurs inside it).

    Returns:
        ``(text_index, number_index)``: distinct pairs, sorted by text then number.

    Raises:
        ValueError: a number of other characters or shorter than ``MIN_LENGTH``.
    """
    allowed = "ASCII upper-case letters and digits" if letters else "ASCII digits"
    number_form = ACCOUNT_FORM if letters else NUMBER_FORM
    for i, number in enumerate(numbers):
        if not number_form.fullmatch(number):
            raise ValueError(
                f"numbers[{i}] must be at least {MIN_LENGTH} {allowed}; found {number!r}"
            )
    if not numbers or not texts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    distinct = np.unique(np.asarray(numbers, dtype=object))  # one search per number
    lengths = np.array([len(n) for n in distinct])
    found_texts: list[np.ndarray] = []
    found_numbers: list[np.ndarray] = []
    searched = []  # (length, the numbers of that length, their keys)
    for length in np.unique(lengths):
        of_length = np.flatnonzero(lengths == length)
        keys = np.asarray(distinct[of_length].tolist(), dtype=f"S{length}")
        searched.append((int(length), of_length, keys))
    for first, chunk in _chunks(texts):
        # references and digit words are read in place: every text keeps its length
        sizes = np.fromiter((len(t) for t in chunk), dtype=np.int64, count=len(chunk))
        plain = _REFERENCE.sub(lambda m: "\u200b" * len(m[0]), "\n".join(chunk))
        readings = [_spelled_digits(plain)]
        # with letters, a digit word can be part of an account number (GB12 FIVE 1234...):
        # texts with digit words are read both with and without them read as digits
        if letters and readings[0] != plain:
            readings.append(plain)
        for joined in readings:
            characters, run_ids, text_ids = _runs(joined, sizes=sizes, letters=letters)
            for length, of_length, keys in searched:
                t, n = _matches(characters, run_ids, text_ids, keys, length)
                found_texts.append(t + first)
                found_numbers.append(of_length[n])
    found = pd.DataFrame(
        {"text": np.concatenate(found_texts), "number": distinct[np.concatenate(found_numbers)]}
    )
    # every position that asked for a number (two types can read as the same digits)
    asked = pd.DataFrame({"number": np.asarray(numbers, dtype=object), "at": range(len(numbers))})
    pairs = found.merge(asked, on="number").drop_duplicates(["text", "at"])
    pairs = pairs.sort_values(["text", "at"])
    return pairs["text"].to_numpy(np.int64), pairs["at"].to_numpy(np.int64)


def _chunks(texts: Sequence[str]) -> Iterator[tuple[int, Sequence[str]]]:
    """Consecutive slices of ``texts`` of about ``_CHUNK_CHARACTERS`` characters."""
    ends = np.cumsum(np.fromiter((len(t) + 1 for t in texts), dtype=np.int64, count=len(texts)))
    cuts = np.searchsorted(ends, np.arange(_CHUNK_CHARACTERS, ends[-1], _CHUNK_CHARACTERS))
    edges = np.unique(np.concatenate([[0], cuts + 1, [len(texts)]]).clip(0, len(texts)))
    for start, end in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
        yield start, texts[start:end]


def _runs(
    joined: str, *, sizes: np.ndarray, letters: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The run characters (digits, as ASCII; with ``letters`` also ASCII letters, in upper
    case) of texts of ``sizes`` characters joined by line breaks, as bytes in order, each
    with its run and its text."""
    points = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    read = np.zeros(points.size, dtype=np.uint8)  # the ASCII byte read, 0 for no run character
    ascii_digit = (points >= 48) & (points <= 57)
    read[ascii_digit] = points[ascii_digit]
    if letters:
        upper = (points >= 65) & (points <= 90)
        lower = (points >= 97) & (points <= 122)
        read[upper] = points[upper]
        read[lower] = points[lower] - 32
    separator = np.isin(points, np.frombuffer(_ASCII_SEPARATORS.encode("utf-32-le"), np.uint32))
    invisible = np.zeros(points.size, dtype=bool)
    wide = points > 127
    if wide.any():
        codes, where = np.unique(points[wide], return_inverse=True)
        characters = [chr(c) for c in codes.tolist()]
        digit_of = np.array([unicodedata.decimal(c, -1) for c in characters], dtype=np.int16)
        blank = np.array([c.isspace() or c in _OTHER_SEPARATORS for c in characters], bool)
        hidden = np.array([c in _INVISIBLE for c in characters], bool)
        read[wide] = np.where(digit_of >= 0, digit_of + 48, 0).astype(np.uint8)[where]
        separator[wide] = blank[where]
        invisible[wide] = hidden[where]
    # the line feed joining two texts is no separator
    boundaries = np.cumsum(sizes[:-1] + 1) - 1
    separator[boundaries] = False
    at = np.flatnonzero(read)
    text_ids = np.searchsorted(boundaries, at)
    if at.size == 0:
        return np.zeros(0, np.uint8), np.zeros(0, np.int64), text_ids
    # a character continues its predecessor's run when only separators, at most MAX_GAP
    # of them, and invisible characters stand between the two
    others = np.cumsum(~separator & ~invisible & (read == 0), dtype=np.int32)
    blanks = np.cumsum(separator, dtype=np.int32)
    joins = (others[at[1:]] == others[at[:-1]]) & (blanks[at[1:]] - blanks[at[:-1]] <= MAX_GAP)
    run_ids = np.concatenate([[0], np.cumsum(~joins)])
    return read[at], run_ids, text_ids


def _matches(
    characters: np.ndarray,
    run_ids: np.ndarray,
    text_ids: np.ndarray,
    keys: np.ndarray,
    length: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(text, key index) for every window of ``length`` characters inside one run equal
    to a key (``keys``: byte strings of that length). Only windows that begin as a key
    does (its first four characters) are compared."""
    if characters.size < length:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    heads = np.lib.stride_tricks.sliding_window_view(characters, 4)
    head_codes = np.ascontiguousarray(heads).view(">u4").ravel()
    key_heads = np.frombuffer(b"".join(k[:4] for k in keys.tolist()), dtype=">u4")
    starts = np.flatnonzero(
        np.isin(head_codes[: characters.size - length + 1], key_heads)
        & (run_ids[: characters.size - length + 1] == run_ids[length - 1 :])
    )
    windows = np.lib.stride_tricks.sliding_window_view(characters, length)[starts]
    window_keys = np.ascontiguousarray(windows).view(f"S{length}").ravel()
    order = np.argsort(keys)
    sorted_keys = keys[order]
    slot = np.minimum(np.searchsorted(sorted_keys, window_keys), sorted_keys.size - 1)
    hit = sorted_keys[slot] == window_keys
    return text_ids[starts[hit]], order[slot[hit]]
