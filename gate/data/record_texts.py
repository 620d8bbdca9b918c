"""The texts of a table's records, one row per string they hold: a ``text`` column and
the columns beside it, or a fine-tuning file in a chat or instruction format
(``messages: [{role, content}]``, ShareGPT's ``conversations: [{from, value}]``,
``prompt``/``completion``, ``instruction``/``input``/``output``).

A column is read as one Arrow array, :data:`_ROWS_PER_ARRAY` records at a time, and its
lists and objects flattened by their types, with no loop over records. Values Arrow
cannot give one type (a string in one record and a list of parts in the next, integers
beyond 64 bits) and objects keyed by data (which Arrow would widen to every key for
every record) are walked record by record instead, as the JSON reader reads them. Each
string keeps its record's row and its *field*: the keys that lead to it, with the
speaker (``role``, ``from``) of the turn it is in, so that a template one field shares
(a user turn ``Message: {text}``) can be told from the other fields' texts. Strings that
write a JSON array or object (a chat exported to CSV or Parquet as a JSON string) are
read for what they hold too.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gate.data.io import RawTable, refuse_lookalike_columns, require_text
from gate.errors import BundleError

FIELD_COLUMN = "__field__"
"""The column of a read table that names each text's field (internal, never shown)."""

SPEAKER_KEYS = ("role", "from")
"""Keys that name the speaker of a chat turn (OpenAI's, ShareGPT's)."""

_ROWS_PER_ARRAY = 10_000  # records typed at once (the strings of a chunk stay under 2 GiB)
_PROBED_ROWS = 256  # records typed first, to find objects keyed by data at little cost
_MAX_KEYS = 64  # keys of an object typed by Arrow; wider ones (keyed by data) are walked
_MAX_DEPTH = 1_000  # nested values (and JSON read inside strings) walked at most


def texts_of_records(table: RawTable, *, id_columns: Collection[str]) -> RawTable:
    """A table of one row per string the records of ``table`` hold (in every column but
    ``id_columns``, nested in lists and objects, and in strings that are JSON arrays or
    objects, as chat exports to CSV write them), in the order of the records, each with
    its record's ``__line__``, ``id_columns`` and field (:data:`FIELD_COLUMN`).

    A ``text`` column is read with the others (a ``response``, ``context`` or ``label``
    column beside it may hold records too), as written (a JSON string in it is a record
    of its own, which may quote others), and must hold a string in every record, as a
    bundle's does; the bytes beside it (an image, a digest) are no texts. Without one,
    bytes must be UTF-8 text.

    Args:
        table: a table as read.
        id_columns: columns that hold ids, not texts (kept beside each text).

    Raises:
        BundleError: a ``text`` column with a value that is not a string, no string in
            the records, a value nested deeper than :data:`_MAX_DEPTH`, or, without a
            ``text`` column, bytes that are not UTF-8 (named by line and column, never by
            value).
    """
    refuse_lookalike_columns(table)
    frame = table.frame
    has_text = "text" in frame.columns
    if has_text:
        require_text(table)
    reading = _Reading(table.path, frame["__line__"].to_numpy(), bytes_read=not has_text)
    skipped = {"__line__", "__file__", *id_columns}
    parts: list[_Strings] = []
    written: list[_Strings] = []  # the text column's, not read for JSON inside
    for column in (c for c in frame.columns if c not in skipped):
        found = written if column == "text" else parts
        values = frame[column]
        for first in range(0, len(values), _ROWS_PER_ARRAY):
            chunk = values.iloc[first : first + _ROWS_PER_ARRAY]
            rows = np.arange(first, first + len(chunk))
            typed = _typed(chunk)
            if typed is None:  # kinds that vary from record to record: walked
                for row, value in zip(rows, chunk.to_list(), strict=True):
                    found.append(_walked(value, str(column), int(row), reading))
            else:
                labels = pa.array(np.full(len(chunk), str(column), dtype=object), pa.string())
                found.extend(_typed_strings(typed, labels, rows, reading))
    parts = [part for part in parts if len(part.texts)]
    parts.extend(_json_written(parts, reading))
    parts.extend(part for part in written if len(part.texts))
    if not parts:
        raise BundleError(f"{table.path}: no 'text' column and no string in its records to compare")
    texts = pa.concat_arrays([part.texts.cast(pa.large_string()) for part in parts])
    fields = pa.concat_arrays([part.fields.cast(pa.large_string()) for part in parts])
    rows = np.concatenate([part.rows for part in parts]).astype(np.int64)
    order = np.argsort(rows, kind="stable")
    kept = [c for c in ("__line__", *id_columns) if c in frame.columns]
    expanded = frame[kept].iloc[rows[order]].reset_index(drop=True)
    at = pa.array(order)
    expanded.insert(0, "text", pd.array(texts.take(at), dtype="str"))
    expanded[FIELD_COLUMN] = pd.array(fields.take(at), dtype="str")
    return replace(table, frame=expanded)


@dataclass(frozen=True)
class _Reading:
    """What reading a table's values needs beyond them: its path and lines, for errors,
    and whether bytes are read as UTF-8 text (else left out)."""

    path: str
    lines: np.ndarray
    bytes_read: bool

    def not_text(self, row: int, field: str) -> BundleError:
        column = field.split("\x1f")[0].split("\x1e")[0]
        return BundleError(
            f"{self.path}: line {int(self.lines[row])}, column {column!r}: bytes that are not "
            "UTF-8 text; give the texts as strings"
        )


@dataclass(frozen=True)
class _Strings:
    """Strings found in a table's records: each with its field and its record's row."""

    texts: pa.Array
    fields: pa.Array
    rows: np.ndarray


def _typed(values: pd.Series) -> pa.Array | None:
    """``values`` as one Arrow array whose strings :func:`_typed_strings` reads, or None,
    for the caller to walk them record by record, where Arrow cannot give them one type
    (a string in one record, a list in the next; integers beyond 64 bits), types them
    with a kind :func:`_typed_strings` does not read (:func:`_flattened_kind`), or as
    objects of more than :data:`_MAX_KEYS` keys (objects keyed by data, which Arrow would
    widen to every key for every record: its first :data:`_PROBED_ROWS` records are typed
    first, for the time such widening takes grows with the square of the records)."""
    if isinstance(values.dtype, pd.StringDtype):  # strings or missing values, as read
        typed = pa.array(values, pa.large_string(), from_pandas=True)
        return typed.combine_chunks() if isinstance(typed, pa.ChunkedArray) else typed
    not_one_type = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError)
    for some in (values.iloc[:_PROBED_ROWS], values):
        try:
            array = pa.array(some.to_list(), from_pandas=True)
        except not_one_type:  # walked by the caller, every string read
            return None
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if not _flattened_kind(array.type) or _widest_object(array.type) > _MAX_KEYS:
            return None
        if len(some) == len(values):
            break
    return array


def _flattened_kind(kind: pa.DataType) -> bool:
    """Whether :func:`_typed_strings` reads every string of ``kind``: strings, bytes,
    lists and objects of them, and kinds that hold no string (a map, a union or a
    dictionary-encoded kind, which it does not read, is walked instead)."""
    if _is_list(kind):
        return _flattened_kind(kind.value_type)
    if pa.types.is_struct(kind):
        return all(_flattened_kind(kind.field(i).type) for i in range(kind.num_fields))
    return not (
        pa.types.is_map(kind) or pa.types.is_union(kind) or pa.types.is_dictionary(kind)
    ) and not (pa.types.is_string_view(kind) or pa.types.is_binary_view(kind))


def _is_list(kind: pa.DataType) -> bool:
    return (
        pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    )


def _widest_object(kind: pa.DataType) -> int:
    if pa.types.is_struct(kind):
        inner = max((_widest_object(kind.field(i).type) for i in range(kind.num_fields)), default=0)
        return max(kind.num_fields, inner)
    if _is_list(kind):
        return _widest_object(kind.value_type)
    return 0


def _typed_strings(
    array: pa.Array, fields: pa.Array, rows: np.ndarray, reading: _Reading
) -> list[_Strings]:
    """The strings of a typed ``array`` (lists flattened, objects field by field), each
    with its field (``fields``: of each element so far) and the row it came from."""
    kind = array.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        if not reading.bytes_read:
            return []
        try:
            array = array.cast(pa.string())
        except pa.ArrowInvalid:
            first = next(i for i, v in enumerate(array.to_pylist()) if not _is_utf8(v))
            raise reading.not_text(int(rows[first]), fields[first].as_py()) from None
        kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        valid = pc.is_valid(array)
        mask = valid.to_numpy(zero_copy_only=False)
        return [_Strings(array.filter(valid), fields.filter(valid), rows[mask])]
    if _is_list(kind):
        parents = pc.list_parent_indices(array)
        at = parents.to_numpy(zero_copy_only=False)
        flat = pc.list_flatten(array)
        return _typed_strings(flat, fields.take(parents), rows[at], reading)
    if pa.types.is_struct(kind):
        names = [kind.field(i).name for i in range(kind.num_fields)]
        children = array.flatten()
        speaker = next(
            (
                child
                for name, child in zip(names, children, strict=True)
                if name in SPEAKER_KEYS and pa.types.is_string(child.type)
            ),
            None,
        )
        if speaker is not None:
            spoken = pc.binary_join_element_wise(fields, speaker, "\x1e")
            fields = pc.if_else(pc.is_valid(speaker), spoken, fields)
        found = []
        for name, child in zip(names, children, strict=True):
            named = pc.binary_join_element_wise(fields, pa.scalar(name), "\x1f")
            found.extend(_typed_strings(child, named, rows, reading))
        return found
    return []


def _is_utf8(value: bytes | None) -> bool:
    if value is None:
        return True
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _walked(value: object, field: str, row: int, reading: _Reading) -> _Strings:
    found = _walk(value, field, row, reading)
    texts = pa.array([text for text, _ in found], pa.string())
    fields = pa.array([at for _, at in found], pa.string())
    return _Strings(texts, fields, np.full(len(found), row, dtype=np.int64))


def _json_written(parts: list[_Strings], reading: _Reading) -> list[_Strings]:
    """What the strings of ``parts`` that write a JSON array or object holding a string
    hold (a chat exported to a CSV or Parquet file as a JSON string), field ``…\x1fjson``
    (an array of numbers, an embedding written out, is not parsed)."""
    found = []
    for part in parts:
        written = pc.and_(
            pc.match_substring_regex(part.texts, r"^\s*[\[{]"), pc.match_substring(part.texts, '"')
        )
        for at in np.flatnonzero(written.to_numpy(zero_copy_only=False)):
            inner = _json_inside(part.texts[at].as_py())
            if inner is not None:
                field = f"{part.fields[at].as_py()}\x1fjson"
                found.append(_walked(inner, field, int(part.rows[at]), reading))
    return [part for part in found if len(part.texts)]


def _walk(value: object, field: str, row: int, reading: _Reading) -> list[tuple[str, str]]:
    """Every string in ``value`` with its field: the keys that lead to it from the
    column ``field``, list positions left out, a turn's speaker added (what
    :func:`_typed_strings` does for values Arrow could type)."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[object, str, int]] = [(value, field, 0)]
    while stack:
        item, at, depth = stack.pop()
        if depth > _MAX_DEPTH:
            line = int(reading.lines[row])
            raise BundleError(
                f"{reading.path}: line {line}: values nested too deeply to be a record"
            )
        if isinstance(item, bytes):
            if not reading.bytes_read:
                continue
            try:
                item = item.decode("utf-8")
            except UnicodeDecodeError:
                raise reading.not_text(row, field) from None
        if isinstance(item, str):
            found.append((item, at))
        elif isinstance(item, dict):
            speaker = item.get(SPEAKER_KEYS[0])
            if not isinstance(speaker, str):
                speaker = item.get(SPEAKER_KEYS[1])
            turn = f"{at}\x1e{speaker}" if isinstance(speaker, str) else at
            depth += 1
            stack.extend((item[key], f"{turn}\x1f{key}", depth) for key in reversed(item))
        elif isinstance(item, list | tuple | np.ndarray):
            depth += 1
            stack.extend((inner, at, depth) for inner in reversed(item))
    return found


def _json_inside(text: str) -> object | None:
    """The JSON array or object ``text`` writes, if it writes one (a chat exported to a
    CSV or Parquet file as a JSON string); else None."""
    start = text.lstrip()[:1]
    if start not in ("[", "{"):
        return None
    try:
        inner = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return inner if isinstance(inner, list | dict) else None
