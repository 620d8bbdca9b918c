"""Seeds of independent random streams, each derived from one recorded seed.

Stream ``key`` of seed ``s`` is seeded by the first word of NumPy's
``SeedSequence(s, spawn_key=key)`` (NumPy's "Parallel random number generation"
guide). Offsets such as ``s + 1`` give overlapping streams: the batches of a
generator seeded ``s`` (``s + 1``) were the initialisation of one seeded ``s + 1``.
Children of a seed sequence never meet that way, and they need nothing recorded beyond
``s`` and ``key``.
"""

from __future__ import annotations

import numpy as np


def stream_seed(seed: int, *key: int) -> int:
    """The 32-bit seed of stream ``key`` of ``seed`` (a child of its seed sequence).

    Args:
        seed: the recorded seed, ``>= 0``.
        *key: the stream's spawn key, one or more integers ``>= 0``; keys of different
            lengths are different streams.

    Raises:
        ValueError: ``seed`` or a key entry is negative, or no key is given.
    """
    if seed < 0:
        raise ValueError(f"seed must be >= 0; found {seed}")
    if not key:
        raise ValueError("a stream needs a key of at least one integer; found none")
    if min(key) < 0:
        raise ValueError(f"stream key entries must be >= 0; found {key}")
    child = np.random.SeedSequence(seed, spawn_key=key)
    return int(child.generate_state(1)[0])
