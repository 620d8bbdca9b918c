"""Read and write record tables (JSONL, CSV, Parquet by extension) with errors that name
the file and the line or row."""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from gate.atomic import atomic_write
from gate.errors import BundleError

FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


@dataclass(frozen=True)
class RawTable:
    """A table as read, with its fingerprint: of a file's bytes, or, for a dataset an
    engine read (:func:`dataset_table`), of its files' fingerprints in order."""

    path: str
    format: str
    sha256: str
    size_bytes: int
    frame: pd.DataFrame


TableReader = Callable[[str | Path], RawTable]
"""How a bundle's tables are read: :func:`read_table` for files; an engine may also read
datasets (``Engine.read_table``)."""

DATASET_FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
}
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".snappy", ".deflate", ".zip")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def is_uri(path: str | Path) -> bool:
    """``scheme://…`` (``hdfs://``, ``s3a://``, ``file://``), not a local path."""
    return bool(_URI.match(str(path)))


def table_format(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise BundleError(
            f"{path}: unsupported file type {suffix or '(none)'!r}; "
            f"expected one of {sorted(FORMATS)}"
        )
    return FORMATS[suffix]


def _decode(path: str | Path, raw: bytes, *, first_line: int = 1, offset: int = 0) -> str:
    """UTF-8 text of ``raw``, the bytes of a file from ``offset`` on, starting at line
    ``first_line`` (a byte-order mark at the file's start is dropped). The error names the
    line, the offset in the file and the offending bytes in hex, never the text around
    them."""
    if offset == 0 and raw.startswith(codecs.BOM_UTF8):
        raw, offset = raw[len(codecs.BOM_UTF8) :], len(codecs.BOM_UTF8)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + raw.count(b"\n", 0, exc.start)
        raise BundleError(
            f"{path}: line {line}: bytes that are not UTF-8 at offset {offset + exc.start} "
            f"(0x{raw[exc.start : exc.end].hex()}); re-encode the file as UTF-8"
        ) from None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _reject_surrogates(path: str | Path, number: int, row: dict) -> None:
    """JSON can escape a lone UTF-16 surrogate (``"\\ud800"``), which is no Unicode text:
    refuse it here, naming the line and field, not deep inside a feature class (or in a
    writer: ``gate split`` failed writing such a record). Keys and nested values too."""
    for key, value in row.items():
        in_key = _SURROGATE.search(key) is not None
        if in_key or _holds_surrogate(value):
            field = (
                "a key"
                if in_key
                else f"field {key!r}"
                if key.casefold() in _KNOWN_COLUMNS
                else "a field"
            )
            raise BundleError(
                f"{path}: line {number}: {field} holds an unpaired surrogate escape "
                "(\\ud800-\\udfff), which is not Unicode text"
            )


def _holds_surrogate(value: object) -> bool:
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_SURROGATE.search(k) or _holds_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_surrogate(v) for v in value)
    return False


_JSONL_CHUNK_ROWS = 1 << 16  # records parsed into Python objects before they become columns


class DuplicateKeyError(ValueError):
    """A JSON object with a key written twice (the key is the exception's argument)."""


def _object_with_unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object whose keys are distinct: with a key written twice, Python's reader
    keeps the last value and other readers the first or an error, so a release could
    show one text to the gate and another to its users."""
    row = dict(pairs)
    if len(row) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return row


# one decoder for every line (json.loads with a hook builds a decoder per call); the hook
# costs about a fifth of the decoding (it turns off the C scanner's own dicts)
JSON_OBJECTS = json.JSONDecoder(object_pairs_hook=_object_with_unique_keys)


class _RecordColumns:
    """Records (JSON objects) gathered a chunk at a time into the frame that
    ``pd.DataFrame.from_records`` makes of all of them at once: the same columns in the
    same order, the same values and types. A chunk of a column that holds strings only is
    kept as an Arrow array (no Python object per value); the other columns are inferred
    at the end, over all their values, by ``from_records`` itself."""

    def __init__(self) -> None:
        self.names: dict[str, None] = {}  # in order of first appearance
        self.parts: dict[str, list[pa.Array | list[object]]] = {}
        self.rows = 0

    def add(self, rows: list[dict]) -> None:
        for row in rows:
            self.names.update(dict.fromkeys(row))
        for name in self.names:
            values = [row.get(name, np.nan) for row in rows]
            if all(isinstance(value, str) for value in values):
                part: pa.Array | list[object] = pa.array(values, type=pa.large_string())
            else:
                part = values
            if name not in self.parts:  # first seen in this chunk: missing before it
                self.parts[name] = [[np.nan] * self.rows] if self.rows else []
            self.parts[name].append(part)
        self.rows += len(rows)

    def _values(self, name: str) -> list[object]:
        return [
            value
            for part in self.parts[name]
            for value in (part.to_pylist() if isinstance(part, pa.Array) else part)
        ]

    def frame(self) -> pd.DataFrame:
        if self.rows == 0:
            return pd.DataFrame()
        text = {n for n, parts in self.parts.items() if all(isinstance(p, pa.Array) for p in parts)}
        others = [n for n in self.names if n not in text]  # never empty: __line__ is a number
        frame = pd.DataFrame.from_records(
            list(zip(*(self._values(n) for n in others), strict=True)), columns=others
        )
        for at, name in enumerate(self.names):
            if name in text:
                arrays = pa.chunked_array(self.parts[name], type=pa.large_string())
                frame.insert(at, name, pd.array(arrays, dtype="str"))
        return frame


def _read_jsonl(path: str | Path, lines: Iterable[bytes]) -> pd.DataFrame:
    """One JSON object per ``\n``-terminated line (``lines``: the file's lines as bytes,
    as iterating a binary file gives them), as JSON Lines says: a raw U+2028 or other
    Unicode line separator inside a JSON string is part of the string. The records become
    columns :data:`_JSONL_CHUNK_ROWS` at a time (:class:`_RecordColumns`), so the Python
    objects of one chunk, not of the file, are alive at once."""
    columns = _RecordColumns()
    rows: list[dict] = []
    offset = 0
    for number, raw in enumerate(lines, start=1):
        line = _decode(path, raw.removesuffix(b"\n"), first_line=number, offset=offset)
        offset += len(raw)
        if not line.strip():
            continue
        try:
            row = JSON_OBJECTS.decode(line)
        except json.JSONDecodeError as exc:
            joined = (
                "; it starts with a byte-order mark, as a file's first line does (files joined?)"
                if line.startswith("\ufeff")
                else ""
            )
            raise BundleError(
                f"{path}: line {number}: not valid JSON: {exc.msg} (column {exc.colno}){joined}"
            ) from None
        except DuplicateKeyError as exc:
            key = repr(exc.args[0]) if exc.args[0] in _KNOWN_COLUMNS else "a key"
            raise BundleError(
                f"{path}: line {number}: {key} appears twice in one object; readers "
                "disagree on which value counts"
            ) from None
        except RecursionError:
            raise BundleError(
                f"{path}: line {number}: JSON nested too deeply to be a record"
            ) from None
        if not isinstance(row, dict):
            raise BundleError(
                f"{path}: line {number}: each line must be a JSON object; found {value_kind(row)}"
            )
        if "\\u" in line:  # only an escape can produce a lone surrogate
            _reject_surrogates(path, number, row)
        if "__line__" in row or "__file__" in row:
            raise BundleError(
                f"{path}: line {number}: the fields __line__ and __file__ are the gate's own "
                "(where a record came from); rename them"
            )
        row["__line__"] = number
        rows.append(row)
        if len(rows) == _JSONL_CHUNK_ROWS:
            columns.add(rows)
            rows = []
    columns.add(rows)
    return columns.frame()


_CSV_FIELD_LIMIT = 1 << 30  # Python's reader stops at 128 KiB per field by default


def _csv_rows(text: str) -> Iterator[list[str]]:
    """Python's reader of ``text`` (rows ending in CR, LF or CR LF, as Arrow's)."""
    csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_LIMIT))
    return csv.reader(io.StringIO(text, newline=""))


def _read_csv(path: Path, text: str) -> pd.DataFrame:
    """A CSV file with a header row: every field a string (``007`` stays ``007``), and
    every row exactly as many fields as the header names (pandas had read one more field
    per row as the index and shifted the columns: a release's copied texts in the first
    column were read from the last; one field fewer as an empty text). Columns the header
    leaves unnamed (a trailing comma on every line, as spreadsheets write) must be empty
    and are dropped."""
    try:
        header = next(_csv_rows(text), [])
    except csv.Error as exc:
        raise BundleError(f"{path}: header: not valid CSV: {exc}") from None
    _check_header(path, header)
    data = text.encode("utf-8")
    try:
        table = pa_csv.read_csv(
            pa.py_buffer(data),
            read_options=pa_csv.ReadOptions(block_size=min(max(len(data) + 1, 1 << 20), 1 << 30)),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True),
            convert_options=pa_csv.ConvertOptions(
                column_types=dict.fromkeys(header, pa.large_string()),
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except pa.ArrowInvalid:
        raise _csv_error(path, text, len(header)) from None
    unnamed = [at for at, name in enumerate(header) if not name.strip()]
    for at in unnamed:
        filled = pc.not_equal(table.column(at), "")
        if pc.any(filled).as_py():
            row = pc.index(filled, True).as_py() + 1
            raise BundleError(
                f"{path}: data row {row}: column {at + 1} has no name in the header but holds "
                "a value; name it"
            )
    if unnamed:
        table = table.select([at for at in range(table.num_columns) if at not in unnamed])
    frame = table.to_pandas()
    _refuse_reserved_columns(path, frame)
    frame["__line__"] = range(1, len(frame) + 1)
    return frame


def _refuse_reserved_columns(path: str | Path, frame: pd.DataFrame) -> None:
    reserved = sorted({"__line__", "__file__"} & {str(c) for c in frame.columns})
    if reserved:
        raise BundleError(
            f"{path}: the columns {reserved} are the gate's own (where a record came from); "
            "rename them"
        )


def _check_header(path: Path, header: list[str]) -> None:
    """Refuse a header naming a column twice (pandas had renamed the second ``text`` to
    ``text.1``)."""
    for at, name in enumerate(header, start=1):
        if name.strip() and name in header[: at - 1]:
            shown = repr(name) if name.casefold() in _KNOWN_COLUMNS else "a column"
            raise BundleError(f"{path}: header: {shown} is named twice")


def _csv_error(path: Path, text: str, fields: int) -> BundleError:
    """The first data row whose field count differs from the header's (found again by
    Python's reader: Arrow's message quotes the row, which may be private)."""
    rows = _csv_rows(text)
    next(rows, None)
    number = 0
    try:
        for number, row in enumerate((row for row in rows if row), start=1):
            if len(row) != fields:
                hint = "; quote text that holds commas" if len(row) > fields else ""
                return BundleError(
                    f"{path}: data row {number}: {len(row)} field{'s' * (len(row) != 1)} "
                    f"where the header names {fields}{hint}"
                )
    except csv.Error as exc:
        return BundleError(f"{path}: data row {number + 1}: not valid CSV: {exc}")
    if number == 0:
        return BundleError(f"{path}: the file holds no records")
    return BundleError(f"{path}: not valid CSV")


def _read_parquet(path: str | Path, raw: bytes) -> pd.DataFrame:
    try:
        names = pq.read_schema(pa.BufferReader(raw)).names
        twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if twice is not None:
            shown = repr(twice) if twice.casefold() in _KNOWN_COLUMNS else "a column"
            raise BundleError(f"{path}: {shown} is named twice in the file's schema")
        table = pq.read_table(pa.BufferReader(raw))
    except (pa.ArrowInvalid, OSError) as exc:
        raise BundleError(f"{path}: not a readable Parquet file: {exc}") from None
    _refuse_invalid_columns(path, table)
    frame = table.to_pandas()
    named = [name for name in frame.index.names if name is not None]
    if named:  # a column the writer made the index (pandas' `set_index`; named once, above)
        frame = frame.reset_index(level=named)
    frame = frame.reset_index(drop=True)
    _refuse_reserved_columns(path, frame)
    frame["__line__"] = range(1, len(frame) + 1)
    return frame


def _refuse_invalid_columns(path: str | Path, table: pa.Table) -> None:
    """Every column of a Parquet file's table passes Arrow's full validation, which checks
    that its strings (nested ones too) are UTF-8: a writer can store any bytes as a
    string, and converting them failed later with an error that quoted the value. The
    error names the column (a bundle column by name, another as "a column"), the data
    row of a string column and the offending bytes in hex, never the text around them."""
    for name, column in zip(table.column_names, table.columns, strict=True):
        shown = repr(name) if name.casefold() in _KNOWN_COLUMNS else "a column"
        row = 0
        for chunk in column.chunks:
            try:
                chunk.validate(full=True)
            except pa.ArrowInvalid as exc:
                if "UTF8" not in str(exc):
                    raise BundleError(f"{path}: {shown} is not valid Arrow data: {exc}") from None
                raise _not_utf8(path, shown, chunk, row) from None
            row += len(chunk)


def _not_utf8(path: str | Path, shown: str, chunk: pa.Array, row: int) -> BundleError:
    """The error for a chunk of a column that holds bytes that are not UTF-8: for a
    string column its first such value is found by halving (Arrow validates a slice
    alone) and its bytes decoded to find the offset."""
    kinds = {pa.string(): pa.binary(), pa.large_string(): pa.large_binary()}
    if chunk.type not in kinds:
        return BundleError(
            f"{path}: {shown} holds bytes that are not UTF-8 (in a {chunk.type} value); "
            "write its strings as UTF-8"
        )

    def valid(start: int, stop: int) -> bool:
        try:
            chunk.slice(start, stop - start).validate(full=True)
        except pa.ArrowInvalid:
            return False
        return True

    low, high = 0, len(chunk)  # the first bad value is in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if valid(low, middle) else (low, middle)
    value: bytes = chunk.view(kinds[chunk.type])[low].as_py()
    try:
        value.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f"at byte {exc.start} of its value (0x{value[exc.start : exc.end].hex()})"
    else:  # the value alone decodes: Arrow found what Python does not
        where = "in its value"
    return BundleError(
        f"{path}: data row {row + low + 1}: {shown} holds bytes that are not UTF-8 {where}; "
        "write its strings as UTF-8"
    )


# columns of a bundle: a CSV header with these names (in any case) is safe to quote
_KNOWN_COLUMNS = frozenset({"text", "record_id", "user_id", "split", "source_id", "label"})
# a name an error may quote: letters, digits and "_" (no "@", blank, "+" or ".": a key
# that is an e-mail address, a person's name or a phone number is not quoted)
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
_NAMES_QUOTED = 20


def column_names(table: RawTable) -> str:
    """The columns of a table for an error message, without what may be data. The names
    of the bundle's own columns (in any case) are quoted; of a JSON Lines or Parquet file
    also the names written as a field name (:data:`_FIELD_NAME`) that at least half of its
    rows hold, and two rows at least (a file keyed by its values, ``{"jill@example.org":
    "…"}``, had every key printed: a review); of a CSV file no other, for without a header
    row its first record is read as the names. At most :data:`_NAMES_QUOTED` names are quoted."""
    frame = table.frame
    columns = [i for i, c in enumerate(frame.columns) if c != "__line__"]

    def quoted(i: int) -> bool:
        name = frame.columns[i]
        if str(name).casefold() in _KNOWN_COLUMNS:
            return True
        if table.format == "csv" or not isinstance(name, str) or not _FIELD_NAME.fullmatch(name):
            return False
        held = int(frame.iloc[:, i].notna().sum())
        return held >= 2 and held >= len(frame) / 2

    shown = [str(frame.columns[i]) for i in columns if quoted(i)][:_NAMES_QUOTED]
    hidden = len(columns) - len(shown)
    if not hidden:
        return repr(shown)
    if table.format == "csv":
        why = (
            "in a CSV file without a header row the names are the first record; is the "
            "header row missing?"
        )
    else:
        why = (
            "a name unlike a field's, or that fewer than half of the rows (or one row) hold, "
            "may be data; "
            f"at most {_NAMES_QUOTED} are quoted"
        )
    return f"{shown!r} and {hidden} more, not shown ({why})"


def first_line(frame: pd.DataFrame, mask: pd.Series) -> int:
    """The ``__line__`` of the first row where ``mask`` holds."""
    return int(frame.loc[mask.idxmax(), "__line__"])


def value_kind(value: object) -> str:
    """What a value is, for an error message that must not show it (it may be private)."""
    if value is None or (isinstance(value, float) and value != value):
        return "null"  # a column with a JSON null holds NaN
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple | np.ndarray):
        return "a list"
    return type(value).__name__


def refuse_lookalike_columns(table: RawTable) -> None:
    """Refuse a column named as one of the bundle's but for case or white space around it
    (``TEXT``, ``Text``, ``text ``): the gate reads only the exact name, while readers that
    ignore case (Spark SQL, Hive) take the two for one column, so a release could hold
    train verbatim under ``TEXT`` beside a harmless ``text`` and pass (a review).

    Raises:
        BundleError: naming the column and the bundle column it looks like.
    """
    for name in table.frame.columns:
        if not isinstance(name, str) or name == "__line__" or name in _KNOWN_COLUMNS:
            continue
        known = name.strip().casefold()
        if known in _KNOWN_COLUMNS:
            raise BundleError(
                f"{table.path}: column {name!r} is the bundle's {known!r} but for case or "
                "white space; the gate reads only the exact name, other readers may read "
                f"this one: rename it to {known!r} or drop it"
            )


def require_text(table: RawTable) -> pd.Series:
    """The table's ``text`` column as strings.

    Raises:
        BundleError: no ``text`` column, or a value that is not a string (its kind is
            named, never the value).
    """
    frame = table.frame
    refuse_lookalike_columns(table)
    if "text" not in frame.columns:
        raise BundleError(f"{table.path}: no 'text' column; columns found: {column_names(table)}")
    text = frame["text"]
    if isinstance(text.dtype, pd.StringDtype):  # strings or missing values
        not_str = text.isna()
    else:
        not_str = ~text.map(lambda v: isinstance(v, str)).astype(bool)
    if not_str.any():
        line = first_line(frame, not_str)
        shown = value_kind(text[not_str].iloc[0])
        if shown == "null" and table.format.startswith("jsonl"):  # a record without the key
            shown = "none (no 'text' in the record, or null)"
        raise BundleError(f"{table.path}: line {line}: 'text' must be a string; found {shown}")
    return text.astype(str)


def given_ids(table: RawTable, column: str) -> pd.Series:
    """:func:`id_column` of the rows where ``column`` holds a value (not null, not blank),
    for a check that reads a column the bundle is not split by: its gaps are no error (a
    review: ``--by author`` had been refused for a sparse ``user_id`` column)."""
    values = table.frame[column]
    given = values.notna() & (values.astype(str).str.strip() != "")
    return id_column(replace(table, frame=table.frame[given]), column, values[given])


def id_column(table: RawTable, column: str, default: pd.Series) -> pd.Series:
    """The table's ``column`` of ids as strings, or ``default`` if it has none. An integer
    written as a floating-point number is the integer (``7.0`` is ``7``): one ``7.0`` in
    a JSON column of integers makes the whole column floating-point, and train's user
    ``7`` must still meet holdout's ``7.0``.

    Raises:
        BundleError: an empty or blank id, an id with white space around it (``"u1 "``
            would be another user than ``"u1"``), or one that is not a string or an
            integer (its row named, never its value).
    """
    frame = table.frame
    if column not in frame.columns:
        return default
    values = frame[column]
    missing = values.isna()
    if missing.any():
        raise BundleError(
            f"{table.path}: line {first_line(frame, missing)}: empty {column!r} (missing, "
            "null or NaN)"
        )
    ids = _canonical_ids(table, column, values)
    stripped = ids.str.strip()
    blank = stripped == ""
    if blank.any():
        raise BundleError(f"{table.path}: line {first_line(frame, blank)}: empty {column!r}")
    padded = stripped != ids
    if padded.any():
        raise BundleError(
            f"{table.path}: line {first_line(frame, padded)}: {column!r} has white space "
            "before or after it; ids are compared exactly, so strip them"
        )
    return ids


def _canonical_ids(table: RawTable, column: str, values: pd.Series) -> pd.Series:
    if isinstance(values.dtype, pd.CategoricalDtype):  # Parquet dictionary columns
        values = values.astype(object)
    dtype = values.dtype
    if pd.api.types.is_bool_dtype(dtype):
        bad = pd.Series(True, index=values.index)
    elif pd.api.types.is_integer_dtype(dtype):
        return values.astype(str)
    elif pd.api.types.is_float_dtype(dtype):
        numbers = values.to_numpy(dtype=np.float64)
        exact = 2.0 ** (np.finfo(values.to_numpy().dtype).nmant + 1)  # float32: 2^24
        bad = pd.Series(~_exact_integer(numbers, exact=exact), index=values.index)
        if not bad.any():
            return pd.Series(numbers.astype(np.int64), index=values.index).astype(str)
    elif pd.api.types.is_string_dtype(dtype) and not pd.api.types.is_object_dtype(dtype):
        return values.astype(str)
    else:  # Python objects of mixed kinds: each must be a string or an integer
        kinds = values.map(_id_kind)
        bad = kinds == "bad"
        if not bad.any():
            numbers = kinds == "number"
            ids = values.astype(str)
            ids[numbers] = values[numbers].map(lambda v: str(int(v)))
            return ids
    line = first_line(table.frame, bad)
    value = values[bad].iloc[0]
    found = (
        "a number that is no exact integer (a fraction, beyond 2^53 or infinite)"
        if isinstance(value, float | np.floating | Decimal)
        else value_kind(value)
    )
    raise BundleError(
        f"{table.path}: line {line}: {column!r} must be a string or an integer; found {found}"
    )


_DOUBLE_EXACT = 2.0**53  # from here on, a double may have lost an integer id's last digits


def _exact_integer(numbers: np.ndarray, *, exact: float = _DOUBLE_EXACT) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.isfinite(numbers) & (numbers == np.round(numbers)) & (np.abs(numbers) < exact)


def _id_kind(value: object) -> str:
    """``str``, ``int``, ``number`` (a float or a decimal holding an exact integer, as
    Parquet's ``decimal(38, 0)`` ids of SQL exports are) or ``bad``."""
    if isinstance(value, str):
        return "str"
    if isinstance(value, bool | np.bool_):
        return "bad"
    if isinstance(value, int | np.integer):
        return "int"
    if isinstance(value, float | np.floating):
        number = float(value)
        return "number" if number.is_integer() and abs(number) < _DOUBLE_EXACT else "bad"
    if isinstance(value, Decimal):
        return "number" if value.is_finite() and value == value.to_integral_value() else "bad"
    return "bad"


def reject_duplicates(ids: pd.Series, lines: pd.Series, paths: pd.Series, what: str) -> None:
    """Refuse an id used twice (its first three places named, never its value: an id may
    identify a person)."""
    duplicated = ids.duplicated(keep=False)
    if duplicated.any():
        value = ids[duplicated].iloc[0]
        where = [
            f"{p}:{ln}" for p, ln in zip(paths[ids == value], lines[ids == value], strict=True)
        ]
        raise BundleError(f"one {what} is used more than once, at {', '.join(where[:3])}")


def require_regular_file(path: Path, what: str = "file") -> None:
    """Refuse what is missing, a directory, or not a regular file (a FIFO or a device
    would block the gate forever)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise BundleError(f"{path}: {what} not found") from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot read: {exc.strerror}") from None
    if stat.S_ISDIR(mode):
        raise BundleError(
            f"{path}: is a directory, expected a {what} (`gate check --engine spark` reads "
            "a dataset of part files)"
        )
    if not stat.S_ISREG(mode):
        raise BundleError(f"{path}: not a regular file (a pipe or device?); expected a {what}")


def read_table(path: str | Path) -> RawTable:
    """Read a table; ``__line__`` holds the 1-based line (JSONL) or data row (CSV/Parquet)."""
    if is_uri(path):
        raise BundleError(
            f"{path}: is a URI; the gate reads local files (`gate check --engine spark` "
            "reads Parquet and JSON Lines datasets at any URI its cluster can)"
        )
    p = Path(path)
    require_regular_file(p)
    fmt = table_format(p)
    if fmt == "jsonl":
        return _read_jsonl_file(p)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise BundleError(f"{p}: cannot read: {exc.strerror}") from None
    if not raw.strip():
        raise BundleError(f"{p}: the file is empty")
    frame = _read_csv(p, _decode(p, raw)) if fmt == "csv" else _read_parquet(p, raw)
    if len(frame) == 0:
        raise BundleError(f"{p}: the file holds no records")
    return RawTable(
        path=str(p),
        format=fmt,
        sha256=hashlib.sha256(raw).hexdigest(),
        size_bytes=len(raw),
        frame=frame,
    )


class _HashedLines:
    """The lines of a binary file, read once: its SHA-256, its size and whether any line
    holds more than white space are known when they have been read."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self.digest = hashlib.sha256()
        self.size = 0
        self.blank = True

    def __iter__(self) -> Iterator[bytes]:
        for line in self._handle:
            self.digest.update(line)
            self.size += len(line)
            if self.blank and line.strip():
                self.blank = False
            yield line


def _read_jsonl_file(p: Path) -> RawTable:
    """A JSON Lines file, streamed: it is read line by line, never whole."""
    try:
        with open(p, "rb") as handle:
            lines = _HashedLines(handle)
            frame = _read_jsonl(p, lines)
    except OSError as exc:
        raise BundleError(f"{p}: cannot read: {exc.strerror}") from None
    if lines.blank:
        raise BundleError(f"{p}: the file is empty")
    if len(frame) == 0:
        raise BundleError(f"{p}: the file holds no records")
    return RawTable(
        path=str(p),
        format="jsonl",
        sha256=lines.digest.hexdigest(),
        size_bytes=lines.size,
        frame=frame,
    )


def write_table(frame: pd.DataFrame, path: str | Path) -> None:
    """Write a table atomically in the format its extension names."""
    fmt = table_format(path)
    frame = frame.drop(columns=["__line__"], errors="ignore")

    def write(tmp: Path) -> None:
        if fmt == "jsonl":
            frame.to_json(tmp, orient="records", lines=True, force_ascii=False, double_precision=15)
        elif fmt == "csv":
            frame.to_csv(tmp, index=False)
        else:
            frame.to_parquet(tmp, index=False)

    atomic_write(path, write)


def dataset_format(path: str) -> str:
    """``parquet`` or ``jsonl``, from the suffix of a dataset's path (``…/train.parquet``),
    else, for a local directory, from the suffix its data files share (Spark's
    ``part-*.parquet`` or ``part-*.json``)."""
    name = path.rstrip("/")
    suffix = Path(name.rsplit("/", 1)[-1]).suffix.lower()
    if suffix in DATASET_FORMATS:
        return DATASET_FORMATS[suffix]
    if not is_uri(path) and Path(path).is_dir():
        found = {
            DATASET_FORMATS.get(f.suffix.lower(), f.suffix or "(none)")
            for f in Path(path).rglob("*")
            if f.is_file() and not f.name.startswith(("_", ".")) and f.suffix != ".crc"
        }
        if len(found) == 1 and found <= {"parquet", "jsonl"}:
            return found.pop()
        raise BundleError(
            f"{path}: cannot tell the dataset's format from its files ({sorted(found)}); "
            f"name it with a suffix ({', '.join(sorted(DATASET_FORMATS))})"
        )
    raise BundleError(
        f"{path}: name the dataset's format with a suffix ({', '.join(sorted(DATASET_FORMATS))})"
    )


def local_dataset_directory(path: str) -> Path | None:
    """The local directory a dataset names (a path, or a ``file://`` URI as Hadoop reads
    it: no percent-decoding), or None (a file, or another file system's URI)."""
    if is_uri(path):
        if not path.lower().startswith("file://"):
            return None
        path = path[len("file://") :]
        if path.lower().startswith("localhost/"):
            path = path[len("localhost") :]
        path = "/" + path.lstrip("/")
    directory = Path(path)
    return directory if directory.is_dir() else None


def refuse_broken_links(name: str, directory: Path, listing: Sequence[str]) -> None:
    """Refuse a local dataset with a data file that is a symbolic link to nothing:
    Spark's listing leaves such a file out without a word, and the audit would read a
    dataset without its records. ``listing`` is the directory's :func:`local_listing`
    (linked folders followed); hidden and ``_``-prefixed names are not data files, as
    Spark lists them.

    Raises:
        BundleError: names the dataset, the link and where it points.
    """
    for relative in sorted(listing):
        if any(part.startswith(("_", ".")) for part in relative.split("/")):
            continue
        entry = directory / relative
        if entry.is_symlink() and not entry.exists():
            raise BundleError(
                f"{name}: {entry} is a symbolic link to a missing file "
                f"({os.readlink(entry)}); Spark would leave that part of the dataset out"
            )


# what a job writing a dataset leaves while it runs, or after it failed: Hadoop's and
# Spark's committers' uncommitted output
_UNCOMMITTED = re.compile(r"(?:^|/)(?:_temporary|\.spark-staging-[^/]*)(?:/|$)")
# Databricks' transactional commit: _started_<id> when a write begins, _committed_<id>
# beside it once it is committed (both stay)
_STARTED = re.compile(r"(?:^|/)_started_([^/]+)$")
# part files named by a Hadoop committer (Spark: part-00000-<job uuid>…; MapReduce:
# part-r-00000), which writes _SUCCESS into the dataset once every file is committed
_COMMITTED_PART = re.compile(
    r"(?:^|/)part-(?:\d{5}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[mr]-\d{5})"
)


def refuse_unfinished_dataset(name: str, listing: Sequence[str]) -> None:
    """Refuse a dataset that a job is still writing, or that a failed job left part-way:
    Spark's listing leaves out hidden and ``_``-prefixed entries, so the audit would read
    what happens to be committed (a review gated 200 clean records of a release whose
    leaky part was still in ``_temporary/``: PASS).

    Args:
        name: the dataset as the user named it.
        listing: every file and directory below it, relative to it, hidden ones included.

    Raises:
        BundleError: an uncommitted job's output (a Databricks ``_started_<id>``
            without its ``_committed_<id>`` included), or part files of a Hadoop committer
            without its ``_SUCCESS`` marker.
    """
    present = set(listing)
    for entry in sorted(present):
        started = _STARTED.search(entry)
        uncommitted = _UNCOMMITTED.search(entry) is not None or (
            started is not None
            and entry[: started.start(1) - len("_started_")] + "_committed_" + started[1]
            not in present
        )
        if uncommitted:
            raise BundleError(
                f"{name}: {entry}: output of a job that has not committed it (still "
                "writing, or failed); gate the dataset once the job that writes it has "
                "finished"
            )
    if "_SUCCESS" not in present and any(_COMMITTED_PART.search(e) for e in present):
        raise BundleError(
            f"{name}: no _SUCCESS marker, which Spark and Hadoop write once a job has "
            "committed all of its part files: the job may have failed part-way. If it "
            "finished and writes no marker (mapreduce.fileoutputcommitter."
            "marksuccessfuljobs=false), create an empty _SUCCESS file in the dataset"
        )


def local_listing(directory: Path) -> list[str]:
    """Every file and directory below ``directory`` (linked folders followed), relative to
    it, hidden ones included."""
    found = []
    for folder, subfolders, files in os.walk(directory, followlinks=True):
        base = Path(folder).relative_to(directory)
        found += [(base / entry).as_posix() for entry in (*subfolders, *files)]
    return found


def _folders_below(root: str, name: str) -> list[str]:
    """The folders of the file ``name`` below the dataset ``root`` (after the last folder
    named as the root's own last component; the file's parent alone when the listing
    spells the root otherwise)."""
    base = root.rstrip("/").rsplit("/", 1)[-1]
    folders = name.rstrip("/").split("/")[:-1]
    if base in folders:
        return folders[len(folders) - folders[::-1].index(base) :]
    return folders[-1:]


def dataset_table(path: str, files: Sequence[tuple[str, bytes]], *, fmt: str) -> RawTable:
    """A dataset (the data files of a directory, listed and fetched by an engine) as one
    :class:`RawTable`: each file parsed by the reader of a single file of that format (the
    same checks, errors naming the file and its line), the records in the order of the
    files' paths, then of their place in the file. ``__line__`` is the 1-based row in that
    order. The fingerprint is the SHA-256 of the files' SHA-256s in that order;
    ``size_bytes`` the files' total size.

    Args:
        path: the dataset as the user named it.
        files: ``(path, bytes)`` of every data file (hidden and ``_``-prefixed files
            already left out, as Spark lists them).
        fmt: ``parquet`` or ``jsonl``.

    Raises:
        BundleError: a file of another kind, compressed, in a ``key=value`` partition
            directory, or failing its reader's checks; no file; no record.
    """
    if not files:
        raise BundleError(f"{path}: the dataset holds no data files")
    frames = []
    digest = hashlib.sha256()
    for name, raw in sorted(files):
        suffix = Path(name).suffix.lower()
        if suffix in _COMPRESSED:
            raise BundleError(
                f"{name}: compressed data files are not read ({suffix}); write the dataset "
                "uncompressed or as Parquet (its own compression is fine)"
            )
        if DATASET_FORMATS.get(suffix) != fmt:
            raise BundleError(f"{name}: not a {fmt} file, in the {fmt} dataset {path}")
        if any("=" in folder for folder in _folders_below(str(path), name)):
            raise BundleError(
                f"{name}: a key=value partition directory; partition columns would be lost, "
                "so partitioned datasets are not read (write the columns into the files)"
            )
        frame = _read_jsonl(name, io.BytesIO(raw)) if fmt == "jsonl" else _read_parquet(name, raw)
        frames.append(frame.drop(columns="__line__", errors="ignore"))
        digest.update(hashlib.sha256(raw).digest())
    frame = pd.concat(frames, ignore_index=True)
    if len(frame) == 0:
        raise BundleError(f"{path}: the dataset holds no records")
    frame["__line__"] = range(1, len(frame) + 1)
    return RawTable(
        path=path,
        format=f"{fmt} dataset",
        sha256=digest.hexdigest(),
        size_bytes=sum(len(raw) for _, raw in files),
        frame=frame,
    )
