"""Tokenise a corpus into one flat array of token ids with document offsets.

Splitting, normalisation and the token dictionary run in Arrow's C++ kernels: no Python
loop over tokens (nor over documents).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Python's ``\w``: letters, digits (any script) and underscore; ``[[:punct:]]`` in RE2 is
# the ASCII punctuation of ``string.punctuation``.
_NON_WORD = r"[^\p{L}\p{N}_]+"
_PUNCTUATION = r"[[:punct:]]"

Texts: TypeAlias = Sequence[str] | pa.Array | pa.ChunkedArray
"""Texts as Python strings, or as an Arrow column of strings (pandas' ``str`` columns hold
one: ``pa.array(series)`` gives it without copying a string)."""


def arrow_texts(texts: Texts) -> pa.ChunkedArray:
    """``texts`` as one Arrow column of large strings; an Arrow array (of large strings)
    is taken as it is, a sequence of strings is converted."""
    if isinstance(texts, pa.Array):
        texts = pa.chunked_array([texts])
    elif not isinstance(texts, pa.ChunkedArray):
        texts = pa.chunked_array([pa.array(list(texts), type=pa.large_string())])
    return texts if texts.type == pa.large_string() else texts.cast(pa.large_string())


def lower_case_by_character(texts: pa.Array) -> pa.Array:
    """``texts`` with each character in lower case, one character for one: its simple lower
    case (``İ`` is ``i``), and the final sigma ``ς`` as ``σ``, since ``Σ`` lowers to ``σ``
    wherever it stands (Greek copied in capitals matched no n-gram of its source, a
    review)."""
    return pc.replace_substring(pc.utf8_lower(texts), pattern="ς", replacement="σ")


def lower_case(texts: pa.Array) -> pa.Array:
    """``texts`` in the lower case the n-gram tokenizers compare:
    :func:`lower_case_by_character`, then ``ß`` as ``ss``, as ``str.casefold`` reads it
    (German written in capitals writes ``ß`` as ``SS``)."""
    return pc.replace_substring(lower_case_by_character(texts), pattern="ß", replacement="ss")


@dataclass(frozen=True)
class TokenizedCorpus:
    """``ids[starts[d]:starts[d+1]]`` are the token ids of document ``d``; ``vocab[id - 1]``
    is the token. Ids start at 1 so that no token hashes to zero."""

    ids: np.ndarray
    starts: np.ndarray
    vocab: pa.Array

    @property
    def n_docs(self) -> int:
        return self.starts.size - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    def tokens(self, position: int, n: int) -> list[str]:
        """The ``n`` tokens starting at corpus ``position``."""
        return [
            str(t)
            for t in self.vocab.take(pa.array(self.ids[position : position + n] - 1)).to_pylist()
        ]


def tokenize(
    texts: Texts,
    *,
    tokenizer: Literal["whitespace", "word"] = "whitespace",
    lowercase: bool = False,
    strip_punctuation: bool = False,
) -> TokenizedCorpus:
    """Tokenise ``texts``: ``whitespace`` splits like ``str.split()``; ``word`` keeps runs of
    ``\\w`` characters. Normalisation (punctuation, case) is applied first."""
    arr = arrow_texts(texts).combine_chunks()
    if strip_punctuation:
        arr = pc.replace_substring_regex(arr, pattern=_PUNCTUATION, replacement="")
    if lowercase:
        arr = lower_case(arr)
    if tokenizer == "whitespace":
        lists = pc.utf8_split_whitespace(pc.utf8_trim_whitespace(arr))
    elif tokenizer == "word":
        lists = pc.split_pattern_regex(arr, pattern=_NON_WORD)
    else:
        raise ValueError(f"tokenizer must be 'whitespace' or 'word'; found {tokenizer!r}")
    n_docs = len(arr)
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)
    flat = lists.flatten()
    nonempty = pc.not_equal(flat, "").to_numpy(zero_copy_only=False)
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), lengths.astype(np.int64))
    if not nonempty.all():  # empty texts and separators at the ends give empty tokens
        flat = flat.filter(pa.array(nonempty))
        doc = doc[nonempty]
    starts = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(np.bincount(doc, minlength=n_docs), out=starts[1:])
    encoded = pc.dictionary_encode(flat)
    ids = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64) + 1
    return TokenizedCorpus(ids=ids, starts=starts, vocab=encoded.dictionary)


def long_word_share(texts: Texts, *, longer_than: int) -> float:
    """The share of the characters of ``texts`` outside white space that are in words (runs
    without white space) of more than ``longer_than`` characters; 0 for no character."""
    words = pc.utf8_split_whitespace(arrow_texts(texts).combine_chunks()).flatten()
    lengths = pc.utf8_length(words).to_numpy(zero_copy_only=False).astype(np.int64)
    total = int(lengths.sum())
    return float(lengths[lengths > longer_than].sum() / total) if total else 0.0


def split_corpus(corpus: TokenizedCorpus, n_first: int) -> tuple[TokenizedCorpus, TokenizedCorpus]:
    """Split a corpus into its first ``n_first`` documents and the rest (one vocabulary)."""
    if not 0 <= n_first <= corpus.n_docs:
        raise ValueError(f"n_first must be in [0, {corpus.n_docs}]; found {n_first}")
    cut = corpus.starts[n_first]
    first = TokenizedCorpus(corpus.ids[:cut], corpus.starts[: n_first + 1], corpus.vocab)
    rest = TokenizedCorpus(corpus.ids[cut:], corpus.starts[n_first:] - cut, corpus.vocab)
    return first, rest
