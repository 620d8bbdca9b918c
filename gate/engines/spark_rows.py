"""The spark engine's per-partition kernels: a batch of records becomes n-gram rows
``(n, h1, h2, record, offset[, user][, in_s])`` by the local engine's numpy tokeniser and
hashes, inside ``mapInArrow`` on the executors (no Python function per row).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gate.features.ngram import NgramHasher, token_hashes
from gate.features.tokenize import tokenize

SECOND_BASE = 0xC2B2AE3D27D4EB4F  # odd; the base of h2, independent of h1's
_ROW_DTYPES = {
    "n": np.int32,
    "h1": np.int64,
    "h2": np.int64,
    "doc": np.int64,
    "offset": np.int32,
    "user": np.int64,
    "in_s": np.bool_,
}


def _hashed_batch(
    batch: Any, *, tokenizer: str, lowercase: bool, strip_punctuation: bool, key: str
) -> tuple[Any, NgramHasher, NgramHasher]:
    """Tokenise one Arrow batch's ``text`` and hash its tokens under ``key``; the corpus
    and the two n-gram hashers (bases of h1 and h2)."""
    corpus = tokenize(
        batch.column("text"),
        tokenizer=tokenizer,  # type: ignore[arg-type]
        lowercase=lowercase,
        strip_punctuation=strip_punctuation,
    )
    ids = token_hashes(corpus.vocab, key=key)[corpus.ids - 1] if corpus.ids.size else corpus.ids
    return (
        corpus,
        NgramHasher(ids, corpus.starts),
        NgramHasher(ids, corpus.starts, base=SECOND_BASE),
    )


class _RowBuffer:
    """Columns of n-gram rows ``(n, h1, h2, doc, offset[, user][, in_s])`` of one batch."""

    def __init__(self, batch: Any, corpus: Any, *, with_user: bool, with_flag: bool) -> None:
        self.corpus = corpus
        self.docs = batch.column("doc").to_numpy()
        self.users = batch.column("user").to_numpy() if with_user else None
        names = ["n", "h1", "h2", "doc", "offset"] + ["user"] * with_user + ["in_s"] * with_flag
        self.columns: dict[str, list[np.ndarray]] = {k: [] for k in names}

    def add(
        self,
        first: NgramHasher,
        second: NgramHasher,
        pos: np.ndarray,
        n: int,
        in_s: np.ndarray | None = None,
    ) -> None:
        record = first.doc[pos]
        self.columns["n"].append(np.full(pos.size, n, dtype=np.int32))
        self.columns["h1"].append(first.hashes(pos, n).view(np.int64))
        self.columns["h2"].append(second.hashes(pos, n).view(np.int64))
        self.columns["doc"].append(self.docs[record])
        self.columns["offset"].append((pos - self.corpus.starts[record]).astype(np.int32))
        if self.users is not None:
            self.columns["user"].append(self.users[record])
        if in_s is not None:
            self.columns["in_s"].append(in_s)

    def table(self) -> Any:
        import pyarrow as pa

        return pa.table(
            {
                k: np.concatenate(v) if v else np.empty(0, dtype=_ROW_DTYPES[k])
                for k, v in self.columns.items()
            }
        )


def ngram_rows(
    batch: Any,
    *,
    n_min: int,
    n_max: int,
    tokenizer: str,
    lowercase: bool,
    strip_punctuation: bool,
    with_user: bool,
    key: str,
) -> Any:
    """One Arrow record batch of records (``doc``, ``text`` and maybe ``user``) to the
    rows of every n-gram, ``n_min <= n <= n_max``, that fits in its record (an Arrow
    table); token hashes under ``key`` (:func:`gate.features.ngram.hash_key`)."""
    corpus, first, second = _hashed_batch(
        batch,
        tokenizer=tokenizer,
        lowercase=lowercase,
        strip_punctuation=strip_punctuation,
        key=key,
    )
    rows = _RowBuffer(batch, corpus, with_user=with_user, with_flag=False)
    for n in range(n_min, n_max + 1):
        rows.add(first, second, first.positions(n), n)
    return rows.table()


def _all_flagged(flagged: np.ndarray, pos: np.ndarray, span: int) -> np.ndarray:
    """Whether every position of ``[p, p + span)`` is flagged, for each ``p`` in ``pos``."""
    unflagged = np.concatenate([[0], np.cumsum(~flagged)])
    return unflagged[pos + span] == unflagged[pos]


def longer_ngram_rows(
    batch: Any,
    *,
    n_min: int,
    n_max: int,
    tokenizer: str,
    lowercase: bool,
    strip_punctuation: bool,
    source: bool,
    key: str,
) -> Any:
    """The rows of the n-grams longer than ``n_min`` that can matter, from the flags of
    each record's ``n_min``-grams (column ``flags``: a list per record).

    Source records (``flags``: structs ``offset, repeated, shared``): an n-gram is hashed
    if all its ``n_min``-grams occur more than once in the source (it may be repeated;
    column ``in_s``) or all occur in the release (it may be disclosed). Release records
    (``flags``: offsets of ``n_min``-grams that occur in the source): an n-gram is hashed
    if all its ``n_min``-grams occur in the source. Both conditions depend only on the
    n-gram's tokens, so either every occurrence of an n-gram is hashed or none; an n-gram
    that is not is unique in the source (counted from the record lengths) or absent from
    the other corpus.
    """
    import pyarrow.compute as pc

    corpus, first, second = _hashed_batch(
        batch,
        tokenizer=tokenizer,
        lowercase=lowercase,
        strip_punctuation=strip_punctuation,
        key=key,
    )
    flags = batch.column("flags")
    parent = pc.list_parent_indices(flags).to_numpy()
    flat = pc.list_flatten(flags)
    total = corpus.ids.size
    repeated = np.zeros(total, dtype=bool)
    shared = np.zeros(total, dtype=bool)
    if source:
        at = corpus.starts[parent] + flat.field("offset").to_numpy()
        repeated[at[flat.field("repeated").to_numpy(zero_copy_only=False)]] = True
        shared[at[flat.field("shared").to_numpy(zero_copy_only=False)]] = True
    else:
        shared[corpus.starts[parent] + flat.to_numpy()] = True
    rows = _RowBuffer(batch, corpus, with_user=source, with_flag=source)
    for n in range(n_min + 1, n_max + 1):
        pos = first.positions(n)
        span = n - n_min + 1
        may_share = _all_flagged(shared, pos, span)
        if source:
            may_repeat = _all_flagged(repeated, pos, span)
            keep = may_repeat | may_share
            rows.add(first, second, pos[keep], n, in_s=may_repeat[keep])
        else:
            rows.add(first, second, pos[may_share], n)
    return rows.table()


def row_schema(with_user: bool, with_flag: bool = False) -> str:
    user = ", user long" if with_user else ""
    flag = ", in_s boolean" if with_flag else ""
    return f"n int, h1 long, h2 long, doc long, offset int{user}{flag}"
