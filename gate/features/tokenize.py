"""Tokenise a corpus into one flat array of token ids with document offsets."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Literal

import numpy as np
import pandas as pd

_WORD = re.compile(r"\w+")
_PUNCT = str.maketrans("", "", string.punctuation)


@dataclass(frozen=True)
class TokenizedCorpus:
    """``ids[starts[d]:starts[d+1]]`` are the token ids of document ``d``; ``vocab[id]``
    is the token. Ids start at 1 so that no token hashes to zero."""

    ids: np.ndarray
    starts: np.ndarray
    vocab: np.ndarray

    @property
    def n_docs(self) -> int:
        return self.starts.size - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    def doc_of_position(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_docs, dtype=np.int64), self.lengths)

    def tokens(self, doc_position: int, n: int) -> list[str]:
        return [str(t) for t in self.vocab[self.ids[doc_position : doc_position + n] - 1]]


def tokenize(
    texts: Sequence[str],
    *,
    tokenizer: Literal["whitespace", "word"] = "whitespace",
    lowercase: bool = False,
    strip_punctuation: bool = False,
) -> TokenizedCorpus:
    """Split every text (one call per document, none per token) and factorise the tokens."""
    docs: Sequence[str] = texts
    if strip_punctuation:
        docs = [t.translate(_PUNCT) for t in docs]
    if lowercase:
        docs = [t.lower() for t in docs]
    split = str.split if tokenizer == "whitespace" else _WORD.findall
    token_lists = [split(t) for t in docs]
    lengths = np.fromiter((len(t) for t in token_lists), dtype=np.int64, count=len(token_lists))
    starts = np.zeros(len(token_lists) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    flat = pd.Series(list(chain.from_iterable(token_lists)), dtype=object)
    codes, uniques = pd.factorize(flat, sort=False)
    return TokenizedCorpus(
        ids=codes.astype(np.int64) + 1,
        starts=starts,
        vocab=np.asarray(uniques, dtype=object),
    )


def split_corpus(corpus: TokenizedCorpus, n_first: int) -> tuple[TokenizedCorpus, TokenizedCorpus]:
    """Split a corpus into its first ``n_first`` documents and the rest (one vocabulary)."""
    if not 0 <= n_first <= corpus.n_docs:
        raise ValueError(f"n_first must be in [0, {corpus.n_docs}]; found {n_first}")
    cut = corpus.starts[n_first]
    first = TokenizedCorpus(corpus.ids[:cut], corpus.starts[: n_first + 1], corpus.vocab)
    rest = TokenizedCorpus(corpus.ids[cut:], corpus.starts[n_first:] - cut, corpus.vocab)
    return first, rest
