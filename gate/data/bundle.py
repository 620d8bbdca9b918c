"""Release bundles: source records (train, holdout) and a synthetic release, validated.

Contract (README, "Input files"): source records have ``text`` (required), ``user_id``
(defaults to the record id) and ``record_id`` (defaults to the row number); synthetic
records have ``text``, optional ``record_id`` and ``source_id``. Every problem is a
:class:`BundleError` naming the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from gate.data.deleted_spaces import SourceWords
from gate.data.io import (
    RawTable,
    TableReader,
    column_names,
    first_line,
    given_ids,
    id_column,
    read_table,
    reject_duplicates,
    require_text,
)
from gate.data.normalize import joined_words_readings, normalize_text, visible_texts
from gate.data.split import (
    KEYED,
    FileEntry,
    SplitManifest,
    draw_key,
    draw_sides,
    read_manifest,
)
from gate.data.training_data import TrainingDataCheck, check_training_data
from gate.digests import sha256_file
from gate.errors import BundleError, ReleaseError
from gate.policy.models import MembershipPolicy, TextPolicy
from gate.stats.split_balance import ShareInterval, SplitBalance, split_balance_test

SOURCE_COLUMNS = ("record_id", "user_id", "text", "split")


@dataclass(frozen=True)
class Fingerprint:
    path: str
    sha256: str
    records: int
    users: int | None
    format: str
    size_bytes: int

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "sha256": self.sha256,
            "records": self.records,
            "users": self.users,
            "format": self.format,
            "size_bytes": self.size_bytes,
        }


@dataclass(frozen=True)
class Membership:
    """How train/holdout membership was assigned, and the check of its balance."""

    how: str  # "gate split seed=N", with ", an earlier unkeyed draw" or not, or "declared"
    p: float
    seed: int | None
    manifest_path: str | None
    manifest_sha256: str | None
    balance: SplitBalance
    balance_alpha: float
    balance_ok: bool
    # a declared split under ``membership.declared_split.p: interval``: the audits' p
    p_interval: ShareInterval | None = None
    # the generator's training data, checked to hold no holdout user (``--training-data``)
    training_data: TrainingDataCheck | None = None

    def p_words(self) -> str:
        """The p the audits took: ``p = 0.5``, or the interval of a declared split's p."""
        if self.p_interval is None:
            return f"p = {self.p:g}"
        i = self.p_interval
        return (
            f"p in [{i.low:.4f}, {i.high:.4f}] (Clopper-Pearson interval of the train share "
            f"at 1 - {i.gamma:g})"
        )

    def imbalance_message(self) -> str:
        """Why the split is not consistent with ``p`` (for the caller that decides)."""
        b = self.balance
        return (
            f"the split is far from the declared p = {self.p:g}: {b.train_users} of "
            f"{b.total_users} users are in train (share {b.train_share:.3f}, two-sided "
            f"binomial p-value {b.p_value:.2e} < {self.balance_alpha:g}). "
            "The audits assume each user was put in train independently with probability p; "
            "use `gate split` or declare the right membership.p"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "p": self.p,
            "how": self.how,
            "seed": self.seed,
            "manifest": (
                None
                if self.manifest_path is None
                else {"path": self.manifest_path, "sha256": self.manifest_sha256}
            ),
            "split_check": {
                "train_users": self.balance.train_users,
                "users": self.balance.total_users,
                "train_share": self.balance.train_share,
                "p_value": self.balance.p_value,
                "alpha": self.balance_alpha,
                "consistent_with_p": self.balance_ok,
            },
            "p_interval": (
                None
                if self.p_interval is None
                else {
                    "low": self.p_interval.low,
                    "high": self.p_interval.high,
                    "gamma": self.p_interval.gamma,
                    "method": "Clopper-Pearson of the train share (Berger and Boos 1994)",
                }
            ),
            "training_data": None if self.training_data is None else self.training_data.as_dict(),
        }


@dataclass(frozen=True)
class Bundle:
    """Validated records. ``source`` holds train and holdout rows with columns
    ``record_id``, ``user_id``, ``text``, ``split`` (train first, then holdout)."""

    source: pd.DataFrame
    synthetic: pd.DataFrame
    fingerprints: dict[str, Fingerprint]
    membership: Membership
    canary_source: pd.DataFrame | None = None  # record_id, user_id, text: never train/holdout
    model_dir: Path | None = None  # a released model (transformers causal LM) to audit
    text: TextPolicy = field(default_factory=TextPolicy)  # how every text was read
    # the release as written, for its other readings (None when text.read_joined_words is off)
    release_written: pd.Series | None = None

    def __post_init__(self) -> None:
        written = self.release_written
        if written is None:
            if self.text.read_joined_words and len(self.synthetic):
                raise ValueError(
                    "release_written: the release as written is needed for its other "
                    "readings (text.read_joined_words: true); found None"
                )
        elif not self.text.read_joined_words:
            raise ValueError("release_written: must be None when text.read_joined_words is false")
        elif not written.index.equals(self.synthetic.index):
            raise ValueError(
                f"release_written: must hold the release's {len(self.synthetic)} rows, in "
                f"its index; found {len(written)} rows"
            )

    @cached_property
    def release_other_readings(self) -> pd.Series | None:
        """The release's other readings (``text.read_joined_words``), indexed by release
        row, where they differ from the first
        (:func:`gate.data.normalize.joined_words_readings`); None when the release is read
        once. Made when first asked for, by the classes that read them (the n-gram class),
        so that a policy without one does not pay for them."""
        if self.release_written is None:
            return None
        return joined_words_readings(
            self.release_written,
            self.synthetic["text"],
            self.text,
            source_words=SourceWords.of(self.source["text"]),
        )

    @cached_property
    def is_train(self) -> np.ndarray:
        """Train flag of each source record."""
        return (self.source["split"] == "train").to_numpy()

    @cached_property
    def user_codes(self) -> np.ndarray:
        """User of each source record as an integer code 0..U-1 in the order of the user ids,
        so that every per-user array (and every random draw over users) depends on the data
        and the seed, never on the order of the rows."""
        return self.source["user_id"].factorize(sort=True)[0].astype(np.int64)

    @cached_property
    def record_id_rank(self) -> np.ndarray:
        """Rank of each source record's id (for tie-breaks that ignore row order)."""
        return self.source["record_id"].rank(method="first").to_numpy(np.int64)

    @cached_property
    def user_is_train(self) -> np.ndarray:
        """Train flag of each user code: users are the unit of membership."""
        codes = self.user_codes
        flags = np.zeros(codes.max() + 1, dtype=bool)
        flags[codes] = self.is_train
        return flags

    @property
    def train(self) -> pd.DataFrame:
        return self.source[self.source["split"] == "train"]

    @property
    def holdout(self) -> pd.DataFrame:
        return self.source[self.source["split"] == "holdout"]


def _source_frame(
    table: RawTable, split: pd.Series | str, id_prefix: str, user_column: str = "user_id"
) -> pd.DataFrame:
    frame = table.frame
    text = require_text(table)
    default_ids = id_prefix + frame["__line__"].astype(str)
    record_id = id_column(table, "record_id", default_ids)
    if user_column != "user_id" and user_column not in frame.columns:
        raise BundleError(
            f"{table.path}: no {user_column!r} column, by which the split manifest defines "
            f"users; columns found: {column_names(table)}"
        )
    user_id = id_column(table, user_column, record_id)
    extras = [c for c in frame.columns if c not in (*SOURCE_COLUMNS, "__line__")]
    out = pd.DataFrame(
        {
            "record_id": record_id.array,  # pandas' own arrays: strings stay in Arrow
            "user_id": user_id.array,
            "text": text.array,
            "split": split if isinstance(split, str) else split.to_numpy(),
            "__line__": frame["__line__"].to_numpy(),
            "__file__": table.path,
        }
    )
    for column in extras:
        out[column] = frame[column].to_numpy()
    return out


def _synthetic_frame(table: RawTable) -> pd.DataFrame:
    frame = table.frame
    text = require_text(table)
    record_id = id_column(table, "record_id", "synthetic:" + frame["__line__"].astype(str))
    out = pd.DataFrame({"record_id": record_id.array, "text": text.array})
    if "source_id" in frame.columns:
        out["source_id"] = frame["source_id"].astype("string").to_numpy()
    if "label" in frame.columns:
        out["label"] = frame["label"].to_numpy()
    reject_duplicates(
        out["record_id"], frame["__line__"], pd.Series([table.path] * len(out)), "record_id"
    )
    return out


def _fingerprint(table: RawTable, users: int | None, records: int) -> Fingerprint:
    return Fingerprint(
        path=table.path,
        sha256=table.sha256,
        records=records,
        users=users,
        format=table.format,
        size_bytes=table.size_bytes,
    )


@dataclass(frozen=True)
class SourceRecords:
    """Validated train and holdout records (``frame``: columns record_id, user_id, text,
    split, __line__, __file__) and the tables and manifest they came from."""

    frame: pd.DataFrame
    tables: dict[str, RawTable]
    manifest: SplitManifest | None
    manifest_path: str | None
    canary_source: pd.DataFrame | None = None


def refuse_source_combination(
    *,
    train: str | Path | None,
    holdout: str | Path | None,
    source: str | Path | None,
    manifest: str | Path | None,
) -> None:
    """Refuse a combination of source options that names no train and holdout, or names
    them twice, before anything is read (a usage mistake is answered at once).

    Raises:
        BundleError: what is missing or given twice, by option.
    """
    if manifest is not None and source is not None:
        raise BundleError("give either --source or --manifest, not both")
    if source is not None and (train is not None or holdout is not None):
        raise BundleError("give either --source or --train/--holdout, not both")
    if manifest is None and source is None:
        if (train is None) != (holdout is None):
            given, missing = (
                ("--train", "--holdout") if holdout is None else ("--holdout", "--train")
            )
            raise BundleError(f"{given} is given without {missing}: give both (or --source)")
        if train is None:
            raise BundleError(
                "source records are missing: give --train and --holdout, --source, or --manifest"
            )


def load_source(
    *,
    membership: MembershipPolicy,
    text: TextPolicy | None = None,
    train: str | Path | None = None,
    holdout: str | Path | None = None,
    source: str | Path | None = None,
    manifest: str | Path | None = None,
    canary_source: str | Path | None = None,
    read: TableReader = read_table,
) -> SourceRecords:
    """Load and validate the source records (train and holdout) of a bundle; ``read``
    reads each table (an engine's reader may also read datasets).

    Raises:
        BundleError: the files are missing, unreadable or inconsistent.
    """
    refuse_source_combination(train=train, holdout=holdout, source=source, manifest=manifest)
    split_manifest: SplitManifest | None = None
    canary_sha256: str | None = None  # when the canary source is the manifest's
    user_column = "user_id"  # the column that defines users; a manifest names its own
    if manifest is not None:
        split_manifest = read_manifest(manifest)
        base = Path(manifest).parent
        train = train if train is not None else base / split_manifest.train.path
        holdout = holdout if holdout is not None else base / split_manifest.holdout.path
        user_column = split_manifest.by
        if canary_source is None and split_manifest.canary_source is not None:
            canary_source = base / split_manifest.canary_source.path
            canary_sha256 = split_manifest.canary_source.sha256

    tables: dict[str, RawTable] = {}
    if source is not None:
        table = read(source)
        tables["source"] = table
        if "split" not in table.frame.columns:
            raise BundleError(
                f"{source}: no 'split' column; a single source file needs one with values "
                "'train' or 'holdout' (or use `gate split` to make one)"
            )
        # as written, as a training pipeline's filter on it reads it: " Train" is no value
        bad = ~table.frame["split"].isin(["train", "holdout"]).to_numpy(dtype=bool)
        if bad.any():
            where = pd.Series(bad, index=table.frame.index)
            line = first_line(table.frame, where)
            missing = bool(table.frame["split"][where].isna().iloc[0])
            found = "none (no 'split' in the record, or null)" if missing else "another value"
            raise BundleError(  # the value is not quoted: it may be text shifted there
                f"{source}: line {line}: 'split' must be 'train' or 'holdout', as written (in "
                f"lower case, without spaces); found {found}"
            )
        split = table.frame["split"].astype(str)
        frame = _source_frame(table, split, id_prefix="")
    else:
        if train is None or holdout is None:  # refused above unless a manifest gave them
            raise BundleError("the manifest names no train or holdout file")
        tables["train"] = read(train)
        tables["holdout"] = read(holdout)
        if tables["train"].sha256 == tables["holdout"].sha256:
            raise BundleError(
                f"{holdout}: the holdout file is byte-identical to the train file {train}; "
                "holdout records must be other users' (use `gate split`)"
            )
        if split_manifest is not None:
            _verify_manifest(split_manifest, tables, Path(manifest), membership.p)  # type: ignore[arg-type]
        frame = pd.concat(
            [
                _source_frame(tables["train"], "train", "train:", user_column),
                _source_frame(tables["holdout"], "holdout", "holdout:", user_column),
            ],
            ignore_index=True,
        )
        _refuse_users_on_one_side(tables["train"], tables["holdout"], user_column)
        if user_column != "user_id":
            _refuse_user_ids_on_both_sides(tables["train"], tables["holdout"], user_column)
    as_written = frame["text"].to_numpy(dtype=object)  # what the split's draw is keyed by
    frame["text"] = normalize_text(frame["text"], text or TextPolicy())
    reject_duplicates(frame["record_id"], frame["__line__"], frame["__file__"], "record_id")
    _reject_shared_users(frame)
    _reject_blank_sides(frame)
    canary_frame = None
    if canary_source is not None:
        table = read(canary_source)
        if canary_sha256 is not None and table.sha256 != canary_sha256:
            raise BundleError(
                f"{manifest}: the canary-source file does not match the manifest (sha256 "
                f"{table.sha256[:12]}… != {canary_sha256[:12]}…); it was changed after "
                "`gate split`"
            )
        canary_frame = _canary_frame(table, frame, user_column, text or TextPolicy())
        tables["canary_source"] = table
    if split_manifest is not None:
        drawn = split_manifest.canary_source
        own_canaries = (
            canary_frame
            if drawn is not None and tables["canary_source"].sha256 == drawn.sha256
            else None
        )
        _verify_manifest_split(
            split_manifest,
            Path(manifest),  # type: ignore[arg-type]
            frame,
            as_written,
            tables,
            own_canaries,
            read=read,
        )
    return SourceRecords(
        frame=frame,
        tables=tables,
        manifest=split_manifest,
        manifest_path=None if manifest is None else str(manifest),
        canary_source=canary_frame,
    )


def _canary_frame(
    table: RawTable, source: pd.DataFrame, user_column: str, text: TextPolicy
) -> pd.DataFrame:
    """The canary-source records (prefixes of canaries, the base LM's training data): never
    a train or holdout user, never a train or holdout text.

    Raises:
        BundleError: no usable record, or a record shares a user or a text with the source.
    """
    frame = _source_frame(table, "canary", "canary:", user_column)
    frame["text"] = normalize_text(frame["text"], text)
    has_users = user_column in table.frame.columns
    for what, column, present in (("user", "user_id", has_users), ("text", "text", True)):
        clash = frame[column].isin(source[column]) if present else pd.Series(False, frame.index)
        if clash.any():
            row = frame[clash].iloc[0]
            raise BundleError(
                f"{table.path}: line {row['__line__']}: this canary-source record's {what} is "
                "also in train or holdout; canary sources must be disjoint from both (use "
                "`gate split --canary-fraction` or public text)"
            )
    if not frame["text"].str.strip().astype(bool).any():
        raise BundleError(f"{table.path}: every canary-source record is empty")
    return frame[["record_id", "user_id", "text"]].reset_index(drop=True)


def load_bundle(
    *,
    synthetic: str | Path | None,
    membership: MembershipPolicy,
    text: TextPolicy | None = None,
    train: str | Path | None = None,
    holdout: str | Path | None = None,
    source: str | Path | None = None,
    manifest: str | Path | None = None,
    canary_source: str | Path | None = None,
    model: str | Path | None = None,
    training_data: str | Path | None = None,
    read: TableReader = read_table,
) -> Bundle:
    """Load and validate a release bundle.

    Source records come from ``train`` and ``holdout`` files, from one ``source`` file with
    a ``split`` column, or from the files a ``gate split`` manifest names. ``synthetic``
    None gives an empty release (for audits that sample their own, like the canary audit);
    ``canary_source`` (or the manifest's canary split) gives the canary audit's records;
    ``model`` a released model directory (the profile audit's surprisal attack);
    ``training_data`` the records the release's generator was trained on, checked to hold
    no holdout user (:mod:`gate.data.training_data`); ``read`` reads each table
    (:func:`gate.data.io.read_table`, or an engine's reader, which may also read datasets).

    Raises:
        BundleError: the bundle is incomplete, unreadable or inconsistent
            (:class:`ReleaseError` when the synthetic release is).
    """
    loaded = load_source(
        membership=membership,
        text=text,
        train=train,
        holdout=holdout,
        source=source,
        manifest=manifest,
        canary_source=canary_source,
        read=read,
    )
    frame, tables, split_manifest = loaded.frame, dict(loaded.tables), loaded.manifest
    fingerprints: dict[str, Fingerprint] = {}
    reading, written = text or TextPolicy(), None
    if synthetic is None:  # audits that make their own release (canary) need none
        synthetic_frame = pd.DataFrame({"record_id": pd.Series(dtype=str), "text": ""})
    else:
        try:
            tables["synthetic"] = read(synthetic)
            synthetic_frame = _synthetic_frame(tables["synthetic"])
            if reading.read_joined_words:
                written = synthetic_frame["text"]
            synthetic_frame["text"] = normalize_text(synthetic_frame["text"], reading)
            _reject_blank_release(synthetic_frame, tables["synthetic"])
            _reject_copied_files(tables)
            if "source_id" in synthetic_frame.columns:
                _check_source_ids(synthetic_frame, frame, tables["synthetic"])
        except BundleError as exc:  # the source passed above: the release is at fault
            raise ReleaseError(str(exc)) from exc
    trained_on = None
    if training_data is not None:
        tables["training_data"] = read(training_data)
        trained_on = check_training_data(
            tables["training_data"],
            frame,
            [tables[side] for side in ("source", "train", "holdout") if side in tables],
            user_column="user_id" if split_manifest is None else split_manifest.by,
            text=reading,
        )

    is_train = (frame["split"] == "train").to_numpy()
    for name, table in tables.items():
        if name == "synthetic":
            fingerprints[name] = _fingerprint(table, None, len(synthetic_frame))
        elif name == "canary_source" and loaded.canary_source is not None:
            canary = loaded.canary_source
            fingerprints[name] = _fingerprint(table, int(canary["user_id"].nunique()), len(canary))
        elif name == "training_data" and trained_on is not None:
            fingerprints[name] = _fingerprint(table, trained_on.users, trained_on.records)
        else:
            on_side = frame["split"] == name
            users = frame["user_id"] if name == "source" else frame.loc[on_side, "user_id"]
            fingerprints[name] = _fingerprint(table, int(users.nunique()), len(users))

    train_users = int(frame.loc[is_train, "user_id"].nunique())
    total_users = int(frame["user_id"].nunique())
    if train_users == 0 or train_users == total_users:
        raise BundleError(
            f"the split has {train_users} train and {total_users - train_users} holdout users; "
            "both sides need at least one user"
        )
    balance = split_balance_test(train_users=train_users, total_users=total_users, p=membership.p)
    balance_ok = balance.p_value >= membership.split_check.alpha

    how = "declared"
    if split_manifest is not None:
        how = f"gate split seed={split_manifest.seed}"
        if split_manifest.method != KEYED:  # a hand-picked split fits it (see README)
            how += ", an earlier unkeyed draw"
    membership_info = Membership(
        how=how,
        p=membership.p,
        seed=None if split_manifest is None else split_manifest.seed,
        manifest_path=None if manifest is None else str(manifest),
        manifest_sha256=None if manifest is None else sha256_file(manifest),
        balance=balance,
        balance_alpha=membership.split_check.alpha,
        balance_ok=balance_ok,
        training_data=trained_on,
    )
    return Bundle(
        source=frame.drop(columns=["__file__"]).rename(columns={"__line__": "line"}),
        synthetic=synthetic_frame,
        fingerprints=fingerprints,
        membership=membership_info,
        canary_source=loaded.canary_source,
        model_dir=None if model is None else _model_directory(model),
        text=reading,
        release_written=written,
    )


def _model_directory(model: str | Path) -> Path:
    path = Path(model)
    if not path.is_dir():
        raise BundleError(f"{path}: --model must be a model directory; none found there")
    if not (path / "config.json").is_file():
        raise BundleError(
            f"{path}: not a transformers model directory (no config.json); save the model "
            "and its tokenizer with save_pretrained"
        )
    return path


def _reject_blank_release(synthetic: pd.DataFrame, table: RawTable) -> None:
    """A release whose records are all empty or white space (most often the wrong column)
    discloses nothing and would pass every audit."""
    if len(synthetic) and not visible_texts(synthetic["text"]).any():
        raise BundleError(
            f"{table.path}: all {len(synthetic)} synthetic records are empty or white space: "
            "there is nothing to audit (check the text column)"
        )


def _reject_blank_sides(frame: pd.DataFrame) -> None:
    """A side whose records are all empty or white space has no feature to audit: every
    test would pass for want of evidence."""
    visible = visible_texts(frame["text"])
    for side in ("train", "holdout"):
        on_side = frame["split"] == side
        if on_side.any() and not visible[on_side].any():
            raise BundleError(
                f"all {int(on_side.sum())} {side} records are empty or white space: there is "
                "nothing to audit (check the text column)"
            )


def _reject_shared_users(frame: pd.DataFrame) -> None:
    sides = frame.groupby("user_id")["split"].nunique()
    shared = sides[sides > 1]
    if len(shared):
        user = shared.index[0]
        rows = frame[frame["user_id"] == user]
        where = [
            f"{f}:{ln} ({s})" for f, ln, s in rows[["__file__", "__line__", "split"]].values[:4]
        ]
        raise BundleError(  # the user id is not shown: it may identify a person
            f"a user is in both train and holdout ({len(shared)} such "
            f"{'user' if len(shared) == 1 else 'users'}), at "
            f"{', '.join(where)}; membership is per user: all records of a user go to one side"
        )


def _reject_copied_files(tables: dict[str, RawTable]) -> None:
    synthetic = tables["synthetic"]
    for name, table in tables.items():
        if name != "synthetic" and table.sha256 == synthetic.sha256:
            raise BundleError(
                f"{synthetic.path}: the synthetic file is byte-identical to the {name} file "
                f"{table.path}; refusing to gate a copy of the source"
            )


def _check_source_ids(synthetic: pd.DataFrame, source: pd.DataFrame, table: RawTable) -> None:
    given = synthetic["source_id"].dropna()
    unknown = ~given.isin(source["record_id"])
    if unknown.any():
        line = int(table.frame.loc[unknown[unknown].index[0], "__line__"])
        raise BundleError(
            f"{table.path}: line {line}: its source_id is not a record_id of the source records"
        )


def _refuse_users_on_one_side(train: RawTable, holdout: RawTable, user_column: str) -> None:
    """Refuse train and holdout files of which only one has the user column: the other's
    records would each be a user of their own, so a user on both sides would go unseen
    (a review: every user of a bundle was in both, accepted).

    Raises:
        BundleError: names the file without the column and the one with it.
    """
    has = {table.path: user_column in table.frame.columns for table in (train, holdout)}
    if len(set(has.values())) == 2:
        without, with_ = sorted(has, key=has.__getitem__)
        raise BundleError(
            f"{without}: no {user_column!r} column, which {with_} has: each of its records "
            "would be a user of its own, and a user on both sides would go unseen; give "
            "both files the column, or neither"
        )


def _refuse_user_ids_on_both_sides(train: RawTable, holdout: RawTable, user_column: str) -> None:
    """Refuse a split by ``user_column`` whose files also have a ``user_id`` column with a
    user on both sides (a review: a manifest by ``record_id`` passed the files that, given
    as ``--train``/``--holdout``, are refused for it). The user id is not shown: it may
    identify a person.

    Raises:
        BundleError: names both files and how many users are on both sides.
    """
    if not all("user_id" in table.frame.columns for table in (train, holdout)):
        return
    train_users, holdout_users = (
        set(given_ids(table, "user_id").tolist()) for table in (train, holdout)
    )
    shared = train_users & holdout_users
    if shared:
        raise BundleError(
            f"{holdout.path}: {len(shared)} of its users of the 'user_id' column are also in "
            f"{train.path}: the split by {user_column!r} put them on both sides, and "
            "membership is per person; split by user_id (`gate split --by user_id`)"
        )


def _verify_manifest_split(
    manifest: SplitManifest,
    path: Path,
    frame: pd.DataFrame,
    as_written: np.ndarray,
    tables: dict[str, RawTable],
    canary: pd.DataFrame | None,
    *,
    read: TableReader,
) -> None:
    """The records and users of each side are the manifest's, and its seed and p put
    every user on the side the files put them (a manifest is checked, not trusted: the
    file hashes alone let anyone give a hand-picked split a manifest with any seed).

    The draw runs over every user of the source, canary source included: ``canary`` when
    it is the manifest's own canary-source file, else that file, read here; a keyed draw
    is keyed by the texts ``as_written`` (``frame``'s before normalisation). A split by
    line (files without the user column: each record its own user, numbered by its line
    in the source) is checked against the source file the manifest names.

    Raises:
        BundleError: the files or the manifest were edited after ``gate split``, or a
            file the check needs is missing.
    """
    for side in ("train", "holdout"):
        entry = getattr(manifest, side)
        rows = frame[frame["split"] == side]
        found = (len(rows), int(rows["user_id"].nunique()))
        if found != (entry.records, entry.users):
            raise BundleError(
                f"{path}: {side}: the files hold {found[0]} records of {found[1]} users; the "
                f"manifest says {entry.records} of {entry.users} (edited after `gate split`?)"
            )
    if manifest.canary_fraction > 0 and manifest.canary_source is None:
        raise BundleError(
            f"{path}: canary_fraction {manifest.canary_fraction:g} without a canary_source: "
            "`gate split` writes the users it sets aside to one (manifest edited?)"
        )
    if manifest.by not in tables["train"].frame.columns:
        _verify_split_by_line(manifest, path, tables, read=read)
        return
    units = [frame["user_id"].to_numpy(dtype=object)]
    texts = [as_written]
    if manifest.canary_source is not None:  # the draw ran over its users too
        if canary is None:  # another canary source was given: the manifest's is read
            table = _manifest_file(manifest.canary_source, path, "canary-source", read=read)
            canary = _source_frame(table, "canary", "canary:", manifest.by)
        else:
            table = tables["canary_source"]
        units.append(canary["user_id"].to_numpy(dtype=object))
        texts.append(require_text(table).to_numpy(dtype=object))
    n = len(frame)
    train, holdout = _drawn_sides(np.concatenate(units), np.concatenate(texts), manifest)
    split = frame["split"].to_numpy()
    # every side compared (a review: only train was, and users the draw set aside as
    # canaries were taken in holdout)
    moved = (train[:n] != (split == "train")) | (holdout[:n] != (split == "holdout"))
    if moved.any():
        raise BundleError(
            f"{path}: seed {manifest.seed} and p = {manifest.p:g} do not give this split: "
            f"{int(moved.sum())} records are on another side than the draw puts their "
            "users (files or manifest edited after `gate split`)"
        )
    drawn_in = int((train[n:] | holdout[n:]).sum())
    if drawn_in:
        raise BundleError(
            f"{path}: seed {manifest.seed} and p = {manifest.p:g} do not give this split: "
            f"{drawn_in} records of the canary source are of users the draw puts in train or "
            "holdout (files or manifest edited after `gate split`)"
        )


def _drawn_sides(
    units: np.ndarray, texts: np.ndarray, manifest: SplitManifest
) -> tuple[np.ndarray, np.ndarray]:
    """The train and holdout flags :func:`gate.data.split.draw_sides` gives the records
    (``units``, ``texts``) under the manifest's method, seed, p and canary fraction."""
    flags, canary = draw_sides(
        units,
        p=manifest.p,
        seed=manifest.seed,
        canary_fraction=manifest.canary_fraction,
        key=draw_key(units, texts) if manifest.method == KEYED else None,
    )
    return flags & ~canary, ~flags & ~canary


def _manifest_file(entry: FileEntry, path: Path, what: str, *, read: TableReader) -> RawTable:
    """The file a manifest entry names (beside the manifest), as ``gate split`` wrote it.

    Raises:
        BundleError: it is missing, unreadable or changed since.
    """
    location = path.parent / entry.path
    try:
        table = read(location)
    except BundleError as exc:
        raise BundleError(
            f"{path}: the split's draw is checked against its {what} file, {location}, which "
            f"cannot be read ({exc})"
        ) from None
    if table.sha256 != entry.sha256:
        raise BundleError(
            f"{path}: the {what} file {location} does not match the manifest (sha256 "
            f"{table.sha256[:12]}… != {entry.sha256[:12]}…): changed after `gate split`"
        )
    return table


def _verify_split_by_line(
    manifest: SplitManifest, path: Path, tables: dict[str, RawTable], *, read: TableReader
) -> None:
    """A split by line: each side holds, in order, the source's records the draw over the
    source's line numbers puts there (a review: a hand-made split without a user column
    was reported as ``gate split seed=42``).

    Raises:
        BundleError: the source file is missing or changed, or a side is not the draw's.
    """
    source = _manifest_file(manifest.source, path, "source", read=read)
    units = source.frame["__line__"].astype(str).to_numpy()
    texts = require_text(source)
    train, holdout = _drawn_sides(units, texts.to_numpy(dtype=object), manifest)
    for side, members in (("train", train), ("holdout", holdout)):
        if texts[members].tolist() != require_text(tables[side]).tolist():
            raise BundleError(
                f"{path}: seed {manifest.seed} and p = {manifest.p:g} do not give this split: "
                f"the {side} file's records are not the source's lines the draw puts there "
                "(files or manifest edited after `gate split`)"
            )


def _verify_manifest(
    manifest: SplitManifest, tables: dict[str, RawTable], path: Path, policy_p: float
) -> None:
    for name in ("train", "holdout"):
        expected = getattr(manifest, name).sha256
        if name in tables and tables[name].format.endswith(" dataset"):
            raise BundleError(
                f"{path}: a manifest names the files `gate split` wrote; {tables[name].path} "
                f"is a dataset (give the {name} file the manifest names)"
            )
        if name not in tables or tables[name].sha256 != expected:
            found = tables[name].sha256 if name in tables else "(not given)"
            raise BundleError(
                f"{path}: the {name} file does not match the manifest (sha256 {found[:12]}… "
                f"!= {expected[:12]}…): not the file `gate split` wrote, or changed since"
            )
    if abs(manifest.p - policy_p) > 1e-12:
        raise BundleError(
            f"{path}: the split was made with p = {manifest.p:g} but the policy declares "
            f"membership.p = {policy_p:g}"
        )
