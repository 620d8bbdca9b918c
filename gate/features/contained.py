"""Texts found whole inside longer texts: which rows hold a candidate's every word, in
order, with nothing between them (a record inside a prompt template, or several records
packed into one row).

Words are the ``word`` tokenizer's (runs of letters, digits and ``_``), so the
punctuation and white space between them are not compared. Tokens are compared by a keyed
64-bit hash of their text (:func:`gate.features.ngram.token_hashes`, a key drawn for each
call), so that the rows and the candidates are tokenised apart. A candidate can only be
held by a row that holds its first ``anchor`` words: only the candidates whose opening
(their first :data:`PREFIX_CHARACTERS` characters) passes that test are tokenised whole.
Texts of the same words are looked for once. Each is looked for through its
``anchor``-word n-gram that the fewest candidates share (a template's words must not pair
every row that has them with every candidate), with the polynomial hashes of
:mod:`gate.features.ngram`; a pair whose whole windows hash alike is confirmed token by
token, in blocks of pairs. No Python loop runs over tokens or rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gate.features.ngram import NgramHasher, hash_key, members, sorted_runs, token_hashes
from gate.features.tokenize import tokenize

ANCHOR_WORDS = 8
PREFIX_CHARACTERS = 160  # a candidate's opening, read for its first ``anchor`` words
_PAIRS_PER_BLOCK = 1 << 21  # (row position, candidate) pairs checked at a time


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
    row_grams, _ = sorted_runs(np.sort(row_hasher.hashes(row_positions, anchor)))
    kept = _openings_held(candidates, row_grams, key=key, min_words=min_words, anchor=anchor)
    if not kept.size:
        return empty, empty
    looked = _Tokens(candidates.take(pa.array(kept)), key)
    n_looked = kept.size
    tokens = np.concatenate([looked.values, held.values])
    starts = np.concatenate([looked.starts[:-1], held.starts + looked.starts[-1]])
    lengths = np.diff(starts)
    hasher = NgramHasher(tokens, starts)

    looked_for = np.flatnonzero(lengths[:n_looked] >= min_words)
    if not looked_for.size:  # openings cut in long words, but the texts are short
        return empty, empty
    representative = _first_of_equal(hasher, starts, lengths, looked_for)
    anchor_at = _rarest_ngrams(hasher, starts, lengths, np.unique(representative), anchor)
    candidate = hasher.doc_of(anchor_at)  # the representatives, in order
    offset = anchor_at - starts[candidate]
    anchor_hash = hasher.hashes(anchor_at, anchor)

    # the rows' n-grams that are some candidate's anchor, paired with those candidates
    in_rows = row_positions + looked.starts[-1]
    row_hashes = hasher.hashes(in_rows, anchor)
    by_anchor = np.argsort(anchor_hash, kind="stable")
    sorted_anchors = anchor_hash[by_anchor]
    hit = members(sorted_runs(sorted_anchors)[0], row_hashes)
    at, at_hash = in_rows[hit], row_hashes[hit]
    low = np.searchsorted(sorted_anchors, at_hash, side="left")
    many = np.searchsorted(sorted_anchors, at_hash, side="right") - low
    found_rows, found_candidates = [], []
    ends = np.cumsum(many)
    cuts = np.searchsorted(
        ends,
        np.arange(_PAIRS_PER_BLOCK, int(ends[-1]) if ends.size else 0, _PAIRS_PER_BLOCK),
        side="right",
    )
    for block in np.split(np.arange(at.size), cuts):
        pair, start = _confirmed_pairs(
            hasher, tokens, by_anchor, low[block], many[block], at[block], offset, candidate
        )
        found_rows.append(hasher.doc_of(start) - n_looked)
        found_candidates.append(candidate[pair])
    rows_found = np.concatenate([empty, *found_rows])
    by_representative = np.concatenate([empty, *found_candidates])
    # every candidate whose words are its representative's
    members_of = np.argsort(representative, kind="stable")
    group_start = np.searchsorted(representative[members_of], by_representative, side="left")
    group_size = (
        np.searchsorted(representative[members_of], by_representative, side="right") - group_start
    )
    expanded = looked_for[members_of[np.repeat(group_start, group_size) + _steps(group_size)]]
    found = np.unique(
        np.stack([np.repeat(rows_found, group_size), kept[expanded]], axis=1).reshape(-1, 2),
        axis=0,
    )
    return found[:, 1].astype(np.int64), found[:, 0].astype(np.int64)


def _first_of_equal(
    hasher: NgramHasher, starts: np.ndarray, lengths: np.ndarray, docs: np.ndarray
) -> np.ndarray:
    """For each of ``docs``, the first of them with the same words (by their whole
    hash): texts that differ only in punctuation are looked for once."""
    whole = hasher.hashes(starts[docs], lengths[docs])
    key = np.stack([lengths[docs].astype(np.uint64), whole], axis=1)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return docs[first[inverse.ravel()]]


def _rarest_ngrams(
    hasher: NgramHasher, starts: np.ndarray, lengths: np.ndarray, docs: np.ndarray, n: int
) -> np.ndarray:
    """For each of ``docs`` (sorted), the position of its n-gram that the fewest of
    ``docs`` share (the first such): a row pairs with every candidate whose anchor it
    holds, so an anchor many candidates share (a template's words) would pair each row
    with them all."""
    positions = hasher.fitting(np.arange(starts[docs[-1] + 1], dtype=np.int64), n)
    positions = positions[np.isin(hasher.doc_of(positions), docs)]
    grams = hasher.hashes(positions, n)
    order = np.argsort(grams, kind="stable")
    _, counts = sorted_runs(grams[order])
    shared = np.empty(grams.size, dtype=np.int64)
    shared[order] = np.repeat(counts, counts)
    doc = hasher.doc_of(positions)
    first = np.flatnonzero(np.r_[True, doc[1:] != doc[:-1]])
    fewest = np.minimum.reduceat(shared, first)
    rarest = np.flatnonzero(shared == np.repeat(fewest, np.diff(np.r_[first, doc.size])))
    return positions[rarest[np.r_[True, doc[rarest][1:] != doc[rarest][:-1]]]]


def _confirmed_pairs(
    hasher: NgramHasher,
    tokens: np.ndarray,
    by_anchor: np.ndarray,
    low: np.ndarray,
    many: np.ndarray,
    at: np.ndarray,
    offset: np.ndarray,
    candidate: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Of the row positions ``at`` that hold an anchor (``many`` candidates' from ``low``
    in ``by_anchor``'s order), the (candidate, start) pairs whose candidate the row holds
    whole from ``start``: its window fits in the row, hashes alike and has its tokens."""
    pair = by_anchor[np.repeat(low, many) + _steps(many)]
    found_at = np.repeat(at, many)
    start = found_at - offset[pair]
    starts = hasher.starts
    size = np.diff(starts)[candidate[pair]]
    fits = (start >= starts[hasher.doc_of(found_at)]) & (start + size <= hasher.doc_end(found_at))
    pair, start, size = pair[fits], start[fits], size[fits]
    origin = starts[candidate[pair]]
    same = hasher.hashes(start, size) == hasher.hashes(origin, size)
    pair, start, size, origin = pair[same], start[same], size[same], origin[same]
    confirmed = _same_tokens(tokens, start, origin, size)
    return pair[confirmed], start[confirmed]


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


def _steps(sizes: np.ndarray) -> np.ndarray:
    """``0 .. size - 1`` for each of ``sizes``, end to end (the offsets of ragged runs)."""
    return np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)


def _same_tokens(
    tokens: np.ndarray, starts: np.ndarray, origins: np.ndarray, sizes: np.ndarray
) -> np.ndarray:
    """Row-wise: do the ``sizes`` tokens at ``starts`` equal those at ``origins``?"""
    if not sizes.size:
        return np.zeros(0, dtype=bool)
    step = _steps(sizes)
    equal = tokens[np.repeat(starts, sizes) + step] == tokens[np.repeat(origins, sizes) + step]
    pair = np.repeat(np.arange(sizes.size), sizes)
    return np.bincount(pair, weights=~equal, minlength=sizes.size) == 0
