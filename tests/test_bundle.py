"""Release bundle loading and validation: every rejection names the file and line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from gate.api import split_warnings
from gate.data.bundle import Bundle, load_bundle
from gate.data.io import (
    CORRUPT_COLUMN,
    FILE_PATH_COLUMN,
    ORDER_COLUMN,
    dataset_format,
    dataset_table,
)
from gate.errors import BundleError
from gate.policy.models import MembershipPolicy, SplitCheck

from .conftest import unique_text, write_jsonl

MEMBERSHIP = MembershipPolicy()


def load(files: dict[str, Path], **overrides) -> Bundle:
    kwargs = {"train": files["train"], "holdout": files["holdout"], "synthetic": files["synthetic"]}
    kwargs.update(overrides)
    return load_bundle(membership=overrides.pop("membership", MEMBERSHIP), **kwargs)


def test_loads_jsonl_with_fingerprints(bundle_files: dict[str, Path]) -> None:
    bundle = load(bundle_files)
    assert len(bundle.source) == 40 and len(bundle.synthetic) == 10
    assert bundle.is_train.sum() == 20
    fp = bundle.fingerprints["train"]
    assert (fp.records, fp.users, fp.format) == (20, 20, "jsonl")
    import hashlib

    assert fp.sha256 == hashlib.sha256(bundle_files["train"].read_bytes()).hexdigest()
    assert bundle.fingerprints["synthetic"].users is None
    assert bundle.membership.how == "declared"


def test_csv_and_parquet_load_like_jsonl(bundle_files: dict[str, Path], tmp_path: Path) -> None:
    frames = {
        k: pd.read_json(bundle_files[k], lines=True) for k in ("train", "holdout", "synthetic")
    }
    frames["train"].to_csv(tmp_path / "train.csv", index=False)
    frames["holdout"].to_parquet(tmp_path / "holdout.parquet", index=False)
    bundle = load(bundle_files, train=tmp_path / "train.csv", holdout=tmp_path / "holdout.parquet")
    reference = load(bundle_files)
    pd.testing.assert_frame_equal(
        bundle.source[["record_id", "user_id", "text", "split"]],
        reference.source[["record_id", "user_id", "text", "split"]],
    )


def test_defaults_for_ids(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    train = write_jsonl(tmp_path / "t.jsonl", [{"text": unique_text(i)} for i in range(3)])
    holdout = write_jsonl(tmp_path / "h.jsonl", [{"text": unique_text(10 + i)} for i in range(3)])
    bundle = load(bundle_files, train=train, holdout=holdout)
    assert bundle.source["record_id"].tolist() == [
        "train:1",
        "train:2",
        "train:3",
        "holdout:1",
        "holdout:2",
        "holdout:3",
    ]
    assert bundle.source["user_id"].tolist() == bundle.source["record_id"].tolist()


def test_missing_text_column(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"body": "x"}])
    with pytest.raises(
        BundleError, match=r"bad.jsonl: no 'text' column; columns found: \['body'\]"
    ):
        load(bundle_files, train=bad)


def test_null_text_names_line(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"text": "a"}, {"text": None}])
    with pytest.raises(
        BundleError, match=r"bad.jsonl: line 2: 'text' must be a string; found null"
    ):
        load(bundle_files, holdout=bad)


def test_empty_file(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(BundleError, match=r"empty.jsonl: the file is empty"):
        load(bundle_files, synthetic=empty)


def test_csv_with_header_only(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    header = tmp_path / "header.csv"
    header.write_text("record_id,text\n")
    with pytest.raises(BundleError, match=r"header.csv: the file holds no records"):
        load(bundle_files, synthetic=header)


def test_undecodable_bytes_name_line(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(BundleError, match=r"latin1.jsonl: line 2: bytes that are not UTF-8"):
        load(bundle_files, synthetic=bad)


def test_invalid_json_line(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"text": \n')
    with pytest.raises(BundleError, match=r"bad.jsonl: line 2: not valid JSON"):
        load(bundle_files, synthetic=bad)


def test_unsupported_extension_and_missing_file(
    tmp_path: Path, bundle_files: dict[str, Path]
) -> None:
    with pytest.raises(BundleError, match=r"unsupported file type '.txt'"):
        load(bundle_files, synthetic=tmp_path / "x.txt")
    with pytest.raises(BundleError, match=r"nope.jsonl: file not found"):
        load(bundle_files, synthetic=tmp_path / "nope.jsonl")


def test_duplicate_record_ids_across_files(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    holdout = write_jsonl(
        tmp_path / "dup.jsonl",
        [{"record_id": "t3", "user_id": "other", "text": "x"}],
    )
    with pytest.raises(
        BundleError, match=r"duplicate record_id 't3' at .*train.jsonl:4, .*dup.jsonl:1"
    ):
        load(bundle_files, holdout=holdout)


def test_duplicate_synthetic_ids(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    syn = write_jsonl(
        tmp_path / "s.jsonl", [{"record_id": "a", "text": "x"}, {"record_id": "a", "text": "y"}]
    )
    with pytest.raises(BundleError, match=r"duplicate record_id 'a' at .*s.jsonl:1, .*s.jsonl:2"):
        load(bundle_files, synthetic=syn)


def test_user_in_both_splits(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    holdout = write_jsonl(
        tmp_path / "h.jsonl",
        [
            {"record_id": "h0", "user_id": "ut5", "text": "x"},
            {"record_id": "h1", "user_id": "z", "text": "y"},
        ],
    )
    with pytest.raises(
        BundleError, match=r"user 'ut5' is in both train and holdout \(1 such users\)"
    ):
        load(bundle_files, holdout=holdout)


def test_synthetic_identical_to_source(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    copy = tmp_path / "copy.jsonl"
    shutil.copy(bundle_files["train"], copy)
    with pytest.raises(
        BundleError, match=r"copy.jsonl: the synthetic file is byte-identical to the train file"
    ):
        load(bundle_files, synthetic=copy)


def test_split_far_from_p_fails_or_warns(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    holdout = write_jsonl(tmp_path / "h.jsonl", [{"user_id": "solo", "text": "x"}])
    bundle = load(bundle_files, holdout=holdout)
    assert bundle.membership.balance_ok is False
    with pytest.raises(
        BundleError, match=r"the split is far from the declared p = 0.5: 20 of 21 users"
    ):
        split_warnings(bundle, MembershipPolicy())
    warn = MembershipPolicy(split_check=SplitCheck(action="warn"))
    warnings = split_warnings(bundle, warn)
    assert len(warnings) == 1 and "far from the declared p" in warnings[0]


def test_declared_p_matching_an_unbalanced_split_passes(
    tmp_path: Path, bundle_files: dict[str, Path]
) -> None:
    holdout = write_jsonl(
        tmp_path / "h.jsonl", [{"user_id": f"x{i}", "text": "x"} for i in range(5)]
    )
    bundle = load_bundle(
        membership=MembershipPolicy(p=0.8),
        train=bundle_files["train"],
        holdout=holdout,
        synthetic=bundle_files["synthetic"],
    )
    assert bundle.membership.balance.train_users == 20 and bundle.membership.balance_ok


def test_source_file_with_split_column(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    rows = [
        {"user_id": f"u{i}", "text": unique_text(i), "split": "train" if i % 2 else "holdout"}
        for i in range(10)
    ]
    source = write_jsonl(tmp_path / "src.jsonl", rows)
    bundle = load_bundle(membership=MEMBERSHIP, source=source, synthetic=bundle_files["synthetic"])
    assert bundle.is_train.sum() == 5
    assert bundle.source["record_id"].tolist()[:2] == ["1", "2"]


def test_source_file_needs_valid_split(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    no_split = write_jsonl(tmp_path / "a.jsonl", [{"text": "x"}])
    with pytest.raises(BundleError, match=r"a.jsonl: no 'split' column"):
        load_bundle(membership=MEMBERSHIP, source=no_split, synthetic=bundle_files["synthetic"])
    bad = write_jsonl(
        tmp_path / "b.jsonl", [{"text": "x", "split": "train"}, {"text": "y", "split": "public"}]
    )
    with pytest.raises(
        BundleError, match=r"b.jsonl: line 2: 'split' must be 'train' or 'holdout'; found 'public'"
    ):
        load_bundle(membership=MEMBERSHIP, source=bad, synthetic=bundle_files["synthetic"])


def test_source_and_train_are_exclusive(bundle_files: dict[str, Path]) -> None:
    with pytest.raises(BundleError, match="either --source or --train/--holdout"):
        load(bundle_files, source=bundle_files["train"])
    with pytest.raises(BundleError, match="--train is given without --holdout"):
        load_bundle(
            membership=MEMBERSHIP, train=bundle_files["train"], synthetic=bundle_files["synthetic"]
        )
    with pytest.raises(BundleError, match="source records are missing"):
        load_bundle(membership=MEMBERSHIP, synthetic=bundle_files["synthetic"])


def test_one_side_empty_is_rejected(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    rows = [{"user_id": f"u{i}", "text": "x", "split": "train"} for i in range(3)]
    source = write_jsonl(tmp_path / "src.jsonl", rows)
    with pytest.raises(BundleError, match="both sides need at least one user"):
        load_bundle(membership=MEMBERSHIP, source=source, synthetic=bundle_files["synthetic"])


def test_unknown_source_id(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    syn = write_jsonl(
        tmp_path / "s.jsonl", [{"text": "x", "source_id": "t1"}, {"text": "y", "source_id": "zz"}]
    )
    with pytest.raises(BundleError, match=r"s.jsonl: line 2: source_id 'zz' is not a record_id"):
        load(bundle_files, synthetic=syn)


def test_directories_and_uris_need_the_spark_engine(
    tmp_path: Path, bundle_files: dict[str, Path]
) -> None:
    (tmp_path / "release.parquet").mkdir()
    with pytest.raises(BundleError, match=r"release.parquet: is a directory.*--engine spark"):
        load(bundle_files, synthetic=tmp_path / "release.parquet")
    with pytest.raises(BundleError, match=r"^s3a://bucket/r.jsonl: is a URI.*--engine spark"):
        load(bundle_files, synthetic="s3a://bucket/r.jsonl")


def records_table(texts: list[str], files: list[str], order: list[int]) -> pa.Table:
    """An engine's read of a dataset: records with the file each came from and its id."""
    return pa.table(
        {
            "text": texts,
            "record_id": [f"r{i}" for i in range(len(texts))],
            FILE_PATH_COLUMN: files,
            ORDER_COLUMN: pa.array(order, pa.int64()),
        }
    )


def test_a_dataset_is_ordered_by_file_then_place_and_fingerprinted_by_its_records() -> None:
    texts = ["a b", "c d", "e f", "g h"]
    # part-1's records came first from the reader (its partition got the lower ids)
    shuffled = records_table(
        [texts[2], texts[3], texts[0], texts[1]],
        ["f:/d/part-1", "f:/d/part-1", "f:/d/part-0", "f:/d/part-0"],
        [0, 1, 8589934592, 8589934593],
    ).set_column(1, "record_id", pa.array(["r2", "r3", "r0", "r1"]))
    read = dataset_table("f:/d", shuffled, fmt="jsonl")
    assert read.frame["text"].tolist() == texts
    assert read.frame["record_id"].tolist() == ["r0", "r1", "r2", "r3"]
    assert read.frame["__line__"].tolist() == [1, 2, 3, 4]
    assert list(read.frame.columns) == ["record_id", "text", "__line__"]
    assert read.format == "jsonl dataset" and read.size_bytes > 0
    # the same records in one file: the same fingerprint; one changed record: another
    one_file = dataset_table(
        "g:/e", records_table(texts, ["g:/e/x"] * 4, [5, 6, 7, 9]), fmt="jsonl"
    )
    assert one_file.sha256 == read.sha256
    changed = dataset_table(
        "f:/d", records_table(["a b", "c d", "e f", "g H"], ["x"] * 4, [0, 1, 2, 3]), fmt="jsonl"
    )
    assert changed.sha256 != read.sha256


def test_a_dataset_with_unparsed_lines_or_no_records_is_refused() -> None:
    table = records_table(["a", "b", "c"], ["f:/d/p0", "f:/d/p1", "f:/d/p1"], [0, 1, 2])
    corrupt = table.append_column(
        CORRUPT_COLUMN, pa.array([None, None, '{"text": "c'], pa.string())
    )
    with pytest.raises(
        BundleError,
        match=r"^f:/d: 1 record\(s\) are not valid JSON objects, the first at "
        r"record 2 of f:/d/p1$",
    ):
        dataset_table("f:/d", corrupt, fmt="jsonl")
    clean = table.append_column(CORRUPT_COLUMN, pa.array([None] * 3, pa.string()))
    assert "_corrupt_record" not in dataset_table("f:/d", clean, fmt="jsonl").frame.columns
    with pytest.raises(BundleError, match="f:/d: the dataset holds no records"):
        dataset_table("f:/d", table.slice(0, 0), fmt="parquet")


def test_a_dataset_format_comes_from_its_suffix_or_its_files(tmp_path: Path) -> None:
    assert dataset_format("hdfs://nn/corpora/train.parquet/") == "parquet"
    assert dataset_format("s3a://bucket/release.jsonl") == "jsonl"
    parts = tmp_path / "holdout"
    parts.mkdir()
    for name in ("part-00000.json", "part-00001.json", "_SUCCESS", ".part-00000.json.crc"):
        (parts / name).write_text("")
    assert dataset_format(str(parts)) == "jsonl"
    (parts / "part-00002.parquet").write_text("")
    with pytest.raises(BundleError, match=r"holdout: cannot tell the dataset's format"):
        dataset_format(str(parts))
    with pytest.raises(BundleError, match=r"s3a://bucket/holdout: name the dataset's format"):
        dataset_format("s3a://bucket/holdout")
