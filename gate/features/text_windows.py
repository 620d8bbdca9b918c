"""Long texts read whole by a sentence encoder: cut into windows of the encoder's length,
embedded window by window, and compared record to record by their closest windows.

A transformer encoder reads at most ``max_seq_length`` word pieces (all-MiniLM-L6-v2:
256, special tokens included, about 190 English words) and drops the rest: a release
record that copies a source record after a preamble of that length would look like
neither. With windows, a text that fits in one window is that window unchanged, a longer
one is read in windows that start every ``stride`` word pieces, the last one being its
last pieces (with the stride a whole window, consecutive windows but for the last: every
piece in one), and two records are as similar as their most similar pair of windows.
The gate cuts source texts into consecutive windows and release texts into overlapping
ones, so that a source window copied at any offset of a release text lies within half a
stride of a release window.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from gate.errors import InputError

_TOKENIZE_CHUNK = 1024  # texts tokenised at a time (their encodings are held in memory)


@dataclass(frozen=True)
class TextWindows:
    """Texts cut into windows: ``texts[j]`` is a window of text ``owner[j]``; windows of a
    text are in order, and every text has at least one."""

    texts: list[str]
    owner: np.ndarray  # (windows,) int64, non-decreasing


@cache
def window_tokenizer(model_directory: Path) -> tuple[Any, int]:
    """The encoder's tokenizer (a ``tokenizers.Tokenizer`` without truncation or padding)
    and the word pieces one window holds: ``max_seq_length`` of the model's
    ``sentence_bert_config.json`` less the special tokens the tokenizer adds to a text.

    Raises:
        InputError: the directory lacks ``tokenizer.json`` or the length (a model without a
            fast tokenizer cannot be read in windows: ``windows: first``).
    """
    from tokenizers import Tokenizer

    tokenizer_file = model_directory / "tokenizer.json"
    config_file = model_directory / "sentence_bert_config.json"
    if not tokenizer_file.is_file() or not config_file.is_file():
        raise InputError(
            f"semantic windows: the model directory {model_directory} has no tokenizer.json "
            "or sentence_bert_config.json; read only the first window (windows: first)"
        )
    length = json.loads(config_file.read_text(encoding="utf-8")).get("max_seq_length")
    if not isinstance(length, int) or length < 8:
        raise InputError(
            f"semantic windows: max_seq_length in {config_file} must be an integer >= 8; "
            f"found {length!r}"
        )
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer, length - tokenizer.num_special_tokens_to_add(False)


def cut_windows(
    offsets: np.ndarray, word_ids: np.ndarray | None = None, *, pieces: int, stride: int
) -> list[tuple[int, int]]:
    """Character spans of the windows of one text from its word pieces' ``offsets``
    ((n, 2) start and end characters): runs of at most ``pieces`` pieces, one starting
    every ``stride`` pieces, the last one the text's last ``pieces`` pieces (so that no
    window is a short tail that a generic release text could match). A run starts and
    ends at a piece that begins a word: one after white space where the run has such a
    piece, else one where the tokenizer's pre-tokenisation starts a word (``word_ids``,
    the word of each piece: a window cut there is tokenised again into the same
    pieces), else at the count. With ``stride == pieces`` the windows are consecutive but
    for the last, and every piece is in one; a text of at most ``pieces`` pieces is one
    span, of none no span."""
    n = offsets.shape[0]
    if n <= pieces:
        return [(int(offsets[0, 0]), int(offsets[-1, 1]))] if n else []
    after_space = np.ones(n, dtype=bool)
    after_space[1:] = offsets[1:, 0] > offsets[:-1, 1]
    new_word = after_space.copy()
    if word_ids is not None:
        new_word[1:] |= word_ids[1:] != word_ids[:-1]
    levels = (np.flatnonzero(after_space), np.flatnonzero(new_word))

    def back(position: int, floor: int) -> int:
        """The last word start in ``(floor, position]``, else ``position``."""
        for starts in levels:
            i = int(np.searchsorted(starts, position, side="right")) - 1
            if i >= 0 and starts[i] > floor:
                return int(starts[i])
        return position

    def forward(position: int, ceiling: int) -> int:
        """The first word start in ``[position, ceiling]``, else ``position``."""
        for starts in levels:
            i = int(np.searchsorted(starts, position, side="left"))
            if i < starts.size and starts[i] <= ceiling:
                return int(starts[i])
        return position

    spans = []
    first = 0
    while first + pieces < n:
        end = back(first + pieces, first)
        spans.append((int(offsets[first, 0]), int(offsets[end - 1, 1])))
        first = back(min(first + stride, end), first)
    first = forward(n - pieces, first)  # the last window: as many pieces as fit
    spans.append((int(offsets[first, 0]), int(offsets[n - 1, 1])))
    return spans


def text_windows(
    texts: list[str], *, tokenizer: Any, pieces: int, stride: int | None = None
) -> TextWindows:
    """Every text cut into windows of at most ``pieces`` word pieces of ``tokenizer``,
    one every ``stride`` pieces (default ``pieces``: consecutive windows;
    :func:`cut_windows`); a text that fits is its own single window."""
    stride = pieces if stride is None else stride
    if pieces < 1 or not 1 <= stride <= pieces:
        raise ValueError(f"need 1 <= stride <= pieces; found pieces={pieces}, stride={stride}")
    windows: list[str] = []
    owner: list[int] = []
    for start in range(0, len(texts), _TOKENIZE_CHUNK):
        part = texts[start : start + _TOKENIZE_CHUNK]
        encodings = tokenizer.encode_batch(part, add_special_tokens=False)
        for row, (text, encoding) in enumerate(zip(part, encodings, strict=True), start=start):
            if len(encoding.offsets) <= pieces:
                windows.append(text)
                owner.append(row)
                continue
            offsets = np.asarray(encoding.offsets, dtype=np.int64)
            word_ids = np.asarray(encoding.word_ids, dtype=np.float64)  # None: NaN, a start
            for first, last in cut_windows(offsets, word_ids, pieces=pieces, stride=stride):
                windows.append(text[first:last])
                owner.append(row)
    return TextWindows(windows, np.asarray(owner, dtype=np.int64))


def record_vectors(vectors: np.ndarray, owner: np.ndarray, n_records: int) -> np.ndarray:
    """One L2-normalised vector per record: the mean of its windows' vectors (a record of
    one window keeps that window's vector exactly)."""
    counts = np.bincount(owner, minlength=n_records)
    if np.all(counts == 1):
        return vectors
    sums = np.zeros((n_records, vectors.shape[1]), dtype=np.float64)
    np.add.at(sums, owner, vectors)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return (sums / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def nearest_records(
    similarities: np.ndarray,
    hit_owner: np.ndarray,
    query_owner: np.ndarray,
    *,
    n_queries: int,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Each query record's ``k`` most similar base records from window matches.

    A record pair's similarity is that of its most similar pair of windows. The matches
    are flat arrays: match ``i`` is a query window of record ``query_owner[i]`` against a
    base window of record ``hit_owner[i]`` at ``similarities[i]``. They must hold, for
    each query window, its nearest base windows down to its ``k``-th distinct base record
    (:func:`search_width`); then the ``k`` records returned per query record are its
    ``k`` most similar (a record of the query's top ``k`` is in the top ``k`` of the
    query window that is closest to it).

    Returns:
        (similarities, base records), each (n_queries, k), most similar first; ties in
        base-record order.

    Raises:
        ValueError: a query record with fewer than ``k`` distinct base records found.
    """
    order = np.lexsort((-similarities, hit_owner, query_owner))  # per pair: best first
    rows, hits, values = query_owner[order], hit_owner[order], similarities[order]
    best = np.ones(rows.size, dtype=bool)
    best[1:] = (rows[1:] != rows[:-1]) | (hits[1:] != hits[:-1])
    rows, hits, values = rows[best], hits[best], values[best]
    order = np.lexsort((hits, -values, rows))  # per row: most similar first
    rows, hits, values = rows[order], hits[order], values[order]
    rank = np.arange(rows.size) - np.searchsorted(rows, rows, side="left")
    keep = rank < k
    found = np.bincount(rows[keep], minlength=n_queries)
    if np.any(found < k):
        short = int(np.flatnonzero(found < k)[0])
        raise ValueError(
            f"query record {short} has {int(found[short])} distinct base records among its "
            f"windows' neighbours; k={k} asked for"
        )
    out_values = np.empty((n_queries, k), dtype=similarities.dtype)
    out_hits = np.empty((n_queries, k), dtype=np.int64)
    out_values[rows[keep], rank[keep]] = values[keep]
    out_hits[rows[keep], rank[keep]] = hits[keep]
    return out_values, out_hits


def distinct_per_row(owners: np.ndarray) -> np.ndarray:
    """How many distinct values each row of ``owners`` (n, w) holds."""
    if owners.shape[1] == 0:
        return np.zeros(owners.shape[0], dtype=np.int64)
    ordered = np.sort(owners, axis=1)
    return 1 + (ordered[:, 1:] != ordered[:, :-1]).sum(axis=1)


def search_width(*, k: int, most_windows: int) -> int:
    """Nearest base windows that hold a query window's ``k`` nearest distinct records
    whatever they are: ``(k - 1) · most_windows + 1``, ``most_windows`` the most windows
    of one base record (the windows ranked above the ``k``-th record's best belong to at
    most ``k - 1`` records)."""
    return (k - 1) * most_windows + 1


def nearest_release_records(
    source_windows: np.ndarray,
    source_owner: np.ndarray,
    release_windows: np.ndarray,
    release_owner: np.ndarray,
    *,
    k: int,
    search: Callable[[np.ndarray, np.ndarray, int], tuple[np.ndarray, np.ndarray, Any]],
) -> tuple[np.ndarray, np.ndarray, Any]:
    """Each source record's ``k`` most similar release records, records being as similar
    as their most similar pair of windows (:func:`nearest_records`).

    ``search(queries, base, width)`` returns each query's ``width`` nearest base rows
    (similarities, indices, and how it searched). Every source window is searched for its
    ``k`` nearest release windows; a window whose ``k`` hits hold fewer than ``k``
    distinct records is searched again, four times as wide each round, up to
    :func:`search_width` (which holds them whatever they are), so that one release
    record of many windows widens the search only for the windows it crowds.

    Returns:
        (similarities, release records, how the first search ran); arrays (n_source, k).
    """
    n_source = int(source_owner.max()) + 1 if source_owner.size else 0
    k = min(k, int(release_owner.max()) + 1)
    n_windows = release_windows.shape[0]
    cap = min(search_width(k=k, most_windows=int(np.bincount(release_owner).max())), n_windows)
    rows = np.arange(source_windows.shape[0])
    width = min(k, cap)
    matches: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    first_search = None
    while rows.size:
        sims, hits, how = search(source_windows[rows], release_windows, width)
        first_search = how if first_search is None else first_search
        owners = release_owner[hits]
        matches.append((sims.ravel(), owners.ravel(), np.repeat(source_owner[rows], width)))
        if width >= cap:
            break
        rows = rows[distinct_per_row(owners) < k]
        width = min(4 * width, cap)
    similarities, hit_owner, query_owner = (
        np.concatenate(part) for part in zip(*matches, strict=True)
    )
    nearest, records = nearest_records(
        similarities, hit_owner, query_owner, n_queries=n_source, k=k
    )
    return nearest, records, first_search
