"""Spaces deleted from a release, restored: each run of letters and digits that is no word
of the source is split into the source's words where they explain it better than one
unknown word does (the most probable segmentation under the source's word frequencies, a
unigram model with a penalty per word: dynamic programming over the run's characters,
run for every run at once). Words are compared in lower case (a copy in capitals is still
split), and a letter, digit or mark that no source text holds is read as a space (one
drawn in the place of each space would otherwise join the words). Asked to, the marks
are deleted first (one the source holds, in each space's place or inside each word).

The source words are a function of train and holdout together (their union), so a
reading made with them treats a train user and a holdout user alike: the phantoms still
measure what a release that learnt nothing discloses. Everything here is vectorised over
the characters of all texts (code points in numpy, substrings by a polynomial hash
modulo 2⁶⁴); the dynamic programme steps through the offsets within a run, for all runs
at once.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd
import pyarrow as pa

from gate.features.tokenize import lower_case_by_character

_BASE = 0x9E3779B97F4A7C15  # odd, so invertible modulo 2**64
_BASE_INVERSE = pow(_BASE, -1, 1 << 64)
LONGEST_WORD = 24  # characters: a longer source word is read as an unknown piece
WORD_PENALTY = 4.0  # nats each piece of a segmentation costs on top of its frequency
CHAR_COST = math.log(36)  # nats per character of a piece that is no source word
_CHARACTERS_AT_ONCE = 1 << 22  # code points held at a time (about 40 bytes each at the peak)
_RUN_CHARACTERS = 1 << 19  # characters of unknown runs segmented at a time
_LONGEST_RUN = 4096  # a longer unknown run is segmented in windows of this many characters
_FILTER_BITS = 18  # a hash's top bits index a table of the words of each length
_SPACE = 0x20


@dataclass(frozen=True)
class SourceWords:
    """The words of the source (maximal runs of letters, digits and marks), by hash.

    Attributes:
        hashes: every distinct word's hash, sorted.
        lengths: the lengths (characters) of the words segmentations may use, ascending:
            those of at most :data:`LONGEST_WORD` characters.
        by_length: for each of ``lengths``, the sorted hashes of its words and their costs
            (nats: ``log(total / count) + WORD_PENALTY``).
        maybe: for each of ``lengths``, whether any of its words' hashes has each value of
            the top :data:`_FILTER_BITS` bits (a filter before the sorted search).
        unknown_cost: what a piece that is no source word costs to start (``log(total) +
            WORD_PENALTY``); each of its characters adds :data:`CHAR_COST`.
        held: the letters, digits and marks (Unicode categories L, N, M) the source holds,
            in lower case, sorted.
    """

    hashes: np.ndarray
    lengths: np.ndarray
    by_length: tuple[tuple[np.ndarray, np.ndarray], ...]
    maybe: np.ndarray
    unknown_cost: float
    held: np.ndarray

    @classmethod
    def of(cls, texts: pd.Series) -> SourceWords:
        """The words of the source ``texts`` (as normalised; in lower case), with their
        counts."""
        hashes, lengths, counts, held = [], [], [], []
        for some in _chunks(texts):
            codes, _ = _code_points(some)
            lowered, word = _lowered(codes), _is_word(codes)
            held.append(np.unique(lowered[word]))
            run_start, run_length = _word_runs(word)
            prefix, powers = _prefix_hashes(lowered)
            found = _substring_hashes(prefix, powers, run_start, run_length)
            unique, first, count = np.unique(found, return_index=True, return_counts=True)
            hashes.append(unique)
            lengths.append(run_length[first])
            counts.append(count)
        every = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
        unique, first, inverse = np.unique(every, return_index=True, return_inverse=True)
        count = np.bincount(inverse, weights=np.concatenate(counts) if counts else None)
        length = np.concatenate(lengths)[first] if lengths else np.zeros(0, np.int64)
        total = max(float(count.sum()), 1.0)
        usable = length <= LONGEST_WORD
        kept = np.unique(length[usable])
        by_length = []
        maybe = np.zeros((kept.size, 1 << _FILTER_BITS), dtype=bool)
        for row, size in enumerate(kept.tolist()):
            these = usable & (length == size)
            by_length.append(
                (unique[these], np.log(total / count[these]).astype(np.float32) + WORD_PENALTY)
            )
            maybe[row, _filter_key(unique[these])] = True
        return cls(
            hashes=unique,
            lengths=kept.astype(np.int64),
            by_length=tuple(by_length),
            maybe=maybe,
            unknown_cost=math.log(total) + WORD_PENALTY,
            held=np.unique(np.concatenate(held)) if held else np.zeros(0, np.int64),
        )


def spaces_restored(
    texts: pd.Series, words: SourceWords, *, delete_marks: bool = False
) -> pd.Series:
    """The ``texts`` that change when each letter, digit or mark that no source text holds
    is read as a space and the words run together are split into ``words`` where that is
    the most probable reading (module docstring), indexed by the text's position in
    ``texts``; with ``delete_marks``, every combining mark is deleted first. A run that is
    a source word, or that no split explains better than one unknown word, is left as it
    is.
    """
    restored: list[pd.Series] = []
    start = 0
    for some in _chunks(texts):
        codes, offsets = _code_points(some)
        edits = np.zeros(len(some), dtype=np.int64)
        if delete_marks:
            marks = np.flatnonzero(_in_categories(codes, ("M",)))
            edits += np.diff(np.searchsorted(marks, offsets))
            codes = np.delete(codes, marks)
            offsets = offsets - np.searchsorted(marks, offsets)
        lowered, word = _lowered(codes), _is_word(codes)
        foreign = word & ~np.isin(lowered, words.held)
        codes[foreign] = lowered[foreign] = _SPACE
        word &= ~foreign
        edits += np.diff(np.searchsorted(np.flatnonzero(foreign), offsets))
        run_start, run_length = _word_runs(word)
        prefix, powers = _prefix_hashes(lowered)
        run_hash = _substring_hashes(prefix, powers, run_start, run_length)
        at = np.minimum(np.searchsorted(words.hashes, run_hash), max(words.hashes.size - 1, 0))
        known = words.hashes[at] == run_hash if words.hashes.size else np.zeros_like(run_hash, bool)
        unknown = ~known & (run_length >= 2)
        spaces = _segmentation_spaces(lowered, run_start[unknown], run_length[unknown], words)
        moved = np.searchsorted(spaces, offsets)  # spaces before each text's start
        changed = np.flatnonzero(np.diff(moved) + edits)
        start, first = start + len(some), start
        if changed.size == 0:
            continue
        text = np.insert(codes, spaces, _SPACE).astype("<u4").tobytes().decode("utf-32-le")
        begin = (offsets[:-1] + moved[:-1])[changed]
        end = (offsets[1:] - 1 + moved[1:])[changed]  # before each text's separator
        restored.append(
            pd.Series(
                [text[b:e] for b, e in zip(begin.tolist(), end.tolist(), strict=True)],
                index=changed + first,
                dtype=texts.dtype,
            )
        )
    if not restored:
        return pd.Series([], dtype=texts.dtype, index=pd.Index([], dtype=np.int64))
    return pd.concat(restored)


def _chunks(texts: pd.Series) -> Iterator[pd.Series]:
    """``texts`` in consecutive slices of about :data:`_CHARACTERS_AT_ONCE` code points (a
    longer text is a slice of its own)."""
    ends = np.cumsum(texts.str.len().to_numpy(dtype=np.int64) + 1)
    start = 0
    while start < len(texts):
        before = int(ends[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, before + _CHARACTERS_AT_ONCE, "right")))
        yield texts.iloc[start:stop]
        start = stop


def _code_points(texts: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The code points of ``texts``, each followed by a separator, and the offset of each
    text (one more: the end)."""
    values = texts.tolist()
    joined = "\n".join(values) + "\n" if values else ""
    codes = np.frombuffer(joined.encode("utf-32-le"), dtype="<u4").astype(np.int64)  # a copy
    lengths = np.fromiter((len(v) + 1 for v in values), dtype=np.int64, count=len(values))
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return codes, offsets


@cache
def _ascii_categories() -> tuple[str, ...]:
    return tuple(unicodedata.category(chr(c)) for c in range(128))


def _in_categories(codes: np.ndarray, accept: tuple[str, ...]) -> np.ndarray:
    """Whether each code point's Unicode category starts with one of ``accept``."""
    table = np.array([c.startswith(accept) for c in _ascii_categories()])
    found = np.zeros(codes.size, dtype=bool)
    ascii_ = codes < 128
    found[ascii_] = table[codes[ascii_]]
    if not ascii_.all():
        other, inverse = np.unique(codes[~ascii_], return_inverse=True)
        found[~ascii_] = np.array(
            [unicodedata.category(chr(c)).startswith(accept) for c in other.tolist()], dtype=bool
        )[inverse]
    return found


def _lowered(codes: np.ndarray) -> np.ndarray:
    """Each code point in lower case, one for one so that positions do not move
    (:func:`gate.features.tokenize.lower_case_by_character`: the tokenizers' lower case but
    for ``ß``, which they read as ``ss``)."""
    lowered = codes.copy()
    capital = (codes >= 0x41) & (codes <= 0x5A)
    lowered[capital] += 0x20
    other = codes >= 0x80
    if other.any():
        points, inverse = np.unique(codes[other], return_inverse=True)
        lower = lower_case_by_character(pa.array([chr(c) for c in points.tolist()], pa.string()))
        joined = "".join(lower.to_pylist())
        if len(joined) != points.size:
            raise RuntimeError("a character's lower case is not one character")
        lowered[other] = np.frombuffer(joined.encode("utf-32-le"), "<u4").astype(np.int64)[inverse]
    return lowered


def _is_word(codes: np.ndarray) -> np.ndarray:
    """Letters, digits and marks (Unicode categories L, N, M)."""
    return _in_categories(codes, ("L", "N", "M"))


def _word_runs(word: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The start and length of each maximal run of word characters (``word``, a mask)."""
    edges = np.diff(np.concatenate([[0], word.astype(np.int8), [0]]))
    starts = np.flatnonzero(edges == 1)
    return starts, np.flatnonzero(edges == -1) - starts


def _powers(base: int, n: int) -> np.ndarray:
    """``base**i`` modulo 2**64 for ``i`` in ``range(n)``."""
    powers = np.full(n, base, dtype=np.uint64)
    if n:
        powers[0] = 1
        np.multiply.accumulate(powers, out=powers)
    return powers


def _prefix_hashes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``prefix[i] = Σ_{j<i} codes[j]·B^(i-1-j)`` modulo 2**64 (all ``i`` at once, through
    ``B``'s inverse), and the powers of ``B``."""
    n = codes.size
    scaled = codes.astype(np.uint64) * _powers(_BASE_INVERSE, n)
    prefix = np.zeros(n + 1, dtype=np.uint64)
    powers = _powers(_BASE, n + 1)
    prefix[1:] = np.cumsum(scaled, dtype=np.uint64) * powers[:n]
    return prefix, powers


def _substring_hashes(
    prefix: np.ndarray, powers: np.ndarray, start: np.ndarray, length: np.ndarray
) -> np.ndarray:
    """The hash of each substring ``[start, start + length)``: the same for the same
    characters wherever they stand."""
    return prefix[start + length] - prefix[start] * powers[length]


def _filter_key(hashes: np.ndarray) -> np.ndarray:
    """The top bits of ``hashes`` (a polynomial hash's low bits depend on its characters'
    low bits only)."""
    return (hashes >> np.uint64(64 - _FILTER_BITS)).astype(np.int64)


def _segmentation_spaces(
    codes: np.ndarray, run_start: np.ndarray, run_length: np.ndarray, words: SourceWords
) -> np.ndarray:
    """Positions in ``codes`` before which a space is restored, sorted."""
    if run_start.size == 0 or words.lengths.size == 0:
        return np.zeros(0, dtype=np.int64)
    windows = (run_length + _LONGEST_RUN - 1) // _LONGEST_RUN
    first = np.repeat(run_start, windows) + _LONGEST_RUN * _ranks(windows)
    last = np.repeat(run_start + run_length, windows)
    length = np.minimum(last - first, _LONGEST_RUN)
    order = np.argsort(-length, kind="stable")  # a batch steps through its longest run
    start, length = first[order], length[order]
    found = []
    bounds = np.searchsorted(np.cumsum(length), np.arange(0, length.sum(), _RUN_CHARACTERS))
    bounds = np.unique(np.append(bounds, length.size))
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        found.append(_segmented_batch(codes, start[a:b], length[a:b], words))
    return np.sort(np.concatenate(found))


def _ranks(counts: np.ndarray) -> np.ndarray:
    """``0, 1, …, counts[i] - 1`` for each ``i``, concatenated."""
    total = int(counts.sum())
    return np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)


def _segmented_batch(
    codes: np.ndarray, start: np.ndarray, length: np.ndarray, words: SourceWords
) -> np.ndarray:
    """:func:`_segmentation_spaces` for one batch of runs, longest first (module
    docstring): the runs still going at offset ``k`` are a prefix of the batch.

    Two states per boundary between characters: the best cost of the run's prefix ending
    with a source word (``known``) and ending inside an unknown piece (``unknown``).
    """
    n_runs, total = length.size, int(length.sum())
    flat_start = np.cumsum(length) - length  # each run in the batch's flat characters
    position = np.repeat(start - flat_start, length) + np.arange(total)  # flat → codes
    flat = codes[position]
    prefix, powers = _prefix_hashes(flat)
    run_end = np.repeat(flat_start + length, length)

    # no space is restored between two digits: a number's groups are not told apart
    digit = _in_categories(flat, ("Nd",))
    between_digits = np.zeros(total + 1, dtype=bool)
    between_digits[1:-1] = digit[1:] & digit[:-1]
    between_digits[flat_start] = False
    sizes = words.lengths
    cost = np.full((total, sizes.size), np.inf, dtype=np.float32)  # rows gathered by offset
    for row, size in enumerate(sizes.tolist()):
        hashes, costs = words.by_length[row]
        fits = np.arange(total - size + 1)
        fits = fits[(fits + size <= run_end[fits]) & ~between_digits[fits]]
        fits = fits[~between_digits[fits + size] | (fits + size == run_end[fits])]
        h = _substring_hashes(prefix, powers, fits, np.full(fits.size, size))
        maybe = words.maybe[row, _filter_key(h)]
        fits, h = fits[maybe], h[maybe]
        at = np.minimum(np.searchsorted(hashes, h), hashes.size - 1)
        hit = hashes[at] == h
        cost[fits[hit], row] = costs[at[hit]]

    base = flat_start + np.arange(n_runs)  # a run's boundaries: base … base + length
    n_nodes = total + n_runs + int(sizes.max()) + 1
    known = np.full(n_nodes, np.inf)
    unknown = np.full(n_nodes, np.inf)
    word_length = np.zeros(n_nodes, dtype=np.int64)
    word_after_unknown = np.zeros(n_nodes, dtype=bool)
    unknown_continued = np.zeros(n_nodes, dtype=bool)
    known[base] = 0.0
    going = n_runs - np.searchsorted(length[::-1], np.arange(int(length.max())), side="right")
    size_row = sizes[None, :]
    for k, n_going in enumerate(going.tolist()):
        node = base[:n_going] + k
        at_char = flat_start[:n_going] + k
        after_word, after_unknown = known[node], unknown[node]
        from_unknown = after_unknown < after_word
        here = np.where(from_unknown, after_unknown, after_word)
        candidate = here[:, None] + cost[at_char]
        target = node[:, None] + size_row
        better = candidate < known[target]
        if better.any():
            hit = target[better]
            known[hit] = candidate[better]
            word_length[hit] = np.broadcast_to(size_row, better.shape)[better]
            word_after_unknown[hit] = np.broadcast_to(from_unknown[:, None], better.shape)[better]
        opened = after_word + words.unknown_cost + CHAR_COST
        continued = after_unknown + CHAR_COST
        unknown_continued[node + 1] = continued < opened
        unknown[node + 1] = np.minimum(opened, continued)

    end = base + length
    in_unknown = unknown[end] < known[end]
    node = end.copy()
    word_starts = np.zeros(total, dtype=bool)
    unknown_chars = np.zeros(total, dtype=bool)
    going_back = np.arange(n_runs)
    while going_back.size:
        n = node[going_back]
        offset = n - base[going_back]
        char = flat_start[going_back] + offset
        inside = in_unknown[going_back]
        unknown_chars[char[inside] - 1] = True
        in_unknown[going_back[inside]] = unknown_continued[n[inside]]
        node[going_back[inside]] -= 1
        words_here = ~inside
        size = word_length[n[words_here]]
        if (size == 0).any():  # no word ends there: the programme's records are broken
            raise RuntimeError("segmentation backtrack reached a boundary no word ends at")
        word_starts[char[words_here] - size] = True
        in_unknown[going_back[words_here]] = word_after_unknown[n[words_here]]
        node[going_back[words_here]] -= size
        going_back = going_back[node[going_back] > base[going_back]]

    previous_unknown = np.concatenate([[False], unknown_chars[:-1]])
    space = word_starts | (unknown_chars & ~previous_unknown)
    space[flat_start] = False  # a run's first character follows what it followed
    return position[space]
