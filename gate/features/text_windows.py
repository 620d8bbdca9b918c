"""Long texts read whole by a sentence encoder: cut into windows of the encoder's length,
embedded window by window, and compared record to record by their closest windows.

A transformer encoder reads at most ``max_seq_length`` word pieces (all-MiniLM-L6-v2:
256, special tokens included, about 190 English words) and drops the rest: a release
record that copies a source record after a preamble of that length would look like
neither. With windows, a text that fits in one window is that window unchanged, a longer
one is read in windows that start every ``stride`` word pieces (consecutive ones when the
stride is the window: every piece in exactly one), and two records are as similar as
their most similar pair of windows. The gate cuts source texts into consecutive windows
and release texts into overlapping ones, so that a source window copied at any offset of
a release text lies within half a stride of a release window.
"""

from __future__ import annotations

import json
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
    text are consecutive and in order, and every text has at least one."""

    texts: list[str]
    owner: np.ndarray  # (windows,) int64, non-decreasing
    pieces: int  # word pieces per window at most (the encoder's window without specials)

    def windows_per_text(self, n_texts: int) -> np.ndarray:
        """How many windows each of the ``n_texts`` texts has."""
        return np.bincount(self.owner, minlength=n_texts)


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


def cut_windows(offsets: np.ndarray, *, pieces: int, stride: int) -> list[tuple[int, int]]:
    """Character spans of the windows of one text from its word pieces' ``offsets``
    ((n, 2) start and end characters): runs of at most ``pieces`` pieces, one starting
    every ``stride`` pieces until a run reaches the text's end. Runs start and end
    between words (before a piece that follows white space) where the run has such a
    place, else at the count. With ``stride == pieces`` the windows are consecutive and
    every piece is in exactly one; a text of at most ``pieces`` pieces is one span, of
    none no span."""
    n = offsets.shape[0]
    if n <= pieces:
        return [(int(offsets[0, 0]), int(offsets[-1, 1]))] if n else []
    after_space = np.ones(n, dtype=bool)
    after_space[1:] = offsets[1:, 0] > offsets[:-1, 1]
    word_starts = np.flatnonzero(after_space)

    def back_to_word_start(position: int, floor: int) -> int:
        start = int(word_starts[np.searchsorted(word_starts, position, side="right") - 1])
        return start if start > floor else position

    spans = []
    first = 0
    while True:
        end = n if first + pieces >= n else back_to_word_start(first + pieces, first)
        spans.append((int(offsets[first, 0]), int(offsets[end - 1, 1])))
        if end == n:
            return spans
        first = back_to_word_start(min(first + stride, end), first)


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
            for first, last in cut_windows(offsets, pieces=pieces, stride=stride):
                windows.append(text[first:last])
                owner.append(row)
    return TextWindows(windows, np.asarray(owner, dtype=np.int64), pieces)


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
    """Each query record's ``k`` most similar base records from a window search.

    A record pair's similarity is that of its most similar pair of windows. The search
    gave, for each query window (row of ``similarities``; it is a window of record
    ``query_owner[row]``), its nearest base windows, of records ``hit_owner`` (same shape).
    When each window's search returned at least ``k·m`` windows, where ``m`` is the
    largest number of windows of a base record, the ``k`` records returned per query
    record are its ``k`` most similar (a record whose best window ranks below ``k·m``
    windows has ``k`` records more similar than it).

    Returns:
        (similarities, base records), each (n_queries, k), most similar first; ties in
        base-record order.

    Raises:
        ValueError: a query record with fewer than ``k`` distinct base records found.
    """
    rows = np.repeat(query_owner, similarities.shape[1])
    hits = hit_owner.reshape(-1)
    values = similarities.reshape(-1)
    order = np.lexsort((-values, hits, rows))  # per (row, hit): most similar first
    rows, hits, values = rows[order], hits[order], values[order]
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
