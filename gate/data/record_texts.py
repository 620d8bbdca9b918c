"""The texts of a table whose records are not one ``text`` each: a fine-tuning file in a
chat or instruction format (``messages: [{role, content}]``, ShareGPT's
``conversations: [{from, value}]``, ``prompt``/``completion``,
``instruction``/``input``/``output``) read as one row per string it holds.

Strings are found by Arrow's types, not by a walk over records: a column is read as an
Arrow array, and lists and objects are flattened level by level, each string keeping the
row (and so the line) it came from.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gate.data.io import RawTable, column_names, refuse_lookalike_columns
from gate.errors import BundleError

NOT_TEXT_COLUMNS = frozenset({"record_id", "user_id", "split", "source_id", "label"})
"""Columns of the gate's formats that hold no record's text."""


def texts_of_records(table: RawTable, *, id_columns: Collection[str]) -> RawTable:
    """``table`` itself if it has a ``text`` column; otherwise a table of one row per
    string value its records hold (nested in lists and objects too), in the order of the
    records and, within one, of its columns, each with its record's ``__line__`` and
    ``id_columns``.

    Args:
        table: a table as read.
        id_columns: columns that hold ids, not texts (kept beside each text).

    Raises:
        BundleError: the table has neither a ``text`` column nor a string, or a column
            whose values Arrow cannot read as one type (named, with its line).
    """
    refuse_lookalike_columns(table)
    frame = table.frame
    if "text" in frame.columns:
        return table
    skipped = {"__line__", "__file__", *NOT_TEXT_COLUMNS, *id_columns}
    parts: list[tuple[pa.Array, np.ndarray]] = []
    rows = np.arange(len(frame))
    for column in frame.columns:
        if column not in skipped:
            parts.extend(_strings(_arrow_column(table, column), rows))
    if not parts or not sum(len(values) for values, _ in parts):
        raise BundleError(
            f"{table.path}: no 'text' column and no string in its records to compare; "
            f"columns found: {column_names(table)}"
        )
    of_row = np.concatenate([at for _, at in parts])
    order = np.argsort(of_row, kind="stable")
    texts = pa.concat_arrays([values.cast(pa.large_string()) for values, _ in parts])
    kept = [c for c in ("__line__", *id_columns) if c in frame.columns]
    expanded = frame[kept].iloc[of_row[order]].reset_index(drop=True)
    expanded.insert(0, "text", pd.array(texts.take(pa.array(order)), dtype="str"))
    return RawTable(
        path=table.path,
        format=table.format,
        sha256=table.sha256,
        size_bytes=table.size_bytes,
        frame=expanded,
    )


def _arrow_column(table: RawTable, column: str) -> pa.Array:
    values = table.frame[column]
    try:
        array = pa.array(values.to_list(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # a name that may be data (a file keyed by its values) is not shown
        shown = repr(column) if repr(column) in column_names(table) else "a column"
        raise BundleError(
            f"{table.path}: {shown} mixes kinds of values (strings with numbers, lists or "
            "objects of different shapes), so its texts cannot be told apart; give each "
            "record's text in a 'text' column"
        ) from None
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def _strings(array: pa.Array, rows: np.ndarray) -> list[tuple[pa.Array, np.ndarray]]:
    """The strings of ``array``, lists and objects flattened, each with the entry of
    ``rows`` (one per element of ``array``) it came from; nulls left out."""
    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        valid = pc.is_valid(array)
        return [(array.filter(valid), rows[valid.to_numpy(zero_copy_only=False)])]
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
        return _strings(pc.list_flatten(array), rows[parents])
    if pa.types.is_struct(kind):
        return [part for field in array.flatten() for part in _strings(field, rows)]
    return []
