"""Read and write record tables (JSONL, CSV, Parquet by extension) with errors that name
the file and the line or row."""

from __future__ import annotations

import hashlib
import io
import json
import re
import stat
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
    """A table as read from disk, with the fingerprint of its bytes."""

    path: str
    format: str
    sha256: str
    size_bytes: int
    frame: pd.DataFrame


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
        raise BundleError(f"{path}: is a directory, expected a {what}")
    if not stat.S_ISREG(mode):
        raise BundleError(f"{path}: not a regular file (a pipe or device?); expected a {what}")


def read_table(path: str | Path) -> RawTable:
    """Read a table; ``__line__`` holds the 1-based line (JSONL) or data row (CSV/Parquet)."""
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
