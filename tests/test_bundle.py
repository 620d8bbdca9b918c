"""Release bundle loading and validation: every rejection names the file and line."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gate.api import split_warnings
from gate.data.bundle import Bundle, load_bundle
from gate.data.io import dataset_format, dataset_table
from gate.data.normalize import WHITE_SPACE
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
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"body": "x"}, {"body": "y"}])
    with pytest.raises(
        BundleError, match=r"bad.jsonl: no 'text' column; columns found: \['body'\]"
    ):
        load(bundle_files, train=bad)
    # a CSV file without a header row: its first record becomes the column names
    headless = tmp_path / "headless.csv"
    headless.write_text("u17,Jane Doe,555-0142,Zebulon\nr2,u2,x,bye\n")
    with pytest.raises(
        BundleError, match=r"columns found: \[\] and 4 more, not shown.*header"
    ) as e:
        load(bundle_files, train=headless)
    assert not {"u17", "Jane", "555", "Zebulon"} & set(str(e.value).replace("'", " ").split())
    named = tmp_path / "named.csv"
    named.write_text("user_id,comment\nx,y\n")  # the bundle's own names are quoted
    with pytest.raises(BundleError, match=r"\['user_id'\] and 1 more, not shown"):
        load(bundle_files, train=named)


def test_keys_that_may_be_data_are_not_quoted(
    tmp_path: Path, bundle_files: dict[str, Path]
) -> None:
    """A review: a JSON Lines file keyed by its values (an e-mail address per row) had
    every key, train and holdout users' addresses, printed in the error."""
    private = ["jill.rose@example.org", "Jane Doe", "+1 555 0142", "u-17.x"]
    keyed = write_jsonl(tmp_path / "keyed.jsonl", [{"body": "x", key: "hello"} for key in private])
    with pytest.raises(BundleError, match=r"\['body'\] and 4 more, not shown") as e:
        load(bundle_files, train=keyed)
    assert not any(part in str(e.value) for part in ("jill", "Jane", "555", "u-17"))
    # a field name that only one row of four holds is taken for data too
    rare = write_jsonl(
        tmp_path / "rare.jsonl",
        [{"body": "x", **({"jsmith": "hi"} if i == 0 else {})} for i in range(4)],
    )
    with pytest.raises(BundleError, match=r"\['body'\] and 1 more, not shown") as e:
        load(bundle_files, train=rare)
    assert "jsmith" not in str(e.value)
    table = pa.table({"jill.rose@example.org": ["hi", "ho"], "comment": ["x", "y"]})
    pq.write_table(table, tmp_path / "keyed.parquet")
    with pytest.raises(BundleError, match=r"\['comment'\] and 1 more, not shown") as e:
        load(bundle_files, train=tmp_path / "keyed.parquet")
    assert "jill" not in str(e.value)
    # a key of one row alone, as every key of a one-row file, is taken for data (a review)
    one = write_jsonl(tmp_path / "one.jsonl", [{"alice_smith": "I was diagnosed", "bob": "x"}])
    with pytest.raises(BundleError, match=r"\[\] and 2 more, not shown") as e:
        load(bundle_files, train=one)
    assert "alice" not in str(e.value) and "bob" not in str(e.value)
    wide = write_jsonl(tmp_path / "wide.jsonl", [{f"field_{i:02d}": "x" for i in range(25)}] * 2)
    with pytest.raises(BundleError, match=r"'field_19'\] and 5 more, not shown.*at most 20"):
        load(bundle_files, train=wide)


@pytest.mark.parametrize("name", ["TEXT", "Text", "text ", " user_id", "Record_ID"])
def test_a_column_named_as_the_bundles_but_for_case_is_refused(
    tmp_path: Path, bundle_files: dict[str, Path], name: str
) -> None:
    """A review: a release whose `text` was one harmless line and whose `TEXT` held train
    verbatim passed, in JSON Lines, CSV and Parquet; readers that ignore case take the
    two for one column."""
    rows = [{"text": "thank you", name: "a private record"}]
    frame = pd.DataFrame(rows)
    paths = [write_jsonl(tmp_path / "release.jsonl", rows), tmp_path / "release.parquet"]
    frame.to_parquet(paths[1])
    frame.to_csv(tmp_path / "release.csv", index=False)
    paths.append(tmp_path / "release.csv")
    known = name.strip().casefold()
    for path in paths:
        with pytest.raises(BundleError, match=rf"column '{name}' is the bundle's '{known}'"):
            load(bundle_files, synthetic=path)
    headerless = tmp_path / "train.csv"  # the message names the column, a CSV's "text "
    headerless.write_text("text ,user_id\nx,u\n")
    with pytest.raises(BundleError, match=r"column 'text ' is the bundle's 'text'"):
        load(bundle_files, train=headerless)


def test_null_text_names_line(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    """A JSON record without the key reads as one with ``null`` (a review: "found null"
    for a record that had no text said nothing of what was missing)."""
    for rows in ([{"text": "a"}, {"text": None}], [{"text": "a"}, {"body": "b"}]):
        bad = write_jsonl(tmp_path / "bad.jsonl", rows)
        with pytest.raises(
            BundleError,
            match=r"bad.jsonl: line 2: 'text' must be a string; found none \(no 'text' in "
            r"the record, or null\)",
        ):
            load(bundle_files, holdout=bad)
        bad.unlink()


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
    (tmp_path / "x.txt").write_text("text\n")
    with pytest.raises(BundleError, match=r"unsupported file type '.txt'"):
        load(bundle_files, synthetic=tmp_path / "x.txt")
    (tmp_path / "data").mkdir()
    with pytest.raises(BundleError, match=r"data: is a directory, expected a file"):
        load(bundle_files, synthetic=tmp_path / "data")
    listed = tmp_path / "listed.parquet"
    pd.DataFrame({"text": [["a", "b"]]}).to_parquet(listed)
    with pytest.raises(BundleError, match=r"line 1: 'text' must be a string; found a list"):
        load(bundle_files, synthetic=listed)
    with pytest.raises(BundleError, match=r"nope.jsonl: file not found"):
        load(bundle_files, synthetic=tmp_path / "nope.jsonl")


def test_duplicate_record_ids_across_files(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    holdout = write_jsonl(
        tmp_path / "dup.jsonl",
        [{"record_id": "t3", "user_id": "other", "text": "x"}],
    )
    with pytest.raises(
        BundleError,
        match=r"one record_id is used more than once, at .*train.jsonl:4, .*dup.jsonl:1",
    ) as err:
        load(bundle_files, holdout=holdout)
    assert "t3" not in str(err.value)  # ids may identify people: rows are named, not values


def test_duplicate_synthetic_ids(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    syn = write_jsonl(
        tmp_path / "s.jsonl", [{"record_id": "a", "text": "x"}, {"record_id": "a", "text": "y"}]
    )
    with pytest.raises(
        BundleError, match=r"one record_id is used more than once, at .*s.jsonl:1, .*s.jsonl:2"
    ):
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
        BundleError, match=r"a user is in both train and holdout \(1 such user\), at .*h.jsonl:1"
    ) as err:
        load(bundle_files, holdout=holdout)
    assert "ut5" not in str(err.value)


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
    assert len(warnings) == 2 and "far from the declared p" in warnings[1]
    assert warnings[0].startswith("the split is declared (train and holdout files without")


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
        BundleError, match=r"b.jsonl: line 2: 'split' must be 'train' or 'holdout', as written"
    ):
        load_bundle(membership=MEMBERSHIP, source=bad, synthetic=bundle_files["synthetic"])
    # as written: a pipeline that trains on split == "train" skips "Train" and " train"
    for value in ("Train", " train", "holdout\n", None):
        odd = write_jsonl(
            tmp_path / "o.jsonl", [{"text": "x", "split": "holdout"}, {"text": "y", "split": value}]
        )
        with pytest.raises(BundleError, match=r"o.jsonl: line 2: 'split' must be"):
            load_bundle(membership=MEMBERSHIP, source=odd, synthetic=bundle_files["synthetic"])
    # the value is never quoted: it may be a record's text shifted into the column
    shifted = tmp_path / "c.csv"
    shifted.write_text("text,split\nhello,train\nJohn Smith, Zebulon\n")
    with pytest.raises(BundleError, match=r"line 2: .*found another value") as err:
        load_bundle(membership=MEMBERSHIP, source=shifted, synthetic=bundle_files["synthetic"])
    assert "Zebulon" not in str(err.value)
    # a review: a record without the key was said to hold "another value"
    keyless = write_jsonl(tmp_path / "k.jsonl", [{"text": "x", "split": "train"}, {"text": "y"}])
    with pytest.raises(BundleError, match=r"k.jsonl: line 2: .*found none \(no 'split' in"):
        load_bundle(membership=MEMBERSHIP, source=keyless, synthetic=bundle_files["synthetic"])


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
    with pytest.raises(BundleError, match=r"s.jsonl: line 2: its source_id is not a record_id"):
        load(bundle_files, synthetic=syn)


def test_directories_and_uris_need_the_spark_engine(
    tmp_path: Path, bundle_files: dict[str, Path]
) -> None:
    (tmp_path / "release.parquet").mkdir()
    with pytest.raises(BundleError, match=r"release.parquet: is a directory.*--engine spark"):
        load(bundle_files, synthetic=tmp_path / "release.parquet")
    with pytest.raises(BundleError, match=r"^s3a://bucket/r.jsonl: is a URI.*--engine spark"):
        load(bundle_files, synthetic="s3a://bucket/r.jsonl")


def jsonl_bytes(*texts: str) -> bytes:
    return "".join(json.dumps({"text": t, "record_id": t}) + "\n" for t in texts).encode()


def parquet_bytes(*texts: str) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"text": list(texts), "record_id": list(texts)}), sink)
    return sink.getvalue()


def test_a_dataset_is_its_files_in_path_order_each_read_as_a_file() -> None:
    part0, part1 = jsonl_bytes("a b", "c d"), jsonl_bytes("e f")
    files = [("file:/d/x.jsonl/part-1.json", part1), ("file:/d/x.jsonl/part-0.json", part0)]
    read = dataset_table("/d/x.jsonl", files, fmt="jsonl")
    assert read.frame["text"].tolist() == ["a b", "c d", "e f"]
    assert read.frame["__line__"].tolist() == [1, 2, 3]
    assert (read.path, read.format, read.size_bytes) == (
        "/d/x.jsonl",
        "jsonl dataset",
        len(part0) + len(part1),
    )
    digests = hashlib.sha256(hashlib.sha256(part0).digest() + hashlib.sha256(part1).digest())
    assert read.sha256 == digests.hexdigest()
    moved = [("s3a://b/y/part-0.json", part0), ("s3a://b/y/part-1.json", part1)]
    assert dataset_table("s3a://b/y", moved, fmt="jsonl").sha256 == read.sha256
    edited = [("file:/d/part-0.json", part0), ("file:/d/part-1.json", jsonl_bytes("e F"))]
    assert dataset_table("/d", edited, fmt="jsonl").sha256 != read.sha256
    empty_part = [
        ("f:/p/part-0.parquet", parquet_bytes()),
        ("f:/p/part-1.parquet", parquet_bytes("g")),
    ]
    assert dataset_table("/p", empty_part, fmt="parquet").frame["text"].tolist() == ["g"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"text": "ok"}\n{"text": \n', r"part-1.json: line 2: not valid JSON"),
        (
            b'{"text": "ok"}\n[{"text": "a"}]\n',
            r"part-1.json: line 2: each line must be a JSON object",
        ),
        (
            b'{"text": "\\ud800"}\n',
            r"part-1.json: line 1: field 'text' holds an unpaired surrogate",
        ),
        (b'{"text": "caf\xe9"}\n', r"part-1.json: line 1: bytes that are not UTF-8"),
    ],
)
def test_each_file_of_a_dataset_gets_the_checks_of_a_file(raw: bytes, message: str) -> None:
    files = [("file:/d/part-0.json", jsonl_bytes("fine")), ("file:/d/part-1.json", raw)]
    with pytest.raises(BundleError, match=f"^file:/d/{message}"):
        dataset_table("/d", files, fmt="jsonl")


def test_a_dataset_of_other_files_partitions_or_nothing_is_refused() -> None:
    ok = ("file:/d/part-0.json", jsonl_bytes("fine"))
    with pytest.raises(BundleError, match=r"^file:/d/notes.csv: not a jsonl file, in the jsonl"):
        dataset_table("/d", [ok, ("file:/d/notes.csv", b"a,b\n")], fmt="jsonl")
    with pytest.raises(BundleError, match=r"part-1.json.gz: compressed data files are not read"):
        dataset_table("/d", [ok, ("file:/d/part-1.json.gz", b"")], fmt="jsonl")
    with pytest.raises(BundleError, match=r"user=u1/part-0.json: a key=value partition directory"):
        dataset_table("/d", [("file:/d/user=u1/part-0.json", jsonl_bytes("x"))], fmt="jsonl")
    nested = ("file:/x/d/user=u1/day/part-0.json", jsonl_bytes("x"))  # a level further down
    with pytest.raises(BundleError, match=r"user=u1/day/part-0.json: a key=value partition"):
        dataset_table("/x/d", [nested], fmt="jsonl")
    above = ("file:/runs/k=3/d/sub/part-0.json", jsonl_bytes("x"))  # '=' above the dataset
    assert len(dataset_table("/runs/k=3/d", [above], fmt="jsonl").frame) == 1
    with pytest.raises(BundleError, match=r"^/d: the dataset holds no data files$"):
        dataset_table("/d", [], fmt="parquet")
    with pytest.raises(BundleError, match=r"^/d: the dataset holds no records$"):
        dataset_table("/d", [("file:/d/part-0.json", b"\n")], fmt="jsonl")


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


def test_a_manifest_is_not_checked_against_a_dataset(tmp_path: Path) -> None:
    from gate.data.io import read_table

    split = Path(__file__).parents[1] / "examples" / "bundle" / "split"
    train = split / "train.jsonl"

    def read(path):  # an engine that reads the train file as a dataset of that one file
        if Path(path) != train:
            return read_table(path)
        return dataset_table(str(path), [(train.as_uri(), train.read_bytes())], fmt="jsonl")

    with pytest.raises(BundleError, match=r"split-manifest.json: a manifest names the files"):
        load_bundle(
            synthetic=None,
            membership=MembershipPolicy(p=0.5),
            manifest=split / "split-manifest.json",
            read=read,
        )


# ---------------------------------------------------------------- reading and normalising at scale


def test_a_jsonl_file_read_in_chunks_is_the_file_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records become columns a chunk at a time: with chunks of 1, 2, 3 and 10 records the
    frame is ``DataFrame.from_records`` of all the records (the former reader): the same
    columns in the same order, dtypes and values, whatever each chunk of a column holds
    (strings only, numbers with gaps, keys that appear late); the fingerprint is of the
    file's bytes and line numbers count blank lines."""
    import gate.data.io as gio

    rows = [
        {"record_id": "a", "user_id": 1, "text": "x", "label": True},
        {"record_id": "b", "user_id": "u2", "text": "y\u2028z"},
        {"record_id": "c", "user_id": 3.5, "text": 7, "extra": {"k": [1]}},
        {"record_id": "d", "user_id": None, "text": None, "label": False},
        {"record_id": "e", "text": "é", "late": "s"},
        {"user_id": 6, "text": "f", "n": 1},
        {"record_id": "g", "user_id": 7, "text": "g", "n": None, "late": "t"},
    ]
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    raw = ("\ufeff" + "\n".join(lines[:2]) + "\n\n  \n" + "\n".join(lines[2:])).encode()
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(raw)
    numbers = [1, 2, 5, 6, 7, 8, 9]
    former = pd.DataFrame.from_records(
        [{**r, "__line__": n} for r, n in zip(rows, numbers, strict=True)]
    )
    for rows_per_chunk in (1, 2, 3, 10):
        monkeypatch.setattr(gio, "_JSONL_CHUNK_ROWS", rows_per_chunk)
        table = gio.read_table(path)
        assert table.sha256 == hashlib.sha256(raw).hexdigest() and table.size_bytes == len(raw)
        frame = table.frame
        assert frame.columns.tolist() == former.columns.tolist()
        assert frame.dtypes.tolist() == former.dtypes.tolist(), rows_per_chunk
        for column in former.columns:
            assert [repr(v) for v in frame[column]] == [repr(v) for v in former[column]]
    strings = gio.read_table(tmp_path / "mixed.jsonl").frame["record_id"]
    assert isinstance(strings.array, pd.arrays.ArrowStringArray)


def test_parquet_strings_that_are_not_utf8_are_named_by_row_and_byte(tmp_path: Path) -> None:
    """A Parquet writer may store any bytes as a string (a review's file passed them to
    pandas, which failed with exit 3 and an error quoting the value): the column, the
    data row of the first such value and the bytes, never the text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gate.data.io import read_table

    raw = [b"ok", b"fine", b"", b"private name \xc3\x28 here"] + [b"x"] * 3000
    strings = pa.chunked_array(
        [pa.array(raw[:2], pa.binary()), pa.array(raw[2:], pa.binary())]
    ).cast(pa.binary())
    table = pa.table({"text": pa.chunked_array([c.view(pa.string()) for c in strings.chunks])})
    pq.write_table(table, tmp_path / "bad.parquet", row_group_size=2)
    with pytest.raises(
        BundleError,
        match=r"bad.parquet: data row 4: 'text' holds bytes that are not UTF-8 "
        r"at byte 13 of its value \(0xc3\); write its strings as UTF-8",
    ) as caught:
        read_table(tmp_path / "bad.parquet")
    assert "private" not in str(caught.value)
    nested = pa.array([[b"a"], [b"\xff"]], pa.list_(pa.binary())).view(pa.list_(pa.string()))
    pq.write_table(pa.table({"text": ["a", "b"], "tags": nested}), tmp_path / "nested.parquet")
    with pytest.raises(BundleError, match=r"a column holds bytes that are not UTF-8 \(in a list"):
        read_table(tmp_path / "nested.parquet")


def test_a_non_utf8_byte_is_named_by_its_line_and_file_offset(tmp_path: Path) -> None:
    from gate.data.io import read_table

    raw = b'{"text": "ok"}\n\n{"text": "caf\xe9"}\n'
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(raw)
    at = raw.index(b"\xe9")
    with pytest.raises(BundleError, match=rf"line 3: bytes that are not UTF-8 at offset {at} "):
        read_table(path)
    bom = b'\xef\xbb\xbf{"text": "\xff"}\n'
    (tmp_path / "bad-bom.jsonl").write_bytes(bom)
    at = bom.index(b"\xff")  # the offset in the file, the BOM counted
    with pytest.raises(BundleError, match=rf"line 1: bytes that are not UTF-8 at offset {at} "):
        read_table(tmp_path / "bad-bom.jsonl")
    csv = b"\xef\xbb\xbfrecord_id,text\nr1,caf\xe9\n"
    (tmp_path / "bad-bom.csv").write_bytes(csv)
    at = csv.index(b"\xe9")  # one decoder for every format: the CSV's offset counts the BOM too
    with pytest.raises(BundleError, match=rf"line 2: bytes that are not UTF-8 at offset {at} "):
        read_table(tmp_path / "bad-bom.csv")
    (tmp_path / "cut.jsonl").write_bytes(b'{"text": "a"}\n{"text": "b\n')
    with pytest.raises(BundleError, match=r"line 2: not valid JSON: Unterminated string"):
        read_table(tmp_path / "cut.jsonl")  # the line without its newline, as JSON Lines says
    (tmp_path / "blank.jsonl").write_bytes(b" \n\t\r\n")
    with pytest.raises(BundleError, match=r"blank.jsonl: the file is empty"):
        read_table(tmp_path / "blank.jsonl")
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf\n")
    with pytest.raises(BundleError, match=r"bom.jsonl: the file holds no records"):
        read_table(tmp_path / "bom.jsonl")


def _reference_normalize(texts: pd.Series, policy) -> pd.Series:
    """The former pandas implementation (Python's re and unicodedata on every text),
    after the display order (tests/test_bidi.py)."""
    import re

    from gate.data.bidi import displayed_text
    from gate.data.confusables import fold_confusables
    from gate.data.normalize import invisible_ranges

    if policy.display_order:
        texts = texts.map(displayed_text)

    pattern = "[" + "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in invisible_ranges()) + "]"
    if policy.strip_invisible:
        texts = texts.map(
            lambda t: re.sub("[\u2800\u115f\u1160\u3164\uffa0]", " ", re.sub(pattern, "", t))
        )
    if policy.strip_invisible and policy.normalization == "NFKC":  # forms holding a tatweel
        texts = texts.map(
            lambda t: (
                unicodedata.normalize("NFKD", t).replace("\u0640", "")
                if re.search("[\ufe71\ufe77\ufe79\ufe7b\ufe7d\ufe7f\ufcf2-\ufcf4]", t)
                else t
            )
        )
    if policy.fold_confusables:  # the fold itself: tests/test_confusables.py
        decompose = {"NFKC": "NFKD", "NFC": "NFD"}.get(policy.normalization)
        texts = texts.map(
            lambda t: fold_confusables(t, decompose=decompose, casefold=policy.casefold)
        )
    if policy.normalization != "none":
        texts = texts.map(lambda t: unicodedata.normalize(policy.normalization, t))
    if policy.casefold:
        texts = texts.map(str.casefold)
    return texts


def test_text_normalisation_is_python_s_on_every_kind_of_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ASCII texts are skipped, the others go through RE2 and unicodedata: the same texts
    as Python's re and unicodedata on each, for every policy, on random code points of
    every plane, invisible characters between letters and accents, full-width forms and
    Hangul jamo; the series' index and chunks do not matter."""
    import gate.data.normalize as normalize_module
    from gate.data.normalize import invisible_ranges, normalize_text
    from gate.policy.models import TextPolicy

    rng = np.random.default_rng(5)
    points = np.array([c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF])
    invisible = np.array([c for lo, hi in invisible_ranges() for c in range(lo, hi + 1)])
    tricky = np.concatenate(
        [
            np.arange(0xC0, 0x250),  # Latin with accents
            np.arange(0x300, 0x370),  # combining accents
            invisible[:64],
            np.arange(0xFF01, 0xFF5E),  # full-width ASCII
            np.arange(0x1100, 0x1120),  # Hangul jamo (compose into syllables)
            np.arange(0xAC00, 0xAC20),
            np.arange(0x400, 0x460),  # Cyrillic (lookalikes of Latin letters among them)
            np.arange(0x660, 0x66A),  # Arabic-Indic digits
            np.array([0x640, 0xFE71, 0xFE77, 0xFC5E]),  # tatweel, forms whose NFKC has one
            np.arange(0x2010, 0x2027),  # dashes, curly quotes, ellipsis
            np.array([0x41, 0x65, 0x20]),
            np.arange(0x00, 0x20),  # C0 controls (white space among them)
            np.arange(0x7F, 0xA0),  # DEL and the C1 controls
        ]
    )
    texts = []
    for i in range(4000):
        size = int(rng.integers(0, 25))
        source = [np.arange(32, 127), points, tricky][i % 3]
        texts.append("".join(map(chr, rng.choice(source, size))))
    texts += ["", "e\u200b\u0301", "\uff21\u0301", "A\u0300", "x\u3164y", "plain ascii"]
    texts += ["a\x01b\x00c\x7f", "tab\tand\nnew line\x1c\x1f", "e\x08\u0301"]
    series = pd.concat(
        [pd.Series(texts[:1000]), pd.Series(texts[1000:])], ignore_index=True
    )  # two Arrow chunks
    series.index += 7
    series.name = "text"
    for rows in (1 << 16, 7):  # texts per slice: many slices per Arrow chunk, or none
        monkeypatch.setattr(normalize_module, "_NORMALIZE_ROWS", rows)
        for form in ("NFKC", "NFC", "none"):
            for strip, fold in ((True, True), (True, False), (False, True), (False, False)):
                for casefold in (False, True):
                    policy = TextPolicy(
                        normalization=form,
                        strip_invisible=strip,
                        fold_confusables=fold,
                        casefold=casefold,
                    )
                    got = normalize_text(series, policy)
                    assert got.index.equals(series.index) and got.dtype == series.dtype
                    assert got.name == "text"
                    assert got.tolist() == _reference_normalize(series, policy).tolist(), policy
    assert normalize_text(pd.Series(["e\u200b\u0301"]), TextPolicy()).tolist() == ["\u00e9"]


def _joins(c: str) -> bool:
    """No letter, digit, mark or separator, and not RE2's ``\\s``: it joins words."""
    return unicodedata.category(c)[0] not in "LNMZ" and c not in "\t\n\f\r "


def _joiners_as_spaces(text: str, *, runs: bool) -> str:
    """RE2's left-to-right replacement of ``normalize._JOINER`` (the last joiner before a
    letter or digit, with the marks that follow it) or ``_JOINER_RUN`` (the whole run),
    by hand."""
    out, i = [], 0
    while i < len(text):
        j, last = i, i
        while j < len(text) and _joins(text[j]):
            last, j = j, j + 1
            while j < len(text) and unicodedata.category(text[j])[0] == "M":
                j += 1
        if j == i:
            out.append(text[i])
            i += 1
        elif j < len(text) and unicodedata.category(text[j])[0] in "LN":
            out += [text[i:last] if not runs else "", " ", text[j]]
            i = j + 1
        else:
            out.append(text[i:j])
            i = j
    return "".join(out)


def _other_readings_by_hand(text: str) -> tuple[str, str]:
    """Invisible characters as joiners, both readings, the invisible ones left removed."""
    from gate.data.normalize import invisible_ranges

    invisible = "".join(
        "\ue000" if any(lo <= ord(c) <= hi for lo, hi in invisible_ranges()) else c for c in text
    )
    last = _joiners_as_spaces(invisible, runs=False).replace("\ue000", "")
    return last, _joiners_as_spaces(invisible, runs=True).replace("\ue000", "")


def test_the_other_readings_read_what_joins_words_as_spaces() -> None:
    """A copy whose spaces were replaced by punctuation or invisible characters, one or a
    run of them, reads as the copy in one of the two readings: the last joiner of a run
    as a space (trailing punctuation stays) and the whole run; full-width and enclosed
    forms are normalised first. Texts a reading leaves alone are not read again; random
    texts agree with a hand-written replacement."""
    from gate.data.normalize import joined_words_readings, normalize_text
    from gate.policy.models import TextPolicy

    policy = TextPolicy()
    texts = pd.Series(
        [
            "John_Smith,_who_lives_at_12_Elm_St..Call",
            "plain text. Done",
            "a\u200bb\u2060c/d-e",
            "(see) $5 don\u2019t",
            "",
            "alpha__bravo alpha_\u200bbravo",
            "alpha\ufe00bravo alpha\uff3fbravo alpha_\u24d1ravo",
        ]
    )
    other = joined_words_readings(texts, normalize_text(texts, policy), policy)
    assert other.index.tolist() == [0, 2, 3, 5, 6, 0, 5]
    assert other.tolist() == [
        "John Smith, who lives at 12 Elm St. Call",
        "a b c d e",  # the first reading removes the invisible ones: "abc/d-e"
        " see)  5 don t",
        "alpha_ bravo alpha_ bravo",
        "alpha bravo alpha bravo alpha bravo",
        "John Smith who lives at 12 Elm St Call",
        "alpha bravo alpha bravo",
    ]
    rng = np.random.default_rng(3)
    points = np.concatenate(
        [np.arange(32, 127), [0x200B, 0x2060, 0x00AD, 0x0301, 0x00E9, 0x3000, 0x0661, 0x1]]
    )
    random_texts = pd.Series(
        ["".join(map(chr, rng.choice(points, int(rng.integers(0, 30))))) for _ in range(3000)]
    )
    plain = TextPolicy(normalization="none", strip_invisible=False, fold_confusables=False)
    read = normalize_text(random_texts, plain)
    other = joined_words_readings(random_texts, read, plain)
    expected = []
    for i, text in enumerate(random_texts):
        last, runs = _other_readings_by_hand(text)
        expected += [(i, last)] if last != text else []
        expected += [(-i - 1, runs)] if runs not in (text, last) else []
    expected.sort(key=lambda pair: (pair[0] < 0, abs(pair[0])))
    assert other.index.tolist() == [i if i >= 0 else -i - 1 for i, _ in expected]
    assert other.tolist() == [reading for _, reading in expected]
    assert len(other) > len(set(other.index))  # both readings of some texts


def test_deleted_spaces_are_restored_in_every_reading() -> None:
    """With the source's words, the first reading, the last joiner's and the whole run's
    are each read once more with deleted spaces restored, kept where they changed and
    indexed by their release row: ``Smith,whowas`` is ``Smith,who was`` and, its comma
    read as a space, ``Smith who was``; ``the__patientwas`` is spaced cleanly only by the
    whole run's reading (a review: a copy mixing ``__`` and deleted spaces passed).
    Capitals are split as lower case, and a mark no source text holds is a space; a text
    holding a mark is also read with its marks deleted."""
    from gate.data.deleted_spaces import SourceWords
    from gate.data.normalize import joined_words_readings, normalize_text
    from gate.policy.models import TextPolicy

    policy = TextPolicy()
    texts = pd.Series(
        [
            "plain words",
            "Smith,whowas here",
            "thepatient",
            "the__patientwas",
            "THEPATIENT",
            "the\u0334patient",
        ]
    )
    words = SourceWords.of(pd.Series(["Smith, who was here.", "the patient plain words"]))
    other = joined_words_readings(texts, normalize_text(texts, policy), policy, source_words=words)
    assert list(zip(other.index.tolist(), other.tolist(), strict=True)) == [
        (1, "Smith whowas here"),  # the last joiner's reading (the whole run's is the same)
        (3, "the_ patientwas"),
        (3, "the patientwas"),  # the whole run's
        (1, "Smith,who was here"),  # the first, restored
        (2, "the patient"),
        (3, "the__patient was"),
        (4, "THE PATIENT"),
        (5, "the patient"),
        (1, "Smith who was here"),  # the last joiner's, restored
        (3, "the_ patient was"),
        (3, "the patient was"),  # the whole run's, restored
        (5, "the patient"),  # the first, its marks deleted, restored
    ]


def test_capitals_the_fold_reads_otherwise_are_read_case_folded_first() -> None:
    """A review: the confusables fold reads a word only when each of its letters passes
    for an ASCII one, which Greek capitals do more often than small letters (``ΚΑΙ`` reads
    ``KAI``, ``και`` stays), so a copy in capitals matched nothing under a lower-casing
    tokenizer. Such a text is also read case-folded first, and its other readings are
    made from that reading too; texts the fold reads alike in both cases (ASCII, ``Café``,
    curly quotes) are not, nor is any text under ``casefold: true``."""
    from gate.data.deleted_spaces import SourceWords
    from gate.data.normalize import joined_words_readings, normalize_text
    from gate.policy.models import TextPolicy

    policy = TextPolicy()
    texts = pd.Series(["ΚΑΙ ΤΟ ΣΠΙΤΙ", "Café \u201cok\u201d", "ΚΑΙ_ΤΟ", "ΚΑΙΤΟ", "και το"])
    read = normalize_text(texts, policy)
    assert read.tolist() == ["KAI TO ΣΠΙΤΙ", 'Café "ok"', "KAI_TO", "KAITO", "και το"]
    words = SourceWords.of(pd.Series(["και το σπιτι", "Café ok kai to"]))
    other = joined_words_readings(texts, read, policy, source_words=words)
    assert list(zip(other.index.tolist(), other.tolist(), strict=True)) == [
        (1, 'Café  ok"'),  # the last joiner's reading
        (2, "KAI TO"),
        (3, "KAI TO"),  # the first, restored
        (0, "και το σπιτι"),  # case-folded first
        (2, "και_το"),
        (3, "καιτο"),
        (2, "και το"),  # ... and its last joiner's reading
        (3, "και το"),  # ... and its restoration
    ]
    folded = TextPolicy(casefold=True)
    assert joined_words_readings(texts, normalize_text(texts, folded), folded).tolist() == [
        'café  ok"',
        "και το",
    ]


def test_the_release_is_read_again_unless_the_policy_says_not(tmp_path: Path) -> None:
    from gate.policy.models import TextPolicy

    train = write_jsonl(tmp_path / "train.jsonl", [{"user_id": "a", "text": "one y"}])
    holdout = write_jsonl(tmp_path / "holdout.jsonl", [{"user_id": "b", "text": "two z"}])
    synthetic = write_jsonl(
        tmp_path / "synthetic.jsonl", [{"text": "one two"}, {"text": "one_two"}]
    )
    files = {"train": train, "holdout": holdout, "synthetic": synthetic}
    bundle = load_bundle(membership=MembershipPolicy(), **files)
    assert bundle.release_other_readings is not None
    assert bundle.release_other_readings.to_dict() == {1: "one two"}
    unread = load_bundle(
        membership=MembershipPolicy(), text=TextPolicy(read_joined_words=False), **files
    )
    assert unread.release_other_readings is None


# Unicode 15.1's Default_Ignorable_Code_Point (DerivedCoreProperties.txt), unassigned
# code points included
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip


BLANKS = (0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800)  # drawn as a space's blank


def test_every_default_ignorable_code_point_is_stripped_and_a_braille_blank_is_a_space() -> None:
    """A review hid verbatim copies behind U+180B (a Mongolian variation selector), one in
    every word, and behind U+0001 after every word's first letter; and joined whole
    records into one token with U+2800 (braille blank) and U+3164 (Hangul filler, which
    browsers draw as a space). Control characters that are not white space are invisible
    too; tab, line breaks and the other white-space controls stay."""
    import sys

    from gate.data.normalize import normalize_text
    from gate.policy.models import TextPolicy

    controls = [c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cc"]
    hidden = [c for c in controls if not chr(c).isspace()]
    assert len(hidden) == 65 - 10  # C0, DEL and C1 but \t \n \v \f \r, U+001C-U+001F, NEL
    ignorable = [c for lo, hi in DEFAULT_IGNORABLE for c in range(lo, hi + 1)]
    points = [c for c in ignorable if c not in BLANKS] + hidden
    texts = pd.Series(
        [f"alpha{chr(c)}beta" for c in points] + [f"alpha{chr(c)}beta" for c in BLANKS]
    )
    got = normalize_text(texts, TextPolicy()).tolist()
    # the right-to-left override is displayed too: it reverses what follows it
    expected = ["alphaateb" if c == 0x202E else "alphabeta" for c in points]
    assert got == expected + ["alpha beta"] * len(BLANKS)
    no_order = normalize_text(texts, TextPolicy(display_order=False)).tolist()
    assert no_order == ["alphabeta"] * len(points) + ["alpha beta"] * len(BLANKS)
    forms = [c for c in range(0x110000) if "\u0640" in unicodedata.normalize("NFKD", chr(c))]
    assert forms == [0x640, 0xFCF2, 0xFCF3, 0xFCF4, 0xFE71, 0xFE77, 0xFE79, 0xFE7B, 0xFE7D, 0xFE7F]
    # a lookalike copy with U+FE71 in each word folds as without it, once and for all
    hidden = pd.Series([" ".join(f"{w}\ufe71" for w in ["Јill", "Rоsе", "cаllеd"])])
    once = normalize_text(hidden, TextPolicy())
    assert once.tolist() == ["Jill\u064b Rose\u064b called\u064b"]
    assert normalize_text(once, TextPolicy()).tolist() == once.tolist()
    assert normalize_text(pd.Series(["\u0628\u0651\ufe77"]), TextPolicy()).tolist() == [
        unicodedata.normalize("NFKC", "\u0628\u0651\u064e")
    ]
    tatweel = normalize_text(
        pd.Series(["\u0643\u0640\u0640\u062a\u0627\u0628 word\u0640"]), TextPolicy()
    )
    assert tatweel.tolist() == ["\u0643\u062a\u0627\u0628 word"]  # stretched: the same word
    kept = normalize_text(pd.Series(["a\x01b"]), TextPolicy(strip_invisible=False)).tolist()
    assert kept == ["a\x01b"]  # the policy's choice
    # a copy with U+180B in every word reads as the copy
    copy = " ".join(f"{w[:2]}\u180b{w[2:]}" for w in ["the", "patient", "called", "about", "her"])
    assert normalize_text(pd.Series([copy]), TextPolicy()).tolist() == [
        "the patient called about her"
    ]


def test_a_side_is_blank_exactly_when_python_s_strip_empties_every_text(
    tmp_path: Path, bundle_files: dict[str, Path]
) -> None:
    """Every character str.isspace() knows (U+001C-U+001F and U+0085 among them) is white
    space; a no-break space is too, and one visible character anywhere is not blank."""
    import sys

    spaces = "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())
    assert spaces == WHITE_SPACE  # the gate's constant (a Python with newer Unicode may add)
    blank = write_jsonl(
        tmp_path / "blank.jsonl",
        [{"user_id": f"b{i}", "text": spaces[i % len(spaces) :] + "\u00a0"} for i in range(20)],
    )
    with pytest.raises(BundleError, match="all 20 holdout records are empty or white space"):
        load(bundle_files, holdout=blank)
    rows = [{"user_id": f"b{i}", "text": spaces} for i in range(19)]
    one = write_jsonl(tmp_path / "one.jsonl", [*rows, {"user_id": "b19", "text": spaces + "·"}])
    assert len(load(bundle_files, holdout=one).holdout) == 20


def test_a_bad_release_is_a_release_error_and_bad_source_is_not(
    tmp_path: Path, bundle_files: dict[str, Path]
) -> None:
    """``gate remediate`` blames its generator for a ReleaseError only: a blank release or
    one naming unknown source records is one; a bad train file is bad input of its own."""
    from gate.data.bundle import load_bundle
    from gate.errors import ReleaseError
    from gate.policy.models import MembershipPolicy

    def load(**files: Path) -> None:
        paths = {k: bundle_files[k] for k in ("train", "holdout", "synthetic")} | files
        load_bundle(membership=MembershipPolicy(), **paths)

    blank = tmp_path / "blank.jsonl"
    blank.write_text('{"text": " "}\n')
    with pytest.raises(ReleaseError, match=r"blank\.jsonl"):
        load(synthetic=blank)
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text('{"text": "hello there", "source_id": "no-such-record"}\n')
    with pytest.raises(ReleaseError, match=r"unknown\.jsonl"):
        load(synthetic=unknown)
    bad_train = tmp_path / "train.jsonl"
    bad_train.write_text('{"user_id": "u1"}\n')
    with pytest.raises(BundleError, match=r"train\.jsonl") as raised:
        load(train=bad_train)
    assert not isinstance(raised.value, ReleaseError)


# ---------------------------------------------------------------- review of 2026-11-28:
# inputs on which a verbatim copy had passed


def test_a_user_id_written_as_a_float_is_the_integer(tmp_path: Path) -> None:
    """One `7.0` in a JSON column of integers made the whole column floating-point, so
    every id read "N.0" and none met train's "N": 54 users in both sides passed."""
    train = write_jsonl(
        tmp_path / "t.jsonl", [{"user_id": i, "text": unique_text(i)} for i in range(6)]
    )
    holdout = write_jsonl(
        tmp_path / "h.jsonl",
        [{"user_id": 7.0 if i == 7 else i, "text": unique_text(i)} for i in range(3, 9)],
    )
    synthetic = write_jsonl(tmp_path / "s.jsonl", [{"text": unique_text(1)}])
    with pytest.raises(BundleError, match=r"a user is in both train and holdout \(3 such"):
        load_bundle(membership=MEMBERSHIP, train=train, holdout=holdout, synthetic=synthetic)


@pytest.mark.parametrize(
    ("value", "found"),
    [
        (2.5, "a number that is no exact integer"),
        (2.0**60, "a number that is no exact integer"),
        (True, "a boolean"),
        ([1], "a list"),
        ({"a": 1}, "an object"),
    ],
)
def test_an_id_must_be_a_string_or_an_integer(
    tmp_path: Path, bundle_files: dict[str, Path], value: object, found: str
) -> None:
    rows = [{"user_id": 1, "text": "a"}, {"user_id": value, "text": "b"}]
    train = write_jsonl(tmp_path / "t.jsonl", rows)
    with pytest.raises(BundleError, match=rf"t.jsonl: line 2: 'user_id' must be .*; found {found}"):
        load(bundle_files, train=train)


def test_an_id_with_white_space_around_it_is_refused(
    tmp_path: Path, bundle_files: dict[str, Path]
) -> None:
    rows = [{"user_id": "u1", "text": "a"}, {"user_id": "u1 ", "text": "b"}]
    train = write_jsonl(tmp_path / "t.jsonl", rows)
    with pytest.raises(BundleError, match=r"t.jsonl: line 2: 'user_id' has white space"):
        load(bundle_files, train=train)


@pytest.mark.parametrize(
    ("csv_text", "message"),
    [
        (
            "record_id,text\nc0,copied text,batch 0\n",
            "data row 1: 3 fields where the header names 2",
        ),
        ("record_id,text\nc0,fine\nc1\n", "data row 2: 1 field where the header names 2"),
        ("record_id,text,text\nc0,a,b\n", "header: 'text' is named twice"),
        ("record_id,text,\nc0,copied,text\n", "data row 1: column 3 has no name in the header"),
    ],
)
def test_a_csv_row_has_the_headers_fields(
    tmp_path: Path, bundle_files: dict[str, Path], csv_text: str, message: str
) -> None:
    """pandas had read one more field per row as the index (the copied texts of the first
    column were read from the last: PASS), one fewer as an empty text, and renamed a
    second `text` column."""
    release = tmp_path / "release.csv"
    release.write_text(csv_text)
    with pytest.raises(BundleError, match=re.escape(f"release.csv: {message}")) as err:
        load(bundle_files, synthetic=release)
    assert "copied" not in str(err.value)


def test_a_csv_keeps_ids_and_texts_as_written(
    tmp_path: Path, bundle_files: dict[str, Path]
) -> None:
    release = tmp_path / "release.csv"
    release.write_text('record_id,text\n007,"two\nlines, one comma"\n\n008,""\n009,x\n')
    bundle = load(bundle_files, synthetic=release)
    assert bundle.synthetic["record_id"].tolist() == ["007", "008", "009"]
    assert bundle.synthetic["text"].tolist() == ["two\nlines, one comma", "", "x"]


def test_a_key_written_twice_in_a_json_object_is_refused(
    tmp_path: Path, bundle_files: dict[str, Path]
) -> None:
    """Python keeps the last value, other readers the first: the gate read a filler while
    users of the release would read a copied record."""
    release = tmp_path / "release.jsonl"
    release.write_text('{"text": "copied", "text": "filler"}\n')
    with pytest.raises(BundleError, match=r"release.jsonl: line 1: 'text' appears twice"):
        load(bundle_files, synthetic=release)


@pytest.mark.parametrize(
    "line",
    ['{"text": "a", "meta": ["\\ud800"]}', '{"text": "a", "\\udc00": 1}'],
)
def test_a_lone_surrogate_anywhere_in_a_record_is_bad_input(
    tmp_path: Path, bundle_files: dict[str, Path], line: str
) -> None:
    release = tmp_path / "release.jsonl"
    release.write_text(line + "\n")
    with pytest.raises(BundleError, match=r"release.jsonl: line 1: .* unpaired surrogate"):
        load(bundle_files, synthetic=release)


@pytest.mark.parametrize("column", ["__file__", "__line__"])
def test_the_gates_own_columns_are_refused_in_input(
    tmp_path: Path, bundle_files: dict[str, Path], column: str
) -> None:
    """A `__file__` field had replaced the file named in later errors."""
    release = write_jsonl(tmp_path / "release.jsonl", [{"text": "a", column: "/etc/other"}])
    with pytest.raises(BundleError, match=r"release.jsonl: line 1: the fields __line__ and"):
        load(bundle_files, synthetic=release)
    frame = pd.DataFrame({"text": ["a"], column: ["x"]})
    frame.to_parquet(tmp_path / "release.parquet")
    with pytest.raises(BundleError, match=rf"release.parquet: the columns \['{column}'\]"):
        load(bundle_files, synthetic=tmp_path / "release.parquet")


def test_a_parquet_column_named_twice_is_named(
    tmp_path: Path, bundle_files: dict[str, Path]
) -> None:
    table = pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"])], names=["text", "text"])
    pq.write_table(table, tmp_path / "release.parquet")
    with pytest.raises(BundleError, match=r"release.parquet: 'text' is named twice"):
        load(bundle_files, synthetic=tmp_path / "release.parquet")


def test_train_and_holdout_must_be_two_files(bundle_files: dict[str, Path]) -> None:
    with pytest.raises(BundleError, match="the holdout file is byte-identical to the train"):
        load(bundle_files, holdout=bundle_files["train"])


def test_ids_from_dictionary_and_decimal_parquet_columns(
    tmp_path: Path, bundle_files: dict[str, Path]
) -> None:
    """A review of the id rules: a categorical or dictionary-encoded column (as pandas and
    pyarrow write them) crashed the loader, and a decimal(38, 0) column of a SQL export
    was refused; a float32 id at 2^24 may be another integer rounded."""
    import decimal

    texts = [unique_text(300 + i) for i in range(3)]
    ids = {
        "category": pd.Series(["u1", "u2", "u1"], dtype="category"),
        "dictionary": pa.array(["u1", "u2", "u1"]).dictionary_encode(),
        "decimal": pa.array([decimal.Decimal(n) for n in (1, 2, 1)], type=pa.decimal128(38, 0)),
    }
    expected = {"category": "u", "dictionary": "u", "decimal": ""}
    for name, column in ids.items():
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"text": texts, "user_id": column}), path)
        bundle = load(bundle_files, train=path)
        train = bundle.source[bundle.source["split"] == "train"]["user_id"].tolist()
        assert train == [f"{expected[name]}{n}" for n in (1, 2, 1)], name
    for column, line in (
        (pa.array([decimal.Decimal("1.5"), decimal.Decimal(2)], pa.decimal128(38, 1)), 1),
        (pa.array([1.0, 2.0**24], pa.float32()), 2),
    ):
        pq.write_table(pa.table({"text": texts[:2], "user_id": column}), tmp_path / "bad.parquet")
        with pytest.raises(BundleError, match=rf"line {line}: 'user_id' must be .* no exact"):
            load(bundle_files, train=tmp_path / "bad.parquet")


@pytest.mark.parametrize(
    ("raw", "rows"),
    [
        (b"text,user_id\rhello,u1\rbye,u2\r", [("hello", "u1"), ("bye", "u2")]),  # CR only
        (b"text,user_id,\nhello,u1,\nbye,u2,\n", [("hello", "u1"), ("bye", "u2")]),  # Excel
        (b'"text","user_id"\r\n"a ""b""",u1\r\n\r\n', [('a "b"', "u1")]),
    ],
)
def test_csv_files_pandas_read_are_read_alike(
    tmp_path: Path, bundle_files: dict[str, Path], raw: bytes, rows: list[tuple[str, str]]
) -> None:
    path = tmp_path / "train.csv"
    path.write_bytes(raw)
    bundle = load(bundle_files, train=path)
    train = bundle.source[bundle.source["split"] == "train"]
    assert list(zip(train["text"], train["user_id"], strict=True)) == rows


def test_a_csv_field_of_megabytes_is_read(tmp_path: Path, bundle_files: dict[str, Path]) -> None:
    """Arrow's default 1 MiB blocks refused a quoted field straddling two of them."""
    long = " ".join(unique_text(i) for i in range(30_000))
    assert len(long) > 2_000_000
    path = tmp_path / "train.csv"
    path.write_text(f'text,user_id\n"{long}",u1\nshort,u2\n')
    bundle = load(bundle_files, train=path)
    assert bundle.source["text"].str.len().max() == len(long)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"text,user_id,\nhello,u1,x\n", "data row 1: column 3 has no name in the header"),
        (b"text,user_id", "the file holds no records"),
    ],
)
def test_csv_files_that_are_refused_say_why(
    tmp_path: Path, bundle_files: dict[str, Path], raw: bytes, message: str
) -> None:
    path = tmp_path / "train.csv"
    path.write_bytes(raw)
    with pytest.raises(BundleError, match=re.escape(f"train.csv: {message}")):
        load(bundle_files, train=path)


def test_a_dataset_with_a_link_to_a_missing_file_is_refused(tmp_path: Path) -> None:
    """Spark's listing leaves such a file out without a word: the dataset is refused,
    also when the link is in a linked folder; names Spark does not list are skipped."""
    from gate.data.io import local_dataset_directory, local_listing, refuse_broken_links

    dataset, elsewhere = tmp_path / "train.jsonl", tmp_path / "elsewhere"
    dataset.mkdir()
    elsewhere.mkdir()
    (dataset / "part-00000.json").write_text('{"text": "kept"}\n')
    (dataset / "_temporary.json").symlink_to(tmp_path / "gone.json")
    (dataset / ".hidden").mkdir()
    (dataset / ".hidden" / "part-00009.json").symlink_to(tmp_path / "gone.json")
    refuse_broken_links("train.jsonl", dataset, local_listing(dataset))
    (dataset / "more").symlink_to(elsewhere)
    (elsewhere / "part-00001.json").symlink_to(tmp_path / "gone.json")
    with pytest.raises(BundleError, match=r"^train.jsonl: .*/more/part-00001.json is a symbolic"):
        refuse_broken_links("train.jsonl", dataset, local_listing(dataset))
    for named in (str(dataset), dataset.as_uri(), f"file://localhost{dataset}"):
        assert local_dataset_directory(named) == dataset
    assert local_dataset_directory("hdfs://cluster/train.jsonl") is None
    assert local_dataset_directory(str(dataset / "part-00000.json")) is None


def test_a_user_column_on_one_side_only_is_refused(tmp_path: Path, bundle_files) -> None:
    """A review: a train file without user_id beside a holdout with it made each train
    record a user of its own, and every user of the bundle was on both sides, accepted."""
    rows = [{"user_id": f"u{i}", "text": unique_text(i)} for i in range(20)]
    with_users = write_jsonl(tmp_path / "holdout.jsonl", rows[10:])
    without = write_jsonl(tmp_path / "train.jsonl", [{"text": r["text"]} for r in rows[:10]])
    for train, holdout in ((without, with_users), (with_users, without)):
        with pytest.raises(
            BundleError, match=r"train.jsonl: no 'user_id' column, which .*holdout.jsonl has"
        ):
            load_bundle(
                membership=MembershipPolicy(),
                train=train,
                holdout=holdout,
                synthetic=bundle_files["synthetic"],
            )
