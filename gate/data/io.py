"""Read and write record tables (JSONL, CSV, Parquet by extension) with errors that name
the file and the line or row."""

from __future__ import annotations

import hashlib
import io
import json
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
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
    engine read (:func:`dataset_table`), of its records."""

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
FILE_PATH_COLUMN = "__file_path__"  # the file a dataset's record came from
ORDER_COLUMN = "__order__"  # increasing with the record's place in its file
CORRUPT_COLUMN = "_corrupt_record"  # a JSON line Spark could not parse
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


def _decode(path: Path, raw: bytes) -> str:
    """UTF-8 (a leading byte-order mark is dropped). The error names the offset and the
    offending bytes in hex, never the text around them."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise BundleError(
            f"{path}: line {line}: bytes that are not UTF-8 at offset {exc.start} "
            f"(0x{raw[exc.start : exc.end].hex()}); re-encode the file as UTF-8"
        ) from None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _reject_surrogates(path: Path, number: int, row: dict) -> None:
    """JSON can escape a lone UTF-16 surrogate (``"\\ud800"``), which is no Unicode text:
    refuse it here, naming the line and field, not deep inside a feature class."""
    for key, value in row.items():
        if isinstance(value, str) and _SURROGATE.search(value):
            raise BundleError(
                f"{path}: line {number}: field {key!r} holds an unpaired surrogate escape "
                "(\\ud800-\\udfff), which is not Unicode text"
            )


def _read_jsonl(path: Path, text: str) -> pd.DataFrame:
    """One JSON object per ``\n``-terminated line, as JSON Lines says: a raw U+2028 or
    other Unicode line separator inside a JSON string is part of the string."""
    rows = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BundleError(f"{path}: line {number}: not valid JSON: {exc.msg}") from None
        except RecursionError:
            raise BundleError(
                f"{path}: line {number}: JSON nested too deeply to be a record"
            ) from None
        if not isinstance(row, dict):
            raise BundleError(
                f"{path}: line {number}: each line must be a JSON object; "
                f"found {type(row).__name__}"
            )
        if "\\u" in line:  # only an escape can produce a lone surrogate
            _reject_surrogates(path, number, row)
        row["__line__"] = number
        rows.append(row)
    return pd.DataFrame.from_records(rows)


def _read_csv(path: Path, text: str) -> pd.DataFrame:
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except (pd.errors.ParserError, ValueError) as exc:
        raise BundleError(f"{path}: not valid CSV: {exc}") from None
    frame["__line__"] = range(1, len(frame) + 1)
    return frame


def _read_parquet(path: Path, raw: bytes) -> pd.DataFrame:
    try:
        table = pq.read_table(pa.BufferReader(raw))
    except (pa.ArrowInvalid, OSError) as exc:
        raise BundleError(f"{path}: not a readable Parquet file: {exc}") from None
    frame = table.to_pandas()
    frame["__line__"] = range(1, len(frame) + 1)
    return frame


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
    fmt = table_format(p)
    require_regular_file(p)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise BundleError(f"{p}: cannot read: {exc.strerror}") from None
    if not raw.strip():
        raise BundleError(f"{p}: the file is empty")
    if fmt == "jsonl":
        frame = _read_jsonl(p, _decode(p, raw))
    elif fmt == "csv":
        frame = _read_csv(p, _decode(p, raw))
    else:
        frame = _read_parquet(p, raw)
    if len(frame) == 0:
        raise BundleError(f"{p}: the file holds no records")
    return RawTable(
        path=str(p),
        format=fmt,
        sha256=hashlib.sha256(raw).hexdigest(),
        size_bytes=len(raw),
        frame=frame,
    )


def write_table(frame: pd.DataFrame, path: str | Path) -> None:
    """Write a table atomically in the format its extension names."""
    fmt = table_format(path)
    frame = frame.drop(columns=["__line__"], errors="ignore")

    def write(tmp: Path) -> None:
        if fmt == "jsonl":
            frame.to_json(tmp, orient="records", lines=True, force_ascii=False)
        elif fmt == "csv":
            frame.to_csv(tmp, index=False)
        else:
            frame.to_parquet(tmp, index=False)

    atomic_write(path, write)


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


def dataset_table(path: str, table: pa.Table, *, fmt: str) -> RawTable:
    """A dataset an engine read (many files, any URI) as a :class:`RawTable`.

    ``table`` holds the records with :data:`FILE_PATH_COLUMN` and :data:`ORDER_COLUMN`
    (and, from a JSON reader, :data:`CORRUPT_COLUMN` where a line did not parse). The
    records are put in the order of their files' paths, then of their place in the file,
    whatever the partitioning; ``__line__`` is the 1-based row in that order. The
    fingerprint is the SHA-256 of the records (the Arrow IPC stream of the ordered
    columns, sorted by name), so the same records give the same fingerprint however they
    are split into files; ``size_bytes`` is the records' size in Arrow.

    Raises:
        BundleError: a record did not parse, or the dataset holds none.
    """
    import pyarrow.compute as pc

    if table.num_rows == 0:
        raise BundleError(f"{path}: the dataset holds no records")
    table = table.sort_by([(FILE_PATH_COLUMN, "ascending"), (ORDER_COLUMN, "ascending")])
    if CORRUPT_COLUMN in table.column_names:
        bad = pc.is_valid(table[CORRUPT_COLUMN])
        if pc.any(bad).as_py():
            first = int(pc.index(bad, True).as_py())
            file = table[FILE_PATH_COLUMN][first].as_py()
            rank = int(pc.sum(pc.equal(table[FILE_PATH_COLUMN].slice(0, first + 1), file)).as_py())
            raise BundleError(
                f"{path}: {pc.sum(bad).as_py()} record(s) are not valid JSON objects, the "
                f"first at record {rank} of {file}"
            )
        table = table.drop_columns([CORRUPT_COLUMN])
    table = table.drop_columns([FILE_PATH_COLUMN, ORDER_COLUMN])
    table = table.select(sorted(table.column_names)).combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    digest = hashlib.sha256(memoryview(sink.getvalue())).hexdigest()
    frame = table.to_pandas()
    frame["__line__"] = range(1, len(frame) + 1)
    return RawTable(
        path=path, format=f"{fmt} dataset", sha256=digest, size_bytes=table.nbytes, frame=frame
    )
