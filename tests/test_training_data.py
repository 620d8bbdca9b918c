"""The generator's training data checked against the split (``--training-data``): a split
drawn after training, or a holdout that reached training, is refused."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pandas as pd
import pytest

from gate.cli import main
from gate.data.bundle import load_bundle
from gate.data.io import read_table
from gate.data.training_data import check_training_data
from gate.errors import BundleError
from gate.policy.models import MembershipPolicy, TextPolicy

from .conftest import check_args, read_report, unique_text, write_jsonl, write_policy

SOURCE = pd.DataFrame(
    {
        "user_id": ["a", "a", "b", "c", "d", "e"],
        "text": ["Thanks!", "a's note", "b's note", "Thanks!", "d's café note", "   "],
        "split": ["train", "train", "train", "holdout", "holdout", "holdout"],
    }
)


def _check(tmp_path: Path, rows: list[dict]):
    table = read_table(write_jsonl(tmp_path / "trained-on.jsonl", rows))
    return check_training_data(table, SOURCE, user_column="user_id", text=TextPolicy())


def test_counts_of_a_training_file_that_is_train(tmp_path: Path) -> None:
    found = _check(
        tmp_path,
        [{"text": "Thanks!"}, {"text": "a's note"}, {"text": "a public text"}],
    )
    # train's distinct texts: Thanks!, a's note, b's note; the holdout's that train lacks:
    # d's café note (Thanks! is train's too, the blank text is nobody's)
    assert (found.records, found.train_texts, found.train_texts_found) == (3, 3, 2)
    assert found.holdout_only_texts == 1
    assert (found.user_column, found.users, found.train_users_found) == (None, None, None)
    assert not found.saw_nothing_of_train()
    assert "none of the 1 holdout texts that train lacks, 2 of 3 train texts" in found.summary()


def test_a_holdout_text_that_train_also_holds_or_a_blank_one_is_no_evidence(
    tmp_path: Path,
) -> None:
    found = _check(tmp_path, [{"text": "Thanks!"}, {"text": "  "}, {"text": ""}])
    assert found.train_texts_found == 1


@pytest.mark.parametrize(
    "written",
    [
        "d's café note",
        "  d's café note\n",
        "d's\n\ncafé  note",
        unicodedata.normalize("NFD", "d's café note"),
    ],
)
def test_a_holdout_only_text_is_refused_at_its_line_without_its_value(
    tmp_path: Path, written: str
) -> None:
    rows = [{"text": "a's note"}, {"text": "other"}, {"text": written}]
    with pytest.raises(BundleError) as error:
        _check(tmp_path, rows)
    message = str(error.value)
    assert "trained-on.jsonl: line 3 holds the text of a holdout record" in message
    assert "(1 of the 1 such holdout texts" in message and "gate split" in message
    assert "note" not in message


def test_a_holdout_user_is_refused_at_its_line_without_the_id(tmp_path: Path) -> None:
    rows = [
        {"user_id": "a", "text": "a's other note"},
        {"user_id": "b", "text": "b's note"},
        {"user_id": "d", "text": "d wrote this after the split"},
    ]
    with pytest.raises(BundleError) as error:
        _check(tmp_path, rows)
    message = str(error.value)
    assert "line 3: the 'user_id' is a holdout user's (1 of the 3 holdout users" in message
    assert "'d'" not in message


def test_users_of_train_are_counted(tmp_path: Path) -> None:
    found = _check(tmp_path, [{"user_id": "a", "text": "x"}, {"user_id": "z", "text": "y"}])
    assert (found.user_column, found.users, found.train_users, found.train_users_found) == (
        "user_id",
        2,
        2,
        1,
    )
    assert found.train_texts_found == 0 and not found.saw_nothing_of_train()
    assert _check(tmp_path, [{"text": "y"}]).saw_nothing_of_train()


def _bundle(tmp_path: Path) -> dict[str, Path]:
    def rows(users: range) -> list[dict]:
        return [{"user_id": f"u{i}", "text": unique_text(i)} for i in users]

    files = {
        "train": write_jsonl(tmp_path / "train.jsonl", rows(range(0, 20))),
        "holdout": write_jsonl(tmp_path / "holdout.jsonl", rows(range(20, 40))),
        "synthetic": write_jsonl(
            tmp_path / "synthetic.jsonl", [{"text": unique_text(i)} for i in range(5)]
        ),
    }
    files["everything"] = write_jsonl(tmp_path / "everything.jsonl", rows(range(40)))
    return files


def test_load_bundle_records_the_check_in_membership_and_inputs(tmp_path: Path) -> None:
    files = _bundle(tmp_path)
    bundle = load_bundle(
        train=files["train"],
        holdout=files["holdout"],
        synthetic=files["synthetic"],
        membership=MembershipPolicy(),
        training_data=files["train"],
    )
    trained = bundle.membership.as_dict()["training_data"]
    assert trained["train_texts_found"] == 20 and trained["holdout_only_texts"] == 20
    assert trained["holdout_users_found"] == 0 and trained["train_users_found"] == 20
    assert bundle.fingerprints["training_data"].records == 20
    no_check = load_bundle(
        train=files["train"],
        holdout=files["holdout"],
        synthetic=files["synthetic"],
        membership=MembershipPolicy(),
    )
    assert no_check.membership.training_data is None and "training_data" not in (
        no_check.fingerprints
    )


def test_gate_check_refuses_training_data_that_holds_the_holdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _bundle(tmp_path)
    files["policy"] = write_policy(tmp_path / "policy.yaml")
    out = tmp_path / "out"
    args = check_args(files, out, "--no-mlflow", **{"training-data": str(files["everything"])})
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "everything.jsonl: line 21 holds the text of a holdout record" in err
    assert not (out / "report.json").exists()


def test_gate_check_reports_the_check_and_warns_of_a_file_that_holds_nothing_of_train(
    tmp_path: Path,
) -> None:
    files = _bundle(tmp_path)
    files["policy"] = write_policy(tmp_path / "policy.yaml")
    out = tmp_path / "out"
    args = check_args(files, out, "--no-mlflow", **{"training-data": str(files["train"])})
    assert main(args) in (0, 1)
    report = read_report(out)
    assert report["membership"]["training_data"]["train_texts_found"] == 20
    assert report["inputs"]["training_data"]["records"] == 20
    assert not any("training data" in w for w in report["warnings"])
    assert "Training data:" in (out / "report.html").read_text()

    unrelated = write_jsonl(tmp_path / "unrelated.jsonl", [{"text": "a public text"}])
    args = check_args(files, out, "--no-mlflow", **{"training-data": str(unrelated)})
    assert main(args) in (0, 1)
    warnings = read_report(out)["warnings"]
    assert any("holds no train record's text" in w for w in warnings), json.dumps(warnings)


def test_the_example_split_again_after_training_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review re-split the bundled example with seed 42 after its generator was trained
    on split/train.jsonl: the release passed. Given that training file, it is refused."""
    example = Path(__file__).parents[1] / "examples" / "bundle"
    resplit = tmp_path / "resplit"
    split = ["split", "--source", str(example / "source.jsonl"), "--seed", "42"]
    assert main([*split, "--out", str(resplit)]) == 0
    policy = write_policy(tmp_path / "policy.yaml")
    check = ["check", "--quiet", "--no-mlflow", "--policy", str(policy)]
    check += ["--manifest", str(resplit / "split-manifest.json")]
    check += ["--synthetic", str(example / "synthetic.jsonl"), "--out", str(tmp_path / "out")]
    capsys.readouterr()
    assert main([*check, "--training-data", str(example / "split" / "train.jsonl")]) == 2
    assert "(96 of the 216 such holdout texts" in capsys.readouterr().err
    assert not (tmp_path / "out" / "report.json").exists()
    assert main(check) == 0  # the release alone cannot show it
