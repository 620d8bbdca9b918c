"""Identical texts found once: the PII and embedding steps analyse each distinct text once
and copy its result to every record that holds it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def distinct_texts(texts: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """``codes, unique`` with ``texts[i] == unique[codes[i]]``, ``unique`` in order of
    first occurrence.

    Raises:
        TypeError: an item is not a string (a missing text would otherwise get code -1,
            which indexes the last distinct text's result).
    """
    import pandas as pd  # here: a PII worker imports this module and never calls this

    values = pd.Series(list(texts), dtype=object)
    kind = pd.api.types.infer_dtype(values, skipna=False)
    if len(values) and kind != "string":
        bad = next(i for i, t in enumerate(values) if not isinstance(t, str))
        raise TypeError(
            f"texts must be strings; item {bad} is {type(values[bad]).__name__} ({kind} column)"
        )
    codes, unique = pd.factorize(values, sort=False)
    return codes.astype(np.int64), [str(t) for t in unique]
