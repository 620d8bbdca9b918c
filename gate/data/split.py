"""`gate split`: reproducible Bernoulli(p) membership assignment of users, with a manifest."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gate._version import __version__
from gate.atomic import atomic_write, atomic_write_text, current_umask
from gate.data.io import (
    JSON_OBJECTS,
    DuplicateKeyError,
    RawTable,
    column_names,
    given_ids,
    id_column,
    read_table,
    reject_duplicates,
    require_regular_file,
    require_text,
    write_table,
)
from gate.digests import sha256_file
from gate.errors import BundleError, GateError

MANIFEST_NAME = "split-manifest.json"
TRAIN_STREAM, CANARY_STREAM = 0, 1  # the numbers of the draw's two streams
Method = Literal["bernoulli", "bernoulli-keyed"]
KEYED: Method = "bernoulli-keyed"  # `gate split`'s draw: seeded by the seed and who holds what
UNKEYED: Method = "bernoulli"  # an earlier gate split's draw: seeded by the seed alone


class FileEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    path: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    records: int = Field(ge=0)
    users: int = Field(ge=0)


class SplitManifest(BaseModel):
    """Evidence of how membership was assigned.

    Every audit assumes each user went to train independently with probability ``p``
    (*Phantoms and Disclosures: a Causal Framework for Auditing Synthetic Data* (2026), §4
    and §5.1); see docs/methods.md §0.
    """

    # strict: no "0.5" for 0.5; no NaN, whose message would be "less than 1"
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    schema_version: Literal[1] = 1
    kind: str = Field("gate-split-manifest", pattern="^gate-split-manifest$")
    method: Method = UNKEYED
    p: float = Field(gt=0, lt=1)
    seed: int = Field(ge=0)
    by: str
    gate_version: str
    source: FileEntry
    train: FileEntry
    holdout: FileEntry
    canary_fraction: float = Field(0.0, ge=0, lt=1)
    canary_source: FileEntry | None = None


@dataclass(frozen=True)
class SplitOutcome:
    manifest_path: Path
    manifest: SplitManifest


def _text_array(values: np.ndarray | pd.Series) -> pa.LargeStringArray:
    """``values`` as Arrow text, each as ``str()`` gives it (through Python objects: from
    a NumPy unicode array pyarrow cuts each text at its first NUL, a review found, and
    NumPy drops trailing ones)."""
    texts = pd.Series(values, copy=False).astype(str).to_numpy(dtype=object)
    return pa.array(texts, type=pa.large_string())


def _hash_text(digest: Any, array: pa.LargeStringArray) -> None:
    """Feed ``digest`` the UTF-8 lengths of ``array``'s texts (64-bit little-endian), then
    the texts."""
    _, offsets, data = array.buffers()
    ends = np.frombuffer(offsets, dtype=np.int64, count=len(array) + 1, offset=8 * array.offset)
    digest.update(np.diff(ends).astype("<i8").tobytes())
    if data is not None:
        digest.update(memoryview(data)[int(ends[0]) : int(ends[-1])])


def draw_key(units: np.ndarray | pd.Series, texts: np.ndarray | pd.Series) -> bytes:
    """What a keyed draw is seeded with besides the seed: the SHA-256 of every record's
    pair (its user, its text as the file holds it), the pairs sorted: their number
    (64-bit little-endian), the users' UTF-8 lengths, the users, the texts' lengths, the
    texts.

    A key of the users' names alone (this draw's first version) let anyone fit a
    hand-picked split by handing the names the seed draws for train to the users meant
    for train, a review showed: the set of names, and so the draw, stayed the same. Keyed
    by who holds which text, every other assignment of names (or order of lines, for a
    split by line) draws anew, and fitting a split of N users is a search over about 2^N
    assignments or seeds (p = 1/2).
    """
    if len(units) != len(texts):
        raise ValueError(f"units and texts must align; found {len(units)} and {len(texts)}")
    pairs = pa.table({"unit": _text_array(units), "text": _text_array(texts)})
    order = pc.sort_indices(pairs, sort_keys=[("unit", "ascending"), ("text", "ascending")])
    pairs = pairs.take(order)
    digest = hashlib.sha256(np.int64(len(units)).astype("<i8").tobytes())
    for column in ("unit", "text"):
        _hash_text(digest, pairs.column(column).combine_chunks())
    return digest.digest()


def draw_sides(
    units: np.ndarray,
    *,
    p: float,
    seed: int,
    canary_fraction: float,
    key: bytes | None,
) -> tuple[np.ndarray, np.ndarray]:
    """``gate split``'s draw over ``units``: the Bernoulli(``p``) train flags, and the
    canary-source flags (Bernoulli(``canary_fraction``) from a stream of their own, so
    every other unit's side is the one ``canary_fraction`` 0 gives). Train is
    ``flags & ~canary``, holdout ``~flags & ~canary``. The units are sorted first, so the
    draw does not depend on the order of the rows; each distinct unit gets one uniform
    of each stream.

    ``key`` is :func:`draw_key` of the records; each stream is seeded by the key's words,
    the stream's number and ``seed``, in that order (the seed last, so that no stream of
    one seed is a stream of another, as a seed above 2^32 made of the words of two had).
    ``None`` is an earlier gate split's unkeyed draw, exactly: NumPy's sorted distinct
    units, the streams seeded by ``seed`` and ``[seed, CANARY_STREAM]``.
    """
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1); found {p!r}")
    seeds: tuple[Any, Any]
    if key is None:
        text = units.astype(str)  # NumPy's text, as the earlier draw read it
        distinct = np.unique(text)
        count, inverse = distinct.size, np.searchsorted(distinct, text)
        seeds = (seed, [seed, CANARY_STREAM])
    else:
        arrow_text = _text_array(units)
        arrow_distinct = pc.unique(arrow_text)
        arrow_distinct = arrow_distinct.take(pc.sort_indices(arrow_distinct))
        count = len(arrow_distinct)
        inverse = pc.index_in(arrow_text, value_set=arrow_distinct).to_numpy()
        words = np.frombuffer(key, dtype="<u4").tolist()
        seeds = ([*words, TRAIN_STREAM, seed], [*words, CANARY_STREAM, seed])
    flags = (np.random.default_rng(seeds[0]).random(count) < p)[inverse]
    canary = np.zeros(units.size, dtype=bool)
    if canary_fraction > 0:
        canary = (np.random.default_rng(seeds[1]).random(count) < canary_fraction)[inverse]
    return flags, canary


# columns --by may not name: what they hold is no user
_NOT_USERS = {
    "text": "a text is no user (two people's identical texts would be one, one person's "
    "different texts many)",
    "split": "the column of a split already made, which gate split drops",
    "__line__": "the gate's own column of line numbers",
    "__file__": "the gate's own column of file names",
}


def _refuse_users_across_units(table: RawTable, units: np.ndarray, *, by: str) -> None:
    """Refuse a split by ``by`` that would put a user of the file's ``user_id`` column on
    both sides: one whose records are in more than one unit of ``by`` (a review: ``--by
    record_id`` did so, and ``gate check --manifest``, which reads the manifest's column,
    passed the bundle that ``--train``/``--holdout`` refuses)."""
    users = given_ids(table, "user_id")  # records without one are no user's
    units_per_user = (
        pd.DataFrame(
            {"user": users.to_numpy(), "unit": units[table.frame.index.get_indexer(users.index)]}
        )
        .groupby("user")["unit"]
        .nunique()
    )
    spread = units_per_user[units_per_user > 1]
    if len(spread):
        raise BundleError(  # no user id is shown: it may identify a person
            f"{table.path}: --by {by}: {len(spread)} of {len(units_per_user)} users of the "
            f"'user_id' column have records in more than one {by!r} group, so the split could "
            "put them on both sides; split by user_id, or by a column that groups all of a "
            "user's records together"
        )


def split_source(
    source: str | Path,
    *,
    p: float,
    seed: int,
    by: str,
    out_dir: str | Path,
    canary_fraction: float = 0.0,
    method: Method = KEYED,
) -> SplitOutcome:
    """Split a source file by ``by`` into train/holdout files and a manifest in ``out_dir``.

    With ``canary_fraction`` q > 0, each user first goes to a canary-source split with
    probability q (a separate random stream, so the train/holdout draw of every other user
    is the one q = 0 gives); those users are in neither train nor holdout, and the canary
    audit takes its prefixes and base LM from them.

    ``method`` is the keyed draw; :data:`UNKEYED` makes a split of the earlier draw again
    (the bundled example's, kept so that its documented numbers stay its own).
    """
    if not 0 < p < 1:
        raise BundleError(f"--p must be in (0, 1); found {p}")
    if not 0 <= canary_fraction < 1:
        raise BundleError(f"--canary-fraction must be in [0, 1); found {canary_fraction}")
    if seed < 0:
        raise BundleError(f"--seed must be >= 0; found {seed}")
    if by in _NOT_USERS:
        raise BundleError(f"--by {by}: {_NOT_USERS[by]}; split by the column that names users")
    table = read_table(source)
    frame = table.frame
    texts = require_text(table)  # what gate check refuses is refused before any file is written
    if not texts.str.strip().astype(bool).any():
        raise BundleError(
            f"{source}: all {len(texts)} records are empty or white space: there is nothing "
            "to audit (check the text column)"
        )
    if "record_id" in frame.columns:
        ids = id_column(table, "record_id", frame["record_id"])
        reject_duplicates(
            ids, frame["__line__"], pd.Series(table.path, index=frame.index), "record_id"
        )
    if by in frame.columns:
        units = id_column(table, by, frame[by]).to_numpy()
    elif by == "user_id":
        units = frame["__line__"].astype(str).to_numpy()  # no users: each record is its own
    else:
        raise BundleError(f"{source}: no {by!r} column to split by; columns: {column_names(table)}")
    if by != "user_id" and "user_id" in frame.columns:
        _refuse_users_across_units(table, units, by=by)

    key = draw_key(units, texts) if method == KEYED else None
    flags, canary = draw_sides(units, p=p, seed=seed, canary_fraction=canary_fraction, key=key)
    sides = [("train", flags & ~canary), ("holdout", ~flags & ~canary)]
    if canary_fraction > 0:  # asked for, a canary source must not be missing without a word
        sides.append(("the canary source", canary))
    for side, members in sides:
        if not members.any():
            raise BundleError(
                f"{source}: the split leaves no user in {side} ({np.unique(units).size} users, "
                f"p = {p:g}, canary fraction {canary_fraction:g}, seed {seed}); audit more "
                "users or choose p and the canary fraction so that each part gets some"
            )
    names = ("train", "holdout", "canary-source") if canary.any() else ("train", "holdout")
    out = Path(out_dir)
    suffix = Path(source).suffix
    outputs = [out / f"{name}{suffix}" for name in names] + [out / MANIFEST_NAME]
    if any(path.resolve() == Path(source).resolve() for path in outputs):
        raise BundleError(
            f"--out {out_dir}: would overwrite the source {source}; choose another directory"
        )
    earlier_split = _earlier_outputs(out / MANIFEST_NAME)
    ours = earlier_split | {MANIFEST_NAME} if (out / MANIFEST_NAME).is_file() else set()
    theirs = [p.name for p in outputs if (p.exists() or p.is_symlink()) and p.name not in ours]
    if theirs:
        raise BundleError(
            f"--out {out_dir}: would overwrite {', '.join(theirs)}, which no earlier gate "
            "split wrote there; choose another directory or move them"
        )
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not os.access(out, os.W_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        raise BundleError(
            f"--out {out_dir}: cannot write the split there ({exc.strerror or exc})"
        ) from None
    earlier = {
        name
        for name in earlier_split - {path.name for path in outputs}
        if (out / name).resolve() != Path(source).resolve()  # a file split again
    }
    body = frame.drop(columns=["split"], errors="ignore")
    entries = {}
    masks = {"train": flags & ~canary, "holdout": ~flags & ~canary, "canary-source": canary}
    manifest_path = out / MANIFEST_NAME
    side_paths = {name: out / f"{name}{suffix}" for name in names}
    try:  # a split without its manifest, or with a cut file, is no split: nothing stays
        if table.format == "jsonl":  # one read for every side
            numbers = {
                path: body.loc[masks[name], "__line__"].to_numpy(dtype=np.int64)
                for name, path in side_paths.items()
            }
            has_split = "split" in frame.columns
            if write_json_lines_sides(Path(source), numbers, has_split=has_split) != table.sha256:
                raise BundleError(f"{source}: the file changed while it was split; split again")
        else:
            for name, path in side_paths.items():
                _write_side(
                    Path(source), table.format, body, masks[name], path, sha256=table.sha256
                )
        for name, path in side_paths.items():
            entries[name] = FileEntry(
                path=path.name,
                sha256=sha256_file(path),
                records=int(masks[name].sum()),
                users=int(np.unique(units[masks[name]]).size),
            )
        manifest = SplitManifest(
            method=method,
            p=p,
            seed=seed,
            by=by,
            gate_version=__version__,
            source=FileEntry(
                path=os.path.relpath(Path(source).resolve(), out.resolve()),
                sha256=table.sha256,
                records=len(frame),
                users=int(np.unique(units).size),
            ),
            train=entries["train"],
            holdout=entries["holdout"],
            canary_fraction=canary_fraction,
            canary_source=entries.get("canary-source"),
        )
        atomic_write_text(manifest_path, manifest.model_dump_json(indent=2) + "\n")
    except BaseException as exc:
        for path in outputs:
            path.unlink(missing_ok=True)
        if created:  # a directory made for this split goes with it
            with contextlib.suppress(OSError):
                out.rmdir()
        if isinstance(exc, OSError):
            raise GateError(
                f"could not write the split to {exc.filename or out}: {exc.strerror or exc}; "
                "no split was left there"
            ) from None
        raise
    for name in earlier:  # an earlier split's file this one does not write (canary source)
        (out / name).unlink(missing_ok=True)
    return SplitOutcome(manifest_path=manifest_path, manifest=manifest)


_BOM = "\ufeff".encode()


def write_json_lines_sides(
    source: Path, sides: dict[Path, np.ndarray], *, has_split: bool = False
) -> str:
    """Write each side's lines of a JSON Lines ``source`` (``sides``: the path of each
    side and the numbers of its lines, from 1, as iterating the binary file numbers them)
    in one read of the source (each side had read it again), each line as ``gate split``
    writes a line without a ``split`` member: without a leading byte-order mark or
    trailing carriage returns, ended by a newline, its bytes otherwise as the source holds
    them (every number's text kept); with ``has_split`` (a record of the source has a
    ``split`` member), a line is decoded and a ``split`` member dropped
    (:func:`_without_split`). Each side is written beside its path and put in place once
    all are whole.

    The lines are iterated by Python's buffered reader and most are written as read:
    ``bench/bench_split.py`` on a million records of ~100 words took 11.0 s this way,
    13.3 s with the lines located and gathered by array operations, 12.1 s when each
    side read the file.

    Returns:
        The SHA-256 of the bytes read, to compare with the source's as it was checked.
    """
    lookup = np.zeros(
        1 + max((int(n.max()) for n in sides.values() if n.size), default=0), np.uint8
    )
    for index, numbers in enumerate(sides.values(), start=1):
        lookup[numbers] = index
    side_of = lookup.tobytes()  # line number -> 1 + the side's index, 0 for none
    digest = hashlib.sha256()
    temporary: dict[Path, Path] = {}
    handles: list[IO[bytes]] = []
    try:
        for path in sides:  # private, new files: never one a link put in the way
            fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            temporary[path] = Path(name)
            handles.append(os.fdopen(fd, "wb"))
        with source.open("rb") as lines:
            for number, raw in enumerate(lines, start=1):
                digest.update(raw)
                side = side_of[number] if number < len(side_of) else 0
                if not side:
                    continue
                line = _as_written(raw)
                handles[side - 1].write(_without_split(source, number, line) if has_split else line)
        for handle in handles:
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
        for path, written in temporary.items():
            os.chmod(written, 0o666 & ~current_umask())
            os.replace(written, path)
    finally:
        for handle in handles:
            handle.close()
        for written in temporary.values():
            written.unlink(missing_ok=True)
    return digest.hexdigest()


def _write_side(
    source: Path, fmt: str, body: pd.DataFrame, mask: np.ndarray, path: Path, *, sha256: str
) -> None:
    """The records of one side of the split of a Parquet or CSV source, without its
    ``split`` column, each value as the source holds it: a Parquet file is filtered as
    Arrow (its types kept; through pandas, a column of integers with a null became
    floating point, and 12345678901234567 was written 1.23456789012346e+16: a review). CSV
    fields are strings, written as read. (JSON Lines: :func:`write_json_lines_sides`.)"""
    if fmt == "parquet":
        raw = source.read_bytes()
        if hashlib.sha256(raw).hexdigest() != sha256:
            raise BundleError(f"{source}: the file changed while it was split; split again")
        table = pq.read_table(pa.BufferReader(raw))
        kept = table.filter(pa.array(mask)).drop_columns(
            [name for name in table.column_names if name == "split"]
        )
        atomic_write(path, lambda tmp: pq.write_table(kept, tmp))
    else:
        write_table(body[mask], path)


def _as_written(raw: bytes) -> bytes:
    """A line of a JSON Lines file as a side holds it: without a leading byte-order mark
    or trailing carriage returns, ended by a newline (most lines are already)."""
    if raw.startswith(_BOM) or not raw.endswith(b"\n") or raw.endswith(b"\r\n"):
        return raw.removeprefix(_BOM).rstrip(b"\r\n") + b"\n"
    return raw


def _without_split(source: Path, number: int, line: bytes) -> bytes:
    """Line ``number`` (:func:`_as_written`) without a ``split`` member: as written when
    it has none (every number's text kept); else decoded and written again without it,
    which keeps every value a JSON reader reads (integers of any size, each float's
    double). A number JSON cannot write back (``1e400``, read as infinity) is refused:
    ``Infinity`` is no JSON.

    Raises:
        BundleError: such a number, naming the line.
    """
    record = JSON_OBJECTS.decode(line.decode("utf-8"))
    if "split" not in record:
        return line
    del record["split"]
    try:
        return (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    except ValueError:
        raise BundleError(
            f"{source}: line {number}: a number beyond JSON's range (NaN, Infinity, 1e400) "
            "that a side cannot hold as written; write it as a string"
        ) from None


def _earlier_outputs(manifest_path: Path) -> set[str]:
    """The files an earlier ``gate split`` wrote next to ``manifest_path`` (names in the
    directory; none if there is no readable manifest).

    Raises:
        BundleError: a file of that name that is not a readable manifest (a split would
            overwrite it).
    """
    if not manifest_path.is_file():
        return set()
    try:
        earlier = read_manifest(manifest_path)
    except BundleError as exc:
        raise BundleError(
            f"--out {manifest_path.parent}: would overwrite {manifest_path.name}, which is "
            f"not a gate split manifest ({exc}); choose another directory or move it"
        ) from None
    entries = (earlier.train, earlier.holdout, earlier.canary_source)
    return {  # by name and content: a file the user has since replaced is the user's
        e.path
        for e in entries
        if e is not None
        and Path(e.path).name == e.path
        and (manifest_path.parent / e.path).is_file()
        and sha256_file(manifest_path.parent / e.path) == e.sha256
    }


def read_manifest(path: str | Path) -> SplitManifest:
    p = Path(path)
    require_regular_file(p, "split manifest")
    try:
        data = JSON_OBJECTS.decode(p.read_text(encoding="utf-8-sig"))  # a BOM is no error
    except OSError as exc:
        raise BundleError(f"{p}: cannot read: {exc.strerror}") from None
    except DuplicateKeyError as exc:
        raise BundleError(f"{p}: key {exc.args[0]!r} appears twice in one object") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise BundleError(f"{p}: not a valid JSON split manifest: {exc}") from None
    if isinstance(data, dict) and ("kind" not in data or "schema_version" not in data):
        missing = "kind" if "kind" not in data else "schema_version"
        raise BundleError(f"{p}: {missing}: required key is missing; not a gate split manifest")
    try:
        return SplitManifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        found = first.get("input")
        shown = f"; found {found!r}" if isinstance(found, int | float | bool) else ""
        raise BundleError(f"{p}: {where}: {first['msg']}{shown}") from None
