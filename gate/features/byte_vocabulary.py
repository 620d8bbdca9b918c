"""The byte vocabulary of the reference generator's checkpoints: the 256 bytes and four
special tokens, fixed before any data is seen (no tokenizer is trained on private text).

Shared by the generator that writes such checkpoints and by the surprisal scorer that
reads them (``gate.features.causal_lm``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PAD, BOS, SEP, EOS = 256, 257, 258, 259
VOCAB_SIZE = 260
# The file that marks a directory as a reference generator checkpoint (byte vocabulary).
CHECKPOINT_FILE = "gate-generator.json"


def padded_batch(sequences: Sequence[Sequence[int]], *, length: int, pad: int = PAD) -> np.ndarray:
    """Right-padded int64 matrix of ``sequences``."""
    out = np.full((len(sequences), length), pad, dtype=np.int64)
    for row, seq in enumerate(sequences):
        out[row, : len(seq)] = seq
    return out
