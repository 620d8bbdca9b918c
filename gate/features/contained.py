"""Texts found whole inside longer texts: which rows hold a candidate's every word, in
order, with nothing between them (a record inside a prompt template, or several records
packed into one row).

Words are the ``word`` tokenizer's (runs of letters, digits and ``_``), so the
punctuation and white space between them are not compared. Tokens are compared by a keyed
64-bit hash of their text (:func:`gate.features.ngram.token_hashes`, a key drawn for each
call), so that the rows and the candidates are tokenised apart. A candidate can only be
held by a row that holds its first ``anchor`` words: only the candidates whose opening
(their first :data:`PREFIX_CHARACTERS` characters) passes that test are tokenised whole.
Each of those is looked for through one of a few of its ``anchor``-word n-grams, the one
fewest candidates share (a common opening must not pair every row that has it with every
candidate), with the polynomial hashes of :mod:`gate.features.ngram`; a pair whose whole
windows hash alike is confirmed token by token. No Python loop runs over tokens or rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gate.features.ngram import NgramHasher, hash_key, members, token_hashes
from gate.features.tokenize import tokenize

ANCHOR_WORDS = 8
PREFIX_CHARACTERS = 160  # a candidate's opening, read for its first ``anchor`` words
_ANCHORS_TRIED = 5  # n-grams per candidate, evenly spaced, from which its anchor is chosen


class _Tokens:
    """Texts as flat keyed token hashes with document starts."""

    def __init__(self, texts: pa.Array, key: str) -> None:
        corpus = tokenize(texts, tokenizer="word")
        self.values = token_hashes(corpus.vocab, key=key)[corpus.ids - 1]
        self.starts = corpus.starts
        self.lengths = corpus.lengths


def containing_rows(
    candidates: pa.Array, rows: pa.Array, *, min_words: int, anchor: int = ANCHOR_WORDS
) -> tuple[np.ndarray, np.ndarray]:
    """Every (candidate, row) such that the row holds the candidate's words in order.

    Args:
        candidates: the texts looked for; those of fewer than ``min_words`` words are not.
        rows: the texts looked in.
        min_words: the fewest words a candidate needs to be looked for (at least
            ``anchor``).
        anchor: the words of the n-grams through which candidates are found.

    Returns:
        The candidates' and the rows' indices of each pair, distinct pairs ordered by row,
        then candidate.
    """
    if min_words < anchor or anchor < 1:
        raise ValueError(
            f"min_words must be >= anchor >= 1; found min_words={min_words}, anchor={anchor}"
        )
    empty = np.empty(0, dtype=np.int64)
    key = hash_key()
    held = _Tokens(rows, key)
    if held.values.size < min_words or not len(candidates):
        return empty, empty
    row_hasher = NgramHasher(held.values, held.starts)
    row_positions = row_hasher.positions(anchor)
    row_grams = _sorted_distinct(row_hasher.hashes(row_positions, anchor))
    kept = _openings_held(candidates, row_grams, key=key, min_words=min_words, anchor=anchor)
    if not kept.size:
        return empty, empty
    looked = _Tokens(candidates.take(pa.array(kept)), key)
    n_looked = kept.size
    tokens = np.concatenate([looked.values, held.values])
    starts = np.concatenate([looked.starts[:-1], held.starts + looked.starts[-1]])
    lengths = np.diff(starts)
    hasher = NgramHasher(tokens, starts)

    # each candidate's anchor: of a few of its n-grams, the one fewest candidates share
    long_enough = np.flatnonzero(lengths[:n_looked] >= min_words)
    span = lengths[long_enough] - anchor
    step = np.arange(_ANCHORS_TRIED, dtype=np.int64)
    offsets = (span[:, None] * step[None, :]) // (_ANCHORS_TRIED - 1)
    tried = (starts[long_enough][:, None] + offsets).ravel()
    grams = hasher.hashes(tried, anchor)
    _, inverse, counts = np.unique(grams, return_inverse=True, return_counts=True)
    shared = counts[inverse.ravel()].reshape(-1, _ANCHORS_TRIED)
    choice = np.argmin(shared, axis=1)
    candidate = long_enough
    at_in_candidate = tried.reshape(-1, _ANCHORS_TRIED)[np.arange(choice.size), choice]
    offset = at_in_candidate - starts[candidate]
    anchor_hash = grams.reshape(-1, _ANCHORS_TRIED)[np.arange(choice.size), choice]

    # the rows' n-grams that are some candidate's anchor, paired with those candidates
    in_rows = row_positions + looked.starts[-1]
    row_hashes = hasher.hashes(in_rows, anchor)
    by_anchor = np.argsort(anchor_hash, kind="stable")
    sorted_anchors = anchor_hash[by_anchor]
    hit = members(_sorted_distinct(sorted_anchors), row_hashes)
    at, at_hash = in_rows[hit], row_hashes[hit]
    low = np.searchsorted(sorted_anchors, at_hash, side="left")
    many = np.searchsorted(sorted_anchors, at_hash, side="right") - low
    total = int(many.sum())
    if not total:
        return empty, empty
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(many) - many, many)
    pair = by_anchor[np.repeat(low, many) + within]
    found_at = np.repeat(at, many)
    start = found_at - offset[pair]
    size = lengths[candidate[pair]]
    fits = (start >= starts[hasher.doc_of(found_at)]) & (start + size <= hasher.doc_end(found_at))
    pair, start, size = pair[fits], start[fits], size[fits]
    origin = starts[candidate[pair]]
    same = hasher.hashes(start, size) == hasher.hashes(origin, size)
    pair, start, size, origin = pair[same], start[same], size[same], origin[same]
    confirmed = _same_tokens(tokens, start, origin, size)
    pair, start = pair[confirmed], start[confirmed]
    found = np.unique(
        np.stack([hasher.doc_of(start) - n_looked, kept[candidate[pair]]], axis=1), axis=0
    )
    return found[:, 1].astype(np.int64), found[:, 0].astype(np.int64)


def _openings_held(
    candidates: pa.Array, row_grams: np.ndarray, *, key: str, min_words: int, anchor: int
) -> np.ndarray:
    """The candidates that may be held by a row: their first ``anchor`` words are an
    n-gram of the rows (``row_grams``, sorted), or their opening is too short to tell."""
    openings = pc.utf8_slice_codeunits(candidates, 0, PREFIX_CHARACTERS)
    cut = pc.greater(pc.utf8_length(candidates), PREFIX_CHARACTERS).to_numpy(zero_copy_only=False)
    opening = _Tokens(openings, key)
    # a cut opening's last word may be cut too: its first ``anchor`` words are whole only
    # if it has more
    whole = np.where(cut, opening.lengths - 1, opening.lengths)
    known = whole >= anchor
    hasher = NgramHasher(opening.values, opening.starts)
    firsts = opening.starts[:-1][known]
    held = np.zeros(len(candidates), dtype=bool)
    held[np.flatnonzero(known)] = members(row_grams, hasher.hashes(firsts, anchor))
    held |= ~known & cut  # under ``anchor`` whole words in a cut opening: long words
    return np.flatnonzero(held & ((opening.lengths >= min_words) | cut))


def _sorted_distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (a sort: numpy's hash-based ``unique`` of 64-bit keys
    had taken 1.5 s per 5M)."""
    ordered = np.sort(values)
    keep = np.ones(ordered.size, dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


def _same_tokens(
    tokens: np.ndarray, starts: np.ndarray, origins: np.ndarray, sizes: np.ndarray
) -> np.ndarray:
    """Row-wise: do the ``sizes`` tokens at ``starts`` equal those at ``origins``?"""
    if not sizes.size:
        return np.zeros(0, dtype=bool)
    total = int(sizes.sum())
    step = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    equal = tokens[np.repeat(starts, sizes) + step] == tokens[np.repeat(origins, sizes) + step]
    pair = np.repeat(np.arange(sizes.size), sizes)
    return np.bincount(pair, weights=~equal, minlength=sizes.size) == 0
