"""The numbers texts hold, read through any grouping, for the ``pii`` class's release side.

A release can write a train user's phone, card or social security number in a form no
recognizer scores above the threshold (``123456789`` where the train wrote
``123-45-6789``; ``7 7 5 5 6 8 2 0 5 2``; digits divided by zero-width spaces or HTML
entities) while a reader reads the same number. Here a text's digits are read as runs:
digits divided by at most three separators (blanks, line breaks, dashes, dots, slashes,
underscores, brackets, plus signs, commas, colons, middle dots, bullets, bars, soft
hyphens, zero-width characters, or a character reference such as ``&#8209;``) belong to
one run, and a number is held by a text when its digits occur inside one of the text's
runs. A run may join numbers a reader keeps apart (``2019 - 2020``); the reading is a
function of the release alone, applied alike to the train and the holdout values, so
such a join counts for neither side more than the other.

Pure numpy over the texts' code points (no loop over characters or records).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence

import numpy as np

# the PII types whose normal form is a number's digits (gate.features.pii.normalise)
NUMBER_TYPES = ("PHONE_NUMBER", "CREDIT_CARD", "US_SSN")
# fewer digits than this are read only as detected (a run of six digits is too common)
MIN_DIGITS = 7
# the longest grouping gap a run bridges, in characters
MAX_GAP = 3
# characters of text read at a time (4 bytes each)
_CHUNK_CHARACTERS = 1 << 22

_ASCII_SEPARATORS = " \t\n\r\v\f-./_()+,:|"
_OTHER_SEPARATORS = frozenset("\u00a0\u00b7\u2010\u2011\u2012\u2013\u2014\u2015\u2022\u2212")
# characters a reader does not see: not counted in a gap
_INVISIBLE = frozenset("\u00ad\u200b\u200c\u200d\u2060\ufeff")
# a character reference (``&#8209;``, ``&nbsp;``): read as invisible
_REFERENCE = re.compile(r"&#?[0-9A-Za-z]{1,8};")


def numbers_held(texts: Sequence[str], numbers: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Which texts hold which numbers, read through any grouping.

    Args:
        texts: the texts to read.
        numbers: ASCII digit strings of at least :data:`MIN_DIGITS` digits.

    Returns:
        ``(text_index, number_index)``: distinct pairs, sorted by text then number.

    Raises:
        ValueError: a number that is not ASCII digits or is shorter than ``MIN_DIGITS``.
    """
    for i, number in enumerate(numbers):
        if not (number.isascii() and number.isdigit() and len(number) >= MIN_DIGITS):
            raise ValueError(
                f"numbers[{i}] must be at least {MIN_DIGITS} ASCII digits; found {number!r}"
            )
    if not numbers or not texts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # one search per distinct number (two types can read as the same digits)
    distinct, of_number = np.unique(np.asarray(numbers, dtype=object), return_inverse=True)
    lengths = np.array([len(n) for n in distinct])
    found_texts: list[np.ndarray] = []
    found_numbers: list[np.ndarray] = []
    for first, chunk in _chunks(texts):
        digits, run_ids, text_ids = _digit_runs(chunk)
        for length in np.unique(lengths):
            of_length = np.flatnonzero(lengths == length)
            keys = np.asarray(distinct[of_length].tolist(), dtype=f"S{length}")
            t, n = _matches(digits, run_ids, text_ids, keys, int(length))
            found_texts.append(t + first)
            found_numbers.append(of_length[n])
    text_of, distinct_of = np.unique(
        np.stack([np.concatenate(found_texts), np.concatenate(found_numbers)]), axis=1
    )
    # each distinct number's pairs, repeated for every number that reads as it
    by_distinct = np.argsort(of_number, kind="stable")
    per_distinct = np.bincount(of_number, minlength=distinct.size)
    first_of = np.concatenate([[0], np.cumsum(per_distinct)[:-1]])
    repeat = per_distinct[distinct_of]
    pair = np.repeat(np.arange(distinct_of.size), repeat)
    offset = np.arange(pair.size) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    texts_out = text_of[pair].astype(np.int64)
    numbers_out = by_distinct[first_of[distinct_of[pair]] + offset].astype(np.int64)
    order = np.lexsort((numbers_out, texts_out))
    return texts_out[order], numbers_out[order]


def _chunks(texts: Sequence[str]) -> Iterator[tuple[int, Sequence[str]]]:
    """Consecutive slices of ``texts`` of about ``_CHUNK_CHARACTERS`` characters."""
    ends = np.cumsum(np.fromiter((len(t) + 1 for t in texts), dtype=np.int64, count=len(texts)))
    cuts = np.searchsorted(ends, np.arange(_CHUNK_CHARACTERS, ends[-1], _CHUNK_CHARACTERS))
    edges = np.unique(np.concatenate([[0], cuts + 1, [len(texts)]]).clip(0, len(texts)))
    for start, end in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
        yield start, texts[start:end]


def _digit_runs(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The texts' digits as ASCII bytes in order, each with its run and its text."""
    joined = _REFERENCE.sub(lambda m: "\u200b" * len(m[0]), "\n".join(texts))
    points = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    value = np.full(points.size, -1, dtype=np.int16)  # digit value, -1 for other characters
    ascii_digit = (points >= 48) & (points <= 57)
    value[ascii_digit] = (points[ascii_digit] - 48).astype(np.int16)
    separator = np.isin(points, np.frombuffer(_ASCII_SEPARATORS.encode("utf-32-le"), np.uint32))
    invisible = np.zeros(points.size, dtype=bool)
    wide = points > 127
    if wide.any():
        codes, where = np.unique(points[wide], return_inverse=True)
        characters = [chr(c) for c in codes.tolist()]
        digit_of = np.array([unicodedata.decimal(c, -1) for c in characters], dtype=np.int16)
        blank = np.array([c.isspace() or c in _OTHER_SEPARATORS for c in characters], bool)
        hidden = np.array([c in _INVISIBLE for c in characters], bool)
        value[wide] = digit_of[where]
        separator[wide] = blank[where]
        invisible[wide] = hidden[where]
    # the line feed joining two texts is no separator
    lengths = np.fromiter((len(t) + 1 for t in texts), dtype=np.int64, count=len(texts))
    boundaries = np.cumsum(lengths[:-1]) - 1
    separator[boundaries] = False
    at = np.flatnonzero(value >= 0)
    text_ids = np.searchsorted(boundaries, at)
    if at.size == 0:
        return np.zeros(0, np.uint8), np.zeros(0, np.int64), text_ids
    # a digit continues its predecessor's run when only separators, at most MAX_GAP of
    # them, and invisible characters stand between the two
    others = np.cumsum(~separator & ~invisible & (value < 0))
    blanks = np.cumsum(separator)
    joins = (others[at[1:]] == others[at[:-1]]) & (blanks[at[1:]] - blanks[at[:-1]] <= MAX_GAP)
    run_ids = np.concatenate([[0], np.cumsum(~joins)])
    return (value[at] + 48).astype(np.uint8), run_ids, text_ids


def _matches(
    digits: np.ndarray, run_ids: np.ndarray, text_ids: np.ndarray, keys: np.ndarray, length: int
) -> tuple[np.ndarray, np.ndarray]:
    """(text, key index) for every window of ``length`` digits inside one run equal to a
    key (``keys``: byte strings of that length)."""
    if digits.size < length:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.flatnonzero(run_ids[: digits.size - length + 1] == run_ids[length - 1 :])
    windows = np.lib.stride_tricks.sliding_window_view(digits, length)[starts]
    window_keys = np.ascontiguousarray(windows).view(f"S{length}").ravel()
    order = np.argsort(keys)
    sorted_keys = keys[order]
    slot = np.minimum(np.searchsorted(sorted_keys, window_keys), sorted_keys.size - 1)
    hit = sorted_keys[slot] == window_keys
    return text_ids[starts[hit]], order[slot[hit]]
